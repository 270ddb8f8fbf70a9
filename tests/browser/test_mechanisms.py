"""The mechanisms in a real browser: the mask stage, positional encodings, cross-attention."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.browser.conftest import htmx_idle
from tests.browser.test_page import cell, cells, heatmap

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser


def goto_stage(page: Page, key: str) -> None:
    page.locator(f'#stages svg.map:visible a[id$="-{key}"]').click()  # the stage's link on the pipeline map
    expect(page.locator(f"#stage-{key}")).to_be_visible()


def test_causal_preset_zeroes_weights_above_the_diagonal_and_a_ticked_cell(page: Page) -> None:
    page.goto("/?preset=causal")
    expect(page.locator("#stage-mask")).to_be_visible()
    expect(page.locator('input[name="block-0-1"]')).to_be_checked()
    expect(page.locator('input[name="block-0-1"]')).to_be_disabled()
    with page.expect_response(lambda r: r.url.endswith("/stages")):  # its swap lands before the next step
        page.locator('input[name="block-4-0"]').check()  # hide key 0 from the last query
    expect(page.locator('#stage-mask input[name="block-4-0"]')).to_be_checked()
    htmx_idle(page)
    goto_stage(page, "softmax")
    weights = cells(heatmap(page, "softmax.0", "softmax"))
    for i, row in enumerate(weights):
        for j, text in enumerate(row):
            if j > i:
                assert text == "0.000", (i, j, text)
    assert weights[4][0] == "0.000"
    assert weights[4][1] != "0.000"
    cell(heatmap(page, "softmax.0", "softmax"), 4, 0).click()
    expect(page.locator("#inspector")).to_contain_text("−∞ (hidden)")


def test_sinusoidal_positions_show_the_pe_matrix(page: Page) -> None:
    page.goto("/?preset=positions")
    pe = heatmap(page, "pe", "x")
    expect(pe).to_be_visible()
    assert cells(pe) == [
        ["0.000", "1.000", "0.000", "1.000"],
        ["0.841", "0.540", "0.010", "1.000"],
        ["0.909", "−0.416", "0.020", "1.000"],
    ]
    with page.expect_response(lambda r: r.request.method == "POST"):  # its swap lands before the next step
        page.select_option('select[name="positional_encoding"]', "alibi")
    expect(page.locator('select[name="positional_encoding"]')).to_have_value("alibi")
    htmx_idle(page)
    goto_stage(page, "scaled")
    expect(heatmap(page, "bias.0", "scaled")).to_be_visible()


def test_cross_attention_preset_aligns_and_switches_off(page: Page) -> None:
    page.goto("/?preset=translate")
    weights = heatmap(page, "softmax.0", "softmax")
    rows = [[float(v.replace("−", "-")) for v in row] for row in cells(weights)]
    assert [row.index(max(row)) for row in rows] == [0, 1, 2, 3, 4, 5]
    expect(page.locator('input[name="ctoken-0"]')).to_have_value("The")
    page.locator('input[name="cross"]').uncheck()
    expect(page.locator('input[name="ctoken-0"]')).to_have_count(0)
