"""The stepper across transformer blocks: Next after block 1's last stage goes on to block 2's first
stage, Prev comes back, and the last block's last stage ends the steps (normal and presenter mode)."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from app.lesson.stages import read_goto, step_targets, visible_stages
from tests.conftest import form_fields

HTMX = {"HX-Request": "true"}
BLOCK_STAGES = visible_stages(blocks=2)
FIRST, LAST = BLOCK_STAGES[0].key, BLOCK_STAGES[-1].key


def block_form(client: TestClient, present: bool) -> dict[str, str]:
    r = client.get("/", params={"preset": "block", **({"present": "on"} if present else {})})
    assert r.status_code == 200
    return form_fields(r.text)


def step_value(html: str, button: str) -> str:
    m = re.search(rf'name="goto" value="([^"]*)" id="{button}"', html)
    assert m, f"no {button}"
    return m.group(1)


def shown(html: str) -> tuple[str, str]:
    """The stage in view and the block the view's select shows."""
    stage = re.search(r'<article class="stage" id="stage-([a-z0-9_]+)"', html)
    block = re.search(r'<option value="(\d+)" selected>block', html)
    assert stage and block
    return stage.group(1), block.group(1)


def test_step_targets_cross_into_the_next_block_and_back() -> None:
    assert step_targets(LAST, BLOCK_STAGES, block=0, blocks=2) == (BLOCK_STAGES[-2].key, f"{FIRST}@1")
    assert step_targets(FIRST, BLOCK_STAGES, block=1, blocks=2) == (f"{LAST}@0", BLOCK_STAGES[1].key)
    assert step_targets(FIRST, BLOCK_STAGES, block=0, blocks=2)[0] == ""
    assert step_targets(LAST, BLOCK_STAGES, block=1, blocks=2)[1] == ""
    assert step_targets(LAST, BLOCK_STAGES)[1] == ""  # no blocks: the steps end
    assert read_goto("x@1") == ("x", 1)
    assert read_goto("qkv") == ("qkv", None)
    assert read_goto("x@two") == ("x", None)


@pytest.mark.parametrize("present", [False, True])
def test_next_after_block_one_reaches_block_two_and_prev_comes_back(client: TestClient, present: bool) -> None:
    form = block_form(client, present)
    r = client.post("/stages", data={**form, "goto": LAST}, headers=HTMX)
    assert r.status_code == 200
    assert shown(r.text) == (LAST, "0")
    assert step_value(r.text, "next-stage") == f"{FIRST}@1"
    assert not re.search(r'id="next-stage"[^>]*disabled', r.text)

    r = client.post("/stages", data={**form, **form_fields(r.text), "goto": f"{FIRST}@1"}, headers=HTMX)
    assert r.status_code == 200
    assert shown(r.text) == (FIRST, "1")
    assert "output of block 1" in r.text  # block 2's input is block 1's output
    assert step_value(r.text, "prev-stage") == f"{LAST}@0"
    assert "block=1" in r.headers["HX-Push-Url"]

    r = client.post("/stages", data={**form, **form_fields(r.text), "goto": f"{LAST}@0"}, headers=HTMX)
    assert r.status_code == 200
    assert shown(r.text) == (LAST, "0")

    r = client.post("/stages", data={**form, **form_fields(r.text), "goto": LAST, "block": "1"}, headers=HTMX)
    assert shown(r.text) == (LAST, "1")
    assert re.search(r'id="next-stage"[^>]*disabled', r.text)  # the last block's last stage
