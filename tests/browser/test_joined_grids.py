"""The page's script posts each grid of number inputs as one field (``grid-<key>``: rows joined by
";", cells by " "), in a real Chromium: what an edit sends, and that the page follows it exactly as
it follows the same edit sent one field per cell (no JavaScript, tests/browser/test_page.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

import pytest

from app.lesson.presets import PRESETS
from app.state.grids import expand_grids
from app.state.scenario import from_preset
from tests.browser.test_page import cell, cells, expected_run, fmt, go_to_stage, heatmap

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page, Request

    from tests.browser.conftest import PageLog

pytestmark = pytest.mark.browser


def posted(request: Request) -> dict[str, str]:
    """The fields of a urlencoded POST as the server reads them."""
    assert request.headers["content-type"].startswith("application/x-www-form-urlencoded")
    return dict(parse_qsl(request.post_data or "", keep_blank_values=True))


def edit(page: Page, cell: Locator, value: str, path: str = "/stages", change: bool = False) -> dict[str, str]:
    """Type ``value`` into ``cell``; the fields the edit posted to ``path``."""
    with page.expect_request(lambda r: r.method == "POST" and r.url.endswith(path)) as sent:
        cell.fill(value)
        if change:
            cell.dispatch_event("change")
    return posted(sent.value)


def inputs(page: Page, key: str) -> dict[str, str]:
    """The cells of the editor's grid ``key`` as the page holds them: name → value."""
    return page.locator(f'table[data-grid="{key}"] input.num').evaluate_all(
        "els => Object.fromEntries(els.map(el => [el.name, el.value]))")


def test_an_edit_posts_each_grid_as_one_field(page: Page) -> None:
    page.goto("/")
    x00 = page.locator('input[name="x-0-0"]')
    with page.expect_response(lambda r: r.url.endswith("/stages") and r.request.method == "POST") as answer:
        fields = edit(page, x00, "2.5")
    assert answer.value.status == 200

    # One field per grid, and not one cell field left (51 cells on the default page).
    grids = {name for name in fields if name.startswith("grid-")}
    assert grids == {"grid-x", "grid-w_q", "grid-w_k", "grid-w_v", "grid-w_o"}
    assert not [name for name in fields if name.count("-") == 2]
    sc, _ = from_preset("default")
    t, d = sc.x.shape
    rows = fields["grid-x"].split(";")
    assert len(rows) == t and all(len(row.split(" ")) == d for row in rows)
    assert rows[0].split(" ")[0] == "2.5"
    # Written out again, the joined fields are exactly the page's cells, row by row.
    expanded = expand_grids(fields)
    for key in ("x", "w_q", "w_k", "w_v", "w_o"):
        assert {name: expanded[name] for name in inputs(page, key)} == inputs(page, key), key

    # The page follows the edit: the numbers are the pipeline's for X[0][0] = 2.5.
    go_to_stage(page, "softmax")
    assert cells(heatmap(page, "softmax.0")) == fmt(expected_run("default", {(0, 0): 2.5}).heads[0].softmax)
    expect(x00).to_have_value("2.5")


def test_a_weight_of_another_head_is_posted_in_its_grid(page: Page) -> None:
    page.goto("/?preset=bank-river&stage=qkv")
    with page.expect_request(lambda r: r.method == "POST" and r.url.endswith("/")) as sent:
        page.locator('select[name="head"]').select_option("1")  # head 2: a structural post, joined too
    assert "grid-w_q" in posted(sent.value)
    expect(page.locator("#editor details.weights summary")).to_contain_text("Weights of head 2")

    fields = edit(page, page.locator('input[name="w_q-1-0"]'), "0.5")
    assert fields["grid-w_q"].split(";")[1].split(" ")[0] == "0.5"
    assert "w_q-1-0" not in fields

    sc, _ = from_preset("bank-river")
    q = replace(sc, edits={("w_q", 1, 1, 0): 0.5}).run().heads[1].q
    # Row 2 is the one the edit changes: waiting on row 1, unchanged, read the old table under load.
    expect(cell(heatmap(page, "q.1", "qkv"), 1, 0)).to_have_text(fmt(q, PRESETS["bank-river"].decimals)[1][0])
    assert cells(heatmap(page, "q.1", "qkv")) == fmt(q, PRESETS["bank-river"].decimals)


def test_a_bad_cell_of_a_joined_grid_is_named_beside_its_input(page: Page, page_log: PageLog) -> None:
    page_log.allow(422, "/stages")
    page.goto("/")
    x12 = page.locator('input[name="x-1-2"]')
    with page.expect_response(lambda r: r.url.endswith("/stages")) as answer:
        fields = edit(page, x12, "5000")
    assert answer.value.status == 422
    assert fields["grid-x"].split(";")[1].split(" ")[2] == "5000" and "x-1-2" not in fields
    expect(page.locator("#err-x")).to_have_text("X row 2, column 3: enter a finite number between −1000 and 1000")
    expect(page.locator("#err-x")).to_have_attribute("data-field", "x-1-2")
    expect(x12).to_have_attribute("aria-invalid", "true")


def test_the_learn_panels_target_is_posted_joined_and_read_cell_by_cell(page: Page, page_log: PageLog) -> None:
    page_log.allow(422, "/stages")
    page.goto("/?preset=learn-bank")
    page.locator("#learn-settings > summary").click()
    cell = page.locator('input[name="target-0-1"]')
    with page.expect_response(lambda r: r.url.endswith("/stages")) as answer:
        fields = edit(page, cell, "-1", change=True)
    assert answer.value.status == 422
    assert fields["grid-target"].split(";")[0].split(" ")[1] == "-1" and "target-0-1" not in fields
    expect(page.locator("#err-learn")).to_contain_text("target row 1, column 2: a weight cannot be negative")
    expect(page.locator("#err-learn")).to_have_attribute("data-field", "target-0-1")

    with page.expect_response(lambda r: r.url.endswith("/stages")) as answer:
        edit(page, cell, "1", change=True)
    assert answer.value.status == 200
    expect(page.locator("#err-learn")).to_be_empty()
