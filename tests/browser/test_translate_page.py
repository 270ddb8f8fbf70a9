""""Translate" (GET /translate) in a real Chromium: the seeds' bank translated with its lines, the other bank
one click away, the steps with their candidates, the alignment and the 2 × 8 maps, a cross-attention head selected
and stepped through, a bad text's message beside the box with the last good result kept, the same without
JavaScript as plain GET forms, no serious accessibility violation, and the page at the four screens a class has,
never scrolling sideways."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pytest

from app.maths.marian import cross_head, translate
from app.maths.marian_files import load_translator_files
from tests.browser.conftest import PageLog, htmx_idle, save_screenshot
from tests.browser.test_accessibility import violations
from tests.browser.test_class import FOLLOW_MS, Problems, contexts, start_class
from tests.browser.test_page import cells, fmt
from tests.conftest import SAMPLE_SCREENS, VIEWPORTS, swept

try:
    from axe_playwright_python.sync_playwright import Axe
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    Axe = expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

__all__ = ["contexts"]  # the fixture, shared with tests/browser/test_class.py

MONEY = "I deposited money at the bank."


def overflow(page: Page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def test_the_bank_is_translated_with_where_each_word_looked(page: Page) -> None:
    page.goto("/translate")
    expect(page.locator(".translated .tgt")).to_have_text("A margem do rio estava enlameado.")
    lines = page.locator("#translate-lines-figure svg")
    expect(lines).to_be_visible()
    assert lines.locator("line, path").count() > 10
    rows = page.locator("table.written-steps tbody tr")
    expect(rows).to_have_count(11)  # ten pieces and the end
    expect(rows.nth(1).locator(".piece")).to_have_text("▁margem")
    expect(rows.nth(1)).to_contain_text("2 ▁bank")  # the alignment head looked at "bank" to write "margem"
    expect(rows.nth(10).locator(".piece")).to_have_text("</s>")
    expect(page.locator("#translate-maps a.thumb")).to_have_count(16)
    expect(page.locator(".encoder-maps .thumb")).to_have_count(48)
    run = translate(load_translator_files("en-pt"), "The bank of the river was muddy.")
    assert cells(page.locator('table.heatmap[data-ref="alignment"]')) == fmt(run.alignment, 2)

    page.locator(".sentence-go .hint a", has_text=MONEY).click()
    expect(page.locator(".translated .tgt")).to_have_text("Eu depositei dinheiro no banco.")


def test_selecting_a_map_steps_through_that_head_on_its_numbers(page: Page) -> None:
    page.goto("/translate")
    page.locator('#translate-maps a.thumb[aria-label="Layer 1, head 4"]').click()
    expect(page.locator("#tr-steps-h")).to_have_text("Step through one cross-attention head: L1 H4")
    htmx_idle(page)
    assert "layer=1&head=4" in page.url
    files = load_translator_files("en-pt")
    head = cross_head(files, translate(files, "The bank of the river was muddy."), 0, 3)
    assert cells(page.locator('#tr-steps table.heatmap[data-ref="softmax"]')) == fmt(head.softmax, 2)
    assert cells(page.locator('#tr-steps table.heatmap[data-ref="scores"]')) == fmt(head.scores, 2)
    np.testing.assert_allclose(head.softmax.sum(1), 1, atol=1e-5)


def test_portuguese_to_english_and_a_bad_text_keeps_the_last_result(page: Page, page_log: PageLog) -> None:
    page_log.allow(422, "/translate", "GET")
    page.goto("/translate")
    page.locator("#text").fill("Eu depositei dinheiro no banco.")
    page.locator("#direction").select_option("pt-en")
    page.locator(".sentence-go button").click()
    expect(page.locator(".translated .tgt")).to_have_text("I deposited money in the bank.")
    page.locator("#text").fill("")
    page.locator(".sentence-go button").click()
    expect(page.locator("#err-translate-text")).to_contain_text("text: enter a sentence")
    expect(page.locator(".translated .tgt")).to_have_text("I deposited money in the bank.")  # still on screen


def test_the_first_screen_links_to_the_translator(page: Page) -> None:
    page.goto("/")
    if not page.locator("form.model-entry").is_visible():
        page.locator("details.app-more > summary").click()
    page.locator("#model-text").fill(MONEY)
    page.locator("form.model-entry button", has_text="Translate").click()
    expect(page.locator(".translated .tgt")).to_have_text("Eu depositei dinheiro no banco.")


@pytest.mark.parametrize("js_enabled", [False])
def test_without_javascript_the_page_is_plain_get_forms(page: Page, page_log: PageLog) -> None:
    page_log.allow(422, "/translate", "GET")
    page.goto("/translate")
    page.locator("#text").fill("The river bank flooded.")
    page.locator(".sentence-go button").click()
    page.wait_for_url("**/translate?text=The+river+bank+flooded.*")
    expect(page.locator(".translated .tgt")).not_to_be_empty()
    expect(page.locator("#translate-lines-figure svg")).to_be_visible()
    page.locator('#translate-maps a.thumb[aria-label="Layer 2, head 3"]').click()  # a link
    expect(page.locator("#tr-steps-h")).to_have_text("Step through one cross-attention head: L2 H3")
    page.locator("#text").fill("")
    page.locator(".sentence-go button").click()
    expect(page.locator("#err-translate-text")).to_contain_text("text: enter a sentence")


@pytest.mark.parametrize(("width", "height"), swept(VIEWPORTS, SAMPLE_SCREENS))  # all in a full run
def test_the_page_fits_every_screen(page: Page, width: int, height: int) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto("/translate")
    expect(page.locator(".translated .tgt")).to_be_visible()
    assert overflow(page) <= 0, f"{width}×{height}: the page scrolls sideways"
    translation = page.locator(".translated").bounding_box()
    assert translation["y"] + translation["height"] <= height  # the translation on the first screen
    figure = page.locator("#translate-lines-figure svg").bounding_box()
    assert figure["x"] >= 0 and figure["x"] + figure["width"] <= width
    save_screenshot(page, f"translate-{width}x{height}", full_page=False)
    save_screenshot(page, f"translate-{width}x{height}-full")


@pytest.fixture(scope="module")
def axe() -> Axe:
    if Axe is None:
        pytest.skip("axe-playwright-python is not installed (pip install -e '.[test]')")
    return Axe()


def test_no_serious_accessibility_violation(page: Page, axe: Axe) -> None:
    page.goto("/translate")
    expect(page.locator(".translated .tgt")).to_be_visible()
    page.locator(".encoder-maps summary").click()
    assert violations(axe, page) == []


def test_the_embed_in_a_frame_of_720_pixels(page: Page) -> None:
    page.set_viewport_size({"width": 720, "height": 560})
    page.goto("/embed/translate?text=I+deposited+money+at+the+bank.")
    expect(page.locator(".translated .tgt")).to_have_text("Eu depositei dinheiro no banco.")
    expect(page.locator("#translate-lines-figure svg")).to_be_visible()
    assert overflow(page) <= 0
    page.locator("#text").fill("The bank of the river was muddy.")
    page.locator(".sentence-line button").click()
    expect(page.locator(".translated .tgt")).to_have_text("A margem do rio estava enlameado.")
    save_screenshot(page, "translate-embed-720x560", full_page=False)


def test_students_follow_the_teacher_onto_the_translator(contexts: Callable) -> None:  # noqa: F811
    """A teacher and a student, each in a browser context of their own: the teacher shows the translator from the
    class panel, picks the other bank and a head; the student's page follows each, then the class goes back to a
    scenario."""
    problems = Problems()
    teacher = problems.watch(contexts().new_page(), "teacher")
    code = start_class(teacher)
    plain = code.replace("-", "")
    student = problems.watch(contexts().new_page(), "student")
    student.goto(f"/class/{plain}")
    expect(student.locator("#class-panel")).to_contain_text(f"Following the teacher · class {code}")

    teacher.get_by_role("button", name="Show the translator").click()
    teacher.wait_for_url(re.compile(rf"/class/{plain}/translate$"))
    expect(student.locator("h1")).to_have_text("Translate: where each word looks", timeout=FOLLOW_MS + 10_000)
    expect(student.locator(".translated .tgt")).to_have_text("A margem do rio estava enlameado.")

    teacher.locator(".sentence-go .hint a", has_text=MONEY).click()
    expect(teacher.locator(".translated .tgt")).to_have_text("Eu depositei dinheiro no banco.")
    expect(student.locator(".translated .tgt")).to_have_text("Eu depositei dinheiro no banco.",
                                                            timeout=FOLLOW_MS + 10_000)
    expect(student.locator("#text")).to_have_value(MONEY)
    teacher.locator('#translate-maps a.thumb[aria-label="Layer 1, head 6"]').click()
    expect(student.locator("#tr-steps-h")).to_have_text("Step through one cross-attention head: L1 H6",
                                                        timeout=FOLLOW_MS + 10_000)
    save_screenshot(student, "translate-class-student", full_page=False)

    teacher.locator("#class-scenario").select_option("translate")
    teacher.get_by_role("button", name="Show it to the class").click()
    expect(student.locator("h1")).to_have_text("Attention, step by step", timeout=FOLLOW_MS + 10_000)
    assert not problems.seen, problems.seen


def test_asked_first_a_student_taps_and_the_teacher_reveals(contexts: Callable) -> None:  # noqa: F811
    problems = Problems()
    teacher = problems.watch(contexts().new_page(), "teacher")
    code = start_class(teacher)
    plain = code.replace("-", "")
    student = problems.watch(contexts(390, 844).new_page(), "student")
    student.goto(f"/class/{plain}")
    expect(student.locator("#class-panel")).to_contain_text(f"Following the teacher · class {code}")

    panel = teacher.locator("form.class-switch", has=teacher.get_by_role("button", name="Show the translator"))
    panel.get_by_role("checkbox").check()
    panel.get_by_role("button", name="Show the translator").click()
    teacher.wait_for_url(re.compile(rf"/class/{plain}/translate$"))
    expect(student.locator("#class-taps-h")).to_have_text("Your turn first", timeout=FOLLOW_MS + 10_000)
    expect(student.locator("#translate-lines-figure")).to_have_count(0)  # no answer beside the question
    student.locator("#class-taps").scroll_into_view_if_needed()
    save_screenshot(student, "translate-class-tap-390x844", full_page=False)
    student.locator(".tap-pieces button", has_text="▁bank").click()
    expect(student.locator("#tap-feedback")).to_contain_text("Sent: “▁bank”")

    expect(teacher.locator(".tap-counts caption")).to_contain_text("(1 tap)", timeout=10_000)  # it refreshes itself
    teacher.get_by_role("button", name="Reveal to the class").click()
    expect(student.locator("#translate-lines-figure svg")).to_be_visible(timeout=FOLLOW_MS + 10_000)
    expect(student.locator(".tap-counts caption")).to_contain_text("(1 tap)")
    student.locator("#class-taps").scroll_into_view_if_needed()
    save_screenshot(student, "translate-class-revealed-390x844", full_page=False)
    save_screenshot(teacher, "translate-class-teacher", full_page=False)
    assert not problems.seen, problems.seen
