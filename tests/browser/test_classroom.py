"""Predict-then-reveal and snapshot/diff in a real Chromium, the way a student uses them: with the
mouse, from the keyboard, in presenter mode, and across a reload.

Expected numbers come from the pure pipeline, run on the same inputs here.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from app.state.scenario import from_preset
from tests.browser.conftest import htmx_idle
from tests.browser.test_page import cell, cells, fmt, heatmap

try:
    from axe_playwright_python.sync_playwright import Axe
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    Axe = expect = None

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from playwright.sync_api import Page

pytestmark = pytest.mark.browser


def preset_run(preset: str, x_edits: dict[tuple[int, int], float] | None = None):
    sc, _ = from_preset(preset)
    x = sc.x.copy()
    for (i, j), v in (x_edits or {}).items():
        x[i, j] = v
    return replace(sc, x=x).run()


def start_quiz(page: Page) -> None:
    page.get_by_label("quiz: hide each stage's results").check()
    expect(page.locator("section.quiz")).to_be_visible()


def settle(page: Page) -> None:
    htmx_idle(page)


# --- predict, then reveal -------------------------------------------------------------------------


def test_the_summary_that_quotes_a_result_waits_until_the_quiz_ends(page: Page) -> None:
    """three-token's summary quotes the weight 0.503: a quiz must not show it beside the "?"."""
    page.goto("/?preset=three-token&stage=softmax")
    summary = page.locator("#summary")
    expect(summary).to_contain_text("0.503")
    start_quiz(page)
    expect(summary.locator("span.about")).to_be_hidden()  # the first sentence, on the folded line
    expect(summary.locator(".quiz-note")).to_be_visible()
    expect(summary.locator(".more")).to_be_hidden()  # nothing to open: the rest is hidden too
    summary.locator("summary").click()
    expect(summary.locator("p.about")).to_be_hidden()
    assert "0.503" not in summary.inner_text()
    expect(summary).to_contain_text("Three-token worked example")  # which scenario it is stays
    page.get_by_role("button", name="Reveal all").click()
    expect(page.locator("section.quiz")).to_have_count(0)
    expect(summary.locator("span.about")).to_be_visible()
    expect(summary.locator(".quiz-note")).to_be_hidden()


def test_a_student_predicts_a_hidden_weight_and_sees_it_with_its_arithmetic(
    page: Page, screenshot: Callable[..., Path]
) -> None:
    page.goto("/?preset=three-token&stage=softmax")
    weights = heatmap(page, "softmax.0")
    start_quiz(page)
    assert {v for row in cells(weights) for v in row} == {"?"}
    expect(heatmap(page, "scaled.0")).not_to_contain_text("?")  # the operand stays
    expect(page.locator("#inspector")).not_to_contain_text("Attention weights of query")

    value = preset_run("three-token").heads[0].softmax[2, 0]
    cell(weights, 2, 0).click()  # a hidden cell: chosen for the prediction, not inspected
    expect(page.locator('section.quiz [name="guess_row"]')).to_have_value("3")  # counted from 1
    expect(page.locator('section.quiz [name="guess_col"]')).to_have_value("1")
    expect(page.locator("#guess")).to_be_focused()
    expect(page.locator("#inspector")).not_to_contain_text("Attention weights of query")

    page.keyboard.type(f"{value + 0.02:.3f}")
    page.keyboard.press("Enter")
    feedback = page.locator("#quiz-feedback")
    expect(feedback).to_contain_text("Close: within the tolerance.")
    expect(feedback).to_contain_text(f"it is {value:.3f}")
    expect(cell(weights, 2, 0)).to_have_text(f"{value:.3f}")
    expect(page.locator("#inspector")).to_contain_text("Attention weights of query 3")  # and its arithmetic
    assert sum(v == "?" for row in cells(weights) for v in row) == 8
    expect(page.locator("section.quiz")).to_contain_text("weights A: 1 of 9 revealed")
    expect(page).to_have_url(re.compile(r"revealed=softmax\.0\.2\.0"))
    screenshot("quiz-softmax")

    cell(weights, 0, 1).click()
    page.locator("#guess").fill("0.9")
    page.get_by_role("button", name="Check").click()
    expect(feedback).to_contain_text("Off: more than three times the tolerance away.")

    page.locator("#guess").fill("about a half")
    page.get_by_role("button", name="Check").click()
    expect(feedback).to_contain_text("Type a number to predict weights A")
    expect(page.locator("#guess")).to_have_value("about a half")  # what was typed is kept

    page.get_by_role("button", name="Reveal all").click()
    expect(page.locator("section.quiz")).to_have_count(0)
    assert cells(weights) == fmt(preset_run("three-token").heads[0].softmax)


def test_the_quiz_works_from_the_keyboard_and_follows_an_edit(page: Page) -> None:
    page.goto("/?preset=three-token&stage=scores&quiz=on")
    scores = heatmap(page, "scores.0")
    expect(scores.locator("td.qz")).to_have_count(9)
    scores.locator("td[tabindex='0']").focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Enter")  # on a hidden cell: choose it
    expect(page.locator("#guess")).to_be_focused()
    expect(page.locator('section.quiz [name="guess_row"]')).to_have_value("2")  # counted from 1
    expect(page.locator('section.quiz [name="guess_col"]')).to_have_value("2")
    page.keyboard.type("1")
    page.keyboard.press("Enter")
    run = preset_run("three-token")
    expect(cell(scores, 1, 1)).to_have_text(f"{run.heads[0].scores[1, 1]:.3f}")

    # An edit recomputes: the revealed cell shows the new value, the rest stay hidden.
    with page.expect_response(lambda r: r.url.endswith("/stages")):
        page.locator('input[name="x-1-1"]').fill("2")
    edited = preset_run("three-token", {(1, 1): 2.0})
    expect(cell(scores, 1, 1)).to_have_text(f"{edited.heads[0].scores[1, 1]:.3f}")
    expect(scores.locator("td.qz")).to_have_count(8)


def test_a_teacher_quizzes_the_class_in_presenter_mode(page: Page) -> None:
    if Axe is None:
        pytest.skip("axe-playwright-python is not installed")
    page.goto("/?preset=three-token&stage=output&present=on&quiz=on")
    expect(page.locator("#editor")).to_be_hidden()
    expect(page.locator("section.quiz")).to_be_visible()
    expect(heatmap(page, "output.0").locator("td.qz")).to_have_count(6)
    found = Axe().run(page).response["violations"]
    assert [v["id"] for v in found if v["impact"] in ("serious", "critical")] == []
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    page.keyboard.press("ArrowRight")  # the next stage is a quiz too
    expect(page.locator("#stage-multihead")).to_be_visible()
    expect(heatmap(page, "final").locator("td.qz")).to_have_count(9)
    expect(heatmap(page, "output.0").locator("td.qz")).to_have_count(0)  # now an operand


# --- snapshot and diff ----------------------------------------------------------------------------


def test_pin_edit_and_see_what_changed_in_every_stage(page: Page, screenshot: Callable[..., Path]) -> None:
    page.goto("/?preset=three-token&stage=scores")
    page.get_by_role("button", name="Pin this state").click()
    expect(page.locator(".pin-line")).to_contain_text("Pinned “Three-token worked example”")
    expect(page.locator("#stage-scores section.diff")).to_contain_text("Nothing in this stage has changed")

    with page.expect_response(lambda r: r.url.endswith("/stages")):
        page.locator('input[name="x-0-1"]').fill("1.5")
    before, after = preset_run("three-token"), preset_run("three-token", {(0, 1): 1.5})
    delta = heatmap(page, "delta-scores.0")
    expect(delta).to_be_visible()
    assert cells(delta) == fmt(after.heads[0].scores - before.heads[0].scores)
    screenshot("pin-diff-scores")

    page.locator("#map-wide-output").click()
    expect(page.locator("#stage-output")).to_be_visible()
    assert cells(heatmap(page, "delta-output.0")) == fmt(after.heads[0].output - before.heads[0].output)
    assert cells(heatmap(page, "delta-softmax.0")) == fmt(after.heads[0].softmax - before.heads[0].softmax)
    assert cells(heatmap(page, "delta-v.0")) == fmt(after.heads[0].v - before.heads[0].v)

    page.reload()  # the pin is in the address: a reload keeps it
    expect(page.locator(".pin-line")).to_contain_text("Pinned")
    assert cells(heatmap(page, "delta-output.0")) == fmt(after.heads[0].output - before.heads[0].output)

    page.get_by_role("button", name="Back to the pin").click()
    expect(page.locator('input[name="x-0-1"]')).to_have_value("0")
    expect(page.locator("#stage-output section.diff")).to_contain_text("Nothing in this stage has changed")
    page.get_by_role("button", name="Unpin").click()
    expect(page.locator("section.diff")).to_have_count(0)
    expect(page.get_by_role("button", name="Pin this state")).to_be_visible()


def test_a_diff_across_a_new_token_says_the_shape_changed(page: Page) -> None:
    page.goto("/?preset=three-token&stage=qkv")
    page.get_by_role("button", name="Pin this state").click()
    expect(page.locator(".pin-line .pinned")).to_be_visible()
    page.get_by_role("button", name="+ Add token").click()
    settle(page)
    expect(page.locator("#stage-qkv section.diff")).to_contain_text("Q: 3×2 when pinned, 4×2 now.")
    expect(page.locator("#stage-qkv section.diff")).to_contain_text("Unchanged: W_Q, W_K, W_V.")


@pytest.mark.parametrize("js_enabled", [False])
def test_quiz_and_pin_work_without_javascript(page: Page) -> None:
    """Plain form posts: every button submits the whole form and the server answers a page."""
    page.goto("/?preset=three-token&stage=softmax&quiz=on")
    value = preset_run("three-token").heads[0].softmax[1, 2]
    page.locator('section.quiz [name="guess_row"]').fill("2")  # counted from 1: the cell (1, 2)
    page.locator('section.quiz [name="guess_col"]').fill("3")
    page.locator("#guess").fill(f"{value:.2f}")
    page.get_by_role("button", name="Check").click()
    expect(page.locator("#quiz-feedback")).to_contain_text("Close: within the tolerance.")
    expect(cell(heatmap(page, "softmax.0"), 1, 2)).to_have_text(f"{value:.3f}")

    page.get_by_role("button", name="Pin this state").click()
    expect(page.locator(".pin-line")).to_contain_text("Pinned")
    page.locator('input[name="x-2-2"]').fill("0.5")
    page.get_by_role("button", name="Check").click()  # any submit recomputes
    before, after = preset_run("three-token"), preset_run("three-token", {(2, 2): 0.5})
    assert cells(heatmap(page, "delta-scaled.0")) == fmt(after.heads[0].scaled - before.heads[0].scaled)
