"""The training charts (app/view/charts/learn.py): well-formed SVG whose lines map back to the numbers, the
log axis when the values span more than 100×, downsampling that keeps the first, last and smallest value,
nothing CSP would block (why ÷√d_k's charts, table and sentences: tests/view/test_why_scale.py)."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from markupsafe import Markup

from app.lesson.goals import why_scale
from app.view.charts.learn import (
    MAX_POINTS,
    downsample_indices,
    loss_curve_svg,
    short_number,
    wants_log_axis,
)
from app.view.charts.why_scale import CHARTS, why_scale_chart

ROOT = Path(__file__).resolve().parents[2]
SVG = "{http://www.w3.org/2000/svg}"
NUMERIC_ATTRIBUTES = ("x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "r", "width", "height")


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


def test_loss_curve_desc_states_the_steps_and_the_first_last_and_smallest_loss() -> None:
    losses = [0.872, 0.906, *[0.711] * 48, 0.67, *[0.711] * 150]  # 201 values, the lowest at step 50
    svg = parse(loss_curve_svg(losses, chart_id="unscaled-loss", title="Loss without ÷√d_k"))
    text = desc(svg)
    low = int(np.argmin(losses))
    assert "0 to 200 (200 steps)" in text
    assert f"first {short_number(losses[0])}" in text and "first 0.872" in text
    assert f"last {short_number(losses[-1])}" in text and "last 0.711" in text
    assert f"minimum {short_number(losses[low])} at step {low}" in text
    assert svg.find(f"{SVG}title").text == "Loss without ÷√d_k"
    assert "0.711" in texts(svg)  # the last value, written at the line's end


def test_log_axis_when_the_losses_span_more_than_100x() -> None:
    losses = list(0.824 * np.exp(-np.linspace(0.0, math.log(0.824 / 0.0019), 201)))  # 0.824 → 0.0019
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


# --- styles ----------------------------------------------------------------------------------------------

def test_unscaled_is_dashed_and_scaled_solid() -> None:
    css = (ROOT / "static" / "learn.css").read_text()
    unscaled = re.search(r"\.series\.unscaled\s*\{([^}]*)\}", css)
    scaled = re.search(r"\.series\.scaled\s*\{([^}]*)\}", css)
    assert unscaled and "stroke-dasharray" in unscaled.group(1)
    assert scaled and "stroke-dasharray" not in scaled.group(1)


def test_every_chart_class_is_styled() -> None:
    css = (ROOT / "static" / "learn.css").read_text()
    svgs = [parse(why_scale_chart(why_scale(5), key, chart_id="w")) for key, _, _ in CHARTS]
    svgs += [parse(loss_curve_svg([1.0, 0.2], chart_id="a")), parse(loss_curve_svg([1.0, 1e-4], chart_id="b"))]
    classes = {c for svg in svgs for el in svg.iter() for c in (el.get("class") or "").split()}
    missing = {c for c in classes - {"chart"}
               if not re.search(rf"\.{re.escape(c)}\b", css)}
    assert not missing, missing
