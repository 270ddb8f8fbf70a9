"""The panel primitives: one heatmap of a run (a head's matrix, a weight, a block's matrix, a
gradient) at a time, with its labels, its quiz-hidden cells and its inspector selection.

No numbers are computed here: every value comes from the pipeline's record (app.maths.attention).
The stages choose which panels they show (app.view.stage_panels).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from markupsafe import Markup

from app.i18n import N_
from app.i18n import gettext as _
from app.lesson.presets import PRESETS
from app.lesson.stages import Options, Stage, stage_or_first, visible_stages
from app.maths.arithmetic import BLOCK_CELLS as BLOCK_MATRICES
from app.maths.arithmetic import INSPECTABLE, CellRef
from app.maths.backward import Gradients
from app.maths.positions import biases, rotates
from app.maths.records import AttentionRun, HeadResult, TransformerRun
from app.maths.weights import WEIGHTS
from app.state.cells import parse_cell
from app.state.quiz import hidden_cells, stage_results
from app.state.quiz import owner as cell_owner
from app.state.scenario import Scenario, View
from app.view.attention_lines import LinesFigure, attention_lines
from app.view.heatmap import Legend, constant_value, heatmap_table, legend
from app.view.labels import GRADIENT_TEX, GRADIENT_TITLES, TITLE_TEX, dim_labels, head_label, token_labels
from app.view.typeset import prose


@dataclass(frozen=True)
class Panel:
    title: str
    shape: str
    table: Markup
    legend: Legend | None  # None: a quiz hides the values, so no scale
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


# The matrices with one cell reference for the whole run (owner 0), whatever the head in view.
RUN_CELLS = ("final", "g_final", "g_w_o")

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
        self.selected = parse_cell(view.inspect, run, stack, grads)
        self.hiding: tuple[str, ...] = ()  # the quiz's matrices in the stage being built
        self.options = stage_options(sc, run, stack, view.learning.goal if view.learning is not None else "")

    def _panel(self, m: np.ndarray, title: str, ref: str, rows: list[str], cols: list[str],
               kind: str = "signed", inspect: str = "", corner: str = "", label: str = "", suffix: str = "",
               decimals: int | None = None) -> Panel:
        """A heatmap. ``title`` is plain text (table caption, exports); ``label`` the same title as
        prose with $…$ maths for the figure's caption, followed by ``suffix`` (e.g. the head);
        ``decimals`` the page's unless given."""
        decimals = self.view.decimals if decimals is None else decimals
        label = label or TITLE_TEX.get(title, "")
        title = _(title) + suffix  # the English titles are catalogue messages (app.view.labels' N_)
        caption = prose(_(label)) + suffix if label else Markup("")
        corner = _(corner) if corner else ""
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
            return Panel(title, shape, table, None, kind, "", caption)
        return Panel(title, shape, table, legend(kind, top, decimals, constant_value(m, decimals)), kind, ref, caption)


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
            scaled_title = _(scaled_title) + f" ÷ τ={self.run.temperature:g}"
            scaled_label = _(scaled_label) + rf" $\div\, \tau$ ($\tau = {self.run.temperature:g}$)"
        if head.bias is not None:
            scaled_title = _("{title} + ALiBi bias").format(title=_(scaled_title))
            scaled_label = _("{title} + ALiBi bias").format(title=_(scaled_label))
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
            "masked": (N_("Masked: Scaled, −∞ where a key is hidden"), self.rows, self.keys, "signed"),
            "softmax": ("Attention weights A (softmax)" if linear else "Attention weights A",
                        self.rows, self.keys, "weights"),
            "lin_weights": (N_("Linear attention's implied weights"), self.rows, self.keys, "weights"),
            "phi_q": ("φ(Q) = elu(Q) + 1", self.rows, "q", "signed"),
            "phi_k": ("φ(K) = elu(K) + 1", self.keys, "k", "signed"),
            "kv": ("φ(K)ᵀ·V (built once)", "k", "v", "signed"),
            "output": (N_("Output (linear attention)") if linear else "Output A·V",
                       self.rows, "v", "signed"),
            "softmax_output": ("Softmax attention's output A·V", self.rows, "v", "signed"),
            "diff": (N_("Difference: linear − softmax"), self.rows, "v", "signed"),
        }[name]
        title, rows, cols, kind = spec
        corner = N_("query ↓ key →") if cols is self.keys else ""
        if isinstance(rows, str):
            rows = [f"{rows}{i + 1}" for i in range(m.shape[0])]
        if isinstance(cols, str):
            cols = [f"{cols}{j + 1}" for j in range(m.shape[1])]
        inspect = name if name in INSPECTABLE else ""
        label = {"scaled": scaled_label,
                 "masked": N_(r"$\text{Masked}$: $\text{Scaled}$, ${-\infty}$ where a key is hidden")}
        return self._panel(m, title, ref, rows, cols, kind, inspect=inspect, corner=corner,
                           label=label.get(name, ""), suffix=hn)

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
                           corner=N_("dim ↓ key →"))

    def weight(self, name: str) -> Panel:
        h = self.view.head
        m = getattr(self.run.weights, name)[h]
        if m.ndim == 1:
            m = m[None, :]  # v_a: one row
        label = WEIGHTS[name].label
        col = {"w_q": "q", "w_k": "k", "w_v": "v", "w_a": "k", "w_1": "a", "w_2": "a", "v_a": "a"}[name]
        rows = {"w_q": self.dims, "w_k": self.dims, "w_v": self.dims, "v_a": ["vₐ"]}.get(
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
                           self.rows, [_("mean μ"), _("variance σ²")])

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
            fig_id=f"lines-{stage.key}", focus=focus, cross=self.sc.cross, hidden=self.run.mask,
        )

    def gradient(self, name: str, m: np.ndarray, rows: list[str], cols: list[str], owner: int | None = None,
                 corner: str = "") -> Panel:
        """A gradient's heatmap, ``∂L/∂…`` in its caption, inspectable as ``g_<name>``."""
        owner = self.view.head if owner is None else owner
        per_head = owner == self.view.head and name not in ("final", "w_o")
        hn = f" ({head_label(self.sc, owner)})" if per_head and self.run.num_heads > 1 else ""
        title = f"∂L/∂{GRADIENT_TITLES[name]}"
        return self._panel(m, title, f"g_{name}.{owner}", rows, cols, inspect=f"g_{name}", corner=corner,
                           label=rf"$\partial L / \partial {GRADIENT_TEX[name]}$", suffix=hn,
                           decimals=gradient_decimals(self.view.decimals))


def gradient_decimals(decimals: int) -> int:
    """Gradients are small: at least three decimals, so that they do not all print as 0.00. Their heatmaps
    and the inspector's arithmetic both print them so, and a cell reads the same in both."""
    return max(decimals, 3)


def stage_options(sc: Scenario, run: AttentionRun, stack: TransformerRun | None, goal: str) -> Options:
    """What of the run changes a stage's words: the mechanisms in use, and the Learn panel's ``goal``."""
    return Options(
        score=run.score, attention=run.attention, norm=sc.norm, cross=run.context is not None,
        masked=run.mask is not None, scale=run.scales, temperature=run.temperature != 1.0,
        alibi=biases(run.positional_encoding), rope=rotates(run.positional_encoding),
        added_pe=run.pe is not None or (stack is not None and stack.pe is not None), activation=sc.activation,
        loss=goal,
    )


def page_stages(sc: Scenario, view: View) -> tuple[Stage, ...]:
    """The stages the page steps through: the backward ones too when the Learn panel has a goal."""
    return visible_stages(sc.blocks, view.learning is not None and not sc.blocks)

