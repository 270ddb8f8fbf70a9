"""A head's queries and keys in one picture (AttentionViz, Yeh et al., 2023): app.maths.attribution.qk_map's PCA of
the rows of Q and K together, drawn as one server-made ``<svg>``.

    a query   a filled circle, labelled with its token's position and text
    a key     an open square, labelled the same way
    a line    from each query to every key it gives at least LINE_WEIGHT of its attention, thicker for more

A label that would cover one already drawn (queries first, then keys) is left out; every point names its token in
its title, shown on hover.

Both axes are drawn at one scale, so that distances and angles in the picture are the projection's. No style
attributes (the page's CSP): the classes are in static/decoder.css.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from markupsafe import Markup, escape

from app.i18n import gettext as _
from app.i18n import percent
from app.maths.attribution import qk_map

SIZE = 360  # the plot's square, viewBox units
MARGIN = 36  # room for the labels at the edges
LINE_WEIGHT = 0.2  # a query's line to a key drawn from this weight up
LABEL_CHARS = 8
LABEL_CHAR_W = 6.1  # a label character at 10 px (monospace), viewBox units


def _short(token: str) -> str:
    return token if len(token) <= LABEL_CHARS else token[: LABEL_CHARS - 1] + "…"


def qk_picture(q: np.ndarray, k: np.ndarray, weights: np.ndarray, tokens: Sequence[str], title: str) -> dict:
    """The picture of queries q (T, d_k) and keys k (T, d_k) after RoPE, with the head's weights (T, T) as
    lines: its svg, and the share of the spread each of the two directions shows."""
    qs, ks, explained = qk_map(q, k)  # (T, 2), (T, 2), (2,)
    both = np.concatenate([qs, ks])  # (2T, 2)
    centre = (both.max(axis=0) + both.min(axis=0)) / 2
    half = max(float(np.abs(both - centre).max()), 1e-9)  # one scale for both axes
    scale = (SIZE / 2) / half

    def at(p: np.ndarray) -> tuple[float, float]:
        x = MARGIN + SIZE / 2 + (p[0] - centre[0]) * scale
        y = MARGIN + SIZE / 2 - (p[1] - centre[1]) * scale  # up is +
        return x, y

    full = SIZE + 2 * MARGIN
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {full} {full}" class="qk-svg" role="img" '
             f'aria-label="{escape(title)}"><title>{escape(title)}</title>',
             f'<rect class="qk-frame" x="{MARGIN}" y="{MARGIN}" width="{SIZE}" height="{SIZE}"/>']
    w = np.asarray(weights, dtype=np.float64)
    for i in range(len(qs)):  # lines under the points
        x1, y1 = at(qs[i])
        for j in np.flatnonzero(w[i] >= LINE_WEIGHT):
            x2, y2 = at(ks[j])
            parts.append(f'<line class="qk-line" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
                         f'stroke-width="{0.6 + 3 * w[i, j]:.2f}" data-w="{w[i, j]:.3f}"/>')
    placed: list[tuple[float, float, float, float]] = []  # the labels drawn so far: (x0, y0, x1, y1)
    for kind, points in (("q", qs), ("k", ks)):
        for i, p in enumerate(points):
            x, y = at(p)
            name = (_("query {i} {token}") if kind == "q" else _("key {i} {token}")).format(i=i + 1, token=tokens[i])
            mark = (f'<circle class="qk-q" cx="{x:.1f}" cy="{y:.1f}" r="4.5"/>' if kind == "q" else
                    f'<rect class="qk-k" x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8"/>')
            text = f"{kind}{i + 1} {_short(tokens[i])}"
            width = LABEL_CHAR_W * len(text)
            start = x < MARGIN + SIZE * 0.7
            x0 = x + 6 if start else x - 6 - width
            box = (x0, y - 14, x0 + width, y - 3)
            label = ""
            if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in placed):
                placed.append(box)  # a label that would cover another is left to the point's title (hover)
                label = (f'<text class="qk-label qk-{kind}-label" x="{x + 6 if start else x - 6:.1f}" '
                         f'y="{y - 5:.1f}" text-anchor="{"start" if start else "end"}">{escape(text)}</text>')
            parts.append(f'<g class="qk-point qk-{kind}-point" tabindex="0"><title>{escape(name)}</title>{mark}'
                         f'{label}</g>')
    parts.append("</svg>")
    return {"svg": Markup("".join(parts)), "first": percent(float(explained[0])),
            "second": percent(float(explained[1])), "line_weight": f"{LINE_WEIGHT:.1f}"}
