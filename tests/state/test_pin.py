"""Snapshot and diff through TestClient: the pin round-trips a state exactly, each stage shows
now − pinned computed by two independent pipeline runs, and a broken pin is a clear 422."""

from __future__ import annotations

import base64
import re
import zlib
from dataclasses import replace

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.maths.attention import run_attention
from app.state.form import FormError
from app.state.permalink import state_query
from app.state.pin import encode_pin
from app.state.reading import decode_pin, read_form
from app.state.scenario import from_preset
from tests.conftest import form_fields

HTMX = {"HX-Request": "true"}


def heatmap_numbers(html: str, ref: str) -> np.ndarray:
    m = re.search(rf'data-ref="{re.escape(ref)}"[^>]*>.*?<tbody>(.*?)</tbody>', html, re.S)
    assert m, f"no heatmap {ref}"
    rows = re.findall(r"<tr>(.*?)</tr>", m.group(1))
    cells = [re.findall(r"<td[^>]*>(?:<span>)?([^<]*)(?:</span>)?</td>", row) for row in rows]
    return np.array([[float(v.replace("−", "-")) for v in row] for row in cells])  # printed with a true minus


def page_fields(client: TestClient, **params: str) -> dict[str, str]:
    r = client.get("/", params=params)
    assert r.status_code == 200
    return form_fields(r.text)


@pytest.mark.parametrize("preset", ["three-token", "translate", "block", "bank-river", "linear"])
def test_a_pin_round_trips_the_scenario(preset: str) -> None:
    sc, _ = from_preset(preset)
    x = sc.x.copy()
    x[0, 0] = 0.7  # as a student types it
    edited = replace(sc, x=x, temperature=1.5)
    back = decode_pin(encode_pin(edited))
    assert state_query(back, read_form(dict(state_query(back, from_preset(preset)[1])))[1]) == state_query(
        edited, from_preset(preset)[1])
    assert np.array_equal(back.x, edited.x)
    a, b = back.compute(), edited.compute()
    assert np.array_equal(a[0].output, b[0].output)


@pytest.mark.parametrize("bad", ["not base64 !", base64.urlsafe_b64encode(b"plain").decode(),
                                 base64.urlsafe_b64encode(zlib.compress(b"shape=1,2")).decode(),
                                 base64.urlsafe_b64encode(zlib.compress(b"a" * 80_000_000)).decode()])
def test_a_broken_pin_is_refused_naming_the_field(bad: str) -> None:
    with pytest.raises(FormError) as e:
        decode_pin(bad)
    assert e.value.field == "pin" and e.value.message.startswith("pin: ")


def test_pinning_then_editing_shows_now_minus_pinned_for_the_stage(client: TestClient) -> None:
    fields = page_fields(client, preset="three-token", stage="softmax")
    pinned = client.post("/stages", data={**fields, "action": "pin"}, headers=HTMX)
    assert pinned.status_code == 200
    pin = form_fields(pinned.text)["pin"]
    assert pin and "Nothing in this stage has changed since the pin." in pinned.text
    assert "pin=" in pinned.headers["HX-Replace-Url"]

    edited = client.post("/stages", data={**fields, "pin": pin, "x-0-0": "2"}, headers=HTMX)
    assert edited.status_code == 200
    # The reference: two plain pipeline runs, before and after, subtracted here.
    sc, _ = from_preset("three-token")
    x_new = sc.x.copy()
    x_new[0, 0] = 2.0
    w = sc.weights()
    before = run_attention(sc.x, num_heads=1, d_k=sc.d_k, d_v=sc.d_v, weights=w, scale=sc.scale)
    after = run_attention(x_new, num_heads=1, d_k=sc.d_k, d_v=sc.d_v, weights=w, scale=sc.scale)
    for name in ("scaled", "softmax"):
        expected = getattr(after.heads[0], name) - getattr(before.heads[0], name)
        shown = heatmap_numbers(edited.text, f"delta-{name}.0")
        assert np.allclose(shown, np.round(expected, 3), atol=1e-9), name
    assert 'value="delta-' not in edited.text  # differences are not offered for export


def test_unchanged_matrices_and_changed_shapes_are_named(client: TestClient) -> None:
    fields = page_fields(client, preset="three-token", stage="qkv")
    pin = form_fields(client.post("/stages", data={**fields, "action": "pin"}, headers=HTMX).text)["pin"]
    r = client.post("/stages", data={**fields, "pin": pin, "w_q-0-0": "3"}, headers=HTMX)
    assert "Unchanged: W_K, K, W_V, V." in r.text
    assert 'data-ref="delta-q.0"' in r.text and 'data-ref="delta-k.0"' not in r.text
    grown = client.post("/", data={**fields, "pin": pin, "action": "add_token"}, headers=HTMX)
    assert grown.status_code == 200
    assert "Q: 3×2 when pinned, 4×2 now." in grown.text


def test_back_to_the_pin_restores_the_pinned_inputs_and_unpin_drops_it(client: TestClient) -> None:
    fields = page_fields(client, preset="three-token", stage="softmax")
    pin = form_fields(client.post("/stages", data={**fields, "action": "pin"}, headers=HTMX).text)["pin"]
    restored = client.post("/", data={**fields, "pin": pin, "x-0-0": "7", "action": "restore_pin"}, headers=HTMX)
    assert restored.status_code == 200
    back = form_fields(restored.text)
    assert back["x-0-0"] == fields["x-0-0"] and back["pin"] == pin
    unpinned = client.post("/stages", data={**fields, "pin": pin, "action": "unpin"}, headers=HTMX)
    assert form_fields(unpinned.text)["pin"] == "" and "Pin this state" in unpinned.text


def test_a_broken_pin_in_a_post_is_a_422_that_names_it(client: TestClient) -> None:
    fields = page_fields(client, preset="three-token")
    r = client.post("/stages", data={**fields, "pin": "garbage!"}, headers=HTMX)
    assert r.status_code == 422
    assert 'data-field="pin"' in r.text and "pin: the pinned state cannot be read" in r.text


def test_a_pinned_link_reproduces_the_diff(client: TestClient) -> None:
    fields = page_fields(client, preset="three-token", stage="softmax")
    pin = form_fields(client.post("/stages", data={**fields, "action": "pin"}, headers=HTMX).text)["pin"]
    edited = client.post("/stages", data={**fields, "pin": pin, "x-1-1": "0.5"}, headers=HTMX)
    url = edited.headers["HX-Replace-Url"]
    again = client.get(url)
    assert again.status_code == 200
    assert np.array_equal(heatmap_numbers(again.text, "delta-softmax.0"),
                          heatmap_numbers(edited.text, "delta-softmax.0"))
