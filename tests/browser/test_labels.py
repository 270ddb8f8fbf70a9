"""The words and numbers around the heatmaps, as a student reads them on every screen: a class's laptop
(1366×768), a projector (1920×1080), a tablet (768×1024), a phone (390×844), and presenter mode on a
projector and on a laptop.

For every preset, with every stage shown and the lab, cost, Learn and inputs panels open (one page per
preset, resized rather than reloaded, then switched to presenter mode by its button): no legend's words
overflow their legend or run into a neighbour, no number prints as "−0.000", every minus sign before a
digit is a true minus (−) in the cells, labels, formulas and the inputs, and no raw markup (W_Q, d_k, \\sqrt,
^) is left in visible text outside typeset maths. Sparse attention's 16×16 matrices fit their box on a
tablet (smaller cells, their numbers on hover, focus or selection, said under the table), and a matrix
whose numbers are all 0 is one colour with a legend that says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from app.lesson.presets import PRESETS
from tests.browser.conftest import save_screenshot
from tests.conftest import SAMPLE_SCREENS, VIEWPORTS, swept

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

PRESENTER = ((1920, 1080), (1366, 768))
PANELS = "lab+cost+inputs+learn+target"

# Each visible legend: its box, its words' boxes, and whether it clips what it holds.
LEGENDS = """() => {
  const box = (el) => { const r = el.getBoundingClientRect(); return {l: r.left, r: r.right, t: r.top, b: r.bottom}; };
  return [...document.querySelectorAll('.legend')].filter((lg) => lg.getClientRects().length).map((lg) => ({
    where: (lg.closest('[id]') || {}).id + ' / ' + ((lg.closest('figure') || lg).querySelector('figcaption') || lg)
      .textContent.trim().slice(0, 40),
    box: box(lg),
    words: [...lg.querySelectorAll('.legend-ticks > span')].map((s) => ({text: s.textContent, ...box(s)})),
    clipped: lg.scrollWidth - lg.clientWidth,
  }));
}"""

# Every text a student can see (outside typeset maths, inputs, scripts and visually hidden captions), with
# where it is; and the values the number inputs show.
VISIBLE_TEXT = """() => {
  const skip = 'math, script, style, textarea, option, title, desc, .visually-hidden, table.heatmap > caption';
  const out = [];
  const walker = document.createTreeWalker(document.getElementById('workspace'), NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!n.textContent.trim() || !el || el.closest(skip)) continue;
    const r = el.getBoundingClientRect();
    if (r.width <= 1 || r.height <= 1 || getComputedStyle(el).visibility === 'hidden') continue;
    out.push([(el.closest('[id]') || {}).id + ' ' + el.tagName.toLowerCase(), n.textContent]);
  }
  for (const input of document.querySelectorAll('input.num')) {
    if (input.getClientRects().length) out.push(['input ' + input.name, input.value]);
  }
  return out;
}"""

NEGATIVE_ZERO = re.compile(r"[−-]0\.0+(?![0-9])")
HYPHEN_MINUS = re.compile(r"(?:^|[\s(=,;:\[])-[0-9]")  # a hyphen-minus used as a sign
RAW_MARKUP = re.compile(r"[_^\\]|sqrt|\bd_k\b")


def overlap(a: dict, b: dict) -> float:
    """How far two boxes overlap, in px along the shorter of the two axes (0: apart or touching)."""
    return max(0.0, min(min(a["r"], b["r"]) - max(a["l"], b["l"]), min(a["b"], b["b"]) - max(a["t"], b["t"])))


def check_legends(page: Page, where: str) -> int:
    legends = page.evaluate(LEGENDS)
    for lg in legends:
        name = f"{where}, legend of {lg['where']}"
        assert lg["clipped"] <= 0, f"{name}: {lg['clipped']} px of its words clipped"
        box = lg["box"]
        for w in lg["words"]:
            assert w["l"] >= box["l"] - 0.5 and w["r"] <= box["r"] + 0.5, f"{name}: {w['text']!r} leaves its legend"
        for a, b in zip(lg["words"], lg["words"][1:], strict=False):
            assert a["r"] <= b["l"] + 0.5, f"{name}: {a['text']!r} runs into {b['text']!r}"
    for i, a in enumerate(legends):
        for b in legends[i + 1:]:
            assert overlap(a["box"], b["box"]) <= 0.5, f"{where}: legends of {a['where']} and {b['where']} overlap"
    return len(legends)


def check_text(page: Page, where: str) -> None:
    for place, text in page.evaluate(VISIBLE_TEXT):
        assert not NEGATIVE_ZERO.search(text), f"{where}, {place}: a signed zero in {text!r}"
        assert not HYPHEN_MINUS.search(text), f"{where}, {place}: a hyphen-minus for a minus sign in {text!r}"
        assert not RAW_MARKUP.search(text), f"{where}, {place}: raw markup in {text!r}"


def check_sizes(page: Page, where: str, sizes: tuple[tuple[int, int], ...]) -> int:
    """The legends and the text at each size; how many legends were in view."""
    legends = 0
    for width, height in sizes:
        page.set_viewport_size({"width": width, "height": height})
        legends += check_legends(page, f"{where} at {width}×{height}")
        check_text(page, f"{where} at {width}×{height}")
    return legends


# Every stage and panel of a preset at once: why-scale's (16 tokens × 64 dimensions, learning and cost panels open)
# is answered in about 1.2 s on an idle machine, and in more than the 5 s of expect's default while another browser
# sweeps beside it.
WHOLE_WORKSPACE_MS = 30_000


def presenter_stages(page: Page) -> Iterator[str]:
    """Presenter mode from its first stage to its last, stepped with Next (a swap each, no reload)."""
    page.locator('#stages svg.map:visible a[id$="-x"]').click()
    expect(page.locator("#stages article.stage")).to_have_id("stage-x")
    while True:
        key = page.locator("#stages article.stage").get_attribute("id").removeprefix("stage-")
        yield key
        if page.locator("#next-stage").is_disabled():
            return
        page.locator("#next-stage").click()
        expect(page.locator("#stages article.stage")).not_to_have_id(f"stage-{key}", timeout=WHOLE_WORKSPACE_MS)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_legends_numbers_and_symbols_read_right_on_every_screen(page: Page, preset: str) -> None:
    page.goto(f"/?preset={preset}&show_all=on&panels={PANELS}")
    expect(page.locator("#stages .stage").first).to_be_visible()
    screens = swept(VIEWPORTS, SAMPLE_SCREENS)  # every one in a full run
    assert check_sizes(page, preset, screens) > 0, f"{preset}: no legend in view"
    page.locator("#present-toggle").click()
    expect(page.locator("#workspace.present")).to_be_visible(timeout=WHOLE_WORKSPACE_MS)
    legends = 0
    for key in presenter_stages(page):
        legends += check_sizes(page, f"presenter, {preset} stage {key}", PRESENTER)
        if key == "qkv" and preset in ("bank-river", "sparse"):
            save_screenshot(page, f"labels-presenter-{preset}-qkv-1366x768", full_page=False)
    assert legends > 0, f"presenter, {preset}: no legend in view"


def dense_tables(page: Page) -> list[dict]:
    return page.locator("#stage-softmax table.heatmap").evaluate_all("""ts => ts.map((t) => {
      const scroll = t.closest('.scroll');
      const note = t.parentElement.querySelector('.dense-note');
      return {ref: t.dataset.ref, columns: t.tHead.rows[0].cells.length - 1,
              inner: scroll.scrollWidth - scroll.clientWidth,
              right: t.getBoundingClientRect().right, screen: window.innerWidth,
              note: note && note.getClientRects().length ? note.textContent : ''};
    })""")


def test_sparse_16_token_matrices_fit_a_tablet_with_their_numbers_on_demand(page: Page) -> None:
    page.set_viewport_size({"width": 768, "height": 1024})
    page.goto("/?preset=sparse&stage=softmax")
    tables = dense_tables(page)
    assert [t["columns"] for t in tables] == [16, 16]
    for t in tables:
        assert t["inner"] <= 0, f"{t['ref']} scrolls {t['inner']} px inside its box at 768×1024"
        assert t["right"] <= t["screen"], f"{t['ref']} leaves the screen"
        assert "hover over a cell, or select it" in t["note"].lower(), "no word that the numbers are on demand"
    weights = page.locator("table[data-ref='softmax.0']")
    target = weights.locator("tbody tr").nth(2).locator("td").nth(3)
    number = target.locator("span")
    expect(number).to_be_hidden()  # too small for its number
    target.hover()
    expect(number).to_be_visible()
    assert re.fullmatch(r"\d\.\d{3}", number.inner_text())
    assert number.bounding_box()["width"] > target.bounding_box()["width"]  # beside the cell, at a readable size
    page.mouse.move(0, 0)
    expect(number).to_be_hidden()
    target.focus()  # from the keyboard too
    expect(number).to_be_visible()
    save_screenshot(page, "labels-sparse-768x1024", full_page=False)
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        for t in dense_tables(page):
            assert t["inner"] <= 0 or width < 768, f"{t['ref']} scrolls {t['inner']} px at {width}×{height}"
            assert t["right"] <= width, f"{t['ref']} leaves the screen at {width}×{height}"
        save_screenshot(page, f"labels-sparse-{width}x{height}", full_page=False)
    page.set_viewport_size({"width": 1920, "height": 1080})  # room for every number: printed in its cell
    expect(page.locator("#stage-softmax .dense-note").first).to_be_hidden()
    expect(weights.locator("tbody tr").nth(2).locator("td").nth(3).locator("span")).to_be_visible()


def test_a_matrix_of_zeros_is_one_colour_and_its_legend_says_so(page: Page) -> None:
    page.goto("/?preset=default&stage=x")
    link = page.locator("#permalink").get_attribute("href")
    page.goto(re.sub(r"(x-\d+-\d+)=[^&]*", r"\1=0", link) + "&show_all=on")  # every embedding 0: X, Q, K, V… 0
    for ref in ("x", "q.0", "output.0"):
        table = page.locator(f"table.heatmap[data-ref='{ref}']").first
        texts = table.locator("tbody td").all_inner_texts()
        assert texts and set(texts) == {"0.000"}, (ref, texts[:5])
        colours = table.locator("tbody td").evaluate_all(
            "tds => [...new Set(tds.map((td) => getComputedStyle(td).backgroundColor))]")
        assert len(colours) == 1, f"{ref}: an all-zero matrix in {len(colours)} colours"
    legend = page.locator("#stage-x .legend").first
    expect(legend).to_contain_text("every value is 0.000")
    assert legend.locator(".legend-strip span").count() == 1


def test_typeset_labels_render_as_maths(page: Page) -> None:
    """The symbols that were once raw text are MathML now: the editor's weights, the inspector's ∂L/∂W_Q,
    the banner's ÷√d_k, the Learn panel's log A_ij."""
    page.goto(f"/?preset=learn-bank&stage=grad_w&inspect=g_w_q.0.0.0&panels={PANELS}")
    expect(page.locator("#inspector .inspect-title math").first).to_have_attribute(
        "alttext", "∂ L / ∂ W_Q")
    expect(page.locator("#editor table[data-grid='w_q'] caption math")).to_have_attribute("alttext", "W_Q")
    expect(page.locator("#learn .learn-side math[alttext*='log A_ij'] mspace").first).to_be_attached()
    page.locator("input[name='scale']").uncheck()
    banner = page.locator("#summary .edited")
    expect(banner).to_contain_text("no")
    expect(banner.locator("math")).to_have_attribute("alttext", "÷ √d_k")
    assert not RAW_MARKUP.search(banner.evaluate("el => [...el.childNodes].filter((n) => n.nodeType === 3)"
                                                 ".map((n) => n.textContent).join('')"))


def test_inputs_show_a_true_minus_and_take_either_sign(page: Page) -> None:
    page.goto("/?preset=default&stage=x")
    cell = page.locator("input[name='x-0-2']")
    expect(cell).to_have_value("−0.3")  # the preset's −0.3, as the page prints it
    x = page.locator("table.heatmap[data-ref='x'] tbody tr").first.locator("td").nth(2)
    for typed, shown in (("-0.5", "−0.500"), ("−0.25", "−0.250")):
        cell.fill(typed)
        cell.dispatch_event("change")
        expect(x).to_have_text(shown)
        expect(page.locator("#err-x")).to_be_empty()
