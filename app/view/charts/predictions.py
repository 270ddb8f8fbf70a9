"""The class's predictions of one cell as a histogram, against the true value: a server-drawn SVG.

As the other charts (app.view.charts.lab): one ``<svg role="img">`` with a <title> and a <desc> stating its
numbers, colours from classes (static/class.css), no style attribute and no script, every text
escaped. The true value is a line with its own label, so colour is never the only cue.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from markupsafe import Markup, escape

from app.i18n import gettext as _
from app.i18n import ngettext
from app.view.charts.lab import nice_step
from app.view.charts.learn import short_number, tick_label

WIDTH, HEIGHT = 360, 170
LEFT, RIGHT, TOP, BOTTOM = 34, 12, 26, 34
MAX_BINS = 12


@dataclass(frozen=True)
class Bins:
    edges: list[float]  # len(counts) + 1, evenly spaced on a nice step
    counts: list[int]


def bins(values: Sequence[float], truth: float) -> Bins:
    """Nice, even bins that hold every prediction and the true value: at most MAX_BINS of them."""
    lo, hi = min(min(values, default=truth), truth), max(max(values, default=truth), truth)
    span = hi - lo
    if span <= 0:
        span = max(abs(truth), 1.0) * 0.1
        lo, hi = lo - span / 2, hi + span / 2
    step = nice_step(span, MAX_BINS - 2)
    start = math.floor(lo / step) * step
    n = max(1, min(MAX_BINS, math.ceil((hi - start) / step + 1e-9)))
    if start + n * step <= hi:  # the top value on the last edge still falls in the last bin
        n += 1
    edges = [start + i * step for i in range(n + 1)]
    counts, _edges = np.histogram(np.clip(np.asarray(values, dtype=float), edges[0], edges[-1]), bins=edges)
    return Bins(edges, [int(c) for c in counts])


def predictions_svg(values: Sequence[float], truth: float, *, label: str, chart_id: str) -> Markup:
    """How many predicted each range of values for the cell ``label``, and where its value is."""
    b = bins(values, truth)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    top_count = max(b.counts + [1])
    x0, x1 = b.edges[0], b.edges[-1]

    def x(v: float) -> float:
        return LEFT + (v - x0) / (x1 - x0) * plot_w

    n = len(values)
    title = _("Class predictions for {label}").format(label=label)
    between = _("{n} between {low} and {high}")
    ranges = "; ".join(between.format(n=c, low=short_number(lo), high=short_number(hi))
                       for lo, hi, c in zip(b.edges, b.edges[1:], b.counts, strict=False) if c)
    desc = (ngettext("{n} prediction: {ranges}.", "{n} predictions: {ranges}.", n).format(n=n, ranges=ranges)
            if ranges else ngettext("{n} prediction.", "{n} predictions.", n).format(n=n))
    close = sum(1 for v in values if abs(v - truth) <= (b.edges[1] - b.edges[0]) / 2)
    desc += " " + _("The value is {value}; {close} within half a bin of it.").format(value=short_number(truth),
                                                                                      close=close)
    cid = escape(chart_id)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="class-histogram" id="{cid}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-labelledby="{cid}-t {cid}-d">',
             f'<title id="{cid}-t">{escape(title)}</title><desc id="{cid}-d">{escape(desc)}</desc>']
    base = TOP + plot_h
    parts.append(f'<line class="axis" x1="{LEFT}" y1="{base}" x2="{LEFT + plot_w}" y2="{base}"/>')
    for lo, hi, c in zip(b.edges, b.edges[1:], b.counts, strict=False):
        if not c:
            continue
        h = c / top_count * plot_h
        width = max(x(hi) - x(lo) - 2, 1)
        parts.append(f'<rect class="bar" x="{x(lo) + 1:.2f}" y="{base - h:.2f}" width="{width:.2f}" height="{h:.2f}"/>')
        parts.append(f'<text class="count" x="{(x(lo) + x(hi)) / 2:.2f}" y="{base - h - 3:.2f}" '
                     f'text-anchor="middle">{c}</text>')
    step = b.edges[1] - b.edges[0]
    ticks = b.edges if len(b.edges) <= 7 else b.edges[::2]
    for v in ticks:
        parts.append(f'<line class="tick" x1="{x(v):.2f}" y1="{base}" x2="{x(v):.2f}" y2="{base + 4}"/>')
        parts.append(f'<text class="tick-label" x="{x(v):.2f}" y="{base + 16}" text-anchor="middle">'
                     f'{escape(tick_label(round(v / step) * step, step).replace("-", "−"))}</text>')
    tx = x(truth)
    anchor = "end" if tx > LEFT + plot_w * 0.7 else "start"
    dx = -4 if anchor == "end" else 4
    parts.append(f'<line class="truth" x1="{tx:.2f}" y1="{TOP - 8}" x2="{tx:.2f}" y2="{base}"/>')
    value = _("value")
    axis = ngettext("predicted value · {n} answer", "predicted value · {n} answers", n).format(n=n)
    parts.append(f'<text class="truth-label" x="{tx + dx:.2f}" y="{TOP - 12}" text-anchor="{anchor}">'
                 f'{escape(value)} {escape(short_number(truth).replace("-", "−"))}</text>')
    parts.append(f'<text class="axis-label" x="{LEFT + plot_w / 2}" y="{HEIGHT - 2}" text-anchor="middle">'
                 f'{escape(axis)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
