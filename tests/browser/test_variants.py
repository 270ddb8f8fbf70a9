"""Score functions, linear attention, sparse masks and transformer blocks in a real browser.

Expected numbers come from the pure pipeline run on the same scenario: the page must show what the
pipeline computes.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

import numpy as np
import pytest

from app.state.scenario import from_preset
from tests.browser.test_mechanisms import goto_stage
from tests.browser.test_page import cell, cells, fmt, heatmap

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser


def test_additive_preset_shows_each_tanh_and_switches_to_general(page: Page) -> None:
    page.goto("/?preset=additive")
    expect(page.locator("#stage-scores h3")).to_contain_text("Bahdanau")
    sc, _ = from_preset("additive")
    run = sc.run()
    scores = heatmap(page, "scores.0", "scores")
    assert cells(scores) == fmt(run.heads[0].scores)
    cell(scores, 2, 0).click()
    inspector = page.locator("#inspector")
    expect(inspector).to_contain_text("tanh")
    expect(inspector.locator("tfoot strong")).to_have_text(f"{run.heads[0].scores[2, 0]:.3f}")
    # Edit v_a: the scores follow.
    page.locator('input[name="v_a-0-0"]').fill("2")
    expect(page.locator('input[name="v_a-0-0"]')).to_have_value("2")
    edited = run.weights.v_a.copy()
    edited[0, 0] = 2.0
    new = np.tanh(run.heads[0].q_1[:, None, :] + run.heads[0].k_2[None, :, :]) @ edited[0]
    expect(scores.locator("tbody tr").first.locator("td").first).to_have_text(fmt(new)[0][0])
    # Luong's general score: W_a appears and the formula changes.
    page.select_option('select[name="score"]', "general")
    expect(page.locator("#stage-scores h3")).to_contain_text("Luong")
    expect(heatmap(page, "q_w.0", "scores").first).to_be_visible()  # a result, then an operand
    expect(page.locator('input[name="w_a-0-0"]')).to_be_visible()


def test_linear_attention_shows_its_difference_from_softmax(page: Page) -> None:
    page.goto("/?preset=linear")
    sc, _ = from_preset("linear")
    head = sc.run().heads[0]
    expect(page.locator("#stage-output h3")).to_contain_text("linear attention")
    output = heatmap(page, "output.0", "output").first  # the result, then the difference's operand
    assert cells(output) == fmt(head.output)
    assert cells(heatmap(page, "softmax_output.0", "output")) == fmt(head.softmax_output)
    assert cells(heatmap(page, "diff.0", "output")) == fmt(head.output - head.softmax_output)
    cell(output, 1, 0).click()
    expect(page.locator("#inspector")).to_contain_text("linear attention's weights")
    goto_stage(page, "softmax")
    expect(heatmap(page, "lin_weights.0", "softmax")).to_be_visible()


def test_sparse_preset_marks_the_pattern_and_the_window_changes_it(page: Page) -> None:
    page.goto("/?preset=sparse")
    grid = page.locator("#stage-mask table.maskgrid")
    # stride 4: query 0 sees keys 0–3, 4, 8, 12; key 5 is hidden by the pattern, not by hand.
    expect(grid.locator('input[name="block-0-5"]')).to_be_checked()
    expect(grid.locator('input[name="block-0-5"]')).to_be_disabled()
    expect(grid.locator('input[name="block-0-8"]')).not_to_be_checked()
    page.select_option('select[name="mask"]', "local")
    expect(page.locator("label", has_text="window ±")).to_be_visible()  # the workspace was swapped
    page.locator('input[name="window"]').fill("1")
    page.locator('input[name="window"]').dispatch_event("change")
    expect(page.locator('#stage-mask input[name="block-0-2"]')).to_be_checked()
    expect(page.locator('#stage-mask input[name="block-0-1"]')).not_to_be_checked()
    goto_stage(page, "softmax")
    weights = cells(heatmap(page, "softmax.0", "softmax"))
    assert all(v == "0.000" for v in weights[0][2:])


def test_transformer_block_steps_inspects_layernorm_and_follows_an_ffn_edit(page: Page) -> None:
    page.goto("/?preset=block")
    expect(page.locator("#stage-addnorm1 h3")).to_contain_text("Add & Norm")
    sc, _ = from_preset("block")
    _, stack = sc.compute()
    block = stack.blocks[0]
    ln = heatmap(page, "ln1.0", "addnorm1")
    assert cells(ln) == fmt(block.ln1.output)
    cell(ln, 1, 2).click()
    inspector = page.locator("#inspector")
    expect(inspector.locator(".arith math[alttext='mean and variance']")).to_contain_text(re.compile(r"μ\s*="))
    expect(inspector.locator(".arith.result")).to_contain_text(f"{block.ln1.output[1, 2]:.3f}".replace("-", "\u2212"))
    # Step forward with the keyboard into the FFN.
    page.locator("#next-stage").focus()
    page.keyboard.press("ArrowRight")
    expect(page.locator("#stage-ffn")).to_be_visible()
    hidden = heatmap(page, "ffn_hidden.0", "ffn").first  # a result, then the activation's operand
    assert cells(hidden) == fmt(block.ffn_hidden)
    # Edit W₁[0][0] of the first block: column 0 of the hidden layer follows.
    page.locator('input[name="ffn_w1-0-0"]').fill("1")
    w1 = block.weights.ffn_w1.copy()
    w1[0, 0] = 1.0
    expected = block.ffn_in @ w1 + block.weights.ffn_b1
    expect(cell(hidden, 0, 0)).to_have_text(f"{expected[0, 0] + 0.0:.3f}")
    # GELU's tanh approximation: the note names it and the activation's heatmap follows.
    page.select_option('select[name="activation"]', "gelu_tanh")
    expect(page.locator("#stage-ffn")).to_contain_text("GPT-2")
    z = expected[0, 0]
    by_hand = 0.5 * z * (1 + math.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))
    expect(cell(heatmap(page, "ffn_act.0", "ffn").first, 0, 0)).to_have_text(fmt(np.array([[by_hand]]))[0][0])
    # The second block takes the first one's output.
    page.select_option('select[name="block"]', "1")
    goto_stage(page, "x")
    expect(page.locator("#stage-x h3")).to_contain_text("block 2 of 2")
    expect(heatmap(page, "x", "x").locator("caption")).to_contain_text("output of block 1")


def test_scaling_lab_and_cost_panels_open_follow_edits_and_stay_open(page: Page) -> None:
    page.goto("/")
    page.locator("#lab-panel summary").click()
    lab = page.locator("#lab-panel")
    expect(lab.locator("svg")).to_be_visible()
    expect(lab).to_contain_text("0.881")  # seed 003: softmax([8, −4, 6]) = [0.881, 0.000, 0.119]
    expect(lab).to_contain_text("0.389")  # softmax([1, −0.5, 0.75]) = [0.500, 0.111, 0.389]
    page.locator("#cost-panel summary").click()
    cost = page.locator("#cost-panel")
    expect(cost.locator("svg")).to_be_visible()
    expect(cost).to_contain_text("current T")
    expect(cost).to_contain_text("T = 5")
    # An edit re-renders the stages: both panels stay open.
    page.locator('input[name="x-0-0"]').fill("0.7")
    expect(heatmap(page, "x", "x")).to_contain_text("0.700")
    expect(lab).to_have_attribute("open", "")
    expect(cost.locator("svg")).to_be_visible()
    # A sixth token: the cost panel follows T.
    page.locator('button[value="add_token"]').click()
    expect(page.locator('input[name="token-5"]')).to_be_visible()
    expect(page.locator("#cost-panel")).to_contain_text("T = 6")
    # Closed, it stays closed on the next edit.
    page.locator("#lab-panel summary").click()
    page.locator('input[name="x-0-0"]').fill("0.8")
    expect(heatmap(page, "x", "x")).to_contain_text("0.800")
    expect(page.locator("#lab-panel")).not_to_have_attribute("open", "")
