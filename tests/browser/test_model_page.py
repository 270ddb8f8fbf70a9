""""Your sentence" (GET /model) in a real Chromium: the 72 maps, a head enlarged on selection, one head's
step-through, a live edit of the sentence (timed, with a generous bound), the two sentences compared, a
head switched off, and the page at the four screens a class has, never scrolling sideways."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from tests.browser.conftest import PageLog, save_screenshot
from tests.browser.test_accessibility import violations
from tests.conftest import SAMPLE_SCREENS, VIEWPORTS, swept

try:
    from axe_playwright_python.sync_playwright import Axe
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    Axe = expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

SWAP_BOUND_S = 5.0  # the budget is 1 s (measured in the report); a test only guards against a hang


def overflow(page: Page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def test_the_model_view_renders_72_maps_and_selecting_one_enlarges_it(page: Page) -> None:
    page.goto("/model")
    thumbs = page.locator("a.thumb")
    expect(thumbs).to_have_count(72)
    # every map drew: a PNG as wide as the sentence is long
    assert page.evaluate("[...document.querySelectorAll('a.thumb img')]"
                         ".every(i => i.complete && i.naturalWidth === 16)")
    target = page.locator('a.thumb[data-head="L2 H9"]')
    box = target.bounding_box()
    target.hover()  # hovering enlarges the map in place
    page.wait_for_timeout(100)
    assert target.bounding_box()["width"] > 2 * box["width"]
    target.focus()
    page.keyboard.press("Enter")  # a keyboard selection, as a tap or a click
    expect(page.locator("#enlarged-h strong")).to_have_text("L2 H9")
    expect(page.locator('a.thumb.selected')).to_have_attribute("data-head", "L2 H9")
    assert "layer=2&head=9" in page.url
    svg = page.locator("#enlarged svg.head-svg")
    expect(svg.locator("text.row-lab")).to_have_count(16)  # the tokens down the side …
    expect(svg.locator("text.col-lab")).to_have_count(16)  # … and across the top
    expect(svg.locator("text.row-lab").nth(10)).to_have_text("11 it")
    page.locator("#enlarged details.numbers summary").click()  # the numbers on demand
    expect(page.locator("#enlarged table.heatmap tbody tr")).to_have_count(16)


def test_stepping_through_one_head_shows_every_stage(page: Page) -> None:
    page.goto("/model")
    page.select_option("#layer", "5")
    expect(page.locator("#steps-h")).to_contain_text("L5 H")
    page.select_option("#head", "3")
    expect(page.locator("#steps-h")).to_have_text("Step through one head: L5 H3")
    for stage in ("x", "qkv", "scores", "scaled", "softmax", "output"):
        expect(page.locator(f"#stage-{stage}")).to_be_visible()
    expect(page.locator("#stage-x svg.x-svg image")).to_have_count(1)
    expect(page.locator("#stage-qkv table.heatmap")).to_have_count(3)
    expect(page.locator("#stage-softmax svg.lines-svg")).to_be_visible()
    # The lines view and the output come in the selection's second answer: nothing left waiting for it.
    expect(page.locator('#stage-output table[data-ref="output"]')).to_be_visible()
    expect(page.locator('#steps [aria-busy="true"]')).to_have_count(0)
    expect(page.locator("#enlarged-h strong")).to_have_text("L5 H3")
    # X's exact numbers on demand
    page.locator("#stage-x details.x-numbers summary").click()
    page.select_option("#x_row", "11")
    expect(page.locator("ol.x-values li")).to_have_count(384)
    # the inspector: click a weight, get its softmax row worked out
    page.locator('#stage-softmax table[data-ref="softmax"] tbody tr').nth(10).locator("td").nth(2).click()
    expect(page.locator("#model-inspector .inspect-title")).to_contain_text("query 11 (it)")
    expect(page.locator("#model-inspector table.arith-table tbody tr")).to_have_count(16)
    assert overflow(page) <= 0


def test_a_live_edit_updates_every_map(page: Page, page_log: PageLog) -> None:
    page_log.allow(422, "/model", "GET")  # the blank sentence, on purpose
    page.goto("/model")
    before = page.locator('a.thumb[data-head="L1 H1"] img').get_attribute("src")
    box = page.locator("#text")
    box.click()
    box.press("End")
    start = time.perf_counter()
    box.press_sequentially(" It was late.", delay=20)
    typed = time.perf_counter()
    expect(page.locator('a.thumb[data-head="L1 H1"] img')).not_to_have_attribute("src", before, timeout=10_000)
    expect(page.locator('a.thumb img[width="20"]')).to_have_count(72)  # 16 + "it was late ." = 20 tokens
    swapped = time.perf_counter()
    assert swapped - typed < SWAP_BOUND_S, (typed - start, swapped - typed)
    assert "late" in page.url  # the permalink follows
    # a bad sentence: the message beside the box, the last good maps still there
    page_text_before = page.locator("#enlarged-h").inner_text()
    box.fill("   ")
    expect(page.locator("#err-model-text")).to_contain_text("first sentence: enter a sentence")
    expect(page.locator("a.thumb")).to_have_count(72)
    assert page.locator("#enlarged-h").inner_text() == page_text_before
    box.fill("The river bank was muddy.")
    expect(page.locator("#err-model-text")).to_be_empty()
    expect(page.locator("#enlarged svg text.row-lab").nth(3)).to_have_text("4 bank")


def test_the_comparison_lists_heads_and_follows_the_query(page: Page) -> None:
    page.goto("/model")
    expect(page.locator("#compare-h")).to_have_text("Two sentences: which heads move “it”?")
    expect(page.locator("ol.shifts li")).to_have_count(8)
    expect(page.locator("ol.shifts li").first).to_contain_text("it → ")
    page.select_option("#q", "3")
    expect(page.locator("#compare-h")).to_have_text("Two sentences: which heads move “animal”?")
    page.locator("#text2").fill("A different sentence altogether.")
    expect(page.locator("p.not-aligned")).to_contain_text("can't be aligned")


def test_switching_a_head_off_changes_the_cosine(page: Page) -> None:
    page.goto("/model")
    before = page.locator("strong.cos-after").inner_text()
    assert before == page.locator("strong.cos-before").inner_text()
    page.locator("#off-l1").check()  # every head of layer 1
    expect(page.locator("p.cosines")).to_contain_text("with 12 heads off")
    after = page.locator("strong.cos-after").inner_text()
    assert after != before
    assert page.locator("strong.cos-before").inner_text() == before
    page.locator("#off-2-3").check()
    expect(page.locator("p.cosines")).to_contain_text("with 13 heads off")
    expect(page.locator('a.thumb[data-head="L2 H3"]')).to_have_class("thumb off")
    assert "off_layer=1" in page.url and "off=2.3" in page.url


@pytest.mark.parametrize(("width", "height"), swept(VIEWPORTS, SAMPLE_SCREENS))  # all in a full run
def test_the_page_fits_every_screen(page: Page, width: int, height: int) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto("/model")
    expect(page.locator("a.thumb")).to_have_count(72)
    assert overflow(page) <= 0, f"{width}×{height}: the page scrolls sideways"
    grid = page.locator(".mv-grid").bounding_box()
    assert grid["x"] >= 0 and grid["x"] + grid["width"] <= width  # all 72 maps side by side within the screen
    if width >= 1366:  # a laptop shows the whole model view on its first screen
        assert grid["y"] + grid["height"] <= height + 200
    save_screenshot(page, f"model-{width}x{height}", full_page=False)
    save_screenshot(page, f"model-{width}x{height}-full")


@pytest.mark.parametrize("js_enabled", [False])
def test_without_javascript_the_page_is_plain_get_forms(page: Page, page_log: PageLog) -> None:
    page_log.allow(422, "/model", "GET")
    page.goto("/model")
    page.locator("#text").fill("The bank by the river flooded.")
    page.locator(".sentence-go button").click()
    page.wait_for_url("**/model?text=The+bank+by+the+river+flooded.*")
    expect(page.locator("#enlarged svg text.row-lab").nth(2)).to_have_text("3 bank")
    page.locator('a.thumb[data-head="L6 H12"]').click()  # a link: the head's step-through
    expect(page.locator("#steps-h")).to_have_text("Step through one head: L6 H12")
    page.locator("#off-3-4").check()
    page.locator("#switch button").click()
    expect(page.locator("p.cosines")).to_contain_text("with 1 head off")
    page.locator("#text").fill("")
    page.locator(".sentence-go button").click()
    expect(page.locator("#err-model-text")).to_contain_text("first sentence: enter a sentence")



@pytest.fixture(scope="module")
def axe() -> Axe:
    if Axe is None:
        pytest.skip("axe-playwright-python is not installed (pip install -e '.[test]')")
    return Axe()


@pytest.mark.slow
def test_the_page_has_no_serious_accessibility_violations(page: Page, axe: Axe) -> None:
    page.goto("/model?matrix=softmax&row=11&col=3&x_row=11")
    expect(page.locator("a.thumb")).to_have_count(72)
    assert violations(axe, page) == []
