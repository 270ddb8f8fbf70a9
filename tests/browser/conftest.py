"""Browser tests: the real app under uvicorn, driven by a real Chromium through Playwright.

Chromium is Debian's (Playwright cannot download its own browser offline). Without a browser or
the playwright package every test here is skipped with the reason, unless REQUIRE_BROWSER=1,
which turns the skip into a failure (CI must not pass by skipping).

Every test gets a fresh context and a `page` that fails the test afterwards if the page logged a
console error or warning, threw, or saw a failed request or an HTTP status >= 400 (a missing
favicon counts). A test that provokes an error on purpose declares it with `page_log.allow(...)`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn
from urllib.parse import urlsplit

import pytest

from tests.servers import LOOPBACK, free_port, running, uvicorn_args

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # reported by the `browser` fixture: skip, or fail under REQUIRE_BROWSER=1
    sync_playwright = None

if TYPE_CHECKING:
    from playwright.sync_api import Browser, ConsoleMessage, Frame, Page, Playwright, Request, Response

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / "test-artifacts"  # git-ignored
VIEWPORT = {"width": 1400, "height": 1000}
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
SYSTEM_CHROMIUM = "/usr/bin/chromium"
ACTION_TIMEOUT_MS = 10_000

_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


def _unavailable(reason: str) -> NoReturn:
    """No browser to drive: skip, or fail when the environment insists on browser tests."""
    if os.environ.get("REQUIRE_BROWSER") == "1":
        pytest.fail(f"REQUIRE_BROWSER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def find_chromium(pw: Playwright) -> str:
    """CHROMIUM_PATH, else Debian's chromium, else one on PATH, else Playwright's own if installed."""
    chosen = os.environ.get("CHROMIUM_PATH")
    if chosen:  # asked for explicitly: no silent fallback to another browser
        if os.access(chosen, os.X_OK):
            return chosen
        _unavailable(f"CHROMIUM_PATH={chosen} is not an executable file")
    for path in (SYSTEM_CHROMIUM, shutil.which("chromium"), shutil.which("chromium-browser"),
                 pw.chromium.executable_path):
        if path and os.access(path, os.X_OK):
            return path
    _unavailable("no Chromium found: set CHROMIUM_PATH, install Debian's chromium (make browser) "
                 "or run `playwright install chromium`")


# --- the app ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def base_url() -> Iterator[str]:
    """The real app, served by uvicorn on a free port of 127.0.0.1 for the whole session."""
    port = free_port()
    ARTIFACTS.mkdir(exist_ok=True)
    for stale in ARTIFACTS.glob("FAILED-*.png"):  # from an earlier run
        stale.unlink(missing_ok=True)  # the other worker may have taken it first
    log = ARTIFACTS / f"uvicorn{os.environ.get('PYTEST_XDIST_WORKER', '')}.log"  # one per worker of make test
    with log.open("wb") as out, running(uvicorn_args(port), port=port, stdout=out,
                                        log=lambda: f"see {log}:\n{log.read_text()[-2000:]}"):
        yield f"http://{LOOPBACK}:{port}"


# --- the browser --------------------------------------------------------------------------------
# Package scope, not session: while Playwright's sync API is alive its event loop counts as
# running in this thread, which would break asyncio.run() in the other test modules.


@pytest.fixture(scope="package")
def playwright() -> Iterator[Playwright]:
    if sync_playwright is None:
        _unavailable("the playwright package is not installed (pip install -e '.[test]')")
    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="package")
def browser(playwright: Playwright) -> Iterator[Browser]:
    browser = playwright.chromium.launch(executable_path=find_chromium(playwright), args=CHROMIUM_ARGS)
    yield browser
    browser.close()


@dataclass
class PageLog:
    """What went wrong in the page, and which HTTP errors the test provokes on purpose."""

    problems: list[str] = field(default_factory=list)
    allowed: list[tuple[int, str, str]] = field(default_factory=list)  # (status, method, path)
    seen_allowed: list[str] = field(default_factory=list)

    def allow(self, status: int, path: str, method: str = "POST") -> None:
        """Expect `status` from `method path` (e.g. 422 from POST /stages): not a problem."""
        self.allowed.append((status, method.upper(), path))

    def _is_allowed(self, status: int, url: str, method: str | None) -> bool:
        path = urlsplit(url).path
        return any(s == status and p == path and (method is None or m == method) for s, m, p in self.allowed)

    def on_console(self, msg: ConsoleMessage) -> None:
        if msg.type not in ("error", "warning"):
            return
        url = msg.location.get("url", "")
        # Chromium logs every 4xx/5xx as "Failed to load resource: … status of 422 (…)".
        for status, _, _ in self.allowed:
            if f"status of {status} " in msg.text and self._is_allowed(status, url, None):
                return
        self.problems.append(f"console {msg.type}: {msg.text} ({url})")

    def on_response(self, response: Response) -> None:
        if response.status < 400:
            return
        line = f"HTTP {response.status} from {response.request.method} {response.url}"
        if self._is_allowed(response.status, response.url, response.request.method):
            self.seen_allowed.append(line)
        else:
            self.problems.append(line)

    def on_request_failed(self, request: Request) -> None:
        # A reload or a navigation cancels the loads still under way (the favicon, whose resource
        # type is "other", typically; a form post that turns into a download): Chromium reports
        # those as net::ERR_ABORTED. Anything else is a problem, and so is an aborted request
        # the page's script made (htmx's xhr).
        if request.failure == "net::ERR_ABORTED" and request.resource_type not in ("xhr", "fetch"):
            return
        self.problems.append(f"request failed: {request.method} {request.url} ({request.failure})")

    def on_page_error(self, error: Exception) -> None:
        self.problems.append(f"uncaught exception: {error}")


@pytest.fixture
def page_log() -> PageLog:
    return PageLog()


@pytest.fixture
def inputs_open() -> bool:
    """Whether the page opens its inputs drawer when it loads, as a student who edits does first.
    Tests of the layout itself take the page as it comes: parametrize with [False]."""
    return True


# With JavaScript the drawer starts closed; a test that edits opens it as a student would (its toggle
# is remembered in the form's panels, so later swaps keep it open).
OPEN_INPUTS = """document.addEventListener("DOMContentLoaded", () => {
  setTimeout(() => { const d = document.getElementById("editor"); if (d && !d.open) d.open = true; }, 0);
});"""


@pytest.fixture
def js_enabled() -> bool:
    """A test runs without JavaScript with @pytest.mark.parametrize("js_enabled", [False])."""
    return True


def htmx_idle(page: Page | Frame, timeout: float | None = None) -> None:
    """Wait until htmx has no request in flight and no swap still swapping or settling."""
    page.wait_for_function("() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')",
                           timeout=timeout)


def save_screenshot(page: Page, name: str, *, full_page: bool = True) -> Path:
    """Save a PNG of the page as test-artifacts/<name>.png and return its path."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


@pytest.fixture
def screenshot(page: Page) -> Callable[..., Path]:
    """`screenshot("name")` saves the current page into test-artifacts/."""
    return lambda name, full_page=True: save_screenshot(page, name, full_page=full_page)


@pytest.fixture
def page(browser: Browser, base_url: str, page_log: PageLog, js_enabled: bool, inputs_open: bool,
         request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context(viewport=VIEWPORT, base_url=base_url, java_script_enabled=js_enabled)
    if js_enabled and inputs_open:
        context.add_init_script(OPEN_INPUTS)
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    page.on("console", page_log.on_console)
    page.on("response", page_log.on_response)
    page.on("requestfailed", page_log.on_request_failed)
    page.on("pageerror", page_log.on_page_error)
    try:
        yield page
        if js_enabled:  # let a request still in flight finish before the log is read
            htmx_idle(page, timeout=5_000)
        call = request.node.stash.get(_REPORTS, {}).get("call")
        if call is not None and call.failed:
            save_screenshot(page, f"FAILED-{request.node.name}")
        problems = list(page_log.problems)
    finally:
        context.close()
    if problems:
        pytest.fail("the page reported problems:\n  " + "\n  ".join(problems), pytrace=False)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep each phase's report on the item, so `page` can screenshot a failed test."""
    report = yield
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    return report


def open_class_menu(page: Page) -> None:
    """Open the app bar's "Class and files" menu (inside "Menu" on a narrow screen), as a student clicks it."""
    more = page.locator("details.app-more > summary")
    if more.is_visible() and page.locator("details.app-more[open]").count() == 0:
        more.click()
    if page.locator("details.class-files[open]").count() == 0:
        page.locator("details.class-files > summary").click()
