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
    from playwright.sync_api import Locator, Page

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


SVG = "{http://www.w3.org/2000/svg}"


def saved_svg(page: Page, menu: Locator, filename: str) -> set[str]:
    """Open a figure's menu as a teacher does, take its SVG, check it is a drawing with a viewBox: its texts."""
    menu.locator("summary").click()
    with page.expect_download() as info:
        (menu.get_by_role("button", name="SVG").or_(menu.get_by_role("link", name="SVG"))).click()
    assert info.value.suggested_filename == filename
    root = ET.fromstring(Path(info.value.path()).read_bytes())
    assert root.tag == f"{SVG}svg" and len(root.get("viewBox", "").split()) == 4
    menu.locator("summary").click()  # closed again
    return {"".join(t.itertext()).strip() for t in root.iter(f"{SVG}text")}


def test_every_kind_of_figure_saves_from_its_menu(page: Page) -> None:
    """The lines view, the map, the Learn and why-÷√d_k charts and a real model's head maps: each menu on its page
    downloads that figure, with the words the page shows (the next-word bars: tests/browser/test_decoder_page.py)."""
    page.goto("/?preset=bank-river&stage=softmax")
    lines = saved_svg(page, page.locator("#stage-softmax figure.lines details.save-figure"),
                      "attention-softmax-lines-head1.svg")
    assert {"Sherry", "bank", "0.74", "0.59"} <= lines
    assert {"softmax", "7×7"} <= saved_svg(page, page.locator(".nav-row details.save-figure"),
                                            "attention-map-softmax.svg")

    page.goto("/?preset=learn-bank")
    page.get_by_role("button", name="1 step").click()
    expect(page.locator("#learn")).to_contain_text("after 1 step")
    assert saved_svg(page, page.locator("#learn details.save-figure").first, "attention-loss.svg")

    page.goto("/?preset=why-scale")
    charts = page.locator(".why-scale details.save-figure")
    expect(charts).to_have_count(2)
    assert saved_svg(page, charts.nth(0), "attention-why-scale-loss.svg")
    assert saved_svg(page, charts.nth(1), "attention-why-scale-grad.svg")

    page.goto("/model?text=The+cat+sat+on+the+mat.")
    heads = saved_svg(page, page.locator("details.save-figure").first, "model-heads.svg")
    assert any("cat" in t for t in heads), heads
