"""The heatmaps of each stage: a table from stage key to a small function, one per
templates/stages/<key>.html, forward and backward alike.

Each function takes the page's PanelBuilder and returns the stage's panels by the name its
template reads; a stage that does not apply to this run (a block's stage without blocks, a
gradient without a goal) has no panels.
"""

from __future__ import annotations

from collections.abc import Callable

from app.i18n import N_
from app.i18n import gettext as _
from app.lesson.stages import ACTIVATION_NAMES, Stage, describe, stage_or_first
from app.maths.positions import rotates
from app.state.quiz import stage_results
from app.state.scenario import View
from app.view.labels import numbered
from app.view.panels import Panel, PanelBuilder, StageView, page_stages

Panels = dict[str, Panel]
QUERY_KEY = N_("query ↓ key →")  # translated where the panel is drawn (PanelBuilder._panel)


def concat_cols(b: PanelBuilder) -> list[str]:
    """The columns of Concat (the rows of W_O): each head's values side by side."""
    return [f"h{h + 1}·v{j + 1}" for h in range(b.run.num_heads) for j in range(b.run.d_v)]


# --- forward ----------------------------------------------------------------------------------------


def x_panels(b: PanelBuilder) -> Panels:
    run, block, stack, n = b.run, b.block, b.stack, b.view.block
    p: Panels = {}
    pe = stack.pe if stack is not None else run.pe
    x_input = stack.x_input if stack is not None else run.x_input
    x = block.x if block is not None else run.x
    if pe is not None and n == 0:
        p["x_input"] = b._panel(x_input, "Embeddings", "x_input", b.rows, b.dims)
        p["pe"] = b._panel(pe, f"PE ({b.sc.positional_encoding})", "pe", b.rows, b.dims,
                           label=_("$P$: positions ({encoding})").format(encoding=b.sc.positional_encoding))
        p["x"] = b._panel(x, "X = embeddings + PE", "x", b.rows, b.dims)
    else:
        p["x"] = b._panel(x, _("X = output of block {n}").format(n=n) if n else "X", "x", b.rows, b.dims,
                          label=_("$X$ = output of block {n}").format(n=n) if n else "$X$")
    if block is not None and block.norm == "pre":
        p["ln1"] = b.block_matrix("ln1", "LayerNorm₁(X): what the heads see", block.ln1.output)
    if run.context is not None:
        p["context"] = b._panel(run.context, "Source sentence C (keys and values)", "context", b.keys, b.dims)
    return p


def qkv_panels(b: PanelBuilder) -> Panels:
    p: Panels = {}
    for name in ("q", "k", "v"):
        p[f"w_{name}"] = b.weight(f"w_{name}")
        p[name] = b.head_matrix(name)
    return p


def scores_panels(b: PanelBuilder) -> Panels:
    run = b.run
    rope = rotates(run.positional_encoding)
    k = "k_rot" if rope else "k"
    p: Panels = {"q": b.head_matrix("q_rot" if rope else "q"),
                 "k": b.head_matrix(k) if run.score == "additive" else b.transposed(k)}
    if run.score == "general":
        p["w_a"], p["q_w"] = b.weight("w_a"), b.head_matrix("q_w")
    elif run.score == "additive":
        p["w_1"], p["q_1"] = b.weight("w_1"), b.head_matrix("q_1")
        p["w_2"], p["k_2"] = b.weight("w_2"), b.head_matrix("k_2")
        p["v_a"] = b.weight("v_a")
    p["scores"] = b.head_matrix("scores")
    return p


def scaled_panels(b: PanelBuilder) -> Panels:
    p: Panels = {"scores": b.head_matrix("scores"), "scaled": b.head_matrix("scaled")}
    if b.run.heads[0].bias is not None:
        p["bias"] = b.head_matrix("bias")
    return p


def mask_panels(b: PanelBuilder) -> Panels:
    return {"scaled": b.head_matrix("scaled")}


def softmax_panels(b: PanelBuilder) -> Panels:
    """The softmax's input is what the formula exponentiates: Masked (−∞ at hidden keys) under a mask, else Scaled."""
    p: Panels = {"input": b.head_matrix("masked" if b.run.mask is not None else "scaled"),
                 "softmax": b.head_matrix("softmax")}
    if b.run.attention == "linear":
        p["lin_weights"] = b.head_matrix("lin_weights")
    return p


def output_panels(b: PanelBuilder) -> Panels:
    if b.run.attention != "linear":
        return {name: b.head_matrix(name) for name in ("softmax", "v", "output")}
    p: Panels = {name: b.head_matrix(name) for name in ("phi_q", "v", "kv", "output", "softmax_output", "diff")}
    p["phi_k"] = b.transposed("phi_k")
    return p


def multihead_panels(b: PanelBuilder) -> Panels:
    run, concat = b.run, concat_cols(b)
    return {"concat": b._panel(run.concat, "Concat(head₁ … head_h)", "concat", b.rows, concat),
            "w_o": b._panel(run.weights.w_o, "W_O", "w_o", concat, b.dims),
            "final": b._panel(run.output, "MultiHead(X) = Concat·W_O", "final", b.rows, b.dims, inspect="final")}


def addnorm1_panels(b: PanelBuilder) -> Panels:
    block = b.block
    if block is None:
        return {}
    pre = block.norm == "pre"
    p: Panels = {
        "x": b.block_matrix("x", "X", block.x),
        "mha": b.block_matrix("mha", "MultiHead(LN₁(X))" if pre else "MultiHead(X)", block.attention.output),
        "residual1": b.block_matrix("residual1", "X + MultiHead" + (" = H" if pre else ""), block.residual1),
    }
    if not pre:
        p["ln1"] = b.block_matrix("ln1", "H = LayerNorm₁(X + MultiHead)", block.ln1.output)
        p["stats"] = b.stats("ln1")
    return p


def ffn_panels(b: PanelBuilder) -> Panels:
    block = b.block
    if block is None:
        return {}
    p: Panels = {}
    hidden = numbered("f", block.d_ff)
    if block.norm == "pre":
        p["ffn_in"] = b.block_matrix("ln2", "LayerNorm₂(H)", block.ln2.output)
        p["stats"] = b.stats("ln2")
    else:
        p["ffn_in"] = b.block_matrix("h", "H", block.h)
    p["ffn_w1"] = b.block_matrix("ffn_w1", "W₁", block.weights.ffn_w1, hidden, b.dims)
    p["ffn_hidden"] = b.block_matrix("ffn_hidden", "H·W₁ + b₁", block.ffn_hidden, hidden)
    p["ffn_act"] = b.block_matrix("ffn_act", f"{ACTIVATION_NAMES[block.activation]}(H·W₁ + b₁)",
                                  block.ffn_act, hidden)
    p["ffn_w2"] = b.block_matrix("ffn_w2", "W₂", block.weights.ffn_w2, b.dims, hidden)
    p["ffn_out"] = b.block_matrix("ffn_out", "FFN = act·W₂ + b₂", block.ffn_out)
    return p


def addnorm2_panels(b: PanelBuilder) -> Panels:
    block = b.block
    if block is None:
        return {}
    p: Panels = {"h": b.block_matrix("h", "H", block.h), "ffn_out": b.block_matrix("ffn_out", "FFN", block.ffn_out)}
    last = b.view.block + 1 == len(b.stack.blocks)
    nxt = _("the final output") if last else _("block {n}'s input").format(n=b.view.block + 2)
    if block.norm == "post":
        p["residual2"] = b.block_matrix("residual2", "H + FFN", block.residual2)
        p["ln2"] = b.block_matrix("ln2", f"LayerNorm₂(H + FFN): {nxt}", block.ln2.output,
                                  label=rf"$\text{{LayerNorm}}_2(H + \text{{FFN}})$: {nxt}")
        p["stats"] = b.stats("ln2")
    else:
        p["residual2"] = b.block_matrix("residual2", f"H + FFN: {nxt}", block.residual2,
                                        label=rf"$H + \text{{FFN}}$: {nxt}")
    return p


# --- backward: the gradient a stage computes and what it is computed from ----------------------------


def _softmax_gradient(b: PanelBuilder, name: str) -> Panel:
    """∂L/∂A, ∂L/∂Scaled or ∂L/∂Scores of the head in view: one row per query, one column per key."""
    return b.gradient(name, getattr(b.grads.heads[b.view.head], name), b.rows, b.keys, corner=QUERY_KEY)


def grad_a_panels(b: PanelBuilder) -> Panels:
    h, g, learning, run = b.view.head, b.grads, b.view.learning, b.run
    hg = g.heads[h]
    p: Panels = {}
    if learning.goal == "output":
        p["target"] = b._panel(learning.target, N_("Target"), "target", b.rows, b.dims, label=_(r"$\text{Target}$"))
        p["final"] = b._panel(run.output, "MultiHead(X) = Concat·W_O", "final", b.rows, b.dims)
        p["g_final"] = b.gradient("final", g.output, b.rows, b.dims, owner=0)
        p["g_output"] = b.gradient("output", hg.output, b.rows, numbered("v", run.d_v))
        p["v"] = b.head_matrix("v")
    elif learning.head == h:
        p["target"] = b._panel(learning.target, _("Target t for head {n}").format(n=h + 1), "target", b.rows,
                               b.keys, kind="weights", corner=QUERY_KEY,
                               label=_("Target $t$ for head {n}").format(n=h + 1))
    if hg.softmax is not None:
        p["softmax"] = b.head_matrix("softmax")
        p["g_softmax"] = _softmax_gradient(b, "softmax")
    return p


def grad_scores_panels(b: PanelBuilder) -> Panels:
    if b.grads.heads[b.view.head].softmax is None:  # linear attention has no ∂L/∂A
        return {}
    return {"softmax": b.head_matrix("softmax"), **{f"g_{name}": _softmax_gradient(b, name)
                                                    for name in ("softmax", "scaled", "scores")}}


def _grad_qk_panels(b: PanelBuilder, name: str) -> Panels:
    """∂L/∂Q from ∂L/∂Scores and K, or ∂L/∂K from ∂L/∂Scores and Q."""
    head, hg = b.run.heads[b.view.head], b.grads.heads[b.view.head]
    other = "k" if name == "q" else "q"
    p: Panels = {"g_scores": _softmax_gradient(b, "scores")} if hg.softmax is not None else {}
    p[other] = b.head_matrix(f"{other}_rot" if getattr(head, f"{other}_rot") is not None else other)
    p[f"g_{name}"] = b.gradient(name, getattr(hg, name), b.rows if name == "q" else b.keys, numbered(name, b.run.d_k))
    return p


def grad_q_panels(b: PanelBuilder) -> Panels:
    return _grad_qk_panels(b, "q")


def grad_k_panels(b: PanelBuilder) -> Panels:
    return _grad_qk_panels(b, "k")


def grad_v_panels(b: PanelBuilder) -> Panels:
    hg, v_cols = b.grads.heads[b.view.head], numbered("v", b.run.d_v)
    return {"softmax": b.head_matrix("softmax" if hg.softmax is not None else "lin_weights"),
            "g_output": b.gradient("output", hg.output, b.rows, v_cols),
            "g_v": b.gradient("v", hg.v, b.keys, v_cols)}


def grad_w_panels(b: PanelBuilder) -> Panels:
    h, w, run = b.view.head, b.grads.weights, b.run
    return {"g_w_q": b.gradient("w_q", w.w_q[h], b.dims, numbered("q", run.d_k)),
            "g_w_k": b.gradient("w_k", w.w_k[h], b.dims, numbered("k", run.d_k)),
            "g_w_v": b.gradient("w_v", w.w_v[h], b.dims, numbered("v", run.d_v)),
            "g_w_o": b.gradient("w_o", w.w_o, concat_cols(b), b.dims, owner=0)}


STAGE_PANELS: dict[str, Callable[[PanelBuilder], Panels]] = {
    "x": x_panels, "qkv": qkv_panels, "scores": scores_panels, "scaled": scaled_panels, "mask": mask_panels,
    "softmax": softmax_panels, "output": output_panels, "multihead": multihead_panels,
    "addnorm1": addnorm1_panels, "ffn": ffn_panels, "addnorm2": addnorm2_panels,
    "grad_a": grad_a_panels, "grad_scores": grad_scores_panels, "grad_q": grad_q_panels, "grad_k": grad_k_panels,
    "grad_v": grad_v_panels, "grad_w": grad_w_panels,
}


def stage_view(b: PanelBuilder, stage: Stage) -> StageView:
    """One stage's heatmaps, text and (for the weights) lines; the quiz's matrices hidden while it is built."""
    b.hiding = stage_results(stage.key, b.stack, b.view.block) if b.view.quiz else ()
    try:
        p = {} if stage.backward and b.grads is None else STAGE_PANELS[stage.key](b)
        title, formula, explanation = describe(stage, b.options)
        drawn = stage.key == "softmax" or (stage.key == "output" and b.run.attention == "softmax")
        return StageView(stage, p, _(title), formula, _(explanation), quiz=b.hiding,
                         lines=b.lines(stage) if drawn else None)
    finally:
        b.hiding = ()


def stage_views(b: PanelBuilder, view: View) -> list[StageView]:
    """The stage in view, or every stage of the page when it shows them all."""
    stages = page_stages(b.sc, view)
    if view.show_all:
        return [stage_view(b, s) for s in stages]
    return [stage_view(b, stage_or_first(view.stage, stages))]
