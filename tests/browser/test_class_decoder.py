"""The language model in a live class, in a real Chromium: a teacher and a student, each in a browser context of
their own, on one server with the rooms in its process.

The teacher shows the language model from the class panel (the class asked first) and types a text: the student's
page moves to "Next word", shows the teacher's text and the guess form, not the model's candidates; the student
guesses, the teacher's page counts the guess as it comes, the teacher reveals, and the student's page shows the
model's candidates with the class's guesses, the guess matched. A guess being typed stays while the teacher picks
a head. Screenshots of both pages at 1366×768 and 390×844. And a student's page moved to "Next word" and back by the
event alone: no request for the workspace or the class's page, no reload, the new page's own script following on.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from tests.browser.conftest import save_screenshot
from tests.browser.test_class import FOLLOW_MS, Problems, contexts, start_class
from tests.browser.test_decoder_page import decoder_loaded

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

__all__ = ["contexts", "decoder_loaded"]  # the fixtures: a browser context per person, the model read first

DECODER_MS = 15_000  # a page of the language model on a loaded 2-core machine: a forward pass and 270 maps
TEXT = "The opposite of hot is"  # the model's likeliest next token: " cold" (68 %)
SCREENS = ((1366, 768), (390, 844))


def screens(page, name: str) -> None:  # noqa: ANN001 - a Playwright Page
    """The page's first screen at a laptop's size and a phone's, with nothing wider than the screen."""
    for width, height in SCREENS:
        page.set_viewport_size({"width": width, "height": height})
        page.evaluate("window.scrollTo(0, 0)")
        save_screenshot(page, f"class-decoder-{name}-{width}x{height}", full_page=False)
        sideways = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert sideways <= 0, f"{name} at {width}×{height}: the page scrolls sideways"
    page.set_viewport_size({"width": SCREENS[0][0], "height": SCREENS[0][1]})


def teacher_and_student(contexts: Callable) -> tuple[Problems, Page, Page, str, str]:
    """A class started by a teacher's page and joined by a student's, both watched for problems: the pages, the code
    as said ("ABCD-EFGH") and as typed."""
    problems = Problems()
    teacher = problems.watch(contexts().new_page(), "teacher")
    code = start_class(teacher)
    plain = code.replace("-", "")
    student = problems.watch(contexts().new_page(), "student")
    student.goto(f"/class/{plain}")
    return problems, teacher, student, code, plain


def test_the_class_guesses_the_next_word_and_the_teacher_reveals_it(contexts: Callable) -> None:  # noqa: F811
    problems, teacher, student, code, plain = teacher_and_student(contexts)
    expect(student.locator("#class-panel")).to_contain_text(f"Following the teacher · class {code}")

    # The teacher shows the language model, the class asked first: the student's page follows it.
    expect(teacher.get_by_label("ask the class first")).to_be_checked()
    teacher.get_by_role("button", name="Show the language model").click()
    teacher.wait_for_url(re.compile(rf"/class/{plain}/decoder$"))
    expect(teacher.get_by_label("Ask the class first")).to_be_checked()
    expect(student.locator("h1")).to_have_text("Next word: a real language model", timeout=DECODER_MS)
    assert student.url.endswith(f"/class/{plain}")

    # The teacher types a text: the student's page shows it, with the guess form and without the candidates.
    teacher.fill("#text", TEXT)
    teacher.get_by_role("button", name="Run the model").click()
    expect(teacher.locator("#cand-bars li").first).to_contain_text("␣cold", timeout=DECODER_MS)
    expect(student.locator("#text")).to_have_value(TEXT, timeout=FOLLOW_MS + DECODER_MS)
    guess = student.get_by_label("Your guess for the next word")
    expect(guess).to_be_visible()
    expect(student.locator("#candidates")).to_have_count(0)
    expect(student.locator("#lens")).to_have_count(0)  # its last layer is the answer
    expect(student.locator("#class-panel")).to_contain_text("Following the teacher")
    expect(teacher.locator("#class-results")).to_contain_text("No guesses yet")
    screens(student, "student-guessing")

    # The student types a guess while the teacher picks a head: the page follows, and keeps what was typed.
    guess.fill(" Cold ")
    teacher.locator('a.thumb[data-head="L2 H3"]').click()
    expect(teacher.locator("#enlarged-h strong")).to_have_text("L2 H3", timeout=DECODER_MS)
    expect(student.locator("#enlarged-h strong")).to_have_text("L2 H3", timeout=FOLLOW_MS + DECODER_MS)
    expect(guess).to_have_value(" Cold ")
    # The student sends it; the teacher's page counts it as it comes, matched with the model's likeliest token.
    student.get_by_role("button", name="Send").click()
    expect(student.locator("#guess-feedback")).to_contain_text("Sent: your guess “Cold”")
    results = teacher.locator("#class-results")
    expect(results).to_contain_text("1 of 1 student guessed", timeout=FOLLOW_MS)
    expect(results.locator(".guess-word")).to_have_text(["Cold"])
    expect(results.locator(".guess-mark")).to_have_text(["✓ the model's no. 1"])
    screens(teacher, "teacher-guesses")

    # The teacher reveals: the student's page shows the candidates with their probabilities, and the guesses.
    teacher.get_by_role("button", name="Reveal to the class").click()
    expect(results).to_contain_text("Revealed to the class.")
    expect(student.locator("#cand-bars li").first).to_contain_text("␣cold", timeout=FOLLOW_MS + DECODER_MS)
    expect(student.locator("#cand-bars li .pct").first).to_have_text("68.4%")
    expect(student.locator("#class-results .guess-word")).to_have_text(["Cold"])
    expect(student.locator("#class-results .guess-mark")).to_have_text(["✓ the model's no. 1"])
    expect(student.locator("#class-guess")).to_have_count(0)
    expect(student.locator("#class-results")).not_to_contain_text("Reveal to the class")
    screens(student, "student-revealed")
    assert not problems.seen, problems.seen


def test_the_class_toggle_says_its_state_and_never_shows_the_answer_beside_the_guess_box(
        contexts: Callable) -> None:  # noqa: F811
    """Unticking "Ask the class first" is said in words on the teacher's page and the students' (the candidates at
    once, no guess box); ticking it again gives the students the guess box and takes the candidates away."""
    problems, teacher, student, code, plain = teacher_and_student(contexts)
    teacher.get_by_role("button", name="Show the language model").click()
    teacher.wait_for_url(re.compile(rf"/class/{plain}/decoder$"))
    teacher.fill("#text", TEXT)
    teacher.get_by_role("button", name="Run the model").click()
    expect(student.locator("#text")).to_have_value(TEXT, timeout=FOLLOW_MS + DECODER_MS)
    mode = teacher.locator("#class-mode")
    expect(mode).to_contain_text("The class is asked first.")
    expect(student.locator("#class-guess")).to_be_visible()

    teacher.get_by_label("Ask the class first").uncheck()
    expect(mode).to_contain_text("The class is not asked.", timeout=FOLLOW_MS)
    expect(student.locator("#cand-bars li").first).to_contain_text("␣cold", timeout=FOLLOW_MS + DECODER_MS)
    expect(student.locator("#class-guess")).to_have_count(0)
    expect(student.locator(".class-mode")).to_have_text(
        "The teacher shows the model's candidates at once: no guessing this time.")
    screens(student, "student-not-asked")

    teacher.get_by_label("Ask the class first").check()
    expect(mode).to_contain_text("The class is asked first.", timeout=FOLLOW_MS)
    expect(student.locator("#class-guess")).to_be_visible(timeout=FOLLOW_MS + DECODER_MS)
    expect(student.locator("#candidates")).to_have_count(0)
    assert not problems.seen, problems.seen


def test_a_following_page_moves_to_next_word_and_back_in_one_event(contexts: Callable) -> None:  # noqa: F811
    """The teacher moves the class to "Next word" and back to a scenario: each time the student's page becomes the
    class's page of the new kind from the event alone (no request for the workspace or the class's page, no reload:
    what the window held stays), its scripts running on it (its own stream, the next change followed)."""
    problems = Problems()
    teacher = problems.watch(contexts().new_page(), "teacher")
    code = start_class(teacher)
    plain = code.replace("-", "")
    student = problems.watch(contexts(*SCREENS[0]).new_page(), "student")
    with student.expect_response(re.compile(rf"/class/{plain}/events\?workspace=&")):
        student.goto(f"/class/{plain}")
    expect(student.locator("#class-panel")).to_contain_text(f"Following the teacher · class {code}")
    asked: list[str] = []
    student.on("request", lambda r: asked.append(r.url.split("://", 1)[1].split("/", 1)[1]))
    student.evaluate("window.sameWindow = true")  # a reload would start a new window without it

    def moved(kind: str) -> None:
        """The student's page is the class's page of ``kind``, reached without a request for either."""
        assert student.url.endswith(f"/class/{plain}"), student.url
        assert student.evaluate("window.sameWindow") is True, "the page was reloaded"
        assert not [url for url in asked if url.split("?")[0] in (f"class/{plain}", f"class/{plain}/workspace")], asked
        panel = student.locator("#class-panel")
        expect(panel).to_have_attribute("data-events", f"/class/{plain}/events?workspace={kind}")
        assert student.locator("#class-panel").count() == 1 and student.locator("h1").count() == 1

    # To "Next word": the event carries the page, whose script opens the stream for its kind.
    with student.expect_request(re.compile(rf"/class/{plain}/events\?workspace=decoder&"), timeout=DECODER_MS):
        teacher.get_by_role("button", name="Show the language model").click()
        teacher.wait_for_url(re.compile(rf"/class/{plain}/decoder$"))
        expect(student.locator("h1")).to_have_text("Next word: a real language model", timeout=DECODER_MS)
    expect(student.get_by_label("Your guess for the next word")).to_be_visible()
    moved("decoder")
    screens(student, "student-moved")
    # The new page follows the teacher's next change by its own stream and script.
    teacher.fill("#text", TEXT)
    teacher.get_by_role("button", name="Run the model").click()
    expect(student.locator("#text")).to_have_value(TEXT, timeout=FOLLOW_MS + DECODER_MS)
    moved("decoder")

    # Back to a scenario: the event carries the toy scenario's page.
    teacher.select_option("#class-scenario", "three-token")
    teacher.get_by_role("button", name="Show it to the class").click()
    teacher.wait_for_url(re.compile(rf"/class/{plain}/teach$"))
    expect(student.locator("h1")).to_have_text("Attention, step by step", timeout=FOLLOW_MS + DECODER_MS)
    expect(student.locator("#stages article.stage").first).to_be_visible()
    moved("")
    screens(student, "student-moved-back")
    teacher.locator("#next-stage").click()
    expect(student.locator("#stages article#stage-qkv")).to_be_visible(timeout=FOLLOW_MS)
    moved("")
    streams = [url for url in asked if url.startswith(f"class/{plain}/events")]
    assert len(streams) == 2, streams  # one per page written over the first: none left of the pages before
    assert not problems.seen, problems.seen
