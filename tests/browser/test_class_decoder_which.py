""""Which word made it?" on the language model's page in a live class, in a real Chromium: a teacher and a student,
each in a browser context of their own, on one server with the rooms in its process.

The teacher shows the language model, types a text and asks which word made the model say its answer: the
student's page shows a button per token beside the model's candidates, and not what explains the answer; the
student taps one, the teacher's panel counts it as it comes, the teacher reveals, and the student's page shows the
class's taps beside gradient × input's shares and the sentence that compares them. Screenshots of both pages at
1366×768 and 390×844.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tests.browser.conftest import save_screenshot
from tests.browser.test_class import FOLLOW_MS, contexts
from tests.browser.test_class_decoder import DECODER_MS, SCREENS, TEXT, teacher_and_student
from tests.browser.test_decoder_page import decoder_loaded

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

pytestmark = pytest.mark.browser

__all__ = ["contexts", "decoder_loaded"]  # the fixtures: a browser context per person, the model read first

TOKENS = ["The", "␣opposite", "␣of", "␣hot", "␣is"]  # TEXT's tokens as the page writes them; the answer: " cold"


def screens(page, name: str, selector: str) -> None:  # noqa: ANN001 - a Playwright Page
    """``selector``'s part of the page at a laptop's size and a phone's, with nothing wider than the screen."""
    for width, height in SCREENS:
        page.set_viewport_size({"width": width, "height": height})
        page.locator(selector).evaluate("e => e.scrollIntoView({block: 'start'})")
        save_screenshot(page, f"class-decoder-{name}-{width}x{height}", full_page=False)
        sideways = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert sideways <= 0, f"{name} at {width}×{height}: the page scrolls sideways"
    page.set_viewport_size({"width": SCREENS[0][0], "height": SCREENS[0][1]})


def test_the_class_taps_which_word_made_the_answer_and_the_teacher_reveals_gradient_x_input(
        contexts: Callable) -> None:  # noqa: F811
    problems, teacher, student, code, plain = teacher_and_student(contexts)
    teacher.get_by_role("button", name="Show the language model").click()
    teacher.wait_for_url(re.compile(rf"/class/{plain}/decoder$"))
    teacher.fill("#text", TEXT)
    teacher.get_by_role("button", name="Run the model").click()
    expect(teacher.locator("#cand-bars li").first).to_contain_text("␣cold", timeout=DECODER_MS)
    expect(student.locator("#text")).to_have_value(TEXT, timeout=FOLLOW_MS + DECODER_MS)

    # The teacher asks which word made it: the student's page has a button per token and the candidates, not the
    # shares that explain the answer.
    teacher.get_by_label("Ask which word made it").check()
    results = teacher.locator("#class-results")
    expect(results.locator("#class-mode")).to_contain_text("The class is asked which word made it.",
                                                           timeout=FOLLOW_MS)
    expect(teacher.get_by_label("Ask which word made it")).to_be_checked()
    screens(teacher, "which-teacher-question", "#class-panel")
    which = student.locator("#class-which")
    expect(which).to_be_visible(timeout=FOLLOW_MS + DECODER_MS)
    expect(which.get_by_role("button")).to_have_text(TOKENS)
    expect(which).to_contain_text("The model's likeliest next token is “␣cold”.")
    expect(student.locator("#cand-bars li").first).to_contain_text("␣cold")
    for hidden in ("#class-guess", "#why", "#saliency", "#rollout", "#class-results"):
        expect(student.locator(hidden)).to_have_count(0)
    screens(student, "which-student-asked", "#class-which")

    # The student taps "hot": the teacher's panel counts it as it comes.
    which.get_by_role("button", name="␣hot").click()
    expect(student.locator("#tap-feedback")).to_contain_text("Sent: “␣hot”")
    expect(results).to_contain_text("1 of 1 student tapped", timeout=FOLLOW_MS)
    row = results.locator(".which-counts tbody tr", has=teacher.locator("th", has_text="␣hot"))
    expect(row.locator("td").first).to_have_text("1")
    screens(teacher, "which-teacher-taps", "#next-row")

    # The teacher reveals: the student's page shows the taps beside gradient × input and says how they compare.
    teacher.get_by_role("button", name="Reveal to the class").click()
    expect(results).to_contain_text("Revealed to the class.")
    table = student.locator("#class-results .which-counts")
    expect(table).to_be_visible(timeout=FOLLOW_MS + DECODER_MS)
    expect(table.locator("tbody th")).to_have_text(TOKENS)
    expect(table.locator("tbody tr td:first-of-type")).to_have_text(["0", "0", "0", "1", "0"])
    expect(table.locator("tbody tr").nth(1).locator("td").last).to_have_text("★ +1.04")
    expect(student.locator(".which-verdict")).to_have_text(
        "The class's most tapped token is “␣hot”, but gradient × input ranks “␣opposite” first.")
    expect(student.locator("#class-which")).to_have_count(0)
    expect(student.locator("#saliency")).to_have_count(1)
    screens(student, "which-student-revealed", "#class-results")
    assert not problems.seen, problems.seen
