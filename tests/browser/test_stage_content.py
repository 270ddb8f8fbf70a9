"""What a student reads in the stages, in a real Chromium: the softmax's input under a mask, the inspector's
numbers adding up, counting from 1 with the articles named, and the backward pass through the softmax with the
attention goal's floor.

The numbers the page should show are computed here from the pipeline (app.maths through app.state), never read
back from the page. Screenshots at the four class screens land in test-artifacts/.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import pytest

from app.lesson.goals import SEED_003_ALIGNMENT
from app.lesson.presets import PRESETS
from app.state.scenario import from_preset
from tests.browser.conftest import ARTIFACTS
from tests.browser.test_page import cell, cells, heatmap
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
    """The page as it comes, the inputs drawer closed; the padding test opens it to tick a box."""
    return False


MASKED_PRESETS = sorted(k for k, p in PRESETS.items() if p.mask != "none")
MINUS = "−"


def printed(value: float, decimals: int) -> str:
    """A number as a heatmap prints it, whichever minus sign it uses: compare after normalising."""
    return f"{round(value, decimals) + 0.0:.{decimals}f}".replace("-", MINUS)


def normalised(text: str) -> str:
    return text.strip().replace("-", MINUS)


def expected_input(masked: np.ndarray, decimals: int) -> list[list[str]]:
    """The softmax's input as the page should print it: −∞ where hidden, the scaled score elsewhere."""
    return [["−∞" if math.isinf(v) else printed(v, decimals) for v in row] for row in masked.tolist()]


def shown_input(page: Page, ref: str) -> list[list[str]]:
    return [[normalised(t) for t in row] for row in cells(heatmap(page, ref, "softmax"))]


# --- 1. the softmax's input under a mask ---------------------------------------------------------------


@pytest.mark.parametrize("preset", MASKED_PRESETS)
def test_the_softmax_input_is_the_masked_matrix(page: Page, preset: str) -> None:
    sc, view = from_preset(preset)
    masked = sc.run().heads[0].masked  # (T, S), −inf where the mask hides a key
    page.goto(f"/?preset={preset}&stage=softmax")
    table = heatmap(page, "masked.0", "softmax")
    expect(table).to_be_visible()
    expect(heatmap(page, "scaled.0", "softmax")).to_have_count(0)
    assert shown_input(page, "masked.0") == expected_input(masked, view.decimals)
    # hidden cells are set apart: hatched, none of the colour scale's classes
    i, j = map(int, np.argwhere(np.isinf(masked))[0])
    hidden = cell(table, i, j)
    assert hidden.evaluate("c => getComputedStyle(c).backgroundImage").startswith("repeating-linear-gradient")
    assert hidden.get_attribute("class") == "mk"
    caption = page.locator("#stage-softmax figure.operand figcaption").first
    expect(caption).to_contain_text("Masked")


@pytest.mark.parametrize("inputs_open", [True])
def test_padding_is_masked_in_the_softmax_input_and_no_mask_leaves_scaled(page: Page) -> None:
    sc, view = from_preset("default")
    page.goto("/?preset=default&stage=softmax")
    expect(heatmap(page, "scaled.0", "softmax")).to_be_visible()
    expect(heatmap(page, "masked.0", "softmax")).to_have_count(0)
    assert "−∞" not in page.locator("#stage-softmax").inner_text()
    with page.expect_response(lambda r: r.url.endswith("/stages") or r.url.endswith("/update")):
        page.locator('input[name="pad-3"]').check()
    expect(heatmap(page, "masked.0", "softmax")).to_be_visible()
    masked = replace(sc, padding=frozenset({3})).run().heads[0].masked
    assert shown_input(page, "masked.0") == expected_input(masked, view.decimals)
    assert [row[3] for row in shown_input(page, "masked.0")] == ["−∞"] * len(sc.tokens)


def test_the_inspector_of_a_masked_softmax_names_the_masked_input(page: Page) -> None:
    page.goto("/?preset=causal&stage=softmax")
    cell(heatmap(page, "softmax.0", "softmax"), 1, 0).click()
    inspector = page.locator("#inspector")
    expect(inspector.locator(".arith-table")).to_be_visible()
    expect(inspector.locator(".heading math")).to_have_attribute("alttext", re.compile(r"Masked"))
    head = inspector.locator(".arith-table thead").inner_text()
    assert "masked score" in head and "Masked" in head
    text = inspector.inner_text()
    assert text.count("(hidden)") == 3  # query 2 sees keys 1 and 2 of 5
    assert "sum over the visible keys" in text
    # the lines under the table say the same: no line to a hidden key, and −∞ printed for it
    first = page.locator("#lines-softmax-fig .qs .tok").first
    assert first.get_attribute("aria-label").startswith("query 1 the:")
    assert "masked keys 2, 3, 4, 5" in first.get_attribute("aria-label")


def test_screenshots_of_the_causal_softmax_and_its_inspector(page: Page) -> None:
    page.goto("/?preset=causal&stage=softmax&inspect=softmax.0.2.1")
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        stage = page.locator("#stage-softmax")
        stage.scroll_into_view_if_needed()
        stage.screenshot(path=str(ARTIFACTS / f"content-causal-softmax-{width}x{height}.png"))
        inspector = page.locator("#inspector")
        inspector.scroll_into_view_if_needed()
        inspector.screenshot(path=str(ARTIFACTS / f"content-causal-inspector-{width}x{height}.png"))
        box = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert box <= 0, f"{width}×{height}: the page scrolls sideways by {box} px"


# --- 10. the inspector's numbers add up -----------------------------------------------------------------


def test_a_gradient_cell_reads_the_same_in_its_heatmap_and_its_inspector_and_its_terms_add_up(page: Page) -> None:
    """learn-translate prints the page at two decimals, its gradients at three: the inspector follows the
    heatmap. Each row of the softmax backward's table adds up as printed, or a line says why not."""
    page.goto("/?preset=learn-translate&stage=grad_scores")
    table = heatmap(page, "g_scaled.0", "grad_scores")
    for i, j in ((1, 5), (0, 0), (4, 5)):
        shown = normalised(cell(table, i, j).inner_text())
        cell(table, i, j).click()
        inspector = page.locator("#inspector")
        expect(inspector).to_contain_text(f"query {i + 1}")
        result = inspector.locator(".arith.result math")
        assert normalised(result.get_attribute("alttext")) == f"= {shown}"
        products = inspector.locator(".arith-table tbody tr td:nth-child(4)").all_inner_texts()
        terms = [float(re.sub(r"\s", "", normalised(t)).replace(MINUS, "-")) for t in products]
        total = re.sub(r"\s", "", normalised(inspector.locator(".arith-table tfoot td").inner_text()))
        decimals = len(shown.rpartition(".")[2])
        assert all(len(t.strip().rpartition(".")[2]) == decimals for t in products)
        as_printed = printed(sum(terms), decimals)
        note = inspector.locator(".rounding")
        if as_printed == total:
            expect(note).to_have_count(0)
        else:  # the rounded terms miss the rounded total by rounding only, and the page says so
            assert abs(sum(terms) - float(total.replace(MINUS, "-"))) <= len(terms) * 0.5 * 10**-decimals
            expect(note).to_contain_text(f"add up to {as_printed}")


def test_a_scores_cell_adds_up_as_printed(page: Page) -> None:
    """A dot product at the page's decimals: its values, as printed, sum to its result, or a line says why not."""
    page.goto("/?preset=default&stage=scores&decimals=2")
    table = heatmap(page, "scores.0", "scores")
    noted = []
    for i, j in ((0, 0), (2, 0), (4, 3)):
        cell(table, i, j).click()
        inspector = page.locator("#inspector")
        expect(inspector).to_contain_text(f"query {i + 1}")
        values = inspector.locator(".arith math").nth(2).evaluate("m => m.textContent")  # heading, products, values
        numbers = re.findall(r"([+−]?)\s*(\d+\.\d+)", values.replace("\n", " "))
        terms = [float(n) * (-1 if s == MINUS else 1) for s, n in numbers]
        total = normalised(inspector.locator(".arith.result math").get_attribute("alttext")).removeprefix("= ")
        if printed(sum(terms), 2) == total:
            expect(inspector.locator(".rounding")).to_have_count(0)
        else:  # score 5,4: −0.12 + 0.06 + 0.01 = −0.05 as printed, −0.04387 exactly
            expect(inspector.locator(".rounding")).to_contain_text(f"add up to {printed(sum(terms), 2)}")
            noted.append((i, j))
    assert noted == [(4, 3)]


# --- 11. counting from 1, and the articles' names -------------------------------------------------------

READ_TEXT = """() => {
  const parts = [document.body.innerText];
  for (const el of document.querySelectorAll('[aria-label], [title], [alt], [aria-description], [placeholder]'))
    for (const a of ['aria-label', 'title', 'alt', 'aria-description', 'placeholder'])
      if (el.hasAttribute(a)) parts.push(el.getAttribute(a));
  for (const el of document.querySelectorAll('caption, svg title, svg desc, math[alttext]'))
    parts.push(el.textContent, el.getAttribute('alttext') || '');
  return parts.join('\\n');
}"""
ZERO_BASED = re.compile(r"\b(pos|query|key|token|head|row|column) 0\b")
SEED_FILE = re.compile(r"\b[Ss]eeds? 0\d\d|\bseeds'|\b[Ss]eed 0\d\d's")


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_no_text_counts_from_0_or_names_a_seed_file(page: Page, preset: str) -> None:
    """Every stage of the preset on one page (its Learn panel too), the scaling lab and cost panels open."""
    page.goto(f"/?preset={preset}&show_all=on&panels=lab+cost")
    expect(page.locator("#stages article.stage").first).to_be_visible()
    page.locator("#summary .more").click()  # the scenario's paragraph, folded to its first sentence
    text = page.evaluate(READ_TEXT)
    assert not ZERO_BASED.findall(text), [m.group(0) for m in ZERO_BASED.finditer(text)]
    assert not SEED_FILE.search(text), SEED_FILE.search(text).group(0)
    if preset in ("translate", "positions"):
        assert "Article 4, “Attention mechanism and transformers”" in text


# --- 12. backward through the softmax, and the floor -----------------------------------------------------

OPERATORS = """(key) => Array.from(document.querySelectorAll('#stage-' + key + ' .op'), op => {
  const next = op.nextElementSibling;
  const a = op.getBoundingClientRect();
  const b = next ? next.getBoundingClientRect() : null;
  return {symbol: op.textContent, right: a.right, middle: (a.top + a.bottom) / 2,
          next: b && {left: b.left, top: b.top, bottom: b.bottom}};
})"""


def check_no_dangling_operator(page: Page, key: str, where: str) -> None:
    """Every "=" (and ⊙, ÷) has the matrix it introduces after it, on its own line."""
    for op in page.evaluate(OPERATORS, key):
        assert op["next"] is not None, f"{where}: “{op['symbol']}” ends its line with nothing after it"
        nxt = op["next"]
        assert nxt["top"] <= op["middle"] <= nxt["bottom"], f"{where}: “{op['symbol']}” and its matrix split: {op}"
        assert op["right"] <= nxt["left"] + 1, f"{where}: “{op['symbol']}” is not before its matrix: {op}"


def test_backward_through_softmax_has_no_dangling_equals_and_shows_each_matrix_once(page: Page) -> None:
    page.goto("/?preset=learn-translate&stage=grad_scores")
    stage = page.locator("#stage-grad_scores")
    expect(stage).to_be_visible()
    for ref in ("softmax.0", "g_softmax.0", "g_scaled.0", "g_scores.0"):
        expect(stage.locator(f'table[data-ref="{ref}"]')).to_have_count(1)
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        check_no_dangling_operator(page, "grad_scores", f"{width}×{height}")
        stage.scroll_into_view_if_needed()
        stage.screenshot(path=str(ARTIFACTS / f"content-grad-scores-{width}x{height}.png"))


def test_learn_translate_shows_its_floor_the_tables_entropy_and_why_dl_da_stays(page: Page) -> None:
    table = np.array(SEED_003_ALIGNMENT, dtype=np.float64)
    t = table / table.sum(axis=1, keepdims=True)  # the goal's rows, each summing to 1
    entropy = -sum(p * math.log(p) for row in t.tolist() for p in row if p > 0) / len(t)
    page.goto("/?preset=learn-translate&stage=grad_a")
    stage = page.locator("#stage-grad_a")
    expect(stage.locator(".floor-value")).to_have_text(f"{entropy:.3f}")
    assert f"{entropy:.3f}" == "0.948"
    expect(stage).to_contain_text("The floor is the target's entropy")
    expect(stage).to_contain_text("does not go to 0")
    size = math.sqrt(np.count_nonzero(t)) / len(t)
    assert f"/6={size:.3f}" in re.sub(r"\s", "", stage.inner_text())
    expect(page.locator("#learn .learn-status")).to_contain_text(f"cannot go below {entropy:.3f}")
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        check_no_dangling_operator(page, "grad_a", f"{width}×{height}")
        stage.scroll_into_view_if_needed()
        stage.screenshot(path=str(ARTIFACTS / f"content-grad-a-{width}x{height}.png"))
