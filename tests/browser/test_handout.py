"""The printed handout in a real Chromium: its PDF on A4 and on Letter (every stage's heading, each stage starting a
page), nothing wider than the paper in print media for a 16-token state with embeddings of 16, and the Print button.
One browser context for the module: a PDF costs about a second. The PDFs are kept in test-artifacts/."""

from __future__ import annotations

import re
from collections.abc import Iterator
from io import BytesIO
from typing import TYPE_CHECKING
from urllib.parse import urlencode

import numpy as np
import pytest

from tests.browser.conftest import ARTIFACTS, VIEWPORT
from tests.web.test_handout import FORWARD, sixteen_by_sixteen

try:
    from pypdf import PdfReader
except ImportError:  # the test extra has it (pyproject.toml)
    PdfReader = None

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.browser

# The printable width of A4 inside static/handout.css's 12 mm margins, in CSS pixels (96 to the inch); Letter's
# is wider (191.9 mm).
A4_PRINTABLE_PX = round((210 - 2 * 12) / 25.4 * 96)
SIXTEEN = "/handout?" + urlencode(sixteen_by_sixteen())

# Every heading's words (its maths aside), in order: what the PDF's text is searched for.
HEADINGS_JS = """() => [...document.querySelectorAll('h3[id^="stage-"]')].map(h => {
  const words = h.cloneNode(true);
  words.querySelectorAll('math, .block-note').forEach(m => m.remove());
  return words.textContent;
})"""

# What overflows in print media: a stage wider than its box, or a matrix, figure or code past the body's right edge.
OVERFLOW_JS = """() => {
  const right = document.body.getBoundingClientRect().right + 0.5;
  const out = [];
  for (const s of document.querySelectorAll('.stage'))
    if (s.scrollWidth > s.clientWidth) out.push(`${s.id}: scrollWidth ${s.scrollWidth} > ${s.clientWidth}`);
  for (const el of document.querySelectorAll('table, figure, svg, .formula, h3, p'))
    if (el.getBoundingClientRect().right > right)
      out.push(`${el.closest('.stage')?.id || 'head'} ${el.tagName} ${el.className?.baseVal ?? el.className}: `
               + `right ${Math.round(el.getBoundingClientRect().right)} > ${Math.round(right)}`);
  return out;
}"""

VISIBLE_CONTROLS_JS = """() => [...document.querySelectorAll('button, input, select, details, textarea')]
  .filter(el => el.getClientRects().length > 0).map(el => el.outerHTML.slice(0, 80))"""


@pytest.fixture(scope="module")
def handout_page(browser: Browser, base_url: str) -> Iterator[Page]:
    context = browser.new_context(viewport=VIEWPORT, base_url=base_url)
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    try:
        yield page
    finally:
        context.close()
    assert not problems, problems


def words(text: str) -> str:
    return re.sub(r"\s+", "", text)


def printed(page: Page, name: str, paper: str) -> list[str]:
    """The page printed on ``paper`` as Chromium prints it: the text of each PDF page, the PDF kept as an artifact."""
    if PdfReader is None:
        pytest.fail("pypdf is not installed (pip install -e '.[test]')")
    pdf = page.pdf(format=paper)
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"handout-{name}-{paper}.pdf").write_bytes(pdf)
    return [words(p.extract_text()) for p in PdfReader(BytesIO(pdf)).pages]


def assert_one_stage_to_a_page(pages: list[str], headings: list[str]) -> None:
    """Every heading is printed, in order, the first under the title, each other one at the top of its own page."""
    assert len(pages) >= len(headings)
    assert words(headings[0]) in pages[0]
    starts = [i for i, text in enumerate(pages) for h in headings[1:] if text.startswith(words(h))]
    assert len(starts) == len(headings) - 1, f"stages not starting a page: {headings}, {[p[:30] for p in pages]}"
    assert starts == sorted(set(starts)) and starts[0] > 0


def test_a_presets_handout_prints_one_stage_to_a_page_on_a4_and_letter(handout_page: Page) -> None:
    page = handout_page
    page.goto("/handout?preset=bank-river")
    page.emulate_media(media="print")
    headings = page.evaluate(HEADINGS_JS)
    assert [h.split()[0] for h in headings] == [str(n) for n in range(len(FORWARD))]
    for paper in ("A4", "Letter"):
        pages = printed(page, "bank-river", paper)
        assert_one_stage_to_a_page(pages, headings)
        assert "bank①:bytheriver" in pages[0] and "Scantoopenthisstate" in pages[0]  # the title and the QR code
    assert page.evaluate(VISIBLE_CONTROLS_JS) == []  # the Print button too: it is for the screen


@pytest.mark.slow
def test_sixteen_tokens_of_sixteen_dimensions_fit_the_paper(handout_page: Page) -> None:
    page = handout_page
    page.goto(SIXTEEN)
    page.emulate_media(media="print")
    page.set_viewport_size({"width": A4_PRINTABLE_PX, "height": 1000})  # the width print lays the page out in
    try:
        overflowing = page.evaluate(OVERFLOW_JS)
        assert overflowing == [], overflowing
        assert page.evaluate(VISIBLE_CONTROLS_JS) == []
        # Every number is in the PDF: the 16 columns of the last token's row of X, none cut off.
        headings = page.evaluate(HEADINGS_JS)
        last_row = page.locator('table[data-ref="x"] tbody tr').last.locator("td").all_inner_texts()
        assert len(last_row) == 16
        for paper in ("A4", "Letter"):
            pages = printed(page, "16x16", paper)
            assert_one_stage_to_a_page(pages, headings)
            assert words(" ".join(last_row)).replace("−", "") in words(" ".join(pages)).replace("−", "")
            assert "Thelinktothisstate" in pages[-1]  # too long for a QR code: printed on the last page
    finally:
        page.set_viewport_size(VIEWPORT)
        page.emulate_media(media="screen")


def test_embeddings_of_64_fit_the_printed_width(handout_page: Page) -> None:
    page = handout_page
    rng = np.random.default_rng(2)
    fields = {"shape": "64,2,32,32,0,0", "stage": "x"} | {f"token-{i}": f"t{i + 1}" for i in range(4)}
    fields |= {f"x-{i}-{j}": f"{v:.2f}" for (i, j), v in np.ndenumerate(rng.normal(size=(4, 64)))}
    page.goto("/handout?" + urlencode(fields))
    page.emulate_media(media="print")
    page.set_viewport_size({"width": A4_PRINTABLE_PX, "height": 1000})
    try:
        overflowing = page.evaluate(OVERFLOW_JS)
        assert overflowing == [], overflowing
        assert page.locator(".fit-64").count() > 0  # X, W_Q, W_K, W_V: printed small, and said so
        assert page.locator(".fit-note").count() == page.locator(".fit-64").count()
    finally:
        page.set_viewport_size(VIEWPORT)
        page.emulate_media(media="screen")


def test_the_print_button_prints(handout_page: Page) -> None:
    page = handout_page
    page.goto("/handout?preset=pool")
    page.evaluate("() => { window.print = () => { window.printedHandout = true; }; }")
    button = page.get_by_role("button", name="Print")
    button.click()  # hidden without a script; shown and working with one
    assert page.evaluate("() => window.printedHandout") is True
