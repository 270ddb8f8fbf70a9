"""The page in a real Chromium: stepping, editing, inspecting, presets, errors, structure, no-JS.

Expected numbers come from the seeds (the presets' worked examples) or, after an edit, from the
pure pipeline run on the edited input: the page must show what the pipeline computes.
"""

from __future__ import annotations

import re
import shutil
import struct
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import pytest

from app.lesson.presets import PRESETS
from app.lesson.stages import visible_stages
from app.maths.records import AttentionRun
from app.state.scenario import from_preset

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from playwright.sync_api import Locator, Page

    from tests.browser.conftest import PageLog

pytestmark = pytest.mark.browser

STAGES = visible_stages(blocks=0)  # the presets without transformer blocks
STAGE_ORDER = tuple(s.key for s in STAGES)  # x, qkv, scores, scaled, mask, softmax, output, multihead
CORE_STAGES = ("x", "qkv", "scores", "scaled", "softmax", "output", "multihead")  # in this order, at least
DOCS_SCREENSHOT_MAX_BYTES = 1_500_000


# --- helpers ------------------------------------------------------------------------------------


def heatmap(page: Page, ref: str, stage: str | None = None) -> Locator:
    """The heatmap table for `ref` (e.g. "softmax.0"), within one stage's article if given."""
    scope = f"#stage-{stage} " if stage else "#stages "
    return page.locator(f'{scope}table.heatmap[data-ref="{ref}"]')


def cell(table: Locator, row: int, col: int) -> Locator:
    return table.locator("tbody tr").nth(row).locator("td").nth(col)


def cells(table: Locator) -> list[list[str]]:
    """The numbers of a heatmap as printed, row by row (header cells left out)."""
    return table.evaluate(
        "t => Array.from(t.tBodies[0].rows, r => Array.from(r.cells).slice(1).map(c => c.textContent))"
    )


def col_labels(table: Locator) -> list[str]:
    return table.evaluate("t => Array.from(t.tHead.rows[0].cells).slice(1).map(c => c.textContent)")


def fmt(m: np.ndarray, decimals: int = 3) -> list[list[str]]:
    """How the page prints a matrix: fixed point, a true minus sign, no negative zero."""
    return [[f"{v:.{decimals}f}".replace("-", "−") for v in row] for row in (np.round(m, decimals) + 0.0).tolist()]


def expected_run(preset: str, x_edits: dict[tuple[int, int], float] | None = None) -> AttentionRun:
    """The pipeline's run for a preset with some cells of X replaced."""
    sc, _ = from_preset(preset)
    x = sc.x.copy()  # (T, d_model)
    for (i, j), value in (x_edits or {}).items():
        x[i, j] = value
    return replace(sc, x=x).run()


def current_stage(page: Page) -> Locator:
    return page.locator("#stages article.stage")


def map_link(page: Page, key: str) -> Locator:
    """The stage's link on the one-row pipeline map (the one this window shows)."""
    return page.locator(f"#map-wide-{key}")


def map_current(page: Page) -> Locator:
    return page.locator('#stages svg.map-wide a[aria-current="step"]')


def go_to_stage(page: Page, key: str) -> None:
    map_link(page, key).click()
    expect(current_stage(page)).to_have_id(f"stage-{key}")
    expect(map_current(page)).to_have_id(f"map-wide-{key}")


def show_all_stages(page: Page) -> None:
    page.get_by_label("show all stages").check()
    expect(current_stage(page)).to_have_count(len(STAGE_ORDER))


def focus_body(page: Page) -> None:
    page.evaluate("() => document.activeElement && document.activeElement.blur()")


def load_preset_from_menu(page: Page, key: str) -> None:
    """Choose a scenario in the menu: with JavaScript that alone loads it, without it the Load button does."""
    scripted = page.evaluate("() => document.documentElement.classList.contains('js')")
    page.locator("#preset-choice").select_option(key)
    if not scripted:
        page.get_by_role("button", name="Load").click()
    expect(page).to_have_url(re.compile(rf"[?&]preset={re.escape(key)}$"))
    expect(page.locator("#preset-choice")).to_have_value(key)
    expect(page.locator("#summary")).to_contain_text(PRESETS[key].title)


def png_size(path: Path) -> tuple[int, int]:
    width, height = struct.unpack(">II", path.read_bytes()[16:24])  # the IHDR chunk
    return width, height


# --- 1. loading ---------------------------------------------------------------------------------


def test_page_loads_with_every_stage_and_the_presets_x(page: Page) -> None:
    response = page.goto("/")
    assert response is not None and response.status == 200

    expect(page).to_have_title("Attention, step by step")
    expect(page.get_by_role("heading", level=1)).to_have_text("Attention, step by step")
    links = page.locator("#stages svg.map-wide a")
    expect(links).to_have_count(len(STAGES))
    names = [a.get_attribute("aria-label") or "" for a in links.all()]
    assert all(n.startswith(f"Stage {s.number}: {s.short}, ") for n, s in zip(names, STAGES, strict=True)), names
    keys = [(a.get_attribute("id") or "").removeprefix("map-wide-") for a in links.all()]
    assert keys == list(STAGE_ORDER)
    assert [k for k in keys if k in CORE_STAGES] == list(CORE_STAGES)
    expect(current_stage(page)).to_have_id("stage-x")
    expect(map_current(page)).to_have_id("map-wide-x")
    expect(page.locator("#prev-stage")).to_be_disabled()
    expect(page.locator("#next-stage")).to_be_enabled()

    preset_x = np.array(PRESETS["default"].x)  # (T, d_model)
    assert cells(heatmap(page, "x", "x")) == fmt(preset_x)
    for (i, j), value in np.ndenumerate(preset_x):
        shown = page.locator(f'input[name="x-{i}-{j}"]').input_value()
        assert "-" not in shown and float(shown.replace("−", "-")) == value  # a true minus sign
    for i, token in enumerate(PRESETS["default"].tokens):
        expect(page.locator(f'input[name="token-{i}"]')).to_have_value(token)
    expect(page.locator("#inspector")).to_contain_text("Cell inspector")


# --- 2. stepping --------------------------------------------------------------------------------


def test_arrow_keys_step_through_every_stage_and_back(page: Page) -> None:
    page.goto("/")
    focus_body(page)
    for key in STAGE_ORDER[1:]:
        page.keyboard.press("ArrowRight")
        expect(current_stage(page)).to_have_id(f"stage-{key}")
        expect(map_current(page)).to_have_id(f"map-wide-{key}")
    expect(page.locator("#next-stage")).to_be_disabled()
    for key in reversed(STAGE_ORDER[:-1]):
        page.keyboard.press("ArrowLeft")
        expect(current_stage(page)).to_have_id(f"stage-{key}")
    expect(page.locator("#prev-stage")).to_be_disabled()


def test_arrow_keys_in_an_input_do_not_step(page: Page) -> None:
    page.goto("/")
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    page.locator('input[name="x-0-0"]').focus()
    page.keyboard.press("ArrowRight")  # moves the caret: must not click Next
    page.locator("#next-stage").click()  # a request we know is sent, after any the arrow sent
    expect(current_stage(page)).to_have_id("stage-qkv")
    assert len(posts) == 1, posts


def test_prev_and_next_buttons_step(page: Page) -> None:
    page.goto("/")
    for key in ("qkv", "scores", "scaled"):
        page.locator("#next-stage").click()
        expect(current_stage(page)).to_have_id(f"stage-{key}")
    page.locator("#prev-stage").click()
    expect(current_stage(page)).to_have_id("stage-scores")
    go_to_stage(page, "multihead")
    expect(page.locator("#next-stage")).to_be_disabled()
    page.locator("#prev-stage").click()
    expect(current_stage(page)).to_have_id("stage-output")


# --- 3. editing a value -------------------------------------------------------------------------


def test_editing_x_updates_every_later_stage_and_keeps_focus(page: Page) -> None:
    page.goto("/")
    show_all_stages(page)
    changes = {  # stage → heatmaps that depend on X[0][0]
        "x": ["x"], "qkv": ["q.0", "k.0", "v.0"], "scores": ["q.0", "kT.0", "scores.0"],
        "scaled": ["scores.0", "scaled.0"], "mask": ["scaled.0"], "softmax": ["scaled.0", "softmax.0"],
        "output": ["softmax.0", "v.0", "output.0"], "multihead": ["concat", "final"],
    }
    fixed = {"qkv": ["w_q.0", "w_k.0", "w_v.0"], "multihead": ["w_o"]}  # weights do not depend on X
    before = {(s, r): heatmap(page, r, s).inner_text() for group in (changes, fixed) for s, refs in group.items()
              for r in refs}
    x00 = page.locator('input[name="x-0-0"]')
    x00.evaluate("el => { el.probe = 'same node' }")

    with page.expect_response(lambda r: r.url.endswith("/stages") and r.request.method == "POST") as answer:
        x00.fill("2.5")
    assert answer.value.status == 200

    for stage, refs in changes.items():
        for ref in refs:
            expect(heatmap(page, ref, stage)).not_to_have_text(before[(stage, ref)])
    for stage, refs in fixed.items():
        for ref in refs:
            assert heatmap(page, ref, stage).inner_text() == before[(stage, ref)]
    run = expected_run("default", {(0, 0): 2.5})
    assert cells(heatmap(page, "softmax.0", "softmax")) == fmt(run.heads[0].softmax)
    assert cells(heatmap(page, "final", "multihead")) == fmt(run.output)
    # The editor is not re-rendered on a value edit: same input node, focus and value kept.
    expect(x00).to_be_focused()
    expect(x00).to_have_value("2.5")
    assert x00.evaluate("el => el.probe") == "same node"


# --- 4. the inspector ---------------------------------------------------------------------------


def test_clicking_a_weight_shows_its_softmax_row(page: Page) -> None:
    page.goto("/?preset=three-token")
    go_to_stage(page, "softmax")
    weights = heatmap(page, "softmax.0")
    cell(weights, 2, 0).click()

    inspector = page.locator("#inspector")
    expect(inspector).to_contain_text("Attention weights of query 3")
    for number in ("4.113", "8.169", "0.503"):
        expect(inspector).to_contain_text(number)
    selected = inspector.locator("tr.sel")
    expect(selected.locator("math[alttext='4.113 / 8.169']")).to_have_count(1)  # exp ÷ the row's sum, typeset
    expect(selected).to_contain_text("= 0.503")
    expect(cell(weights, 2, 0)).to_have_class(re.compile(r"\bsel\b"))
    expect(cell(weights, 2, 0)).to_be_focused()  # focus survives the swap


def test_clicking_a_score_shows_its_dot_product(page: Page) -> None:
    page.goto("/?preset=three-token")
    go_to_stage(page, "scores")
    cell(heatmap(page, "scores.0"), 2, 0).click()
    inspector = page.locator("#inspector")
    expect(inspector).to_contain_text("Score of query 3 (token 3) for key 1 (token 1)")  # counted from 1
    expect(inspector.locator(".heading math")).to_have_count(1)  # Scores₃,₁ = Σₖ Q₃,ₖ K₁,ₖ, typeset
    products = inspector.locator(".arith:not(.heading) math").first
    expect(products).to_have_attribute("alttext", "the products")
    assert products.text_content().replace(" ", "") == "=1.000·1.000+1.000·1.000"  # <math> has no innerText
    expect(inspector.locator(".arith.result")).to_have_text(re.compile(r"^=\s*2\.000$"))


def test_keyboard_moves_between_cells_and_enter_inspects(page: Page) -> None:
    page.goto("/?preset=three-token")
    go_to_stage(page, "scores")
    scores = heatmap(page, "scores.0")
    expect(scores.locator("td[tabindex='0']")).to_have_count(1)  # one tab stop per table
    heatmap(page, "q.0").locator("td[tabindex='0']").focus()
    # From Q's cells to the scores' first cell, Tab stops only at the figures' menus (Save figure, export) on the
    # way: Kᵀ's cells are inspected as K in stage 1, so Kᵀ has no tab stop of its own.
    menus = []
    for _ in range(8):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.matches('td')"):
            break
        menus.append(page.evaluate("document.activeElement.closest('details').className"))
    expect(cell(scores, 0, 0)).to_be_focused()
    assert set(menus) == {"export", "save-figure"}, menus

    for key in ("ArrowDown", "ArrowDown", "ArrowRight"):
        page.keyboard.press(key)
    expect(cell(scores, 2, 1)).to_be_focused()
    page.keyboard.press("Enter")

    inspector = page.locator("#inspector")
    expect(inspector).to_contain_text("Score of query 3 (token 3) for key 2 (token 2)")
    expect(inspector.locator(".arith.result")).to_have_text(re.compile(r"^=\s*1\.000$"))
    expect(current_stage(page)).to_have_id("stage-scores")  # arrows in a matrix do not step
    expect(cell(scores, 2, 1)).to_have_class(re.compile(r"\bsel\b"))
    expect(cell(scores, 2, 1)).to_be_focused()
    expect(scores.locator("td[tabindex='0']")).to_have_count(1)


# --- 5. presets ---------------------------------------------------------------------------------


def test_pool_preset_from_the_menu(page: Page) -> None:
    page.goto("/")
    load_preset_from_menu(page, "pool")
    expect(page.locator('select[name="decimals"]')).to_have_value("2")
    go_to_stage(page, "scores")
    scores = heatmap(page, "scores.0")
    expect(cell(scores, 0, 0)).to_have_text("0.31")  # pool·pool
    expect(cell(scores, 0, 1)).to_have_text("0.14")  # pool·beats
    expect(cell(scores, 0, 2)).to_have_text("0.30")  # pool·badminton
    go_to_stage(page, "multihead")
    expect(cell(heatmap(page, "final"), 0, 0)).to_have_text("0.38")


def test_choosing_a_scenario_loads_it_without_the_button(page: Page) -> None:
    page.goto("/")
    expect(page.get_by_role("button", name="Load")).to_be_hidden()  # the menu loads on change
    page.locator("#preset-choice").select_option("bank-money")
    expect(page).to_have_url(re.compile(r"[?&]preset=bank-money$"))
    expect(page.locator("#summary")).to_contain_text(PRESETS["bank-money"].title)
    expect(page.locator('input[name="token-0"]')).to_have_value("Ryan")


@pytest.mark.parametrize("js_enabled", [False])
def test_without_javascript_the_load_button_loads_the_scenario(page: Page) -> None:
    page.goto("/")
    page.locator("#preset-choice").select_option("pool")
    expect(page).to_have_url(re.compile(r"/$"))  # choosing alone does nothing without a script
    load = page.get_by_role("button", name="Load")
    expect(load).to_be_visible()
    load.click()
    expect(page).to_have_url(re.compile(r"[?&]preset=pool$"))
    expect(page.locator("#summary")).to_contain_text(PRESETS["pool"].title)
    expect(page.locator('input[name="token-0"]')).to_have_value("pool")


def test_three_token_preset_from_the_menu(page: Page) -> None:
    page.goto("/")
    load_preset_from_menu(page, "three-token")
    go_to_stage(page, "softmax")
    assert cells(heatmap(page, "softmax.0")) == [
        ["0.401", "0.198", "0.401"],
        ["0.401", "0.401", "0.198"],
        ["0.503", "0.248", "0.248"],
    ]


def test_the_banner_follows_the_scenario(page: Page) -> None:
    page.goto("/?preset=pool")
    banner = page.locator("#summary")
    expect(banner).to_contain_text("No learned weights yet")
    with page.expect_response(lambda r: r.url.endswith("/stages")):
        page.locator('input[name="x-0-0"]').fill("0.9")
    expect(banner).to_contain_text("(values edited)")
    with page.expect_response(lambda r: r.url.endswith("/stages")):
        page.locator('input[name="token-1"]').fill("loses")
    expect(banner).to_contain_text("edited from the preset: 3 tokens “pool loses badminton”, embeddings of 4, 1 head")
    expect(banner).not_to_contain_text("No learned weights yet")
    banner.get_by_role("link", name="Start over from the preset").click()
    expect(page).to_have_url(re.compile(r"[?&]preset=pool$"))
    expect(page.locator('input[name="token-1"]')).to_have_value("beats")
    expect(banner).to_contain_text("No learned weights yet")


@pytest.mark.parametrize(("preset", "sense"), [("bank-river", "river"), ("bank-money", "money")])
def test_bank_attends_to_the_word_that_sets_its_sense(page: Page, preset: str, sense: str) -> None:
    page.goto("/")
    load_preset_from_menu(page, preset)
    page.locator('select[name="head"]').select_option("2")  # head 3: where
    expect(page.locator("#editor details.weights summary")).to_contain_text("Weights of head 3")
    go_to_stage(page, "softmax")
    weights = heatmap(page, "softmax.2")
    bank = PRESETS[preset].tokens.index("bank")
    row = [float(v.replace("−", "-")) for v in cells(weights)[bank]]
    others = [j for j in range(len(row)) if j != bank]
    strongest = max(others, key=lambda j: row[j])
    assert col_labels(weights)[strongest] == f"{strongest + 1} {sense}"  # the page counts from 1


# --- 6. a bad value -----------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["1e999", "5000"])
def test_bad_value_shows_an_error_and_keeps_the_stages(page: Page, page_log: PageLog, bad: str) -> None:
    page_log.allow(422, "/stages")
    page.goto("/")
    go_to_stage(page, "softmax")
    stages_before = page.locator("#stages .stage-area").inner_text()
    softmax = heatmap(page, "softmax.0")
    softmax_before = softmax.inner_text()
    x12 = page.locator('input[name="x-1-2"]')

    with page.expect_response(lambda r: r.url.endswith("/stages")) as answer:
        x12.fill(bad)  # 1e999 overflows: Chromium sends ""; 5000 is over the bound of 1000
    assert answer.value.status == 422
    error = page.locator("#err-x")
    expect(error).to_contain_text("X row 2, column 3")
    expect(error).to_have_attribute("data-field", "x-1-2")
    assert page.locator("#stages .stage-area").inner_text() == stages_before
    expect(current_stage(page)).to_have_id("stage-softmax")
    assert page_log.seen_allowed, "the 422 was not seen"

    with page.expect_response(lambda r: r.url.endswith("/stages")) as answer:
        x12.fill("0.7")
    assert answer.value.status == 200
    expect(error).to_be_empty()
    expect(softmax).not_to_have_text(softmax_before)
    assert cells(softmax) == fmt(expected_run("default", {(1, 2): 0.7}).heads[0].softmax)


def test_bad_value_marks_its_input_invalid(page: Page, page_log: PageLog) -> None:
    page_log.allow(422, "/stages")
    page.goto("/")
    x12 = page.locator('input[name="x-1-2"]')
    with page.expect_response(lambda r: r.url.endswith("/stages")):
        x12.fill("5000")
    expect(page.locator("#err-x")).to_contain_text("X row 2, column 3")
    expect(x12).to_have_attribute("aria-invalid", "true", timeout=2_000)


def test_invalid_mark_from_the_server_survives_page_load(page: Page, page_log: PageLog) -> None:
    page_log.allow(422, "/", method="GET")
    response = page.goto("/?preset=default&shape=3,1,3,3,0&token-0=a&x-0-0=5000&x-0-1=1&x-0-2=1")
    assert response is not None and response.status == 422
    expect(page.locator("#err-x")).to_contain_text("X row 1, column 1")
    expect(page.locator('input[name="x-0-0"]')).to_have_attribute("aria-invalid", "true", timeout=2_000)


# --- 7. structural edits ------------------------------------------------------------------------


def test_adding_and_removing_a_token_resizes_the_scores(page: Page) -> None:
    page.goto("/")
    go_to_stage(page, "scores")
    t = len(PRESETS["default"].tokens)
    page.get_by_role("button", name="+ Add token").click()
    expect(page.locator(f'input[name="token-{t}"]')).to_have_value("new")
    expect(current_stage(page)).to_have_id("stage-scores")
    assert len(cells(heatmap(page, "scores.0"))) == t + 1
    assert all(len(row) == t + 1 for row in cells(heatmap(page, "scores.0")))
    expect(page.locator('table.grid[data-grid="x"] tbody tr')).to_have_count(t + 1)
    expect(page.locator('table.grid[data-grid="x"] caption .shape')).to_have_text(f"{t + 1}×3")

    page.locator('#editor button[value="remove_token-1"]').click()  # "cat"
    expect(page.locator(f'input[name="token-{t}"]')).to_have_count(0)
    scores = heatmap(page, "scores.0")
    assert [len(row) for row in cells(scores)] == [t] * t
    assert col_labels(scores) == ["1 the", "2 sat", "3 on", "4 mat", "5 new"]


def test_two_heads_show_a_head_selector_and_a_wider_concat(page: Page) -> None:
    page.goto("/")
    expect(page.locator('select[name="head"]')).to_have_count(0)
    heads = page.locator('input[name="num_heads"]')
    heads.fill("2")
    heads.dispatch_event("change")
    head_choice = page.locator('select[name="head"]')
    expect(head_choice).to_be_visible()
    expect(head_choice.locator("option")).to_have_text(["head 1", "head 2"])
    expect(page.locator("#stages .head-choice")).to_contain_text("of 2")  # beside the stages

    go_to_stage(page, "multihead")
    d_v = int(page.locator('input[name="d_v"]').input_value())
    concat = heatmap(page, "concat")
    assert col_labels(concat) == [f"h{h}·v{j}" for h in (1, 2) for j in range(1, d_v + 1)]
    expect(page.locator("#stage-multihead .note")).to_contain_text(re.compile(r"h\s*=\s*2 heads"))

    head_choice.select_option("1")
    expect(page.locator("#editor details.weights summary")).to_contain_text("Weights of head 2")
    go_to_stage(page, "scores")
    expect(heatmap(page, "scores.1")).to_contain_text("Scores Q·Kᵀ (head 2)")


# --- 8. without JavaScript ----------------------------------------------------------------------


@pytest.mark.parametrize("js_enabled", [False])
def test_without_javascript_forms_post_and_the_page_follows(page: Page) -> None:
    page.goto("/")
    page.locator("#editor > summary").click()  # the drawer comes closed: the student opens it to edit
    expect(page.locator('.nojs[value="apply"]')).to_be_visible()  # hidden only when JS runs
    page.locator('input[name="x-0-0"]').fill("2.5")
    page.locator("#next-stage").click()  # a step posts the form, the edit with it
    expect(current_stage(page)).to_have_id("stage-qkv")
    expect(page.locator('input[name="x-0-0"]')).to_have_value("2.5")
    map_link(page, "softmax").click()  # the map's link is the permalink: the edit is in it

    expect(current_stage(page)).to_have_id("stage-softmax")
    expect(map_current(page)).to_have_id("map-wide-softmax")
    expect(page.locator('input[name="x-0-0"]')).to_have_value("2.5")
    shown = cells(heatmap(page, "softmax.0"))
    assert shown == fmt(expected_run("default", {(0, 0): 2.5}).heads[0].softmax)
    assert shown != fmt(expected_run("default").heads[0].softmax)

    # The row/column form inspects a cell without JavaScript too, counting from 1 as the page does.
    page.locator("#inspector summary").click()
    page.locator('select[name="inspect_matrix"]').select_option("softmax")
    page.locator('input[name="inspect_row"]').fill("2")
    page.locator('input[name="inspect_col"]').fill("3")
    page.get_by_role("button", name="Inspect").click()
    expect(page.locator("#inspector")).to_contain_text("(cat)")  # the second token's row
    expect(cell(heatmap(page, "softmax.0"), 1, 2)).to_have_class(re.compile(r"\bsel\b"))
    expect(page.locator('input[name="inspect_row"]')).to_have_value("2")
    expect(page.locator('input[name="x-0-0"]')).to_have_value("2.5")


def test_default_stages_fit_a_1400_px_window(page: Page) -> None:
    page.goto("/")
    show_all_stages(page)
    overflowing = page.evaluate(
        """() => Array.from(document.querySelectorAll("#stages article.stage .row"))
                      .filter(r => r.scrollWidth > r.clientWidth)
                      .map(r => `${r.closest("article").id}: ${r.scrollWidth} > ${r.clientWidth} px`)"""
    )
    assert overflowing == []


# --- 9. the README's screenshot -----------------------------------------------------------------


def test_screenshot_of_the_softmax_stage_with_a_weight_inspected(
    page: Page, screenshot: Callable[..., Path]
) -> None:
    page.goto("/")
    go_to_stage(page, "softmax")
    cell(heatmap(page, "softmax.0"), 2, 1).click()
    expect(page.locator("#inspector")).to_contain_text("Attention weights of query 3")
    page.mouse.move(0, 0)  # no hover styles in the picture

    path = screenshot("softmax-inspected")
    docs = path.parents[1] / "docs"
    docs.mkdir(exist_ok=True)
    shutil.copyfile(path, docs / "screenshot.png")
    width, height = png_size(docs / "screenshot.png")
    assert width == 1400
    assert 1000 <= height <= 4000
    assert (docs / "screenshot.png").stat().st_size < DOCS_SCREENSHOT_MAX_BYTES
