"""A laptop's first screen (1366×768, before any scrolling) belongs to the stage: for every forward stage of every
preset its heading starts 260 px from the top at most, and every result of 7 rows or fewer (Q, K and V each, the
FFN's hidden layer and its output, …) ends on the screen. One page per preset, reused for all its stages.
`make test` sweeps the SAMPLE_PRESETS, `make test-all` every preset."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from app.lesson.presets import PRESETS
from app.lesson.stages import visible_stages
from tests.conftest import SAMPLE_PRESETS, swept

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

LAPTOP = {"width": 1366, "height": 768}
HEADING_MAX_Y = 260
WHOLE_ROWS = 7

# The stage's heading, and each result (a panel that is not an operand and is drawn) with its rows and bottom.
MEASURE = """(key) => {
  const stage = document.getElementById('stage-' + key);
  const results = [...stage.querySelectorAll('figure.panel:not(.operand)')].map((figure) => {
    const table = figure.querySelector('table');
    const box = table.getBoundingClientRect();
    return {title: figure.querySelector('.mname').textContent, rows: table.querySelectorAll('tbody tr').length,
            bottom: box.bottom + scrollY, drawn: box.height > 0};
  });
  return {heading: stage.querySelector('h3').getBoundingClientRect().top + scrollY, results};
}"""


@pytest.fixture
def inputs_open() -> bool:
    """The page as it comes: the inputs drawer closed."""
    return False


def forward_stages(preset: str) -> list[str]:
    p = PRESETS[preset]
    return [s.key for s in visible_stages(p.blocks, bool(p.goal)) if not s.key.startswith("grad_")]


def misses(page: Page, preset: str, key: str) -> list[str]:
    """What of the stage is not on the first screen, in words."""
    page.goto(f"/?preset={preset}&stage={key}")
    m = page.evaluate(MEASURE, key)
    out = [f"heading at y = {m['heading']:.0f}"] if m["heading"] > HEADING_MAX_Y else []
    return out + [f"{r['title']} ({r['rows']} rows) ends at y = {r['bottom']:.0f}" for r in m["results"]
                  if r["drawn"] and r["rows"] <= WHOLE_ROWS and r["bottom"] > LAPTOP["height"]]


@pytest.mark.parametrize("preset", swept(sorted(PRESETS), SAMPLE_PRESETS))
def test_each_stage_owns_a_laptops_first_screen(page: Page, preset: str) -> None:
    page.set_viewport_size(LAPTOP)
    found = {key: misses(page, preset, key) for key in forward_stages(preset)}
    wrong = {key: m for key, m in found.items() if m}
    assert not wrong, f"{preset}, below a 1366×768 first screen: {wrong}"
