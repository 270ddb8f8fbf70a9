"""Figures as files (app.view.figure): each kind of SVG is well-formed, sized by a viewBox, carries every token
label and every printed number as text, and paints the page's own colours, written out (no class, no CSS)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.state.form import FormError
from app.state.page import preset_page
from app.view.figure.document import bucket_fill, inline, rule
from app.view.figure.drawings import HEAD_INKS, CandidateBar, HeadMap, candidates_svg, head_grid_svg
from app.view.figure.heatmap import MatrixFigure, cell_texts, heatmap_svg
from app.view.figure.stage_figures import page_figure
from app.view.heatmap import display_numbers

STATIC = Path(__file__).resolve().parents[2] / "static"
NS = "{http://www.w3.org/2000/svg}"


def parsed(svg: str) -> ET.Element:
    root = ET.fromstring(svg.encode("utf-8"))
    assert root.tag == f"{NS}svg"
    x, y, w, h = (float(v) for v in root.get("viewBox", "").split())
    assert (x, y) == (0, 0) and w > 0 and h > 0
    assert float(root.get("width")) == w and float(root.get("height")) == h
    return root


def texts(root: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in root.iter(f"{NS}text")]


def standalone(root: ET.Element) -> None:
    """No class, no style, no CSS variable: the file carries its own colours."""
    for el in root.iter():
        assert "class" not in el.attrib and "style" not in el.attrib, el.attrib
        assert not any("var(" in v for v in el.attrib.values())


def css_colours(css: str, selector: str, prop: str) -> str:
    """``prop``'s value in the rule whose selector list names ``selector``."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    for block in re.finditer(r"([^{}]+)\{([^}]*)\}", css):
        names = [s.strip() for s in block.group(1).split(",")]
        if selector in names:
            found = re.search(rf"(?<![-\w]){prop}\s*:\s*([^;]+)", block.group(2))
            if found:
                return found.group(1).strip()
    raise AssertionError(f"{selector} {{ {prop} }} not in the stylesheet")


def test_heatmap_colours_are_the_pages() -> None:
    css = (STATIC / "app.css").read_text()
    for i in range(9):
        assert bucket_fill(f"s{i}") == css_colours(css, f".s{i}", "background")
    for i in range(-5, 6):
        assert bucket_fill(f"d{i}") == css_colours(css, f".d{i}", "background")


def test_head_colours_are_the_lines_pages() -> None:
    css = (STATIC / "lines.css").read_text()
    for h, (line, weight) in enumerate(HEAD_INKS):
        assert css_colours(css, f".lines .h{h}", "--c") == line
        assert css_colours(css, f".lines .h{h}", "--t") == weight


def test_heatmap_svg_has_every_label_number_and_colour() -> None:
    m = np.array([[0.25, -1.5, 0.0], [2.0, -0.004, 1.0]])  # (2, 3)
    fig = MatrixFigure(m, ["1 the", "2 cat"], ["k1", "k2", "k3"], "signed", 3, "Scores Q·Kᵀ", "query ↓ key →")
    root = parsed(heatmap_svg(fig))
    standalone(root)
    words = texts(root)
    assert words[0] == "Scores Q·Kᵀ2×3"  # the caption, its shape after it
    for label in [*fig.rows, *fig.cols, fig.corner]:
        assert label in words
    printed = [t for row in display_numbers(m, 3) for t in row]
    assert printed == ["0.250", "−1.500", "0.000", "2.000", "−0.004", "1.000"]
    for t in printed:
        assert t in words
    assert "−2.00" in words and "2.00" in words  # the colour bar's ends, as the page's legend prints them
    cells = [r for r in root.iter(f"{NS}rect") if r.get("stroke") == "#ffffff"]
    _, buckets, _ = cell_texts(fig)
    assert [c.get("fill") for c in cells] == [bucket_fill(b) for b in buckets.flat]


def test_masked_cells_print_minus_infinity_on_hatching() -> None:
    m = np.array([[0.5, -np.inf], [0.1, 0.2]])
    root = parsed(heatmap_svg(MatrixFigure(m, ["a", "b"], ["a", "b"], "signed", 2, "Masked")))
    assert "−∞" in texts(root)
    assert any(r.get("fill") == "url(#masked)" for r in root.iter(f"{NS}rect"))


def test_inline_follows_ancestors_negation_and_order() -> None:
    svg = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1"><g class="qs">'
           '<g class="tok focus"><line class="e h1"/></g><g class="tok" tabindex="0"><line class="e h1"/>'
           '<text class="wt">0.5</text></g></g></svg>')
    root = inline(svg, [rule("e", stroke="red"), rule("e.h1", stroke="blue"), rule("qs tok.!focus e", opacity="0.1"),
                        rule("wt", display="none")])
    lines = list(root.iter(f"{NS}line"))
    assert [(ln.get("stroke"), ln.get("opacity")) for ln in lines] == [("blue", None), ("blue", "0.1")]
    assert not list(root.iter(f"{NS}text"))  # hidden on the page until hovered: not in the file
    standalone(root)
    assert all("tabindex" not in el.attrib for el in root.iter())


@pytest.fixture(scope="module")
def bank() -> tuple:
    return preset_page("bank-river")


def test_page_heatmap_is_the_panels_matrix(bank: tuple) -> None:
    sc, view = bank
    saved = page_figure(sc, replace(view, stage="softmax"), "softmax")
    assert saved.stem == "attention-softmax-head1"
    root = parsed(saved.svg)
    words = texts(root)
    weights = sc.compute()[0].heads[0].softmax  # (T, T)
    for i, token in enumerate(sc.tokens):
        assert f"{i + 1} {token}" in words
    for t in (t for row in display_numbers(weights, view.decimals) for t in row):
        assert t in words


def test_page_lines_map_and_another_head(bank: tuple) -> None:
    sc, view = bank
    lines = page_figure(sc, replace(view, stage="softmax"), "lines")
    root = parsed(lines.svg)
    standalone(root)
    words = texts(root)
    assert all(token in words for token in sc.tokens)
    assert "head 1: who" in words  # the heads' colours are named in the figure
    strokes = {el.get("stroke") for el in root.iter(f"{NS}g") if el.get("stroke")}  # each head's group of lines
    assert strokes == {c for c, _ in HEAD_INKS[: sc.num_heads]}
    drawn_map = parsed(page_figure(sc, replace(view, stage="scores"), "map").svg)
    standalone(drawn_map)
    assert "softmax" in texts(drawn_map)
    second = page_figure(sc, replace(view, stage="softmax", head=1), "softmax")
    assert second.stem == "attention-softmax-head2"
    w2 = sc.compute()[0].heads[1].softmax
    assert all(t in texts(parsed(second.svg)) for row in display_numbers(w2, view.decimals) for t in row)


@pytest.mark.parametrize(("stage", "figure", "head", "field"), [
    ("nowhere", "softmax", None, "stage"), ("softmax", "nothing", None, "figure"), ("softmax", "x<y", None, "figure"),
    ("softmax", "softmax", 9, "head"), ("qkv", "lines", None, "figure"), ("softmax", "loss", None, "figure"),
])
def test_a_figure_the_page_does_not_show_names_its_field(bank: tuple, stage: str, figure: str, head: int | None,
                                                          field: str) -> None:
    sc, view = bank
    with pytest.raises(FormError) as e:
        page_figure(sc, replace(view, stage=stage), figure, head)
    assert e.value.field == field


def test_learn_charts_print_their_numbers() -> None:
    sc, view = preset_page("why-scale")
    for name in ("loss", "why_scale_loss", "why_scale_grad"):
        root = parsed(page_figure(sc, view, name).svg)
        standalone(root)
        assert "step" in texts(root)
    colours = {el.get("stroke") for el in parsed(page_figure(sc, view, "why_scale_loss").svg).iter(f"{NS}polyline")}
    assert colours == {"#542788", "#b35806"}  # static/learn.css: scaled purple, unscaled orange


def test_head_grid_and_candidates() -> None:
    dot = "data:image/png;base64,AAAA"
    rows = [[[HeadMap(dot, la == h == 0, la == 1 and h == 1)] for h in range(3)] for la in range(2)]
    root = parsed(head_grid_svg(rows, ["H1", "H2", "H3"], "Every head", "“a b”"))
    assert len(list(root.iter(f"{NS}image"))) == 6
    assert {"L1", "L2", "H1", "H3"} <= set(texts(root))
    bars = [CandidateBar("␣Paris", "77.3%", 77.3, True), CandidateBar("␣the", "6.5%", 6.5, False, "7.0%")]
    words = texts(parsed(candidates_svg(bars, "The next word", "τ = 1")))
    assert {"␣Paris", "77.3%", "␣the", "6.5%", "was 7.0%"} <= set(words)
    # the text the candidates follow, under the caption: wrapped, a new line shown, cut after four lines
    said = texts(parsed(candidates_svg(bars, "The next word", "τ = 1", "After the text “The capital of\nFrance is”")))
    assert "After the text “The capital of ↵ France is”" in said
    long = texts(parsed(candidates_svg(bars, "The next word", "τ = 1", "After the text “" + "word " * 200 + "”")))
    assert sum(w.startswith(("After", "word")) for w in long) == 4 and any(w.endswith("…") for w in long)
