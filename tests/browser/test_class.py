"""A live class in a real Chromium: one teacher and three students, each in a browser context of
their own (their own cookies), on one server with the rooms in its process.

Students follow a step and a scenario change; one explores and comes back; their predictions
appear in the teacher's histogram; the teacher's reveal reaches every student; presenter mode keeps
the class's results. Screenshots of the teacher's histogram and a student's page at the four sizes.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from tests.browser.conftest import VIEWPORT, open_class_menu, save_screenshot
from tests.browser.test_figures import saved_svg
from tests.redis_server import find_redis_server, redis_server
from tests.servers import LOOPBACK, free_port, running, tail

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

pytestmark = pytest.mark.browser

FOLLOW_MS = 3000  # the issue asks for a second; the margin is for a loaded 2-core machine
WIDER_THAN_THE_SCREEN = """() => [...document.querySelectorAll('body *')]
    .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).slice(0, 5)
    .map(e => e.tagName + '.' + e.className + '#' + e.id)"""
SIZES = {"laptop": (1366, 768), "projector": (1920, 1080), "tablet": (768, 1024), "phone": (390, 844)}


class Problems:
    """Console errors, page errors and failed responses of every page in the class."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def watch(self, page: Page, who: str) -> Page:
        page.on("console", lambda m: self.seen.append(f"{who} console {m.type}: {m.text}")
                if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: self.seen.append(f"{who} page error: {e}"))
        page.on("response", lambda r: self.seen.append(f"{who} {r.status} {r.request.method} {r.url}")
                if r.status >= 400 else None)
        return page


@pytest.fixture
def contexts(browser: Browser, base_url: str) -> Iterator[Callable[..., BrowserContext]]:
    opened: list[BrowserContext] = []

    def open_context(width: int = VIEWPORT["width"], height: int = VIEWPORT["height"]) -> BrowserContext:
        ctx = browser.new_context(viewport={"width": width, "height": height}, base_url=base_url)
        ctx.set_default_timeout(10_000)
        opened.append(ctx)
        return ctx

    yield open_context
    for ctx in opened:
        ctx.close()


def start_class(teacher: Page, preset: str = "three-token") -> str:
    teacher.goto(f"/?preset={preset}")
    open_class_menu(teacher)
    teacher.get_by_role("button", name="Teach a live class").click()
    teacher.wait_for_url(re.compile(r"/class/[A-Z0-9]{8}/teach$"))  # the key went into a cookie
    code = teacher.locator(".class-code").inner_text()
    assert re.fullmatch(r"[A-Z0-9]{4}-[A-Z0-9]{4}", code)
    return code


def stage_of(page: Page) -> str:
    return page.locator("#stages article.stage").first.get_attribute("id") or ""


def wait_for_stage(page: Page, stage: str) -> None:
    expect(page.locator(f"#stages article#stage-{stage}")).to_be_visible(timeout=FOLLOW_MS)


def test_students_follow_the_teacher_explore_and_come_back(contexts: Callable[..., BrowserContext]) -> None:
    problems = Problems()
    teacher = problems.watch(contexts().new_page(), "teacher")
    code = start_class(teacher)

    students = []
    for n in range(3):
        page = problems.watch(contexts().new_page(), f"student {n + 1}")
        if n == 0:  # one joins by typing the code, as read from the projector
            page.goto("/")
            open_class_menu(page)
            page.fill("#join-code", code.lower())
            page.locator(".join-box button").click()
        else:
            page.goto(f"/class/{code.replace('-', '')}")
        expect(page.locator("#class-panel")).to_contain_text(f"Following the teacher · class {code}")
        students.append(page)
    expect(teacher.locator("#class-count")).to_have_text("3 students joined")  # counted live as they came
    # A following student's page gets each change inside its event (rendered once for the class), never
    # by a request of its own.
    fetched: list[str] = []
    for page in students[1:]:
        page.on("request", lambda r: fetched.append(r.url) if "/workspace" in r.url else None)
    teacher.reload()
    expect(teacher.locator("#class-count")).to_have_text("3 students joined")  # and kept by a reload

    # A step on the teacher's page reaches every student.
    teacher.locator("#next-stage").click()
    wait_for_stage(teacher, "qkv")
    for page in students:
        wait_for_stage(page, "qkv")

    # One student explores: the teacher's next step leaves their page where it is.
    explorer = students[0]
    explorer.get_by_role("button", name="Explore on my own").click()
    expect(explorer.locator("#class-panel")).to_contain_text("Exploring on your own")
    teacher.locator("#next-stage").click()
    for page in students[1:]:
        wait_for_stage(page, "scores")
    explorer.wait_for_timeout(800)
    assert stage_of(explorer) == "stage-qkv"
    # An edit of their own keeps them exploring, and changes only their page.
    explorer.locator("#prev-stage").click()
    wait_for_stage(explorer, "x")
    assert stage_of(students[1]) == "stage-scores"

    # A scenario change on the teacher's page (the Scenario menu) reaches the followers.
    with teacher.expect_navigation():
        teacher.select_option("#preset-choice", "translate")
    assert teacher.url.endswith("/teach")  # the preset went to the room, then the address lost it
    title = teacher.locator(".summary strong").first.inner_text()
    for page in students[1:]:
        expect(page.locator(".summary strong").first).to_have_text(title, timeout=FOLLOW_MS)
    assert explorer.locator(".summary strong").first.inner_text() != title

    # Back to the teacher: the explorer catches up at once, and follows again.
    explorer.get_by_role("button", name="Back to the teacher").click()
    expect(explorer.locator(".summary strong").first).to_have_text(title, timeout=FOLLOW_MS)
    before = stage_of(teacher)
    teacher.locator("#next-stage").click()
    expect(teacher.locator(f"#stages article#{before}")).to_have_count(0)
    wait_for_stage(explorer, stage_of(teacher).removeprefix("stage-"))
    assert not problems.seen, problems.seen
    assert not fetched, fetched
    for page in students[1:]:
        assert re.search(r"/class/[A-Z0-9]{8}$", page.url), page.url  # a reload follows the teacher still


@pytest.fixture
def two_servers() -> Iterator[tuple[str, str]]:
    """Two app servers sharing one Redis, as replicas behind a balancer: their URLs."""
    binary = find_redis_server()
    if binary is None:
        pytest.skip("redis-server not found")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTENTION_") and k != "REDIS_URL"}
    with redis_server(binary) as redis, tempfile.TemporaryFile() as log_a, tempfile.TemporaryFile() as log_b:
        ports = free_port(), free_port()
        common = dict(env, ATTENTION_HOST=LOOPBACK, ATTENTION_WORKERS="1", REDIS_URL=redis.url(),
                      ATTENTION_PRELOAD_LANGUAGE_MODEL="false")
        with running(["-m", "app.serve"], port=ports[0], stdout=log_a, log=lambda: tail(log_a),
                     env=dict(common, ATTENTION_PORT=str(ports[0]))), \
                running(["-m", "app.serve"], port=ports[1], stdout=log_b, log=lambda: tail(log_b),
                        env=dict(common, ATTENTION_PORT=str(ports[1]))):
            yield f"http://{LOOPBACK}:{ports[0]}", f"http://{LOOPBACK}:{ports[1]}"


def test_students_on_two_servers_sharing_redis_follow_the_teacher(browser: Browser,
                                                                   two_servers: tuple[str, str]) -> None:
    """The teacher on one server, students on both: each step reaches every student inside its event (each server
    renders it once for its own students), in each student's language."""
    problems = Problems()
    contexts = []
    try:
        def new(base: str, locale: str = "en-GB") -> Page:
            ctx = browser.new_context(viewport={"width": 1366, "height": 768}, base_url=base, locale=locale)
            ctx.set_default_timeout(10_000)
            contexts.append(ctx)
            return ctx.new_page()

        teacher = problems.watch(new(two_servers[0]), "teacher")
        code = start_class(teacher).replace("-", "")
        a, b = two_servers
        students = [problems.watch(new(base, locale), f"student on {base} ({locale})")
                    for base, locale in ((a, "en-GB"), (b, "en-GB"), (b, "fr-FR"))]
        fetched: list[str] = []
        for page in students:
            page.on("request", lambda r: fetched.append(r.url) if "/workspace" in r.url else None)
            page.goto(f"/class/{code}")
            expect(page.locator("#class-panel")).to_be_visible()
        for stage in ("qkv", "scores", "scaled"):
            teacher.locator("#next-stage").click()
            wait_for_stage(teacher, stage)
            for page in students:
                wait_for_stage(page, stage)
        # The French student's workspace is French, from the render of its own language.
        expect(students[2].locator("html")).to_have_attribute("lang", "fr")
        english = students[1].locator("#stages article.stage h3").first.inner_text()
        expect(students[2].locator("#stages article.stage h3").first).not_to_have_text(english)
        expect(students[2].locator("#class-panel")).to_contain_text("Vous suivez")
        assert not fetched, fetched
        assert not problems.seen, problems.seen
    finally:
        for ctx in contexts:
            ctx.close()


def predict(page: Page, row: int, col: int, value: str) -> None:
    cell = page.locator('#stages table[data-ref^="softmax"] tbody tr').nth(row - 1).locator("td").nth(col - 1)
    expect(cell).to_have_class(re.compile(r"\bqz\b"))
    cell.click()
    page.fill("#guess", value)
    page.get_by_role("button", name="Send to the class").click()
    expect(page.locator("#quiz-feedback")).to_contain_text("Sent: your prediction")


def test_class_predictions_reach_the_teacher_and_the_reveal_reaches_everyone(
    contexts: Callable[..., BrowserContext],
) -> None:
    problems = Problems()
    teacher = problems.watch(contexts().new_page(), "teacher")
    start_class(teacher)
    code = teacher.locator(".class-code").inner_text().replace("-", "")
    students = [problems.watch(contexts().new_page(), f"student {n + 1}") for n in range(3)]
    for page in students:
        page.goto(f"/class/{code}")

    # The teacher goes to the softmax stage and turns the quiz on: its weights are hidden everywhere.
    for _ in range(6):
        if stage_of(teacher) == "stage-softmax":
            break
        before = stage_of(teacher)
        teacher.locator("#next-stage").click()
        expect(teacher.locator(f"#stages article#{before}")).to_have_count(0)
    teacher.locator("input[name=quiz]").check()
    expect(teacher.locator("section.quiz")).to_be_visible()
    wait_for_stage(teacher, "softmax")
    for page in students:
        wait_for_stage(page, "softmax")
        expect(page.get_by_role("button", name="Send to the class")).to_be_visible()
        expect(page.get_by_role("button", name="Check")).to_have_count(0)

    # Three predictions of A row 1, column 2.
    for page, value in zip(students, ("0.2", "0.9", "0.35"), strict=True):
        predict(page, 1, 2, value)
    results = teacher.locator("#class-results")
    expect(results).to_contain_text("3 predictions for this stage", timeout=FOLLOW_MS)
    # The teacher opens Save figure as the second student changes theirs: the new counts replace the results,
    # and the menu stays open under the teacher's pointer.
    desc = results.locator("svg.class-histogram desc")
    expect(desc).to_contain_text("3 predictions")
    shown = desc.text_content()
    menu = results.locator("details.save-figure")
    menu.locator("summary").click()
    expect(menu).to_have_attribute("open", "")
    predict(students[1], 1, 2, "0.3")
    expect(desc).not_to_have_text(shown, timeout=FOLLOW_MS)
    expect(menu).to_have_attribute("open", "")
    menu.scroll_into_view_if_needed()
    save_screenshot(teacher, "class-teacher-save-menu-kept-open", full_page=False)
    menu.locator("summary").click()
    expect(menu).not_to_have_attribute("open", "")
    expect(results.locator("svg.class-histogram")).to_have_count(1)
    expect(results.locator("svg.class-histogram desc")).to_contain_text("3 predictions")
    truth = teacher.evaluate("() => document.querySelector('#class-results figcaption').textContent")
    assert "weights A row 1, column 2: 3 predictions, value" in " ".join(truth.split())
    saved = saved_svg(teacher, results.locator("details.save-figure"), "class-predictions-softmax-0-0-1.svg")
    assert "predicted value · 3 answers" in saved  # Save figure: the histogram as the teacher sees it
    # Students do not see the answer or the histogram before the reveal.
    for page in students:
        expect(page.locator("svg.class-histogram")).to_have_count(0)

    teacher.get_by_role("button", name="Reveal to the class").click()
    expect(results).to_contain_text("Revealed to the class", timeout=FOLLOW_MS)
    revealed = teacher.locator('#stages table[data-ref^="softmax"] tbody tr').first.locator("td").nth(1)
    value = revealed.inner_text()
    assert re.fullmatch(r"0\.\d{3}", value), value
    for page in students:
        cell = page.locator('#stages table[data-ref^="softmax"] tbody tr').first.locator("td").nth(1)
        expect(cell).to_have_text(value, timeout=FOLLOW_MS)
        expect(page.locator("#class-results svg.class-histogram")).to_have_count(1)
        expect(page.locator("#class-results")).to_contain_text(f"3 predictions, value {value}")
    # Each student's own verdict, on their page only; fetching it keeps them following the teacher.
    expect(students[1].locator("#class-mine")).to_contain_text("Your prediction for weights A row 1, column 2: 0.3")
    expect(students[0].locator("#class-mine")).to_contain_text("Your prediction for weights A row 1, column 2: 0.2")
    for page in students:
        expect(page.locator("#class-panel")).to_contain_text("Following the teacher")
    # Inspecting a revealed cell keeps a student following too.
    students[2].locator('#stages table[data-ref^="softmax"] tbody tr').first.locator("td").nth(1).click()
    expect(students[2].locator("#inspector")).to_contain_text("Attention weights of query 1")
    expect(students[2].locator("#class-panel")).to_contain_text("Following the teacher")
    assert not problems.seen, problems.seen

    # Presenter mode keeps the class's results on the projector.
    teacher.get_by_role("button", name="Presenter mode").click()
    expect(teacher.locator("#workspace")).to_have_class(re.compile(r"\bpresent\b"))
    expect(teacher.locator("#class-results svg.class-histogram")).to_be_visible()
    expect(teacher.locator("#class-panel .class-code")).to_be_visible()
    save_screenshot(teacher, "class-teacher-presenter", full_page=False)

    # The teacher's histogram and a student's page at the four sizes, to look at.
    for name, (width, height) in SIZES.items():
        for who, page in (("teacher", teacher), ("student", students[0])):
            page.set_viewport_size({"width": width, "height": height})
            target = page.locator("#class-results")
            target.scroll_into_view_if_needed()
            save_screenshot(page, f"class-{who}-{name}", full_page=False)
            overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
            wide = page.evaluate(WIDER_THAN_THE_SCREEN)
            assert overflow <= 1, f"{who} page scrolls sideways at {name}: {overflow}px {wide}"


def test_a_page_without_javascript_syncs_with_the_teacher(browser: Browser, base_url: str,
                                                          contexts: Callable[..., BrowserContext]) -> None:
    teacher = contexts().new_page()
    code = start_class(teacher).replace("-", "")
    ctx = browser.new_context(base_url=base_url, java_script_enabled=False)
    try:
        student = ctx.new_page()
        student.goto(f"/class/{code}")
        sync = student.get_by_role("link", name="Sync with the teacher")
        expect(sync).to_be_visible()
        expect(student.get_by_role("button", name="Explore on my own")).to_be_hidden()
        teacher.locator("#next-stage").click()
        wait_for_stage(teacher, "qkv")
        assert stage_of(student) == "stage-x"
        sync.click()
        wait_for_stage(student, "qkv")
    finally:
        ctx.close()


def test_the_class_pages_have_no_serious_accessibility_violations(contexts: Callable[..., BrowserContext]) -> None:
    from tests.browser.test_accessibility import Axe, violations

    if Axe is None:
        pytest.skip("axe-playwright-python is not installed (pip install -e '.[test]')")
    axe = Axe()
    teacher = contexts().new_page()
    code = start_class(teacher).replace("-", "")
    student = contexts().new_page()
    student.goto(f"/class/{code}")
    teacher.locator("#next-stage").click()
    wait_for_stage(student, "qkv")
    teacher.locator("input[name=quiz]").check()
    expect(student.locator("section.quiz")).to_be_visible(timeout=FOLLOW_MS)
    predict_cell = student.locator("#stages td.qz").first
    predict_cell.click()
    student.fill("#guess", "0.5")
    student.get_by_role("button", name="Send to the class").click()
    expect(teacher.locator("#class-results svg.class-histogram")).to_have_count(1, timeout=FOLLOW_MS)
    for page in (teacher, student):
        assert violations(axe, page) == []
    student.get_by_role("button", name="Explore on my own").click()
    assert violations(axe, student) == []
    notice = contexts().new_page()
    notice.goto("/class/ZZZZZZZZ")
    assert violations(axe, notice) == []
