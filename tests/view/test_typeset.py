"""Typeset maths: the converter's output, the formulas following the mechanisms, the inspector's
arithmetic as MathML checked against the numbers it claims, and typed text never converted."""

from __future__ import annotations

import re

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.lesson.presets import PRESETS
from app.lesson.stages import BY_KEY, Options, describe
from app.maths.arithmetic import ATTENTION_CELLS, INSPECTABLE, CellRef, cell_matrix, explain
from app.maths.attention import run_attention
from app.maths.blocks import run_transformer
from app.view.typeset import MINUS, lead_sentence, number, prose, signed_sum, tex, title_text
from app.view.worked import worked
from tests.conftest import form_fields

HTMX = {"HX-Request": "true"}


# --- the converter ---------------------------------------------------------------------------------


def test_a_formula_becomes_mathml_with_its_reading() -> None:
    html = str(tex(r"A_{ij} = \frac{\exp(s_{ij})}{\sum_{j'} \exp(s_{ij'})}", True))
    assert html.startswith('<math display="block" alttext="A_ij = fraction')
    assert "<mfrac>" in html and "<msub>" in html and "&#x02211;" in html  # Σ
    assert "_ij" not in html.split(">", 1)[1]  # no ASCII markup inside the maths itself


def test_minus_infinity_is_a_signed_symbol_not_a_subtraction() -> None:
    html = str(tex(r"\exp(-\infty) = 0"))
    assert '<mo form="prefix">&#x02212;</mo><mi>&#x0221E;</mi>' in html


def test_prose_typesets_only_between_dollars_and_escapes_the_rest() -> None:
    html = str(prose("a <b> & $d_k$ ok"))
    assert html.startswith("a &lt;b&gt; &amp; <math") and html.endswith("</math> ok")


@pytest.mark.parametrize(("value", "bracket", "expected"), [
    (0.1234, False, "<mn>0.123</mn>"),
    (-0.0001, True, "<mn>0.000</mn>"),  # rounds to zero: no sign, no brackets
    (-0.154, False, f'<mrow><mo form="prefix">{MINUS}</mo><mn>0.154</mn></mrow>'),
    (-0.154, True, f'<mrow><mo stretchy="false">(</mo><mrow><mo form="prefix">{MINUS}</mo><mn>0.154</mn></mrow>'
                   '<mo stretchy="false">)</mo></mrow>'),
])
def test_numbers_carry_a_true_minus_and_brackets_as_a_factor(value: float, bracket: bool, expected: str) -> None:
    assert number(value, 3, bracket=bracket) == expected


def test_a_sum_subtracts_its_negative_terms() -> None:
    assert signed_sum([-0.017, -0.001, 0.5], 3) == (
        f'<mrow><mo form="prefix">{MINUS}</mo><mn>0.017</mn></mrow>'
        f'<mo>{MINUS}</mo><mn>0.001</mn><mo>+</mo><mn>0.500</mn>')


# --- formulas follow the mechanisms ---------------------------------------------------------------


def test_the_softmax_names_the_mask_only_when_one_is_on() -> None:
    plain = describe(BY_KEY["softmax"], Options(masked=False))[1]
    masked = describe(BY_KEY["softmax"], Options(masked=True))[1]
    assert "Masked" not in plain and "Scaled" in plain
    assert "Masked" in masked


def test_cross_attention_takes_keys_and_values_from_c() -> None:
    assert describe(BY_KEY["qkv"], Options(cross=True))[1] == r"Q = X W_Q,\quad K = C W_K,\quad V = C W_V"
    assert "C W_K" not in describe(BY_KEY["qkv"], Options())[1]


@pytest.mark.parametrize(("options", "must", "must_not"), [
    (Options(), [r"\sqrt{d_k}"], [r"\tau", "B_{ij}"]),
    (Options(temperature=True), [r"\sqrt{d_k}", r"\tau"], []),
    (Options(scale=False), [], [r"\sqrt{d_k}"]),
    (Options(alibi=True), ["B_{ij} = -m"], []),
])
def test_the_scaled_formula_says_what_divides_and_what_is_added(options: Options, must: list[str],
                                                                 must_not: list[str]) -> None:
    formula = describe(BY_KEY["scaled"], options)[1]
    assert all(m in formula for m in must) and not any(m in formula for m in must_not)


def test_every_stage_formula_converts() -> None:
    for stage in BY_KEY.values():
        for options in (Options(), Options(cross=True, masked=True, rope=True, alibi=True, added_pe=True),
                        Options(score="general"), Options(score="additive"), Options(attention="linear"),
                        Options(norm="pre", activation="gelu"), Options(activation="gelu_tanh")):
            title, formula, explanation = describe(stage, options)
            assert str(tex(formula, True)).count("<math") == 1
            assert "$" not in str(prose(title)) and "$" not in str(prose(explanation))


# --- the inspector's arithmetic, typeset ----------------------------------------------------------


def mn_values(html: str) -> list[float]:
    """The numbers of a MathML line, with their signs, in order."""
    found = re.findall(r'(<mo form="prefix">\u2212</mo>|<mo>\u2212</mo>)?<mn>([0-9.]+)</mn>', html)
    return [-float(v) if sign else float(v) for sign, v in found]


def test_a_dot_product_is_typeset_with_numbers_that_add_up() -> None:
    """Independent of the page: the typed-out products of Q's row and K's row, and their sum."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=(4, 3))
    run = run_attention(x, num_heads=1, d_k=3, seed=5)
    e = explain(run, CellRef("scores", 0, 2, 1), ["a", "b", "c", "d"], ["x1", "x2", "x3"])
    w = worked(e, 6)
    products, values, result = (str(line) for line in w.lines)
    factors = mn_values(products)
    q, k = run.heads[0].q[2], run.heads[0].k[1]
    np.testing.assert_allclose(factors, np.ravel(np.column_stack([q, k])), atol=1e-6)
    np.testing.assert_allclose(sum(mn_values(values)), q @ k, atol=1e-5)
    assert mn_values(result) == [pytest.approx(run.heads[0].scores[2, 1], abs=1e-6)]
    assert 'alttext="\\text{Scores}_{3,2}' in str(w.heading)  # counted from 1


def test_a_softmax_weight_is_its_exp_over_the_row_sum() -> None:
    run = run_attention(np.eye(3), num_heads=1, d_k=2, seed=0)
    e = explain(run, CellRef("softmax", 0, 2, 0), ["t1", "t2", "t3"], ["x1", "x2", "x3"])
    line = str(worked(e, 3).lines[0])
    numerator, denominator, weight = mn_values(line)
    assert numerator / denominator == pytest.approx(weight, abs=2e-3)
    assert weight == pytest.approx(run.heads[0].softmax[2, 0], abs=5e-4)


def test_every_cell_the_inspector_explains_is_typeset() -> None:
    """Every matrix the inspector knows, in post-norm and pre-norm blocks, with the three scores and
    with linear attention: one heading formula, and the cell's own value among the typeset numbers."""
    x = np.random.default_rng(3).normal(size=(4, 6))
    runs = [(stack.blocks[1].attention, stack) for stack in
            (run_transformer(x, num_heads=2, d_k=3, blocks=2, norm=norm, seed=1) for norm in ("post", "pre"))]
    runs += [(run_attention(x, num_heads=2, d_k=3, score=score, attention=attention, seed=2), None)
             for score, attention in (("dot", "softmax"), ("general", "softmax"), ("additive", "softmax"),
                                      ("dot", "linear"))]
    for run, stack in runs:
        for matrix in INSPECTABLE if stack is not None else ATTENTION_CELLS:
            ref = CellRef(matrix, 1, 2, 1)  # head 2, or block 2
            e = explain(run, ref, ["a", "b", "c", "d"], [f"x{j}" for j in range(6)], None, stack)
            w = worked(e, 4)
            assert str(w.heading).count("<math") == 1, (matrix, e.kind)
            shown = [v for line in w.lines for v in mn_values(str(line))]
            value = round(float(cell_matrix(run, ref, stack)[2, 1]), 4)
            assert any(v == pytest.approx(value, abs=1e-4) for v in shown), (matrix, e.kind, value, shown)


# --- typed text never becomes maths ---------------------------------------------------------------


@pytest.mark.parametrize("token", [r"$\text{x}$", "<script>alert(1)</script>", r"\frac{1}{2}", "$x$ and $y$"])
def test_a_typed_token_is_text_on_every_maths_bearing_part_of_the_page(client: TestClient, token: str) -> None:
    fields = {**form_fields(client.get("/?preset=three-token").text), "token-0": token, "stage": "softmax",
              "inspect": "softmax.0.0.1"}
    r = client.post("/stages", data=fields, headers=HTMX)
    assert r.status_code == 200
    text = token.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert f'<th scope="row">1 {text}</th>' in r.text  # a heatmap's row label: the token, as text
    assert f"query 1 ({text})" in r.text  # the inspector's title names it, as text
    for math in re.findall(r"<math\b.*?</math>", r.text, re.S):
        assert "alert" not in math and "text{x}" not in math and "frac{1}" not in math
    assert "<script>alert" not in r.text


def test_a_function_name_keeps_a_thin_space_from_its_neighbours() -> None:
    """t_ij log A_ij: log runs into neither t_ij nor A_ij; exp(…) keeps its bracket close."""
    html = str(tex(r"t_{ij} \log A_{ij}"))
    assert '</msub><mspace width="0.1667em"></mspace><mi>log</mi><mspace width="0.1667em"></mspace><msub>' in html
    assert '<mi>exp</mi><mo stretchy="false">&#x00028;</mo>' in str(tex(r"\exp(s)"))


def test_a_title_from_the_maths_typesets_only_its_leading_weight() -> None:
    html = str(title_text("∂L/∂W_Q, row 1 (x_1 <b>), column 2 (q2)"))
    assert html.startswith('<math display="inline" alttext="∂ L / ∂ W_Q">')
    assert html.endswith("</math>, row 1 (x_1 &lt;b&gt;), column 2 (q2)")  # the token escaped, never typeset
    assert str(title_text("W_O, row 1")).startswith('<math display="inline" alttext="W_O">')
    assert str(title_text("Q, row 1 (W_Q)")) == "Q, row 1 (W_Q)"  # no leading weight: all text


def test_lead_sentence_splits_at_the_first_full_stop_outside_the_maths() -> None:
    lead, rest = lead_sentence("Scores are $A A^{\\top}$. pool is closer to badminton (0.30) than to beats. Two.")
    assert lead == "Scores are $A A^{\\top}$." and rest == "pool is closer to badminton (0.30) than to beats. Two."
    assert lead_sentence("A stride of $4 = \\sqrt{16}$ e.g. here. Then more.") == (
        "A stride of $4 = \\sqrt{16}$ e.g. here.", "Then more.")
    assert lead_sentence("One sentence only.") == ("One sentence only.", "")
    assert lead_sentence("$x = 1.5$ is kept whole. Next.") == ("$x = 1.5$ is kept whole.", "Next.")


@pytest.mark.parametrize("key", sorted(PRESETS))
def test_every_presets_summary_is_its_lead_and_the_rest(key: str) -> None:
    text = PRESETS[key].summary
    lead, rest = lead_sentence(text)
    assert lead.endswith(".") and (f"{lead} {rest}" == text if rest else lead == text)
