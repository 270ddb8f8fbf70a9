"""The page on the screens a class has: a school laptop (1366×768), a projector (1920×1080), a tablet
(768×1024) and a phone (390×844). For every stage of every preset: the page never scrolls sideways,
the stage's result matrix is whole on screen (a matrix of more than 8 columns may scroll inside its
own box, and then says so), and the formula is typeset MathML with no ASCII markup left in it, whole in
its box (on a phone the page sets a wide one smaller rather than scrolling it sideways).

One page per preset: each stage is loaded once and checked at the four sizes by resizing the
viewport, so the sweep stays a few minutes on two cores. Screenshots of each preset's softmax stage
at each size land in test-artifacts/.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from app.lesson.presets import PRESETS
from app.lesson.stages import visible_stages
from tests.browser.conftest import ARTIFACTS, save_screenshot
from tests.conftest import VIEWPORTS

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser


@pytest.fixture
def inputs_open() -> bool:
    """The page as it comes: the inputs drawer closed, the stages with the whole width."""
    return False

PROJECTORS = ((1366, 768), (1920, 1080))
PHONE = (390, 844)
WIDE = 8  # a matrix with more columns may scroll inside its own box
# The stage owns a laptop's first screen (1366×768, before any scrolling): its heading this high at most, and its
# result whole on the screen when it has this many rows or fewer.
LAPTOP = (1366, 768)
HEADING_MAX_Y = 260
WHOLE_ROWS = 7
ASCII_MARKUP = re.compile(r"_ij|_\{|\^\(|\^\{|sqrt\(|\\frac|\\text")

# For each stage: the page's overflow, and the result — the stage's first panel that is not an operand —
# with its table's box and whether its scroll box holds more than it shows.
MEASURE = """(key) => {
  const stage = document.getElementById('stage-' + key);
  const result = stage.querySelector('figure.panel:not(.operand)');
  const box = result.querySelector('table').getBoundingClientRect();
  const scroll = result.querySelector('.scroll');
  return {
    overflow: document.documentElement.scrollWidth - window.innerWidth,
    left: box.left, right: box.right, top: box.top + window.scrollY, bottom: box.bottom + window.scrollY,
    width: window.innerWidth, height: window.innerHeight,
    clipped: scroll.scrollWidth - scroll.clientWidth,
    columns: result.querySelector('thead tr').cells.length - 1,
    rows: result.querySelectorAll('tbody tr').length,
    heading: stage.querySelector('h3').getBoundingClientRect().top + window.scrollY,
    scrollY: window.scrollY,
    first: stage.querySelector('figure.panel table').getBoundingClientRect().top + window.scrollY,
    cue: result.querySelector('.scroll-cue') !== null,
    title: result.querySelector('figcaption').textContent,
    formula: Math.max(0, ...[...stage.querySelectorAll('.formula')].map((f) => f.scrollWidth - f.clientWidth)),
    shrunk: [...stage.querySelectorAll('.formula')].some((f) => f.style.fontSize !== ''),
  };
}"""


def stage_keys(preset: str) -> list[str]:
    """Every stage of the preset: the backward ones too when it opens with a training goal."""
    p = PRESETS[preset]
    return [s.key for s in visible_stages(p.blocks, bool(p.goal))]


def check_formula(page: Page, key: str) -> None:
    head = page.locator(f"#stage-{key} .stage-head")
    expect(head.locator(".formula math").first).to_be_visible()  # one per equation
    text = head.inner_text()
    assert not ASCII_MARKUP.search(text), f"stage {key}: ASCII maths in {text!r}"


def sweep(page: Page, preset: str, sizes: tuple[tuple[int, int], ...]) -> None:
    """Each stage loaded once, then measured at each size: no sideways scroll, the result whole on
    screen (or, past 8 columns in the page, scrolling in its box with a cue)."""
    for key in stage_keys(preset):
        page.set_viewport_size({"width": sizes[0][0], "height": sizes[0][1]})
        page.goto(f"/?preset={preset}&stage={key}")
        check_formula(page, key)
        for width, height in sizes:
            page.set_viewport_size({"width": width, "height": height})
            page.evaluate("() => new Promise((done) => requestAnimationFrame(() => done()))")  # the page's resize
            m = page.evaluate(MEASURE, key)
            where = f"{preset} stage {key} at {width}×{height} ({m['title']})"
            assert m["overflow"] <= 0, f"{where}: the page is {m['overflow']} px wider than the screen"
            assert m["formula"] <= 1, f"{where}: {m['formula']} px of a formula hidden in its box"
            if width >= LAPTOP[0]:  # set smaller only where it would not fit
                assert not m["shrunk"], f"{where}: a formula set smaller on a screen it fits"
            if m["columns"] <= WIDE:
                assert m["clipped"] <= 1, f"{where}: {m['clipped']} px of the result hidden in its box"
                assert m["left"] >= 0 and m["right"] <= width + 0.5, f"{where}: result outside the screen {m}"
            else:
                assert m["clipped"] <= 1 or m["cue"], f"{where}: a wide result scrolls with no cue"
            if (width, height) == LAPTOP and not key.startswith("grad_"):  # the forward stages
                assert m["scrollY"] == 0, f"{where}: the page opened scrolled by {m['scrollY']} px"
                assert m["heading"] <= HEADING_MAX_Y, f"{where}: the stage's heading at y = {m['heading']:.0f} px"
                if m["rows"] <= WHOLE_ROWS and m["columns"] <= WIDE:  # a wider one scrolls in its box anyway
                    assert m["bottom"] <= height, f"{where}: the result ends at y = {m['bottom']:.0f}, below the screen"
            if (width, height) == PHONE and not key.startswith("grad_"):  # the first matrix starts on screen
                assert m["first"] < height, f"{where}: the first matrix starts at y = {m['first']:.0f}, past the screen"
            if key == "softmax":
                save_screenshot(page, f"viewport-{preset}-{width}x{height}", full_page=False)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_stage_fits_every_screen(page: Page, preset: str) -> None:
    sweep(page, preset, VIEWPORTS)


# Presenter mode, as the room sees it: every panel of the stage (matrices, equations, the lines) on the screen as
# the page shows it, and what the page measures itself.
PRESENTED = """(key) => {
  const stage = document.getElementById('stage-' + key);
  const outside = [];
  for (const el of stage.querySelectorAll('figure.panel, figure.lines, .row')) {
    const b = el.getBoundingClientRect();
    if (b.width === 0 && b.height === 0) continue;  // not drawn (display: none)
    if (b.top < -0.5 || b.left < -0.5 || b.bottom > innerHeight + 0.5 || b.right > innerWidth + 0.5)
      outside.push([el.className, Math.round(b.left), Math.round(b.top), Math.round(b.right), Math.round(b.bottom)]);
  }
  const sizes = [...stage.querySelectorAll('table.heatmap tbody td, table.maskgrid tbody td')]
    .map((td) => parseFloat(getComputedStyle(td).fontSize));
  const note = stage.querySelector('.fit-note');
  const map = [...document.querySelectorAll('.pipeline-map svg.map')].find((s) => s.getBoundingClientRect().width > 0);
  const mapText = [...map.querySelectorAll('.label, .shape')]
    .map((t) => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a);
  return {
    outside, overflow: document.documentElement.scrollWidth - innerWidth,
    colours: stage.classList.contains('cells-only'), smallest: Math.min(...sizes),
    note: note !== null && !note.hidden && note.getBoundingClientRect().height > 0,
    map: Math.min(...mapText), scrollY,
  };
}"""
READABLE = 18  # px on a 1920×1080 screen: a number read from the back of a room
MAP_TEXT = 12  # px on a 1920×1080 screen: the map's stage names and shapes


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_presenter_mode_fits_each_stage_on_one_projector_screen(page: Page, preset: str) -> None:
    """Presenter mode at 1920×1080 and 1366×768, every stage of every preset, stepped through with Next on one
    page and measured at both sizes by resizing (with blocks, Next goes on from block 1's last stage through
    block 2's): every panel of the stage is inside the screen as the page shows it, and the page does not
    scroll sideways. Where a stage shows its numbers, every table cell is at least 18 px on a 1920×1080 screen
    (the same size on the wall at 1366×768: 18 × 1366/1920 px). Where they would be smaller (16 tokens, a
    64-dimension head, the FFN's 12 columns) the stage shows its heatmaps' colours alone, at a cell size that
    fits, and says so with a button that shows the numbers; a selected cell's number and arithmetic are in the
    inspector. Presets of up to 8 tokens and 6 dimensions show the numbers of Q, K and V, and those of up to 8
    tokens the softmax's weights, at 1920×1080. The map's labels and shapes are 12 px or more at 1920×1080 (the
    same size on the wall at 1366×768)."""
    p = PRESETS[preset]
    keys = stage_keys(preset) * max(1, p.blocks)  # with blocks, Next goes on into the next block
    page.set_viewport_size({"width": PROJECTORS[-1][0], "height": PROJECTORS[-1][1]})
    page.goto(f"/?preset={preset}&stage={keys[0]}&present=on")
    for n, key in enumerate(keys):
        if n:
            page.locator("#next-stage").click()
        expect(page.locator(f"#stage-{key}")).to_have_count(1, timeout=15_000)  # why-scale's d_k = 64: a heavy swap
        check_formula(page, key)
        for width, height in PROJECTORS if n % 2 else PROJECTORS[::-1]:  # no resize needed for the first size
            page.set_viewport_size({"width": width, "height": height})
            page.wait_for_selector(f'#stage-{key}[data-fitted="{width}x{height}"]', state="attached")
            m = page.evaluate(PRESENTED, key)
            where = f"presenter, {preset} stage {key} at {width}×{height}"
            assert m["overflow"] <= 0, f"{where}: the page is {m['overflow']} px wider than the screen"
            assert not m["outside"], f"{where}: panels outside the screen (left, top, right, bottom): {m['outside']}"
            wall = min(1, width / 1920, height / 1080)  # a size on a smaller screen, the same on the wall
            assert m["map"] >= MAP_TEXT * wall, f"{where}: the map's text is {m['map']:.1f} px"
            if m["colours"]:
                assert m["note"], f"{where}: colours alone, and no word of it"
            else:
                assert m["smallest"] >= READABLE * wall - 0.05, f"{where}: numbers of {m['smallest']:.1f} px"
            dims = max(p.d_model, p.d_k or 0)
            if (width, height) == (1920, 1080) and (
                    key == "qkv" and dims <= 6 and len(p.tokens) <= 8 or key == "softmax" and len(p.tokens) <= 8):
                assert not m["colours"], f"{where}: colours alone"
            if (width, height) == (1920, 1080) and key in ("qkv", "softmax"):
                save_screenshot(page, f"presenter-{preset}-{key}-{width}x{height}", full_page=False)


def test_presenter_mode_offers_the_head_and_the_block(page: Page) -> None:
    page.goto("/?preset=bank-river&stage=softmax&present=on")
    head = page.locator(".present .view-options select[name='head']")
    expect(head).to_be_visible()
    head.select_option("2")
    expect(page.locator("#stage-softmax figcaption").first).to_contain_text("where")
    expect(page.locator("#workspace.present")).to_be_visible()  # still presenting
    page.goto("/?preset=block&stage=ffn&present=on")
    expect(page.locator(".present .view-options select[name='block']")).to_be_visible()


def test_selecting_a_cell_brings_the_inspector_into_view_on_a_laptop(page: Page) -> None:
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto("/?preset=bank-river&stage=softmax")
    page.locator("table[data-ref='softmax.0'] tbody tr").nth(6).locator("td").nth(5).click()
    inspector = page.locator("#inspector")
    expect(inspector.locator(".heading math")).to_be_visible()
    expect(inspector).to_be_in_viewport()
    expect(inspector).to_contain_text("bank")
    # The selected cell's matrix stays on the screen: the page scrolled to the inspector, not past the matrix.
    page.wait_for_timeout(300)
    weights = page.locator("#stage-softmax figure.panel:has(table[data-ref='softmax.0'])").bounding_box()
    assert weights and weights["y"] >= 0, f"the selected cell's matrix starts above the screen: {weights}"
    assert weights["y"] + weights["height"] <= 768, f"the selected cell's matrix ends below the screen: {weights}"
    expect(inspector.locator(".heading")).to_be_in_viewport()


def test_the_inspector_typesets_its_arithmetic_with_true_minus_signs(page: Page) -> None:
    """Seed 000's default scenario: the score of query 3 for key 1 has negative factors."""
    page.goto("/?stage=scores&inspect=scores.0.2.0")
    inspector = page.locator("#inspector")
    expect(inspector.locator(".heading math")).to_have_count(1)
    maths = inspector.locator(".arith math")
    assert maths.count() >= 3
    text = inspector.inner_text()
    assert "·-" not in text and "+ -" not in text
    assert "(−0.154)" in text.replace(" ", "").replace("\n", "")


LINES_MIN_WIDTH = 600  # px: bank ①'s lines view beside its weights on a laptop


def test_bank_lines_beside_the_weights_on_a_laptop_and_the_readme_picture(page: Page) -> None:
    """Bank ①'s softmax stage on a laptop's first screen: the weights A whole, and beside them the lines view, at
    least 600 px wide and whole on the screen. README's second picture: seed 000's figure as the page draws it."""
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto("/?preset=bank-river&stage=softmax")
    figure = page.locator("#stage-softmax .lines-row")
    expect(figure.locator("svg")).to_be_visible()
    weights = page.locator("#stage-softmax figure.panel:not(.operand) table").bounding_box()
    lines = page.locator("#stage-softmax figure.lines").bounding_box()
    assert weights and lines
    assert lines["width"] >= LINES_MIN_WIDTH, f"the lines view is {lines['width']:.0f} px wide"
    assert lines["x"] >= weights["x"] + weights["width"], "the lines view is not beside the weights"
    assert lines["y"] >= 0 and lines["y"] + lines["height"] <= 768, f"the lines view is not on the screen: {lines}"
    assert lines["x"] + lines["width"] <= 1366
    assert weights["y"] + weights["height"] <= 768, f"the weights end below the screen: {weights}"
    page.mouse.move(0, 0)  # no hover in the picture
    docs = ARTIFACTS.parent / "docs"
    docs.mkdir(exist_ok=True)
    figure.screenshot(path=str(docs / "bank-lines.png"))
    assert (docs / "bank-lines.png").stat().st_size < 200_000
    # The scenario's paragraph, folded to one line: "more" opens it, and it stays open while the student steps.
    summary = page.locator("#summary")
    assert summary.bounding_box()["height"] < 40
    summary.locator(".more").click()
    expect(summary.locator("p.about")).to_be_visible()
    page.locator("#next-stage").click()
    expect(page.locator("#stage-output")).to_be_visible()
    expect(summary.locator("p.about")).to_be_visible()


# Each "=" and the result it gives: the sign's centre level with the result's table and left of it.
EQUALS = """(key) => [...document.querySelectorAll(`#stage-${key} .gives`)].map((g) => {
  const op = g.querySelector(':scope > .op').getBoundingClientRect();
  const table = g.querySelector(':scope > figure table').getBoundingClientRect();
  const middle = (op.top + op.bottom) / 2;
  return {beside: op.right <= table.left + 0.5, level: middle >= table.top && middle <= table.bottom,
          op: [Math.round(op.left), Math.round(op.top)], table: [Math.round(table.left), Math.round(table.top)]};
})"""


@pytest.mark.parametrize("key", ["qkv", "scores", "output", "multihead"])
def test_presenter_mode_keeps_each_equals_sign_beside_its_result(page: Page, key: str) -> None:
    """Bank ①'s heads concatenated and projected (stage 7) drew "=" at the end of one line and its 7×6 result on the
    next: the sign now wraps with its result."""
    page.set_viewport_size({"width": 1920, "height": 1080})
    page.goto(f"/?preset=bank-river&stage={key}&present=on")
    page.wait_for_selector(f'#stage-{key}[data-fitted="1920x1080"]', state="attached")
    signs = page.evaluate(EQUALS, key)
    assert signs, f"stage {key}: no '=' drawn"
    apart = [s for s in signs if not (s["beside"] and s["level"])]
    assert not apart, f"stage {key}: '=' not beside its result: {apart}"
