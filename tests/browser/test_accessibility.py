"""Accessibility in a real Chromium: axe-core on every stage and in presenter mode, visible focus,
table headers a screen reader announces, and numbers in every coloured cell.

axe-core comes bundled with the axe-playwright-python package, so these checks run offline.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from app.lesson.presets import PRESETS
from app.lesson.stages import visible_stages
from tests.browser.conftest import htmx_idle
from tests.conftest import SAMPLE_STAGES, swept

try:
    from axe_playwright_python.sync_playwright import Axe
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    Axe = expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Page

    from tests.browser.conftest import PageLog

pytestmark = pytest.mark.browser

BLOCKING = ("serious", "critical")
ALL_STAGES = tuple(s.key for s in visible_stages(blocks=PRESETS["block"].blocks))  # stages 0–10


@pytest.fixture(scope="module")
def axe() -> Axe:
    if Axe is None:
        pytest.skip("axe-playwright-python is not installed (pip install -e '.[test]')")
    return Axe()


def violations(axe: Axe, page: Page, impacts: tuple[str, ...] = BLOCKING) -> list[str]:
    """axe's violations of the given impacts, one readable line each (rule, count, first targets)."""
    found = axe.run(page).response["violations"]
    return [f"{v['impact']} {v['id']} ×{len(v['nodes'])}: {v['help']} at {[n['target'] for n in v['nodes'][:3]]}"
            for v in found if v["impact"] in impacts]


def wait_settled(page: Page) -> None:
    htmx_idle(page)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_stage_of_every_preset_has_no_serious_violations(page: Page, axe: Axe, preset: str) -> None:
    """show_all renders every stage of the preset at once, with its editor."""
    page.goto(f"/?preset={preset}&show_all=on")
    expect(page.locator("#stages article.stage").first).to_be_visible()
    assert violations(axe, page) == []


def test_a_clean_page_has_no_violations_at_all(page: Page, axe: Axe) -> None:
    """The default page, with the inspector and both extra panels open: not even minor ones."""
    page.goto("/?preset=three-token&stage=softmax&inspect=softmax.0.1.2&panels=cost+lab")
    expect(page.locator("#lab-panel svg").first).to_be_visible()
    expect(page.locator("#cost-panel svg").first).to_be_visible()
    assert violations(axe, page, impacts=("minor", "moderate", "serious", "critical")) == []


@pytest.mark.parametrize("stage", swept(ALL_STAGES, SAMPLE_STAGES))  # every one in a full run
def test_presenter_mode_on_every_stage_has_no_serious_violations(page: Page, axe: Axe, stage: str) -> None:
    page.goto(f"/?preset=block&present=on&stage={stage}")
    expect(page.locator("#workspace")).to_have_class(re.compile(r"\bpresent\b"))
    expect(page.locator(f"#stage-{stage}")).to_be_visible()
    assert violations(axe, page) == []
    # The page keeps its one h1 for screen readers, out of sight.
    expect(page.get_by_role("heading", level=1)).to_have_count(1)


def test_an_error_message_has_no_serious_violations(page: Page, axe: Axe, page_log: PageLog) -> None:
    page_log.allow(422, "/stages")
    page.goto("/?preset=three-token")
    page.locator('input[name="x-0-0"]').fill("5000")
    expect(page.locator("#err-x")).to_contain_text("X row 1, column 1")
    expect(page.locator('input[name="x-0-0"]')).to_have_attribute("aria-invalid", "true")
    assert violations(axe, page) == []


def test_focus_is_visible_on_inputs_buttons_and_heatmap_cells(page: Page) -> None:
    """Tab from the top reaches the inputs, and every focused thing draws an outline of ≥ 2 px."""
    page.goto("/?preset=three-token&stage=scores")
    outline = "el => { const s = getComputedStyle(el); return [s.outlineStyle, parseFloat(s.outlineWidth)]; }"

    page.keyboard.press("Tab")  # the first focusable thing on the page
    style, width = page.evaluate(f"() => ({outline})(document.activeElement)")
    assert style != "none" and width >= 2

    x00 = page.locator('input[name="x-0-0"]')
    x00.focus()
    page.keyboard.press("Shift+Tab")  # keyboard focus, so :focus-visible applies
    page.keyboard.press("Tab")
    expect(x00).to_be_focused()
    style, width = x00.evaluate(outline)
    assert style != "none" and width >= 2

    cell = page.locator('table[data-ref="scores.0"] td[tabindex="0"]')
    cell.focus()
    page.keyboard.press("ArrowRight")
    focused = page.locator('table[data-ref="scores.0"] td:focus')
    expect(focused).to_have_count(1)
    style, width = focused.evaluate(outline)
    assert style != "none" and width >= 2


def test_heatmaps_announce_row_and_column_headers_and_print_every_number(page: Page) -> None:
    """What a screen reader reads: a caption, column headers (the keys), row headers (the queries);
    and every coloured cell carries its number as text, so colour is never the only carrier."""
    page.goto("/?preset=three-token&stage=softmax")
    weights = page.locator('table[data-ref="softmax.0"]')
    tokens = PRESETS["three-token"].tokens
    expect(weights.locator("caption")).not_to_be_empty()
    for token in tokens:
        named = re.compile(rf"\b{re.escape(token)}$")  # "1 token 2": the position, then the token
        expect(weights.get_by_role("columnheader", name=named)).to_have_count(1)
        expect(weights.get_by_role("rowheader", name=named)).to_have_count(1)
    expect(weights.get_by_role("cell")).to_have_count(len(tokens) ** 2)

    texts = page.locator("table.heatmap tbody td").all_inner_texts()
    assert texts and all(re.fullmatch(r"−?\d+\.\d+", t.strip()) for t in texts), texts[:10]
    # Every editor input has an accessible name that says which cell it is.
    unnamed = page.locator("#editor input:not([type=hidden])").evaluate_all(
        "els => els.filter(e => !e.getAttribute('aria-label') && !e.labels.length).map(e => e.name)")
    assert unnamed == []
