"""The inspector's arithmetic, typeset: one explanation of app.maths.arithmetic as MathML with its numbers.

Each cell gets its formula in symbols (indices counted from 1, as everywhere on the page), then the
same formula with the run's numbers — a negative factor in brackets, true minus signs — and the
result. Token names are page text around the maths, escaped by Jinja or here, never inside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from app.i18n import gettext as _
from app.i18n import local_number
from app.maths.arithmetic import (
    AdditiveScore,
    Division,
    DotProduct,
    Elementwise,
    Explanation,
    LayerNormCell,
    SoftmaxRow,
    WeightedSum,
)
from app.maths.phrases import say
from app.view.typeset import MINUS, fenced_list, frac, fragment, math_block, number, product, signed_sum, sqrt, sum_of

# A matrix's symbol in the inspector's formulas (LaTeX), and how its operands are indexed.
SYMBOLS = {
    "q": "Q", "k": "K", "v": "V", "scores": r"\text{Scores}", "scaled": r"\text{Scaled}", "softmax": "A",
    "output": r"\text{Output}", "final": r"\text{MultiHead}", "ffn_hidden": r"\text{Hidden}",
    "ffn_out": r"\text{FFN}", "ffn_act": r"\text{act}", "residual1": r"X + \text{MultiHead}",
    "residual2": r"H + \text{FFN}", "ln1": r"\text{LayerNorm}_1", "ln2": r"\text{LayerNorm}_2",
}
OPERANDS = {  # the names arithmetic gives a dot product's operands → LaTeX
    "X": "X", "C": "C", "W_Q": "W_Q", "W_K": "W_K", "W_V": "W_V", "Q": "Q", "K": "K", "Q_rot": r"\tilde{Q}",
    "K_rot": r"\tilde{K}", "Q·W_a": "(Q W_a)", "Q_rot·W_a": r"(\tilde{Q} W_a)", "concat": r"\text{Concat}",
    "W_O": "W_O", "ffn_in": r"\text{In}", "W₁": "W_1", "act": r"\text{act}", "W₂": "W_2",
}


@dataclass(frozen=True)
class Worked:
    """What the inspector shows for one cell: the formula in symbols, then lines of arithmetic
    (each a <math> or HTML with <math> inside), then, for a row, a table built by the template."""

    heading: Markup
    lines: list[Markup]


def _cell(matrix: str, i: int, j: int | None = None) -> str:
    """M_{i,j} with 1-based indices; a sum in brackets, a subscripted name in braces."""
    index = f"{i + 1}" if j is None else f"{i + 1},{j + 1}"
    symbol = SYMBOLS[matrix]
    if " + " in symbol:
        symbol = f"({symbol})"
    elif "_" in symbol:
        symbol = f"{{{symbol}}}"
    return f"{symbol}_{{{index}}}"


def _dot(e: DotProduct, d: int) -> Worked:
    i, j = e.ref.row, e.ref.col
    left, right = OPERANDS.get(e.left_name, rf"\text{{{e.left_name}}}"), OPERANDS.get(e.right_name, "W")
    if e.ref.matrix == "scores":  # a query row against a key row
        symbolic = rf"{_cell('scores', i, j)} = \sum_{{k}} {left}_{{{i + 1},k}}\, {right}_{{{j + 1},k}}"
    else:  # a row against a column of the weights
        symbolic = rf"{_cell(e.ref.matrix, i, j)} = \sum_{{m}} {left}_{{{i + 1},m}}\, ({right})_{{m,{j + 1}}}"
    if e.bias is not None:
        symbolic += rf" + (b)_{{{j + 1}}}"
    products = sum_of([product(t.left, t.right, d) for t in e.terms])
    values = signed_sum([t.product for t in e.terms], d)
    bias = "" if e.bias is None else f"<mo>+</mo>{number(e.bias, d, bracket=True)}"
    lines = [
        math_block(f"<mo>=</mo>{products}{bias}", _("the products")),
        math_block(f"<mo>=</mo>{values}{bias}", _("their values")),
        *rounding_note([t.product for t in e.terms] + ([] if e.bias is None else [e.bias]), e.total, d),
        math_block(f"<mo>=</mo>{number(e.total, d)}", f"= {_plain(e.total, d)}"),
    ]
    return Worked(Markup(math_block(fragment(symbolic, True), symbolic, display=True)), lines)


def _plain(value: float, decimals: int) -> str:
    """A number as text with a true minus sign: for a result in bold and for alttext."""
    return local_number(f"{round(value, decimals) + 0.0:.{decimals}f}")


def rounding_note(terms: Sequence[float], total: float, decimals: int) -> list[Markup]:
    """Nothing when the terms as printed add up to the total as printed; else a line that says why they do
    not: each term is rounded on its own, and the total is the exact sum, rounded once."""
    shown = sum(round(float(v), decimals) for v in terms)
    if _plain(shown, decimals) == _plain(total, decimals):
        return []
    return [Markup('<span class="hint rounding">') + escape(
        _("Terms rounded to {decimals} decimals: as printed they add up to {shown}; the exact sum is {exact}, "
          "which rounds to {total}.").format(decimals=decimals, shown=_plain(shown, decimals),
                                             exact=_plain(total, decimals + 3), total=_plain(total, decimals)))
            + Markup("</span>")]


def _division(e: Division, d: int) -> Worked:
    i, j = e.ref.row, e.ref.col
    divisor = r"\sqrt{d_k}" if "√" in e.divisor_text else ("1" if e.divisor == 1.0 else r"\tau")
    if "τ" in e.divisor_text and "√" in e.divisor_text:
        divisor = r"\sqrt{d_k}\,\tau"
    bias = rf" + B_{{{i + 1},{j + 1}}}" if e.bias is not None else ""
    symbolic = rf"{_cell('scaled', i, j)} = \frac{{{_cell('scores', i, j)}}}{{{divisor}}}{bias}"
    b = "" if e.bias is None else f"<mo>+</mo>{number(e.bias, d, bracket=True)}"
    numbers = frac(number(e.score, d), f"<mn>{local_number(f'{e.divisor:.{max(d, 3)}f}')}</mn>")
    lines = [
        math_block(f"<mo>=</mo>{numbers}{b}<mo>=</mo>{number(e.result, d)}", _("the numbers")),
        Markup('<span class="hint">{}</span>').format(_("divisor: {divisor}").format(divisor=say(e.divisor_text))),
    ]
    return Worked(math_block(fragment(symbolic, True), symbolic, display=True), lines)


def _softmax(e: SoftmaxRow, d: int) -> Worked:
    i, j = e.ref.row, e.ref.col
    s = r"\text{Masked}" if e.masked else r"\text{Scaled}"
    symbolic = (rf"A_{{{i + 1},{j + 1}}} = \frac{{\exp({s}_{{{i + 1},{j + 1}}})}}"
                rf"{{\sum_{{j'}} \exp({s}_{{{i + 1},j'}})}}")
    chosen = next(en for en in e.entries if en.selected)
    shown = [en for en in e.entries if not en.hidden]
    lines = [*rounding_note([en.exp for en in shown], e.total, d),
             *rounding_note([en.weight for en in shown], sum(en.weight for en in shown), d),
             math_block(f"<mo>=</mo>{frac(number(chosen.exp, d), number(e.total, d))}<mo>=</mo>"
                        f"{number(chosen.weight, d)}", _("the selected weight"))]
    return Worked(math_block(fragment(symbolic, True), symbolic, display=True), lines)


def _weighted(e: WeightedSum, d: int) -> Worked:
    i = e.ref.row
    a = r"A^{\text{lin}}" if "linear attention" in e.title else "A"
    symbolic = rf"\text{{Output}}_{{{i + 1}}} = \sum_{{j}} {a}_{{{i + 1},j}}\, V_j"
    lines = [math_block(f"<mo>=</mo>{fenced_list(e.result, d)}", _("the output row"))]
    return Worked(math_block(fragment(symbolic, True), symbolic, display=True), lines)


def _layernorm(e: LayerNormCell, d: int) -> Worked:
    i, j = e.ref.row, e.ref.col
    symbolic = (rf"{_cell(e.ref.matrix, i, j)} = \gamma_{{{j + 1}}} \frac{{x_{{{j + 1}}} - \mu}}"
                rf"{{\sqrt{{\sigma^2 + \varepsilon}}}} + \beta_{{{j + 1}}}")
    eps = f"<msup><mn>10</mn><mrow><mo>{MINUS}</mo><mn>5</mn></mrow></msup>"
    lines = [
        escape(_("row of {name}: {row}")).format(name=prose_text(e.input_name),
                                                 row=math_block(fenced_list(e.row, d), _("the row"))),
        math_block(f"<mi>μ</mi><mo>=</mo>{number(e.mean, d)}<mo separator=\"true\">,</mo><mspace width=\"1em\"/>"
                   f"<msup><mi>σ</mi><mn>2</mn></msup><mo>=</mo>{number(e.var, d)}", _("mean and variance")),
        math_block(frac(f"{number(e.value, d)}<mo>{MINUS}</mo>{number(e.mean, d, bracket=True)}",
                        sqrt(f"{number(e.var, d)}<mo>+</mo>{eps}"))
                   + f"<mo>=</mo>{number(e.normalized, d)}", _("normalised")),
        math_block(f"{number(e.gamma, d)}<mo>·</mo>{number(e.normalized, d, bracket=True)}<mo>+</mo>"
                   f"{number(e.beta, d, bracket=True)}<mo>=</mo>{number(e.result, d)}", _("gamma, beta")),
    ]
    return Worked(math_block(fragment(symbolic, True), symbolic, display=True), lines)


def prose_text(text: str) -> Markup:
    """Operand names from app.maths.arithmetic ("X + MultiHead") as escaped page text."""
    return Markup("<span>") + escape(text) + Markup("</span>")


def _elementwise(e: Elementwise, d: int) -> Worked:
    i, j = e.ref.row, e.ref.col
    symbolic = rf"{_cell(e.ref.matrix, i, j)}"
    body = fragment(e.formula) if e.formula else ""
    lines = [math_block(f"{body}<mo>=</mo>{number(e.result, d)}", e.formula)]
    return Worked(math_block(fragment(symbolic, True), symbolic, display=True), lines)


def _additive(e: AdditiveScore, d: int) -> Worked:
    i, j = e.ref.row, e.ref.col
    symbolic = (rf"{_cell('scores', i, j)} = \sum_{{a}} (v_a)_a \tanh\big((Q W_1)_{{{i + 1},a}}"
                rf" + (K W_2)_{{{j + 1},a}}\big)")
    lines = [math_block(f"<mo>=</mo>{signed_sum([t.product for t in e.terms], d)}<mo>=</mo>"
                        f"{number(e.total, d)}", _("the terms")),
             *rounding_note([t.product for t in e.terms], e.total, d)]
    return Worked(math_block(fragment(symbolic, True), symbolic, display=True), lines)


def worked(e: Explanation, decimals: int) -> Worked:
    """The typeset arithmetic of one explanation."""
    return {
        "dot": _dot, "division": _division, "softmax": _softmax, "weighted": _weighted,
        "layernorm": _layernorm, "elementwise": _elementwise, "additive": _additive,
    }[e.kind](e, decimals)
