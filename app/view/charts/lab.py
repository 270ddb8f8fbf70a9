"""Server-rendered SVG charts for the scaling lab and the cost panel.

Each chart is one ``<svg role="img">`` with a <title> and a <desc> that state its numbers, sized by
its viewBox. Colours come from classes styled in static/panels.css: no style attributes, no <style>,
no script, so the page's strict CSP holds. Every text is escaped here. Lines also differ by dash
pattern and carry a direct label, so colour is never the only way to tell them apart; the panels
print the same numbers in a table next to each chart.
"""

from __future__ import annotations

import math
import re

from markupsafe import Markup, escape

from app.i18n import N_, count, decimal, local_decimals
from app.i18n import gettext as _
from app.maths.cost import CostGrowth
from app.maths.lab import ScalingLab

SVG_NS = "http://www.w3.org/2000/svg"
SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def _num(v: float) -> str:
    """A coordinate: two decimals are plenty at these sizes."""
    return f"{v:.2f}".rstrip("0").rstrip(".")


_SUBSCRIPT = re.compile(r"\bd_([a-z]+)")
_HYPHEN_MINUS = re.compile(r"(?<![\w.])-(?=\d)")


def _svg_maths(text: str) -> Markup:
    """Escaped label text with a true minus sign, and d_k set as d with a lowered k (SVG has no MathML)."""
    text = local_decimals(_HYPHEN_MINUS.sub("\u2212", text))
    lowered = r'<tspan class="var">d</tspan><tspan class="sub">\1</tspan>'
    return Markup(_SUBSCRIPT.sub(lowered, str(escape(text))))


def _text(x: float, y: float, text: str, cls: str, anchor: str = "start") -> str:
    return (
        f'<text x="{_num(x)}" y="{_num(y)}" class="{escape(cls)}" text-anchor="{anchor}">{_svg_maths(text)}</text>'
    )


def _line(x1: float, y1: float, x2: float, y2: float, cls: str) -> str:
    return f'<line x1="{_num(x1)}" y1="{_num(y1)}" x2="{_num(x2)}" y2="{_num(y2)}" class="{escape(cls)}"/>'


def _open(chart_id: str, width: int, height: int, cls: str, title: str, desc: str) -> str:
    cid = escape(chart_id)
    return (
        f'<svg xmlns="{SVG_NS}" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'class="chart {escape(cls)}" aria-labelledby="{cid}-title {cid}-desc">'
        f'<title id="{cid}-title">{escape(title)}</title><desc id="{cid}-desc">{escape(desc)}</desc>'
    )


def nice_step(span: float, target: int = 4) -> float:
    """A 1, 2 or 5 × 10ⁿ step that cuts ``span`` into about ``target`` pieces."""
    raw = span / target
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def score_spread_svg(lab: ScalingLab, *, current_d_k: int, title: str = N_("Spread of the scores per d_k")) -> Markup:
    """For each d_k, two strips: q·k and q·k/√d_k, a bar over mean ± 1σ and a whisker over ± 2σ."""
    title = _(title)
    width, left, right, top, row_h, group_gap = 640, 118, 560, 40, 16, 12
    group_h = 2 * row_h + group_gap
    height = top + group_h * len(lab.rows) + 34
    reach = max(max(abs(r.unscaled.mean) + 2 * r.unscaled.std, abs(r.scaled.mean) + 2 * r.scaled.std) for r in lab.rows)
    step = nice_step(reach)
    limit = math.ceil(reach / step) * step

    def x_of(v: float) -> float:
        return left + (v + limit) / (2 * limit) * (right - left)

    row_words = _("d_k = {d_k}: q·k has σ = {unscaled} (√d_k = {root}), q·k/√d_k has σ = {scaled}")
    desc = "; ".join(
        row_words.format(d_k=r.d_k, unscaled=decimal(r.unscaled.std, 2), root=decimal(math.sqrt(r.d_k), 2),
                         scaled=decimal(r.scaled.std, 2))
        for r in lab.rows
    )
    parts = [_open("lab-spread", width, height, "spread-chart", title,
                   desc + ". " + _("The table below gives every number."))]
    # Legend: colour, and also the words on every strip.
    parts.append(f'<rect x="{left}" y="8" width="18" height="10" class="band1 unscaled"/>')
    parts.append(_text(left + 24, 17, _("q·k (unscaled)"), "legend-text"))
    parts.append(f'<rect x="{left + 160}" y="8" width="18" height="10" class="band1 scaled"/>')
    parts.append(_text(left + 184, 17, _("q·k / √d_k (scaled)"), "legend-text"))
    parts.append(_text(right, 17, _("bar ±1σ, whisker ±2σ"), "legend-text", "end"))
    bottom = top + group_h * len(lab.rows) - group_gap
    ticks = [i * step for i in range(-round(limit / step), round(limit / step) + 1)]
    for v in ticks:
        parts.append(_line(x_of(v), top - 6, x_of(v), bottom + 4, "grid zero" if v == 0 else "grid"))
        parts.append(_text(x_of(v), bottom + 18, f"{v:g}", "tick", "middle"))
    parts.append(_text((left + right) / 2, bottom + 32, _("score value"), "axis-label", "middle"))
    for i, r in enumerate(lab.rows):
        y0 = top + i * group_h
        current = r.d_k == current_d_k
        parts.append('<g class="current">' if current else "<g>")
        if current:
            parts.append(
                f'<rect x="2" y="{_num(y0 - 3)}" width="{width - 4}" height="{2 * row_h + 6}" class="current-bg"/>'
            )
        parts.append(_text(8, y0 + row_h - 2, f"d_k = {r.d_k}", "dk-label"))
        if current:
            parts.append(_text(8, y0 + 2 * row_h - 2, _("(current)"), "dk-current"))
        for j, (kind, stats, label) in enumerate(
            (("unscaled", r.unscaled, "q·k"), ("scaled", r.scaled, "÷√d_k"))
        ):
            yc = y0 + j * row_h + row_h / 2
            parts.append(_text(left - 6, yc + 4, label, "strip-label", "end"))
            lo2, hi2 = x_of(stats.mean - 2 * stats.std), x_of(stats.mean + 2 * stats.std)
            lo1, hi1 = x_of(stats.mean - stats.std), x_of(stats.mean + stats.std)
            parts.append(_line(lo2, yc, hi2, yc, f"band2 {kind}"))
            parts.append(_line(lo2, yc - 3, lo2, yc + 3, f"band2 {kind}"))
            parts.append(_line(hi2, yc - 3, hi2, yc + 3, f"band2 {kind}"))
            parts.append(
                f'<rect x="{_num(lo1)}" y="{_num(yc - 5)}" width="{_num(hi1 - lo1)}" height="10" '
                f'class="band1 {kind}"/>'
            )
            parts.append(_line(x_of(stats.mean), yc - 6, x_of(stats.mean), yc + 6, "mean-tick"))
            parts.append(_text(right + 8, yc + 4, f"σ = {stats.std:.2f}", "strip-value"))
        parts.append("</g>")
    parts.append("</svg>")
    return Markup("".join(parts))


def _decades(lo: float, hi: float) -> list[int]:
    return list(range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1))


def _pow10(n: int) -> str:
    return "1" if n == 0 else "10" if n == 1 else "10" + str(n).translate(SUPERSCRIPT)


def _spread_labels(ys: list[float], gap: float) -> list[float]:
    """Push end-of-line labels apart so that none overlaps the one above it (order kept)."""
    order = sorted(range(len(ys)), key=lambda i: ys[i])
    out = list(ys)
    for prev, cur in zip(order, order[1:], strict=False):
        out[cur] = max(out[cur], out[prev] + gap)
    return out


def cost_growth_svg(
    growth: CostGrowth, *, current_t: int, current_linear: bool = False, title: str = N_("Multiply-adds against T")
) -> Markup:
    """Log–log lines of MACs vs T (S = T): the T² part, the T part, their total and linear attention.

    A marker sits at the current T (on the total, or on linear attention when that is the current
    mechanism) and another where the T² part reaches the T part.
    """
    title = _(title)
    width, height, left, right, top, bottom = 640, 340, 64, 496, 24, 290
    ts = growth.ts
    series = (  # drawn in this order: linear attention under the T part it often runs close to
        ("linear-attention", _("linear attention"), growth.linear_attention),
        ("quadratic", _("T² part"), growth.quadratic),
        ("linear", _("T part"), growth.linear),
        ("total", _("total (softmax)"), growth.total),
    )
    y_lo = min(min(v for v in values if v > 0) for _, _, values in series)
    y_hi = max(max(values) for _, _, values in series)
    y_decades = _decades(y_lo, y_hi)
    x_decades = _decades(ts[0], ts[-1])
    lx0, lx1 = math.log10(ts[0]), max(math.log10(ts[-1]), math.log10(ts[0]) + 1)
    ly0, ly1 = y_decades[0], max(y_decades[-1], y_decades[0] + 1)

    def x_of(t: float) -> float:
        return left + (math.log10(t) - lx0) / (lx1 - lx0) * (right - left)

    def y_of(v: float) -> float:
        return bottom - (math.log10(v) - ly0) / (ly1 - ly0) * (bottom - top)

    at = ts.index(current_t) if current_t in ts else None
    desc = [_("Log–log chart of multiply-adds against T for self-attention (S = T), T from {first} to {last}.").format(
        first=ts[0], last=ts[-1])]
    if at is not None:
        desc.append(
            _("At the current T = {t}: T² part {quadratic}, T part {linear}, total {total}; linear attention "
              "{linear_attention}.").format(t=current_t, quadratic=count(growth.quadratic[at]),
                                            linear=count(growth.linear[at]), total=count(growth.total[at]),
                                            linear_attention=count(growth.linear_attention[at]))
        )
    if growth.crossover is not None:
        desc.append(_("The T² part reaches the T part at T = {t}.").format(t=count(growth.crossover)))
    parts = [_open("cost-growth", width, height, "growth-chart", title, " ".join(desc))]
    for d in y_decades:
        if ly0 <= d <= ly1:
            parts.append(_line(left, y_of(10**d), right, y_of(10**d), "grid"))
            parts.append(_text(left - 6, y_of(10**d) + 4, _pow10(d), "tick", "end"))
    for d in x_decades:
        if lx0 <= d <= lx1 + 1e-9:
            parts.append(_line(x_of(10**d), top, x_of(10**d), bottom, "grid"))
            parts.append(_text(x_of(10**d), bottom + 16, count(10**d), "tick", "middle"))
    parts.append(_line(left, bottom, right, bottom, "axis"))
    parts.append(_line(left, top, left, bottom, "axis"))
    parts.append(_text((left + right) / 2, bottom + 34, _("T (tokens; S = T), log scale"), "axis-label", "middle"))
    parts.append(_text(4, top - 10, _("MACs (log scale)"), "axis-label"))
    if growth.crossover is not None and ts[0] <= growth.crossover <= ts[-1]:
        xc = x_of(growth.crossover)
        parts.append(_line(xc, top, xc, bottom, "marker-crossover"))
        label = _("crossover T = {t}").format(t=count(growth.crossover))
        # On the side away from the current-T line, where there is room for it.
        room_left, room_right = xc - left > 120, right - xc > 120
        if room_right and (current_t < growth.crossover or not room_left):
            parts.append(_text(xc + 4, top + 12, label, "marker-label"))
        else:
            parts.append(_text(xc - 4, top + 12, label, "marker-label", "end"))
    for cls, _label, values in series:
        points = " ".join(f"{_num(x_of(t))},{_num(y_of(v))}" for t, v in zip(ts, values, strict=True) if v > 0)
        parts.append(f'<polyline points="{points}" fill="none" class="series {cls}"/>')
    label_ys = _spread_labels([y_of(values[-1]) + 4 for _, _, values in series], 13)
    for (cls, label, values), ly in zip(series, label_ys, strict=True):
        parts.append(_line(x_of(ts[-1]) + 2, y_of(values[-1]), right + 10, ly - 4, f"leader {cls}"))
        parts.append(_text(right + 12, ly, label, f"series-label {cls}"))
    if at is not None:
        xt = x_of(current_t)
        yt = y_of((growth.linear_attention if current_linear else growth.total)[at])
        parts.append(_line(xt, top, xt, bottom, "marker-current"))
        parts.append(f'<circle cx="{_num(xt)}" cy="{_num(yt)}" r="5" class="marker-dot"/>')
        label = _("current T = {t}").format(t=current_t)
        # Away from the crossover line, where there is room for it.
        below_crossover = growth.crossover is not None and current_t < growth.crossover
        if (below_crossover and xt - left > 110) or right - xt < 110:
            parts.append(_text(xt - 6, bottom - 8, label, "marker-label current", "end"))
        else:
            parts.append(_text(xt + 6, bottom - 8, label, "marker-label current"))
    parts.append("</svg>")
    return Markup("".join(parts))

