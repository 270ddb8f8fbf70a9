"""Presenter mode in a real Chromium: large type, one stage per screen, ←/→ to step, the inspector, exit."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from app.lesson.stages import visible_stages

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from playwright.sync_api import Locator, Page

pytestmark = pytest.mark.browser

STAGE_ORDER = tuple(s.key for s in visible_stages(blocks=0))  # x, qkv, scores, scaled, mask, softmax, output, multihead
PRESENTING = re.compile(r"\bpresent\b")


def current_stage(page: Page) -> Locator:
    return page.locator("#stages article.stage")


def font_px(locator: Locator) -> float:
    return float(locator.evaluate("el => parseFloat(getComputedStyle(el).fontSize)"))


def focus_body(page: Page) -> None:
    page.evaluate("() => document.activeElement && document.activeElement.blur()")


def enter_presenter_mode(page: Page) -> None:
    page.get_by_role("button", name="Presenter mode").click()
    expect(page.locator("#workspace")).to_have_class(PRESENTING)


def test_presenter_mode_shows_one_large_stage_and_steps_with_the_arrow_keys(
    page: Page, screenshot: Callable[..., Path]
) -> None:
    page.goto("/?preset=three-token")
    normal_formula = font_px(page.locator("#stage-x .formula"))
    normal_number = font_px(page.locator('#stage-x table.heatmap[data-ref="x"] tbody td').first)
    expect(page.locator("#editor")).to_be_visible()

    enter_presenter_mode(page)
    expect(page.locator("#editor")).to_be_hidden()
    expect(page.locator("header.top form")).to_have_count(5)  # scenario, sentence, join, open a file, language
    for form in page.locator("header.top form").all():
        expect(form).to_be_hidden()
    box = page.locator("header.top").bounding_box()  # the h1 stays for screen readers, out of sight
    assert box is not None and box["width"] <= 1 and box["height"] <= 1
    expect(page.locator("#preset-choice")).to_be_hidden()
    expect(page.locator("#state input[name='x-0-0']")).to_have_count(1)  # hidden, still posted
    expect(page.locator("#state input[name='present']")).to_have_value("on")
    expect(current_stage(page)).to_have_id("stage-x")
    expect(page.get_by_role("button", name="Exit presenter mode")).to_be_visible()

    formula = page.locator("#stage-x .formula")
    expect(formula).to_be_visible()
    assert font_px(formula) >= 2 * normal_formula
    assert font_px(formula) >= 2.2 * 16
    number = page.locator('#stage-x table.heatmap[data-ref="x"] tbody td').first
    assert font_px(number) >= max(1.3 * 16, 1.5 * normal_number)
    # The title and formula sit above the matrices, which are centred on the screen.
    title_box = page.locator("#stage-x-h").bounding_box()
    formula_box = formula.bounding_box()
    matrix_box = page.locator('#stage-x table.heatmap[data-ref="x"]').bounding_box()
    assert title_box and formula_box and matrix_box
    assert title_box["y"] < formula_box["y"] < matrix_box["y"]
    viewport = page.viewport_size
    assert viewport
    assert abs(matrix_box["x"] + matrix_box["width"] / 2 - viewport["width"] / 2) < 40

    focus_body(page)
    for key in STAGE_ORDER[1:]:
        page.keyboard.press("ArrowRight")
        expect(current_stage(page)).to_have_id(f"stage-{key}")
        expect(current_stage(page)).to_have_count(1)
        expect(page.locator("#workspace")).to_have_class(PRESENTING)  # survives every swap
        expect(page.locator(f"#stage-{key} .formula")).to_be_visible()
    expect(page.locator("#next-stage")).to_be_disabled()
    for key in reversed(STAGE_ORDER[:-1]):
        page.keyboard.press("ArrowLeft")
        expect(current_stage(page)).to_have_id(f"stage-{key}")
    expect(page.locator("#prev-stage")).to_be_disabled()
    expect(page.locator("#editor")).to_be_hidden()

    # A teacher selects a weight: the inspector writes out its softmax row, in large type.
    page.locator("#map-wide-softmax").click()  # the teacher steps with the map
    expect(current_stage(page)).to_have_id("stage-softmax")
    page.locator('table.heatmap[data-ref="softmax.0"] tbody tr').nth(2).locator("td").first.click()
    inspector = page.locator("#inspector")
    expect(inspector).to_contain_text("Attention weights of query 3")
    selected = inspector.locator("tr.sel")
    expect(selected.locator("math[alttext='4.113 / 8.169']")).to_have_count(1)  # exp ÷ the row's sum, typeset
    expect(selected).to_contain_text("= 0.503")
    expect(inspector).to_be_visible()
    assert font_px(inspector.locator(".arith-table")) >= 1.3 * 16
    expect(page.locator("#workspace")).to_have_class(PRESENTING)
    screenshot("presenter-softmax", full_page=False)

    page.get_by_role("button", name="Exit presenter mode").click()
    expect(page.locator("#workspace")).not_to_have_class(PRESENTING)
    expect(page.locator("#editor")).to_be_visible()
    expect(page.locator("header.top")).to_be_visible()
    expect(current_stage(page)).to_have_id("stage-softmax")
    expect(page.locator("#inspector")).to_contain_text("Attention weights of query 3")
    expect(page.locator("#state input[name='present']")).to_have_value("")
    assert font_px(page.locator("#stage-softmax .formula")) == normal_formula


def test_escape_leaves_presenter_mode_opened_by_its_url(page: Page) -> None:
    page.goto("/?preset=three-token&present=1")
    expect(page.locator("#workspace")).to_have_class(PRESENTING)
    expect(page.locator("#editor")).to_be_hidden()
    focus_body(page)
    page.keyboard.press("ArrowRight")
    expect(current_stage(page)).to_have_id("stage-qkv")
    expect(page).to_have_url(re.compile(r"[?&]present=on\b"))  # the address keeps the mode
    page.reload()
    expect(page.locator("#workspace")).to_have_class(PRESENTING)
    expect(current_stage(page)).to_have_id("stage-qkv")
    focus_body(page)
    page.keyboard.press("Escape")
    expect(page.locator("#workspace")).not_to_have_class(PRESENTING)
    expect(page.locator("#editor")).to_be_visible()
    expect(current_stage(page)).to_have_id("stage-qkv")


def test_an_edit_made_before_presenting_is_kept_through_presenter_mode(page: Page) -> None:
    page.goto("/?preset=three-token")
    x00 = page.locator('input[name="x-0-0"]')
    with page.expect_response(lambda r: r.url.endswith("/stages") and r.request.method == "POST"):
        x00.fill("2.5")
    enter_presenter_mode(page)
    expect(page.locator('#stage-x table.heatmap[data-ref="x"] tbody td').first).to_have_text("2.500")
    focus_body(page)
    page.keyboard.press("ArrowRight")
    expect(current_stage(page)).to_have_id("stage-qkv")
    page.get_by_role("button", name="Exit presenter mode").click()
    expect(page.locator("#editor")).to_be_visible()
    expect(x00).to_have_value("2.5")


@pytest.mark.parametrize("js_enabled", [False])
def test_presenter_mode_without_javascript(page: Page) -> None:
    page.goto("/?preset=three-token")
    page.get_by_role("button", name="Presenter mode").click()
    expect(page.locator("#workspace")).to_have_class(PRESENTING)
    expect(page.locator("#editor")).to_be_hidden()
    page.locator("#next-stage").click()
    expect(current_stage(page)).to_have_id("stage-qkv")
    expect(page.locator("#workspace")).to_have_class(PRESENTING)
    page.get_by_role("button", name="Exit presenter mode").click()
    expect(page.locator("#editor")).to_be_visible()
    expect(current_stage(page)).to_have_id("stage-qkv")


@pytest.mark.parametrize("present", [True, False])
def test_next_goes_on_past_block_one_into_block_two(page: Page, present: bool) -> None:
    """With blocks, the stepper does not stop at block 1's last stage: Next (or →) shows block 2's first stage,
    whose input is block 1's output, and Prev comes back."""
    block_stages = [s.key for s in visible_stages(blocks=2)]
    page.goto(f"/?preset=block&stage={block_stages[-1]}" + ("&present=on" if present else ""))
    block = page.locator(".view-options select[name='block']")
    expect(block).to_have_value("0")
    expect(page.locator("#next-stage")).to_be_enabled()
    focus_body(page)
    page.keyboard.press("ArrowRight")
    expect(current_stage(page)).to_have_id(f"stage-{block_stages[0]}")
    expect(block).to_have_value("1")
    expect(current_stage(page).locator(".block-note")).to_have_text("block 2 of 2")
    expect(current_stage(page).locator("figcaption").first).to_contain_text("output of block 1")
    expect(page).to_have_url(re.compile(r"[?&]block=1\b"))
    page.locator("#next-stage").click()
    expect(current_stage(page)).to_have_id(f"stage-{block_stages[1]}")
    expect(block).to_have_value("1")
    page.locator("#prev-stage").click()
    expect(current_stage(page)).to_have_id(f"stage-{block_stages[0]}")  # each step lands before the next press
    page.locator("#prev-stage").click()
    expect(current_stage(page)).to_have_id(f"stage-{block_stages[-1]}")
    expect(block).to_have_value("0")
    expect(page.locator("#workspace")).to_have_class(PRESENTING if present else re.compile(r"^(?!.*\bpresent\b)"))


def test_a_stage_too_large_for_numbers_shows_colours_and_the_numbers_on_demand(page: Page) -> None:
    """Sparse attention's 16 × 16 weights on a projector: colours alone, said so; a button shows the numbers at a
    readable size (the page then scrolls); selecting a cell gives its number in the inspector either way."""
    page.set_viewport_size({"width": 1920, "height": 1080})
    page.goto("/?preset=sparse&stage=softmax&present=on")
    stage = page.locator("#stage-softmax")
    expect(stage).to_have_attribute("data-fitted", "1920x1080")
    expect(stage).to_have_class(re.compile(r"\bcells-only\b"))
    note = stage.locator(".fit-note")
    expect(note).to_be_visible()
    expect(note).to_contain_text("Colours only")
    cell = stage.locator('table.heatmap[data-ref="softmax.0"] tbody td').first
    assert cell.evaluate("td => getComputedStyle(td).color") == "rgba(0, 0, 0, 0)"  # transparent: colours alone
    box = stage.locator('table.heatmap[data-ref="softmax.0"]').bounding_box()
    assert box is not None and box["y"] + box["height"] <= 1080

    note.get_by_role("button", name="Show the numbers").click()
    expect(stage).not_to_have_class(re.compile(r"\bcells-only\b"))
    expect(note).to_be_hidden()
    assert font_px(cell) >= 18
    assert cell.evaluate("td => getComputedStyle(td).color") != "rgba(0, 0, 0, 0)"

    cell.click()
    expect(page.locator("#inspector")).to_contain_text("Attention weights of query 1")
