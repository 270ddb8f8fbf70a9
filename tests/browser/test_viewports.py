"""The page on the screens a class has: a school laptop (1366×768), a projector (1920×1080), a tablet
(768×1024) and a phone (390×844). For every stage of every preset: the page never scrolls sideways,
the stage's result matrix is whole on screen (a matrix of more than 8 columns may scroll inside its
own box, and then says so), and the formula is typeset MathML with no ASCII markup left in it.

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

VIEWPORTS = ((1366, 768), (1920, 1080), (768, 1024), (390, 844))
PROJECTORS = ((1366, 768), (1920, 1080))
WIDE = 8  # a matrix with more columns may scroll inside its own box
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
    cue: result.querySelector('.scroll-cue') !== null,
    title: result.querySelector('figcaption').textContent,
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


def sweep(page: Page, preset: str, sizes: tuple[tuple[int, int], ...], present: bool) -> None:
    """Each stage loaded once, then measured at each size: no sideways scroll, the result whole on
    screen (or, past 8 columns in the page, scrolling in its box with a cue), and in presenter mode
    also above the bottom of the screen."""
    for key in stage_keys(preset):
        page.set_viewport_size({"width": sizes[0][0], "height": sizes[0][1]})
        page.goto(f"/?preset={preset}&stage={key}" + ("&present=on" if present else ""))
        check_formula(page, key)
        for width, height in sizes:
            page.set_viewport_size({"width": width, "height": height})
            m = page.evaluate(MEASURE, key)
            where = f"{'presenter, ' if present else ''}{preset} stage {key} at {width}×{height} ({m['title']})"
            assert m["overflow"] <= 0, f"{where}: the page is {m['overflow']} px wider than the screen"
            if present or m["columns"] <= WIDE:
                assert m["clipped"] <= 1, f"{where}: {m['clipped']} px of the result hidden in its box"
                assert m["left"] >= 0 and m["right"] <= width + 0.5, f"{where}: result outside the screen {m}"
            else:
                assert m["clipped"] <= 1 or m["cue"], f"{where}: a wide result scrolls with no cue"
            if present:
                assert m["bottom"] <= height, f"{where}: the result ends {m['bottom'] - height:.0f} px below"
            elif key == "softmax":
                save_screenshot(page, f"viewport-{preset}-{width}x{height}", full_page=False)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_stage_fits_every_screen(page: Page, preset: str) -> None:
    sweep(page, preset, VIEWPORTS, present=False)


# A projector shows a stage of at most 8 tokens and 16 dimensions on one screen (why-scale's d_k = 64 does not fit).
@pytest.mark.parametrize("preset", sorted(p for p in PRESETS if len(PRESETS[p].tokens) <= 8
                                          and max(PRESETS[p].d_model, PRESETS[p].d_k or 0) <= 16))
def test_presenter_mode_fits_each_stage_on_one_projector_screen(page: Page, preset: str) -> None:
    sweep(page, preset, PROJECTORS, present=True)


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


def test_readme_picture_of_the_bank_lines(page: Page) -> None:
    """README's second picture: seed 000's figure as the page draws it for bank ①, at a laptop's size."""
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto("/?preset=bank-river&stage=softmax")
    figure = page.locator("#stage-softmax .lines-row")
    expect(figure.locator("svg")).to_be_visible()
    page.mouse.move(0, 0)  # no hover in the picture
    docs = ARTIFACTS.parent / "docs"
    docs.mkdir(exist_ok=True)
    figure.screenshot(path=str(docs / "bank-lines.png"))
    assert (docs / "bank-lines.png").stat().st_size < 200_000
