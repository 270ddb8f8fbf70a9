"""The real model in a live class, in a real Chromium: a teacher and two students, each in a browser
context of their own, on one server with the rooms in its process.

The teacher shows the model from the class panel and types a sentence: both students' pages move to the
model page and show the teacher's sentence's tokens; one explores a sentence of their own and comes
back; the teacher goes back to a scenario and the students follow. Screenshots of a student's page at
390×844 and 1366×768.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tests.browser.conftest import save_screenshot
from tests.browser.test_class import FOLLOW_MS, Problems, contexts, start_class

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

pytestmark = pytest.mark.browser

__all__ = ["contexts"]  # the fixture, shared with tests/browser/test_class.py

MODEL_MS = 15_000  # a student's first model page on a loaded 2-core machine: the forward passes and 72 maps
TEACHER_SENTENCE = "The bank of the river flooded."
OWN_SENTENCE = "Cats sleep."


def row_labels(page) -> list[str]:  # noqa: ANN001 - a Playwright Page
    """The enlarged head's token labels, as the page shows them ("2 the")."""
    return page.locator("#enlarged svg text.row-lab").all_text_contents()


def shows_sentence(page, tokens: list[str]) -> None:  # noqa: ANN001
    expect(page.locator("#enlarged svg text.row-lab")).to_have_text(
        [f"{i + 1} {t}" for i, t in enumerate(tokens)], timeout=MODEL_MS)


def test_students_follow_the_teacher_onto_the_real_model_and_back(contexts: Callable) -> None:  # noqa: F811
    problems = Problems()
    teacher = problems.watch(contexts().new_page(), "teacher")
    code = start_class(teacher)
    plain = code.replace("-", "")
    students = []
    for n in range(2):
        page = problems.watch(contexts().new_page(), f"student {n + 1}")
        page.goto(f"/class/{plain}")
        expect(page.locator("#class-panel")).to_contain_text(f"Following the teacher · class {code}")
        students.append(page)

    # The teacher shows the real model: their page becomes the model's, and the students' pages follow.
    teacher.get_by_role("button", name="Show the real model").click()
    teacher.wait_for_url(re.compile(rf"/class/{plain}/model$"))
    expect(teacher.locator("#class-panel .class-code")).to_have_text(code)
    for page in students:
        expect(page.locator("h1")).to_have_text("Your sentence: a real model", timeout=MODEL_MS)
        expect(page.locator("#class-panel")).to_contain_text("Following the teacher")
        assert page.url.endswith(f"/class/{plain}")

    # The teacher types a sentence: every student's page shows its tokens.
    teacher.fill("#text", TEACHER_SENTENCE)
    tokens = ["[CLS]", "the", "bank", "of", "the", "river", "flooded", ".", "[SEP]"]
    shows_sentence(teacher, tokens)
    for page in students:
        shows_sentence(page, tokens)
        expect(page.locator("#text")).to_have_value(TEACHER_SENTENCE)

    # And picks a head: the students' enlarged head is the teacher's.
    teacher.locator('a.thumb[data-head="L3 H7"]').click()
    expect(teacher.locator("#enlarged-h strong")).to_have_text("L3 H7")
    for page in students:
        expect(page.locator("#enlarged-h strong")).to_have_text("L3 H7", timeout=FOLLOW_MS + MODEL_MS)

    # One student explores: a sentence of their own, and the teacher's next change leaves it alone.
    explorer, follower = students
    explorer.fill("#text", OWN_SENTENCE)
    expect(explorer.locator("#class-panel")).to_contain_text("Exploring on your own")
    shows_sentence(explorer, ["[CLS]", "cats", "sleep", ".", "[SEP]"])
    teacher.locator('a.thumb[data-head="L1 H2"]').click()
    expect(follower.locator("#enlarged-h strong")).to_have_text("L1 H2", timeout=FOLLOW_MS + MODEL_MS)
    explorer.wait_for_timeout(800)
    expect(explorer.locator("#text")).to_have_value(OWN_SENTENCE)
    assert row_labels(explorer)[1] == "2 cats"

    # Back to the teacher: the teacher's sentence and head at once, and following again.
    explorer.get_by_role("button", name="Back to the teacher").click()
    shows_sentence(explorer, tokens)
    expect(explorer.locator("#text")).to_have_value(TEACHER_SENTENCE)
    expect(explorer.locator("#enlarged-h strong")).to_have_text("L1 H2")
    expect(explorer.locator("#class-panel")).to_contain_text("Following the teacher")

    for width, height in ((390, 844), (1366, 768)):
        follower.set_viewport_size({"width": width, "height": height})
        follower.evaluate("window.scrollTo(0, 0)")
        save_screenshot(follower, f"class-model-student-{width}x{height}", full_page=False)
        sideways = follower.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert sideways <= 0, f"{width}×{height}: the student's page scrolls sideways"

    # The teacher goes back to a scenario: the students' pages follow it.
    teacher.select_option("#class-scenario", "three-token")
    teacher.get_by_role("button", name="Show it to the class").click()
    teacher.wait_for_url(re.compile(rf"/class/{plain}/teach$"))
    for page in students:
        expect(page.locator("#stages article.stage").first).to_be_visible(timeout=MODEL_MS)
        expect(page.locator("h1")).to_have_text("Attention, step by step")
    assert not problems.seen, problems.seen
