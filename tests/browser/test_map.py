"""The pipeline map in a real Chromium: a click, Enter on a focused node, or (without JavaScript) the
node's permalink steps to its stage; it fits the window at a laptop's, a desktop's, a tablet's and a
phone's size, and stays legible there."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

import pytest

from app.lesson.stages import visible_stages
from app.state.grids import expand_grids
from tests.browser.conftest import htmx_idle
from tests.conftest import SAMPLE_SCREENS, VIEWPORTS, swept

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from playwright.sync_api import Locator, Page

pytestmark = pytest.mark.browser

FOCUS_RING = "rgb(17, 24, 39)"  # app.css --focus
MIN_LABEL_PX = 10  # a node's name, as drawn after the map is scaled to its column


def visible_map(page: Page) -> Locator:
    """The drawing the window shows: one row, or chips in rows."""
    return page.locator("#stages .pipeline-map svg.map:visible")


def node(page: Page, key: str) -> Locator:
    return visible_map(page).locator(f'a[id$="-{key}"]')


def expect_at(page: Page, key: str) -> None:
    expect(page.locator("#stages article.stage")).to_have_id(f"stage-{key}")
    expect(visible_map(page).locator('a[aria-current="step"]')).to_have_count(1)
    expect(node(page, key)).to_have_attribute("aria-current", "step")


def test_clicking_a_node_steps_there_and_keeps_unsaved_edits(page: Page) -> None:
    page.goto("/?preset=bank-river&stage=x")
    expect_at(page, "x")
    page.locator("#stages").evaluate("el => { el.closest('form').probe = 'same page' }")
    # An edit htmx has not posted yet (set without an input event: its own post would race the step).
    page.locator('input[name="x-0-0"]').evaluate("el => { el.value = '0.5' }")
    with page.expect_response(lambda r: r.url.endswith("/stages")) as answer:
        node(page, "softmax").click()
    posted = expand_grids(dict(parse_qsl(answer.value.request.post_data or "", keep_blank_values=True)))
    assert posted["goto"] == "softmax" and posted["x-0-0"] == "0.5"  # X's cells posted as one field, grid-x
    expect_at(page, "softmax")
    expect(page).to_have_url(re.compile(r"[?&]stage=softmax(&|$)"))
    assert page.locator("#state").evaluate("f => f.probe") == "same page"  # swapped in, not reloaded
    expect(page.locator('input[name="x-0-0"]')).to_have_value("0.5")
    node(page, "multihead").click()
    expect_at(page, "multihead")
    page.go_back()  # a step is a place in the history
    expect_at(page, "softmax")


@pytest.mark.parametrize("js_enabled", [False])
def test_without_javascript_a_node_is_the_permalink_of_its_stage(page: Page) -> None:
    page.goto("/?preset=block&stage=x")
    for key in ("softmax", "ffn", "qkv"):
        with page.expect_navigation():
            node(page, key).click()
        expect_at(page, key)
        expect(page).to_have_url(re.compile(rf"[?&]stage={key}(&|$)"))


def test_tab_reaches_the_nodes_in_stage_order_and_enter_steps(page: Page) -> None:
    page.goto("/?preset=block")
    keys = [s.key for s in visible_stages(blocks=2)]
    node(page, keys[0]).focus()
    for key in keys[1:]:
        page.keyboard.press("Tab")
        assert page.evaluate("() => document.activeElement.id") == f"map-wide-{key}"
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Shift+Tab")
    assert page.evaluate("() => document.activeElement.id") == "map-wide-addnorm1"
    ring = node(page, "addnorm1").locator("rect.ring").first
    assert ring.evaluate("r => getComputedStyle(r).stroke") == FOCUS_RING  # visible focus
    page.keyboard.press("Enter")
    expect_at(page, "addnorm1")
    # The map is swapped with the stage; the focus comes back to the same node.
    assert page.evaluate("() => document.activeElement.id") == "map-wide-addnorm1"
    # Once the swap has settled (a busy machine's settling once took the focus back after the Tab).
    htmx_idle(page)
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.id") == "map-wide-ffn"
    page.keyboard.press("Enter")
    expect_at(page, "ffn")


def test_a_node_clicked_before_the_new_map_settles_still_steps(page: Page) -> None:
    """htmx wires a swapped-in map up only when it settles (20 ms later); a quick second step must
    not be lost, nor follow the href (a reload)."""
    page.goto("/?preset=block")
    page.locator("#state").evaluate("f => { f.probe = 'same page' }")
    page.evaluate("""() => new Promise(done => {
        const click = id => document.getElementById(id).dispatchEvent(
            new MouseEvent("click", {bubbles: true, cancelable: true}));
        document.addEventListener("htmx:afterSwap", () => { click("map-wide-ffn"); done(); }, {once: true});
        click("map-wide-addnorm1");
    })""")
    expect_at(page, "ffn")
    assert page.locator("#state").evaluate("f => f.probe") == "same page"


@pytest.mark.parametrize(("width", "height"), swept(VIEWPORTS, SAMPLE_SCREENS))  # all in a full run
def test_the_map_fits_the_window_and_stays_legible(page: Page, screenshot: Callable[..., Path],
                                                  width: int, height: int) -> None:
    page.set_viewport_size({"width": width, "height": height})
    for url in ("/?preset=bank-river&stage=softmax", "/?preset=translate&stage=scores",
                "/?preset=block&stage=ffn"):
        page.goto(url)
        svg = visible_map(page)
        expect(svg).to_have_count(1)
        fit = svg.evaluate("""s => {
            const box = s.getBoundingClientRect(), nav = s.parentElement;
            const label = s.querySelector('a.current text.label') || s.querySelector('text.label');
            return {right: box.right, height: box.height, page: document.documentElement.clientWidth,
                    navOverflow: nav.scrollWidth - nav.clientWidth,
                    labelPx: parseFloat(getComputedStyle(label).fontSize) * box.width / s.viewBox.baseVal.width};
        }""")
        assert fit["right"] <= fit["page"], (url, fit)
        assert fit["navOverflow"] <= 0, (url, fit)
        assert fit["labelPx"] >= MIN_LABEL_PX, (url, fit)
        assert fit["height"] <= (140 if width > 800 else 240), (url, fit)
    page.evaluate("() => window.scrollTo(0, document.querySelector('.pipeline-map').getBoundingClientRect().top "
                  "+ window.scrollY - 8)")
    screenshot(f"map-{width}x{height}", full_page=False)


def test_presenter_mode_steps_with_the_map(page: Page) -> None:
    page.goto("/?preset=default&present=on")
    expect(page.locator("#workspace")).to_have_class(re.compile(r"\bpresent\b"))
    svg = visible_map(page)
    box = svg.bounding_box()
    assert box is not None and box["height"] <= 150  # the stage below stays the largest thing
    node(page, "softmax").click()
    expect_at(page, "softmax")
    expect(page.locator("#workspace")).to_have_class(re.compile(r"\bpresent\b"))
