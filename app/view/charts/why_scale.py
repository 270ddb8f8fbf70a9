"""Why ÷√d_k (seeds 003, 004), measured: app.lesson.goals.why_scale's two runs as two charts, a table of their
key numbers and the sentences that read them, every number taken from the run.

The charts follow app/view/charts/learn.py (whose plot helpers draw them): one ``<svg role="img">`` each, with
a <title> and a <desc> stating the numbers. Each is 320 units wide and meant to be drawn about as wide (one per
row on a phone, two side by side from a tablet up), so that its 13-unit text is read at 12 px or more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from types import MappingProxyType

import numpy as np
from markupsafe import Markup

from app.i18n import N_, count, decimal, language, local_number
from app.i18n import gettext as _
from app.lesson.goals import SATURATED, WHY_SCALE_STEPS, why_scale
from app.lesson.seed_numbers import WHY_SCALE_SEED
from app.view.charts.lab import _open
from app.view.charts.learn import _check_id, _draw_plot, _Frame, _Series, _y_axis, short_number

RUN_LABELS = {"scaled": "÷√d_k", "unscaled": N_("no ÷√d_k")}  # app.view.charts.lab._svg_maths lowers the k
RUNS = ("scaled", "unscaled")
CHART_WIDTH, CHART_HEIGHT = 320, 214
# (key in the run, the y axis' label, log axis): the loss from 0, ‖∂L/∂Scores‖ over its decades.
CHARTS = (("losses", N_("loss L"), False), ("grad_scores_norm", "‖∂L/∂Scores‖", True))  # "(log scale)" is added


def _words(run: str) -> str:
    return _("with ÷√d_k") if run == "scaled" else _("without ÷√d_k")


def _chart_desc(result: Mapping, key: str) -> str:
    span = _("{run} from {first} to {last}")
    runs = "; ".join(
        span.format(run=_words(run), first=short_number(result[run][key][0]), last=short_number(result[run][key][-1]))
        for run in RUNS
    )
    if key == "losses":
        words = _("The loss at each of {steps} steps of SGD (learning rate {rate}), d_k = {d_k}, the same start for "
                  "both runs: {runs}. The solid line is the run with ÷√d_k, the dashed line the run without.")
    else:
        words = _("‖∂L/∂Scores‖, Scores = Q·Kᵀ before any ÷√d_k, on a log scale, at each of {steps} steps of SGD "
                  "(learning rate {rate}), d_k = {d_k}, the same start for both runs: {runs}. The solid line is "
                  "the run with ÷√d_k, the dashed line the run without.")
    return words.format(steps=count(result["steps"]), rate=local_number(f"{result['learning_rate']:g}"),
                        d_k=result["d_k"], runs=runs)


def why_scale_chart(result: Mapping, key: str, *, chart_id: str) -> Markup:
    """One of CHARTS' quantities for both runs against the step: ÷√d_k solid, no ÷√d_k dashed, each line
    named at its end with its last value."""
    _check_id(chart_id)
    y_label, log = next((label, log) for k, label, log in CHARTS if k == key)
    title = (_("Why ÷√d_k: the loss over {steps} SGD steps") if key == "losses"
             else _("Why ÷√d_k: ‖∂L/∂Scores‖ over {steps} SGD steps")).format(steps=count(result['steps']))
    parts = [_open(chart_id, CHART_WIDTH, CHART_HEIGHT, "learn-chart why-scale-chart", title, _chart_desc(result, key))]
    frame = _Frame(x0=0, left=44, right=CHART_WIDTH - 84, top=26, bottom=CHART_HEIGHT - 40)
    series = [_Series(run, tuple(result[run][key]), _(RUN_LABELS[run])) for run in RUNS]
    _draw_plot(parts, frame, series, _y_axis([v for s in series for v in s.values], log), y_label, line=18)
    parts.append("</svg>")
    return Markup("".join(parts))


# --- the words ------------------------------------------------------------------------------------------


def _times(a: float, b: float) -> str:
    """a/b as the text says it: 11×, 2.5×."""
    r = a / b
    return f"{count(round(r))}×" if r >= 10 else f"{decimal(r, 1)}×"


def _saturation(unscaled: Sequence[float]) -> str:
    rows = len(unscaled)
    saturated = sum(w >= SATURATED for w in unscaled)
    if saturated == rows:
        return _("every row of $A$ starts nearly one-hot: its largest weight is {weight} or more").format(
            weight=decimal(min(unscaled), 3))
    if saturated:
        return _("{saturated} of the {rows} rows of $A$ start nearly one-hot (largest weight {weight} or more)").format(
            saturated=saturated, rows=rows, weight=SATURATED)
    return _("no row of $A$ starts nearly one-hot: the largest weight is {weight}").format(
        weight=decimal(max(unscaled), 3))


def _gradient(scaled: Sequence[float], unscaled: Sequence[float]) -> str:
    s0, u0 = scaled[0], unscaled[0]
    if u0 > 0 and s0 >= 1.1 * u0:
        start = _("starts {times} smaller than with $\\div \\sqrt{{d_k}}$").format(times=_times(s0, u0))
    elif s0 > 0 and u0 >= 1.1 * s0:
        start = _("starts {times} larger than with $\\div \\sqrt{{d_k}}$").format(times=_times(u0, s0))
    else:
        start = _("starts about as large as with $\\div \\sqrt{d_k}$")
    below = sum(u < s for s, u in zip(scaled, unscaled, strict=True))
    last = len(scaled) - 1
    if below == len(scaled):
        along = _("stays smaller at every step from 0 to {last}").format(last=count(last))
    else:
        along = _("is smaller at {below} of the {steps} steps from 0 to {last}").format(
            below=count(below), steps=count(len(scaled)), last=count(last))
    norm = r"$\|\partial L / \partial \text{Scores}\|$"
    return _("{norm} {start} ({unscaled} against {scaled}) and {along}").format(
        norm=norm, start=start, unscaled=short_number(u0), scaled=short_number(s0), along=along)


def loss_change(first: float, last: float) -> str:
    """first → last, with four decimals where three would print the same number twice."""
    a, b = short_number(first), short_number(last)
    return f"{decimal(first, 4)} → {decimal(last, 4)}" if a == b and 0.01 <= abs(first) < 10 else f"{a} → {b}"


def _loss(losses: Sequence[float]) -> str:
    first, last = losses[0], losses[-1]
    if abs(last - first) < 0.05 * abs(first):
        return _("barely moves ({change})").format(change=loss_change(first, last))
    words = _("falls from {first} to {last}") if last < first else _("goes from {first} to {last}")
    return words.format(first=short_number(first), last=short_number(last))


def why_scale_claim(result: Mapping) -> str:
    """What the panel says, read from the run: the spread of the scores, how saturated the unscaled softmax
    starts, the gradient reaching the scores, and the losses. Inline maths between $…$ (the prose filter)."""
    scaled, unscaled = result["scaled"], result["unscaled"]
    scale = r"$\div \sqrt{d_k}$"
    return _(
        "Without {scale} the softmax gets scores of standard deviation {std} (about $\\sqrt{{{d_k}}} = {root}$), "
        "and {saturation} (with {scale}: standard deviation {scaled_std}, largest weights {scaled_weight} on "
        "average). A saturated softmax passes little gradient: {gradient}. With the same $\\eta = {rate}$ the "
        "loss without {scale} {unscaled_loss}, while with {scale} it {scaled_loss}."
    ).format(
        scale=scale, std=decimal(unscaled['softmax_input_std_start'], 2), d_k=result["d_k"],
        root=f"{math.sqrt(result['d_k']):g}", saturation=_saturation(unscaled["max_weight_start"]),
        scaled_std=decimal(scaled['softmax_input_std_start'], 2),
        scaled_weight=decimal(np.mean(scaled['max_weight_start']), 3),
        gradient=_gradient(scaled["grad_scores_norm"], unscaled["grad_scores_norm"]),
        rate=f"{result['learning_rate']:g}", unscaled_loss=_loss(unscaled["losses"]),
        scaled_loss=_loss(scaled["losses"]),
    )


def why_scale_bump(result: Mapping) -> str:
    """Where the unscaled gradient rises again after falling (to over twice its lowest value before): the row
    whose largest weight moved most, read from the run. Empty when it does not rise, or when a row's swing
    (a weight that falls below SATURATED) makes it another story."""
    g = list(result["unscaled"]["grad_scores_norm"])
    peak = max(range(1, len(g)), key=g.__getitem__, default=0)
    if peak == 0 or g[peak] <= 2 * min(g[:peak]) or g[peak] >= g[0]:
        return ""
    weights = np.asarray(result["unscaled"]["max_weights"])  # (steps + 1, T)
    row = int(np.argmax(np.abs(weights[-1] - weights[0])))
    first, last = weights[0, row], weights[-1, row]
    if min(weights[:, row]) < SATURATED:
        return ""
    losses = [result[run]["losses"] for run in RUNS]
    falls = all(b <= a for losses_ in losses for a, b in zip(losses_, losses_[1:], strict=False))
    token = result["tokens"][row]
    bump = _("The gradient without $\\div \\sqrt{{d_k}}$ rises again up to step {peak}, still below its start: "
             "row {row} ({token}) is slowly leaving saturation, its largest weight going from {first} to {last} by "
             "step {step}.").format(peak=count(peak), row=row + 1, token=token, first=decimal(first, 4),
                                    last=decimal(last, 3), step=count(len(g) - 1))
    return bump + (" " + _("The loss falls at every step in both runs.") if falls else "")


def _span(values: Sequence[float]) -> str:
    return _("{low} to {high}").format(low=decimal(min(values), 3), high=decimal(max(values), 3))


def comparison_rows(result: Mapping) -> tuple[dict, ...]:
    """The table's rows, one measure each, a cell per run (RUNS' order): ``{"value", "text"}``."""
    last = result["steps"]

    def row(label: str, key: str, cells: dict[str, tuple[object, str]]) -> dict:
        return {
            "label": label,
            "key": key,
            "cells": tuple({"run": run, "value": cells[run][0], "text": cells[run][1]} for run in RUNS),
        }

    runs = {run: result[run] for run in RUNS}
    return (
        row(
            _(r"standard deviation of the softmax's input, step 0"),
            "softmax_input_std_start",
            {k: (r["softmax_input_std_start"], decimal(r['softmax_input_std_start'], 2)) for k, r in runs.items()},
        ),
        row(
            _(r"largest weight in a row of $A$, step 0: mean"),
            "max_weight_start_mean",
            {
                k: (float(np.mean(r["max_weight_start"])), decimal(np.mean(r['max_weight_start']), 3))
                for k, r in runs.items()
            },
        ),
        row(
            _(r"the same, each row"),
            "max_weight_start",
            {k: (tuple(r["max_weight_start"]), _span(r["max_weight_start"])) for k, r in runs.items()},
        ),
        row(
            _(r"$\|\partial L / \partial \text{Scores}\|$, step 0"),
            "grad_scores_norm_start",
            {k: (r["grad_scores_norm"][0], short_number(r["grad_scores_norm"][0])) for k, r in runs.items()},
        ),
        row(
            _(r"loss $L$, step 0 → {last}").format(last=count(last)),
            "losses",
            {
                k: (
                    (r["losses"][0], r["losses"][-1]),
                    loss_change(r["losses"][0], r["losses"][-1]),
                )
                for k, r in runs.items()
            },
        ),
    )


def _read_only(obj: object) -> object:
    """Dicts as read-only mappings and lists as tuples, all the way down: the cached context is shared."""
    if isinstance(obj, Mapping):
        return MappingProxyType({k: _read_only(v) for k, v in obj.items()})
    if isinstance(obj, list | tuple):
        return tuple(_read_only(v) for v in obj)
    return obj


@lru_cache(maxsize=8)
def _trained(steps: int) -> dict:
    """why_scale's two runs, trained once per ``steps`` (never changed by a reader)."""
    return why_scale(steps)


def why_scale_context(steps: int = WHY_SCALE_STEPS) -> Mapping[str, object]:
    """What the Learn panel shows for why ÷√d_k: the claim, the comparison table and the two charts.

    why_scale is deterministic, so this is computed once per ``steps``. The result is read-only (one object
    handed to every request): ``d_k``, ``root`` (√d_k), ``steps``, ``learning_rate``, ``claim`` (prose with
    $…$), ``rows`` (comparison_rows), ``charts`` (two SVGs: the loss, ‖∂L/∂Scores‖). Its words are written once
    per language: the same object for every request in one language.
    """
    return _why_scale_context(steps, language())


@lru_cache(maxsize=16)
def _why_scale_context(steps: int, lang: str) -> Mapping[str, object]:
    """why_scale_context in ``lang``, the request's language (gettext reads it from the request's context)."""
    result = _trained(steps)
    return _read_only(
        {
            "d_k": result["d_k"],
            "root": f"{math.sqrt(result['d_k']):g}",
            "seed": WHY_SCALE_SEED,
            "steps": steps,
            "learning_rate": f"{result['learning_rate']:g}",
            "claim": why_scale_claim(result),
            # for the note: whether every unscaled row starts saturated, and the scaled gradient starts larger
            "all_saturated": min(result["unscaled"]["max_weight_start"]) >= SATURATED,
            "scaled_larger": result["scaled"]["grad_scores_norm"][0] > result["unscaled"]["grad_scores_norm"][0],
            "bump": why_scale_bump(result),
            "rows": comparison_rows(result),
            "charts": tuple(
                why_scale_chart(result, key, chart_id=f"why-scale-{key.replace('_', '-')}") for key, _, _ in CHARTS
            ),
        }
    )
