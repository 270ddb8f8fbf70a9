"""A heavy page the server cannot take now, in a real Chromium: the student keeps the last good page
and reads why, with JavaScript beside the stage, without it on a short page that sends them back.

The server here gives a heavy page 1 ms (ATTENTION_HEAVY_SECONDS), so every heavy page is stopped
and answered 503, as it would be when the heavy lane is full or a page runs out of time."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

import httpx
import pytest

from tests.browser.conftest import ARTIFACTS, VIEWPORT
from tests.browser.test_page import cells, current_stage
from tests.conftest import SAMPLE_SCREENS, form_fields, swept
from tests.conftest import VIEWPORTS as SCREENS
from tests.servers import LOOPBACK, free_port, running, uvicorn_args

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

    from tests.browser.conftest import PageLog

pytestmark = pytest.mark.browser
# The four screens of tests/conftest.py, by name (the tests' ids and screenshots' names).
NAMED = dict(zip(("laptop", "projector", "tablet", "phone"), SCREENS, strict=True))
VIEWPORTS = {name: {"width": w, "height": h} for name, (w, h) in NAMED.items()}


@pytest.fixture(scope="module")
def impatient_url() -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "ATTENTION_HEAVY_SECONDS": "0.001"}
    log = ARTIFACTS / "uvicorn-heavy.log"
    ARTIFACTS.mkdir(exist_ok=True)
    with log.open("wb") as out, running(uvicorn_args(port), port=port, stdout=out, env=env,
                                        log=lambda: log.read_text()[-2000:]):
        yield f"http://{LOOPBACK}:{port}"


def light_link(url: str) -> str:
    """A permalink to the default preset at d_model 8: light to show, heavy with every stage."""
    fields = form_fields(httpx.get(url + "/").text)
    page = form_fields(httpx.post(url + "/", data={**fields, "d_model": "8"}).text)
    return "/?" + urlencode({k: v for k, v in page.items() if not k.startswith("grid-")})


def shot(page: Page, name: str) -> Path:
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


@pytest.mark.parametrize("viewport", swept(NAMED, [n for n, s in NAMED.items() if s in SAMPLE_SCREENS]))
def test_a_heavy_step_the_server_cannot_take_keeps_the_page_and_says_why(
        browser: Browser, impatient_url: str, page_log: PageLog, viewport: str) -> None:
    context = browser.new_context(viewport=VIEWPORTS[viewport], base_url=impatient_url)
    page = context.new_page()
    page.on("response", page_log.on_response)
    page.on("pageerror", page_log.on_page_error)
    page_log.allow(503, "/stages")
    try:
        assert page.goto(light_link(impatient_url)).status == 200
        shown = current_stage(page).locator("table.heatmap").first
        before = cells(shown)
        page.get_by_label("show all stages").check()  # every stage at d_model 8: a heavy page
        message = page.locator("#err-view")
        expect(message).to_contain_text("more than 0.001 s of work")
        expect(message).to_be_visible()
        expect(current_stage(page)).to_have_count(1)  # the last good page, as it was
        assert cells(shown) == before
        shot(page, f"heavy-busy-{viewport}")
        box = message.bounding_box()  # where the student's eyes are: on the first screen, beside the stage
        assert box is not None and box["y"] + box["height"] <= VIEWPORTS[viewport]["height"]
    finally:
        context.close()
    assert not page_log.problems, page_log.problems


@pytest.mark.parametrize("js_enabled", [False])
def test_without_javascript_a_heavy_page_sends_the_student_back_to_their_form(
        browser: Browser, impatient_url: str, js_enabled: bool) -> None:
    context = browser.new_context(viewport=VIEWPORT, base_url=impatient_url, java_script_enabled=js_enabled)
    page = context.new_page()
    try:
        response = page.goto("/?preset=learn-bank")  # the Learn panel makes a page heavy
        assert response is not None and response.status == 503
        expect(page.get_by_role("heading", name="The server is busy")).to_be_visible()
        expect(page.locator("main")).to_contain_text("Back button")
        shot(page, "heavy-busy-nojs")
    finally:
        context.close()
