"""Permalinks: every state survives the round trip through its URL, and the page puts it there."""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import parse_qsl, urlencode, urlsplit

import numpy as np
import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from app.lesson.presets import PRESETS
from app.lesson.stages import visible_stages
from app.state.permalink import MAX_URL_CHARS, permalink, query_string, stage_permalinks, state_query
from app.state.reading import read_form
from app.state.scenario import Scenario, View, add_token, from_preset
from tests.conftest import form_fields

HTMX = {"HX-Request": "true"}


def round_trip(sc: Scenario, view: View) -> tuple[Scenario, View]:
    return read_form(dict(state_query(sc, view)))


def assert_same(a: Scenario, b: Scenario) -> None:
    for name in ("preset", "tokens", "num_heads", "d_k", "d_v", "seed", "scale", "mask_mode", "blocked", "padding",
                 "positional_encoding", "temperature", "context_tokens", "window", "score", "attention", "blocks",
                 "activation", "norm"):
        assert getattr(a, name) == getattr(b, name), name
    np.testing.assert_array_equal(a.x, b.x)
    for name, w in a.weights().items():
        np.testing.assert_array_equal(w, b.weights()[name], err_msg=name)
    ra, rb = a.run(), b.run()
    np.testing.assert_array_equal(ra.output, rb.output)


@pytest.mark.parametrize("key", list(PRESETS))
def test_every_preset_survives_its_url(key: str) -> None:
    sc, view = from_preset(key)
    back, back_view = round_trip(sc, view)
    assert_same(sc, back)
    assert back_view == view


def test_an_edited_state_survives_its_url() -> None:
    sc, _ = from_preset("translate")
    x = sc.x.copy()
    x[1, 2] = -0.123456
    sc = replace(add_token(replace(sc, x=x), source=True), edits={("w_q", 0, 1, 1): 0.5, ("w_o", 0, 2, 0): -2.0},
                 blocked=frozenset({(0, 1)}), temperature=0.7, score="general", mask_mode="local", window=3,
                 blocks=2, d_ff=7, norm="pre", activation="gelu", tokens=("Le", "chat & <b>", *sc.tokens[2:]))
    view = View(stage="ffn", head=0, show_all=True, decimals=4, inspect="scores.0.1.2", block=1,
                panels=frozenset({"cost"}), present=True)
    back, back_view = round_trip(sc, view)
    assert_same(sc, back)
    assert back_view == view


def test_get_with_the_permalink_renders_the_same_page(client: TestClient) -> None:
    form = form_fields(client.get("/", params={"preset": "bank-money"}).text)
    r = client.post("/", data={**form, "x-1-2": "0.25", "head": "2"}, headers=HTMX)
    assert r.status_code == 200
    url = r.headers["HX-Push-Url"]
    assert url.startswith("/?") and len(url) <= MAX_URL_CHARS
    page = client.get(url)
    assert page.status_code == 200
    shown = form_fields(page.text)
    assert shown["x-1-2"] == "0.25" and shown["head"] == "2"


def test_value_edits_replace_the_url_and_steps_push_it(client: TestClient) -> None:
    form = form_fields(client.get("/").text)
    edit = client.post("/stages", data={**form, "x-0-0": "0.5"}, headers=HTMX)
    assert "HX-Replace-Url" in edit.headers and "HX-Push-Url" not in edit.headers
    assert dict(parse_qsl(urlsplit(edit.headers["HX-Replace-Url"]).query))["x-0-0"] == "0.5"
    step = client.post("/stages", data={**form, "goto": "softmax"}, headers=HTMX)
    assert dict(parse_qsl(urlsplit(step.headers["HX-Push-Url"]).query))["stage"] == "softmax"


def test_bad_input_leaves_the_url_alone(client: TestClient) -> None:
    form = form_fields(client.get("/").text)
    r = client.post("/stages", data={**form, "x-0-0": "abc"}, headers=HTMX)
    assert r.status_code == 422
    assert "HX-Replace-Url" not in r.headers and "HX-Push-Url" not in r.headers


def test_the_page_shows_a_link_to_itself(client: TestClient) -> None:
    sc, view = from_preset("pool")
    r = client.get("/", params={"preset": "pool"})
    assert permalink("/", sc, view).replace("&", "&amp;") in r.text


@pytest.mark.parametrize("key", ["translate", "block"])
def test_stage_permalinks_are_the_permalinks_at_each_stage(key: str) -> None:
    sc, view = from_preset(key)
    view = replace(view, stage="qkv", head=0, inspect="q.0.1.1", present=True)
    keys = [s.key for s in visible_stages(sc.blocks)]
    links = stage_permalinks("/root/", sc, view, keys)
    assert list(links) == keys  # view.stage is among them
    for stage in keys:
        assert links[stage] == permalink("/root/", sc, replace(view, stage=stage))


@pytest.mark.slow
def test_a_state_too_big_for_a_url_offers_a_file_instead(client: TestClient) -> None:
    form = form_fields(client.get("/").text)
    r = client.post("/", data={**form, "d_model": "64"}, headers=HTMX)
    form = form_fields(r.text)
    for _ in range(5):  # 10 tokens × 64 dimensions: more than 8 KB of numbers
        grown = client.post("/", data={**form, "action": "add_token"}, headers=HTMX)
        assert grown.status_code == 200  # a form of thousands of fields is read whole (not 400)
        form = form_fields(grown.text)
    r = client.post("/stages", data={**form, "x-0-0": "0.5"}, headers=HTMX)
    assert r.status_code == 200
    assert "HX-Replace-Url" not in r.headers
    assert "too large for a link" in r.text
    saved = client.post("/scenario", data=form)
    assert saved.status_code == 200
    assert saved.headers["content-disposition"].startswith("attachment;")
    opened = client.post("/scenario/open", files={"scenario": ("s.json", saved.content, "application/json")})
    assert opened.status_code == 200
    assert form_fields(opened.text)["token-9"] == form["token-9"]
    bad = client.post("/scenario/open", files={"scenario": ("s.json", b"{not json", "application/json")})
    assert bad.status_code == 422 and "scenario" in bad.text


@given(st.lists(st.tuples(st.text(max_size=12), st.text(max_size=12)), max_size=8))
def test_query_string_is_urlencode(pairs: list[tuple[str, str]]) -> None:
    """The fast encoder of permalinks writes exactly what urllib's urlencode writes."""
    assert query_string(pairs) == urlencode(pairs)
