"""Heatmap tables: the one place where a matrix becomes HTML.

This is the page's hot path (every edit re-renders several matrices), so a table is built in one
pass over rows with str.join, not one template call per cell. Every label is escaped here.
Colour is carried by a CSS class per bucket (no inline styles, so a strict CSP holds); the number
is always printed in the cell, so colour is never the only carrier of a value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from markupsafe import Markup, escape

DIVERGING_BUCKETS = 5  # classes d-5 … d5: signed values, centred on 0, scaled by the largest |value|
SEQUENTIAL_BUCKETS = 9  # classes s0 … s8: weights in [0, 1], on a fixed scale
MINUS_INFINITY = "−∞"  # a masked score: class mk, no colour bucket


@dataclass(frozen=True)
class LegendStop:
    css_class: str
    label: str


def format_numbers(m: np.ndarray, decimals: int) -> list[list[str]]:
    """Fixed-point strings for every cell; −0.000 is shown as 0.000."""
    rounded = np.round(m, decimals) + 0.0  # + 0.0 turns −0.0 into 0.0
    fmt = f"{{:.{decimals}f}}".format
    return [[fmt(v) for v in row] for row in rounded.tolist()]


def bucket_classes(m: np.ndarray, kind: str) -> tuple[np.ndarray, float]:
    """CSS class per cell, and the |value| that maps to the darkest diverging bucket."""
    if kind == "weights":
        idx = np.clip(np.floor(m * SEQUENTIAL_BUCKETS), 0, SEQUENTIAL_BUCKETS - 1).astype(int)
        names = np.array([f"s{i}" for i in range(SEQUENTIAL_BUCKETS)])
        return names[idx], 1.0
    top = float(np.max(np.abs(m))) if m.size else 0.0
    if top == 0.0:
        return np.full(m.shape, "d0"), 0.0
    idx = np.rint(m / top * DIVERGING_BUCKETS).astype(int)  # −5 … 5
    names = np.array([f"d{i}" for i in range(-DIVERGING_BUCKETS, DIVERGING_BUCKETS + 1)])
    return names[idx + DIVERGING_BUCKETS], top


def legend(kind: str, top: float, decimals: int) -> list[LegendStop]:
    if kind == "weights":
        step = 1.0 / SEQUENTIAL_BUCKETS
        return [
            LegendStop(f"s{i}", f"{i * step:.2f}") for i in range(SEQUENTIAL_BUCKETS)  # each bucket's lower end
        ]
    return [
        LegendStop(f"d{i}", f"{i * top / DIVERGING_BUCKETS + 0.0:.{min(decimals, 2)}f}".replace("-", "−"))
        for i in range(-DIVERGING_BUCKETS, DIVERGING_BUCKETS + 1, 1)
    ]


def heatmap_table(
    m: np.ndarray,
    *,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    kind: str,
    decimals: int,
    ref: str,
    caption: str,
    corner: str = "",
    inspectable: bool = False,
    selected: tuple[int, int] | None = None,
    hidden: np.ndarray | None = None,
) -> tuple[Markup, float]:
    """A <table> with a header row, one header cell per row, and a number in every cell.

    ``ref`` names the matrix (e.g. ``softmax.0``) for the inspector; cells of an inspectable
    table carry no per-cell attributes: the browser script finds row and column by position.
    ``hidden`` (a quiz) marks cells shown as "?" with no colour, so neither gives the value away.
    A −∞ (a key the mask hides) prints as "−∞" on a hatched cell, outside the colour scale.
    Returns the markup and the scale's top value for the legend.
    """
    hidden_keys = np.isneginf(m)
    finite = np.where(hidden_keys, 0.0, m)  # the scale and the numbers from the visible entries only
    classes, top = bucket_classes(finite, kind)
    texts = format_numbers(finite, decimals)
    if hidden_keys.any():
        classes = np.where(hidden_keys, "mk", classes)
        texts = np.where(hidden_keys, MINUS_INFINITY, np.array(texts, dtype=object)).tolist()
    if hidden is not None and hidden.any():
        classes = np.where(hidden, "qz", classes)
        texts = np.where(hidden, "?", np.array(texts, dtype=object)).tolist()
    head = "".join(f'<th scope="col">{escape(c)}</th>' for c in col_labels)
    body = []
    sel_i, sel_j = selected if selected else (-1, -1)
    for i, (label, row_text, row_cls) in enumerate(zip(row_labels, texts, classes.tolist(), strict=True)):
        cells = "".join(
            f'<td class="{c} sel">{t}</td>' if (i == sel_i and j == sel_j) else f'<td class="{c}">{t}</td>'
            for j, (t, c) in enumerate(zip(row_text, row_cls, strict=True))
        )
        body.append(f'<tr><th scope="row">{escape(label)}</th>{cells}</tr>')
    # An empty header cell is announced as nothing; name the row-label column for screen readers.
    corner_text = escape(corner) if corner else Markup('<span class="visually-hidden">row</span>')
    attrs = f' data-ref="{escape(ref)}"'
    if inspectable:
        attrs += ' data-inspect="1"'
    if hidden is not None:
        attrs += ' data-quiz="1"'
    cols = m.shape[1] if m.ndim == 2 else 0
    width = " cols-s" if cols <= 4 else (" cols-m" if cols <= 6 else "")  # presenter mode sizes by it
    html = (
        f'<table class="heatmap {kind}{width}"{attrs}><caption>{escape(caption)}</caption>'
        f'<thead><tr><th scope="col" class="corner">{corner_text}</th>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )
    return Markup(html), top
