"""A real model's page waiting its turn, in a real Chromium (app.web.served): the first screen says where the
question stands at once, and the answer takes its place by itself — swapped in with JavaScript, by the page's own
reload without it — on every screen a class has; a new text sent from the form waits the same way.

The module's server answers every question not yet kept with its place in the queue first
(ATTENTION_FIRST_SCREEN_SECONDS=0), as a busy hall's would."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.browser.conftest import ARTIFACTS, save_screenshot
from tests.browser.test_decoder_page import wait_for_decoder
from tests.conftest import VIEWPORTS
from tests.servers import LOOPBACK, free_port, running, uvicorn_args

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Route

pytestmark = pytest.mark.browser

ANSWER_MS = 30_000


@pytest.fixture(scope="module")
def waiting_url(browser: Browser) -> Iterator[str]:
    port = free_port()
    ARTIFACTS.mkdir(exist_ok=True)
    env = {**os.environ, "ATTENTION_FIRST_SCREEN_SECONDS": "0", "ATTENTION_PRELOAD_LANGUAGE_MODEL": "true"}
    with (ARTIFACTS / "uvicorn-waiting.log").open("wb") as out, running(uvicorn_args(port), port=port, stdout=out,
                                                                         env=env):
        url = f"http://{LOOPBACK}:{port}"
        wait_for_decoder(url)
        yield url


def unique(text: str) -> str:
    return f"{text} {time.monotonic_ns() % 10**9}"


@pytest.mark.parametrize("js", [True, False], ids=["javascript", "no-javascript"])
def test_the_first_screen_says_where_the_question_stands_then_shows_the_answer(browser: Browser, waiting_url: str,
                                                                               js: bool) -> None:
    context = browser.new_context(viewport={"width": 1366, "height": 768}, java_script_enabled=js)
    page = context.new_page()
    try:
        text = unique("The bank of the river was")
        page.goto(f"{waiting_url}/decoder?text={text}", wait_until="domcontentloaded")
        waiting = page.locator(".waiting")
        expect(waiting).to_be_visible()
        expect(waiting).to_contain_text("question")
        expect(page.locator("#text")).to_have_value(text)  # the student's text stays in its box
        save_screenshot(page, f"waiting-1366x768-{'js' if js else 'nojs'}", full_page=False)
        expect(page.locator("#candidates")).to_be_visible(timeout=ANSWER_MS)
        expect(page.locator(".waiting")).to_have_count(0)
        assert page.url.endswith(f"/decoder?text={text.replace(' ', '%20')}") or "decoder?text=" in page.url
    finally:
        context.close()


def test_a_new_text_sent_from_the_form_waits_in_place_and_its_answer_is_swapped_in(browser: Browser,
                                                                                    waiting_url: str) -> None:
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    page = context.new_page()
    retargeted: list[str] = []
    page.on("response", lambda r: retargeted.append(r.url) if r.headers.get("hx-retarget") else None)
    try:
        page.goto(f"{waiting_url}/decoder?text={unique('The Eiffel Tower is in')}")
        expect(page.locator("#candidates")).to_be_visible(timeout=ANSWER_MS)
        page.wait_for_load_state("load")  # the reload that brought the answer, its images and scripts too
        loads = []
        page.on("load", lambda: loads.append(1))
        text = unique("Harry Potter went to Hogwarts. Harry Potter went to")
        page.locator("#text").fill(text)
        page.get_by_role("button", name="Run the model").click()
        expect(page.locator("#decoder-work .candidates, #candidates").first).to_be_visible(timeout=ANSWER_MS)
        expect(page.locator("#decoder-work")).not_to_have_class("waiting", timeout=ANSWER_MS)
        expect(page.locator("#text")).to_have_value(text)
        assert retargeted, "the form's request was answered with the waiting fragment first"
        assert not loads, "the answer was swapped in, not loaded as a new page"
    finally:
        context.close()


def test_the_waiting_page_on_every_screen(browser: Browser, waiting_url: str) -> None:
    context = browser.new_context()
    page = context.new_page()
    held: list[Route] = []  # the waiting page's asks, held until it is measured (its answer would replace it)
    holding = [True]
    page.route("**/decoder?*", lambda route: held.append(route)
               if holding[0] and route.request.headers.get("attention-wait") else route.continue_())
    try:
        for width, height in VIEWPORTS:
            page.set_viewport_size({"width": width, "height": height})
            holding[0] = True
            page.goto(f"{waiting_url}/decoder?text={unique('The capital of France is')}",
                      wait_until="domcontentloaded")
            box = page.locator(".waiting").bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 1
            save_screenshot(page, f"waiting-{width}x{height}", full_page=False)
            holding[0] = False
            while held:
                held.pop().continue_()
            expect(page.locator("#candidates")).to_be_visible(timeout=ANSWER_MS)
    finally:
        context.close()
