"""Selecting a head and switching heads off on the real models' pages, in a real Chromium: every way of selecting a
head brings its step-through into view and asks for that part alone (not the page); switching heads off brings the
candidates into view with a sentence saying what changed; Enter in the text runs the model and Shift+Enter makes a
new line; the saved candidates figure names its text. Screenshots of both pages at the four screens a class has,
after a head's selection and after heads switched off, go to test-artifacts/.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from tests.browser.conftest import htmx_idle, save_screenshot
from tests.browser.test_decoder_page import TEXT, rect, wait_for_decoder
from tests.browser.test_figures import saved_svg
from tests.conftest import VIEWPORTS

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Response

pytestmark = pytest.mark.browser

HEAD_PART_BYTES = 150_000  # /decoder: a head's selection answers with its step-through, not the page (~350 KB)
MODEL_HEAD_PART_BYTES = 300_000  # /model: its step-through alone is ~210 KB (16 tokens × 64 numbers), the page ~450 KB


@pytest.fixture(scope="module", autouse=True)
def decoder_loaded(browser: Browser, base_url: str) -> None:
    wait_for_decoder(base_url)


def in_view(page: Page, selector: str) -> None:
    """The element's box lies within the viewport, as the page is scrolled now."""
    htmx_idle(page)
    page.wait_for_timeout(50)  # the scroll that follows a swap
    box, height = rect(page, selector), page.viewport_size["height"]
    assert 0 <= box["top"] and box["bottom"] <= height, (selector, box, height)


def head_part(response: Response) -> bool:
    return response.request.headers.get("hx-target") == "steps"


def select_head(page: Page, act: Callable[[], None], name: str, limit: int = HEAD_PART_BYTES) -> Response:
    """Select a head by ``act``: its step-through alone is asked for and swapped in, in view, its map marked."""
    with page.expect_response(head_part) as answer:
        act()
    expect(page.locator("#steps-h")).to_have_text(f"Step through one head: {name}")
    in_view(page, "#steps-h")
    expect(page.locator("a.thumb.selected")).to_have_attribute("data-head", name)
    expect(page.locator("a.thumb.selected")).to_have_count(1)
    assert answer.value.status == 200
    assert len(answer.value.body()) <= limit, len(answer.value.body())
    return answer.value


def test_every_way_of_selecting_a_head_on_decoder_shows_its_step_through(page: Page) -> None:
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto(f"/decoder?text={TEXT}")
    # a map of the 270
    select_head(page, lambda: page.locator('.dv-grid a.thumb[data-head="L18 H7"]').click(), "L18 H7")
    assert "layer=18&head=7" in page.url
    expect(page.locator("#enlarged-h strong")).to_have_text("L18 H7")  # out of band: the enlarged map follows
    expect(page.locator("#last-h")).to_contain_text("in L18 H7")
    assert "layer=18&head=7" in page.locator("#decoder-permalink a").get_attribute("href")
    # a head named by the catalogue of what heads do
    link = page.locator("#catalogue table.catalogue-heads a").first
    name = link.inner_text()
    link.scroll_into_view_if_needed()
    select_head(page, link.click, name)
    # the step-through's own layer and head, then "Step through"
    page.locator("#layer").select_option("5")
    page.locator("#head").select_option("2")
    select_head(page, lambda: page.get_by_role("button", name="Step through").click(), "L5 H2")
    # the enlarged map: a link down to the step-through of the head it shows
    page.evaluate("window.scrollTo(0, 0)")
    page.locator("#enlarged .enlarged-link").click()
    in_view(page, "#steps-h")
    # a cell of the step-through inspected: the step-through answers again, the head kept
    page.locator('#stage-softmax table.heatmap[data-ref="softmax"] tbody tr').nth(4).locator("td").nth(1).click()
    expect(page.locator("#decoder-inspector .inspect-title")).to_contain_text("query 5")
    assert "matrix=softmax&row=5&col=2" in page.url


def test_switching_heads_off_shows_the_candidates_and_what_changed(page: Page) -> None:
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto(f"/decoder?text={TEXT}")
    shortcut = page.locator("#switch-shortcuts a").first
    shortcut.scroll_into_view_if_needed()
    names = page.locator("#switch-shortcuts li .shortcut-heads").first.inner_text()
    shortcut.click()
    change = page.locator("#heads-off-change")
    expect(change).to_contain_text("Off now: L")
    for name in names.split(", "):  # the sentence names them in the order of layers
        expect(change).to_contain_text(name)
    expect(change).to_contain_text("with every head on")
    in_view(page, "#cand-h")
    expect(page.locator("li.bar .was").first).to_be_visible()
    expect(page.locator(".dv-grid a.thumb.off")).to_have_count(3)  # the rest follows, the heads faded
    # and back on: the sentence goes, the candidates stay in view
    page.locator("#switch-shortcuts a", has_text="Switch every head back on").scroll_into_view_if_needed()
    page.locator("#switch-shortcuts a", has_text="Switch every head back on").click()
    expect(page.locator("#heads-off-change")).to_have_count(0)
    in_view(page, "#cand-h")
    expect(page.locator(".dv-grid a.thumb.off")).to_have_count(0)


def test_writing_a_token_asks_for_the_next_word_then_the_rest(page: Page) -> None:
    page.goto(f"/decoder?text={TEXT}")
    targets: list[str] = []
    page.on("request", lambda r: targets.append(r.headers.get("hx-target", "")) if "/decoder?" in r.url else None)
    page.get_by_role("button", name="Write 1 token").click()
    expect(page.locator(".tokens-line .tok-chip")).to_have_count(6)
    expect(page.locator("#steps .x-wrap svg")).to_be_visible()
    htmx_idle(page)
    expect(page.locator("#rest-loader")).not_to_have_class("htmx-request")
    assert targets[:2] == ["next-row", "decoder-rest"], targets
    assert page.locator("#steps-h").inner_text() != ""
    assert page.locator(".strip .strip-tok").count() == 6  # the last token's row, of the longer text


@pytest.mark.parametrize("path", ["/decoder", "/model"])
def test_enter_runs_the_model_and_shift_enter_makes_a_new_line(page: Page, path: str) -> None:
    page.goto(f"{path}?text={TEXT}")
    box = page.locator("#text")
    box.click()
    page.keyboard.press("End")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("Rome")
    expect(box).to_have_value(f"{TEXT}\nRome")
    box.fill(f"{TEXT} Paris. The capital of Italy is")
    page.keyboard.press("End")
    page.keyboard.press("Enter")
    expect(box).to_have_value(f"{TEXT} Paris. The capital of Italy is")  # no new line added
    page.wait_for_url("**text=The+capital+of+France+is+Paris.+The+capital+of+Italy+is*")
    htmx_idle(page)
    if path == "/decoder":
        expect(page.locator(".tokens-line .tok-chip").last).to_have_text("␣is")
        expect(page.locator(".tokens-line .tok-chip")).to_have_count(12)


def test_selecting_a_head_on_model_shows_its_step_through(page: Page) -> None:
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto("/model")
    select_head(page, lambda: page.locator('#model-view a.thumb[data-head="L2 H9"]').click(), "L2 H9",
                MODEL_HEAD_PART_BYTES)
    assert "layer=2&head=9" in page.url
    expect(page.locator("#enlarged-h strong")).to_have_text("L2 H9")
    link = page.locator("#compare a.shift-head").first
    name = link.inner_text()
    link.scroll_into_view_if_needed()
    select_head(page, link.click, name, MODEL_HEAD_PART_BYTES)


def test_a_head_ticked_off_on_the_model_page_keeps_its_cosine_in_view(page: Page) -> None:
    page.goto("/model")
    page.locator("#off-3-4").scroll_into_view_if_needed()
    before = page.locator("#switch .cos-after").inner_text()
    page.locator("#off-3-4").check()
    expect(page.locator("#switch .cos-after")).not_to_have_text(before)
    in_view(page, "#switch .cosines")


def test_the_saved_candidates_figure_names_its_text(page: Page) -> None:
    page.goto(f"/decoder?text={TEXT}")
    words = saved_svg(page, page.locator("#candidates details.save-figure"), "decoder-candidates.svg")
    assert f"After the text “{TEXT}”" in words, words


@pytest.mark.slow
@pytest.mark.parametrize("width, height", VIEWPORTS)
def test_screenshots_after_a_head_and_heads_off(page: Page, width: int, height: int) -> None:
    """For the eye: both pages after a head's selection and after heads switched off, at each screen."""
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"/decoder?text={TEXT}")
    select_head(page, lambda: page.locator('.dv-grid a.thumb[data-head="L18 H7"]').click(), "L18 H7")
    save_screenshot(page, f"decoder-head-{width}x{height}", full_page=False)
    page.locator("#switch-shortcuts a").first.scroll_into_view_if_needed()
    page.locator("#switch-shortcuts a").first.click()
    expect(page.locator("#heads-off-change")).to_contain_text("Off now")
    in_view(page, "#cand-h")
    save_screenshot(page, f"decoder-off-{width}x{height}", full_page=False)
    page.goto("/model")
    select_head(page, lambda: page.locator('#model-view a.thumb[data-head="L2 H9"]').click(), "L2 H9",
                MODEL_HEAD_PART_BYTES)
    save_screenshot(page, f"model-head-{width}x{height}", full_page=False)
    page.locator("#off-3-4").scroll_into_view_if_needed()
    page.locator("#off-3-4").check()
    htmx_idle(page)
    expect(page.locator(".cos-after")).to_be_visible()
    save_screenshot(page, f"model-off-{width}x{height}", full_page=False)
