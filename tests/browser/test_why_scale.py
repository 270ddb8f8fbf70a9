"""Why ÷√d_k in a real Chromium, as a student sees it on a laptop, a projector, a tablet and a phone: the claim, the
table and both charts on the Learn panel's first screen at 1366×768, nothing scrolling sideways, the charts' labels
read at 12 px or more, and every number shown equal to the pipeline's (app.lesson.goals.why_scale)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest

from app.lesson.goals import why_scale
from app.view.charts.learn import short_number
from app.view.charts.why_scale import loss_change

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

SCREENS = ((1366, 768), (1920, 1080), (768, 1024), (390, 844))
PHONE_WIDTH = 390

# Everything of the comparison that could scroll sideways: the page, the block, the table and each chart.
OVERFLOWS = """() => {
  const boxes = [document.documentElement, ...document.querySelectorAll(
    '.why-scale, .why-scale-compare, .why-scale-table, .why-scale-charts, svg.why-scale-chart')];
  return boxes.filter((e) => e.scrollWidth > e.clientWidth)
              .map((e) => `${e.tagName}.${e.getAttribute('class')}: ${e.scrollWidth} > ${e.clientWidth}`);
}"""

# Each chart's text at the size it is drawn: its font size in the SVG's units times the SVG's scale.
RENDERED_TEXT = """() => [...document.querySelectorAll('svg.why-scale-chart')].flatMap((svg) => {
  const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  return [...svg.querySelectorAll('text, tspan')].map((t) => ({
    text: t.textContent, px: parseFloat(getComputedStyle(t).fontSize) * scale,
    height: t.tagName === 'text' ? t.getBoundingClientRect().height : null,
  }));
})"""


def _numbers_shown(page: Page) -> dict[str, list[str]]:
    """The table's cells by measure, as the page shows them (scaled run first)."""
    rows = page.locator(".why-scale-table tbody tr")
    return {
        rows.nth(i).get_attribute("data-measure"): rows.nth(i).locator("td").all_inner_texts()
        for i in range(rows.count())
    }


@pytest.mark.parametrize("inputs_open", [False])
def test_why_scale_reads_on_every_screen(page: Page, screenshot: Callable[..., Path]) -> None:
    result = why_scale()
    scaled, unscaled = result["scaled"], result["unscaled"]
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto("/?preset=why-scale")
    block = page.locator("#learn .why-scale")
    expect(block).to_be_visible()
    expect(block.locator("svg.why-scale-chart")).to_have_count(2)

    # The numbers shown are the pipeline's.
    shown = _numbers_shown(page)
    runs = (scaled, unscaled)
    assert shown["softmax_input_std_start"] == [f"{r['softmax_input_std_start']:.2f}" for r in runs]
    assert shown["max_weight_start_mean"] == [f"{np.mean(r['max_weight_start']):.3f}" for r in runs]
    assert shown["max_weight_start"] == [
        f"{min(r['max_weight_start']):.3f} to {max(r['max_weight_start']):.3f}" for r in runs
    ]
    assert shown["grad_scores_norm_start"] == [short_number(r["grad_scores_norm"][0]) for r in runs]
    assert shown["losses"] == [loss_change(r["losses"][0], r["losses"][-1]) for r in runs]
    claim = page.locator(".why-scale-claim").inner_text()
    for number in (
        f"{unscaled['softmax_input_std_start']:.2f}",
        f"{min(unscaled['max_weight_start']):.3f} or more",
        f"{short_number(unscaled['grad_scores_norm'][0])} against {short_number(scaled['grad_scores_norm'][0])}",
        loss_change(unscaled["losses"][0], unscaled["losses"][-1]),
        f"from {short_number(scaled['losses'][0])} to {short_number(scaled['losses'][-1])}",
    ):
        assert number in claim, number
    labels = block.locator("svg.why-scale-chart text").all_text_contents()
    for r in runs:
        assert short_number(r["losses"][-1]) in labels and short_number(r["grad_scores_norm"][-1]) in labels

    for width, height in SCREENS:
        page.set_viewport_size({"width": width, "height": height})
        page.locator("#learn").evaluate("(e) => e.scrollIntoView({block: 'start'})")
        overflows = page.evaluate(OVERFLOWS)
        assert not overflows, f"{width}×{height}: {overflows}"
        for chart in block.locator("svg.why-scale-chart").all():
            box = chart.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= width, f"{width}×{height}: {box}"
        text = page.evaluate(RENDERED_TEXT)
        small = [t for t in text if t["px"] < 12 or (t["height"] is not None and t["height"] < 12)]
        assert not small, f"{width}×{height}: {small[:5]}"
        if width == 1366:  # the comparison is on the panel's first screen
            for part in (".why-scale h4", ".why-scale-claim", ".why-scale-table", "svg.why-scale-chart"):
                for el in block.locator(part).all():
                    box = el.bounding_box()
                    assert 0 <= box["y"] and box["y"] + box["height"] <= height, f"{part}: {box}"
        screenshot(f"why-scale-{width}x{height}", full_page=False)
        if width == PHONE_WIDTH:
            block.locator(".why-scale-charts").evaluate("(e) => e.scrollIntoView({block: 'start'})")
            screenshot(f"why-scale-charts-{width}x{height}", full_page=False)
