"""From a run to what the templates show: heatmap panels per stage, editor grids, the inspector.

No numbers are computed here: every value comes from the pipeline's record (app.maths.attention) or the
inspector's arithmetic (app.maths.arithmetic). This module only chooses labels, formats and layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from markupsafe import Markup, escape

from app.lesson.presets import PRESETS
from app.lesson.stages import (
    ACTIVATION_NAMES,
    ACTIVATION_WORDS,
    Options,
    Stage,
    describe,
    neighbours,
    stage_or_first,
    visible_stages,
)
from app.maths.arithmetic import BLOCK_CELLS as BLOCK_MATRICES
from app.maths.arithmetic import INSPECTABLE, CellRef, Explanation, cell_matrix, explain, parse_ref
from app.maths.attention import AttentionRun, HeadResult, TransformerRun, build_mask
from app.maths.backward import Gradients
from app.maths.cost import attention_cost
from app.maths.gradient_arithmetic import (
    GRADIENT_CELLS,
    GradientExplanation,
    explain_gradient,
    gradient_matrix,
    parse_gradient_ref,
)
from app.state.learning import companion_loss, companion_run, companion_scenario, curve_text, loss_and_gradients
from app.state.pin import decode_pin, describe_pin
from app.state.quiz import LABELS as QUIZ_LABELS
from app.state.quiz import check, hidden_cells, stage_results
from app.state.quiz import owner as cell_owner
from app.state.scenario import Scenario, View, departure, format_input
from app.view.attention_lines import LinesFigure, attention_lines
from app.view.charts.learn import loss_curve_svg, why_scale_context
from app.view.gradient_worked import gradient_worked
from app.view.heatmap import LegendStop, format_numbers, heatmap_table, legend
from app.view.lab_cost import cost_context, lab_context
from app.view.pipeline_map import pipeline_map
from app.view.typeset import prose
from app.view.worked import worked


@dataclass(frozen=True)
class Panel:
    title: str
    shape: str
    table: Markup
    legend: list[LegendStop]
    kind: str
    ref: str = ""  # the table's data-ref, e.g. "softmax.0": what the export buttons ask for
    label: Markup = Markup("")  # the caption above the heatmap, its maths typeset (title when empty)


@dataclass(frozen=True)
class DiffView:
    """A stage against the pinned state: a difference heatmap per changed matrix."""

    panels: list[Panel]
    unchanged: list[str]  # titles of the matrices equal to the pinned ones
    notes: list[str]  # why a matrix could not be compared (its shape changed, …)


@dataclass(frozen=True)
class StageView:
    stage: Stage
    panels: dict[str, Panel]
    title: str
    formula: str
    explanation: str
    quiz: tuple[str, ...] = ()  # the matrices a quiz hides here
    diff: DiffView | None = None
    lines: LinesFigure | None = None  # the weights as lines between tokens (softmax and output stages)


@dataclass(frozen=True)
class EditorGrid:
    """A matrix of number inputs: field names, values and accessible labels, row by row."""

    key: str
    title: str
    shape: str
    col_labels: list[str]
    rows: list[tuple[str, list[tuple[str, str, str]]]]  # (row label, [(name, value, aria label)])


# The matrices with one cell reference for the whole run (owner 0), whatever the head in view.
RUN_CELLS = ("final", "g_final", "g_w_o")

# A gradient's matrix: its name in a plain title (∂L/∂A) and in LaTeX.
GRADIENT_TITLES = {"final": "MultiHead", "output": "Output", "softmax": "A", "scaled": "Scaled", "scores": "Scores",
                   "q": "Q", "k": "K", "v": "V", "w_q": "W_Q", "w_k": "W_K", "w_v": "W_V", "w_o": "W_O"}
GRADIENT_TEX = {"final": r"\text{MultiHead}", "output": r"\text{Output}", "softmax": "A", "scaled": r"\text{Scaled}",
                "scores": r"\text{Scores}", "q": "Q", "k": "K", "v": "V", "w_q": "W_Q", "w_k": "W_K", "w_v": "W_V",
                "w_o": "W_O"}

# Heatmap titles (plain text: table captions, exports) and the same as prose with typeset maths.
TITLE_TEX: dict[str, str] = {
    "Q": "$Q$", "K": "$K$", "V": "$V$", "Kᵀ": r"$K^{\top}$",
    "Q = X·W_Q": "$Q = X W_Q$", "K = C·W_K": "$K = C W_K$", "V = C·W_V": "$V = C W_V$",
    "W_Q": "$W_Q$", "W_K": "$W_K$", "W_V": "$W_V$", "W_O": "$W_O$", "W_a": "$W_a$", "W₁": "$W_1$",
    "W₂": "$W_2$", "v_a": "$v_a$",
    "Q rotated (RoPE)": r"$\tilde{Q}$: $Q$ rotated (RoPE)", "K rotated (RoPE)": r"$\tilde{K}$: $K$ rotated (RoPE)",
    "ALiBi bias −m·|i−j|": r"ALiBi bias $-m\, |i - j|$",
    "Q·W_a": "$Q W_a$", "Q·W₁": "$Q W_1$", "K·W₂": "$K W_2$",
    "Scores Q·Kᵀ": r"Scores $Q K^{\top}$", "Scores (Q·W_a)·Kᵀ": r"Scores $(Q W_a) K^{\top}$",
    "Scores v_a·tanh(q_i·W₁ + k_j·W₂)": r"Scores $v_a \cdot \tanh(q_i W_1 + k_j W_2)$",
    "Scaled Q·Kᵀ/√d_k": r"Scaled $Q K^{\top} / \sqrt{d_k}$",
    "Scaled (additive: not ÷√d_k)": r"Scaled (additive: not $\div \sqrt{d_k}$)",
    "Scaled (÷√d_k off)": r"Scaled ($\div \sqrt{d_k}$ off)",
    "Attention weights A": "Attention weights $A$", "Attention weights A (softmax)": "Attention weights $A$ (softmax)",
    "φ(Q) = elu(Q) + 1": r"$\varphi(Q) = \text{elu}(Q) + 1$", "φ(K) = elu(K) + 1": r"$\varphi(K) = \text{elu}(K) + 1$",
    "φ(K)ᵀ·V (built once)": r"$\varphi(K)^{\top} V$ (built once)",
    "Output A·V": "Output $A V$", "Softmax attention's output A·V": "Softmax attention's output $A V$",
    "Concat(head₁ … head_h)": r"$\text{Concat}(\text{head}_1, \ldots, \text{head}_h)$",
    "MultiHead(X) = Concat·W_O": r"$\text{MultiHead}(X) = \text{Concat}\, W_O$",
    "X = embeddings + PE": "$X = E + P$", "Embeddings": "Embeddings $E$",
    "LayerNorm₁(X): what the heads see": r"$\text{LayerNorm}_1(X)$: what the heads see",
    "MultiHead(LN₁(X))": r"$\text{MultiHead}(\text{LN}_1(X))$", "MultiHead(X)": r"$\text{MultiHead}(X)$",
    "X + MultiHead": r"$X + \text{MultiHead}$", "X + MultiHead = H": r"$X + \text{MultiHead} = H$",
    "H = LayerNorm₁(X + MultiHead)": r"$H = \text{LayerNorm}_1(X + \text{MultiHead})$",
    "LayerNorm₂(H)": r"$\text{LayerNorm}_2(H)$", "H": "$H$", "X": "$X$", "FFN": r"$\text{FFN}$",
    "H·W₁ + b₁": "$H W_1 + b_1$", "FFN = act·W₂ + b₂": r"$\text{FFN} = \text{act}\, W_2 + b_2$",
    "ReLU(H·W₁ + b₁)": r"$\text{ReLU}(H W_1 + b_1)$", "GELU(H·W₁ + b₁)": r"$\text{GELU}(H W_1 + b_1)$",
    "GELU_tanh(H·W₁ + b₁)": r"$\text{GELU}_{\tanh}(H W_1 + b_1)$",
    "H + FFN": r"$H + \text{FFN}$", "Source sentence C (keys and values)": "Source sentence $C$ (keys and values)",
    "LayerNorm₁ row statistics": r"$\text{LayerNorm}_1$ row statistics",
    "LayerNorm₂ row statistics": r"$\text{LayerNorm}_2$ row statistics",
}


def token_labels(tokens: tuple[str, ...]) -> list[str]:
    """"1 the", "2 cat", …: the page counts rows, columns and heads from 1."""
    return [f"{i + 1} {t}" for i, t in enumerate(tokens)]


def describe_scenario(sc: Scenario) -> str:
    """The scenario in one factual line, for a banner whose preset no longer describes it:
    "6 tokens, embeddings of 4, 2 heads, causal mask". Plain words, no maths: it quotes the tokens,
    which a student typed and which must never reach the maths converter."""
    t, h = len(sc.tokens), sc.num_heads
    words = f" “{' '.join(sc.tokens)}”" if t <= 8 else ""  # a short sentence is read at a glance
    parts = [f"{t} token{'s' if t != 1 else ''}{words}", f"embeddings of {sc.d_model}",
             f"{h} head{'s' if h != 1 else ''}"]
    if sc.d_k != max(1, sc.d_model // h) or sc.d_v != sc.d_k:
        parts.append(f"queries and keys of {sc.d_k}, values of {sc.d_v}")
    parts += {"causal": ["causal mask"], "local": [f"local window ±{sc.window}"],
              "strided": [f"strided mask (stride {sc.window})"]}.get(sc.mask_mode, [])
    if sc.blocked:
        parts.append(f"{len(sc.blocked)} cell{'s' if len(sc.blocked) != 1 else ''} hidden by hand")
    if sc.padding:
        parts.append(f"{len(sc.padding)} padding key{'s' if len(sc.padding) != 1 else ''}")
    if sc.cross:
        parts.append(f"cross-attention to {len(sc.context_tokens)} source tokens")
    parts += {"sinusoidal": ["sinusoidal PE"], "learned": ["learned PE"], "rope": ["RoPE"],
              "alibi": ["ALiBi"]}.get(sc.positional_encoding, [])
    parts += {"general": ["general (Luong) score"], "additive": ["additive (Bahdanau) score"]}.get(sc.score, [])
    if sc.attention == "linear":
        parts.append("linear attention")
    if not sc.scale:
        parts.append("no ÷√d_k")
    if sc.temperature != 1.0:
        parts.append(f"τ = {sc.temperature:g}")
    if sc.blocks:
        act = ACTIVATION_WORDS[sc.activation]
        parts.append(f"{sc.blocks} transformer block{'s' if sc.blocks != 1 else ''} ({sc.norm}-norm, {act}, "
                     f"d_ff = {sc.ffn_size})")
    return ", ".join(parts)


def summary_context(sc: Scenario) -> dict | None:
    """The banner: the preset's summary while it still describes the page (noting edited values),
    else a factual line for the scenario as it is now. None without a preset."""
    if sc.preset_obj is None:
        return None
    structure, values = departure(sc)
    return {"edited": structure, "values_edited": values, "line": describe_scenario(sc) if structure else ""}


def head_label(sc: Scenario, h: int) -> str:
    """"head 3", or "head 3: where" when the preset names its heads."""
    p = PRESETS.get(sc.preset)
    names = p.head_names if p is not None and len(p.head_names) == sc.num_heads else ()
    return f"head {h + 1}: {names[h]}" if names else f"head {h + 1}"


def dim_labels(sc: Scenario) -> list[str]:
    p = PRESETS.get(sc.preset)
    if p is not None and len(p.dim_names) == sc.d_model:
        return list(p.dim_names)
    return [f"x{j + 1}" for j in range(sc.d_model)]


LINEAR_ARRAYS = {"lin_weights": "weights", "phi_q": "phi_q", "phi_k": "phi_k", "kv": "kv"}


def head_array(head: HeadResult, name: str) -> np.ndarray:
    """A head's matrix by panel name: its own fields, linear attention's, or linear − softmax."""
    if name in LINEAR_ARRAYS:
        return getattr(head.linear, LINEAR_ARRAYS[name])
    if name == "diff":
        return head.output - head.softmax_output  # (T, d_v)
    return getattr(head, name)


class PanelBuilder:
    """Builds the heatmaps of one run, each at most once per request. With transformer blocks,
    ``run`` is the attention of the block in view and ``stack`` the whole stack."""

    def __init__(self, sc: Scenario, run: AttentionRun, view: View, stack: TransformerRun | None = None,
                 grads: Gradients | None = None) -> None:
        self.sc, self.run, self.view, self.stack = sc, run, view, stack
        self.grads = grads  # the backward pass of the Learn panel's goal, None without one
        self.block = None if stack is None else stack.blocks[view.block]
        self.rows = token_labels(sc.tokens)
        self.keys = token_labels(sc.key_tokens)  # the source sentence's tokens in cross-attention
        self.dims = dim_labels(sc)
        self.selected = parse_ref(view.inspect, run, stack) or (
            parse_gradient_ref(view.inspect, grads) if grads is not None else None)
        self.hiding: tuple[str, ...] = ()  # the quiz's matrices in the stage being built
        self.options = Options(
            score=run.score, attention=run.attention, norm=sc.norm, cross=run.context is not None,
            masked=run.mask is not None, scale=run.scales, temperature=run.temperature != 1.0,
            alibi=run.heads[0].bias is not None, rope=run.heads[0].q_rot is not None,
            added_pe=run.pe is not None or (stack is not None and stack.pe is not None), activation=sc.activation,
            loss=view.learning.goal if view.learning is not None else "",
        )

    def _panel(self, m: np.ndarray, title: str, ref: str, rows: list[str], cols: list[str],
               kind: str = "signed", inspect: str = "", corner: str = "", label: str = "", suffix: str = "",
               decimals: int | None = None) -> Panel:
        """A heatmap. ``title`` is plain text (table caption, exports); ``label`` the same title as
        prose with $…$ maths for the figure's caption, followed by ``suffix`` (e.g. the head);
        ``decimals`` the page's unless given."""
        decimals = self.view.decimals if decimals is None else decimals
        label = label or TITLE_TEX.get(title, "")
        title += suffix
        caption = prose(label) + suffix if label else Markup("")
        sel = None
        if inspect and self.selected and self.selected.matrix == inspect:
            owner = self.view.block if inspect in BLOCK_MATRICES else self.view.head
            if self.selected.head == owner or inspect in RUN_CELLS:
                sel = (self.selected.row, self.selected.col)
        name = ref.partition(".")[0]
        hidden = None
        if name in self.hiding:
            hidden = hidden_cells(name, m, cell_owner(name, self.view.head, self.view.block), self.view.revealed)
        table, top = heatmap_table(
            m, row_labels=rows, col_labels=cols, kind=kind, decimals=decimals,
            ref=ref, caption=title, corner=corner, inspectable=bool(inspect), selected=sel, hidden=hidden,
        )
        shape = f"{m.shape[0]}×{m.shape[1]}"
        if hidden is not None and hidden.any():  # no scale or export that would give the values away
            return Panel(title, shape, table, [], kind, "", caption)
        return Panel(title, shape, table, legend(kind, top, decimals), kind, ref, caption)

    def parse(self, text: str) -> CellRef | None:
        """A cell reference of this run, forward or (with a goal) backward; None when it names no cell."""
        return parse_ref(text, self.run, self.stack) or (
            parse_gradient_ref(text, self.grads) if self.grads is not None else None)

    def cell_matrix(self, ref: CellRef) -> np.ndarray:
        if ref.matrix in GRADIENT_CELLS:
            return gradient_matrix(self.grads, ref.matrix, ref.head)
        return cell_matrix(self.run, ref, self.stack)

    def is_hidden(self, ref: CellRef) -> bool:
        """Whether the quiz hides this cell: a result of the stage in view, not yet revealed."""
        if not self.view.quiz or str(ref) in self.view.revealed:
            return False
        stage = stage_or_first(self.view.stage, page_stages(self.sc, self.view)).key
        return ref.matrix in stage_results(stage, self.stack, self.view.block)

    def head_matrix(self, name: str) -> Panel:
        h = self.view.head
        head = self.run.heads[h]
        m = head_array(head, name)
        hn = f" ({head_label(self.sc, h)})" if self.run.num_heads > 1 else ""
        ref = f"{name}.{h}"
        scaled_title = "Scaled Q·Kᵀ/√d_k" if self.run.scales else (
            "Scaled (additive: not ÷√d_k)" if self.run.score == "additive" else "Scaled (÷√d_k off)")
        scaled_label = TITLE_TEX[scaled_title]
        if self.run.temperature != 1.0:
            scaled_title += f" ÷ τ={self.run.temperature:g}"
            scaled_label += rf" $\div\, \tau$ ($\tau = {self.run.temperature:g}$)"
        if head.bias is not None:
            scaled_title += " + ALiBi bias"
            scaled_label += " + ALiBi bias"
        scores_title = {"dot": "Scores Q·Kᵀ", "general": "Scores (Q·W_a)·Kᵀ",
                        "additive": "Scores v_a·tanh(q_i·W₁ + k_j·W₂)"}[self.run.score]
        linear = head.linear is not None
        # Rows and columns are the token lists, or a prefix numbered here: "q" → q1, q2, … (only
        # for the matrix asked for).
        # In cross-attention the titles say where each comes from: queries from X, keys and values from C.
        cross = self.run.context is not None
        spec = {
            "q": ("Q = X·W_Q" if cross else "Q", self.rows, "q", "signed"),
            "k": ("K = C·W_K" if cross else "K", self.keys, "k", "signed"),
            "v": ("V = C·W_V" if cross else "V", self.keys, "v", "signed"),
            "q_rot": ("Q rotated (RoPE)", self.rows, "q", "signed"),
            "k_rot": ("K rotated (RoPE)", self.keys, "k", "signed"),
            "bias": ("ALiBi bias −m·|i−j|", self.rows, self.keys, "signed"),
            "q_w": ("Q·W_a", self.rows, "q", "signed"),
            "q_1": ("Q·W₁", self.rows, "a", "signed"),
            "k_2": ("K·W₂", self.keys, "a", "signed"),
            "scores": (scores_title, self.rows, self.keys, "signed"),
            "scaled": (scaled_title, self.rows, self.keys, "signed"),
            "softmax": ("Attention weights A (softmax)" if linear else "Attention weights A",
                        self.rows, self.keys, "weights"),
            "lin_weights": ("Linear attention's implied weights", self.rows, self.keys, "weights"),
            "phi_q": ("φ(Q) = elu(Q) + 1", self.rows, "q", "signed"),
            "phi_k": ("φ(K) = elu(K) + 1", self.keys, "k", "signed"),
            "kv": ("φ(K)ᵀ·V (built once)", "k", "v", "signed"),
            "output": ("Output (linear attention)" if linear else "Output A·V",
                       self.rows, "v", "signed"),
            "softmax_output": ("Softmax attention's output A·V", self.rows, "v", "signed"),
            "diff": ("Difference: linear − softmax", self.rows, "v", "signed"),
        }[name]
        title, rows, cols, kind = spec
        corner = "query ↓ key →" if cols is self.keys else ""
        if isinstance(rows, str):
            rows = [f"{rows}{i + 1}" for i in range(m.shape[0])]
        if isinstance(cols, str):
            cols = [f"{cols}{j + 1}" for j in range(m.shape[1])]
        inspect = name if name in INSPECTABLE else ""
        return self._panel(m, title, ref, rows, cols, kind, inspect=inspect, corner=corner,
                           label=scaled_label if name == "scaled" else "", suffix=hn)

    def transposed(self, name: str) -> Panel:
        """Kᵀ as the scores multiply it: d_k rows, one column per key, so the product reads row by
        column (K itself is inspectable in stage 1)."""
        h = self.view.head
        m = head_array(self.run.heads[h], name).T  # (d_k, S)
        hn = f" ({head_label(self.sc, h)})" if self.run.num_heads > 1 else ""
        title, label = {"k": ("Kᵀ", r"$K^{\top}$"), "k_rot": ("K̃ᵀ (RoPE)", r"$\tilde{K}^{\top}$ (RoPE)"),
                        "phi_k": ("φ(K)ᵀ", r"$\varphi(K)^{\top}$")}[name]
        rows = [f"k{i + 1}" for i in range(m.shape[0])]
        return self._panel(m, title, f"{name}T.{h}", rows, self.keys, label=label, suffix=hn,
                           corner="dim ↓ key →")

    def weight(self, name: str) -> Panel:
        h = self.view.head
        m = getattr(self.run.weights, name)[h]
        if m.ndim == 1:
            m = m[None, :]  # v_a: one row
        label = {"w_q": "W_Q", "w_k": "W_K", "w_v": "W_V", "w_a": "W_a", "w_1": "W₁", "w_2": "W₂", "v_a": "v_a"}[name]
        col = {"w_q": "q", "w_k": "k", "w_v": "v", "w_a": "k", "w_1": "a", "w_2": "a", "v_a": "a"}[name]
        rows = {"w_q": self.dims, "w_k": self.dims, "w_v": self.dims, "v_a": ["v_a"]}.get(
            name, [f"{'q' if name in ('w_a', 'w_1') else 'k'}{j + 1}" for j in range(m.shape[0])])
        cols = [f"{col}{j + 1}" for j in range(m.shape[1])]
        hn = f" ({head_label(self.sc, h)})" if self.run.num_heads > 1 else ""
        return self._panel(m, label, f"{name}.{h}", rows, cols, suffix=hn)

    def block_matrix(self, name: str, title: str, m: np.ndarray, cols: list[str] | None = None,
                     rows: list[str] | None = None, label: str = "") -> Panel:
        inspect = name if name in BLOCK_MATRICES else ""
        return self._panel(m, title, f"{name}.{self.view.block}", rows or self.rows,
                           cols or self.dims, inspect=inspect, label=label)

    def stats(self, key: str) -> Panel:
        ln = getattr(self.block, key)
        m = np.stack([ln.mean, ln.var], axis=1)  # (T, 2)
        n = "₁" if key == "ln1" else "₂"
        return self._panel(m, f"LayerNorm{n} row statistics", f"{key}stats.{self.view.block}",
                           self.rows, ["mean μ", "variance σ²"])

    def lines(self, stage: Stage) -> LinesFigure | None:
        """Every head's weights as lines between the tokens; not while a quiz hides the weights."""
        if "softmax" in self.hiding:
            h = self.view.head
            if hidden_cells("softmax", self.run.heads[h].softmax, h, self.view.revealed).any():
                return None
        p = PRESETS.get(self.sc.preset)
        focus = self.sc.tokens.index(p.focus) if p is not None and p.focus in self.sc.tokens else None
        return attention_lines(
            np.stack([head.softmax for head in self.run.heads]),  # (h, T, S)
            self.sc.tokens, self.sc.key_tokens, [head_label(self.sc, h) for h in range(self.run.num_heads)],
            fig_id=f"lines-{stage.key}", focus=focus, cross=self.sc.cross,
        )

    def gradient(self, name: str, m: np.ndarray, rows: list[str], cols: list[str], owner: int | None = None,
                 corner: str = "") -> Panel:
        """A gradient's heatmap, ``∂L/∂…`` in its caption, inspectable as ``g_<name>``."""
        owner = self.view.head if owner is None else owner
        per_head = owner == self.view.head and name not in ("final", "w_o")
        hn = f" ({head_label(self.sc, owner)})" if per_head and self.run.num_heads > 1 else ""
        title = f"∂L/∂{GRADIENT_TITLES[name]}"
        # Gradients are small: at least three decimals, so that they do not all print as 0.00.
        return self._panel(m, title, f"g_{name}.{owner}", rows, cols, inspect=f"g_{name}", corner=corner,
                           label=rf"$\partial L / \partial {GRADIENT_TEX[name]}$", suffix=hn,
                           decimals=max(self.view.decimals, 3))

    def backward_panels(self, key: str) -> dict[str, Panel]:
        """The heatmaps of a backward stage: the gradient it computes and what it is computed from."""
        h, g = self.view.head, self.grads
        head, hg = self.run.heads[h], g.heads[h]
        learning = self.view.learning
        q_cols = [f"q{j + 1}" for j in range(self.run.d_k)]
        k_cols = [f"k{j + 1}" for j in range(self.run.d_k)]
        v_cols = [f"v{j + 1}" for j in range(self.run.d_v)]
        corner = "query ↓ key →"
        p: dict[str, Panel] = {}
        softmax = hg.softmax is not None
        if key == "grad_a":
            if learning.goal == "output":
                p["target"] = self._panel(learning.target, "Target", "target", self.rows, self.dims,
                                          label=r"$\text{Target}$")
                p["final"] = self._panel(self.run.output, "MultiHead(X) = Concat·W_O", "final", self.rows, self.dims)
                p["g_final"] = self.gradient("final", g.output, self.rows, self.dims, owner=0)
                p["g_output"] = self.gradient("output", hg.output, self.rows, v_cols)
                p["v"] = self.head_matrix("v")
            elif learning.head == h:
                p["target"] = self._panel(learning.target, f"Target t for head {h + 1}", "target", self.rows,
                                          self.keys, kind="weights", corner=corner,
                                          label=f"Target $t$ for head {h + 1}")
            if softmax:
                p["softmax"] = self.head_matrix("softmax")
                p["g_softmax"] = self.gradient("softmax", hg.softmax, self.rows, self.keys, corner=corner)
        elif key == "grad_scores" and softmax:
            p["softmax"] = self.head_matrix("softmax")
            p["g_softmax"] = self.gradient("softmax", hg.softmax, self.rows, self.keys, corner=corner)
            p["g_scaled"] = self.gradient("scaled", hg.scaled, self.rows, self.keys, corner=corner)
            p["g_scores"] = self.gradient("scores", hg.scores, self.rows, self.keys, corner=corner)
        elif key == "grad_q":
            if softmax:
                p["g_scores"] = self.gradient("scores", hg.scores, self.rows, self.keys, corner=corner)
            p["k"] = self.head_matrix("k_rot" if head.k_rot is not None else "k")
            p["g_q"] = self.gradient("q", hg.q, self.rows, q_cols)
        elif key == "grad_k":
            if softmax:
                p["g_scores"] = self.gradient("scores", hg.scores, self.rows, self.keys, corner=corner)
            p["q"] = self.head_matrix("q_rot" if head.q_rot is not None else "q")
            p["g_k"] = self.gradient("k", hg.k, self.keys, k_cols)
        elif key == "grad_v":
            p["softmax"] = self.head_matrix("lin_weights" if not softmax else "softmax")
            p["g_output"] = self.gradient("output", hg.output, self.rows, v_cols)
            p["g_v"] = self.gradient("v", hg.v, self.keys, v_cols)
        elif key == "grad_w":
            w = g.weights
            p["g_w_q"] = self.gradient("w_q", w.w_q[h], self.dims, q_cols)
            p["g_w_k"] = self.gradient("w_k", w.w_k[h], self.dims, k_cols)
            p["g_w_v"] = self.gradient("w_v", w.w_v[h], self.dims, v_cols)
            concat_cols = [f"h{k + 1}·v{j + 1}" for k in range(self.run.num_heads) for j in range(self.run.d_v)]
            p["g_w_o"] = self.gradient("w_o", w.w_o, concat_cols, self.dims, owner=0)
        return p

    def stage(self, stage: Stage) -> StageView:
        self.hiding = stage_results(stage.key, self.stack, self.view.block) if self.view.quiz else ()
        try:
            return self._stage(stage)
        finally:
            self.hiding = ()

    def _stage(self, stage: Stage) -> StageView:
        run, block = self.run, self.block
        p: dict[str, Panel] = {}
        hidden = [f"f{j + 1}" for j in range(block.d_ff)] if block is not None else []
        if stage.key == "x":
            b = self.view.block
            pe = self.stack.pe if self.stack is not None else run.pe
            x_input = self.stack.x_input if self.stack is not None else run.x_input
            x = block.x if block is not None else run.x
            if pe is not None and b == 0:
                p["x_input"] = self._panel(x_input, "Embeddings", "x_input", self.rows, self.dims)
                p["pe"] = self._panel(pe, f"PE ({self.sc.positional_encoding})", "pe", self.rows, self.dims,
                                      label=f"$P$: positions ({self.sc.positional_encoding})")
                p["x"] = self._panel(x, "X = embeddings + PE", "x", self.rows, self.dims)
            else:
                p["x"] = self._panel(x, f"X = output of block {b}" if b else "X", "x", self.rows, self.dims,
                                     label=f"$X$ = output of block {b}" if b else "$X$")
            if block is not None and block.norm == "pre":
                p["ln1"] = self.block_matrix("ln1", "LayerNorm₁(X): what the heads see", block.ln1.output)
            if run.context is not None:
                p["context"] = self._panel(run.context, "Source sentence C (keys and values)", "context",
                                           self.keys, self.dims)
        elif stage.key == "qkv":
            for name in ("q", "k", "v"):
                p[f"w_{name}"] = self.weight(f"w_{name}")
                p[name] = self.head_matrix(name)
        elif stage.key == "scores":
            rope = run.heads[0].q_rot is not None
            p["q"] = self.head_matrix("q_rot" if rope else "q")
            k = "k_rot" if rope else "k"
            p["k"] = self.head_matrix(k) if run.score == "additive" else self.transposed(k)
            if run.score == "general":
                p["w_a"], p["q_w"] = self.weight("w_a"), self.head_matrix("q_w")
            elif run.score == "additive":
                p["w_1"], p["q_1"] = self.weight("w_1"), self.head_matrix("q_1")
                p["w_2"], p["k_2"] = self.weight("w_2"), self.head_matrix("k_2")
                p["v_a"] = self.weight("v_a")
            p["scores"] = self.head_matrix("scores")
        elif stage.key == "scaled":
            p["scores"], p["scaled"] = self.head_matrix("scores"), self.head_matrix("scaled")
            if run.heads[0].bias is not None:
                p["bias"] = self.head_matrix("bias")
        elif stage.key == "mask":
            p["scaled"] = self.head_matrix("scaled")
        elif stage.key == "softmax":
            p["scaled"], p["softmax"] = self.head_matrix("scaled"), self.head_matrix("softmax")
            if run.attention == "linear":
                p["lin_weights"] = self.head_matrix("lin_weights")
        elif stage.key == "output":
            if run.attention == "linear":
                for name in ("phi_q", "v", "kv", "output", "softmax_output", "diff"):
                    p[name] = self.head_matrix(name)
                p["phi_k"] = self.transposed("phi_k")
            else:
                p["softmax"], p["v"], p["output"] = (self.head_matrix(n) for n in ("softmax", "v", "output"))
        elif stage.key == "multihead":
            d_v = run.d_v
            concat_cols = [f"h{h + 1}·v{j + 1}" for h in range(run.num_heads) for j in range(d_v)]
            p["concat"] = self._panel(run.concat, "Concat(head₁ … head_h)", "concat", self.rows,
                                      concat_cols)
            p["w_o"] = self._panel(run.weights.w_o, "W_O", "w_o", concat_cols, self.dims)
            p["final"] = self._panel(run.output, "MultiHead(X) = Concat·W_O", "final", self.rows,
                                     self.dims, inspect="final")
        elif stage.key == "addnorm1" and block is not None:
            p["x"] = self.block_matrix("x", "X", block.x)
            p["mha"] = self.block_matrix("mha", "MultiHead(LN₁(X))" if block.norm == "pre" else "MultiHead(X)",
                                         block.attention.output)
            p["residual1"] = self.block_matrix("residual1", "X + MultiHead" + (" = H" if block.norm == "pre" else ""),
                                               block.residual1)
            if block.norm == "post":
                p["ln1"] = self.block_matrix("ln1", "H = LayerNorm₁(X + MultiHead)", block.ln1.output)
                p["stats"] = self.stats("ln1")
        elif stage.key == "ffn" and block is not None:
            if block.norm == "pre":
                p["ffn_in"] = self.block_matrix("ln2", "LayerNorm₂(H)", block.ln2.output)
                p["stats"] = self.stats("ln2")
            else:
                p["ffn_in"] = self.block_matrix("h", "H", block.h)
            p["ffn_w1"] = self.block_matrix("ffn_w1", "W₁", block.weights.ffn_w1, hidden, self.dims)
            p["ffn_hidden"] = self.block_matrix("ffn_hidden", "H·W₁ + b₁", block.ffn_hidden, hidden)
            p["ffn_act"] = self.block_matrix("ffn_act", f"{ACTIVATION_NAMES[block.activation]}(H·W₁ + b₁)",
                                             block.ffn_act, hidden)
            p["ffn_w2"] = self.block_matrix("ffn_w2", "W₂", block.weights.ffn_w2, self.dims, hidden)
            p["ffn_out"] = self.block_matrix("ffn_out", "FFN = act·W₂ + b₂", block.ffn_out)
        elif stage.key == "addnorm2" and block is not None:
            p["h"] = self.block_matrix("h", "H", block.h)
            p["ffn_out"] = self.block_matrix("ffn_out", "FFN", block.ffn_out)
            last = self.view.block + 1 == len(self.stack.blocks)
            nxt = "the final output" if last else f"block {self.view.block + 2}'s input"
            if block.norm == "post":
                p["residual2"] = self.block_matrix("residual2", "H + FFN", block.residual2)
                p["ln2"] = self.block_matrix("ln2", f"LayerNorm₂(H + FFN): {nxt}", block.ln2.output,
                                              label=rf"$\text{{LayerNorm}}_2(H + \text{{FFN}})$: {nxt}")
                p["stats"] = self.stats("ln2")
            else:
                p["residual2"] = self.block_matrix("residual2", f"H + FFN: {nxt}", block.residual2,
                                                    label=rf"$H + \text{{FFN}}$: {nxt}")
        elif stage.backward and self.grads is not None:
            p.update(self.backward_panels(stage.key))
        title, formula, explanation = describe(stage, self.options)
        drawn = stage.key == "softmax" or (stage.key == "output" and run.attention == "softmax")
        return StageView(stage, p, title, formula, explanation, quiz=self.hiding,
                         lines=self.lines(stage) if drawn else None)


def page_stages(sc: Scenario, view: View) -> tuple[Stage, ...]:
    """The stages the page steps through: the backward ones too when the Learn panel has a goal."""
    return visible_stages(sc.blocks, view.learning is not None and not sc.blocks)


def stage_views(builder: PanelBuilder, view: View) -> list[StageView]:
    stages = page_stages(builder.sc, view)
    if view.show_all:
        return [builder.stage(s) for s in stages]
    return [builder.stage(stage_or_first(view.stage, stages))]


def inspector(builder: PanelBuilder) -> Explanation | GradientExplanation | None:
    ref: CellRef | None = builder.selected
    if ref is None or builder.is_hidden(ref):  # a quiz shows the arithmetic after the prediction
        return None
    if ref.matrix in GRADIENT_CELLS:
        return explain_gradient(builder.run, builder.grads, builder.view.learning.loss_spec(), ref,
                                list(builder.sc.tokens), list(builder.sc.key_tokens), builder.dims)
    return explain(builder.run, ref, list(builder.sc.tokens), builder.dims, list(builder.sc.key_tokens),
                   builder.stack)


def editor_grids(sc: Scenario, view: View, run: AttentionRun, stack: TransformerRun | None = None) -> dict:
    """X (and the source sentence, and the learned position table), the selected head's W_Q, W_K,
    W_V, its rows of W_O and its score weights, and the first block's FFN and LayerNorms, as grids
    of inputs. The weights are the run's (the first block's), so they are not rebuilt from the
    base and the edits a second time per request."""
    w = run.weights
    h = view.head
    hn = f" ({head_label(sc, h)})" if sc.num_heads > 1 else ""
    dims = dim_labels(sc)

    def grid(key: str, title: str, m: np.ndarray, row_labels: list[str], col_labels: list[str],
             aria: str) -> EditorGrid:
        if m.ndim == 1:
            m = m[None, :]
        body = [
            (rl, [(f"{key}-{i}-{j}", format_input(v), f"{aria} row {rl}, column {col_labels[j]}")
                  for j, v in enumerate(row)])
            for i, (rl, row) in enumerate(zip(row_labels, m.tolist(), strict=True))
        ]
        return EditorGrid(key, title, f"{m.shape[0]}×{m.shape[1]}", col_labels, body)

    def cols(prefix: str, n: int) -> list[str]:
        return [f"{prefix}{j + 1}" for j in range(n)]

    d_v = sc.d_v
    o_rows = [f"h{h + 1}·v{j + 1}" for j in range(d_v)]
    grids = {
        "x": grid("x", "X (target sentence: queries)" if sc.cross else "X", sc.x, token_labels(sc.tokens), dims,
                  "X"),
        "c": None,
        "pos": None,
        "weights": [
            grid("w_q", f"W_Q{hn}", w.w_q[h], dims, cols("q", sc.d_k), f"W_Q{hn}"),
            grid("w_k", f"W_K{hn}", w.w_k[h], dims, cols("k", sc.d_k), f"W_K{hn}"),
            grid("w_v", f"W_V{hn}", w.w_v[h], dims, cols("v", d_v), f"W_V{hn}"),
            grid("w_o", f"W_O rows of head {h + 1}", w.w_o[h * d_v:(h + 1) * d_v], o_rows, dims, "W_O"),
        ],
        "score": [],
        "block": [],
    }
    if sc.score == "general":
        grids["score"] = [grid("w_a", f"W_a{hn}", w.w_a[h], cols("q", sc.d_k), cols("k", sc.d_k), f"W_a{hn}")]
    elif sc.score == "additive":
        grids["score"] = [
            grid("w_1", f"W₁{hn}", w.w_1[h], cols("q", sc.d_k), cols("a", sc.d_k), f"W₁{hn}"),
            grid("w_2", f"W₂{hn}", w.w_2[h], cols("k", sc.d_k), cols("a", sc.d_k), f"W₂{hn}"),
            grid("v_a", f"v_a{hn}", w.v_a[h], ["v_a"], cols("a", sc.d_k), f"v_a{hn}"),
        ]
    if stack is not None:
        bw = stack.blocks[0].weights
        hidden = cols("f", stack.blocks[0].d_ff)
        grids["block"] = [
            grid("ffn_w1", "FFN W₁", bw.ffn_w1, dims, hidden, "FFN W₁"),
            grid("ffn_b1", "FFN b₁", bw.ffn_b1, ["b₁"], hidden, "FFN b₁"),
            grid("ffn_w2", "FFN W₂", bw.ffn_w2, hidden, dims, "FFN W₂"),
            grid("ffn_b2", "FFN b₂", bw.ffn_b2, ["b₂"], dims, "FFN b₂"),
            grid("ln1_gamma", "LayerNorm₁ γ", bw.ln1_gamma, ["γ₁"], dims, "LayerNorm₁ γ"),
            grid("ln1_beta", "LayerNorm₁ β", bw.ln1_beta, ["β₁"], dims, "LayerNorm₁ β"),
            grid("ln2_gamma", "LayerNorm₂ γ", bw.ln2_gamma, ["γ₂"], dims, "LayerNorm₂ γ"),
            grid("ln2_beta", "LayerNorm₂ β", bw.ln2_beta, ["β₂"], dims, "LayerNorm₂ β"),
        ]
    if sc.cross and sc.context_x is not None:
        grids["c"] = grid("c", "C (source sentence: keys and values)", sc.context_x, token_labels(sc.context_tokens),
                          dims, "C")
    if sc.position_table is not None:
        positions = [f"pos {i + 1}" for i in range(sc.position_table.shape[0])]
        grids["pos"] = grid("pos", "P (learned position table)", sc.position_table, positions, dims, "P")
    return grids


def mask_grid(sc: Scenario, run: AttentionRun, view: View) -> Markup:
    """The mask stage's checkboxes as table rows: one per (query, key), labelled with the scaled
    score, or −∞ when hidden; a key hidden by the mask mode or as padding says why and cannot be
    unticked. Built in one pass, like a heatmap: at T = 64 that is 4,096 cells."""
    t, s = len(sc.tokens), len(sc.key_tokens)
    pattern = build_mask(sc.mask_mode, t, s, sc.window)
    pattern = np.zeros((t, s), dtype=bool) if pattern is None else pattern
    texts = format_numbers(run.heads[view.head].scaled, view.decimals)
    keys = [escape(f"key {j + 1} ({token})") for j, token in enumerate(sc.key_tokens)]
    rows = []
    for i, label in enumerate(token_labels(sc.tokens)):
        lab = escape(label)
        query = escape(f"query {i + 1} ({sc.tokens[i]})")
        cells = []
        for j in range(s):
            reason = sc.mask_mode if pattern[i, j] else ("padding" if j in sc.padding else "")
            hidden = bool(reason) or (i, j) in sc.blocked
            state = (" checked" if hidden else "") + (" disabled" if reason else "")
            why = f'<span class="why">{reason}</span>' if reason else ""
            cells.append(f'<td class="{"hidden" if hidden else "open"}"><label><input type="checkbox" '
                         f'name="block-{i}-{j}"{state} aria-label="hide {keys[j]} from {query}"> '
                         f'{"−∞" if hidden else texts[i][j]}</label>{why}</td>')
        rows.append(f'<tr><th scope="row">{lab}</th>{"".join(cells)}</tr>')
    return Markup("".join(rows))


def page_context(sc: Scenario, view: View) -> dict:
    """Everything the workspace templates need for one scenario."""
    first, stack = sc.compute()
    run = first if stack is None else stack.blocks[view.block].attention  # the block in view
    learning = view.learning if stack is None else None
    loss, grads = loss_and_gradients(run, learning) if learning is not None else (None, None)
    builder = PanelBuilder(sc, run, view, stack, grads)
    stages = page_stages(sc, view)
    current = stage_or_first(view.stage, stages)
    prev, nxt = neighbours(current.key, stages)
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
        "pipeline": pipeline_map(sc, run, stack, view),
        "prev": prev,
        "next": nxt,
        "stage_views": ctx_views,
        "explanation": explanation,
        "worked": None if explanation is None else (
            gradient_worked(explanation, view.decimals) if explanation.kind.startswith("grad_")
            else worked(explanation, view.decimals)),
        "dims": builder.dims,
        "token_rows": builder.rows,
        "key_rows": builder.keys,
        "head_labels": [head_label(sc, h) for h in range(sc.num_heads)],
        "mask_rows": mask_grid(sc, run, view) if any(v.stage.key == "mask" for v in ctx_views) else Markup(""),
        "lab": lab_panel(sc, run) if "lab" in view.panels else None,
        "cost": cost_panel(sc, run, stack) if "cost" in view.panels else None,
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
        steps.append(GradientStep(stage.key, stage.number, stage.short, symbol, size, bar))
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
        curve=loss_curve_svg(curve, chart_id="loss-curve", title="Loss during training", width=320, height=140),
        curve_text=curve_text(learning.losses), first_step=learning.first_step,
        target=target_grid(sc, learning),
        rows=token_labels(sc.tokens),
        preset_goal=PRESETS[sc.preset].goal if sc.preset in PRESETS else "",
        why_scale=why_scale_context() if sc.preset in PRESETS and PRESETS[sc.preset].goal == "why-scale" else None,
        grad_norms={name: float(np.linalg.norm(getattr(grads.weights, name)))
                    for name in ("w_q", "w_k", "w_v", "w_o")},
    )
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


def target_grid(sc: Scenario, learning) -> EditorGrid:
    """The goal's target as a grid of inputs: T × S weights for a head, or T × d_model outputs."""
    cols = token_labels(sc.key_tokens) if learning.goal == "attention" else dim_labels(sc)
    rows = token_labels(sc.tokens)
    body = [(rl, [(f"target-{i}-{j}", format_input(v), f"target row {rl}, column {cols[j]}")
                  for j, v in enumerate(row)])
            for i, (rl, row) in enumerate(zip(rows, learning.target.tolist(), strict=True))]
    return EditorGrid("target", "Target", f"{learning.target.shape[0]}×{learning.target.shape[1]}", cols, body)


def quiz_context(builder: PanelBuilder, current: Stage) -> dict | None:
    """The quiz box: the matrices to predict in the stage in view, their sizes, the feedback on
    the last prediction, and how many cells are revealed. None when no quiz is on."""
    view = builder.view
    if not view.quiz:
        return None
    names = stage_results(current.key, builder.stack, view.block)
    matrices = []
    for name in names:
        m = builder.cell_matrix(CellRef(name, cell_owner(name, view.head, view.block), 0, 0))
        hidden = hidden_cells(name, m, cell_owner(name, view.head, view.block), view.revealed)
        matrices.append({"name": name, "label": QUIZ_LABELS[name], "rows": m.shape[0], "cols": m.shape[1],
                         "hidden": int(hidden.sum()), "cells": m.size})
    feedback = check(view.guess, view.guess_ref, builder.run, builder.stack, view.decimals,
                     builder.grads) if view.guess_ref else None
    chosen = builder.parse(view.guess_ref)
    return {"matrices": matrices, "feedback": feedback, "chosen": chosen}


class _Collector(PanelBuilder):
    """A PanelBuilder that keeps each panel's matrix, labels and title by ref instead of rendering it."""

    def __init__(self, sc: Scenario, run: AttentionRun, view: View, stack: TransformerRun | None = None,
                 grads: Gradients | None = None) -> None:
        super().__init__(sc, run, view, stack, grads)
        self.found: dict[str, tuple[np.ndarray, list[str], list[str], str]] = {}
        self.labels: dict[str, tuple[str, str]] = {}  # ref → (prose label, suffix)

    def _panel(self, m: np.ndarray, title: str, ref: str, rows: list[str], cols: list[str],
               kind: str = "signed", inspect: str = "", corner: str = "", label: str = "", suffix: str = "",
               decimals: int | None = None) -> Panel:
        self.labels.setdefault(ref, (label or TITLE_TEX.get(title, ""), suffix))
        title += suffix
        self.found.setdefault(ref, (m, list(rows), list(cols), title))
        return Panel(title, f"{m.shape[0]}×{m.shape[1]}", Markup(""), [], kind, ref)

    def lines(self, stage: Stage) -> LinesFigure | None:
        return None  # matrices only


def _gradients(run: AttentionRun, stack: TransformerRun | None, view: View) -> Gradients | None:
    """The gradients of the Learn panel's goal for this run, None without a goal (or with blocks)."""
    if view.learning is None or stack is not None:
        return None
    try:
        return loss_and_gradients(run, view.learning)[1]
    except ValueError:  # the goal does not fit this run (a pinned state of other sizes)
        return None


def stage_diff(sc: Scenario, view: View, run: AttentionRun, stack: TransformerRun | None, pinned: Scenario,
               pinned_run: tuple[AttentionRun, TransformerRun | None], sv: StageView) -> DiffView:
    """Every matrix of the stage minus the same matrix in the pinned state (same head and block)."""
    now = _Collector(sc, run, replace(view, quiz=False), stack, _gradients(run, stack, view))
    now.stage(sv.stage)
    p_first, p_stack = pinned_run
    notes: list[str] = []
    if view.head >= pinned.num_heads:
        return DiffView([], [], [f"The pinned state has {pinned.num_heads} head(s): nothing to compare "
                                 f"with {head_label(sc, view.head)}."])
    if p_stack is not None and view.block >= len(p_stack.blocks):
        return DiffView([], [], [f"The pinned state has {len(p_stack.blocks)} block(s)."])
    p_run = p_first if p_stack is None else p_stack.blocks[view.block].attention
    then = _Collector(pinned, p_run, replace(view, quiz=False), p_stack, _gradients(p_run, p_stack, view))
    then.stage(sv.stage)
    panels, unchanged = [], []
    draw = PanelBuilder(sc, run, replace(view, inspect="", quiz=False), stack, now.grads)
    for ref, (m, rows, cols, title) in now.found.items():
        if ref.partition(".")[0] in sv.quiz:
            notes.append(f"{title}: hidden by the quiz.")
            continue
        if ref not in then.found:
            notes.append(f"{title}: not in the pinned state.")
            continue
        before = then.found[ref][0]
        if before.shape != m.shape:
            notes.append(f"{title}: {before.shape[0]}×{before.shape[1]} when pinned, {m.shape[0]}×{m.shape[1]} now.")
            continue
        delta = m - before
        if not np.any(delta):
            unchanged.append(title)
            continue
        label, suffix = now.labels[ref]
        panel = draw._panel(delta, f"Δ {title.removesuffix(suffix)}", f"delta-{ref}", rows, cols,
                            label=f"Δ {label}" if label else "", suffix=suffix)
        panels.append(replace(panel, ref=""))  # a difference is not exported
    return DiffView(panels, unchanged, notes)


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
        finder = _Collector(sc, run, v, stack, _gradients(run, stack, v))
        for stage in page_stages(sc, v):
            finder.stage(stage)
            if ref in finder.found:
                return finder.found[ref]
    return None
