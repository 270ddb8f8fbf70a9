"""Permalinks in a real browser: the address follows every change; reload, back and a shared link
reproduce the page."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

import pytest

from app.state.permalink import MAX_URL_CHARS, state_query
from app.state.scenario import add_token, from_preset, resize
from app.web.pages import SCENARIO_FORMAT
from tests.browser.conftest import open_class_menu
from tests.browser.test_mechanisms import goto_stage
from tests.browser.test_page import heatmap

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


pytestmark = pytest.mark.browser


def test_edits_reach_the_address_and_survive_reload_back_and_a_new_tab(page: Page, browser: Browser,
                                                                         base_url: str) -> None:
    page.goto("/?preset=three-token")
    page.locator('input[name="x-1-2"]').fill("0.5")
    expect(page).to_have_url(re.compile(r"[?&]x-1-2=0\.5(&|$)"))  # replaced as the student types
    goto_stage(page, "softmax")
    expect(page).to_have_url(re.compile(r"[?&]stage=softmax(&|$)"))
    page.reload()
    expect(page.locator('input[name="x-1-2"]')).to_have_value("0.5")
    expect(page.locator("#stage-softmax")).to_be_visible()
    page.go_back()  # the step was pushed: back returns to the stage before it, with the edit
    expect(page.locator("#stage-x")).to_be_visible()
    expect(page.locator('input[name="x-1-2"]')).to_have_value("0.5")
    page.go_forward()
    expect(page.locator("#stage-softmax")).to_be_visible()
    shared = page.locator("#permalink").get_attribute("href")
    assert shared and shared == page.url.removeprefix(base_url)
    other = browser.new_page(base_url=base_url)
    try:
        other.goto(shared)
        expect(other.locator('input[name="x-1-2"]')).to_have_value("0.5")
        expect(heatmap(other, "softmax.0", "softmax")).to_be_visible()
    finally:
        other.close()
    # Reload and back cancel the old document's favicon fetch: the page log does not count that
    # (net::ERR_ABORTED); a missing favicon would still show as an HTTP 404.


def big_scenario_file(path: Path) -> dict[str, str]:
    """A scenario too large for a link (48 tokens × 16 dimensions), saved as "Download scenario" does."""
    sc, view = from_preset("default")
    sc = resize(sc, d_model=16, num_heads=1, d_k=16, d_v=16)
    for _ in range(43):
        sc = add_token(sc)
    sc = replace(sc, tokens=(*sc.tokens[:-1], "last one"))
    fields = state_query(sc, view)
    assert len(urlencode(fields)) > MAX_URL_CHARS
    path.write_text(json.dumps({"format": SCENARIO_FORMAT, "fields": fields}))
    return dict(fields)


def test_a_state_too_large_for_a_link_is_opened_and_downloaded_again(page: Page, tmp_path: Path) -> None:
    original = big_scenario_file(tmp_path / "big.json")
    page.goto("/?preset=pool")
    open_class_menu(page)
    page.locator('input[name="scenario"]').set_input_files(tmp_path / "big.json")
    page.get_by_role("button", name="Open", exact=True).click()
    expect(page.locator('input[name="token-47"]')).to_have_value("last one")
    expect(page.locator("#stages")).to_contain_text("too large for a link")
    page.locator('input[name="x-47-15"]').fill("0.25")
    expect(heatmap(page, "x", "x").locator("tbody tr").nth(47).locator("td").nth(15)).to_have_text("0.250")
    with page.expect_download() as download:
        page.get_by_role("button", name="Download scenario").click()
    saved = json.loads(download.value.path().read_text())
    fields = dict(saved["fields"])
    assert fields["x-47-15"] == "0.25"
    # The inputs drawer, opened to edit, is part of the view the file keeps ("panels").
    assert {k: v for k, v in fields.items() if k not in ("x-47-15", "panels")} == {
        k: v for k, v in original.items() if k not in ("x-47-15", "panels")}
