"""Server-rendered SVG charts of training: a loss curve, and the plot helpers app/view/charts/why_scale.py draws with.

The same rules as app/view/charts/lab.py, whose helpers draw the parts: one ``<svg role="img">`` with a <title> and
a <desc> that state the numbers; classes styled in static/learn.css, no style attributes, no <style>, no
script (the page's strict CSP); every text escaped. Lines differ by dash pattern and carry a direct
label, so colour is never the only way to tell them apart.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from markupsafe import Markup, escape

from app.i18n import N_, count, gettext, local_decimals, ngettext
from app.i18n import gettext as _
from app.view.charts.lab import SUPERSCRIPT, _line, _num, _open, _pow10, _text, nice_step

NOT_FINITE = N_("not a finite number")
MAX_POINTS = 400  # a polyline of more points adds bytes, not detail, at a few hundred pixels wide
LOG_RATIO = 100  # a y axis whose values span more than this factor (all positive) is drawn on a log scale
_CHART_ID = re.compile(r"[A-Za-z][\w-]*")  # "<id>-title <id>-desc" in aria-labelledby: no spaces, no quotes


def short_number(v: float) -> str:
    """_short_number's text as the reader's language writes it (0,030 in French)."""
    return local_decimals(_short_number(v)) if math.isfinite(v) else gettext(NOT_FINITE)


def _short_number(v: float) -> str:
    """A number as the charts and tables print it: 1.041, 0.030, 0.00049, 5.7 × 10⁻⁵, with a true minus.

    Three decimals from 0.01 to 10, two significant figures below 0.01, a power of ten below 10⁻⁴ and from 10⁴.
    """
    if not math.isfinite(v):
        return NOT_FINITE
    if v == 0:
        return "0"
    sign, a = ("\u2212" if v < 0 else ""), abs(v)
    if a < 1e-4 or a >= 1e4:
        exp = math.floor(math.log10(a))
        mantissa = f"{a / 10**exp:.1f}"
        if mantissa == "10.0":  # 9.96e-5 rounds up to 1.0 × 10⁻⁴
            mantissa, exp = "1.0", exp + 1
        return f"{sign}{mantissa} × 10{str(exp).translate(SUPERSCRIPT)}"
    if a >= 100:
        return f"{sign}{a:,.0f}"
    if a >= 10:
        return f"{sign}{a:.1f}"
    if a >= 0.01:
        return f"{sign}{a:.3f}"
    return f"{sign}{a:.{1 - math.floor(math.log10(a))}f}"


def downsample_indices(values: Sequence[float], max_points: int = MAX_POINTS) -> list[int]:
    """Indices of at most ``max_points`` of the finite values, in order: the first, the last, and the
    smallest and largest of each of (max_points − 2) / 2 equal runs between them — so the minimum and
    every spike stay on the line. Fewer finite values than ``max_points``: all of them."""
    v = np.asarray(values, dtype=np.float64)  # (n,)
    finite = np.flatnonzero(np.isfinite(v))  # (m,)
    if len(finite) <= max_points:
        return [int(i) for i in finite]
    buckets = max(1, (max_points - 2) // 2)
    keep = {int(finite[0]), int(finite[-1])}
    for run in np.array_split(finite[1:-1], buckets):
        if len(run):
            keep.update((int(run[np.argmin(v[run])]), int(run[np.argmax(v[run])])))
    return sorted(keep)


# --- axes ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Frame:
    """The plot area of one chart, in the SVG's coordinates."""

    x0: float  # the chart's own left edge (its y-axis label starts here)
    left: float
    right: float
    top: float
    bottom: float


@dataclass(frozen=True)
class _YAxis:
    log: bool
    lo: float  # in the data's units, or in decades (log10) on a log axis
    hi: float
    ticks: tuple[tuple[float, str], ...]  # (value, label)

    def y(self, frame: _Frame, v: float) -> float:
        t = math.log10(v) if self.log else v
        return frame.bottom - (t - self.lo) / (self.hi - self.lo) * (frame.bottom - frame.top)

    def shows(self, v: float) -> bool:
        return math.isfinite(v) and (v > 0 or not self.log)


def wants_log_axis(values: Sequence[float]) -> bool:
    """A log y axis when the finite values are all positive and the largest is over 100× the smallest."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    return bool(len(v)) and bool(np.all(v > 0)) and float(v.max()) > LOG_RATIO * float(v.min())


def tick_label(v: float, step: float) -> str:
    """An axis tick's number with as many decimals as its step needs (0.2, not 0.200)."""
    if v == 0:
        return "0"
    if abs(v) >= 1e4 or step < 1e-4:
        return short_number(v)
    return local_decimals(f"{v:,.{max(0, -math.floor(math.log10(step)))}f}")


def _linear_axis(lo: float, hi: float) -> _YAxis:
    """From 0 (or the lowest value, if negative) to the highest, in nice steps: a loss is read against 0."""
    lo, hi = min(0.0, lo), max(0.0, hi)
    if hi == lo:  # every value 0
        hi = 1.0
    step = nice_step(hi - lo)
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    ticks = tuple((i * step, tick_label(i * step, step)) for i in range(first, last + 1))
    return _YAxis(log=False, lo=first * step, hi=last * step, ticks=ticks)


def _log_axis(lo: float, hi: float) -> _YAxis:
    """Whole decades around the values; past seven, a label on every second (third, …) one."""
    d0, d1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    d1 = max(d1, d0 + 1)
    every = math.ceil((d1 - d0 + 1) / 7)
    ticks = tuple((10.0**d, _pow10(d)) for d in range(d0, d1 + 1) if (d - d0) % every == 0)
    return _YAxis(log=True, lo=d0, hi=d1, ticks=ticks)


def _y_axis(values: Sequence[float], log: bool) -> _YAxis:
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v) & (v > 0)] if log else v[np.isfinite(v)]
    if not len(v):
        return _linear_axis(0.0, 1.0)
    return _log_axis(float(v.min()), float(v.max())) if log else _linear_axis(float(v.min()), float(v.max()))


def _x_ticks(last_step: int) -> list[int]:
    step = max(1, int(nice_step(last_step))) if last_step > 0 else 1
    return list(range(0, last_step + 1, step))


def _place_labels(ys: list[float], gap: float, lo: float, hi: float) -> list[float]:
    """Label baselines near ``ys``, at least ``gap`` apart, order kept, within [lo, hi] where they fit."""
    order = sorted(range(len(ys)), key=lambda i: ys[i])
    out = [min(max(y, lo), hi) for y in ys]
    for prev, cur in zip(order, order[1:], strict=False):
        out[cur] = max(out[cur], out[prev] + gap)
    if out and out[order[-1]] > hi:  # pushed past the bottom: push back up from it
        out[order[-1]] = hi
        for nxt, cur in zip(order[::-1], order[-2::-1], strict=False):
            out[cur] = min(out[cur], out[nxt] - gap)
    return out


@dataclass(frozen=True)
class _Series:
    cls: str  # its class: colour and dash pattern in static/learn.css
    values: tuple[float, ...]
    label: str | None = None  # a name written at the line's end, above its last value


def _draw_plot(
    parts: list[str], frame: _Frame, series: Sequence[_Series], axis: _YAxis, y_label: str, line: float = 14
) -> None:
    """Grid, axes with their ticks and labels, each series' polyline, a dot and the value at its end.

    ``line``: from a series' name to its value below it (larger text wants more)."""
    last_step = max(len(s.values) for s in series) - 1
    x_span = max(last_step, 1)

    def x_of(step: int) -> float:
        return frame.left + step / x_span * (frame.right - frame.left)

    for v, label in axis.ticks:
        y = axis.y(frame, v)
        parts.append(_line(frame.left, y, frame.right, y, "grid zero" if v == 0 else "grid"))
        parts.append(_text(frame.left - 5, y + 4, label, "tick", "end"))
    for step in _x_ticks(last_step):
        parts.append(_line(x_of(step), frame.bottom, x_of(step), frame.bottom + 4, "axis"))
        parts.append(_text(x_of(step), frame.bottom + 16, count(step), "tick", "middle"))
    parts.append(_line(frame.left, frame.bottom, frame.right, frame.bottom, "axis"))
    parts.append(_line(frame.left, frame.top, frame.left, frame.bottom, "axis"))
    parts.append(_text((frame.left + frame.right) / 2, frame.bottom + 31, _("step"), "axis-label", "middle"))
    y_words = _("{label} (log scale)").format(label=_(y_label)) if axis.log else _(y_label)
    parts.append(_text(frame.x0 + 4, frame.top - 9, y_words, "axis-label"))

    ends: list[tuple[_Series, float, float, float]] = []  # (series, x, y, value) of each line's last point
    for s in series:
        shown = [i for i in downsample_indices(s.values) if axis.shows(s.values[i])]
        if not shown:
            continue
        points = " ".join(f"{_num(x_of(i))},{_num(axis.y(frame, s.values[i]))}" for i in shown)
        if len(shown) > 1:
            parts.append(f'<polyline points="{points}" fill="none" class="series {escape(s.cls)}"/>')
        end = shown[-1]
        ends.append((s, x_of(end), axis.y(frame, s.values[end]), s.values[end]))
    named = any(s.label for s, *_ in ends)
    gap = 2 * line - 1 if named else 13
    label_ys = _place_labels([y + (-1 if named else 4) for _, _, y, _ in ends], gap, frame.top + 4,
                             frame.bottom - (line - 4 if named else -4))
    for (s, x, y, value), ly in zip(ends, label_ys, strict=True):
        parts.append(f'<circle cx="{_num(x)}" cy="{_num(y)}" r="3.5" class="end-dot {escape(s.cls)}"/>')
        if s.label:
            parts.append(_text(frame.right + 8, ly, s.label, f"series-label {s.cls}"))
            parts.append(_text(frame.right + 8, ly + line, short_number(value), f"end-label {s.cls}"))
        else:
            parts.append(_text(x + 7, ly, short_number(value), f"end-label {s.cls}"))


def _check_id(chart_id: str) -> None:
    if not _CHART_ID.fullmatch(chart_id):
        raise ValueError("chart_id must be letters, digits, - and _, starting with a letter: it names two ids")


# --- one loss curve -----------------------------------------------------------------------------------

def _loss_desc(losses: Sequence[float], log: bool) -> str:
    v = np.asarray(losses, dtype=np.float64)
    finite = np.isfinite(v)
    steps = len(v) - 1
    at_min = int(np.flatnonzero(finite)[np.argmin(v[finite])])
    desc = ngettext(
        "The loss at each step, 0 to {last} ({steps} step): first {first_loss}, last {last_loss}, "
        "minimum {least} at step {at}.",
        "The loss at each step, 0 to {last} ({steps} steps): first {first_loss}, last {last_loss}, "
        "minimum {least} at step {at}.", steps).format(
        last=count(steps), steps=count(steps), first_loss=short_number(v[0]), last_loss=short_number(v[-1]),
        least=short_number(v[at_min]), at=count(at_min))
    if not finite.all():
        n = int((~finite).sum())
        desc += " " + ngettext("{n} value is not finite and not drawn.", "{n} values are not finite and not drawn.",
                               n).format(n=count(n))
    if log:
        desc += " " + _("The loss axis is a log scale.")
    return desc


def loss_curve_svg(
    losses: Sequence[float], *, chart_id: str, title: str = N_("Loss during training"), width: int = 360,
    height: int = 180,
) -> Markup:
    """A line chart of the loss against the step (0 … n), the last value written at the line's end.

    A log y axis when every value is positive and max/min > 100; over 400 values, the line keeps the
    first, the last and each stretch's smallest and largest (:func:`downsample_indices`).
    """
    _check_id(chart_id)
    v = np.asarray(losses, dtype=np.float64)  # (n,)
    if v.ndim != 1 or not np.isfinite(v).any():
        raise ValueError("losses must be a sequence holding at least one finite number")
    log = wants_log_axis(v)
    frame = _Frame(x0=0, left=50, right=width - 72, top=22, bottom=height - 36)  # room for 5.7 × 10⁻⁵
    parts = [_open(chart_id, width, height, "learn-chart loss-chart", _(title), _loss_desc(v, log))]
    _draw_plot(parts, frame, [_Series("loss", tuple(float(x) for x in v))], _y_axis(v, log), N_("loss"))
    parts.append("</svg>")
    return Markup("".join(parts))
