"""Predict-then-reveal: which results a stage hides in a quiz, and how close a prediction is.

A quiz hides the results of the stage in view (its operands stay visible, so the student can work
the answer out). The student names a cell and types a prediction; the page says how far off it
was against a tolerance, then shows that cell and its arithmetic. Pure Python over the run's
record: nothing here changes a number.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.i18n import N_
from app.i18n import gettext as _
from app.maths.arithmetic import BLOCK_CELLS, CellRef, cell_matrix, parse_ref
from app.maths.backward import Gradients
from app.maths.gradient_arithmetic import GRADIENT_CELLS, gradient_matrix, parse_gradient_ref
from app.maths.records import AttentionRun, TransformerRun
from app.state.numbers import read_number

# What each stage computes: the matrices a quiz hides there (by panel name), in the order the
# quiz offers them. The mask stage computes nothing new; X is computed only with a positional
# encoding (embeddings + PE), which the student is not asked to add up.
STAGE_RESULTS: dict[str, tuple[str, ...]] = {
    "qkv": ("q", "k", "v"),
    "scores": ("scores",),
    "scaled": ("scaled",),
    "softmax": ("softmax",),
    "output": ("output",),
    "multihead": ("final",),
    "addnorm1": ("residual1", "ln1"),
    "ffn": ("ffn_hidden", "ffn_act", "ffn_out"),
    "addnorm2": ("residual2", "ln2"),
    # The backward pass (with a goal in the Learn panel).
    "grad_a": ("g_softmax",),
    "grad_scores": ("g_scaled", "g_scores"),
    "grad_q": ("g_q",),
    "grad_k": ("g_k",),
    "grad_v": ("g_v",),
    "grad_w": ("g_w_q", "g_w_k", "g_w_v", "g_w_o"),
}
# Each matrix as the page names it (a word translated where it is shown: cell_label, _(label) in templates).
LABELS = {
    "q": "Q", "k": "K", "v": "V", "scores": N_("scores"), "scaled": N_("scaled scores"), "softmax": N_("weights A"),
    "output": N_("output"), "final": N_("final output"), "residual1": "X + MultiHead", "ln1": "LayerNorm₁",
    "ffn_hidden": N_("FFN hidden"), "ffn_act": N_("FFN activation"), "ffn_out": N_("FFN output"),
    "residual2": "H + FFN",
    "ln2": "LayerNorm₂", "g_softmax": "∂L/∂A", "g_scaled": "∂L/∂Scaled", "g_scores": "∂L/∂Scores", "g_q": "∂L/∂Q",
    "g_k": "∂L/∂K", "g_v": "∂L/∂V", "g_w_q": "∂L/∂W_Q", "g_w_k": "∂L/∂W_K", "g_w_v": "∂L/∂W_V", "g_w_o": "∂L/∂W_O",
    "g_final": "∂L/∂MultiHead", "g_output": "∂L/∂Output",
}
WEIGHT_TOLERANCE = 0.05  # attention weights live in [0, 1]: within 0.05 is a good prediction
RELATIVE_TOLERANCE = 0.05  # other matrices: within 5 % of the matrix's largest |value|
NEAR = 3.0  # within three tolerances is "near"


def cell_label(name: str, row: int, col: int) -> str:
    """A cell as the page names it, counted from 1 (``row`` and ``col`` from 0): "weights A row 2, column 3"."""
    return _("{matrix} row {row}, column {col}").format(matrix=_(LABELS.get(name, name)), row=row + 1, col=col + 1)


def stage_results(stage: str, stack: TransformerRun | None, block: int) -> tuple[str, ...]:
    """The matrices the stage computes in this run. With pre-norm, Add & Norm₁ computes no
    LayerNorm (the next sub-layer's input is normalised inside the FFN stage instead)."""
    names = STAGE_RESULTS.get(stage, ())
    if stack is None:
        return tuple(n for n in names if n not in BLOCK_CELLS)
    if stack.blocks[block].norm == "pre":
        names = tuple(n for n in names if n not in ("ln1", "ln2"))
    return names


def owner(name: str, head: int, block: int) -> int:
    """The second number of a cell reference: the block for a block's matrix, else the head (0 for the
    matrices of the whole run: the final output, its gradient and W_O's)."""
    return 0 if name in ("final", "g_final", "g_w_o") else (block if name in BLOCK_CELLS else head)


def hidden_cells(name: str, m: np.ndarray, owner_index: int, revealed: frozenset[str]) -> np.ndarray:
    """True for each cell of matrix ``name`` still hidden: every cell but the revealed ones."""
    hidden = np.ones(m.shape, dtype=bool)
    prefix = f"{name}.{owner_index}."
    for ref in revealed:
        if ref.startswith(prefix):
            row, _, col = ref.removeprefix(prefix).partition(".")
            if row.isdigit() and col.isdigit() and int(row) < m.shape[0] and int(col) < m.shape[1]:
                hidden[int(row), int(col)] = False
    return hidden


def tolerance(name: str, m: np.ndarray, decimals: int) -> float:
    """How far off a prediction may be and still count: 0.05 for a weight, else 5 % of the
    matrix's largest |value|; never finer than the page's last shown decimal."""
    base = WEIGHT_TOLERANCE if name == "softmax" else RELATIVE_TOLERANCE * float(np.max(np.abs(m)))
    return max(base, 10.0 ** -decimals)


@dataclass(frozen=True)
class Feedback:
    ref: str
    label: str  # e.g. "weights A row 2, column 3": counted from 1, as the page counts
    guess: float | None  # None: what was typed is not a number
    value: float
    error: float  # guess − value
    tolerance: float
    verdict: str  # "close", "near", "off" or "nan"

    @property
    def message(self) -> str:
        if self.verdict == "nan":
            return _("Type a number to predict {label}.").format(label=self.label)
        return {"close": _("Close: within the tolerance."), "near": _("Near: within three times the tolerance."),
                "off": _("Off: more than three times the tolerance away.")}[self.verdict]


def check(guess: str, ref_text: str, run: AttentionRun, stack: TransformerRun | None,
          decimals: int, grads: Gradients | None = None) -> Feedback | None:
    """How close ``guess`` is to the cell ``ref_text`` names (a gradient's with ``grads``); None when it
    names no cell."""
    ref: CellRef | None = parse_ref(ref_text, run, stack)
    if ref is None and grads is not None:
        ref = parse_gradient_ref(ref_text, grads)
    if ref is None:
        return None
    m = gradient_matrix(grads, ref.matrix, ref.head) if ref.matrix in GRADIENT_CELLS else cell_matrix(run, ref, stack)
    value = float(m[ref.row, ref.col])
    label = cell_label(ref.matrix, ref.row, ref.col)
    tol = tolerance(ref.matrix, m, decimals)
    try:
        typed = read_number(guess)
    except ValueError:
        typed = float("nan")
    if not np.isfinite(typed):
        return Feedback(str(ref), label, None, value, 0.0, tol, "nan")
    error = typed - value
    verdict = "close" if abs(error) <= tol else ("near" if abs(error) <= NEAR * tol else "off")
    return Feedback(str(ref), label, typed, value, error, tol, verdict)
