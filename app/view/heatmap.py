"""Heatmap tables: the one place where a matrix becomes HTML.

This is the page's hot path (every edit re-renders several matrices), so a table is built in one
pass over rows with str.join, not one template call per cell. Every label is escaped here.
Colour is carried by a CSS class per bucket (no inline styles, so a strict CSP holds); the number
is always printed in the cell, so colour is never the only carrier of a value. Colours are chosen from
the numbers as printed: a matrix whose cells all print alike (all 0.000, or one value) is one neutral
colour, and its legend says so. A table of many columns (``DENSE_COLUMNS``) carries each number in a
<span>: where the stage is too narrow for them (static/app.css), the cells shrink and a number shows
on hover, focus or selection, and a note under the table says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from markupsafe import Markup, escape

from app.i18n import N_, local_number, local_numbers
from app.i18n import gettext as _

DIVERGING_BUCKETS = 5  # classes d-5 … d5: signed values, centred on 0, scaled by the largest |value|
SEQUENTIAL_BUCKETS = 9  # classes s0 … s8: weights in [0, 1], on a fixed scale
MINUS_INFINITY = "\u2212\u221e"  # a masked score: class mk, no colour bucket
NEUTRAL = "d0"  # the colour of 0, and of a matrix whose cells all print alike
DENSE_COLUMNS = 12  # more columns: numbers on demand where the stage is narrow (static/app.css)
MINUS = "\u2212"
DENSE_NOTE = N_("Numbers on demand: the cells are too small for them here. Hover over a cell, or select it, "
                "to read it.")


@dataclass(frozen=True)
class Legend:
    """A heatmap's scale: a strip of its colours (``swatches``, CSS classes) with its ends and middle
    written under it (``ticks``); or, for a matrix of one printed value, that one colour and ``note``."""

    kind: str
    swatches: tuple[str, ...]
    ticks: tuple[str, ...]
    note: str = ""

    def html(self, extra_class: str = "") -> Markup:
        cls = " ".join(c for c in ("legend", "constant" if self.note else "", extra_class) if c)
        strip = "".join(f'<span class="{c}"></span>' for c in self.swatches)
        words = f'<span class="legend-note">{escape(self.note)}</span>' if self.note else "".join(
            f"<span>{escape(t)}</span>" for t in self.ticks)
        return Markup(f'<div class="{cls}" aria-hidden="true"><div class="legend-strip">{strip}</div>'
                      f'<div class="legend-ticks">{words}</div></div>')

    def __html__(self) -> str:
        return str(self.html())


def format_numbers(m: np.ndarray, decimals: int) -> list[list[str]]:
    """Fixed-point strings for every cell, with an ASCII "-" (exports); −0.000 is shown as 0.000."""
    rounded = np.round(m, decimals) + 0.0  # + 0.0 turns −0.0 into 0.0
    fmt = f"{{:.{decimals}f}}".format
    return [[fmt(v) for v in row] for row in rounded.tolist()]


def display_numbers(m: np.ndarray, decimals: int) -> list[list[str]]:
    """The cells as the page prints them: fixed-point with a true minus sign (−0.250), 0.000 unsigned, with the
    decimal comma where the reader's language writes one (−0,250)."""
    return local_numbers(format_numbers(m, decimals))


def signed_text(value: float, decimals: int) -> str:
    """One number as the page prints it: −0.25 (−0,25 in French), and a value that rounds to zero without a sign."""
    return local_number(f"{round(value, decimals) + 0.0:.{decimals}f}")


def _printed(m: np.ndarray, decimals: int | None) -> np.ndarray:
    """The values as printed (rounded to ``decimals``), so that colour never tells apart two cells that
    read the same; non-finite cells (−∞ where masked) stay as they are."""
    return m if decimals is None else np.round(m, decimals) + 0.0


def bucket_classes(m: np.ndarray, kind: str, decimals: int | None = None) -> tuple[np.ndarray, float]:
    """CSS class per cell, and the |value| that maps to the darkest diverging bucket (0.0 when every
    cell prints alike: the matrix is one neutral colour). ``decimals``: the values as printed."""
    m = _printed(m, decimals)
    if kind == "weights":
        idx = np.clip(np.floor(m * SEQUENTIAL_BUCKETS), 0, SEQUENTIAL_BUCKETS - 1).astype(int)
        names = np.array([f"s{i}" for i in range(SEQUENTIAL_BUCKETS)])
        return names[idx], 1.0
    finite = m[np.isfinite(m)]
    top = float(np.max(np.abs(finite))) if finite.size else 0.0
    if top == 0.0 or float(np.min(finite)) == float(np.max(finite)):
        return np.full(m.shape, NEUTRAL), 0.0
    idx = np.rint(np.clip(m / top, -1, 1) * DIVERGING_BUCKETS).astype(int)  # −5 … 5 (−∞ at −5)
    names = np.array([f"d{i}" for i in range(-DIVERGING_BUCKETS, DIVERGING_BUCKETS + 1)])
    return names[idx + DIVERGING_BUCKETS], top


def constant_value(m: np.ndarray, decimals: int) -> float | None:
    """The one value every cell prints as, or None when they differ (or there are none)."""
    printed = _printed(m, decimals)
    if not printed.size or not np.all(np.isfinite(printed)):
        return None
    first = float(printed.flat[0])
    return first if bool(np.all(printed == first)) else None


def legend(kind: str, top: float, decimals: int, constant: float | None = None) -> Legend:
    """The scale under a heatmap: its colours, and the values at both ends and in the middle. A signed
    scale runs from −top to top (``top`` as bucket_classes returned it); its numbers have as many
    decimals as it takes for ``top`` not to print as 0 (at most ``decimals``, at least two when it has
    them). ``constant``: the one value of a matrix whose cells all print alike."""
    if constant is not None:
        classes, _top = bucket_classes(np.array([[constant]]), kind, decimals)
        note = (_("one colour: every weight is {value}") if kind == "weights"
                else _("one colour: every value is {value}"))
        return Legend(kind, (str(classes[0, 0]),), (), note.format(value=signed_text(constant, decimals)))
    if kind == "weights":
        places = min(decimals, 2)
        return Legend(kind, tuple(f"s{i}" for i in range(SEQUENTIAL_BUCKETS)),
                      tuple(signed_text(v, places) for v in (0.0, 0.5, 1.0)))
    places = min(decimals, 2)
    while places < decimals and round(top, places) == 0.0:
        places += 1
    return Legend(kind, tuple(f"d{i}" for i in range(-DIVERGING_BUCKETS, DIVERGING_BUCKETS + 1)),
                  (signed_text(-top, places), signed_text(0.0, places), signed_text(top, places)))


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
    classes, top = bucket_classes(finite, kind, decimals)
    texts = display_numbers(finite, decimals)
    if hidden_keys.any():
        classes = np.where(hidden_keys, "mk", classes)
        texts = np.where(hidden_keys, MINUS_INFINITY, np.array(texts, dtype=object)).tolist()
    if hidden is not None and hidden.any():
        classes = np.where(hidden, "qz", classes)
        texts = np.where(hidden, "?", np.array(texts, dtype=object)).tolist()
    cols = m.shape[1] if m.ndim == 2 else 0
    dense = cols > DENSE_COLUMNS
    if dense:  # a number in its own box: shown beside its cell where the cells are too small for it
        texts = [[f"<span>{t}</span>" for t in row] for row in texts]
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
    corner_text = escape(corner) if corner else Markup('<span class="visually-hidden">{}</span>').format(_("row"))
    attrs = f' data-ref="{escape(ref)}"'
    if inspectable:
        attrs += ' data-inspect="1"'
    if hidden is not None:
        attrs += ' data-quiz="1"'
    width = " cols-s" if cols <= 4 else (" cols-m" if cols <= 6 else " dense" if dense else "")  # presenter sizes
    note = f'<p class="dense-note">{escape(_(DENSE_NOTE))}</p>' if dense else ""
    html = (
        f'<table class="heatmap {kind}{width}"{attrs}><caption>{escape(caption)}</caption>'
        f'<thead><tr><th scope="col" class="corner">{corner_text}</th>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>{note}"
    )
    return Markup(html), top
