"""A gradient cell's arithmetic, typeset: one explanation of app.maths.gradient_arithmetic as MathML.

As app.view.worked does for the forward: the formula in symbols first (indices counted from 1), then the
same with the run's numbers — negative factors in brackets, true minus signs — and the result last.
Symbols are fixed LaTeX converted once (app.view.typeset.fragment); numbers are built as MathML directly.
Token names only ever appear as escaped page text (the softmax-backward table's row headers).
"""

from __future__ import annotations

from markupsafe import Markup, escape

from app.i18n import gettext as _
from app.i18n import local_number
from app.maths.gradient_records import (
    GradientDivision,
    GradientExplanation,
    GradientNote,
    GradientSum,
    HiddenKey,
    Indexed,
    LossGradient,
    LossTerm,
    RopeGradient,
    SoftmaxBackward,
)
from app.maths.phrases import say
from app.view.typeset import (
    MINUS,
    frac,
    fragment,
    math_block,
    number,
    number_math,
    product,
    prose,
    signed_sum,
    sum_of,
    tex,
)
from app.view.worked import Worked, rounding_note

# The names app.maths.gradient_arithmetic gives matrices → LaTeX.
SYMBOLS = {
    "MultiHead": r"\text{MultiHead}", "Output": r"\text{Output}", "A": "A", "A_lin": r"A^{\text{lin}}",
    "Scaled": r"\text{Scaled}", "Scores": r"\text{Scores}", "Q": "Q", "K": "K", "V": "V",
    "Q_rot": r"\tilde{Q}", "K_rot": r"\tilde{K}", "X": "X", "C": "C", "Concat": r"\text{Concat}",
    "W_Q": "W_Q", "W_K": "W_K", "W_V": "W_V", "W_O": "W_O", "W_a": "W_a", "W_1": "W_1", "W_2": "W_2",
    "QW_a": r"Q W_a", "Q_rotW_a": r"\tilde{Q} W_a", "QW_1": r"Q W_1", "Q_rotW_1": r"\tilde{Q} W_1",
    "KW_2": r"K W_2", "K_rotW_2": r"\tilde{K} W_2",
}
# A gradient matrix of the page → the name of what it differentiates.
OF = {
    "g_final": "MultiHead", "g_output": "Output", "g_softmax": "A", "g_scaled": "Scaled", "g_scores": "Scores",
    "g_q": "Q", "g_k": "K", "g_v": "V", "g_w_q": "W_Q", "g_w_k": "W_K", "g_w_v": "W_V", "g_w_o": "W_O",
}


def entry(ix: Indexed) -> str:
    """M_{r,c} in LaTeX; ∂L/∂M_{r,c} as a fraction when the name starts with ∂. A product or a
    subscripted name is bracketed before its indices: (W_O)_{3,c}."""
    name = ix.name.removeprefix("∂")
    symbol = SYMBOLS[name]
    if "_" in symbol or " " in symbol:
        symbol = f"({symbol})"
    latex = f"{symbol}_{{{ix.row},{ix.col}}}"
    return rf"\frac{{\partial L}}{{\partial {latex}}}" if ix.name.startswith("∂") else latex


def _heading(latex: str) -> Markup:
    return math_block(fragment(latex, True), latex, display=True)


def _mn(value: float, decimals: int) -> str:
    return f"<mn>{local_number(f'{value:.{decimals}f}')}</mn>"


def _plain(value: float, decimals: int) -> str:
    return local_number(f"{round(value, decimals) + 0.0:.{decimals}f}")


def _result(value: float, d: int) -> Markup:
    return math_block(f"<mo>=</mo>{number(value, d)}", f"= {_plain(value, d)}")


def _hint(text: str) -> Markup:
    """Plain text, escaped: it may name a token."""
    return Markup('<span class="hint">') + escape(text) + Markup("</span>")


def _prose_hint(text: str) -> Markup:
    """Text written in this project with $…$ maths, typeset (never a token). Inline, ∂L/∂Q is written with a
    solidus, and MathML spaces both "/" and "∂" as operators; here they bind tight, as in print."""
    body = (str(prose(text)).replace("<mo>&#x0002F;</mo>", '<mo lspace="0" rspace="0">&#x0002F;</mo>')
            .replace("<mo>&#x02202;</mo>", "<mi>&#x02202;</mi>"))
    return Markup('<span class="hint">') + Markup(body) + Markup("</span>")


def _brackets(body: str) -> str:
    return f'<mrow><mo stretchy="false">(</mo>{body}<mo stretchy="false">)</mo></mrow>'


def _loss_term(direct: LossTerm, d: int) -> str:
    """− t / (T·A), the attention loss's term, with its numbers."""
    return (f"<mo>{MINUS}</mo>"
            + frac(number(direct.target, d), f"<mn>{direct.count}</mn><mo>·</mo>{number(direct.weight, d)}"))


def _sum_symbols(e: GradientSum) -> str:
    return rf"\sum_{{{e.index}}} {entry(e.left)}\, {entry(e.right)}"


def _grad_sum(e: GradientSum, d: int) -> Worked:
    symbolic = f"{entry(e.of)} = {_sum_symbols(e)}"
    if e.direct is not None:
        symbolic += rf" - \frac{{t_{{{e.of.row},{e.of.col}}}}}{{T \cdot A_{{{e.of.row},{e.of.col}}}}}"
    products = sum_of([product(t.left, t.right, d) for t in e.terms])
    values = signed_sum([t.product for t in e.terms], d)
    direct = direct_value = ""
    if e.direct is not None:
        direct = _loss_term(e.direct, d)
        rounded = round(e.direct.value, d) + 0.0
        direct_value = f"<mo>{MINUS if rounded < 0 else '+'}</mo>{number(abs(rounded), d)}"
    lines = [
        math_block(f"<mo>=</mo>{products}{direct}", _("the products")),
        math_block(f"<mo>=</mo>{values}{direct_value}", _("their values")),
    ]
    lines += rounding_note([t.product for t in e.terms] + ([] if e.direct is None else [e.direct.value]), e.total, d)
    if e.direct is not None and e.direct.target == 0:
        lines.append(_prose_hint(_("The target puts no weight on this key ($t = 0$), so the loss adds nothing here.")))
    if e.note:
        lines.append(_prose_hint(say(e.note)))
    lines.append(_result(e.total, d))
    return Worked(_heading(symbolic), lines)


def _loss(e: LossGradient, d: int) -> Worked:
    i, j = e.ref.row + 1, e.ref.col + 1
    out = rf"\text{{MultiHead}}_{{{i},{j}}}"
    left = rf"\frac{{\partial L}}{{\partial {out}}}"
    if e.loss != "mse":
        if e.head is None:
            words = _(r"The attention loss is on head's weights $A$, not on the output: it starts the "
                      r"backward pass at $\partial L / \partial A$, and nothing comes back through $W_O$.")
        else:
            words = _(r"The attention loss is on head {n}'s weights $A$, not on the output: it starts the "
                      r"backward pass at $\partial L / \partial A$, and nothing comes back through $W_O$."
                      ).format(n=e.head + 1)
        return Worked(_heading(f"{left} = 0"), [
            _prose_hint(words),
            _result(0.0, d),
        ])
    symbolic = rf"{left} = \frac{{2\,({out} - \text{{target}}_{{{i},{j}}})}}{{T\, d_{{\text{{model}}}}}}"
    difference = f"{number(e.output, d)}<mo>{MINUS}</mo>{number(e.target, d, bracket=True)}"
    numerator = f"<mn>2</mn><mo>·</mo>{_brackets(difference)}"
    return Worked(_heading(symbolic), [
        math_block(f"<mo>=</mo>{frac(numerator, f'<mn>{e.count}</mn>')}", _("the numbers")),
        _prose_hint(_(r"The loss is the mean over $T \cdot d_{{\text{{model}}}} = {count}$ squared differences."
                      ).format(count=e.count)),
        _result(e.result, d),
    ])


def _table(e: SoftmaxBackward, d: int) -> Markup:
    """The row key by key: A_ik, ∂L/∂A_ik and their product, as the forward's softmax row is tabled."""
    i = e.ref.row + 1
    weight, grad = tex(f"A_{{{i},k}}"), tex(rf"\frac{{\partial L}}{{\partial A_{{{i},k}}}}")
    row_sum = tex(rf"\sum_k A_{{{i},k}} \frac{{\partial L}}{{\partial A_{{{i},k}}}}")
    key, weight_of, grad_of, product = _("key"), _("weight {symbol}"), _("gradient {symbol}"), _("product")
    head = (f'<thead><tr><th scope="col">{escape(key)}</th>'
            f'<th scope="col">{escape(weight_of).format(symbol=weight)}</th>'
            f'<th scope="col">{escape(grad_of).format(symbol=grad)}</th>'
            f'<th scope="col">{escape(product)}</th></tr></thead>')
    hidden = _("0 (hidden)")
    rows = []
    for k, en in enumerate(e.entries):
        label = Markup(f"{k + 1} ") + escape(en.token)
        cls = ' class="sel"' if en.selected else ""
        if en.hidden:
            cells = f"<td>{escape(hidden)}</td><td>0</td><td>0</td>"
        else:
            cells = (f"<td>{number_math(en.weight, d)}</td><td>{number_math(en.grad, d)}</td>"
                     f"<td>{number_math(en.product, d)}</td>")
        rows.append(f'<tr{cls}><th scope="row">{label}</th>{cells}</tr>')
    sum_of, what = _("sum {symbol}"), _("softmax backward: one key per row")
    foot = (f'<tfoot><tr><th scope="row" colspan="3">{escape(sum_of).format(symbol=row_sum)}</th>'
            f"<td><strong>{number_math(e.row_sum, d)}</strong></td></tr></tfoot>")
    caption = f'<caption class="visually-hidden">{escape(what)}</caption>'
    return Markup(f'<table class="arith-table">{caption}{head}<tbody>{"".join(rows)}</tbody>{foot}</table>')


def _softmax_backward(e: SoftmaxBackward, d: int) -> Worked:
    i, j = e.ref.row + 1, e.ref.col + 1
    row_sum = rf"\sum_{{k}} A_{{{i},k}} \frac{{\partial L}}{{\partial A_{{{i},k}}}}"
    symbolic = (rf"\frac{{\partial L}}{{\partial \text{{Scaled}}_{{{i},{j}}}}} = A_{{{i},{j}}} \left("
                rf"\frac{{\partial L}}{{\partial A_{{{i},{j}}}}} - {row_sum}\right)")
    shown = [en for en in e.entries if not en.hidden]
    difference = f"{number(e.grad, d)}<mo>{MINUS}</mo>{number(e.row_sum, d, bracket=True)}"
    lines = [
        _table(e, d),
        math_block(f"{fragment(row_sum)}<mo>=</mo>{sum_of([product(en.weight, en.grad, d) for en in shown])}"
                   f"<mo>=</mo>{signed_sum([en.product for en in shown], d)}<mo>=</mo>{number(e.row_sum, d)}",
                   _("the row sum")),
        *rounding_note([en.product for en in shown], e.row_sum, d),
        math_block(f"<mo>=</mo>{number(e.weight, d)}<mo>·</mo>{_brackets(difference)}", _("the numbers")),
    ]
    if any(en.hidden for en in e.entries):
        lines.append(_hint(_("Hidden keys have weight 0 and gradient 0: they add nothing to the row sum.")))
    if e.target is not None:
        lines.append(_prose_hint(_(r"With the attention loss on these weights this is also $(A - t) / T$: "))
                     + math_block(frac(f"{number(e.weight, d)}<mo>{MINUS}</mo>{number(e.target, d, bracket=True)}",
                                       f"<mn>{e.count}</mn>")
                                  + f"<mo>=</mo>{number((e.weight - e.target) / e.count, d)}", "(A − t)/T"))
    lines.append(_result(e.result, d))
    return Worked(_heading(symbolic), lines)


def _division(e: GradientDivision, d: int) -> Worked:
    i, j = e.ref.row + 1, e.ref.col + 1
    root, tau = "√" in e.divisor_text, "τ" in e.divisor_text
    divisor = r"\sqrt{d_k}\,\tau" if root and tau else (r"\sqrt{d_k}" if root else (r"\tau" if tau else "1"))
    symbolic = (rf"\frac{{\partial L}}{{\partial \text{{Scores}}_{{{i},{j}}}}} = "
                rf"\frac{{\partial L}}{{\partial \text{{Scaled}}_{{{i},{j}}}}} \cdot \frac{{1}}{{{divisor}}}")
    lines = [
        math_block(f"<mo>=</mo>{frac(number(e.grad, d), _mn(e.divisor, max(d, 3)))}", _("the numbers")),
        _hint(_("divisor: {divisor}").format(divisor=say(e.divisor_text))),
    ]
    if e.bias:
        lines.append(_prose_hint(_(r"ALiBi's bias $-m \cdot |i - j|$ is a constant added after the division: it "
                                   "passes the gradient on unchanged.")))
    lines.append(_result(e.result, d))
    return Worked(_heading(symbolic), lines)


def _rope(e: RopeGradient, d: int) -> Worked:
    of = Indexed(f"∂{OF[e.ref.matrix]}", str(e.ref.row + 1), str(e.ref.col + 1))
    inner = [entry(s.of) for s in e.rotated]
    lines = [
        math_block(f"{fragment(entry(s.of))}<mo>=</mo>{fragment(_sum_symbols(s))}<mo>=</mo>"
                   f"{signed_sum([t.product for t in s.terms], d)}<mo>=</mo>{number(s.total, d)}",
                   _("the rotated gradient"))
        for s in e.rotated
    ]
    if e.rotated[0].note:
        lines.append(_prose_hint(say(e.rotated[0].note)))
    if not e.paired:
        lines.append(_hint(_("RoPE turns the dimensions in pairs; an odd last dimension is left as it is, "
                             "so its gradient passes on unchanged.")))
        lines.append(_result(e.result, d))
        return Worked(_heading(f"{entry(of)} = {inner[0]}"), lines)
    even, odd = (s.total for s in e.rotated)
    if e.first:
        symbolic = rf"{entry(of)} = {inner[0]} \cos\alpha + {inner[1]} \sin\alpha"
        numbers = f"{product(even, e.cos, d)}<mo>+</mo>{product(odd, e.sin, d)}"
    else:
        symbolic = rf"{entry(of)} = -{inner[0]} \sin\alpha + {inner[1]} \cos\alpha"
        numbers = f"<mo form=\"prefix\">{MINUS}</mo>{product(even, e.sin, d)}<mo>+</mo>{product(odd, e.cos, d)}"
    theta = f"<msub><mi>θ</mi><mn>{e.pair + 1}</mn></msub>"
    power = f"<msup><mn>10000</mn><mrow><mo>{MINUS}</mo><mn>{2 * e.pair}</mn><mo>/</mo><mn>{e.d_k}</mn></mrow></msup>"
    lines += [
        math_block(f"<mi>α</mi><mo>=</mo><mn>{e.position}</mn><mo>·</mo>{theta}<mo>=</mo><mn>{e.position}</mn>"
                   f"<mo>·</mo>{number(e.theta, max(d, 4))}<mo>=</mo>{number(e.angle, d)}<mo separator=\"true\">,"
                   f"</mo><mspace width=\"1em\"/>{theta}<mo>=</mo>{power}", _("the angle")),
        _prose_hint(_(r"RoPE turned this pair by $\alpha$: the position times $\theta$, positions counted from 0, "
                      r"so the first token is not turned. A rotation's gradient is the rotation back, by $-\alpha$.")),
        math_block(f"<mo>=</mo>{numbers}", _("the numbers")),
        _result(e.result, d),
    ]
    return Worked(_heading(symbolic), lines)


def _hidden(e: HiddenKey, d: int) -> Worked:
    i, j = e.ref.row + 1, e.ref.col + 1
    of = Indexed(f"∂{OF[e.ref.matrix]}", str(i), str(j))
    words = escape(_("Hidden key: a constant, gradient 0. Key {key} ({key_token}) is hidden from query {query} "
                     "({query_token}), so its weight is {zero} whatever the score: nothing before the mask can "
                     "change it."))
    why = Markup('<span class="hint">{}</span>').format(words.format(
        key=j, key_token=e.key_token, query=i, query_token=e.query_token, zero=tex(r"\exp(-\infty) = 0")))
    return Worked(_heading(f"{entry(of)} = 0"), [why, _result(0.0, d)])


def _note(e: GradientNote, d: int) -> Worked:
    of = Indexed(f"∂{OF[e.ref.matrix]}", str(e.ref.row + 1), str(e.ref.col + 1))
    return Worked(_heading(entry(of)), [_prose_hint(say(e.reason)), _result(e.result, d)])


def gradient_worked(e: GradientExplanation, decimals: int) -> Worked:
    """The typeset arithmetic of one gradient explanation: heading, then lines, the result last."""
    return {
        "grad_sum": _grad_sum, "grad_loss": _loss, "grad_softmax": _softmax_backward,
        "grad_division": _division, "grad_rope": _rope, "grad_hidden": _hidden, "grad_note": _note,
    }[e.kind](e, decimals)

