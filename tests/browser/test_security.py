"""The strict Content-Security-Policy in a real Chromium: the page and the API docs work under it
with no violation, and a token typed as markup stays text.

Chromium reports a CSP violation as a console error, which the `page` fixture turns into a
failure; the tests also listen for the `securitypolicyviolation` event directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from app.web.security import PAGE_POLICY

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

WATCH_VIOLATIONS = """() => {
  window.__violations = [];
  document.addEventListener("securitypolicyviolation",
    e => window.__violations.push(e.violatedDirective + " " + e.blockedURI));
}"""


def violations(page: Page) -> list[str]:
    return page.evaluate("() => window.__violations || []")


def test_the_page_works_under_its_policy(page: Page) -> None:
    page.add_init_script(f"({WATCH_VIOLATIONS})()")
    response = page.goto("/?preset=block&stage=x")
    assert response is not None and response.headers["content-security-policy"] == PAGE_POLICY
    for key in ("qkv", "softmax", "ffn", "addnorm2"):
        page.locator(f"#map-wide-{key}").click()
        expect(page.locator(f"#stage-{key}")).to_be_visible()
    page.locator("#lab-panel summary").click()
    expect(page.locator("#lab-panel svg").first).to_be_visible()
    page.get_by_label("quiz: hide each stage's results").check()
    expect(page.locator("section.quiz")).to_be_visible()
    page.get_by_role("button", name="Pin this state").click()
    expect(page.locator(".pin-line .pinned")).to_be_visible()
    assert violations(page) == []


def test_a_token_typed_as_markup_stays_text(page: Page) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.add_init_script(f"({WATCH_VIOLATIONS})()")
    page.goto("/?preset=three-token&stage=softmax")
    evil = '"><img src=x onerror=alert(1)><script>alert(2)</script>'
    token = page.locator('input[name="token-0"]')
    with page.expect_response(lambda r: r.url.endswith("/stages")):
        token.fill(evil[:40])  # the length bound
    expect(page.locator('table[data-ref="softmax.0"] tbody th').first).to_contain_text('"><img src=x')
    expect(page.locator("#stages img")).to_have_count(0)
    expect(page.locator("#stages script")).to_have_count(0)
    assert dialogs == [] and violations(page) == []
    assert not [u for u in requests if u.endswith("/x")]
    expect(token).to_have_value(evil[:40])


def test_the_api_docs_load_offline_and_run_a_request(page: Page) -> None:
    page.add_init_script(f"({WATCH_VIOLATIONS})()")
    page.goto("/docs")
    summary = page.locator(".opblock-summary").first
    expect(summary).to_be_visible(timeout=15_000)
    summary.click()
    page.get_by_role("button", name="Try it out").click()
    page.get_by_role("button", name="Execute").click()
    status = page.locator(".live-responses-table tbody .response-col_status").first
    expect(status).to_have_text("200", timeout=15_000)
    assert violations(page) == []
