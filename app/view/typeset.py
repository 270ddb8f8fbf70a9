"""Typeset maths for the page: MathML Core, rendered on the server, no script.

Fixed formulas are written in LaTeX beside the stage or template that shows them and converted
once by latex2mathml (maintained, pure Python, no JavaScript runtime, MathML Core output that
Chromium, Firefox and Safari render natively), then cached. The inspector's arithmetic carries
the run's numbers: it is built here directly as MathML from floats (``Num``, ``terms``), which is
cheap at 64 terms and never parses text.

Only text written in this project's source is ever converted. A token a student typed never
enters a formula: tokens stay in the surrounding HTML, where Jinja escapes them.

Chromium honours only ``mathvariant="normal"``, so bold and double-struck letters are written as
their Unicode code points (ℝ, 𝐖) by the converter; a minus sign is U+2212; −∞ is wrapped in its
own group so the minus is a prefix with no binary-operator space.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from latex2mathml.converter import convert
from markupsafe import Markup, escape

from app.i18n import decimal_sign_of, language, local_number
from app.i18n import gettext as _
from app.maths.phrases import say

MINUS = "\u2212"
_MATH_OPEN = re.compile(r'^<math xmlns="http://www.w3.org/1998/Math/MathML" display="(inline|block)">')
_INLINE_MATH = re.compile(r"\$([^$]+)\$")
_MN_DECIMAL = re.compile(r"<mn>(\d+)\.(\d+)</mn>")  # a formula's decimal number, as latex2mathml writes it
# A minus after an opening bracket, "=" or "," is a sign, not a subtraction: no operator spacing.
_PREFIX_MINUS = re.compile(
    r"(<mo[^>]*>&#x0002[8C];</mo>|<mo[^>]*>&#x0003D;</mo>|<mo[^>]*>&#x0005B;</mo>)<mo>&#x02212;</mo>")
# A function name keeps a thin space from a letter or number before it and from an argument without brackets
# after it (t_ij log A_ij), as TeX sets it; the converter leaves none, and log ran into t_ij and A.
_FUNCTION_NAME = re.compile(r"(</mi>|</mn>|</msub>|</msup>)?(<mi>(?:log|exp|tanh|sin|cos)</mi>)(<mo[^>]*>&#x00028;)?")
_THIN = '<mspace width="0.1667em"></mspace>'


def _function_space(m: re.Match[str]) -> str:
    before, name, bracket = m.group(1), m.group(2), m.group(3)
    return (before + _THIN if before else "") + name + (bracket or _THIN)


_SPOKEN = (
    (r"\\begin\{cases\}", " cases: "), (r"\\end\{cases\}", ""), (r"\\\\", "; "), ("&", " "),
    (r"\\frac", " fraction "), (r"\\sqrt", "√"), (r"\\sum", "Σ"), (r"\\cdot", "·"), (r"\\times", "×"),
    (r"\\top", "ᵀ"), (r"\\infty", "∞"), (r"\\in\b", "∈"), (r"\\div", "÷"), (r"\\tau", "τ"),
    (r"\\varphi", "φ"), (r"\\mu", "μ"), (r"\\sigma", "σ"), (r"\\gamma", "γ"), (r"\\beta", "β"),
    (r"\\partial", "∂"), (r"\\odot", "⊙"), (r"\\leftarrow", "←"), (r"\\eta", "η"), (r"\\log", "log "),
    (r"\\mathbb\{R\}", "ℝ"), (r"\\(left|right|big|quad|qquad|,|;|!)", " "),
)


def _alttext(latex: str) -> str:
    """A plain reading of the LaTeX for alttext: ℝ, Σ, √ for their commands; other commands by name."""
    text = latex
    words = {" cases: ": " {}: ".format(_("cases")), " fraction ": " {} ".format(_("fraction"))}
    for pattern, spoken in _SPOKEN:
        text = re.sub(pattern, words.get(spoken, spoken), text)
    text = re.sub(r"\\(text|mathrm|operatorname|mathbf|boldsymbol|tilde|hat)\s*", "", text)
    text = re.sub(r"\\([a-zA-Z]+)", r"\1", text)
    return re.sub(r"\s+", " ", text.replace("{", "").replace("}", "")).strip()


def _source(text: str) -> str:
    """Plain text of a formula: a template's {% filter %} block hands over Markup."""
    return text.unescape() if isinstance(text, Markup) else str(text)


def equations(latex: str) -> list[str]:
    """A display formula's equations, cut at the top-level ",\\qquad" between them, so each can be set
    on its own and a narrow screen wraps between them rather than scrolling one long line."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(latex):
        ch = latex[i]
        depth += ch == "{"
        depth -= ch == "}"
        if depth == 0 and latex.startswith(r",\qquad", i):
            parts.append(latex[start:i].strip())
            i += len(r",\qquad")
            start = i
            continue
        i += 1
    parts.append(latex[start:].strip())
    return [p for p in parts if p]


def tex(latex: str, display: bool = False) -> Markup:
    """MathML for a fixed LaTeX formula (cached: each distinct formula is converted once per language, as its
    alttext reads it)."""
    return _tex(_source(latex), display, language())


@lru_cache(maxsize=4096)
def _tex(latex: str, display: bool, lang: str) -> Markup:
    mathml = convert(latex, display="block" if display else "inline")
    mathml = mathml.replace("<mo>&#x0221E;</mo>", "<mi>&#x0221E;</mi>")  # ∞ is a symbol, not an operator
    mathml = _PREFIX_MINUS.sub(r'\1<mo form="prefix">&#x02212;</mo>', mathml)
    mathml = _FUNCTION_NAME.sub(_function_space, mathml)
    if decimal_sign_of(lang) != ".":  # a number of the formula (√2 ≈ 1.414) in the reader's decimal sign
        mathml = _MN_DECIMAL.sub(rf"<mn>\1{decimal_sign_of(lang)}\2</mn>", mathml)
    opening = f'<math display="{"block" if display else "inline"}" alttext="{escape(_alttext(latex))}">'
    mathml, found = _MATH_OPEN.subn(opening, mathml, count=1)
    if not found:  # the converter's opening tag changed: fail loudly rather than render something else
        raise ValueError(f"unexpected MathML from latex2mathml for {latex!r}")
    return Markup(mathml)


def prose(text: str) -> Markup:
    """Project-written text with inline maths between $…$: the text escaped, the maths typeset."""
    return _prose(_source(text), language())


@lru_cache(maxsize=1024)
def _prose(text: str, lang: str) -> Markup:
    parts = _INLINE_MATH.split(text)  # text, maths, text, maths, …
    return Markup("").join(tex(p) if i % 2 else escape(p) for i, p in enumerate(parts))


_SENTENCE_END = re.compile(r"(?<!e\.g)(?<!i\.e)\.\s+")


def lead_sentence(text: str) -> tuple[str, str]:
    """A text's first sentence and the rest (both $…$ source), split at the first full stop and space outside
    the maths: the page shows the first and folds the rest behind "more". No stop: the whole text, and ""."""
    parts = _INLINE_MATH.split(text)  # text, maths, text, maths, …
    offset = 0
    for i, part in enumerate(parts):
        if i % 2 == 0 and (end := _SENTENCE_END.search(part)):
            cut = offset + end.start() + 1
            return text[:cut], text[offset + end.end():]
        offset += len(part) + (2 if i % 2 else 0)  # a maths part lost its two $ in the split
    return text, ""


# --- MathML built from the run's numbers (the inspector) ---------------------------------------


def number(value: float, decimals: int, *, bracket: bool = False) -> str:
    """A number as MathML: <mn>, with a true minus sign in front when negative, and in brackets
    when it is a negative factor (``bracket``): 0.109·(−0.154). −0.000 prints as 0.000."""
    rounded = round(float(value), decimals) + 0.0
    if math.isinf(rounded):
        body = "<mi>∞</mi>" if rounded > 0 else f"<mrow><mo>{MINUS}</mo><mi>∞</mi></mrow>"
        return body
    text = f"{abs(rounded):.{decimals}f}"
    if rounded >= 0 or float(text) == 0.0:
        return f"<mn>{local_number(text)}</mn>"
    neg = f"<mrow><mo form=\"prefix\">{MINUS}</mo><mn>{local_number(text)}</mn></mrow>"
    return f'<mrow><mo stretchy="false">(</mo>{neg}<mo stretchy="false">)</mo></mrow>' if bracket else neg












def frac(numerator: str, denominator: str) -> str:
    return f"<mfrac><mrow>{numerator}</mrow><mrow>{denominator}</mrow></mfrac>"


def sqrt(body: str) -> str:
    return f"<msqrt>{body}</msqrt>"




def fenced_list(values: Iterable[float], decimals: int) -> str:
    """[v₁, v₂, …] as a bracketed row of numbers."""
    items = "<mo separator=\"true\">,</mo>".join(number(v, decimals) for v in values)
    return f"<mrow><mo>[</mo>{items}<mo>]</mo></mrow>"


def sum_of(parts: Sequence[str]) -> str:
    """a + b + c, each part already MathML (a product with its negative factors in brackets)."""
    return "<mo>+</mo>".join(parts)


def signed_sum(values: Sequence[float], decimals: int) -> str:
    """v₁ + v₂ − v₃ …: a negative term after the first is subtracted, as written by hand."""
    out = []
    for n, v in enumerate(values):
        rounded = round(float(v), decimals) + 0.0
        if n and rounded < 0:
            out.append(f"<mo>{MINUS}</mo>{number(-rounded, decimals)}")
        else:
            out.append(("<mo>+</mo>" if n else "") + number(rounded, decimals))
    return "".join(out)


def product(left: float, right: float, decimals: int) -> str:
    """left·right with each negative factor in brackets: (−0.177)·0.008, 0.109·(−0.154)."""
    return f"{number(left, decimals, bracket=True)}<mo>·</mo>{number(right, decimals, bracket=True)}"


def math_block(body: str, label: str, *, display: bool = False) -> Markup:
    """Wrap MathML built from numbers in <math>; ``label`` is its plain reading (alttext)."""
    mode = "block" if display else "inline"
    return Markup(f'<math display="{mode}" alttext="{escape(label)}"><mrow>{body}</mrow></math>')


def fragment(latex: str, display: bool = False) -> str:
    """The inner MathML of a fixed LaTeX formula, to splice into a built one."""
    html = str(tex(latex, display))
    return html[html.index(">") + 1: html.rindex("</math>")]


def number_math(value: float, decimals: int, bracket: bool = False) -> Markup:
    """One number as its own <math>: for table cells of the inspector."""
    return math_block(number(value, decimals, bracket=bracket), local_number(f"{value:.{decimals}f}"))


def vector_math(values: Sequence[float], decimals: int) -> Markup:
    return math_block(fenced_list(values, decimals), _("a row of numbers"))


def fraction_math(numerator: float, denominator: float, decimals: int) -> Markup:
    return math_block(frac(number(numerator, decimals), number(denominator, decimals)),
                      local_number(f"{numerator:.{decimals}f} / {denominator:.{decimals}f}"))


# --- the cost panel's counts: plain formulas such as "h·T·d_model·d_k", typeset -----------------------

_UNICODE_TEX = (
    ("d_model", r"d_{\text{model}}"), ("d_ff", r"d_{\text{ff}}"), ("·", r" \cdot "), ("×", r" \times "),
    ("−", "-"), ("²", "^2"), ("³", "^3"), ("ᵀ", r"^{\top}"), ("√", r"\sqrt "), ("φ", r"\varphi "),
    ("Σ", r"\sum "), ("ⱼ", "_j"), ("₁", "_1"), ("₂", "_2"), ("÷", r" \div "), ("γ", r"\gamma "),
    ("β", r"\beta "), ("τ", r"\tau "), ("…", r"\ldots "),
)
_MATH_WORD = re.compile(r"^[\s(]*[A-Za-z]?[\s(]*$|[_·ᵀ√φΣ²³₁₂ⱼ×÷]")


def unicode_tex(text: str) -> str:
    """A formula written with Unicode (h·T·d_model·d_k, φ(K)ᵀ·V) as LaTeX."""
    for plain, latex in _UNICODE_TEX:
        text = text.replace(plain, latex)
    return re.sub(r"\\sqrt (d_k|d_v|T)", r"\\sqrt{\1}", text)


def formula_text(text: str) -> Markup:
    """A whole Unicode formula typeset: "h·T·d_model·d_k" → MathML."""
    return _formula_text(text, language())


@lru_cache(maxsize=1024)
def _formula_text(text: str, lang: str) -> Markup:  # per language: its alttext's words
    return tex(unicode_tex(text))


def label_text(text: str) -> Markup:
    """A name that mixes words and symbols ("Q projection X·W_Q"): each symbolic word typeset,
    the others left as text."""
    return _label_text(text, language())


@lru_cache(maxsize=1024)
def _label_text(text: str, lang: str) -> Markup:  # per language: its alttext's words
    words = text.split(" ")
    return Markup(" ").join(tex(unicode_tex(w)) if w and _MATH_WORD.search(w) and w != "(" else escape(w)
                            for w in words)


_LEADING_WEIGHT = re.compile(r"^(∂L/∂)?W_([A-Za-z0-9])(?![A-Za-z0-9])")


def title_text(title: str) -> Markup:
    """A title written by the maths layer, which may quote tokens ("∂L/∂W_Q, row 1 (bank), …"): only its
    leading weight's name (W_Q, ∂L/∂W_Q) is typeset, everything else escaped as text."""
    title = say(title)  # in the reader's language (app.maths.phrases)
    m = _LEADING_WEIGHT.match(title)
    if m is None:
        return escape(title)
    name = (r"\partial L / \partial " if m.group(1) else "") + f"W_{m.group(2)}"
    return tex(name) + escape(title[m.end():])
