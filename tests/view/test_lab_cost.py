"""The lab and cost partials rendered alone: well-formed SVG with role, title and desc, no inline style or
script, the current d_k and T marked, and the computed numbers in the tables."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from markupsafe import Markup

from app.maths.cost import attention_cost, cost_growth, crossover
from app.maths.lab import scaling_lab
from app.view.charts.lab import cost_growth_svg, score_spread_svg
from app.view.lab_cost import cost_context, lab_context, worded
from app.view.typeset import label_text
from app.web.respond import templates

ROOT = Path(__file__).resolve().parents[2]
SVG = "{http://www.w3.org/2000/svg}"
ENV = templates.env  # the page's own environment: its maths filters and globals
COST_SIZES = {"t": 12, "s": 12, "d_model": 64, "num_heads": 8, "d_k": 8, "d_v": 8, "d_ff": 256, "blocks": 2}


def render_lab(**kw: object) -> str:
    args = {"seed": 0, "temperature": 1.0, "scale": True, "d_k": 8, **kw}
    return ENV.get_template("partials/lab.html").render(lab=lab_context(**args))


def render_cost(**kw: object) -> str:
    args = {**COST_SIZES, **kw}
    return ENV.get_template("partials/cost.html").render(cost=cost_context(attention_cost(**args),
                                                                           scale=args.get("scale", True)))


def svgs(html: str) -> list[ET.Element]:
    found = re.findall(r"<svg\b.*?</svg>", html, re.S)
    assert found, "no <svg>"
    return [ET.fromstring(s) for s in found]


def check_svg(svg: ET.Element) -> None:
    assert svg.tag == f"{SVG}svg"
    assert svg.get("role") == "img"
    assert re.fullmatch(r"0 0 \d+ \d+", svg.get("viewBox") or "")
    title, desc = svg.find(f"{SVG}title"), svg.find(f"{SVG}desc")
    assert title is not None and (title.text or "").strip()
    assert desc is not None and (desc.text or "").strip()
    assert set((svg.get("aria-labelledby") or "").split()) == {title.get("id"), desc.get("id")}


def check_csp_safe(html: str) -> None:
    lowered = html.lower()
    assert "style=" not in lowered and "<style" not in lowered and "<script" not in lowered
    assert not re.search(r"\son[a-z]+\s*=", lowered), "inline event handler"


def table(html: str, cls: str) -> str:
    m = re.search(rf'<table class="num-table {cls}">.*?</table>', html, re.S)
    assert m, f"no table {cls}"
    return m.group(0)


def texts(svg: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in svg.iter(f"{SVG}text")]  # d_k is d and a lowered k (<tspan>)


# --- the lab ---------------------------------------------------------------------------------------


def test_lab_partial_is_well_formed_and_csp_safe() -> None:
    html = render_lab()
    check_csp_safe(html)
    root = ET.fromstring(html)  # the partial is XML-clean
    assert root.tag == "details" and root.get("id") == "lab-panel" and root.get("class") == "panel-extra"
    summary = root.find("summary")
    assert summary.text == "Scaling lab: why divide by " and summary.find("math").get("alttext") == "√d_k"
    for svg in svgs(html):
        check_svg(svg)
    for tbl in root.iter("table"):
        assert tbl.find("caption") is not None
        assert all(th.get("scope") in ("row", "col", "colgroup") for th in tbl.iter("th"))


def test_lab_marks_the_current_d_k_in_chart_and_tables() -> None:
    html = render_lab(d_k=8)
    (svg,) = svgs(html)
    current = [g for g in svg.iter(f"{SVG}g") if "current" in (g.get("class") or "").split()]
    assert len(current) == 1
    assert "dk = 8" in texts(current[0]) and "(current)" in texts(current[0])
    for cls in ("lab-spread", "lab-softmax"):
        rows = re.findall(r'<tr class="current">\s*<th scope="row">(\d+) <span class="tag">current', table(html, cls))
        assert rows == ["8"]


def test_lab_tables_hold_the_computed_numbers() -> None:
    html = render_lab(seed=3, d_k=16, temperature=0.5)
    lab = scaling_lab(seed=3, samples=4000, d_ks=(4, 16, 64, 256), n_keys=8, temperature=0.5)
    spread, soft = table(html, "lab-spread"), table(html, "lab-softmax")
    for r in lab.rows:
        assert f"<td>{r.unscaled.variance:.2f}</td>" in spread
        assert f"<td>{r.scaled.variance:.2f}</td>" in spread
        assert f'<td class="unscaled">{r.unscaled.softmax.max_weight:.3f}</td>' in soft
        assert f'<td class="scaled">{r.scaled.softmax.effective_keys:.2f}</td>' in soft
    assert "τ = 0.5" in html


def test_lab_shows_seed_003_examples_side_by_side() -> None:
    html = render_lab()
    examples = re.findall(r'<figure class="example example-(\w+)">(.*?)</figure>', html, re.S)
    assert [k for k, _ in examples] == ["unscaled", "scaled"]
    unscaled, scaled = (body for _, body in examples)
    for digits in ("2,981.0", "0.018", "403.4", "3,384.4", "0.881", "0.000", "0.119", "0.210"):
        assert f"{digits}" in unscaled, digits
    for digits in ("2.718", "0.607", "2.117", "5.442", "0.500", "0.111", "0.389", "0.463"):
        assert f"{digits}" in scaled, digits


def test_lab_says_which_column_the_run_follows() -> None:
    assert "like the <strong>scaled</strong> column" in render_lab(scale=True)
    off = render_lab(scale=False)
    assert "like the <strong>unscaled</strong> column" in off
    assert re.search(r'<th scope="colgroup" colspan="3" class="run">raw <math[^>]*alttext="q · k">.*?</math> '
                     r'<span class="tag">your run', off)


# --- the cost panel ---------------------------------------------------------------------------------


def test_cost_partial_is_well_formed_and_csp_safe() -> None:
    html = render_cost()
    check_csp_safe(html)
    root = ET.fromstring(html)
    assert root.tag == "details" and root.get("id") == "cost-panel"
    assert root.find("summary").text == "Cost: how attention grows with T"
    for svg in svgs(html):
        check_svg(svg)
    for tbl in root.iter("table"):
        assert tbl.find("caption") is not None
        assert all(th.get("scope") in ("row", "col", "colgroup") for th in tbl.iter("th"))


def test_cost_marks_current_t_and_crossover() -> None:
    html = render_cost(t=12, s=12)
    (svg,) = svgs(html)
    assert "current T = 12" in texts(svg)
    assert "crossover T = 384" in texts(svg)  # 2·64 + 2·64·256 / (8·16)
    assert len(list(svg.iter(f"{SVG}circle"))) == 1
    growth = table(html, "cost-growth")
    current = r'<tr class="current">\s*<th scope="row">([\d,]+) <span class="tag">current <math'
    assert re.findall(current, growth) == ["12"]
    assert re.findall(r'<tr class="crossover">\s*<th scope="row">([\d,]+) ', growth) == ["384"]


def test_cost_tables_hold_the_computed_numbers() -> None:
    html = render_cost()
    c = attention_cost(**COST_SIZES)
    stages, params = table(html, "cost-stages"), table(html, "cost-params")
    for st in c.stages:
        assert f'<th scope="row">{label_text(worded(st.name))}</th>' in stages  # its symbols typeset
        assert f"<td>{st.macs:,}</td>" in stages
    assert f"<td>{c.total_macs:,}</td>" in stages and f"<td>{c.total_elementwise:,}</td>" in stages
    assert f"<td>{c.total_params:,}</td>" in params and "× 2 blocks" in params
    growth = table(html, "cost-growth")
    g = cost_growth(d_model=64, num_heads=8, d_k=8, d_v=8, d_ff=256, blocks=2, ts=[1, 64, 1024])
    for q, li in zip(g.quadratic, g.linear, strict=True):
        assert f"<td>{q:,}</td>" in growth and f"<td>{li:,}</td>" in growth


def test_paper_sizes_render_the_paper_numbers() -> None:
    html = render_cost(t=100, s=100, d_model=512, num_heads=8, d_k=64, d_v=64, d_ff=2048, blocks=1)
    params = table(html, "cost-params")
    assert params.count("<td>262,144</td>") == 4  # W_Q, W_K, W_V, W_O: 4·512² = 1,048,576 in all
    assert f"<td>{4 * 512**2 + 2 * 512 * 2048 + 2048 + 512 + 2048:,}</td>" in params
    assert "crossover T = 3,072" in html


@pytest.mark.parametrize(
    "kw",
    [
        {"t": 1, "s": 1, "d_model": 1, "num_heads": 1, "d_k": 1, "d_v": 1, "d_ff": 0, "blocks": 0},
        {"t": 64, "s": 64, "d_model": 64, "num_heads": 8, "d_k": 64, "d_v": 64, "d_ff": 256, "blocks": 4},
        {"score": "general", "d_ff": 0, "blocks": 0},
        {"score": "additive", "d_a": 5},
        {"attention": "linear"},
        {"attention": "linear", "score": "additive"},
        {"t": 5, "s": 9},
    ],
)
def test_every_configuration_renders_valid_markup(kw: dict) -> None:
    html = render_cost(**kw)
    check_csp_safe(html)
    ET.fromstring(html)
    for svg in svgs(html):
        check_svg(svg)
    t = kw.get("t", COST_SIZES["t"])
    assert f"current T = {t}" in texts(svgs(html)[0])


def test_cost_notes_for_cross_and_linear_attention() -> None:
    assert "Cross-attention: 5 queries against 9 keys" in render_cost(t=5, s=9)
    linear = render_cost(attention="linear", score="additive")
    assert "the additive score is not counted" in linear
    assert "T·S" not in table(linear, "cost-stages").split("<tbody>")[1].split("</tbody>")[0]


# --- the SVG helpers ------------------------------------------------------------------------------


def test_svg_text_is_escaped() -> None:
    evil = '<script>alert(1)</script>"'
    lab = scaling_lab(seed=0, samples=100, d_ks=(4,))
    growth = cost_growth(d_model=4, num_heads=1, d_k=4, d_v=4, ts=[1, 2, 4])
    for markup in (score_spread_svg(lab, current_d_k=4, title=evil), cost_growth_svg(growth, current_t=2, title=evil)):
        assert isinstance(markup, Markup)
        assert "<script" not in markup and "&lt;script&gt;" in markup
        check_svg(ET.fromstring(str(markup)))


def test_growth_chart_marks_linear_attention_when_current() -> None:
    growth = cost_growth(d_model=8, num_heads=2, d_k=4, d_v=4, ts=[1, 2, 4, 8, 16, 32])
    svg = ET.fromstring(str(cost_growth_svg(growth, current_t=8, current_linear=True)))
    (dot,) = svg.iter(f"{SVG}circle")
    lines = {p.get("class").split()[-1]: p.get("points") for p in svg.iter(f"{SVG}polyline")}
    assert set(lines) == {"quadratic", "linear", "total", "linear-attention"}
    point = f"{dot.get('cx')},{dot.get('cy')}"
    assert point in lines["linear-attention"].split() and point not in lines["total"].split()
    assert crossover(d_model=8, num_heads=2, d_k=4, d_v=4) == 16


def test_every_chart_class_is_styled() -> None:
    css = (ROOT / "static" / "panels.css").read_text()
    html = render_lab() + render_cost()
    classes = {c for svg in svgs(html) for el in svg.iter() for c in (el.get("class") or "").split()}
    missing = {c for c in classes if not re.search(rf"\.{re.escape(c)}\b", css)}
    assert not missing, missing
