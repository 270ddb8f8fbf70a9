"""Stepping through the stages on a phone (390×844): the stepper is a bar at the bottom of the screen, so Next stays
under the thumb after every tap, and each new stage's heading lands at the top. Without JavaScript a step loads a
whole page at #stages: the stage on the screen, the Inputs drawer closed unless the student opened it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
HEADING = "#stages article.stage h3"


@pytest.fixture
def inputs_open() -> bool:
    """The page as it comes: the inputs drawer closed."""
    return False


# Resolves once ``selector`` has kept its place for six frames (about 0.1 s): a smooth scroll has ended.
SCROLLED = """(selector) => new Promise((done) => {
  let last = null, same = 0;
  const tick = () => {
    const y = document.querySelector(selector).getBoundingClientRect().top;
    same = last !== null && Math.abs(y - last) < 0.5 ? same + 1 : 0;
    last = y;
    if (same >= 6) done(true); else requestAnimationFrame(tick);
  };
  tick();
})"""


def on_screen(page: Page, selector: str) -> dict:
    box = page.locator(selector).bounding_box()
    assert box is not None, f"{selector} is not drawn"
    return box


def assert_within(box: dict, what: str) -> None:
    assert box["y"] >= 0 and box["y"] + box["height"] <= PHONE["height"], f"{what} off the screen: {box}"
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], f"{what} off the screen: {box}"


def test_next_stays_in_reach_on_a_phone(page: Page) -> None:
    page.set_viewport_size(PHONE)
    page.goto("/?stage=x")
    stages = ["qkv", "scores", "scaled", "mask", "softmax"]
    tops = []
    for key in stages:
        page.locator("#next-stage").click()
        expect(page.locator(f"#stage-{key}")).to_be_visible()
        page.wait_for_function(SCROLLED, arg=HEADING)  # the smooth scroll, however long its distance makes it
        assert_within(on_screen(page, "#next-stage"), f"after Next to {key}, the Next button")
        heading = on_screen(page, HEADING)
        assert_within(heading, f"after Next to {key}, the stage's heading")
        tops.append(round(heading["y"]))
    assert max(tops) <= 40, f"each Next should land the heading at the top of the screen: {tops}"


@pytest.mark.parametrize("js_enabled", [False])
def test_a_step_without_javascript_lands_on_the_stage(page: Page) -> None:
    page.set_viewport_size(PHONE)
    page.goto("/?stage=x")
    drawer = page.locator("#editor")
    expect(drawer).not_to_have_attribute("open", "")  # the stage first, the inputs folded
    for key in ("qkv", "scores", "scaled"):
        page.locator("#next-stage").click()
        expect(page.locator(f"#stage-{key}")).to_have_count(1)
        assert page.url.endswith("#stages"), page.url
        assert page.evaluate("scrollY") > 0, "the page loaded at its top"
        assert_within(on_screen(page, HEADING), f"at {key}, the stage's heading")
        assert_within(on_screen(page, "#next-stage"), f"at {key}, the Next button")
        expect(drawer).not_to_have_attribute("open", "")
    # A student who opens the drawer and edits keeps it open; their next step lands on the stage all the same.
    drawer.locator("> summary").click()
    page.locator("input[name='x-0-0']").fill("0.5")
    page.locator("input[name='x-0-0']").press("Enter")
    expect(drawer).to_have_attribute("open", "")
    page.locator("#next-stage").click()
    expect(page.locator("#stage-mask")).to_have_count(1)
    expect(drawer).to_have_attribute("open", "")
    assert_within(on_screen(page, "#next-stage"), "with the drawer open, the Next button")
