"""GET /decoder, "Next word": the page's parts against the API's numbers, heads switched off, the candidates
alone for the slider, writing on, the loading page, and a bad field's 422 that keeps what was typed."""

from __future__ import annotations

import re
from html import unescape

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.maths.attention import softmax_rows as softmax
from app.maths.sampling import draw, sampling_distribution
from app.serving.real_models import language_model
from app.view.decoder_view import decoder_catalogue_view, effect_sign
from app.view.pieces import readable

TEXT = "The capital of France is"
HTMX = {"HX-Request": "true"}


@pytest.fixture(autouse=True, scope="module")
def ready() -> None:
    """The model read and its heads measured, as the app's start does in the background (once per process)."""
    decoder_catalogue_view()


def text_of(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def number(text: str) -> float:
    """A number as the page prints it, its minus sign typeset: −1.63."""
    return float(text.replace("−", "-"))


def first_bar(html: str) -> tuple[str, float]:
    bar = re.search(r'<span class="tok">([^<]*)</span>.*?<span class="pct">([\d.]+)%</span>', html, re.S)
    assert bar is not None
    return unescape(bar.group(1)), float(bar.group(2))


def test_the_page_shows_the_apis_candidates(client: TestClient) -> None:
    r = client.get("/decoder", params={"text": TEXT})
    assert r.status_code == 200
    api = client.post("/api/decoder", json={"text": TEXT}).json()["next"]["candidates"][0]
    token, percent = first_bar(r.text)
    assert token == "␣Paris" and percent == round(100 * api["probability"], 1)
    page = text_of(r.text)
    assert "All 270 heads at once" in page and "The answer forming: the logit lens" in page
    assert r.text.count('class="thumb') == 270


def test_heads_switched_off_change_the_candidates_beside_what_they_were(client: TestClient) -> None:
    r = client.get("/decoder", params=[("text", TEXT), ("off", "17.1"), ("off", "2.3"), ("off_layer", "30")])
    assert r.status_code == 200
    off = [{"layer": 16, "head": 0}, {"layer": 1, "head": 2}] + [{"layer": 29, "head": h} for h in range(9)]
    api = client.post("/api/decoder", json={"text": TEXT, "heads_off": off}).json()["next"]["candidates"][0]
    token, percent = first_bar(r.text)
    assert token == "␣Paris" and percent == round(100 * api["probability"], 1) and percent != 77.3
    assert "was 77.3%" in text_of(r.text) and "With 11 heads switched off" in text_of(r.text)
    assert r.text.count('class="thumb off"') + r.text.count('class="thumb selected off"') == 11
    assert 'value="17.1" checked' in r.text and 'value="30" checked' in r.text


def test_a_head_selected_gets_its_step_through_alone(client: TestClient) -> None:
    r = client.get("/decoder", params={"text": TEXT, "layer": "18", "head": "7"}, headers=HTMX | {"HX-Target": "steps"})
    assert r.status_code == 200
    assert r.headers["HX-Push-Url"] == "/decoder?text=The+capital+of+France+is&layer=18&head=7"
    assert r.text.lstrip().startswith('<section class="steps" id="steps"') and 'data-at="17.6"' in r.text
    assert 'class="thumb' not in r.text and 'id="catalogue"' not in r.text  # not the maps, not the page
    for oob in ("enlarged", "last-row", "cand-bars", "switch-shortcuts", "decoder-permalink", "decoder-embed"):
        assert re.search(rf'id="{oob}"[^>]* hx-swap-oob="true"', r.text), oob
    whole = client.get("/decoder", params={"text": TEXT, "layer": "18", "head": "7"}, headers=HTMX)
    assert len(r.content) < 150_000 < len(whole.content)  # each part a question of its own, kept apart


def test_a_token_written_on_gets_the_next_word_then_asks_for_the_rest(client: TestClient) -> None:
    r = client.get("/decoder", params={"text": TEXT, "generate": "1"}, headers=HTMX | {"HX-Target": "next-row"})
    assert r.status_code == 200
    assert r.headers["HX-Push-Url"] == "/decoder?text=The+capital+of+France+is+Paris"
    assert r.text.lstrip().startswith('<div class="next-row" id="next-row">') and 'class="thumb' not in r.text
    loader = re.search(r'<div id="rest-loader"[^>]*>', r.text)
    assert loader is not None and 'hx-get="/decoder?text=The+capital+of+France+is+Paris"' in loader.group(0)
    rest = client.get("/decoder", params={"text": f"{TEXT} Paris"}, headers=HTMX | {"HX-Target": "decoder-rest"})
    assert rest.status_code == 200 and "HX-Push-Url" not in rest.headers
    assert rest.text.count('class="thumb') == 270 and 'id="next-row"' not in rest.text


def test_heads_switched_off_say_what_changed(client: TestClient) -> None:
    r = client.get("/decoder", params=[("text", TEXT), ("off", "17.1"), ("off", "2.3")],
                   headers=HTMX | {"HX-Target": "next-row"})
    assert r.status_code == 200
    said = text_of(re.search(r'<span id="heads-off-change".*?</span>', r.text, re.S).group(0))
    assert said.startswith("Off now: L2 H3, L17 H1. ") and "“␣Paris”: 77.3% with every head on" in said


def test_the_slider_gets_the_candidates_alone(client: TestClient) -> None:
    r = client.get("/decoder", params={"text": TEXT, "temperature": "0.5"}, headers=HTMX | {"HX-Target": "candidates"})
    assert r.status_code == 200
    assert "All 270 heads" not in r.text and first_bar(r.text)[1] > 77.3
    assert "temperature=0.5" in r.headers["HX-Replace-Url"]


def test_writing_on_appends_the_greedy_tokens_and_keeps_heads_off(client: TestClient) -> None:
    for off in ([], [("off", "19.7")]):
        r = client.get("/decoder", params=[("text", TEXT), ("generate", "4"), *off])
        assert r.status_code == 200
        heads_off = [{"layer": 18, "head": 6}] if off else []
        written = client.post("/api/generate", json={"text": TEXT, "max_new_tokens": 4, "temperature": 0,
                                                     "heads_off": heads_off}).json()["text"]
        box = re.search(r'<textarea id="text"[^>]*>([^<]*)</textarea>', r.text)
        assert box is not None and unescape(box.group(1)) == TEXT + written


def test_a_bad_field_keeps_what_was_typed(client: TestClient) -> None:
    r = client.get("/decoder", params={"text": "word " * 140})
    assert r.status_code == 422
    assert "the limit is 128" in text_of(r.text) and ("word " * 140).strip() in unescape(r.text)
    r = client.get("/decoder", params={"text": TEXT, "layer": "31", "head": "1"}, headers=HTMX)
    assert r.status_code == 422 and r.headers["HX-Reswap"] == "none" and "layer" in r.text


def test_the_page_says_it_is_loading_until_the_model_is_read(client: TestClient,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(language_model(), "ready", lambda: False)
    r = client.get("/decoder", params={"text": TEXT})
    assert r.status_code == 503 and r.headers["Retry-After"] == "5"
    assert "still being read" in text_of(r.text)


def test_every_habits_words_agree_with_its_measured_effect(client: TestClient) -> None:
    """No claim beside numbers that contradict it: for every habit, each head's "switched off" cell and the
    sentence under its table are coloured and worded by the sign of the effect they print, and the switch's
    shortcut says which ranking chose its heads and the same effect."""
    r = client.get("/decoder", params={"text": TEXT})
    assert r.status_code == 200
    effects = {e.behaviour: e for e in language_model().effects()}
    words = {"hurts": "The model leans on them here.", "helps": "more likely without them",
             "none": "hardly at all"}
    for key, effect in effects.items():
        card = re.search(rf'<article class="catalogue-entry" id="dcat-{key}".*?</article>', r.text, re.S).group(0)
        cells = re.findall(r'<td class="effect effect-(\w+)" data-change="([^"]+)">([^<]+)</td>', card)
        assert [number(c) for _, c, _ in cells] == [round(h.change, 2) for h in effect.heads]
        for sign, change, shown in cells:
            assert sign == effect_sign(number(change)) and shown == change
        note = re.search(r'<p class="note effect-note effect-(\w+)" data-change="([^"]+)">(.*?)</p>', card, re.S)
        sign, change, said = note.group(1), number(note.group(2)), text_of(note.group(3))
        assert change == round(effect.together, 2) and sign == effect_sign(effect.together)
        assert words[sign] in said and all(w not in said for s, w in words.items() if s != sign)
        if sign != "none":
            assert f"becomes {np.exp(effect.together):.2f}× as likely" in said
    shortcuts = text_of(re.search(r'<ul class="shortcuts".*?</ul>', r.text, re.S).group(0))
    assert shortcuts.count("Switch off the 3 heads with the highest") == len(effects)
    for effect in effects.values():
        assert f"the right next token became {np.exp(effect.together):.2f}× as likely" in shortcuts


def test_heads_that_make_the_answer_more_likely_when_off_are_said_to(client: TestClient) -> None:
    """"Harry Potter went to Hogwarts. Harry Potter went to": with the three highest-scoring induction heads off,
    " Hog" is more likely than with every head on, and the page says so rather than leaving it unexplained."""
    text = "Harry Potter went to Hogwarts. Harry Potter went to"
    induction = next(e for e in decoder_catalogue_view() if e["key"] == "induction")
    off = [("off", f"{h['layer'] + 1}.{h['head'] + 1}") for h in induction["heads"]]
    r = client.get("/decoder", params=[("text", text), *off], headers=HTMX | {"HX-Target": "next-row"})
    said = text_of(re.search(r'<span id="heads-off-change".*?</span></span>', r.text, re.S).group(0))
    service = language_model()
    before = softmax(service.logits(text).astype(np.float64))
    now = softmax(service.logits(text, frozenset((h["layer"], h["head"]) for h in induction["heads"])).astype(float))
    top = int(np.argmax(before))
    assert now[top] > before[top]  # measured: " Hog" 40.3 % → 60.9 %
    assert "is more likely without them" in said and "self-repair" in said


def test_twenty_draws_are_the_samplers_and_a_bad_seed_is_named(client: TestClient) -> None:
    """The draws the page lists are twenty tokens drawn by app.maths.sampling with the page's seed, from the
    probabilities after τ and the cut-offs; a seed out of range is refused naming ``draw``."""
    r = client.get("/decoder", params={"text": TEXT, "temperature": "1.5", "top_k": "8", "draw": "7"},
                   headers=HTMX | {"HX-Target": "candidates"})
    assert r.status_code == 200 and "draw=7" in r.headers["HX-Replace-Url"]
    rows = re.findall(r'<span class="tok">([^<]*)</span><svg[^>]*>.*?</svg><span class="count">(\d+) of 20', r.text)
    p = sampling_distribution(language_model().logits(TEXT), 1.5, top_k=8)
    ids, counts = np.unique(draw(p, 20, seed=7), return_counts=True)
    vocabulary = language_model().files().vocabulary
    assert sorted((unescape(t), int(c)) for t, c in rows) == sorted(
        (readable(vocabulary[i]), int(c)) for i, c in zip(ids, counts, strict=True))
    assert 'href="/decoder?text=The+capital+of+France+is&amp;temperature=1.5&amp;top_k=8&amp;draw=8#draws"' in r.text
    bad = client.get("/decoder", params={"text": TEXT, "draw": "0"}, headers=HTMX)
    assert bad.status_code == 422 and "draw" in bad.text


def test_the_queries_and_keys_picture_has_a_point_per_token_and_the_heads_lines(client: TestClient) -> None:
    r = client.get("/decoder", params={"text": TEXT, "layer": "5", "head": "3"}, headers=HTMX | {"HX-Target": "steps"})
    assert r.status_code == 200
    figure = re.search(r'<figure class="qk-map".*?</figure>', r.text, re.S).group(0)
    assert figure.count('class="qk-q"') == 5 and figure.count('class="qk-k"') == 5
    weights = language_model().run(TEXT).attention[4, 2]  # (T, T)
    drawn = sorted(float(w) for w in re.findall(r'class="qk-line"[^>]*data-w="([\d.]+)"', figure))
    assert drawn == pytest.approx(sorted(float(w) for w in weights[weights >= 0.2]), abs=5e-4)


def test_the_habits_api_answers_the_catalogue_and_its_effects(client: TestClient) -> None:
    doc = client.get("/api/decoder/habits").json()
    effects = {e.behaviour: e for e in language_model().effects()}
    assert [h["behaviour"] for h in doc["habits"]] == ["previous", "sink", "induction"]
    for habit in doc["habits"]:
        effect = effects[habit["behaviour"]]
        assert [h["change"] for h in habit["heads"]] == pytest.approx([h.change for h in effect.heads], abs=1e-9)
        assert habit["together"] == pytest.approx(effect.together, abs=1e-9) and habit["positions"] > 0
    induction = doc["habits"][2]
    assert induction["together"] < -1.0 and all(h["score"] >= induction["threshold"] for h in induction["heads"])
