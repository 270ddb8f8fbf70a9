"""Labels whole in every language, on every screen: the lines figure's column headings ("requêtes", "Schlüssel",
"查询") inside their figure, and the header's labels ("Scenario", "场景") on one line, never one character a line,
at 1366×768, 1920×1080, 768×1024 and 390×844. One page per language, resized; a screenshot of each French and
Chinese screen in test-artifacts/.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.browser.conftest import save_screenshot
from tests.conftest import VIEWPORTS

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

SCREENSHOTS = ("fr", "zh")

# Each column heading of the lines figure: its text, its box and its figure's box (the SVG, as drawn).
HEADINGS = """() => [...document.querySelectorAll('.lines-svg')].filter((s) => s.getClientRects().length)
  .flatMap((svg) => [...svg.querySelectorAll('text.colh')].map((t) => {
    const a = t.getBoundingClientRect(), b = svg.getBoundingClientRect();
    return {text: t.textContent, l: a.left, r: a.right, fl: b.left, fr: b.right, t: a.top, ft: b.top};
  }))"""

# Each visible label of the header, with the number of lines its own words take (their line boxes; a field
# inside the label may go on a line of its own).
HEADER_LABELS = """() => [...document.querySelectorAll('header.top label, header.top summary')]
  .filter((el) => el.checkVisibility({visibilityProperty: true}) && el.getBoundingClientRect().width > 2
    && getComputedStyle(el).clip === 'auto' && !el.closest('.visually-hidden'))  // a screen reader's label only
  .map((el) => {
    const words = [...el.childNodes].filter((n) => n.nodeType === Node.TEXT_NODE && n.textContent.trim());
    const tops = new Set();
    for (const n of words) {
      const range = document.createRange();
      range.selectNodeContents(n);
      for (const r of range.getClientRects()) if (r.width > 0) tops.add(Math.round(r.top));
    }
    const box = el.getBoundingClientRect();
    return {text: words.map((n) => n.textContent.trim()).join(' '), lines: tops.size, l: box.left, r: box.right};
  }).filter((label) => label.text)"""


@pytest.mark.parametrize("inputs_open", [False])
@pytest.mark.parametrize("lang", ["fr", "de", "es", "zh"])
def test_labels_are_whole_on_every_screen(page: Page, lang: str) -> None:
    page.set_viewport_size({"width": VIEWPORTS[0][0], "height": VIEWPORTS[0][1]})
    page.goto(f"/?preset=default&stage=softmax&lang={lang}")  # short tokens: the narrowest queries column
    expect(page.locator("#stage-softmax .lines-svg")).to_be_visible()
    for width, height in VIEWPORTS:
        where = f"{lang} {width}×{height}"
        page.set_viewport_size({"width": width, "height": height})
        page.locator("#stage-softmax .lines-svg").scroll_into_view_if_needed()
        headings = page.evaluate(HEADINGS)
        assert len(headings) >= 2, where
        for h in headings:
            assert h["l"] >= h["fl"] - 0.5 and h["r"] <= h["fr"] + 0.5, f"{where}: {h['text']!r} cut: {h}"
            assert h["t"] >= h["ft"] - 0.5, f"{where}: {h['text']!r} above its figure"
        labels = page.evaluate(HEADER_LABELS)
        assert labels, where
        for label in labels:
            assert label["lines"] == 1, f"{where}: {label['text']!r} takes {label['lines']} lines"
            assert label["l"] >= 0 and label["r"] <= width + 0.5, f"{where}: {label['text']!r} off the screen"
        if lang in SCREENSHOTS:
            page.evaluate("() => window.scrollTo(0, 0)")
            save_screenshot(page, f"labels-{lang}-{width}x{height}-top", full_page=False)
            page.locator("#stage-softmax .lines-svg").scroll_into_view_if_needed()
            save_screenshot(page, f"labels-{lang}-{width}x{height}-lines", full_page=False)
