"""The page's grids of numbers (X, the weights, P, C, a target: up to 64 × 64 cells each), in either
of their two spellings.

Without JavaScript the browser posts one field per cell (``x-3-5``); with it, the page's script posts
each grid as one field (``grid-x``: the rows joined by ";", each row's cells by " "), so a d_model 64
edit sends a few dozen fields, not 20,000. The two mean the same cells: a joined grid is read as if its
cells had been posted one by one, and every error still names the cell's own input.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from app.config import settings
from app.i18n import gettext as _
from app.state.form import FormError
from app.state.numbers import NumberError, number_message, read_numbers

# A joined grid: the field ``grid-<prefix>``, its rows joined by ROW_SEP and each row's cells by CELL_SEP.
# A number input's value is a valid floating-point number or empty, so it never holds either.
GRID_FIELD = "grid-"
ROW_SEP, CELL_SEP = ";", " "
# The most rows or columns any grid of the page has (the FFN's d_ff is the widest): a joined grid is
# never split further than this, whatever a client sends.
MAX_GRID_SIDE = max(settings.max_tokens, settings.max_d_model, settings.max_d_head, settings.max_d_ff)


def _joined(form: Mapping[str, str], prefix: str) -> str | None:
    text = form.get(GRID_FIELD + prefix)
    return text if isinstance(text, str) else None


def has_grid(form: Mapping[str, str], prefix: str) -> bool:
    """Whether the form holds the grid ``prefix`` (in either spelling): its first cell is there."""
    return _joined(form, prefix) is not None or f"{prefix}-0-0" in form


def grid_rows(form: Mapping[str, str], prefix: str, most: int) -> int:
    """How many rows of the grid ``prefix`` the form holds, at most ``most`` and at least 1: the
    last row whose first cell is there."""
    joined = _joined(form, prefix)
    if joined is not None:
        return max(1, min(most, joined.count(ROW_SEP) + 1))
    return next((r for r in range(most, 0, -1) if f"{prefix}-{r - 1}-0" in form), 1)


def _cell_texts(form: Mapping[str, str], prefix: str, rows: int, cols: int) -> list[str]:
    """The texts of the grid's rows × cols cells, row by row; "" for a cell the form lacks."""
    joined = _joined(form, prefix)
    if joined is None:
        return [form.get(f"{prefix}-{i}-{j}") or "" for i in range(rows) for j in range(cols)]
    texts: list[str] = []
    lines = joined.split(ROW_SEP, rows)  # rows + 1 parts at most: the rest, unread, in the last
    for i in range(rows):
        cells = lines[i].split(CELL_SEP, cols)[:cols] if i < len(lines) else []
        texts += cells if len(cells) == cols else cells + [""] * (cols - len(cells))
    return texts


def read_matrix(form: Mapping[str, str], prefix: str, rows: int, cols: int, label: str) -> np.ndarray:
    """The grid of inputs ``<prefix>-<row>-<col>`` (or its joined field ``grid-<prefix>``) as a
    (rows, cols) array. A missing or bad cell is a FormError naming that input, counted from 1 as
    the page counts: ``x-1-2`` with "X row 2, column 3: “abc” is not a number". Cells beyond rows
    × cols are not read, in either spelling."""
    try:
        values = read_numbers(_cell_texts(form, prefix, rows, cols))
    except NumberError as e:
        i, j = divmod(e.index, cols)
        where = _("{matrix} row {row}, column {col}").format(matrix=label, row=i + 1, col=j + 1)
        raise FormError(f"{prefix}-{i}-{j}", number_message(e, where)) from None
    return np.array(values, dtype=np.float64).reshape(rows, cols)


def expand_grids(form: Mapping[str, str]) -> dict[str, str]:
    """The form with each joined grid written out as one field per cell, as a browser without
    JavaScript posts it (for the page that shows a student's typed values beside an error). A
    joined grid replaces any cell fields of the same grid, as in read_matrix. Stops at the most
    fields a page's form can hold."""
    joined = {name.removeprefix(GRID_FIELD): text for name, text in form.items()
              if name.startswith(GRID_FIELD) and isinstance(text, str)}
    out = {name: text for name, text in form.items()
           if not name.startswith(GRID_FIELD) and not (name.count("-") == 2 and name.split("-")[0] in joined)}
    for prefix, text in joined.items():
        for i, line in enumerate(text.split(ROW_SEP, MAX_GRID_SIDE)[:MAX_GRID_SIDE]):
            if len(out) >= settings.max_form_fields:
                return out
            for j, cell in enumerate(line.split(CELL_SEP, MAX_GRID_SIDE)[:MAX_GRID_SIDE]):
                out[f"{prefix}-{i}-{j}"] = cell
    return out


def count_values(form: Mapping[str, str]) -> int:
    """How many values the form holds, a joined grid counting each of its cells (a measure of the
    work it asks for, whichever way it was spelled)."""
    joined = sum(text.count(CELL_SEP) + text.count(ROW_SEP) for name, text in form.items()
                 if name.startswith(GRID_FIELD) and isinstance(text, str))
    return len(form) + joined
