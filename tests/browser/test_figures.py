"""Save figure in a real Chromium: the menu in a heatmap's caption opens without moving the stage, and its SVG and
PNG buttons download the figure (fetched by static/export.js: htmx swaps nothing into the page)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser


def test_save_a_heatmap_as_svg_and_png(page: Page) -> None:
    page.goto("/?preset=bank-river&stage=softmax")
    panel = page.locator("#stage-softmax figure.panel", has=page.locator('table.heatmap[data-ref="softmax.0"]'))
    table_top = panel.locator("table.heatmap").bounding_box()["y"]
    caption = panel.locator("figcaption").bounding_box()
    menu = panel.locator(".figure-tools details.save-figure")  # on the caption's line
    menu.locator("summary").click()
    expect(menu).to_have_attribute("open", "")
    summary = menu.locator("summary").bounding_box()
    assert caption["y"] <= summary["y"] + summary["height"] / 2 <= caption["y"] + caption["height"]
    assert panel.locator("table.heatmap").bounding_box()["y"] == table_top  # the menu opens over the page
    url = page.url

    with page.expect_download() as info:
        menu.get_by_role("button", name="SVG").click()
    assert info.value.suggested_filename == "attention-softmax-head1.svg"
    root = ET.fromstring(Path(info.value.path()).read_bytes())
    words = {"".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")}
    assert {"1 Sherry", "7 bank", "0.738"} <= words

    with page.expect_download() as info:
        menu.get_by_role("button", name="PNG").click()
    assert info.value.suggested_filename == "attention-softmax-head1.png"
    assert Path(info.value.path()).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert page.url == url
    expect(panel.locator("table.heatmap")).to_be_visible()
