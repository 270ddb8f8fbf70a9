"""The views to embed, in Chromium, framed by a page of another site (http://localhost:<port>, the app being on
http://127.0.0.1): with ATTENTION_EMBED_ORIGINS naming that site the frame loads and works (an edit, a step, the
inspector: posts from inside the frame are same-origin); without it, and for the page itself, the frame is refused.
The "Embed" box's Copy gives the HTML that, pasted in that page, shows the stage. Screenshots of a 720×560 frame and
a 390 px one go to test-artifacts/."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from tests.browser.conftest import ARTIFACTS, htmx_idle
from tests.servers import LOOPBACK, free_port, running, uvicorn_args

if TYPE_CHECKING:
    from playwright.sync_api import Browser, FrameLocator, Page, Request

SOFTMAX = "/embed?preset=pool&stage=softmax"


class CoursePage(BaseHTTPRequestHandler):
    """A course page of another site: ``/?html=<markup>`` puts the markup under a heading, as a teacher pastes it."""

    def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
        markup = parse_qs(urlsplit(self.path).query).get("html", [""])[0]
        body = ("<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Week 3</title><link rel='icon' "
                f"href='data:,'></head><body><h1>Week 3: attention</h1>{markup}</body></html>").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def course() -> Iterator[str]:
    """The other site: localhost, not 127.0.0.1, so another site and not only another origin."""
    server = ThreadingHTTPServer((LOOPBACK, free_port()), CoursePage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://localhost:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def framed_app(course: str) -> Iterator[str]:
    """The app, which the course's site may frame."""
    port = free_port()
    env = {**os.environ, "ATTENTION_EMBED_ORIGINS": course}
    with running(uvicorn_args(port), port=port, env=env):
        yield f"http://{LOOPBACK}:{port}"


def iframe(src: str, width: int = 720, height: int = 560) -> str:
    return f'<iframe src="{src.replace("&", "&amp;")}" width="{width}" height="{height}" title="Attention"></iframe>'


class Watched:
    """A page whose console errors, failed requests and HTTP errors are kept, for the test to judge."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.console: list[str] = []
        self.problems: list[str] = []
        page.on("console", lambda m: self.console.append(m.text) if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: self.problems.append(f"uncaught exception: {e}"))
        page.on("requestfailed", self.on_request_failed)
        page.on("response", lambda r: self.problems.append(f"HTTP {r.status} from {r.request.method} {r.url}")
                if r.status >= 400 else None)


    def on_request_failed(self, request: Request) -> None:
        # A navigation cancels the loads still under way (a favicon): as tests/browser/conftest.py, not a problem.
        if request.failure == "net::ERR_ABORTED" and request.resource_type not in ("xhr", "fetch"):
            return
        self.problems.append(f"request failed: {request.url} ({request.failure})")


@pytest.fixture
def watched(browser: Browser) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 760, "height": 640})
    context.set_default_timeout(10_000)
    yield Watched(context.new_page())
    context.close()


def weights(frame: FrameLocator) -> str:
    return frame.locator('table[data-ref^="softmax"] tbody tr').first.inner_text()


def test_a_framed_stage_works_from_another_site(watched: Watched, course: str, framed_app: str) -> None:
    page = watched.page
    page.goto(f"{course}/?html={quote(iframe(framed_app + SOFTMAX))}")
    frame = page.frame_locator("iframe")
    frame.locator("#stage-softmax").wait_for()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "embed-720x560.png"))
    # An edit in the folded inputs: the weights follow (a post from inside the frame, same-origin).
    before = weights(frame)
    frame.locator("#editor > summary").click()
    frame.locator('#editor input[name="x-0-0"]').fill("3")
    inner = page.frames[1]  # another origin: its document is reached through Playwright's frame
    inner.wait_for_function("""before => {
        const row = document.querySelector('table[data-ref^="softmax"] tbody tr');
        return row && row.innerText !== before && !document.querySelector(".htmx-request");
    }""", arg=before)
    assert weights(frame).split()[:2] == ["1", "pool"] and weights(frame) != before
    # A step, then a cell inspected.
    frame.locator("#next-stage").click()
    frame.locator("#stage-output").wait_for()
    frame.locator('table[data-ref^="output"] tbody td').first.click()
    assert frame.locator("#inspector .inspect-title").inner_text().startswith("Output of query 1 (pool)")
    htmx_idle(inner)
    assert not watched.problems and not watched.console, watched.problems + watched.console


def test_a_framed_stage_fits_a_phones_width(watched: Watched, course: str, framed_app: str) -> None:
    page = watched.page
    page.set_viewport_size({"width": 420, "height": 800})
    page.goto(f"{course}/?html={quote(iframe(framed_app + '/embed?preset=bank-river&stage=scaled', 390, 700))}")
    page.frame_locator("iframe").locator("#stage-scaled").wait_for()
    inner = page.frames[1]
    inner.wait_for_load_state("load")
    page.screenshot(path=str(ARTIFACTS / "embed-390.png"))
    # No sideways scroll of the frame's page: a matrix too wide scrolls inside its own box.
    assert inner.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    assert not watched.problems and not watched.console, watched.problems + watched.console


def test_the_copied_embed_code_shows_the_stage_in_the_course(watched: Watched, course: str,
                                                             framed_app: str) -> None:
    page = watched.page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=framed_app)
    page.goto(f"{framed_app}/?preset=pool&stage=scores")
    page.locator("#next-stage").click()  # a swap: the box's stylesheet and script stay
    box = page.locator("#stage-scaled details.embed-box")
    box.locator("summary").click()
    assert box.locator("textarea").first.bounding_box()["width"] > 400
    box.get_by_role("button", name="Copy").first.click()
    box.get_by_text("Copied.").wait_for()
    code = page.evaluate("navigator.clipboard.readText()")
    assert code.startswith(f'<iframe src="{framed_app}/embed?preset=pool&amp;') and 'title="Attention: Scaled"' in code
    page.goto(f"{course}/?html={quote(code)}")
    page.frame_locator("iframe").locator("#stage-scaled").wait_for()
    assert not watched.problems and not watched.console, watched.problems + watched.console


@pytest.mark.parametrize("where", ["no origin allowed", "not a view to embed"])
def test_a_frame_is_refused(watched: Watched, course: str, framed_app: str, base_url: str, where: str) -> None:
    """The session's server allows no origin; the framed app's page itself (/) refuses every frame."""
    src = base_url + SOFTMAX if where == "no origin allowed" else framed_app + "/?preset=pool&stage=softmax"
    page = watched.page
    with page.expect_console_message(lambda m: "frame-ancestors" in m.text):
        page.goto(f"{course}/?html={quote(iframe(src))}")
    page.wait_for_load_state("load")
    frame = page.frames[1]
    assert frame.url != src and frame.evaluate("document.querySelector('#stages')") is None  # never loaded
    expected = "'self'" if where == "no origin allowed" else "'none'"
    assert len(watched.console) == 1 and f"frame-ancestors {expected}" in watched.console[0], watched.console
    assert watched.problems == [f"request failed: {src} (net::ERR_BLOCKED_BY_RESPONSE)"], watched.problems
