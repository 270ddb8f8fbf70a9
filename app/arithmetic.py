"""The arithmetic behind one cell, with the run's actual numbers, for the cell inspector.

Each explanation is rebuilt from the inputs of its stage (not read back from the result), so a
test can check that the written-out terms really add up to the number in the heatmap.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from app.pipeline import AttentionRun

REF_RE = re.compile(r"^(q|k|v|scores|scaled|softmax|output|final)\.(\d+)\.(\d+)\.(\d+)$")
INSPECTABLE = ("q", "k", "v", "scores", "scaled", "softmax", "output", "final")


@dataclass(frozen=True)
class CellRef:
    matrix: str
    head: int
    row: int
    col: int

    def __str__(self) -> str:
        return f"{self.matrix}.{self.head}.{self.row}.{self.col}"


@dataclass(frozen=True)
class Term:
    left: float
    right: float
    product: float
    label: str = ""  # e.g. the token or dimension the term comes from


@dataclass(frozen=True)
class DotProduct:
    """result = Σ left·right, written term by term."""

    kind = "dot"
    ref: CellRef
    title: str
    left_name: str
    right_name: str
    terms: tuple[Term, ...]
    total: float


@dataclass(frozen=True)
class Division:
    kind = "division"
    ref: CellRef
    title: str
    score: float
    divisor: float
    divisor_text: str
    result: float
    bias: float | None = None  # ALiBi's term, added after the division


@dataclass(frozen=True)
class SoftmaxEntry:
    token: str
    scaled: float
    exp: float
    weight: float
    selected: bool
    hidden: bool = False  # masked: exp(−∞) = 0


@dataclass(frozen=True)
class SoftmaxRow:
    """A_ij = exp(s_ij) / Σ exp(s_ij'), the whole row, as seed 003 works it by hand."""

    kind = "softmax"
    ref: CellRef
    title: str
    entries: tuple[SoftmaxEntry, ...]
    shift: float  # subtracted from every score before exp (0 unless the scores are large)
    total: float


@dataclass(frozen=True)
class WeightedRow:
    weight: float
    token: str
    value_row: tuple[float, ...]
    contribution: tuple[float, ...]


@dataclass(frozen=True)
class WeightedSum:
    """Output_i = Σ_j A_ij · V_j, a weighted sum of value rows."""

    kind = "weighted"
    ref: CellRef
    title: str
    rows: tuple[WeightedRow, ...]
    result: tuple[float, ...]


Explanation = DotProduct | Division | SoftmaxRow | WeightedSum


def parse_ref(text: str, run: AttentionRun) -> CellRef | None:
    """A reference that names a real cell of this run, or None."""
    m = REF_RE.match(text or "")
    if not m:
        return None
    ref = CellRef(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)))
    if ref.head >= run.num_heads:
        return None
    rows, cols = _shape(run, ref)
    return ref if ref.row < rows and ref.col < cols else None


def _shape(run: AttentionRun, ref: CellRef) -> tuple[int, int]:
    if ref.matrix == "final":
        return run.output.shape
    return getattr(run.heads[ref.head], ref.matrix).shape


def _dot(ref: CellRef, title: str, left_name: str, right_name: str, a: np.ndarray, b: np.ndarray,
         labels: list[str]) -> DotProduct:
    products = a * b
    terms = tuple(
        Term(float(x), float(y), float(p), lab)
        for x, y, p, lab in zip(a.tolist(), b.tolist(), products.tolist(), labels, strict=True)
    )
    return DotProduct(ref, title, left_name, right_name, terms, float(products.sum()))


def explain(run: AttentionRun, ref: CellRef, tokens: list[str], dim_labels: list[str],
            key_tokens: list[str] | None = None) -> Explanation:
    """The explanation of one cell; ``ref`` comes from parse_ref, so it is in range.

    ``key_tokens`` name the keys (the source sentence in cross-attention; ``tokens`` otherwise).
    """
    i, j = ref.row, ref.col
    keys = tokens if key_tokens is None else key_tokens
    if ref.matrix == "final":
        a = run.concat[i]
        b = run.weights.w_o[:, j]
        labels = [f"concat col {r}" for r in range(a.size)]
        return _dot(ref, f"output[{i}][{j}] = concat[{i}] · W_O[:, {j}]", "concat", "W_O", a, b, labels)

    head = run.heads[ref.head]
    hn = f" (head {ref.head + 1})" if run.num_heads > 1 else ""
    if ref.matrix in ("q", "k", "v"):
        w = getattr(run.weights, f"w_{ref.matrix}")[ref.head]  # (d_model, d)
        name = ref.matrix.upper()
        source, src = (run.x, "X") if ref.matrix == "q" or run.context is None else (run.context, "C")
        return _dot(ref, f"{name}[{i}][{j}] = {src}[{i}] · W_{name}[:, {j}]{hn}", src, f"W_{name}",
                    source[i], w[:, j], dim_labels)
    if ref.matrix == "scores":
        rope = head.q_rot is not None
        q = head.q if head.q_rot is None else head.q_rot
        k = head.k if head.k_rot is None else head.k_rot
        qn, kn = ("Q_rot", "K_rot") if rope else ("Q", "K")
        return _dot(ref, f"scores[{i}][{j}] = Σₖ {qn}[{i}][k] · {kn}[{j}][k]{hn}", qn, kn,
                    q[i], k[j], [f"k={k}" for k in range(q.shape[1])])
    if ref.matrix == "scaled":
        divisor = run.scale_factor
        text = f"√{run.d_k} ≈ {math.sqrt(run.d_k):.3f}" if run.scale else "1 (÷√d_k is off)"
        if run.temperature != 1.0:
            text += f" × τ {run.temperature:g} = {divisor:.3f}"
        bias = None if head.bias is None else float(head.bias[i, j])
        return Division(ref, f"scaled[{i}][{j}] = scores[{i}][{j}] ÷ √d_k{hn}",
                        float(head.scores[i, j]), divisor, text, float(head.scaled[i, j]), bias)
    if ref.matrix == "softmax":
        row = head.masked[i]
        top = float(row[np.isfinite(row)].max())
        # By hand, as seed 003 does, exp(s) is written directly; when the scores are large the
        # row maximum is subtracted first (the weights are the same), as the pipeline always does.
        shift = top if abs(top) > 30 else 0.0
        e = np.exp(row - shift)  # a hidden key's −inf gives exactly 0
        total = float(e.sum())
        entries = tuple(
            SoftmaxEntry(tok, float(s), float(x), float(x / total), jj == j, not np.isfinite(s))
            for jj, (tok, s, x) in enumerate(zip(keys, row.tolist(), e.tolist(), strict=True))
        )
        return SoftmaxRow(ref, f"softmax row {i} ({tokens[i]}){hn}", entries, shift, total)
    # output: a weighted sum of value rows
    weights = head.softmax[i]
    rows = tuple(
        WeightedRow(float(a), tok, tuple(v), tuple((a * np.asarray(v)).tolist()))
        for a, tok, v in zip(weights.tolist(), keys, head.v.tolist(), strict=True)
    )
    result = tuple(float(s) for s in (weights @ head.v))
    return WeightedSum(ref, f"output[{i}] = Σⱼ A[{i}][j] · V[j]{hn}", rows, result)
