"""The head catalogue's partial rendered alone, with the page's own template environment: a heading per
behaviour, each claim with its figure (well-formed SVG, role and title, no style attribute), heads and
tokens counted from 1; nothing at all without a catalogue; tokens escaped in the figure."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np

from app.lesson.model_sentences import BEHAVIOUR_TEXTS, MODEL_SENTENCES
from app.maths.head_catalogue import BEHAVIOURS
from app.view.head_cards import CELL, LABEL_W, attention_svg, catalogue_context
from app.web.respond import templates

SVG = "{http://www.w3.org/2000/svg}"
PARTIAL = "model/catalogue.html"


def render(catalogue: object) -> str:
    return templates.env.get_template(PARTIAL).render(catalogue=catalogue)


def test_the_partial_shows_every_behaviour_with_its_claim_and_figure() -> None:
    catalogue = catalogue_context()
    html = render(catalogue)
    assert html.count("<h2") == 1 and "What heads do" in html
    assert [re.sub(r"<.*?>", "", h) for h in re.findall(r"<h3[^>]*>(.*?)</h3>", html)] == \
        [BEHAVIOUR_TEXTS[b].title.replace("'", "&#39;") for b in BEHAVIOURS]
    figures = re.findall(r"<svg\b.*?</svg>", html, re.S)
    assert len(figures) == len(BEHAVIOURS)
    for svg, entry in zip(figures, catalogue.entries, strict=True):
        root = ET.fromstring(svg)
        assert root.get("role") == "img" and root.find(f"{SVG}title").text == entry.figure_caption
        assert not any("style" in el.attrib for el in root.iter())
        assert len(root.findall(f"{SVG}text")) == 2 * 16  # the example's 16 tokens, as queries and keys
        assert entry.claim in html.replace("&#39;", "'")
    assert "Layer 0" not in html and "Head 0" not in html  # counted from 1
    assert "1 [CLS]" in html and "0 [CLS]" not in html
    assert all(s.text.replace("'", "&#39;") in html for s in MODEL_SENTENCES)
    assert "<script" not in html


def test_no_catalogue_renders_nothing() -> None:
    assert render(None).strip() == ""


def test_the_figure_escapes_its_tokens_and_colours_by_bucket() -> None:
    weights = np.array([[1.0, 0.0], [0.5, 0.5]])
    svg = attention_svg(weights, ("<b>", "a&b"), title="t <x>", desc="d")
    root = ET.fromstring(str(svg))  # parses: every text escaped
    assert [t.text for t in root.findall(f"{SVG}text")] == ["<b>", "a&b", "<b>", "a&b"]
    assert {p.get("class") for p in root.findall(f"{SVG}path")} == {"s8", "s0", "s4"}
    assert root.find(f"{SVG}title").text == "t <x>"


def test_the_catalogue_is_computed_once_per_process() -> None:
    assert catalogue_context() is catalogue_context()


def test_the_pronoun_figure_outlines_the_cell_it_measures() -> None:
    catalogue = catalogue_context()
    (entry,) = [e for e in catalogue.entries if e.key == "antecedent"]
    root = ET.fromstring(str(entry.figure))
    (mark,) = root.findall(f"{SVG}rect")
    tokens = [t.text for t in root.findall(f"{SVG}text")][16:]  # the queries, top to bottom
    row, col = (int(mark.get("y")) - LABEL_W) // CELL, (int(mark.get("x")) - LABEL_W) // CELL
    assert (tokens[row], tokens[col]) == ("it", "animal")
    assert "“it” to “animal” outlined" in entry.figure_caption
    others = [e for e in catalogue.entries if e.key != "antecedent"]
    assert not any(ET.fromstring(str(e.figure)).findall(f"{SVG}rect") for e in others)


def test_a_behaviour_no_head_reaches_says_so() -> None:
    catalogue = catalogue_context()
    html = render(catalogue)
    for entry in catalogue.entries:
        assert entry.shown == any(h.shows for h in entry.heads)
        said = "Below the threshold; the closest is <strong>" + entry.claim.replace("'", "&#39;")
        assert (said in html) == (not entry.shown)
