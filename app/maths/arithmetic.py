"""The arithmetic behind one cell, with the run's actual numbers, for the cell inspector.

Each explanation is rebuilt from the inputs of its stage (not read back from the result), so a
test can check that the written-out terms really add up to the number in the heatmap.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from app.i18n import N_
from app.maths.blocks import LAYER_NORM_EPS
from app.maths.phrases import Phrase
from app.maths.records import AttentionRun, TransformerRun

ATTENTION_CELLS = ("q", "k", "v", "scores", "scaled", "softmax", "output", "final")
# A block's matrices: the second number of their reference is the block, not a head.
BLOCK_CELLS = ("residual1", "ln1", "ffn_hidden", "ffn_act", "ffn_out", "residual2", "ln2")
INSPECTABLE = ATTENTION_CELLS + BLOCK_CELLS
REF_RE = re.compile(rf"^({'|'.join(INSPECTABLE)})\.(\d+)\.(\d+)\.(\d+)$")


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
    total: float  # includes the bias
    bias: float | None = None  # added after the sum (the FFN's b₁, b₂)


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
    masked: bool = False  # a mask is on: the row is Masked (−∞ at hidden keys), not Scaled


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


@dataclass(frozen=True)
class AdditiveTerm:
    v: float  # v_a[a]
    q: float  # (Q·W₁)[i][a]
    k: float  # (K·W₂)[j][a]
    tanh: float  # tanh(q + k)
    product: float  # v · tanh


@dataclass(frozen=True)
class AdditiveScore:
    """Bahdanau: score_ij = Σ_a v_a[a] · tanh((Q·W₁)[i][a] + (K·W₂)[j][a])."""

    kind = "additive"
    ref: CellRef
    title: str
    terms: tuple[AdditiveTerm, ...]
    total: float


@dataclass(frozen=True)
class LayerNormCell:
    """out_ij = γ_j · (z_ij − μ_i) / √(σ²_i + ε) + β_j, with μ_i and σ²_i over row i."""

    kind = "layernorm"
    ref: CellRef
    title: str
    input_name: str
    row: tuple[float, ...]
    mean: float
    var: float
    eps: float
    value: float  # z_ij
    normalized: float
    gamma: float
    beta: float
    result: float


@dataclass(frozen=True)
class Elementwise:
    """One cell from one or two others: a residual sum, or an activation."""

    kind = "elementwise"
    ref: CellRef
    title: str
    formula: str  # LaTeX, with the numbers in
    result: float


Explanation = DotProduct | Division | SoftmaxRow | WeightedSum | AdditiveScore | LayerNormCell | Elementwise


def parse_ref(text: str, run: AttentionRun, stack: TransformerRun | None = None) -> CellRef | None:
    """A reference that names a real cell of this run (or of a block of ``stack``), or None."""
    m = REF_RE.match(text or "")
    if not m:
        return None
    ref = CellRef(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)))
    if ref.matrix in BLOCK_CELLS:
        if stack is None or ref.head >= len(stack.blocks):
            return None
    elif ref.head >= run.num_heads:
        return None
    rows, cols = _shape(run, ref, stack)
    return ref if ref.row < rows and ref.col < cols else None


def cell_matrix(run: AttentionRun, ref: CellRef, stack: TransformerRun | None = None) -> np.ndarray:
    """The whole matrix a valid reference points into (its cell is ``[ref.row, ref.col]``)."""
    if ref.matrix == "final":
        return run.output
    if ref.matrix in BLOCK_CELLS:
        value = getattr(stack.blocks[ref.head], ref.matrix)
        return value.output if ref.matrix in ("ln1", "ln2") else value
    return getattr(run.heads[ref.head], ref.matrix)


def _shape(run: AttentionRun, ref: CellRef, stack: TransformerRun | None) -> tuple[int, int]:
    return cell_matrix(run, ref, stack).shape


def _tex_number(v: float, bracket: bool = False) -> str:
    """A number for a LaTeX formula: four significant digits, never an exponent; a negative
    factor in brackets when ``bracket``."""
    text = np.format_float_positional(v, precision=4, unique=False, fractional=False, trim="-")
    return f"({text})" if bracket and v < 0 else text


def _dot(ref: CellRef, title: str, left_name: str, right_name: str, a: np.ndarray, b: np.ndarray,
         labels: list[str], bias: float | None = None) -> DotProduct:
    products = a * b
    terms = tuple(
        Term(float(x), float(y), float(p), lab)
        for x, y, p, lab in zip(a.tolist(), b.tolist(), products.tolist(), labels, strict=True)
    )
    total = float(products.sum()) + (0.0 if bias is None else bias)
    return DotProduct(ref, title, left_name, right_name, terms, total, bias)


def _of_head(title: str, run: AttentionRun, head: int) -> str:
    """A title naming its head when the run has several."""
    return Phrase(N_("{title} (head {n})"), title=title, n=head + 1) if run.num_heads > 1 else title


def _of_block(title: str, stack: TransformerRun, block: int) -> str:
    """A title naming its block when the stack has several."""
    return Phrase(N_("{title} (block {n})"), title=title, n=block + 1) if len(stack.blocks) > 1 else title


# A cell's title (English, a Phrase: the page says it in the reader's language); tokens and names are values.
_CELL = N_("{name}, row {row} ({token}), column {col}")
_CELL_DIM = N_("{name}, row {row} ({token}), column {col} ({dim})")


def divisor_text(run: AttentionRun) -> str:
    """What the scores are divided by, in words where it is 1 (English; a Phrase the page says in its language)."""
    text = f"√{run.d_k} ≈ {math.sqrt(run.d_k):.3f}" if run.scales else Phrase(
        N_("1 (additive scores are not scaled)") if run.score == "additive" else N_("1 (÷√d_k is off)"))
    if run.temperature != 1.0:
        text = Phrase("{divisor} × τ {tau} = {value}", divisor=text, tau=f"{run.temperature:g}",
                      value=f"{run.scale_factor:.3f}")
    return text


def _explain_block(stack: TransformerRun, ref: CellRef, tokens: list[str], dim_labels: list[str]) -> Explanation:
    block = stack.blocks[ref.head]
    i, j = ref.row, ref.col
    post = block.norm == "post"
    if ref.matrix in ("ln1", "ln2"):
        ln = getattr(block, ref.matrix)
        n = ref.matrix[2]
        gamma = getattr(block.weights, f"ln{n}_gamma")[j]
        beta = getattr(block.weights, f"ln{n}_beta")[j]
        source = {"ln1": "X + MultiHead" if post else "X", "ln2": "H + FFN" if post else "H"}[ref.matrix]
        return LayerNormCell(
            ref, _of_block(Phrase(_CELL_DIM, name=f"LayerNorm{'₁' if n == '1' else '₂'}", row=i + 1, token=tokens[i],
                                  col=j + 1, dim=dim_labels[j]), stack, ref.head),
            source,
            tuple(ln.input[i].tolist()), float(ln.mean[i]), float(ln.var[i]), LAYER_NORM_EPS,
            float(ln.input[i, j]), float(ln.normalized[i, j]), float(gamma), float(beta), float(ln.output[i, j]),
        )
    if ref.matrix == "ffn_hidden":
        title = Phrase(N_("FFN hidden layer, row {row} ({token}), unit f{unit}"), row=i + 1, token=tokens[i],
                       unit=j + 1)
        return _dot(ref, _of_block(title, stack, ref.head), "ffn_in", "W₁",
                    block.ffn_in[i], block.weights.ffn_w1[:, j], dim_labels, float(block.weights.ffn_b1[j]))
    if ref.matrix == "ffn_out":
        hidden = [f"f{m + 1}" for m in range(block.d_ff)]
        title = Phrase(N_("FFN output, row {row} ({token}), column {col} ({dim})"), row=i + 1, token=tokens[i],
                       col=j + 1, dim=dim_labels[j])
        return _dot(ref, _of_block(title, stack, ref.head), "act", "W₂",
                    block.ffn_act[i], block.weights.ffn_w2[:, j], hidden, float(block.weights.ffn_b2[j]))
    if ref.matrix == "ffn_act":
        z = float(block.ffn_hidden[i, j])
        a = float(block.ffn_act[i, j])
        zt, zb = _tex_number(z), _tex_number(z, bracket=True)
        formula = {
            "relu": rf"\text{{ReLU}}({zt}) = \max(0, {zt})",
            "gelu": rf"\text{{GELU}}({zt}) = \tfrac{{1}}{{2}} \cdot {zt} \cdot \big(1 + \text{{erf}}"
                    rf"({zt} / \sqrt{{2}})\big)",
            "gelu_tanh": rf"\text{{GELU}}_{{\tanh}}({zt}) = \tfrac{{1}}{{2}} \cdot {zt} \cdot \big(1 + \tanh\big("
                         rf"\sqrt{{2/\pi}} \cdot ({zt} + 0.044715 \cdot {zb}^3)\big)\big)",
        }[block.activation]
        title = Phrase(N_("FFN activation, row {row} ({token}), unit f{unit}"), row=i + 1, token=tokens[i], unit=j + 1)
        return Elementwise(ref, _of_block(title, stack, ref.head), formula, a)
    # residual1, residual2
    if ref.matrix == "residual1":
        left, right, names = block.x[i, j], block.attention.output[i, j], ("X", "MultiHead")
    else:
        left, right, names = block.h[i, j], block.ffn_out[i, j], ("H", "FFN")
    value = float(getattr(block, ref.matrix)[i, j])
    title = Phrase(_CELL, name=f"{names[0]} + {names[1]}", row=i + 1, token=tokens[i], col=j + 1)
    return Elementwise(ref, _of_block(title, stack, ref.head),
                       f"{_tex_number(float(left))} + {_tex_number(float(right), bracket=True)}", value)


_SCORE = N_("Score of query {query} ({token}) for key {key} ({key_token})")


def explain(run: AttentionRun, ref: CellRef, tokens: list[str], dim_labels: list[str],
            key_tokens: list[str] | None = None, stack: TransformerRun | None = None) -> Explanation:
    """The explanation of one cell; ``ref`` comes from parse_ref, so it is in range.

    ``key_tokens`` name the keys (the source sentence in cross-attention; ``tokens`` otherwise).
    """
    i, j = ref.row, ref.col
    keys = tokens if key_tokens is None else key_tokens
    if ref.matrix in BLOCK_CELLS and stack is not None:
        return _explain_block(stack, ref, tokens, dim_labels)
    if ref.matrix == "final":
        a = run.concat[i]
        b = run.weights.w_o[:, j]
        labels = [f"concat col {r}" for r in range(a.size)]
        title = Phrase(N_("Final output, row {row} ({token}), column {col} ({dim})"), row=i + 1, token=tokens[i],
                       col=j + 1, dim=dim_labels[j])
        return _dot(ref, title, "concat", "W_O",
                    a, b, labels)

    head = run.heads[ref.head]
    def pair() -> dict:  # the query's and key's numbers and tokens, for a score's title (j is a key there)
        return {"query": i + 1, "token": tokens[i], "key": j + 1, "key_token": keys[j]}

    if ref.matrix in ("q", "k", "v"):
        w = getattr(run.weights, f"w_{ref.matrix}")[ref.head]  # (d_model, d)
        name = ref.matrix.upper()
        source, src = (run.x, "X") if ref.matrix == "q" or run.context is None else (run.context, "C")
        row_tokens = tokens if src == "X" else keys
        title = Phrase(_CELL, name=name, row=i + 1, token=row_tokens[i], col=j + 1)
        return _dot(ref, _of_head(title, run, ref.head), src, f"W_{name}",
                    source[i], w[:, j], dim_labels)
    if ref.matrix == "scores":
        rope = head.q_rot is not None
        q = head.q if head.q_rot is None else head.q_rot
        k = head.k if head.k_rot is None else head.k_rot
        qn, kn = ("Q_rot", "K_rot") if rope else ("Q", "K")
        if run.score == "general":
            return _dot(ref, _of_head(Phrase(_SCORE, **pair()), run, ref.head), f"{qn}·W_a", kn,
                        head.q_w[i], k[j], [f"k={k}" for k in range(q.shape[1])])
        if run.score == "additive":
            v_a = run.weights.v_a[ref.head]
            pre = head.q_1[i] + head.k_2[j]
            terms = tuple(
                AdditiveTerm(float(va), float(a), float(b), float(t), float(va * t))
                for va, a, b, t in zip(v_a, head.q_1[i], head.k_2[j], np.tanh(pre), strict=True)
            )
            title = Phrase(N_("Additive score of query {query} ({token}) for key {key} ({key_token})"), **pair())
            return AdditiveScore(ref, _of_head(title, run, ref.head), terms, float(sum(t.product for t in terms)))
        return _dot(ref, _of_head(Phrase(_SCORE, **pair()), run, ref.head), qn, kn,
                    q[i], k[j], [f"k={k}" for k in range(q.shape[1])])
    if ref.matrix == "scaled":
        divisor = run.scale_factor
        text = divisor_text(run)
        bias = None if head.bias is None else float(head.bias[i, j])
        title = Phrase(N_("Scaled score of query {query} ({token}) for key {key} ({key_token})"), **pair())
        return Division(ref, _of_head(title, run, ref.head),
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
        masked = run.mask is not None
        title = Phrase(N_("Attention weights of query {query} ({token}), softmax of its masked row") if masked
                       else N_("Attention weights of query {query} ({token}), softmax of its row"),
                       query=i + 1, token=tokens[i])
        return SoftmaxRow(ref, _of_head(title, run, ref.head), entries, shift, total, masked)
    # output: a weighted sum of value rows (linear attention's implied weights in its mode)
    weights = head.softmax[i] if head.linear is None else head.linear.weights[i]
    rows = tuple(
        WeightedRow(float(a), tok, tuple(v), tuple((a * np.asarray(v)).tolist()))
        for a, tok, v in zip(weights.tolist(), keys, head.v.tolist(), strict=True)
    )
    result = tuple(float(s) for s in (weights @ head.v))
    name = "A" if head.linear is None else "A_linear"
    mixed = (N_("Output of query {query} ({token}): the value rows mixed by linear attention's weights")
             if name == "A_linear" else N_("Output of query {query} ({token}): the value rows mixed by its weights"))
    title = Phrase(mixed, query=i + 1, token=tokens[i])
    return WeightedSum(ref, _of_head(title, run, ref.head), rows, result)
