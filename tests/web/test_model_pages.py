"""GET /model, "Your sentence": the page and its htmx fragment, permalinks, every bad field a 422 naming it,
and the page's numbers (the step-through, the two sentences compared, heads switched off) against
app.maths.bert's forward pass computed here independently."""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest
from fastapi.testclient import TestClient
from httpx import Response

from app.maths.bert import run_model, tokenize
from app.maths.model_files import load_model_files
from app.state.model_state import DEFAULT_TEXT, DEFAULT_TEXT2

HTMX = {"HX-Request": "true"}
TIRED, WIDE = DEFAULT_TEXT, DEFAULT_TEXT2


def run(text: str, heads_off: frozenset[tuple[int, int]] = frozenset()):  # noqa: ANN201 (a ModelRun)
    model = load_model_files()
    return run_model(model, tokenize(model, text), heads_off)


def table(html: str, caption_start: str) -> list[list[str]]:
    """The printed cells of the first heatmap whose caption starts with ``caption_start``, row by row."""
    m = re.search(rf'<table class="heatmap[^"]*"[^>]*><caption>{re.escape(caption_start)}[^<]*</caption>(.*?)</table>',
                  html, re.S)
    assert m, f"no table {caption_start}"
    body = m.group(1).split("<tbody>", 1)[1]
    cell = r"<td[^>]*>(?:<span>)?([^<]*)(?:</span>)?</td>"  # a wide matrix's numbers are in a <span>
    return [re.findall(cell, row) for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


def numbers(cells: list[list[str]]) -> np.ndarray:
    """Printed cells as floats (the page prints a true minus sign)."""
    return np.array([[float(c.replace("−", "-")) for c in row] for row in cells])


def fixed(m: np.ndarray, decimals: int) -> list[list[str]]:
    """As the page prints a matrix: fixed point, a true minus sign, no negative zero."""
    printed = (np.round(np.asarray(m, dtype=np.float64), decimals) + 0.0).tolist()
    return [[f"{v:.{decimals}f}".replace("-", "−") for v in row] for row in printed]


def slot(html: str, name: str) -> tuple[str, str | None]:
    """(message, data-field) of the err-model-<name> slot."""
    m = re.search(rf'<div id="err-model-{name}"([^>]*)>(.*?)</div>', html, re.S)
    assert m, f"no err-model-{name}"
    field = re.search(r'data-field="([^"]*)"', m.group(1))
    return unescape(re.sub(r"<[^>]+>", "", m.group(2))).strip(), field.group(1) if field else None


def is_full_page(r: Response) -> bool:
    return r.text.lstrip().lower().startswith("<!doctype html>")


# --- the page -------------------------------------------------------------------------------------


def test_the_page_shows_every_head_and_the_default_sentences(client: TestClient) -> None:
    r = client.get("/model")
    assert r.status_code == 200
    assert is_full_page(r) and r.headers["vary"].startswith("HX-Request")
    assert len(re.findall(r'<a class="thumb[ "]', r.text)) == 72
    for la in range(1, 7):
        for h in range(1, 13):
            assert f'aria-label="Layer {la}, head {h}' in r.text
    assert f">{TIRED.replace(chr(39), '&#39;')}</textarea>" in r.text
    assert f">{WIDE.replace(chr(39), '&#39;')}</textarea>" in r.text
    assert 'include "model/catalogue.html"' not in r.text and 'id="catalogue"' in r.text
    assert "https://" not in re.sub(r'<footer.*</footer>', "", r.text, flags=re.S)  # no CDN: every file is ours


def test_htmx_gets_the_workspace_alone_and_empties_the_message_slots(client: TestClient) -> None:
    r = client.get("/model", params={"text": "A cat sat on the mat."}, headers=HTMX)
    assert r.status_code == 200
    assert not is_full_page(r)
    assert r.text.lstrip().startswith('<div id="model-work"')
    for name in ("text", "text2", "view"):
        assert slot(r.text, name) == ("", None)
    assert len(re.findall(r'<a class="thumb[ "]', r.text)) == 72
    assert r.headers["hx-push-url"] == "/model?text=A+cat+sat+on+the+mat."  # the address bar's permalink
    typed = client.get("/model", params={"text": "A cat sat."}, headers={**HTMX, "HX-Trigger-Name": "text"})
    assert typed.headers["hx-replace-url"] == "/model?text=A+cat+sat." and "hx-push-url" not in typed.headers


def test_the_permalink_reads_back_to_the_same_view(client: TestClient) -> None:
    r = client.get("/model", params={"text": "Bank of the river.", "layer": 3, "head": 7, "q": 2, "off": "2.4"})
    assert r.status_code == 200
    link = unescape(re.search(r'<p class="permalink"[^>]*>Permalink to this view: <a href="([^"]+)"', r.text).group(1))
    query = dict(parse_qsl(urlsplit(link).query))
    assert query == {"text": "Bank of the river.", "layer": "3", "head": "7", "q": "2", "off": "2.4"}
    again = client.get(link)
    assert again.status_code == 200
    assert "Step through one head: L3 H7" in again.text
    assert '<option value="2" selected>2 bank</option>' in again.text
    assert 'id="off-2-4" name="off" value="2.4" data-keep checked' in again.text


def test_selecting_a_map_links_to_its_step_through(client: TestClient) -> None:
    r = client.get("/model")
    hrefs = re.findall(r'<a class="thumb[^"]*" href="([^"]+)"', r.text)
    target = unescape(hrefs[4 * 12 + 2])  # layer 5, head 3
    assert dict(parse_qsl(urlsplit(target).query))["layer"] == "5"
    page = client.get(target.split("#")[0])
    assert "Step through one head: L5 H3" in page.text
    assert '<a class="thumb selected" ' in page.text


def test_a_head_selected_gets_its_step_through_alone(client: TestClient) -> None:
    r = client.get("/model", params={"layer": "2", "head": "9"}, headers=HTMX | {"HX-Target": "steps"})
    assert r.status_code == 200
    assert r.headers["HX-Push-Url"].startswith("/model?") and r.headers["HX-Push-Url"].endswith("&layer=2&head=9")
    assert r.text.lstrip().startswith('<section class="steps" id="steps"') and 'data-at="1.8"' in r.text
    assert 'class="thumb' not in r.text  # not the 72 maps
    for oob in ("model-permalink", "model-embed", "head-loader"):
        assert re.search(rf'id="{oob}"[^>]* hx-swap-oob="true"', r.text), oob
    # The lines view waits in a placeholder of its size; the loader asks for the rest that names the head.
    assert 'class="lines-later"' in r.text and "lines-svg" not in r.text and 'id="enlarged"' not in r.text
    assert '<div class="mrow" id="model-output-panel" aria-busy="true"></div>' in r.text
    assert len(r.content) <= 150_000  # the first answer: what a student reads first
    loader = re.search(r'<div id="head-loader"[^>]* hx-get="([^"]+)"[^>]* hx-target="#enlarged"', r.text)
    assert loader and unescape(loader.group(1)) == r.headers["HX-Push-Url"]
    rest = client.get(unescape(loader.group(1)), headers=HTMX | {"HX-Target": "enlarged", "HX-Trigger": "head-loader"})
    assert rest.status_code == 200 and "HX-Push-Url" not in rest.headers  # the address is the head's already
    assert rest.text.lstrip().startswith('<figure class="enlarged" id="enlarged"')
    assert "<strong>L2 H9</strong>" in rest.text
    for oob in ("compare", "model-lines-figure", "model-output-panel"):
        assert re.search(rf'id="{oob}"[^>]* hx-swap-oob="true"', rest.text), oob
    assert rest.text.count('class="lines-svg') == 1 and "lines-later" not in rest.text
    assert 'data-ref="output"' in rest.text and "aria-busy" not in rest.text
    whole = client.get("/model", params={"layer": "2", "head": "9"}, headers=HTMX)
    assert 'class="thumb' in whole.text and len(r.content) < len(whole.content) / 2
    assert 'id="head-loader" class="head-loader" hidden' in whole.text  # where the loader lands


def test_text_is_escaped_everywhere(client: TestClient) -> None:
    evil = '<script>alert(1)</script> "quoted"'
    r = client.get("/model", params={"text": evil})
    assert r.status_code == 200
    assert "<script>alert(1)" not in r.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in r.text


# --- bad input --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("params", "field", "words"), [
    ({"text": "   "}, "text", "empty"),
    ({"text": "tab\tok but bell \x07"}, "text", "remove"),
    ({"text2": ""}, "text2", "empty"),
    ({"text": "word " * 70}, "text", "72 WordPiece tokens"),
    ({"text": "x" * 1001}, "text", "at most 1000"),
    ({"layer": "7", "head": "1"}, "layer", "outside 1–6"),
    ({"layer": "2", "head": "0"}, "head", "outside 1–12"),
    ({"layer": "2"}, "head", "together"),
    ({"q": "17"}, "q", "outside 1–16"),
    ({"q": "two"}, "q", "whole number"),
    ({"off": "5"}, "off", "layer.head"),
    ({"off": "5.13"}, "off", "outside 1–12"),
    ({"off_layer": "0"}, "off_layer", "outside 1–6"),
    ({"matrix": "w_q"}, "matrix", "choose one of"),
    ({"matrix": "output", "row": "1", "col": "33"}, "col", "outside 1–32"),
    ({"x_row": "99"}, "x_row", "outside"),
])
def test_bad_input_is_a_422_naming_its_field(client: TestClient, params: dict, field: str, words: str) -> None:
    slot_name = field if field in ("text", "text2") else "view"
    r = client.get("/model", params=params)
    assert r.status_code == 422, r.text[:300]
    assert is_full_page(r)
    message, named = slot(r.text, slot_name)
    assert named == field and words in message, message
    assert 'id="model-work"' in r.text  # the result's place, waiting for a good sentence
    h = client.get("/model", params=params, headers=HTMX)
    assert h.status_code == 422
    assert h.headers["hx-reswap"] == "none"  # htmx keeps the last good result on screen
    assert 'id="model-work"' not in h.text
    message, named = slot(h.text, slot_name)
    assert named == field and words in message and "last good result" in message


def test_a_bad_sentence_keeps_what_was_typed(client: TestClient) -> None:
    r = client.get("/model", params={"text": "  ", "text2": "Something I wrote \x01"})
    assert r.status_code == 422
    assert re.search(r'id="text2" name="text2"[^>]*>Something I wrote \x01</textarea>', r.text)
    assert re.search(r'id="text" name="text"[^>]*>  </textarea>', r.text)
    assert slot(r.text, "text")[1] == "text"  # the first bad field is named


# --- the numbers --------------------------------------------------------------------------------------


def test_the_step_through_prints_the_models_numbers(client: TestClient) -> None:
    r = client.get("/model", params={"layer": 2, "head": 6, "x_row": 11})
    assert r.status_code == 200
    one = run(TIRED)
    model = load_model_files()
    lw = model.weights.layers[1]
    x = one.hidden_states[1].astype(np.float64)  # (T, 384) layer 2's input
    q = x @ lw.w_q[5] + lw.b_q[5]  # (T, 32), an independent float64 computation
    k = x @ lw.w_k[5] + lw.b_k[5]
    v = x @ lw.w_v[5] + lw.b_v[5]
    scores = q @ k.T
    scaled = scores / np.sqrt(32)
    e = np.exp(scaled - scaled.max(axis=1, keepdims=True))
    a = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(a, one.attention[1, 5], atol=1e-5)
    for caption, m in (("Q", q), ("K", k), ("V", v), ("Attention weights A", a), ("Output A·V", a @ v)):
        printed = numbers(table(r.text, caption))
        np.testing.assert_allclose(printed, m, atol=0.0051, err_msg=caption)
    for caption, m in (("Scores Q·Kᵀ", scores), ("Scaled Q·Kᵀ/√d_k", scaled)):
        printed = numbers(table(r.text, caption))
        np.testing.assert_allclose(printed, m, atol=0.0051 * max(1.0, float(np.abs(m).max()) / 100), err_msg=caption)
    # the enlarged head is the same head's weights
    enlarged = numbers(table(r.text, "Layer 2, head 6: attention weights"))
    np.testing.assert_allclose(enlarged, a, atol=0.0051)
    # X's row 11 ("it"), all 384 numbers on demand
    row = re.search(r'<ol class="x-values"[^>]*>(.*?)</ol>', r.text, re.S).group(1)
    values = np.array([float(s.replace("−", "-")) for s in re.findall(r"<li>([^<]*)</li>", row)])
    assert values.shape == (384,)
    np.testing.assert_allclose(values, x[10], atol=0.00051)


def test_the_inspector_works_a_weight_out_with_these_numbers(client: TestClient) -> None:
    r = client.get("/model", params={"layer": 5, "head": 3, "matrix": "softmax", "row": 11, "col": 3})
    assert r.status_code == 200
    aside = re.search(r'<aside id="model-inspector".*?</aside>', r.text, re.S).group(0)
    assert "Attention weights of query 11 (it), softmax of its row (head 3)" in aside
    weight = float(one_weight := run(TIRED).attention[4, 2, 10, 2])
    assert f"<strong>{weight:.3f}</strong>" in aside, one_weight
    r = client.get("/model", params={"layer": 5, "head": 3, "matrix": "scores", "row": 11, "col": 3})
    assert "Score of query 11 (it) for key 3 (animal) (head 3)" in r.text


def independent_shift(a: np.ndarray, b: np.ndarray) -> float:
    """½·Σ|a − b|, one key at a time."""
    return 0.5 * sum(abs(float(x) - float(y)) for x, y in zip(a, b, strict=True))


def test_the_comparison_lists_the_heads_that_moved_it_most(client: TestClient) -> None:
    r = client.get("/model")
    one, two = run(TIRED), run(WIDE)
    it = one.tokens.index("it")
    assert two.tokens[it] == "it"
    moved = {(la, h): independent_shift(one.attention[la, h, it], two.attention[la, h, it])
             for la in range(6) for h in range(12)}
    ranked = sorted(moved, key=lambda k: -moved[k])
    items = re.findall(r'class="shift-head"[^>]*>L(\d+) H(\d+)</a>: it → (\d+) (\S+) ([\d.]+) → ([\d.]+); '
                       r'→ (\d+) (\S+) ([\d.]+) → ([\d.]+) <span class="hint">\(moved ([\d.]+)\)', r.text)
    assert len(items) == 8
    for (la, h), item in zip(ranked[:8], items, strict=True):
        assert (int(item[0]) - 1, int(item[1]) - 1) == (la, h)
        assert float(item[10]) == pytest.approx(moved[la, h], abs=0.0051)
        change = two.attention[la, h, it].astype(float) - one.attention[la, h, it]
        lost, gained = int(np.argmin(change)), int(np.argmax(change))
        assert int(item[2]) - 1 == lost and item[3] == one.tokens[lost]
        assert float(item[4]) == pytest.approx(one.attention[la, h, it, lost], abs=0.0051)
        assert float(item[5]) == pytest.approx(two.attention[la, h, it, lost], abs=0.0051)
        assert int(item[6]) - 1 == gained and item[7] == two.tokens[gained]
    grid = np.array(table(r.text, "Share of it"), dtype=float)
    np.testing.assert_allclose(grid, [[moved[la, h] for h in range(12)] for la in range(6)], atol=0.0051)
    # and the head stepped through by default is the one that moved most
    assert f"Step through one head: L{ranked[0][0] + 1} H{ranked[0][1] + 1}" in r.text


def test_sentences_of_different_lengths_are_shown_side_by_side(client: TestClient) -> None:
    r = client.get("/model", params={"text2": "The animal didn't cross the wide street because it was too tired.",
                                     "layer": 1, "head": 1})
    assert r.status_code == 200
    assert "can't be aligned" in r.text
    assert r.text.count('<table class="rowlist">') == 2
    assert 'class="shift-head"' not in r.text


def test_switching_heads_off_changes_the_cosine_as_the_model_computes_it(client: TestClient) -> None:
    off = frozenset({(4, 2)} | {(1, h) for h in range(12)})  # L5 H3, and every head of layer 2
    r = client.get("/model", params=[("off", "5.3"), ("off_layer", "2")])
    assert r.status_code == 200
    before = float(np.dot(run(TIRED).embedding.astype(float), run(WIDE).embedding.astype(float)))  # unit vectors
    a, b = run(TIRED, off).embedding.astype(float), run(WIDE, off).embedding.astype(float)
    after = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    assert abs(after - before) > 1e-3  # the switch really changes something
    printed_before = float(re.search(r'<strong class="cos-before">([\d.]+)</strong>', r.text).group(1))
    printed_after = float(re.search(r'<strong class="cos-after">([\d.]+)</strong>', r.text).group(1))
    assert printed_before == pytest.approx(before, abs=0.00006)
    assert printed_after == pytest.approx(after, abs=0.00006)
    assert "with 13 heads off" in r.text
    assert 'id="off-l2" name="off_layer" value="2" data-keep checked' in r.text


def test_the_model_view_at_16_tokens_fits_its_budget(client: TestClient) -> None:
    """The issue's budget: the page at 16 tokens ≤ 150 KB compressed (Brotli, as browsers ask)."""
    r = client.get("/model", headers={"Accept-Encoding": "br"})
    assert r.status_code == 200 and r.headers["content-encoding"] == "br"
    assert len(run(TIRED).tokens) == 16
    size = r.num_bytes_downloaded
    assert size <= 150 * 1024, size


def test_the_rollout_section_draws_the_apis_rollout(client: TestClient) -> None:
    """The encoder's attention rollout on the page: [CLS]'s mean share of a row as POST /api/model answers it, and
    the query token's lines weighted by its row of the API's rollout."""
    page = client.get("/model")
    assert page.status_code == 200
    api = client.post("/api/model", json={"text": DEFAULT_TEXT}).json()
    rolled = np.array(api["rollout"])  # (T, T)
    section = re.search(r'<section class="rollout" id="model-rollout".*?</section>', page.text, re.S).group(0)
    cls = re.search(r"\[CLS\] takes (\d+)% of a row on average", section).group(1)
    assert int(cls) == round(100 * rolled[:, 0].mean())
    assert section.count('class="head-svg"') == 1 and 'id="model-rollout-lines-figure"' in section
    weights = sorted(float(w) for w in re.findall(r'data-w="([\d.]+)"', section))
    assert weights and max(weights) == pytest.approx(float(rolled.max()), abs=1e-3)
