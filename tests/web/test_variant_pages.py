"""The page with the variants through TestClient: the transformer block's stages appear with blocks, every stage
of the variant presets renders, the block's numbers are the pipeline's, an FFN edit survives a change of d_ff,
and a bad variant field gets its message, not a 500."""

from __future__ import annotations

import re

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.state.scenario import from_preset
from tests.conftest import form_fields

HTMX = {"HX-Request": "true"}


def page_form(client: TestClient, preset: str = "default") -> dict[str, str]:
    r = client.get("/", params={"preset": preset})
    assert r.status_code == 200
    return form_fields(r.text)


def articles(html: str) -> list[str]:
    return re.findall(r'<article class="stage" id="stage-([a-z0-9]+)"', html)


def table_numbers(html: str, ref: str) -> list[list[str]]:
    m = re.search(rf'<table class="heatmap [^"]*" data-ref="{re.escape(ref)}"[^>]*>(.*?)</table>', html, re.S)
    assert m, f"no heatmap {ref}"
    body = m.group(1).split("<tbody>", 1)[1]
    cell = r"<td[^>]*>(?:<span>)?([^<]*)(?:</span>)?</td>"  # a wide matrix's numbers are in a <span>
    return [re.findall(cell, row) for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


@pytest.mark.parametrize(("extra", "expected"), [
    ({}, ["x", "qkv", "scores", "scaled", "mask", "softmax", "output", "multihead"]),
    ({"blocks": "1"}, ["x", "qkv", "scores", "scaled", "mask", "softmax", "output", "multihead",
                       "addnorm1", "ffn", "addnorm2"]),
])
def test_block_stages_appear_only_with_blocks(client: TestClient, extra: dict, expected: list[str]) -> None:
    r = client.post("/", data={**page_form(client), **extra}, headers=HTMX)
    assert r.status_code == 200
    r = client.post("/stages", data={**form_fields(r.text), "show_all": "on"}, headers=HTMX)
    assert r.status_code == 200
    assert articles(r.text) == expected


@pytest.mark.parametrize("preset", ["additive", "sparse", "linear", "block"])
@pytest.mark.parametrize("block", ["0", "1"])
def test_every_stage_of_the_new_presets_renders(client: TestClient, preset: str, block: str) -> None:
    r = client.post("/stages", data={**page_form(client, preset), "show_all": "on", "block": block}, headers=HTMX)
    assert r.status_code == 200
    assert "multihead" in articles(r.text)


def test_block_page_numbers_are_the_pipeline_s(client: TestClient) -> None:
    form = page_form(client, "block")
    sc, _ = from_preset("block")
    _, stack = sc.compute()
    r = client.post("/stages", data={**form, "goto": "addnorm2", "block": "1"}, headers=HTMX)
    assert r.status_code == 200
    shown = table_numbers(r.text, "ln2.1")
    printed = (np.round(stack.blocks[1].ln2.output, 3) + 0.0).tolist()
    assert shown == [[f"{v:.3f}".replace("-", "−") for v in row] for row in printed]  # a true minus sign
    assert "block 2 of 2" in r.text


def test_ffn_edit_and_d_ff_change_through_the_form(client: TestClient) -> None:
    form = page_form(client, "block")
    assert form["shape"].endswith(",12")  # d_ff = 4·d_model is rendered
    r = client.post("/stages", data={**form, "ffn_w1-0-0": "1.5"}, headers=HTMX)
    assert r.status_code == 200
    r = client.post("/", data={**form, "ffn_w1-0-0": "1.5", "d_ff": "5"}, headers=HTMX)
    assert r.status_code == 200
    after = form_fields(r.text)
    assert after["shape"].endswith(",5") and after["ffn_w1-0-0"] == "1.5"  # the edit survives a narrower FFN
    assert "ffn_w1-0-5" not in after


def test_bad_block_fields_get_a_message_not_a_500(client: TestClient) -> None:
    form = page_form(client, "block")
    for field, value in (("d_ff", "0"), ("d_ff", "9999"), ("blocks", "9"), ("window", "0"),
                         ("ffn_w1-0-0", "x"), ("ln1_gamma-0-0", "nan"), ("score", "cosine")):
        r = client.post("/", data={**form, field: value}, headers=HTMX)
        assert r.status_code == 422, (field, value)
        assert f'data-field="{field}"' in r.text
