"""Without JavaScript, Enter in any field of the inputs applies the edit and nothing else: the form's default
button (the first of the form in the page) is Apply, never "Teach a live class", whose button belongs to the same
form from the header's menu."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

# (field, what is typed, a locator that shows the edit applied, its text)
EDITS = (
    ("x-0-0", "2.5", "#stage-x table.heatmap tbody tr:first-child td >> nth=0", "2.500"),
    ("w_q-0-0", "0.5", "input[name='w_q-0-0']", None),
    ("d_k", "2", "#stage-x", None),
    ("token-0", "ein", "#stage-x table.heatmap tbody tr:first-child th", "1 ein"),
)


@pytest.mark.parametrize("js_enabled", [False])
def test_enter_in_a_field_applies_the_edit_and_starts_no_class(page: Page) -> None:
    for name, typed, shown, text in EDITS:
        page.goto("/?preset=default")
        page.locator("#editor > summary").click()  # the drawer comes closed: the student opens it to edit
        field = page.locator(f"input[name='{name}']")
        field.fill(typed)
        field.press("Enter")
        page.wait_for_load_state()
        assert "/class/" not in page.url, f"Enter in {name} started a live class: {page.url}"
        expect(page.locator(f"input[name='{name}']")).to_have_value(typed)
        if text is not None:
            expect(page.locator(shown)).to_have_text(text)
        if name == "d_k":
            expect(page.locator("#state input[name='shape']")).to_have_value("3,1,2,2,0,0")
