"""The stepper's map: the computation as it is configured now, one link per stage.

:func:`pipeline_map` reads a run and lists what the map shows, left to right: X (+ PE), W_Q, W_K,
W_V, Q, K, V, the score, the scaling, the mask, softmax, A·V, concat, ·W_O and, with transformer
blocks, Add & Norm, FFN, Add & Norm. Every shape is read from the run's arrays, never a constant.
:func:`compact` keeps the stages only, for a narrow screen; app.view.map_drawing draws both as SVG.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.i18n import gettext as _
from app.lesson.stages import Stage, visible_stages
from app.maths.positions import rotates
from app.maths.records import AttentionRun, TransformerRun
from app.state.scenario import Scenario, View


@dataclass(frozen=True)
class Node:
    """One box of the map: what it holds and its shape now."""

    label: str  # "softmax", "W_Q" (after "_": a subscript)
    shape: str  # at the current sizes: "5×3"
    symbol: str  # the same in symbols: "T×d_model"
    off: bool = False  # a stage that changes nothing in this run (no mask): drawn muted


@dataclass(frozen=True)
class Column:
    """Nodes stacked top to bottom; the arrows come from the previous column."""

    nodes: tuple[Node, ...]
    stage: str | None = None  # the stage whose link it is part of; None: a plain label (W_Q, W_K, W_V)
    arrows: tuple[tuple[int, int], ...] | None = None  # (node before, node here); None: fan in or out
    short: str = ""  # its name as one chip (compact map); "" joins the nodes' labels

    def merged(self) -> Node:
        """The column as one node: "Q, K, V" of shape "5×3" (or "5×3/5×3/5×4" when they differ)."""
        shapes = [n.shape for n in self.nodes]
        return Node(self.short or ", ".join(n.label for n in self.nodes),
                    shapes[0] if len(set(shapes)) == 1 else "/".join(shapes),
                    "/".join(dict.fromkeys(n.symbol for n in self.nodes)), all(n.off for n in self.nodes))


@dataclass(frozen=True)
class Span:
    """A bracket over columns first…last: the per-head part, the transformer block."""

    label: str
    first: int
    last: int
    level: int  # 0 nearest the nodes


@dataclass(frozen=True)
class StageLink:
    """What a stage's link says: "Stage 5: Softmax, 7×7"."""

    key: str
    number: int
    name: str
    shapes: str

    @property
    def accessible_name(self) -> str:
        return _("Stage {n}: {name}, {shapes}").format(n=self.number, name=_(self.name), shapes=self.shapes)


@dataclass(frozen=True)
class PipelineMap:
    columns: tuple[Column, ...]
    spans: tuple[Span, ...]
    links: tuple[StageLink, ...]  # in stage order
    bypass: tuple[int, int, int] | None = None  # (column, node, column): V's path past the scores to A·V

    def link(self, key: str) -> StageLink | None:
        return next((link for link in self.links if link.key == key), None)


def _shape(m) -> str:
    return "×".join(str(n) for n in m.shape)


def pipeline_map(sc: Scenario, run: AttentionRun, stack: TransformerRun | None, view: View) -> PipelineMap:
    """The map of this run: the head and block in view (``run`` is that block's attention)."""
    h = view.head
    head, w = run.heads[h], run.weights
    cross = run.context is not None
    block = stack.blocks[view.block] if stack is not None else None
    pre = block is not None and block.norm == "pre"
    s = "S" if cross else "T"  # keys and values come from the source sentence in cross-attention
    cols: list[Column] = []

    def add(stage: str | None, *nodes: Node, arrows: tuple[tuple[int, int], ...] | None = None,
            short: str = "") -> int:
        cols.append(Column(tuple(nodes), stage, arrows, short))
        return len(cols) - 1

    # 0) The input X; the source sentence C (cross-attention); positions added to both; LayerNorm₁
    #    first in a pre-norm block (C is not normalised).
    inputs = [Node("X", _shape(run.x), "T×d_model")]
    if cross:
        inputs.append(Node("C", _shape(run.context), "S×d_model"))
    add("x", *inputs)
    if (stack.pe if stack is not None else run.pe) is not None:  # sinusoidal or learned; not RoPE, ALiBi
        add("x", *(Node("+PE", n.shape, n.symbol) for n in inputs), short="+PE")
    if pre:
        add("x", Node("LayerNorm₁", _shape(block.ln1.output), "T×d_model"), *inputs[1:],
            arrows=((0, 0), (1, 1))[: len(inputs)], short="LayerNorm₁")
    block_start = len(cols) - 1 if pre else len(cols)
    # 1) The projections (weights: plain labels) and Q, K, V.
    w_col = add(None, Node("W_Q", _shape(w.w_q[h]), "d_model×d_k"), Node("W_K", _shape(w.w_k[h]), "d_model×d_k"),
                Node("W_V", _shape(w.w_v[h]), "d_model×d_v"), arrows=((0, 0), (1, 1), (1, 2)) if cross else None)
    qkv = add("qkv", Node("Q", _shape(head.q), "T×d_k"), Node("K", _shape(head.k), f"{s}×d_k"),
              Node("V", _shape(head.v), f"{s}×d_v"), arrows=((0, 0), (1, 1), (2, 2)))
    # 2) The scores from Q and K (V goes past, to A·V), after RoPE turns them by position.
    into_scores = ((0, 0), (1, 0))
    if rotates(run.positional_encoding):
        add("scores", Node("RoPE(Q)", _shape(head.q_rot), "T×d_k"), Node("RoPE(K)", _shape(head.k_rot), f"{s}×d_k"),
            arrows=((0, 0), (1, 1)), short="RoPE")
        into_scores = None
    score = {"dot": "Q·Kᵀ", "general": "Q·W_a·Kᵀ", "additive": _("additive")}[run.score]
    add("scores", Node(score, _shape(head.scores), f"T×{s}"), arrows=into_scores)
    # 3) ÷√d_k and τ, then ALiBi's bias; 4) the mask; 5) softmax; 6) A·V.
    divisor = "·".join((["√d_k"] if run.scales else []) + (["τ"] if run.temperature != 1 else [])) or "1"
    add("scaled", Node(f"÷{divisor}", _shape(head.scaled), f"T×{s}"))
    if head.bias is not None:
        add("scaled", Node("+ALiBi", _shape(head.bias), f"T×{s}"))
    add("mask", Node(mask_label(sc), _shape(head.masked), f"T×{s}", off=run.mask is None))
    add("softmax", Node(_("softmax") if run.attention == "softmax" else _("linear φ"), _shape(head.softmax), f"T×{s}"))
    av = add("output", Node("A·V", _shape(head.output), "T×d_v"))
    # 7) The heads side by side, then W_O.
    add("multihead", Node(_("concat"), _shape(run.concat), "T×h·d_v"))
    add("multihead", Node("·W_O", _shape(run.output), "T×d_model"))
    # 8)–10) The rest of the transformer block.
    if block is not None:
        add("addnorm1", Node(_("Add") if pre else _("Add & Norm"), _shape(block.h), "T×d_model"))
        add("ffn", Node("FFN", f"{_shape(block.ffn_hidden)}→{_shape(block.ffn_out)}", "T×d_ff→T×d_model"))
        add("addnorm2", Node(_("Add") if pre else _("Add & Norm"), _shape(block.output), "T×d_model"))

    spans = []
    if run.num_heads > 1:
        spans.append(Span(_("{n} heads · head {shown} shown").format(n=run.num_heads, shown=h + 1), w_col, av, 0))
    if stack is not None:
        n = len(stack.blocks)
        label = _("block {n} of {total}").format(n=view.block + 1, total=n) if n > 1 else _("transformer block")
        spans.append(Span(label, block_start, len(cols) - 1, len(spans)))
    return PipelineMap(tuple(cols), tuple(spans), _links(cols, visible_stages(sc.blocks)), (qkv, 2, av))


def mask_label(sc: Scenario) -> str:
    """"no mask", "mask: causal", "mask: ±2", "mask: stride 4", "mask: causal + cells"."""
    pattern = {"causal": _("causal"), "local": f"±{sc.window}",
               "strided": _("stride {n}").format(n=sc.window)}.get(sc.mask_mode, "")
    hand = _("cells") if sc.blocked or sc.padding else ""  # cells hidden by hand, padding
    parts = [p for p in (pattern, hand) if p]
    return _("mask: {what}").format(what=" + ".join(parts)) if parts else _("no mask")


def _links(cols: list[Column], stages: tuple[Stage, ...]) -> tuple[StageLink, ...]:
    links = []
    for stage in stages:
        nodes = [n for c in cols if c.stage == stage.key for n in c.nodes]
        if stage.key == "qkv":
            same = len({n.shape for n in nodes}) == 1
            shapes = _("{shape} each").format(shape=nodes[0].shape) if same else ", ".join(
                f"{n.label} {n.shape}" for n in nodes)
        elif stage.key == "mask":
            shapes = f"{nodes[-1].label}, {nodes[-1].shape}"
        else:
            shapes = nodes[-1].shape
        links.append(StageLink(stage.key, stage.number, stage.short, shapes))
    return tuple(links)


def compact(m: PipelineMap) -> PipelineMap:
    """The map as one chip per column, the weights left out (not stages), for a narrow screen."""
    kept = [i for i, c in enumerate(m.columns) if c.stage is not None]

    def at(i: int) -> int:  # the first kept column from column i on
        return next(k for k, old in enumerate(kept) if old >= i)

    cols = tuple(Column((m.columns[i].merged(),), m.columns[i].stage) for i in kept)
    spans = tuple(replace(s, first=at(s.first), last=at(s.last)) for s in m.spans)
    return PipelineMap(cols, spans, m.links)


