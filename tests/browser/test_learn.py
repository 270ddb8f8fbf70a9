"""The Learn panel in a real Chromium: a step trains the weights (the editor, the loss curve and the
attention lines follow), reset restores them, the same works without JavaScript, the backward stages
and their gradient inspector, errors beside the field, and screenshots at the
four screens a class uses (why-√d_k's comparison: test_why_scale.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from app.state.learning import train_page
from app.state.page import preset_page

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from playwright.sync_api import Page

    from tests.browser.conftest import PageLog

pytestmark = pytest.mark.browser

LAPTOP = {"width": 1366, "height": 768}
SCREENS = ((1366, 768), (1920, 1080), (768, 1024), (390, 844))


def strongest_keys(page: Page, stage: str = "softmax") -> list[int]:
    """For each query of the lines figure, the key its heaviest line goes to (lines are drawn in key order)."""
    return page.locator(f"#stage-{stage} svg.lines-svg .qs > .tok").evaluate_all(
        """toks => toks.map((t) => {
             const ws = [...t.querySelectorAll('.e line')].map((l) => parseFloat(l.dataset.w));
             return ws.indexOf(Math.max(...ws));
           })""")


def status(page: Page) -> str:
    return page.locator("#learn .learn-status").inner_text()


def curve_points(page: Page) -> int:
    """How many steps the loss curve draws: its line's points (a single loss is a dot)."""
    return page.locator("#learn svg.loss-chart").evaluate(
        """svg => { const l = svg.querySelector('polyline');
                    return l ? l.getAttribute('points').trim().split(/\\s+/).length : 1; }""")


@pytest.mark.parametrize("js_enabled", [True, False])
def test_translate_trained_100_steps_draws_each_french_word_to_its_counterpart(page: Page, js_enabled: bool) -> None:
    """Seed 003's alignment table, learned from random W_Q and W_K: the heaviest line of Le goes to The,
    chat to cat, …, le to the second the and tapis to mat. Reset brings the random weights back."""
    page.set_viewport_size(LAPTOP)
    page.goto("/?preset=learn-translate")
    before = strongest_keys(page)
    assert before != list(range(6))  # random weights: not yet the alignment
    w_q = page.locator("input[name='w_q-0-0']")
    w_q_before = w_q.input_value()
    assert "after 0 steps" in status(page)

    page.get_by_role("button", name="100 steps").click()
    expect(page.locator("#learn .learn-status")).to_contain_text("after 100 steps")
    assert strongest_keys(page) == list(range(6))
    assert w_q.input_value() != w_q_before  # the trained weights are in the inputs
    assert curve_points(page) >= 100
    loss = float(page.locator("#learn .learn-status").get_attribute("data-loss"))
    assert loss < 0.96  # the table's entropy, 0.948, is the floor
    if js_enabled:
        assert "learn_losses=" in page.url  # the permalink carries the curve

    page.get_by_role("button", name="Reset to before training").click()
    expect(page.locator("#learn .learn-status")).to_contain_text("after 0 steps")
    assert w_q.input_value() == w_q_before
    assert strongest_keys(page) == before


def test_one_step_and_ten_steps_grow_the_curve(page: Page) -> None:
    page.goto("/?preset=learn-previous-token")
    first = page.locator("#stage-softmax svg.lines-svg").inner_html()
    page.get_by_role("button", name="1 step", exact=True).click()
    expect(page.locator("#learn .learn-status")).to_contain_text("after 1 step")
    assert curve_points(page) == 2
    page.get_by_role("button", name="10 steps").click()
    expect(page.locator("#learn .learn-status")).to_contain_text("after 11 steps")
    assert curve_points(page) == 12
    assert page.locator("#stage-softmax svg.lines-svg").inner_html() != first  # the lines moved
    # The page's numbers are the pipeline's: the same 11 steps in Python give the same weights.
    sc, view = preset_page("learn-previous-token")
    sc, _ = train_page(sc, view.learning, 1)
    sc, _ = train_page(sc, _, 10)
    expected = sc.run().heads[0].softmax
    shown = page.locator("table[data-ref='softmax.0'] tbody tr").first.locator("td").all_inner_texts()
    assert shown[0] == f"{expected[0, 0]:.3f}"


def test_a_bad_learning_rate_is_named_and_the_last_good_page_stays(page: Page, page_log: PageLog) -> None:
    page_log.allow(422, "/stages")  # the refusals this test provokes
    page_log.allow(422, "/")
    page.goto("/?preset=learn-translate")
    page.locator("#learn-settings > summary").click()
    rate = page.locator("#learn-rate")
    rate.fill("-1")
    rate.dispatch_event("change")
    expect(page.locator("#err-learn")).to_contain_text("learning rate")
    page.get_by_role("button", name="10 steps").click()
    expect(page.locator("#err-learn")).to_contain_text("learning rate")
    assert "after 0 steps" in status(page)  # nothing trained with the bad value
    rate.fill("0.1")
    rate.dispatch_event("change")
    expect(page.locator("#err-learn")).to_be_empty()
    page.get_by_role("button", name="10 steps").click()
    expect(page.locator("#learn .learn-status")).to_contain_text("after 10 steps")


def test_choosing_a_goal_adds_the_backward_stages_and_the_inspector_writes_a_gradient_out(page: Page) -> None:
    page.goto("/?preset=three-token&stage=softmax")
    expect(page.locator(".backward-map")).to_have_count(0)
    page.locator("#learn-panel > summary").click()
    page.locator("#learn-goal").select_option("attention")
    expect(page.locator(".backward-map .grad-step")).to_have_count(6)
    page.locator(".backward-map .grad-step").nth(1).click()  # 9 ∂L/∂Scores
    expect(page.locator("#stages article.stage")).to_have_id("stage-grad_scores")
    cell = page.locator("table[data-ref='g_scaled.0'] tbody tr").nth(1).locator("td").nth(0)
    cell.click()
    inspector = page.locator("#inspector")
    expect(inspector.locator(".inspect-title")).to_contain_text("∂L/∂Scaled")
    expect(inspector.locator(".arith-table tbody tr")).to_have_count(3)  # the row's three keys, term by term
    printed = float(cell.inner_text().replace("−", "-"))
    result = inspector.locator(".arith.result").inner_text().replace("−", "-").replace("\n", "")
    assert f"{printed:.3f}" in result.replace(" ", "")
    # Next → walks the rest of the backward pass.
    for key in ("grad_q", "grad_k", "grad_v", "grad_w"):
        page.locator("#next-stage").click()
        expect(page.locator("#stages article.stage")).to_have_id(f"stage-{key}")


def test_the_quiz_hides_a_backward_stage_too(page: Page) -> None:
    page.goto("/?preset=learn-translate&stage=grad_scores&quiz=on")
    # ∂L/∂Scaled is drawn once, the equation's middle result: every cell a "?".
    expect(page.locator("table[data-ref='g_scaled.0']")).to_have_count(1)
    expect(page.locator("table[data-ref='g_scaled.0'] td.qz")).to_have_count(36)
    expect(page.locator("table[data-ref='g_scores.0'] td.qz")).to_have_count(36)
    expect(page.locator("table[data-ref='g_softmax.0'] td.qz")).to_have_count(0)  # an operand stays
    expect(page.locator("select[name='guess_matrix'] option")).to_have_count(2)


def test_presenter_mode_steps_through_the_backward_stages(page: Page) -> None:
    page.set_viewport_size(LAPTOP)
    page.goto("/?preset=learn-translate&stage=multihead&present=on")
    page.locator("#next-stage").click()
    expect(page.locator("#stages article.stage")).to_have_id("stage-grad_a")
    expect(page.locator("#stage-grad_a .formula math").first).to_be_visible()
    expect(page.locator("#learn")).to_be_hidden()  # the panel's fields ride along, out of sight


@pytest.mark.parametrize("inputs_open", [False])
def test_the_learn_panel_fits_every_screen(page: Page, screenshot: Callable[..., Path]) -> None:
    """Trained once, then seen on a laptop, a projector, a tablet and a phone: the buttons, the loss and the
    curve on screen without sideways scrolling (the screenshots are in test-artifacts/)."""
    page.set_viewport_size(LAPTOP)
    page.goto("/?preset=learn-translate")
    page.get_by_role("button", name="100 steps").click()
    expect(page.locator("#learn .learn-status")).to_contain_text("after 100 steps")
    for width, height in SCREENS:
        page.set_viewport_size({"width": width, "height": height})
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{width}×{height}: the page is {overflow} px wider than the screen"
        for part in ("#learn .learn-steps", "#learn .learn-status", "#learn svg.loss-chart"):
            box = page.locator(part).bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, f"{part} at {width}×{height}: {box}"
        page.locator("#learn").scroll_into_view_if_needed()
        screenshot(f"learn-translate-{width}x{height}", full_page=False)


@pytest.mark.parametrize("js_enabled", [False])
def test_a_goal_is_chosen_and_trained_without_javascript(page: Page) -> None:
    page.goto("/?preset=three-token&panels=learn")
    page.locator("#learn-goal").select_option("output")
    page.get_by_role("button", name="Set goal").click()
    expect(page.locator(".backward-map .grad-step")).to_have_count(6)
    page.get_by_role("button", name="10 steps").click()
    expect(page.locator("#learn .learn-status")).to_contain_text("after 10 steps")
    losses = page.locator("input[name='learn_losses']").get_attribute("value").split()
    assert len(losses) == 11 and float(losses[-1]) < float(losses[0])
