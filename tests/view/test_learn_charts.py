"""The training charts (app/view/charts/learn.py): well-formed SVG whose lines map back to the numbers, the
log axis when the values span more than 100×, downsampling that keeps the first, last and smallest value,
nothing CSP would block, and why ÷√d_k's table and sentence read from app.lesson.goals.why_scale itself."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from markupsafe import Markup

from app.lesson.goals import why_scale
from app.view.charts.lab import SUPERSCRIPT
from app.view.charts.learn import (
    MAX_POINTS,
    downsample_indices,
    loss_curve_svg,
    short_number,
    wants_log_axis,
    why_scale_context,
    why_scale_reading,
    why_scale_svg,
)

ROOT = Path(__file__).resolve().parents[2]
SVG = "{http://www.w3.org/2000/svg}"
NUMERIC_ATTRIBUTES = ("x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "r", "width", "height")


@pytest.fixture(scope="module")
def result() -> dict:
    return why_scale(200)


def parse(markup: Markup) -> ET.Element:
    """The chart as XML, after the checks every chart must pass: role, title, desc, nothing CSP blocks."""
    assert isinstance(markup, Markup)
    lowered = str(markup).lower()
    assert "style=" not in lowered and "<style" not in lowered and "<script" not in lowered
    svg = ET.fromstring(str(markup))
    assert not [name for el in svg.iter() for name in el.attrib if name.lower().startswith("on")], "event handler"
    assert svg.tag == f"{SVG}svg" and svg.get("role") == "img"
    title, desc = svg.find(f"{SVG}title"), svg.find(f"{SVG}desc")
    assert title is not None and (title.text or "").strip()
    assert desc is not None and (desc.text or "").strip()
    assert set((svg.get("aria-labelledby") or "").split()) == {title.get("id"), desc.get("id")}
    for el in svg.iter():  # no NaN or ∞ reached a coordinate
        for name in NUMERIC_ATTRIBUTES:
            if el.get(name) is not None:
                assert math.isfinite(float(el.get(name))), (el.tag, name, el.get(name))
        for pair in (el.get("points") or "").split():
            assert all(math.isfinite(float(c)) for c in pair.split(",")), pair
    return svg


def desc(svg: ET.Element) -> str:
    return svg.find(f"{SVG}desc").text or ""


def texts(svg: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in svg.iter(f"{SVG}text")]  # d_k is d and a lowered k (<tspan>)


def polylines(svg: ET.Element) -> dict[str, list[tuple[float, float]]]:
    """Each polyline's points by its last class (loss, scaled, unscaled), in order."""
    return {
        p.get("class").split()[-1]: [tuple(float(c) for c in pair.split(",")) for pair in p.get("points").split()]
        for p in svg.iter(f"{SVG}polyline")
    }


def assert_affine(xs: list[float], ys: list[float], tol: float = 0.02) -> float:
    """ys = a + b·xs to within the SVG's rounding of coordinates (two decimals); returns b."""
    b, a = np.polyfit(xs, ys, 1)
    assert np.max(np.abs(np.asarray(ys) - (a + b * np.asarray(xs)))) < tol
    return float(b)


# --- one loss curve -----------------------------------------------------------------------------------

def test_loss_curve_points_map_back_to_the_losses() -> None:
    losses = [2.0, 1.6, 1.7, 1.1, 0.9, 0.95, 0.6, 0.5, 0.52, 0.4, 0.41]  # within 100×: a linear axis
    svg = parse(loss_curve_svg(losses, chart_id="curve"))
    (points,) = polylines(svg).values()
    assert len(points) == len(losses)
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    assert_affine(list(range(len(losses))), xs)  # one step, one equal stride
    assert assert_affine(losses, ys) < 0  # y is linear in the loss, and a higher loss is higher up
    assert sorted(range(len(losses)), key=lambda i: ys[i]) == sorted(range(len(losses)), key=lambda i: -losses[i])
    (dot,) = svg.iter(f"{SVG}circle")
    assert (float(dot.get("cx")), float(dot.get("cy"))) == points[-1]  # the marker sits on the last point
    assert short_number(losses[-1]) == "0.410" and "0.410" in texts(svg)
    assert "loss" in texts(svg) and "step" in texts(svg)
    assert "log scale" not in " ".join(texts(svg))


def test_loss_curve_desc_states_the_steps_and_the_first_last_and_smallest_loss(result: dict) -> None:
    losses = result["unscaled"]["losses"]
    svg = parse(loss_curve_svg(losses, chart_id="unscaled-loss", title="Loss without ÷√d_k"))
    text = desc(svg)
    low = int(np.argmin(losses))
    assert "0 to 200 (200 steps)" in text
    assert f"first {short_number(losses[0])}" in text and "first 0.872" in text
    assert f"last {short_number(losses[-1])}" in text and "last 0.711" in text
    assert f"minimum {short_number(losses[low])} at step {low}" in text
    assert svg.find(f"{SVG}title").text == "Loss without ÷√d_k"
    assert "0.711" in texts(svg)  # the last value, written at the line's end


def test_log_axis_when_the_losses_span_more_than_100x(result: dict) -> None:
    losses = result["scaled"]["losses"]  # 0.824 → 0.0019
    assert wants_log_axis(losses)
    svg = parse(loss_curve_svg(losses, chart_id="scaled-loss"))
    assert "loss (log scale)" in texts(svg) and "log scale" in desc(svg)
    (points,) = polylines(svg).values()
    assert len(points) == len(losses)
    assert assert_affine([math.log10(v) for v in losses], [p[1] for p in points]) < 0
    assert {"10⁻¹", "10⁻²", "10⁻³"} <= set(texts(svg))


@pytest.mark.parametrize(
    ("values", "log"),
    [
        ([1.0, 0.0101], False),  # 99×
        ([1.0, 0.0099], True),  # 101×
        ([100.0, 0.0], False),  # a zero has no logarithm
        ([3.0, -1.0, 1e6], False),  # nor has a negative number
        ([5.0, float("nan"), 0.01], True),  # a value that is not finite is left out
        ([2.0], False),
    ],
)
def test_wants_log_axis(values: list[float], log: bool) -> None:
    assert wants_log_axis(values) is log


def test_downsampling_keeps_first_last_and_the_minimum() -> None:
    rng = np.random.default_rng(7)
    losses = np.exp(-np.arange(5000) / 1500) + 0.05 * rng.random(5000)  # (5000,) noisy, never below 0.04
    losses[2345] = 0.001  # the minimum, inside a stretch
    losses[777] = 9.0  # a spike
    keep = downsample_indices(losses)
    assert len(keep) <= MAX_POINTS and keep == sorted(set(keep))
    assert {0, 4999, 2345, 777} <= set(keep)
    svg = parse(loss_curve_svg(losses.tolist(), chart_id="long"))
    (points,) = polylines(svg).values()
    assert len(points) == len(keep)
    assert points[0][0] == min(p[0] for p in points) and points[-1][0] == max(p[0] for p in points)
    lowest = max(points, key=lambda p: p[1])  # the largest y is the smallest loss
    assert points.index(lowest) == keep.index(2345)
    assert "minimum 0.0010 at step 2,345" in desc(svg) and "0 to 4,999" in desc(svg)
    assert len(str(loss_curve_svg(losses.tolist(), chart_id="long"))) < 12_000  # not 5000 points


def test_a_short_series_is_not_downsampled() -> None:
    assert downsample_indices([3.0, 2.0, 1.0]) == [0, 1, 2]
    assert downsample_indices([3.0, float("inf"), 1.0]) == [0, 2]


@pytest.mark.parametrize(
    "losses",
    [[1.5], [0.0], [2.0] * 30, [0.0] * 30, [-1.0, -1.0], [1.0, float("nan"), 0.5, float("inf")], [1e-12, 1e12]],
    ids=["one value", "one zero", "constant", "all zero", "negative constant", "not finite", "huge range"],
)
def test_degenerate_series_draw_without_nan(losses: list[float]) -> None:
    markup = loss_curve_svg(losses, chart_id="odd")
    svg = parse(markup)  # checks every coordinate is finite
    assert not re.search(r"\bnan\b|\binf", str(markup), re.I)
    assert len(list(svg.iter(f"{SVG}circle"))) == 1  # the last finite point is marked
    finite = [v for v in losses if math.isfinite(v)]
    assert short_number(finite[-1]) in texts(svg)
    if len(losses) == 1:
        assert not polylines(svg)  # one point is a dot, not a line
        assert "0 to 0 (0 steps)" in desc(svg)
    if not all(math.isfinite(v) for v in losses):
        assert "2 values are not finite and not drawn" in desc(svg)


@pytest.mark.parametrize("losses", [[], [float("nan")], [[1.0, 2.0]]])
def test_loss_curve_needs_a_finite_value(losses: list) -> None:
    with pytest.raises(ValueError, match="finite"):
        loss_curve_svg(losses, chart_id="none")


def test_chart_text_is_escaped() -> None:
    evil = '<script>alert(1)</script>"'
    markup = loss_curve_svg([1.0, 0.5], chart_id="x", title=evil)
    assert "<script" not in markup and "&lt;script&gt;" in markup
    assert parse(markup).find(f"{SVG}title").text == evil


@pytest.mark.parametrize("chart_id", ['x" onload="alert(1)', "two words", "", "1st"])
def test_chart_id_must_be_an_id(chart_id: str) -> None:
    with pytest.raises(ValueError, match="chart_id"):
        loss_curve_svg([1.0, 0.5], chart_id=chart_id)


@pytest.mark.parametrize(
    ("v", "text"),
    [(1.0406903, "1.041"), (0.0297, "0.030"), (0.0023478, "0.0023"), (0.00049035, "0.00049"), (0.00016468, "0.00016"),
     (5.7337e-05, "5.7 × 10⁻⁵"), (9.96e-5, "1.0 × 10⁻⁴"), (12345.0, "1.2 × 10⁴"), (123.4, "123"), (12.34, "12.3"),
     (-0.5, "−0.500"), (0.0, "0")],
)
def test_short_number(v: float, text: str) -> None:
    assert short_number(v) == text


# --- why ÷√d_k ------------------------------------------------------------------------------------------

def panels(svg: ET.Element) -> dict[str, ET.Element]:
    return {g.get("class").split()[-1]: g for g in svg.iter(f"{SVG}g") if "panel" in g.get("class").split()}


def test_why_scale_svg_draws_both_runs_in_both_charts(result: dict) -> None:
    svg = parse(why_scale_svg(result))
    assert "200 SGD steps" in svg.find(f"{SVG}title").text and "d_k = 64" in svg.find(f"{SVG}title").text
    charts = panels(svg)
    assert set(charts) == {"losses", "grad-scores-norm"}
    for key, chart in zip(("losses", "grad_scores_norm"), (charts["losses"], charts["grad-scores-norm"]), strict=True):
        lines = polylines(chart)
        assert set(lines) == {"scaled", "unscaled"}
        labels = texts(chart)
        assert labels.count("÷√dk") == 1 and labels.count("no ÷√dk") == 1  # each line named at its end
        for run in ("scaled", "unscaled"):
            values = result[run][key]
            assert len(lines[run]) == len(values)
            assert short_number(values[-1]) in labels
            ys = [p[1] for p in lines[run]]
            if key == "losses":
                assert assert_affine(values, ys) < 0
            else:  # ‖∂L/∂scores‖ on a log axis
                assert assert_affine([math.log10(v) for v in values], ys) < 0
    assert "‖∂L/∂scores‖ (log scale)" in texts(charts["grad-scores-norm"])
    assert "loss" in texts(charts["losses"])


def test_why_scale_desc_states_start_and_end_of_both_runs(result: dict) -> None:
    text = desc(parse(why_scale_svg(result)))
    for run, word in (("scaled", "with"), ("unscaled", "without")):
        for key in ("losses", "grad_scores_norm"):
            values = result[run][key]
            assert f"{word} ÷√d_k from {short_number(values[0])} to {short_number(values[-1])}" in text
    assert "with ÷√d_k from 0.824 to 0.0019" in text and "without ÷√d_k from 0.872 to 0.711" in text


def test_unscaled_is_dashed_and_scaled_solid() -> None:
    css = (ROOT / "static" / "learn.css").read_text()
    unscaled = re.search(r"\.series\.unscaled\s*\{([^}]*)\}", css)
    scaled = re.search(r"\.series\.scaled\s*\{([^}]*)\}", css)
    assert unscaled and "stroke-dasharray" in unscaled.group(1)
    assert scaled and "stroke-dasharray" not in scaled.group(1)


def test_every_chart_class_is_styled(result: dict) -> None:
    css = (ROOT / "static" / "learn.css").read_text()
    svgs = [parse(why_scale_svg(result)), parse(loss_curve_svg([1.0, 0.2], chart_id="a")),
            parse(loss_curve_svg([1.0, 1e-4], chart_id="b"))]
    classes = {c for svg in svgs for el in svg.iter() for c in (el.get("class") or "").split()}
    missing = {c for c in classes - {"chart", "panel", "losses", "grad-scores-norm"}
               if not re.search(rf"\.{re.escape(c)}\b", css)}
    assert not missing, missing


def test_why_scale_context_numbers_are_why_scales(result: dict) -> None:
    context = why_scale_context()
    assert context is why_scale_context()  # computed once
    assert context["steps"] == 200 and context["d_k"] == 64
    assert context["loss_steps"] == (0, 10, 50, 200) and context["grad_steps"] == (0, 10, 200)
    assert str(context["svg"]) == str(why_scale_svg(result))
    assert [row["run"] for row in context["rows"]] == ["scaled", "unscaled"]
    for row in context["rows"]:
        run = result[row["run"]]
        assert [c["step"] for c in row["losses"]] == [0, 10, 50, 200]
        assert [c["value"] for c in row["losses"]] == [run["losses"][s] for s in (0, 10, 50, 200)]
        assert [c["text"] for c in row["losses"]] == [short_number(run["losses"][s]) for s in (0, 10, 50, 200)]
        assert [c["value"] for c in row["grad_scores_norm"]] == [run["grad_scores_norm"][s] for s in (0, 10, 200)]
        assert row["max_weight_start_mean"]["value"] == pytest.approx(np.mean(run["max_weight_start"]), abs=1e-15)
    scaled, unscaled = context["rows"]
    assert [c["text"] for c in unscaled["losses"]] == ["0.872", "0.711", "0.711", "0.711"]  # README's table
    assert scaled["losses"][-1]["text"] == "0.0019" and unscaled["grad_scores_norm"][0]["text"] == "0.105"
    assert unscaled["max_weight_start_mean"]["value"] > 0.6 > 0.4 > scaled["max_weight_start_mean"]["value"]


def test_why_scale_context_is_read_only() -> None:
    context = why_scale_context()
    with pytest.raises(TypeError):
        context["reading"] = "changed"  # type: ignore[index]
    with pytest.raises(TypeError):
        context["rows"][0]["label"] = "changed"  # type: ignore[index]


SUPERSCRIPT_DIGITS = "".join(map(chr, SUPERSCRIPT.values()))  # ⁰¹…⁹⁻
NUMBER = re.compile(rf"\d[\d,]*(?:\.\d+)?(?: × 10[{SUPERSCRIPT_DIGITS}]+)?")


def test_reading_numbers_are_why_scales(result: dict) -> None:
    reading = why_scale_context()["reading"]
    assert reading == why_scale_reading(result)
    g = result["unscaled"]["grad_scores_norm"]
    scaled, unscaled = result["scaled"]["losses"], result["unscaled"]["losses"]
    found = NUMBER.findall(reading)
    assert found == ["10", found[1], short_number(g[0]), short_number(g[10]), "200", short_number(scaled[0]),
                     short_number(scaled[-1]), short_number(unscaled[-1])]
    assert float(found[1].replace(",", "")) == pytest.approx(g[0] / g[10], abs=0.5)  # the 200-fold fall
    assert f"is {found[1]}× smaller than at the start" in reading
    assert "the scaled run's loss falls from" in reading and "the unscaled one is still 0.711" in reading


def test_reading_follows_the_numbers_it_is_given() -> None:
    made_up = {
        "steps": 4,
        "scaled": {"losses": [1.0, 1.1, 1.2, 1.3, 1.5], "grad_scores_norm": [1.0] * 5},
        "unscaled": {"losses": [2.0, 1.0, 0.5, 0.2, 0.1], "grad_scores_norm": [0.01, 0.02, 0.03, 0.04, 0.05]},
    }
    reading = why_scale_reading(made_up)
    assert reading.startswith("After 4 steps the unscaled run's ‖∂L/∂scores‖ is 5.0× larger than at the start")
    assert "(0.010 → 0.050)" in reading and "by step 4" in reading
    assert "the scaled run's loss goes from 1.000 to 1.500" in reading and "the unscaled one is down to 0.10" in reading


def test_why_scale_context_for_a_few_steps() -> None:
    context = why_scale_context(5)
    assert context["loss_steps"] == (0, 5) and context["grad_steps"] == (0, 5)
    assert context["reading"].startswith("After 5 steps")
    parse(context["svg"])
