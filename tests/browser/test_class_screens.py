"""A live class as a student sees it on a phone (390×844) while the teacher teaches at 1366×768: each
in a browser context of their own, on one server with the rooms in its process.

The teacher's Next brings the new stage's heading and first result onto the student's screen; the
student sees none of the teacher's controls; each keeps their own Inputs drawer, whatever the other
does with theirs. Screenshots of the student's phone following and of the teacher's page.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from tests.browser.conftest import htmx_idle, open_class_menu, save_screenshot
from tests.browser.test_class import Problems

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

pytestmark = pytest.mark.browser

FOLLOW_MS = 5000  # a second or so; the margin is for a loaded 2-core machine
PHONE = (390, 844)
LAPTOP = (1366, 768)
# Where the current stage's heading and its first result are, in the viewport's coordinates.
GEOMETRY = """() => {
  const stage = document.querySelector('#stages article.stage');
  const heading = stage.querySelector('h3');
  const result = stage.querySelector('.stage-head ~ * table, .stage-head ~ table');
  const box = (e) => { const r = e.getBoundingClientRect(); return [Math.round(r.top), Math.round(r.bottom)]; };
  return {stage: stage.id, heading: box(heading), result: box(result), height: window.innerHeight,
          text: heading.textContent.trim()};
}"""


@pytest.fixture
def problems() -> Iterator[Problems]:
    seen = Problems()
    yield seen
    assert not seen.seen, seen.seen


@pytest.fixture
def open_page(browser: Browser, base_url: str, problems: Problems) -> Iterator[Callable[[str, tuple[int, int]], Page]]:
    """A page in a browser context of its own (its own cookies), at a size."""
    opened: list[BrowserContext] = []

    def open_one(who: str, size: tuple[int, int]) -> Page:
        ctx = browser.new_context(viewport={"width": size[0], "height": size[1]}, base_url=base_url)
        ctx.set_default_timeout(10_000)
        opened.append(ctx)
        return problems.watch(ctx.new_page(), who)

    yield open_one
    for ctx in opened:
        ctx.close()


def start_class(teacher: Page) -> str:
    """The teacher's class on the three-token example; its code as a student types it."""
    teacher.goto("/?preset=three-token")
    open_class_menu(teacher)
    teacher.get_by_role("button", name="Teach a live class").click()
    teacher.wait_for_url(re.compile(r"/class/[A-Z0-9]{8}/teach$"))
    return teacher.locator(".class-code").inner_text().replace("-", "")


def join(student: Page, code: str) -> None:
    student.goto(f"/class/{code}")
    expect(student.locator("#class-panel")).to_contain_text("Following the teacher")
    student.wait_for_function("() => document.querySelector('#editor') && !document.querySelector('#editor').open")


def stage_of(page: Page) -> str:
    return page.locator("#stages article.stage").first.get_attribute("id") or ""


def teacher_next(teacher: Page) -> str:
    """The teacher presses Next; the stage the teacher's page then shows."""
    before = stage_of(teacher)
    teacher.locator("#next-stage").click()
    expect(teacher.locator(f"#stages article#{before}")).to_have_count(0)
    return stage_of(teacher)


def follows(student: Page, stage: str) -> dict:
    """Once the student's page shows ``stage`` and has settled: its geometry."""
    expect(student.locator(f"#stages article#{stage}")).to_be_visible(timeout=FOLLOW_MS)
    htmx_idle(student)
    student.wait_for_timeout(100)  # the settle's scroll
    return student.evaluate(GEOMETRY)


def on_screen(box: list[int], height: int) -> bool:
    return box[0] >= 0 and box[1] <= height


def test_a_phone_student_sees_each_new_stage_the_teacher_moves_to(open_page: Callable[..., Page]) -> None:
    teacher = open_page("teacher", LAPTOP)
    code = start_class(teacher)
    student = open_page("student", PHONE)
    join(student, code)
    first = student.evaluate(GEOMETRY)
    assert first["stage"] == "stage-x", first

    for _ in range(3):
        stage = teacher_next(teacher)
        seen = follows(student, stage)
        assert on_screen(seen["heading"], seen["height"]), seen
        assert on_screen(seen["result"], seen["height"]), seen
        assert seen["heading"][0] < seen["result"][0], seen  # the heading, then the result under it
    assert student.evaluate("document.activeElement === document.body")  # nothing took the focus
    save_screenshot(student, "class-phone-student-follows", full_page=False)
    save_screenshot(teacher, "class-laptop-teacher", full_page=False)

    # A student typing is not moved: the field stays where it is while the page follows.
    student.locator("#class-explore").evaluate("b => b.scrollIntoView()")
    student.evaluate("""() => { const i = document.createElement('input'); i.id = 'typing'; i.type = 'text';
        document.querySelector('#class-panel').append(i); i.focus(); }""")
    y = student.evaluate("scrollY")
    stage = teacher_next(teacher)
    follows(student, stage)
    assert student.evaluate("[scrollY, document.activeElement.id]") == [y, "typing"]


def test_a_student_sees_none_of_the_teachers_controls(open_page: Callable[..., Page]) -> None:
    teacher = open_page("teacher", LAPTOP)
    code = start_class(teacher)
    student = open_page("student", PHONE)
    join(student, code)
    # The teacher's page has them all.
    for control in (teacher.locator("#present-toggle"), teacher.locator("input[name=quiz]"),
                    teacher.locator("#preset-choice"), teacher.get_by_role("button", name="Show the real model"),
                    teacher.get_by_role("button", name="Show the teacher link")):
        expect(control).to_be_visible()
    for name in ("Teach a live class", "Presenter mode", "Show the real model", "Show the teacher link"):
        expect(student.get_by_role("button", name=name)).to_have_count(0)
    expect(student.get_by_role("checkbox", name=re.compile("quiz"))).to_have_count(0)
    expect(student.locator("#preset-choice")).to_have_count(0)  # the teacher's scenario menu
    expect(student.locator("#join-code")).to_have_count(0)  # already in a class
    expect(student.get_by_role("button", name="Explore on my own")).to_be_visible()

    # At the weights, the teacher turns the quiz on: the student's page hides them and still has no
    # toggle; a step of the student's own keeps the teacher's quiz.
    while stage_of(teacher) != "stage-softmax":
        teacher_next(teacher)
    teacher.locator("input[name=quiz]").check()
    expect(teacher.locator("section.quiz")).to_be_visible()
    follows(student, "stage-softmax")
    expect(student.locator("section.quiz")).to_be_visible(timeout=FOLLOW_MS)
    expect(student.get_by_role("checkbox", name=re.compile("quiz"))).to_have_count(0)
    expect(student.locator("#present-toggle")).to_have_count(0)
    student.locator("#prev-stage").click()
    expect(student.locator("#class-panel")).to_contain_text("Exploring on your own")
    student.locator("#next-stage").click()
    expect(student.locator("#stages article#stage-softmax")).to_be_visible()
    expect(student.locator("section.quiz")).to_be_visible()  # still the quiz: the weights hidden


def test_each_keeps_their_own_inputs_drawer(open_page: Callable[..., Page]) -> None:
    teacher = open_page("teacher", LAPTOP)
    code = start_class(teacher)
    student = open_page("student", PHONE)
    join(student, code)
    before = student.evaluate(GEOMETRY)

    # The teacher opens Inputs and changes the decimals: the student's numbers follow, their drawer
    # stays closed and their stage heading stays where it was.
    teacher.locator("#editor > summary").click()
    expect(teacher.locator("#editor")).to_have_attribute("open", "")
    teacher.locator("select[name=decimals]").select_option("2")
    expect(student.locator("#stages table td").first).to_have_text(re.compile(r"^\S*\d\.\d\d$"), timeout=FOLLOW_MS)
    htmx_idle(student)
    after = student.evaluate(GEOMETRY)
    assert not student.evaluate("document.getElementById('editor').open")
    assert after["heading"] == before["heading"], (before, after)
    assert teacher.evaluate("document.getElementById('editor').open")  # the teacher's own stays open

    # The student opens theirs: the teacher's next update leaves it open, and the teacher's closing
    # of theirs does not close it.
    student.locator("#editor > summary").click()
    expect(student.locator("#editor")).to_have_attribute("open", "")
    teacher.locator("#editor > summary").click()
    stage = teacher_next(teacher)
    seen = follows(student, stage)
    assert student.evaluate("document.getElementById('editor').open")
    assert "inputs" in student.locator("#open-panels").input_value().split()
    assert on_screen(seen["heading"], seen["height"]), seen  # below the open drawer, brought into view
    save_screenshot(student, "class-phone-student-own-drawer", full_page=False)
    # And the student's own step keeps it open too.
    student.get_by_role("button", name="Explore on my own").click()
    student.locator("#prev-stage").click()
    expect(student.locator(f"#stages article#{stage}")).to_have_count(0)
    assert student.evaluate("document.getElementById('editor').open")
