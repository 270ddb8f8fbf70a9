"""A heatmap as a file: the matrix the page's table shows, drawn as cells with its number in each (the page's
decimals, a true minus), its row and column labels, its caption with its shape, and its colour bar with the
same ticks as the page's legend. Colours are the page's buckets (app.view.heatmap.bucket_classes), written out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.i18n import gettext as _
from app.view.figure.document import (
    MARGIN,
    MASKED_INK,
    MASKED_STRIPES,
    MUTED,
    bucket_fill,
    bucket_ink,
    caption,
    caption_width,
    document,
    num,
    text,
)
from app.view.heatmap import MINUS_INFINITY, bucket_classes, constant_value, display_numbers, legend
from app.view.map_drawing import text_width

NUMBER_PX, LABEL_PX, TICK_PX = 12.0, 12.0, 11.0
CELL_H, MIN_CELL_W, CELL_PAD = 24.0, 44.0, 12.0
SWATCH_W, SWATCH_H = 22.0, 12.0


@dataclass(frozen=True)
class MatrixFigure:
    """What a heatmap figure shows: the page's panel, as numbers and words."""

    m: np.ndarray  # (rows, cols); −∞ where a mask hides a key
    rows: Sequence[str]
    cols: Sequence[str]
    kind: str  # "weights" (0 … 1, sequential) or "signed" (diverging, about 0)
    decimals: int
    title: str  # plain text, as the table's caption: "Attention weights A (head 1)"
    corner: str = ""  # "query ↓ key →"


def cell_texts(fig: MatrixFigure) -> tuple[list[list[str]], np.ndarray, float]:
    """Each cell's printed number, its colour bucket, and the scale's top: as app.view.heatmap.heatmap_table."""
    masked = np.isneginf(fig.m)
    finite = np.where(masked, 0.0, fig.m)  # (rows, cols)
    buckets, top = bucket_classes(finite, fig.kind, fig.decimals)
    texts = display_numbers(finite, fig.decimals)
    if masked.any():
        buckets = np.where(masked, "mk", buckets)
        texts = np.where(masked, MINUS_INFINITY, np.array(texts, dtype=object)).tolist()
    return texts, buckets, top


def heatmap_svg(fig: MatrixFigure) -> str:
    """The standalone SVG document of one heatmap."""
    texts, buckets, top = cell_texts(fig)
    n_rows, n_cols = fig.m.shape
    cell_w = max(MIN_CELL_W, max((text_width(t, NUMBER_PX) for row in texts for t in row), default=0) + CELL_PAD)
    corner_w = text_width(fig.corner, TICK_PX) + 8 if fig.corner else 0
    label_w = max(corner_w, max((text_width(r, LABEL_PX) for r in fig.rows), default=0) + 10)
    col_w = max((text_width(c, LABEL_PX) for c in fig.cols), default=0)
    upright = col_w > cell_w - 4  # too wide to stand level over its column: written upwards
    head_h = (col_w + 10) if upright else CELL_H
    line, y0 = caption(fig.title, f"{n_rows}×{n_cols}")
    body = [line]
    left = MARGIN + label_w
    grid_top = y0 + head_h
    if fig.corner:
        body.append(text(MARGIN, grid_top - 8, fig.corner, size=TICK_PX, fill=MUTED))
    for j, label in enumerate(fig.cols):
        x = left + (j + 0.5) * cell_w
        if upright:
            body.append(text(x + 4, grid_top - 6, label, size=LABEL_PX, fill=MUTED,
                             extra=f' transform="rotate(-90 {num(x + 4)} {num(grid_top - 6)})"'))
        else:
            body.append(text(x, grid_top - 8, label, size=LABEL_PX, fill=MUTED, anchor="middle"))
    defs = ""
    if (buckets == "mk").any():
        light, dark = MASKED_STRIPES
        defs = (f'<defs><pattern id="masked" width="6" height="6" patternUnits="userSpaceOnUse" '
                f'patternTransform="rotate(45)"><rect width="6" height="6" fill="{light}"/>'
                f'<rect width="2" height="6" fill="{dark}"/></pattern></defs>')
    cells = []
    for i, (label, row_text, row_buckets) in enumerate(zip(fig.rows, texts, buckets.tolist(), strict=True)):
        y = grid_top + i * CELL_H
        cells.append(text(left - 6, y + CELL_H / 2 + 4, label, size=LABEL_PX, fill=MUTED, anchor="end"))
        for j, (t, b) in enumerate(zip(row_text, row_buckets, strict=True)):
            x = left + j * cell_w
            fill, ink = ("url(#masked)", MASKED_INK) if b == "mk" else (bucket_fill(b), bucket_ink(b))
            cells.append(f'<rect x="{num(x)}" y="{num(y)}" width="{num(cell_w)}" height="{num(CELL_H)}" '
                         f'fill="{fill}" stroke="#ffffff" stroke-width="1"/>')
            cells.append(text(x + cell_w - 6, y + CELL_H / 2 + 4.2, t, size=NUMBER_PX, fill=ink, anchor="end"))
    grid_bottom = grid_top + n_rows * CELL_H
    scale, scale_w, scale_h = colour_bar(fig, top, MARGIN + label_w, grid_bottom + 12)
    width = max(left + n_cols * cell_w + MARGIN, MARGIN + label_w + scale_w + MARGIN,
                caption_width(fig.title, f"{n_rows}×{n_cols}"))
    height = grid_bottom + 12 + scale_h + MARGIN
    desc = _("{title}: a {shape} matrix, each cell coloured by its value and printed with it.").format(
        title=fig.title, shape=f"{n_rows}×{n_cols}")
    return document(width, height, [defs, *body, *cells, *scale], fig.title, desc)


def colour_bar(fig: MatrixFigure, top: float, x: float, y: float) -> tuple[list[str], float, float]:
    """The legend under the heatmap: its strip of colours and the values at both ends and in the middle, or
    the one colour and its note; its parts, width and height."""
    scale = legend(fig.kind, top, fig.decimals, constant_value(np.where(np.isneginf(fig.m), 0.0, fig.m),
                                                                fig.decimals))
    parts = []
    for k, bucket in enumerate(scale.swatches):
        parts.append(f'<rect x="{num(x + k * SWATCH_W)}" y="{num(y)}" width="{num(SWATCH_W)}" '
                     f'height="{num(SWATCH_H)}" fill="{bucket_fill(bucket)}"/>')
    strip_w = len(scale.swatches) * SWATCH_W
    if scale.note:
        parts.append(text(x + strip_w + 8, y + SWATCH_H - 1.5, scale.note, size=TICK_PX, fill=MUTED))
        return parts, strip_w + 8 + text_width(scale.note, TICK_PX), SWATCH_H
    for tick, at, anchor in zip(scale.ticks, (0.0, 0.5, 1.0), ("start", "middle", "end"), strict=True):
        parts.append(text(x + at * strip_w, y + SWATCH_H + 14, tick, size=TICK_PX, fill=MUTED, anchor=anchor))
    return parts, strip_w, SWATCH_H + 17
