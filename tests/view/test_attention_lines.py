"""The attention-lines figure: one line per query–key pair and head, widths and opacities that follow
the stated mapping, escaping, the bank presets' where head, masks, cross-attention, large T, the quiz."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.maths.attention import run_attention
from app.state.scenario import from_preset
from app.view.attention_lines import ALL_LINES_UP_TO, ROW, THRESHOLD, attention_lines

NS = {"svg": "http://www.w3.org/2000/svg"}
EVIL_TOKENS = ("<script>alert(1)</script>", '"><img src=x onerror=alert(1)>', r"\text{x}")


def weights_of(preset: str) -> tuple[np.ndarray, tuple[str, ...], tuple[str, ...]]:
    sc, _ = from_preset(preset)
    run, _ = sc.compute()
    return np.stack([h.softmax for h in run.heads]), sc.tokens, sc.key_tokens  # (h, T, S)


def draw(a: np.ndarray, queries: tuple[str, ...], keys: tuple[str, ...], **options: object) -> ET.Element:
    labels = [f"head {h + 1}" for h in range(a.shape[0])]
    return ET.fromstring(str(attention_lines(a, queries, keys, labels, fig_id="t", **options).svg))


def svg_in(html: str, stage: str = "softmax") -> ET.Element:
    """The figure of one stage on a page, parsed."""
    article = re.search(rf'<article class="stage" id="stage-{stage}".*?</article>', html, re.S)
    assert article, f"no {stage} stage"
    m = re.search(r'<svg xmlns="http://www.w3.org/2000/svg"[^>]*class="lines-svg.*?</svg>', article.group(0), re.S)
    assert m, f"no attention lines in the {stage} stage"
    return ET.fromstring(m.group(0))


def tokens(root: ET.Element, side: str) -> list[ET.Element]:
    """The query ("qs") or key ("ks") token groups, in order."""
    return root.findall(f"svg:g[@class='{side}']/svg:g", NS)


def label(token: ET.Element) -> str:
    return token.find("svg:text[@class='lab']", NS).text or ""


def lines(token: ET.Element, head: int) -> list[ET.Element]:
    return token.findall(f"svg:g[@class='e h{head}']/svg:line", NS)


def key_of(query: int, line: ET.Element) -> int:
    """The key a query's line goes to: it starts at the query's row and drops y2 = (j − i)·ROW."""
    return query + int(line.get("y2")) // ROW


# --- the drawing ----------------------------------------------------------------------------------


def test_every_query_key_pair_has_one_line_per_head() -> None:
    a, queries, keys = weights_of("bank-river")
    h_count, t, s = a.shape
    root = draw(a, queries, keys)
    assert [label(q) for q in tokens(root, "qs")] == list(queries)
    assert [label(k) for k in tokens(root, "ks")] == list(keys)
    for h in range(h_count):
        for i, q in enumerate(tokens(root, "qs")):
            assert sorted(key_of(i, line) for line in lines(q, h)) == list(range(s))
        # A key's own copy of its lines, shown while it is in use: one per query.
        for k in tokens(root, "ks"):
            assert len(lines(k, h)) == t


@pytest.mark.parametrize(("h", "i", "j"), [(0, 6, 0), (1, 6, 2), (2, 6, 5), (2, 0, 3), (1, 4, 4)])
def test_width_and_opacity_follow_the_stated_mapping(h: int, i: int, j: int) -> None:
    a, queries, keys = weights_of("bank-river")
    root = draw(a, queries, keys)
    line = next(x for x in lines(tokens(root, "qs")[i], h) if key_of(i, x) == j)
    w = float(a[h, i, j])
    assert float(line.get("data-w")) == pytest.approx(w, abs=5e-5)
    assert float(line.get("stroke-width")) == pytest.approx(round(6 * w, 2), abs=1e-9)
    assert float(line.get("stroke-opacity")) == pytest.approx(round(0.25 + 0.75 * w, 2), abs=1e-9)


def test_widths_and_opacities_grow_with_the_weight() -> None:
    sc, _ = from_preset("default")
    run = run_attention(sc.x, num_heads=3, d_k=2, d_v=2, seed=7)
    a = np.stack([h.softmax for h in run.heads])
    root = draw(a, sc.tokens, sc.tokens)
    drawn = sorted((float(x.get("data-w")), float(x.get("stroke-width")), float(x.get("stroke-opacity")))
                   for x in root.iterfind("svg:g[@class='qs']//svg:line", NS))
    assert len(drawn) == a.size
    for (w1, width1, op1), (w2, width2, op2) in zip(drawn, drawn[1:], strict=False):
        if w1 < w2:
            assert width1 <= width2 and op1 <= op2
    assert drawn[0][1] < drawn[-1][1]  # not all one width


def test_token_text_is_escaped_and_long_tokens_are_cut() -> None:
    queries = (*EVIL_TOKENS, "a" * 40)
    a = np.full((2, 4, 4), 0.25)
    figure = attention_lines(a, queries, queries, ["head 1", "head 2"], fig_id="t")
    svg = str(figure.svg)
    assert "<script" not in svg and "<img" not in svg
    root = ET.fromstring(svg)  # well-formed: every token's text is escaped
    assert [label(q) for q in tokens(root, "qs")] == ["<script>ale…", '"><img src=…', r"\text{x}", "a" * 11 + "…"]
    names = [q.get("aria-label") for q in tokens(root, "qs")]
    assert names[1].startswith('query 2 "><img src=x onerror=alert(1)>:')
    assert names[3].startswith("query 4 " + "a" * 40)  # the whole token for a screen reader


def test_masked_keys_draw_no_visible_line() -> None:
    a, queries, keys = weights_of("causal")
    root = draw(a, queries, keys)
    for i, q in enumerate(tokens(root, "qs")):
        for line in lines(q, 0):
            j = key_of(i, line)
            if j > i:  # hidden from query i by the causal mask: weight exactly 0
                assert a[0, i, j] == 0.0
                assert line.get("data-w") == "0.0000" and float(line.get("stroke-width")) == 0.0
            else:
                assert float(line.get("stroke-width")) > 0.0


def test_cross_attention_puts_the_source_sentence_on_the_right() -> None:
    a, queries, keys = weights_of("translate")
    assert queries != keys
    root = draw(a, queries, keys, cross=True)
    assert [label(q) for q in tokens(root, "qs")] == list(queries)  # French
    assert [label(k) for k in tokens(root, "ks")] == list(keys)  # English
    assert "keys (source)" in ET.tostring(root, encoding="unicode")
    # Each French word's strongest line goes to its English counterpart (le → the second "the").
    strongest = [keys[key_of(i, max(lines(q, 0), key=lambda x: float(x.get("data-w"))))]
                 for i, q in enumerate(tokens(root, "qs"))]
    assert strongest == ["The", "cat", "sat", "on", "the", "mat"]


def test_large_runs_draw_only_the_weights_above_the_threshold() -> None:
    rng = np.random.default_rng(0)
    run = run_attention(rng.normal(size=(64, 64)), num_heads=8, d_k=8, d_v=8, seed=0)
    a = np.stack([h.softmax for h in run.heads])  # (8, 64, 64)
    names = tuple(f"t{i}" for i in range(64))
    figure = attention_lines(a, names, names, [f"head {h + 1}" for h in range(8)], fig_id="t")
    assert a.size > ALL_LINES_UP_TO
    assert figure.lines == int((a >= THRESHOLD).sum()) < a.size
    assert "Only weights of at least 0.05" in figure.note and figure.note in str(figure.svg)
    root = ET.fromstring(str(figure.svg))
    widths = [float(x.get("data-w")) for x in root.iterfind("svg:g[@class='qs']//svg:line", NS)]
    assert len(widths) == figure.lines and min(widths) >= THRESHOLD
    assert len(str(figure.svg).encode()) < 512 * 1024  # about 410 KB, 38 KB gzipped


def test_weights_that_do_not_fit_the_tokens_are_an_error() -> None:
    with pytest.raises(ValueError, match="do not fit"):
        attention_lines(np.full((1, 2, 2), 0.5), ("a",), ("a", "b"), ["head 1"], fig_id="t")


# --- on the page ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("preset", "who", "when", "where"), [
    ("bank-river", "Sherry", "lying", "river"),
    ("bank-money", "Ryan", "needed", "money"),
])
def test_bank_attends_like_seed_000s_figure(client: TestClient, preset: str, who: str, when: str,
                                             where: str) -> None:
    r = client.get("/", params={"preset": preset, "stage": "softmax"})
    assert r.status_code == 200
    root = svg_in(r.text)
    assert "has-focus" in root.get("class")
    focused = [(i, q) for i, q in enumerate(tokens(root, "qs")) if "focus" in q.get("class").split()]
    assert [label(q) for _, q in focused] == ["bank"]
    i, bank = focused[0]
    keys = [label(k) for k in tokens(root, "ks")]
    strongest = [keys[key_of(i, max(lines(bank, h), key=lambda x: float(x.get("data-w"))))] for h in range(3)]
    assert strongest == [who, when, where]
    for name in ("head 1: who", "head 2: when", "head 3: where"):
        assert f'<span class="sw" aria-hidden="true"></span>{name}</label>' in r.text


def test_head_checkboxes_never_post(client: TestClient) -> None:
    r = client.get("/", params={"preset": "bank-money", "stage": "softmax"})
    assert r.status_code == 200
    boxes = re.findall(r'<label class="head-toggle h\d"><input [^>]*>', r.text)
    assert len(boxes) == 3
    assert all(" name=" not in box and "checked" in box for box in boxes)


def test_a_preset_without_a_focus_draws_every_query_alike(client: TestClient) -> None:
    r = client.get("/", params={"preset": "translate"})  # opens on the softmax stage
    assert r.status_code == 200
    root = svg_in(r.text)
    assert "has-focus" not in root.get("class")
    assert all(q.get("class") == "tok q" for q in tokens(root, "qs"))


def test_output_stage_shows_the_lines_for_softmax_attention_only(client: TestClient) -> None:
    r = client.get("/", params={"preset": "bank-river", "stage": "output"})
    assert r.status_code == 200
    assert len(tokens(svg_in(r.text, "output"), "qs")) == 7
    r = client.get("/", params={"preset": "linear"})  # opens on the output stage
    assert r.status_code == 200
    assert 'id="stage-output"' in r.text and "lines-svg" not in r.text


def test_show_all_keeps_every_id_unique(client: TestClient) -> None:
    r = client.get("/", params={"preset": "bank-river", "show_all": "on"})
    assert r.status_code == 200
    assert r.text.count('class="lines-svg') == 2  # softmax and output
    ids = re.findall(r'\sid="([^"]+)"', r.text)
    assert len(ids) == len(set(ids))


def test_a_quiz_on_the_weights_hides_the_lines(client: TestClient) -> None:
    r = client.get("/", params={"preset": "bank-river", "stage": "softmax", "quiz": "on"})
    assert r.status_code == 200
    assert "lines-svg" not in r.text and "data-w=" not in r.text
    assert "appear once every weight of this head is revealed" in r.text
    # The output stage's quiz hides the output, not the weights: the lines stay.
    r = client.get("/", params={"preset": "bank-river", "stage": "output", "quiz": "on"})
    assert r.status_code == 200
    assert "lines-svg" in r.text
