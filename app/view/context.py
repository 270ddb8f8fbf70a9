"""Everything the workspace templates get for one scenario (page_context), and what it gathers: the
banner, the stages' panels, the inspector, the quiz, the Learn panel, the backward map, the lab and
cost panels; and the matrix behind one panel, for the exports."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from markupsafe import Markup, escape

from app.i18n import gettext as _
from app.i18n import ngettext
from app.lesson.presets import PRESETS
from app.lesson.stages import ACTIVATION_WORDS, Stage, stage_or_first, step_targets
from app.maths.arithmetic import CellRef, Explanation, explain
from app.maths.backward import Gradients
from app.maths.cost import attention_cost
from app.maths.gradient_arithmetic import GRADIENT_CELLS, GradientExplanation, explain_gradient
from app.maths.loss_floor import attention_loss_floor, gradient_norm_at_floor
from app.maths.positions import ENCODINGS
from app.maths.records import AttentionRun, TransformerRun
from app.state.cells import matrix_of, parse_cell
from app.state.learning import (
    Learning,
    companion_loss,
    companion_run,
    companion_scenario,
    curve_text,
    learning_loss_and_gradients,
)
from app.state.pin import describe_pin
from app.state.quiz import LABELS as QUIZ_LABELS
from app.state.quiz import check, hidden_cells, stage_results
from app.state.quiz import owner as cell_owner
from app.state.reading import decode_pin
from app.state.scenario import Scenario, View, departure
from app.view.attention_lines import attention_lines
from app.view.charts.learn import loss_curve_svg
from app.view.charts.why_scale import why_scale_context
from app.view.diff import MatrixCollector, goal_gradients, stage_diff
from app.view.editor import mask_grid, target_grid
from app.view.gradient_worked import gradient_worked
from app.view.lab_cost import cost_context, lab_context
from app.view.labels import head_label, token_labels
from app.view.panels import PanelBuilder, gradient_decimals, page_stages
from app.view.pipeline_map import pipeline_map
from app.view.stage_panels import stage_view, stage_views
from app.view.typeset import tex
from app.view.worked import worked


def describe_scenario(sc: Scenario) -> Markup:
    """The scenario in one factual line, for a banner whose preset no longer describes it:
    "6 tokens, embeddings of 4, 2 heads, causal mask". It quotes the tokens, which a student typed:
    they are escaped as text and never reach the maths converter; only this function's own fixed
    formulas (÷√d_k, τ, d_ff) are typeset."""
    t, h = len(sc.tokens), sc.num_heads
    if t <= 8:  # a short sentence is read at a glance
        tokens = ngettext("{n} token “{sentence}”", "{n} tokens “{sentence}”", t).format(
            n=t, sentence=" ".join(sc.tokens))
    else:
        tokens = ngettext("{n} token", "{n} tokens", t).format(n=t)
    parts = [tokens, _("embeddings of {n}").format(n=sc.d_model), ngettext("{n} head", "{n} heads", h).format(n=h)]
    if sc.d_k != max(1, sc.d_model // h) or sc.d_v != sc.d_k:
        parts.append(_("queries and keys of {d_k}, values of {d_v}").format(d_k=sc.d_k, d_v=sc.d_v))
    parts += {"causal": [_("causal mask")], "local": [_("local window ±{n}").format(n=sc.window)],
              "strided": [_("strided mask (stride {n})").format(n=sc.window)]}.get(sc.mask_mode, [])
    if sc.blocked:
        parts.append(ngettext("{n} cell hidden by hand", "{n} cells hidden by hand", len(sc.blocked)).format(
            n=len(sc.blocked)))
    if sc.padding:
        parts.append(ngettext("{n} padding key", "{n} padding keys", len(sc.padding)).format(n=len(sc.padding)))
    if sc.cross:
        parts.append(_("cross-attention to {n} source tokens").format(n=len(sc.context_tokens)))
    if sc.positional_encoding != "none":
        parts.append(_(ENCODINGS[sc.positional_encoding].label))
    parts += {"general": [_("general (Luong) score")], "additive": [_("additive (Bahdanau) score")]}.get(sc.score, [])
    if sc.attention == "linear":
        parts.append(_("linear attention"))
    if not sc.scale:
        parts.append(escape(_("no {formula}")).format(formula=tex(r"\div \sqrt{d_k}")))
    if sc.temperature != 1.0:
        parts.append(tex(rf"\tau = {sc.temperature:g}"))
    if sc.blocks:
        act = _(ACTIVATION_WORDS[sc.activation])
        parts.append(escape(ngettext("{n} transformer block ({norm}-norm, {activation}, {d_ff})",
                                     "{n} transformer blocks ({norm}-norm, {activation}, {d_ff})", sc.blocks)).format(
            n=sc.blocks, norm=sc.norm, activation=act, d_ff=tex(rf"d_{{\text{{ff}}}} = {sc.ffn_size}")))
    return Markup(", ").join(parts)


def summary_context(sc: Scenario) -> dict | None:
    """The banner: the preset's summary while it still describes the page (noting edited values),
    else a factual line for the scenario as it is now. None without a preset."""
    if sc.preset_obj is None:
        return None
    structure, values = departure(sc)
    return {"edited": structure, "values_edited": values, "line": describe_scenario(sc) if structure else ""}

def inspector(builder: PanelBuilder) -> Explanation | GradientExplanation | None:
    """The arithmetic of the selected cell, forward or backward; None without one."""
    ref: CellRef | None = builder.selected
    if ref is None or builder.is_hidden(ref):  # a quiz shows the arithmetic after the prediction
        return None
    if ref.matrix in GRADIENT_CELLS:
        return explain_gradient(builder.run, builder.grads, builder.view.learning.loss_spec(), ref,
                                list(builder.sc.tokens), list(builder.sc.key_tokens), builder.dims)
    return explain(builder.run, ref, list(builder.sc.tokens), builder.dims, list(builder.sc.key_tokens),
                   builder.stack)



def page_context(sc: Scenario, view: View, *, shell: bool = True) -> dict:
    """Everything the workspace templates need for one scenario. Without the ``shell`` (a value edit's
    answer, templates/partials/stage_body.html) the map and the lab and cost panels are not built."""
    first, stack = sc.compute()
    run = first if stack is None else stack.blocks[view.block].attention  # the block in view
    learning = view.learning if stack is None else None
    loss, grads = learning_loss_and_gradients(run, learning) if learning is not None else (None, None)
    builder = PanelBuilder(sc, run, view, stack, grads)
    stages = page_stages(sc, view)
    current = stage_or_first(view.stage, stages)
    prev, nxt = step_targets(current.key, stages, view.block, len(stack.blocks) if stack is not None else 0)
    ctx_views = stage_views(builder, view)
    explanation = inspector(builder)
    pinned = decode_pin(view.pin) if view.pin else None
    if pinned is not None:
        pinned_run = pinned.compute()  # once, for every stage shown
        ctx_views = [replace(sv, diff=stage_diff(sc, view, run, stack, pinned, pinned_run, sv)) for sv in ctx_views]
    return {
        "sc": sc,
        "view": view,
        "run": run,
        "first_run": first,
        "stack": stack,
        "preset": PRESETS.get(sc.preset),
        "banner": summary_context(sc),
        "presets": PRESETS,
        "stages": stages,
        "current": current,
        "pipeline": pipeline_map(sc, run, stack, view) if shell else None,
        "prev": prev,
        "next": nxt,
        "stage_views": ctx_views,
        "explanation": explanation,
        "worked": None if explanation is None else (
            gradient_worked(explanation, gradient_decimals(view.decimals)) if explanation.kind.startswith("grad_")
            else worked(explanation, view.decimals)),
        "dims": builder.dims,
        "token_rows": builder.rows,
        "key_rows": builder.keys,
        "head_labels": [head_label(sc, h) for h in range(sc.num_heads)],
        "mask_rows": mask_grid(sc, run, view) if any(v.stage.key == "mask" for v in ctx_views) else Markup(""),
        "lab": lab_panel(sc, run) if shell and "lab" in view.panels else None,
        "cost": cost_panel(sc, run, stack) if shell and "cost" in view.panels else None,
        "quiz": quiz_context(builder, current),
        "inspect_hidden": builder.selected is not None and builder.is_hidden(builder.selected),
        "pin_summary": describe_pin(pinned) if pinned is not None else "",
        "learn": learn_context(sc, run, view, loss, grads) if learning is not None or "learn" in view.panels else None,
        "backward_map": backward_map(grads, view.head, stages) if grads is not None else [],
    }


@dataclass(frozen=True)
class GradientStep:
    """A backward stage on the map: its link and the size ‖∂L/∂…‖ of the gradient it computes."""

    key: str
    number: int
    short: str
    symbol: str  # LaTeX: what is differentiated
    size: float  # the Frobenius norm, for the head in view (all weights for ∂L/∂W)
    bar: int  # 0–10: the size against the largest on the map, on a log scale over six decades


def backward_map(grads: Gradients, head: int, stages: tuple[Stage, ...]) -> list[GradientStep]:
    """The backward stages with their gradient sizes: where the gradient is large, and where it fades."""
    hg = grads.heads[head]
    w = grads.weights

    def norm(*arrays: np.ndarray | None) -> float:
        return float(math.sqrt(sum(float(np.sum(a * a)) for a in arrays if a is not None)))

    sizes = {"grad_a": (norm(hg.softmax) if hg.softmax is not None else norm(hg.output), "A"),
             "grad_scores": (norm(hg.scores), r"\text{Scores}"), "grad_q": (norm(hg.q), "Q"),
             "grad_k": (norm(hg.k), "K"), "grad_v": (norm(hg.v), "V"),
             "grad_w": (norm(w.w_q[head], w.w_k[head], w.w_v[head], w.w_o), "W")}
    top = max((size for size, _ in sizes.values()), default=0.0)
    steps = []
    for stage in stages:
        if not stage.backward:
            continue
        size, symbol = sizes[stage.key]
        bar = 0 if size <= 0 or top <= 0 else max(1, min(10, round(10 + 10 * math.log10(size / top) / 6)))
        steps.append(GradientStep(stage.key, stage.number, _(stage.short), symbol, size, bar))
    return steps


def learn_context(sc: Scenario, run: AttentionRun, view: View, loss: float | None,
                  grads: Gradients | None) -> dict:
    """The Learn panel: the goal, the loss now, the curve so far, the target as a grid of inputs, and
    for a goal over two sentences, the other sentence's lines with the same weights."""
    learning = view.learning
    ctx: dict = {"learning": learning, "blocks": bool(sc.blocks), "linear": sc.attention == "linear",
                 "head_labels": [head_label(sc, h) for h in range(sc.num_heads)]}
    if learning is None:
        return ctx
    other = companion_run(sc, run, learning)  # the goal's other sentence, with the same weights
    total = loss + (companion_loss(learning, other) if other is not None else 0.0)
    curve = learning.losses or (total,)
    ctx.update(
        loss=loss, total=total, steps=learning.steps_taken,
        curve=loss_curve_svg(curve, chart_id="loss-curve", title=_("Loss during training"), width=320, height=140),
        curve_text=curve_text(learning.losses), first_step=learning.first_step,
        target=target_grid(sc, learning),
        rows=token_labels(sc.tokens),
        preset_goal=PRESETS[sc.preset].goal if sc.preset in PRESETS else "",
        why_scale=why_scale_context() if sc.preset in PRESETS and PRESETS[sc.preset].goal == "why-scale" else None,
        grad_norms={name: float(np.linalg.norm(getattr(grads.weights, name)))
                    for name in ("w_q", "w_k", "w_v", "w_o")},
    )
    if learning.goal == "attention":
        ctx["floor"] = loss_floor(learning)
    if run.attention == "softmax":  # the lines next to the buttons: a step shows at once what it moved
        p = PRESETS.get(sc.preset)
        focus = sc.tokens.index(p.focus) if p is not None and p.focus in sc.tokens else None
        ctx["lines"] = attention_lines(np.stack([h.softmax for h in run.heads]), sc.tokens, sc.key_tokens,
                                       ctx["head_labels"], fig_id="lines-learn", focus=focus, cross=sc.cross)
    if other is not None:
        second = companion_scenario(learning)
        ctx["companion"] = {
            "tokens": second.tokens,
            "lines": attention_lines(np.stack([h.softmax for h in other.heads]), second.tokens, second.tokens,
                                     [head_label(sc, h) for h in range(other.num_heads)], fig_id="lines-companion",
                                     focus=second.tokens.index("bank") if "bank" in second.tokens else None),
        }
    return ctx


def loss_floor(learning: Learning) -> dict:
    """The attention goal's floor: the loss at A = t (the target's mean row entropy), with the goal's other
    sentence's added for the total, and ‖∂L/∂A‖ there, which does not vanish."""
    here = attention_loss_floor(learning.target, learning.rows)
    second = companion_scenario(learning)
    other = 0.0 if second is None else attention_loss_floor(second.loss["target"], second.loss.get("rows", ()))
    counted = learning.target[list(learning.rows)] if learning.rows else learning.target  # (R, S)
    return {"loss": here, "total": here + other, "grad_a": gradient_norm_at_floor(learning.target, learning.rows),
            "entries": int(np.count_nonzero(counted > 0)), "rows": counted.shape[0]}


def quiz_context(builder: PanelBuilder, current: Stage) -> dict | None:
    """The quiz box: the matrices to predict in the stage in view, their sizes, the feedback on
    the last prediction, and how many cells are revealed. None when no quiz is on."""
    view = builder.view
    if not view.quiz:
        return None
    names = stage_results(current.key, builder.stack, view.block)
    matrices = []
    for name in names:
        m = matrix_of(CellRef(name, cell_owner(name, view.head, view.block), 0, 0), builder.run, builder.stack,
                      builder.grads)
        hidden = hidden_cells(name, m, cell_owner(name, view.head, view.block), view.revealed)
        matrices.append({"name": name, "label": _(QUIZ_LABELS[name]), "rows": m.shape[0], "cols": m.shape[1],
                         "hidden": int(hidden.sum()), "cells": m.size})
    feedback = check(view.guess, view.guess_ref, builder.run, builder.stack, view.decimals,
                     builder.grads) if view.guess_ref else None
    chosen = parse_cell(view.guess_ref, builder.run, builder.stack, builder.grads)
    return {"matrices": matrices, "feedback": feedback, "chosen": chosen}


def lab_panel(sc: Scenario, run: AttentionRun) -> dict:
    """The scaling lab, open: samples drawn with the scenario's seed, at its τ, ÷√d_k and d_k."""
    return {**lab_context(seed=sc.seed, temperature=run.temperature, scale=run.scales, d_k=run.d_k), "open": True}


def cost_panel(sc: Scenario, run: AttentionRun, stack: TransformerRun | None) -> dict:
    """The cost panel, open, for the scenario's sizes and options."""
    cost = cost_context(attention_cost(
        t=len(sc.tokens), s=len(sc.key_tokens), d_model=sc.d_model, num_heads=run.num_heads, d_k=run.d_k,
        d_v=run.d_v, score=run.score, attention=run.attention, scale=run.scale,
        d_ff=stack.blocks[0].d_ff if stack is not None else 0, blocks=len(stack.blocks) if stack else 0,
    ), scale=run.scale)
    return {**cost, "open": True}


def panel_matrix(sc: Scenario, view: View, ref: str) -> tuple[np.ndarray, list[str], list[str], str] | None:
    """The matrix, row labels, column labels and title of the panel whose table has data-ref
    ``ref``, built by the page's own PanelBuilder over every stage; None when no panel has it.

    A ref names the head or block in view ("softmax.0" is head 1 of the block shown); a ref for
    another head or block ("softmax.1", "ln1.1") is looked up with that head or block in view."""
    first, stack = sc.compute()
    views = [view]
    index = ref.rpartition(".")[2]
    if index.isdigit():
        n = int(index)
        if n < sc.num_heads:
            views.append(replace(view, head=n))
        if n < sc.blocks:
            views.append(replace(view, block=n))
    for v in views:
        run = first if stack is None else stack.blocks[v.block].attention
        finder = MatrixCollector(sc, run, v, stack, goal_gradients(run, stack, v))
        for stage in page_stages(sc, v):
            stage_view(finder, stage)
            if ref in finder.found:
                return finder.found[ref]
    return None
