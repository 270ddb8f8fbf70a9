"""A live class's trust in a real Chromium: the teacher key is not in the page until the teacher asks
for the link, a teacher whose class cannot be reached (Redis frozen with SIGSTOP) is told so on
screen, and a student's page through a restart of Redis says it is reconnecting and follows again by itself.
Screenshots at 1366×768 and 390×844."""

from __future__ import annotations

import os
import signal
import tempfile
from collections.abc import Iterator

import pytest

from tests.browser.conftest import save_screenshot
from tests.browser.test_class import start_class, wait_for_stage
from tests.redis_server import DurableRedis, durable_redis_server, find_redis_server, redis_server
from tests.servers import LOOPBACK, free_port, running, tail

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

pytestmark = pytest.mark.browser

SIZES = {"laptop": (1366, 768), "phone": (390, 844)}


@pytest.mark.parametrize("size", SIZES)
def test_the_teacher_link_is_shown_only_when_the_teacher_asks(browser, base_url: str, size: str) -> None:  # noqa: ANN001
    width, height = SIZES[size]
    context = browser.new_context(viewport={"width": width, "height": height}, base_url=base_url)
    try:
        teacher = context.new_page()
        start_class(teacher)
        key = next(c["value"] for c in context.cookies() if c["name"].startswith("attention_teacher_"))
        assert next(c for c in context.cookies() if c["value"] == key)["httpOnly"]
        assert key not in teacher.content()  # not in the page, not in a hidden field
        assert teacher.evaluate("document.cookie").find(key) == -1  # nor readable by a script
        teacher.get_by_role("button", name="Show the teacher link").click()
        link = teacher.get_by_label("Teacher link")
        expect(link).to_be_visible()
        assert link.input_value().endswith(f"/teach?key={key}")
        save_screenshot(teacher, f"class-teacher-link-{size}", full_page=False)
    finally:
        context.close()


@pytest.fixture
def redis_class_server() -> Iterator[tuple[str, int]]:
    """A server whose class lives in a Redis of its own (frozen by the test): its URL, Redis's pid."""
    binary = find_redis_server()
    if binary is None:
        pytest.skip("redis-server not found")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTENTION_") and k != "REDIS_URL"}
    with redis_server(binary) as redis, tempfile.TemporaryFile() as log:
        env.update(ATTENTION_HOST=LOOPBACK, ATTENTION_PORT=str(port), ATTENTION_WORKERS="1", REDIS_URL=redis.url())
        with running(["-m", "app.serve"], port=port, stdout=log, log=lambda: tail(log), env=env):
            yield f"http://{LOOPBACK}:{port}", redis.pid


@pytest.mark.parametrize("size", SIZES)
def test_the_teacher_sees_that_the_class_cannot_be_reached(browser, redis_class_server: tuple[str, int],  # noqa: ANN001
                                                           size: str) -> None:
    base, redis_pid = redis_class_server
    width, height = SIZES[size]
    context = browser.new_context(viewport={"width": width, "height": height}, base_url=base)
    context.set_default_timeout(10_000)
    try:
        teacher = context.new_page()
        start_class(teacher)
        alert = teacher.locator("#class-alert")
        expect(alert).to_be_hidden()
        os.kill(redis_pid, signal.SIGSTOP)
        try:
            teacher.locator("#next-stage").click()  # the step answers 503: htmx swaps nothing
            expect(alert).to_be_visible(timeout=5000)
            expect(alert).to_contain_text("The class cannot be reached")
            save_screenshot(teacher, f"class-unreachable-{size}", full_page=False)
        finally:
            os.kill(redis_pid, signal.SIGCONT)
        teacher.locator("#next-stage").click()  # Redis is back: the step goes through, the message goes
        expect(teacher.locator("#stages article#stage-qkv")).to_be_visible()
        expect(alert).to_be_hidden()
    finally:
        context.close()


@pytest.fixture
def durable_class_server() -> Iterator[tuple[str, DurableRedis]]:
    """A server whose class lives in a Redis with its append-only file (restarted by the test): its URL, Redis."""
    binary = find_redis_server()
    if binary is None:
        pytest.skip("redis-server not found")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTENTION_") and k != "REDIS_URL"}
    with durable_redis_server(binary) as redis, tempfile.TemporaryFile() as log:
        env.update(ATTENTION_HOST=LOOPBACK, ATTENTION_PORT=str(port), ATTENTION_WORKERS="1", REDIS_URL=redis.url())
        with running(["-m", "app.serve"], port=port, stdout=log, log=lambda: tail(log), env=env):
            yield f"http://{LOOPBACK}:{port}", redis


def test_a_students_page_says_the_class_is_reconnecting_through_a_redis_restart(
        browser, durable_class_server: tuple[str, DurableRedis]) -> None:  # noqa: ANN001
    base, redis = durable_class_server
    width, height = SIZES["phone"]
    teacher_context = browser.new_context(base_url=base)
    student_context = browser.new_context(viewport={"width": width, "height": height}, base_url=base)
    try:
        teacher = teacher_context.new_page()
        code = start_class(teacher)
        student = student_context.new_page()
        student.goto(f"/class/{code}")
        expect(student.locator("#class-panel")).to_contain_text("Following the teacher")
        alert = student.locator("#class-alert")
        expect(alert).to_be_hidden()
        redis.stop()
        try:
            expect(alert).to_be_visible(timeout=5000)  # told by its stream, not at the next keep-alive
            expect(alert).to_contain_text("The class cannot be reached. Trying again…")
            save_screenshot(student, "class-reconnecting-phone", full_page=False)
        finally:
            redis.start()
        teacher.locator("#next-stage").click()  # the teacher's first step after Redis's return
        wait_for_stage(student, "qkv")  # the page follows again by itself, with no reload
        expect(alert).to_be_hidden()
        expect(student.locator("#class-panel")).to_contain_text("Following the teacher")
    finally:
        teacher_context.close()
        student_context.close()
