"""Heatmap tables and their legends: numbers printed with a true minus sign and never as −0.000, colours
chosen from the numbers as printed (one neutral colour for a matrix of one printed value), a legend whose
words are the scale's ends and middle, and numbers on demand for a matrix of many columns."""

from __future__ import annotations

import re

import numpy as np
import pytest

from app.view.heatmap import (
    DENSE_COLUMNS,
    NEUTRAL,
    bucket_classes,
    constant_value,
    display_numbers,
    format_numbers,
    heatmap_table,
    legend,
)

MINUS = "\u2212"


def table(m: np.ndarray, kind: str = "signed", decimals: int = 3) -> str:
    n_rows, n_cols = m.shape
    html, _ = heatmap_table(m, row_labels=[f"r{i}" for i in range(n_rows)], col_labels=[f"c{j}" for j in range(n_cols)],
                            kind=kind, decimals=decimals, ref="m.0", caption="M")
    return str(html)


def cell_classes(html: str) -> list[str]:
    return re.findall(r'<td class="([^"]+)">', html)


def test_cells_print_a_true_minus_sign_and_no_negative_zero() -> None:
    m = np.array([[-0.25, 0.5, -0.0004, -1e-12]])
    assert display_numbers(m, 3) == [[f"{MINUS}0.250", "0.500", "0.000", "0.000"]]
    assert format_numbers(m, 3) == [["-0.250", "0.500", "0.000", "0.000"]]  # exports keep ASCII
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", table(m))
    assert cells == [f"{MINUS}0.250", "0.500", "0.000", "0.000"]
    assert "-" not in "".join(cells)


@pytest.mark.parametrize("m", [
    np.zeros((3, 4)),
    np.full((3, 4), 1e-17) * np.array([1, -1, 1, -1]),  # floating-point noise: prints as 0.000 everywhere
    np.full((2, 2), 0.7),  # a constant matrix
    np.array([[0.70001, 0.69999]]),  # two values that print alike
])
def test_a_matrix_of_one_printed_value_is_one_neutral_colour(m: np.ndarray) -> None:
    classes, top = bucket_classes(m, "signed", 3)
    assert set(classes.ravel().tolist()) == {NEUTRAL} and top == 0.0
    assert set(cell_classes(table(m))) == {NEUTRAL}
    value = constant_value(m, 3)
    assert value is not None
    scale = legend("signed", top, 3, value)
    assert scale.swatches == (NEUTRAL,) and scale.ticks == ()
    assert scale.note == f"one colour: every value is {abs(value):.3f}"
    html = scale.html()
    assert 'class="legend constant"' in html and "every value is" in html and MINUS + "0.000" not in html


def test_a_varied_matrix_uses_the_whole_diverging_ramp_and_no_constant_note() -> None:
    m = np.array([[-2.0, -1.0, 0.0, 1.0, 2.0]])
    classes, top = bucket_classes(m, "signed", 3)
    assert classes.tolist() == [["d-5", "d-2", "d0", "d2", "d5"]] and top == 2.0
    assert constant_value(m, 3) is None
    scale = legend("signed", top, 3)
    assert len(scale.swatches) == 11 and scale.ticks == (f"{MINUS}2.00", "0.00", "2.00") and not scale.note


def test_masked_cells_do_not_set_the_scale() -> None:
    m = np.array([[-np.inf, 0.5], [0.25, -np.inf]])
    _, top = bucket_classes(m, "signed", 3)
    assert top == 0.5
    assert constant_value(m, 3) is None


@pytest.mark.parametrize(("top", "decimals", "ends"), [
    (0.004, 3, "0.004"),  # two decimals would print 0.00 at both ends
    (0.00004, 4, "0.0000"),  # a top that prints as 0 even at the page's decimals is left at them
    (1.34, 3, "1.34"),
    (1.34, 1, "1.3"),
])
def test_a_legend_never_prints_its_ends_as_zero_with_a_sign(top: float, decimals: int, ends: str) -> None:
    low, middle, high = legend("signed", top, decimals).ticks
    assert high == ends and low == (ends if float(ends) == 0 else MINUS + ends)
    assert set(middle) <= {"0", "."}
    assert not re.search(rf"{MINUS}0\.0+$", low) and not low.startswith("-")


def test_a_weights_legend_is_its_fixed_scale() -> None:
    scale = legend("weights", 1.0, 3)
    assert scale.swatches == tuple(f"s{i}" for i in range(9)) and scale.ticks == ("0.00", "0.50", "1.00")
    uniform = np.full((3, 3), 1 / 3)
    value = constant_value(uniform, 3)
    assert value == 0.333
    assert legend("weights", 1.0, 3, value).note == "one colour: every weight is 0.333"


def test_a_legend_is_hidden_from_screen_readers_and_escapes_its_words() -> None:
    html = str(legend("signed", 1.0, 2).html("x-legend"))
    assert html.startswith('<div class="legend x-legend" aria-hidden="true"><div class="legend-strip">')
    assert html.count("<span class=") == 11 and html.count("<span>") == 3


def test_a_matrix_of_many_columns_carries_its_numbers_for_display_on_demand() -> None:
    wide = np.linspace(-1, 1, 3 * (DENSE_COLUMNS + 1)).reshape(3, DENSE_COLUMNS + 1)
    html = table(wide)
    assert 'class="heatmap signed dense"' in html
    assert re.search(r'<td class="d-5"><span>−1\.000</span></td>', html)
    assert html.endswith('</table><p class="dense-note">Numbers on demand: the cells are too small for them here. '
                         'Hover over a cell, or select it, to read it.</p>')
    narrow = table(np.ones((3, DENSE_COLUMNS)))
    assert "dense" not in narrow and "<span>" not in narrow
