""""Open as a notebook" as a student uses it: the button under the stages downloads a .ipynb of the page's
state as it is on the screen (an edit made a moment before included), and the model page's link downloads
its head's notebook. The files are valid notebooks; tests/view/test_notebook.py runs them in a kernel."""

from __future__ import annotations

from typing import TYPE_CHECKING

import nbformat
import pytest

from tests.browser.conftest import htmx_idle
from tests.browser.test_export import download

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser


@pytest.fixture
def inputs_open() -> bool:
    """The Inputs drawer open, as a student who edits has it."""
    return True


def test_open_as_a_notebook_downloads_the_state_on_screen(page: Page) -> None:
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto("/?preset=causal&stage=softmax")
    button = page.get_by_role("button", name="Open as a notebook (.ipynb)")
    expect(button).to_be_visible()
    cell = page.locator("input[name='x-0-0']")
    cell.fill("0.625")
    cell.dispatch_event("change")
    expect(page.locator("#stage-softmax")).to_be_visible()
    htmx_idle(page)
    name, text = download(page, button)
    assert name == "attention-causal.ipynb"
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "[0.625, " in code and "mask = np.array(" in code
    titles = [c.source.splitlines()[0] for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("###")]
    assert len(titles) >= 8 and any("oftmax" in t for t in titles)


def test_the_model_page_s_notebook_link(page: Page) -> None:
    page.goto("/model?text=Birds+fly+south.&layer=2&head=7", timeout=60_000)  # the first visit reads the model
    link = page.locator("#model-notebook")
    expect(link).to_be_visible()
    name, text = download(page, link)
    assert name.endswith(".ipynb")
    nb = nbformat.reads(text, as_version=4)
    assert "layer 2, head 7" in nb.cells[0].source
