"""app.maths.gradient_arithmetic: every gradient cell's written-out terms add up to app.maths.backward's number,
and app.view.gradient_worked typesets each of them.

Every cell of every gradient matrix, for every mechanism of tests/maths/test_backward.py (whose gradients
are checked there against finite differences), several seeds and both losses; then a two-token
example worked by hand in this file, hidden keys, the references the page parses, and the MathML.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import numpy as np
import pytest
from markupsafe import Markup

from app.maths.arithmetic import CellRef
from app.maths.attention import run_attention
from app.maths.backward import Gradients, loss_and_gradients
from app.maths.gradient_arithmetic import (
    GRADIENT_CELLS,
    HIDDEN_KEY,
    GradientDivision,
    GradientExplanation,
    GradientNote,
    GradientSum,
    HiddenKey,
    LossGradient,
    RopeGradient,
    SoftmaxBackward,
    explain_gradient,
    gradient_matrix,
    parse_gradient_ref,
)
from app.maths.records import AttentionRun
from app.view.gradient_worked import gradient_worked
from app.view.worked import Worked
from tests.maths.test_backward import CASES, make_case
from tests.view.test_typeset import mn_values

TOL = 1e-12
SEEDS = (0, 1, 2)


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=TOL, abs_tol=TOL)


def attention_target(run: AttentionRun, seed: int) -> np.ndarray:
    """A target alignment: random rows over the visible keys, some entries 0, each row summing to 1."""
    rng = np.random.default_rng([seed, 9])
    t = rng.uniform(0.1, 1.0, run.heads[0].softmax.shape)  # (T, S)
    t[rng.uniform(size=t.shape) < 0.3] = 0.0  # some keys get no weight: their loss term is 0
    if run.mask is not None:
        t[run.mask] = 0.0
    for i in range(t.shape[0]):  # a row left with nothing gets its first visible key
        if t[i].sum() == 0.0:
            t[i, int(np.argmax(run.mask[i] == 0)) if run.mask is not None else 0] = 1.0
    return t / t.sum(axis=1, keepdims=True)


def loss_spec(run: AttentionRun, kind: str, seed: int) -> dict:
    if kind == "mse":
        return {"kind": "mse", "target": np.random.default_rng([seed, 8]).normal(size=run.output.shape)}
    return {"kind": "attention", "head": run.num_heads - 1, "target": attention_target(run, seed)}


def labels(run: AttentionRun) -> tuple[list[str], list[str], list[str]]:
    t, s = run.x.shape[0], run.source.shape[0]
    return [f"t{i}" for i in range(t)], [f"s{j}" for j in range(s)], [f"x{m + 1}" for m in range(run.d_model)]


def every_ref(run: AttentionRun, grads: Gradients) -> Iterator[CellRef]:
    """Every cell of every gradient this run has (linear attention has no ∂L/∂A, ∂L/∂Scaled, ∂L/∂Scores)."""
    for matrix in GRADIENT_CELLS:
        for owner in range(run.num_heads):
            try:
                rows, cols = gradient_matrix(grads, matrix, owner).shape
            except ValueError:
                continue
            for i, j in itertools.product(range(rows), range(cols)):
                yield CellRef(matrix, owner, i, j)


def value_of(e: GradientExplanation) -> float:
    return e.total if isinstance(e, GradientSum) else e.result


def assert_sum_adds_up(e: GradientSum) -> None:
    for term in e.terms:
        assert term.product == term.left * term.right
    direct = 0.0 if e.direct is None else e.direct.value
    assert close(math.fsum(t.product for t in e.terms) + direct, e.total), e
    if e.direct is not None:
        d = e.direct
        assert d.value == (0.0 if d.target == 0 else -d.target / (d.count * d.weight))


def assert_adds_up(run: AttentionRun, grads: Gradients, e: GradientExplanation, expected: float) -> None:
    """The explanation's own arithmetic holds, and its value is the backward pass's, to 1e-12."""
    i, j = e.ref.row, e.ref.col
    if isinstance(e, GradientSum):
        assert_sum_adds_up(e)
    elif isinstance(e, LossGradient):
        if e.loss == "mse":
            assert e.output == run.output[i, j]
            assert e.count == run.output.size
            assert close(2.0 * (e.output - e.target) / e.count, e.result)
        else:
            assert e.result == 0.0
    elif isinstance(e, SoftmaxBackward):
        a, d_a = run.heads[e.ref.head].softmax, grads.heads[e.ref.head].softmax
        np.testing.assert_array_equal([en.weight for en in e.entries], a[i])
        np.testing.assert_array_equal([en.grad for en in e.entries], d_a[i])
        assert [en.selected for en in e.entries] == [k == j for k in range(a.shape[1])]
        for en in e.entries:
            assert en.product == en.weight * en.grad
            if en.hidden:
                assert en.weight == 0.0 and en.grad == 0.0
        assert close(math.fsum(en.product for en in e.entries), e.row_sum)
        assert close(e.weight * (e.grad - e.row_sum), e.result)
        if e.target is not None:  # the attention loss alone: A·(∂L/∂A − Σ A·∂L/∂A) = (A − t)/T
            assert math.isclose(e.result, (e.weight - e.target) / e.count, abs_tol=1e-12)
    elif isinstance(e, GradientDivision):
        divisor = (math.sqrt(run.d_k) if run.scale and run.score != "additive" else 1.0) * run.temperature
        assert e.divisor == divisor
        assert e.grad == grads.heads[e.ref.head].scaled[i, j]
        assert close(e.grad / divisor, e.result)
    elif isinstance(e, RopeGradient):
        for inner in e.rotated:
            assert_sum_adds_up(inner)
        if e.paired:
            angle = i * 10000.0 ** (-2.0 * (j // 2) / run.d_k)  # RoPE turns pair p at position pos by pos·θ_p
            assert close(e.angle, angle)
            even, odd = (inner.total for inner in e.rotated)
            back = even * math.cos(angle) + odd * math.sin(angle) if j % 2 == 0 else (
                -even * math.sin(angle) + odd * math.cos(angle))
            assert close(back, e.result)
        else:
            assert j == run.d_k - 1 and run.d_k % 2 == 1 and e.result == e.rotated[0].total
    elif isinstance(e, HiddenKey):
        assert run.mask is not None and run.mask[i, j]
        assert e.result == 0.0 and HIDDEN_KEY in e.reason.lower()
    else:
        assert isinstance(e, GradientNote) and run.attention == "linear" and e.ref.matrix in ("g_q", "g_k")
    assert close(value_of(e), expected), (e.ref, value_of(e), expected)


def assert_typeset(w: Worked, value: float) -> None:
    """One formula in symbols, lines of MathML with true minus signs, and the cell's value last."""
    assert isinstance(w.heading, Markup) and str(w.heading).count("<math") == 1
    assert all(isinstance(line, Markup) for line in w.lines)
    html = "".join(str(line) for line in [w.heading, *w.lines])
    assert "<mn>-" not in html and "<mo>-</mo>" not in html
    last = str(w.lines[-1])
    assert last.startswith("<math") and mn_values(last) == [pytest.approx(round(value, 4), abs=1e-9)]


def mechanism_runs() -> list[tuple[str, int, str]]:
    cases = []
    for name in sorted(CASES):
        for seed in SEEDS:
            cases.append((name, seed, "mse"))
            if CASES[name].get("attention") != "linear":
                cases.append((name, seed, "attention"))
    return cases


@pytest.mark.parametrize(("name", "seed", "kind"), mechanism_runs())
def test_every_gradient_cell_adds_up_to_the_backward_pass(name: str, seed: int, kind: str) -> None:
    x, context, kwargs = make_case(name, seed)
    run = run_attention(x, context=context, **kwargs)
    spec = loss_spec(run, kind, seed)
    _, grads = loss_and_gradients(run, spec)
    tokens, keys, dims = labels(run)
    kinds = set()
    for ref in every_ref(run, grads):
        parsed = parse_gradient_ref(str(ref), grads)
        assert parsed == ref
        e = explain_gradient(run, grads, spec, parsed, tokens, keys, dims)
        assert e.ref == ref
        value = float(gradient_matrix(grads, ref.matrix, ref.head)[ref.row, ref.col])
        assert_adds_up(run, grads, e, value)
        if seed == SEEDS[0]:
            assert_typeset(gradient_worked(e, 4), value)
        kinds.add(e.kind)
    expected = {"grad_loss", "grad_sum"}
    if run.attention == "linear":
        expected.add("grad_note")
    else:
        expected |= {"grad_softmax", "grad_division"}
    if run.positional_encoding == "rope" and run.attention != "linear":
        expected.add("grad_rope")
    if run.mask is not None and run.attention != "linear":
        expected.add("grad_hidden")
    assert kinds == expected


# --- the operands are the forward's and the next stage's numbers ------------------------------------

T, D_MODEL, H, D_K, D_V = 4, 5, 2, 3, 2


@pytest.fixture(scope="module")
def plain() -> tuple[AttentionRun, Gradients, dict]:
    x = np.random.default_rng(11).normal(size=(T, D_MODEL))
    run = run_attention(x, num_heads=H, d_k=D_K, d_v=D_V, seed=3)
    spec = {"kind": "mse", "target": np.random.default_rng(12).normal(size=run.output.shape)}
    return run, loss_and_gradients(run, spec)[1], spec


def explained(plain: tuple[AttentionRun, Gradients, dict], text: str) -> GradientExplanation:
    run, grads, spec = plain
    tokens, keys, dims = labels(run)
    ref = parse_gradient_ref(text, grads)
    assert ref is not None, text
    return explain_gradient(run, grads, spec, ref, tokens, keys, dims)


def operands(e: GradientExplanation) -> tuple[np.ndarray, np.ndarray]:
    assert isinstance(e, GradientSum)
    return np.array([t.left for t in e.terms]), np.array([t.right for t in e.terms])


def test_g_output_is_the_final_gradient_row_against_this_heads_row_of_w_o(plain) -> None:
    run, grads, _ = plain
    e = explained(plain, "g_output.1.2.1")  # head 2, query 3, column 2: row 1·d_v + 1 of W_O
    left, right = operands(e)
    np.testing.assert_array_equal(left, grads.output[2])
    np.testing.assert_array_equal(right, run.weights.w_o[1 * D_V + 1])
    assert (e.left.name, e.right.name, e.right.row) == ("∂MultiHead", "W_O", "4")


def test_g_softmax_is_the_output_gradient_row_against_a_value_row(plain) -> None:
    run, grads, _ = plain
    e = explained(plain, "g_softmax.0.1.3")
    left, right = operands(e)
    np.testing.assert_array_equal(left, grads.heads[0].output[1])
    np.testing.assert_array_equal(right, run.heads[0].v[3])
    assert e.direct is None  # the mean squared error has no term on A


def test_g_q_g_k_g_v_sum_over_keys_and_queries(plain) -> None:
    run, grads, _ = plain
    head, g = run.heads[1], grads.heads[1]
    q_left, q_right = operands(explained(plain, "g_q.1.2.0"))
    np.testing.assert_array_equal(q_left, g.scores[2])
    np.testing.assert_array_equal(q_right, head.k[:, 0])
    k_left, k_right = operands(explained(plain, "g_k.1.3.2"))
    np.testing.assert_array_equal(k_left, g.scores[:, 3])
    np.testing.assert_array_equal(k_right, head.q[:, 2])
    v_left, v_right = operands(explained(plain, "g_v.1.0.1"))
    np.testing.assert_array_equal(v_left, head.softmax[:, 0])
    np.testing.assert_array_equal(v_right, g.output[:, 1])


def test_weight_gradients_sum_over_tokens(plain) -> None:
    run, grads, _ = plain
    wq_left, wq_right = operands(explained(plain, "g_w_q.1.4.2"))
    np.testing.assert_array_equal(wq_left, run.x[:, 4])
    np.testing.assert_array_equal(wq_right, grads.heads[1].q[:, 2])
    wv_left, wv_right = operands(explained(plain, "g_w_v.0.0.1"))
    np.testing.assert_array_equal(wv_left, run.x[:, 0])
    np.testing.assert_array_equal(wv_right, grads.heads[0].v[:, 1])
    wo_left, wo_right = operands(explained(plain, "g_w_o.0.3.4"))
    np.testing.assert_array_equal(wo_left, run.concat[:, 3])
    np.testing.assert_array_equal(wo_right, grads.output[:, 4])


def test_cross_attention_weight_gradients_of_keys_and_values_read_the_source() -> None:
    x, context, kwargs = make_case("cross-attention")
    run = run_attention(x, context=context, **kwargs)
    spec = loss_spec(run, "mse", 0)
    grads = loss_and_gradients(run, spec)[1]
    tokens, keys, dims = labels(run)
    for name, src in (("g_w_q", "X"), ("g_w_k", "C"), ("g_w_v", "C")):
        e = explain_gradient(run, grads, spec, CellRef(name, 1, 2, 0), tokens, keys, dims)
        assert isinstance(e, GradientSum) and e.left.name == src
        np.testing.assert_array_equal([t.left for t in e.terms], (run.x if src == "X" else run.context)[:, 2])
        assert [t.label for t in e.terms] == (tokens if src == "X" else keys)


def test_the_final_gradient_of_the_mse_loss(plain) -> None:
    run, _, spec = plain
    e = explained(plain, "g_final.0.3.2")
    assert isinstance(e, LossGradient) and e.loss == "mse"
    assert e.target == spec["target"][3, 2] and e.output == run.output[3, 2]
    assert e.result == pytest.approx(2 * (run.output[3, 2] - spec["target"][3, 2]) / (T * D_MODEL))


# --- by hand: two tokens, d_model = d_k = d_v = 2, every weight the identity, no ÷√d_k -----------
#
# Q = K = V = X = I, so Scores = I, and each row's softmax is [a, b] or [b, a], a = e/(e + 1) = σ(1),
# b = 1 − a. MultiHead = A (W_O = I). With L = mean of MultiHead² (target 0) over 4 entries:
#   ∂L/∂MultiHead = 2A/4 = A/2 = ∂L/∂Output = ∂L/∂A   (W_O = I, V = I)
#   row sum Σ_k A_1k ∂L/∂A_1k = (a² + b²)/2,   ∂L/∂Scaled_11 = a·(a/2 − (a² + b²)/2) = a·b·(a − b)/2
#   ∂L/∂Q_11 = Σ_j ∂L/∂Scores_1j K_j1 = ∂L/∂Scaled_11,   ∂L/∂V_11 = Σ_i A_i1 ∂L/∂Output_i1 = (a² + b²)/2


def two_tokens() -> AttentionRun:
    eye = np.eye(2)
    return run_attention(eye, d_k=2, scale=False, weights={"w_q": eye[None], "w_k": eye[None], "w_v": eye[None],
                                                          "w_o": eye})


A_BY_HAND = math.e / (math.e + 1.0)  # 0.731
B_BY_HAND = 1.0 - A_BY_HAND  # 0.269


def test_two_tokens_by_hand_mse() -> None:
    run = two_tokens()
    a, b = A_BY_HAND, B_BY_HAND
    spec = {"kind": "mse", "target": np.zeros((2, 2))}
    grads = loss_and_gradients(run, spec)[1]
    tokens, dims = ["cat", "sat"], ["x1", "x2"]

    def explain(text: str) -> GradientExplanation:
        return explain_gradient(run, grads, spec, parse_gradient_ref(text, grads), tokens, None, dims)

    final = explain("g_final.0.0.0")
    assert isinstance(final, LossGradient) and final.count == 4
    assert final.result == pytest.approx(a / 2)  # 2·(a − 0)/4
    d_a = explain("g_softmax.0.0.1")  # Σ_d ∂L/∂Output_1d V_2d = [a/2, b/2]·[0, 1]
    assert [t.product for t in d_a.terms] == pytest.approx([0.0, b / 2])
    assert d_a.total == pytest.approx(b / 2)
    scaled = explain("g_scaled.0.0.0")
    assert isinstance(scaled, SoftmaxBackward)
    assert [en.product for en in scaled.entries] == pytest.approx([a * a / 2, b * b / 2])
    assert scaled.row_sum == pytest.approx((a * a + b * b) / 2)  # 0.303
    assert scaled.result == pytest.approx(a * b * (a - b) / 2)  # 0.0454
    assert round(scaled.result, 4) == 0.0454
    assert explain("g_scaled.0.0.1").result == pytest.approx(-a * b * (a - b) / 2)  # a row's ∂L/∂Scaled sums to 0
    scores = explain("g_scores.0.0.0")
    assert isinstance(scores, GradientDivision) and scores.divisor == 1.0
    q = explain("g_q.0.0.0")  # Σ_j ∂L/∂Scores_1j K_j1: K's first column is [1, 0]
    assert [t.right for t in q.terms] == [1.0, 0.0]
    assert q.total == pytest.approx(a * b * (a - b) / 2)
    v = explain("g_v.0.0.0")  # Σ_i A_i1 ∂L/∂Output_i1 = a·a/2 + b·b/2
    assert [t.left for t in v.terms] == pytest.approx([a, b])
    assert v.total == pytest.approx((a * a + b * b) / 2)
    assert round(v.total, 3) == 0.303
    w_q = explain("g_w_q.0.1.1")  # X = I: ∂L/∂(W_Q)_22 = ∂L/∂Q_22
    assert w_q.total == pytest.approx(explain("g_q.0.1.1").total)


def test_two_tokens_by_hand_attention_loss() -> None:
    """Target: each token on itself. L = −(1/2)·(log a + log a); ∂L/∂A_11 = −1/(2a) = −0.684, ∂L/∂A_12 = 0;
    ∂L/∂Scaled_11 = (a − 1)/2 = −0.134."""
    run = two_tokens()
    a = A_BY_HAND
    spec = {"kind": "attention", "head": 0, "target": np.eye(2)}
    grads = loss_and_gradients(run, spec)[1]
    tokens, dims = ["cat", "sat"], ["x1", "x2"]

    def explain(text: str) -> GradientExplanation:
        return explain_gradient(run, grads, spec, parse_gradient_ref(text, grads), tokens, None, dims)

    final = explain("g_final.0.1.0")
    assert isinstance(final, LossGradient) and final.loss == "attention" and final.result == 0.0
    d_a = explain("g_softmax.0.0.0")
    assert isinstance(d_a, GradientSum) and d_a.direct is not None
    assert all(t.product == 0.0 for t in d_a.terms)  # nothing comes back from the output
    assert (d_a.direct.target, d_a.direct.count) == (1.0, 2)
    assert d_a.total == pytest.approx(-1 / (2 * a))
    assert round(d_a.total, 3) == -0.684
    assert explain("g_softmax.0.0.1").total == 0.0  # t = 0
    scaled = explain("g_scaled.0.0.0")
    assert isinstance(scaled, SoftmaxBackward) and scaled.target == 1.0
    assert scaled.result == pytest.approx((a - 1) / 2)
    assert round(scaled.result, 3) == -0.134


# --- hidden keys ----------------------------------------------------------------------------------


def test_hidden_keys_are_a_constant_with_gradient_zero() -> None:
    x = np.random.default_rng(5).normal(size=(3, 4))
    run = run_attention(x, num_heads=1, d_k=2, mask="causal", seed=1)
    spec = {"kind": "mse", "target": np.ones((3, 4))}
    grads = loss_and_gradients(run, spec)[1]
    for matrix in ("g_softmax", "g_scaled", "g_scores"):
        e = explain_gradient(run, grads, spec, CellRef(matrix, 0, 0, 2), ["a", "b", "c"], None, ["x"] * 4)
        assert isinstance(e, HiddenKey)
        assert e.result == 0.0 == gradient_matrix(grads, matrix, 0)[0, 2]
        assert e.reason.startswith("Hidden key: a constant, gradient 0.")
        assert "Key 3 (c)" in e.reason and "query 1 (a)" in e.reason
    row = explain_gradient(run, grads, spec, CellRef("g_scaled", 0, 1, 0), ["a", "b", "c"], None, ["x"] * 4)
    assert isinstance(row, SoftmaxBackward)
    assert [en.hidden for en in row.entries] == [False, False, True]


# --- references -----------------------------------------------------------------------------------


def test_references_name_real_cells_only(plain) -> None:
    run, grads, _ = plain
    good = {"g_final.0.3.4": (T, D_MODEL), "g_w_o.0.3.4": (H * D_V, D_MODEL), "g_w_q.1.4.2": (D_MODEL, D_K),
            "g_w_v.1.4.1": (D_MODEL, D_V), "g_softmax.1.3.3": (T, T), "g_v.0.3.1": (T, D_V)}
    for text, shape in good.items():
        ref = parse_gradient_ref(text, grads)
        assert ref is not None and str(ref) == text
        assert gradient_matrix(grads, ref.matrix, ref.head).shape == shape
    for text in ("g_final.1.0.0", "g_w_o.1.0.0", "g_q.2.0.0", "g_final.0.4.0", "g_final.0.0.5", "g_w_v.0.0.2",
                 "g_w_o.0.4.0", "softmax.0.0.0", "g_softmax.0.0", "g_softmax.0.0.-1", "", "g_x.0.0.0",
                 " g_q.0.0.0", "g_q.0.0.0\n", "g_q.0.0.\u0661"):  # an Arabic-Indic 1 is not an index
        assert parse_gradient_ref(text, grads) is None, text
    assert parse_gradient_ref(None, grads) is None  # type: ignore[arg-type]


def test_linear_attention_has_no_softmax_gradients() -> None:
    x, _, kwargs = make_case("linear")
    run = run_attention(x, **kwargs)
    grads = loss_and_gradients(run, loss_spec(run, "mse", 0))[1]
    for matrix in ("g_softmax", "g_scaled", "g_scores"):
        with pytest.raises(ValueError, match="linear attention"):
            gradient_matrix(grads, matrix, 0)
        assert parse_gradient_ref(f"{matrix}.0.0.0", grads) is None
    assert parse_gradient_ref("g_v.0.0.0", grads) is not None
    with pytest.raises(ValueError, match="not a gradient"):
        gradient_matrix(grads, "softmax", 0)
    with pytest.raises(ValueError, match="head 2 does not exist"):
        gradient_matrix(grads, "g_q", 2)


# --- typeset --------------------------------------------------------------------------------------


def test_a_gradient_sum_is_typeset_with_its_symbols_and_numbers(plain) -> None:
    run, grads, _ = plain
    e = explained(plain, "g_softmax.1.2.3")
    w = gradient_worked(e, 6)
    assert r'alttext="\frac{\partial L}{\partial A_{3,4}} = \sum_{d} \frac{\partial L}{\partial \text{Output}_{3,d}}' \
        r'\, V_{4,d}"' in str(w.heading)  # counted from 1
    products, values, result = (str(line) for line in w.lines)
    np.testing.assert_allclose(mn_values(products), np.ravel(np.column_stack([grads.heads[1].output[2],
                                                                              run.heads[1].v[3]])), atol=1e-6)
    assert sum(mn_values(values)) == pytest.approx(grads.heads[1].softmax[2, 3], abs=1e-5)
    assert mn_values(result) == [pytest.approx(grads.heads[1].softmax[2, 3], abs=1e-6)]
    for term in e.terms:  # a negative factor is bracketed, with a true minus sign
        if term.left < 0:
            assert f'<mo stretchy="false">(</mo><mrow><mo form="prefix">\u2212</mo><mn>{abs(term.left):.6f}' \
                in products


def test_the_softmax_backward_is_typeset_with_its_row_table() -> None:
    run = two_tokens()
    spec = {"kind": "attention", "head": 0, "target": np.eye(2)}
    grads = loss_and_gradients(run, spec)[1]
    e = explain_gradient(run, grads, spec, CellRef("g_scaled", 0, 0, 0), ["<b>cat</b>", "sat"], None, ["x1", "x2"])
    w = gradient_worked(e, 3)
    assert r"\text{Scaled}_{1,1}} = A_{1,1} \left(" in str(w.heading)
    table, row_sum, numbers, *rest = (str(line) for line in w.lines)
    assert table.startswith('<table class="arith-table">')
    assert "&lt;b&gt;cat&lt;/b&gt;" in table and "<b>cat</b>" not in table  # a token is escaped text
    assert '<tr class="sel">' in table
    a = A_BY_HAND  # Σ_k A_1k ∂L/∂A_1k = a·(−1/(2a)) + (1 − a)·0 = −0.5
    assert mn_values(row_sum)[-1] == -0.5
    assert mn_values(numbers) == [round(a, 3), round(-1 / (2 * a), 3), -0.5]
    assert any("(A − t)/T" in line for line in rest)
    assert mn_values(rest[-1]) == [round((a - 1) / 2, 3)]


def test_the_rope_rotation_back_is_typeset() -> None:
    x, context, kwargs = make_case("rope, two heads")
    run = run_attention(x, context=context, **kwargs)
    spec = loss_spec(run, "mse", 0)
    grads = loss_and_gradients(run, spec)[1]
    tokens, keys, dims = labels(run)
    e = explain_gradient(run, grads, spec, CellRef("g_q", 1, 2, 1), tokens, keys, dims)
    assert isinstance(e, RopeGradient) and e.paired and not e.first and e.position == 2
    w = gradient_worked(e, 4)
    assert r"\sin\alpha + \frac{\partial L}{\partial \tilde{Q}_{3,2}} \cos\alpha" in str(w.heading)
    for line, inner in zip(w.lines[:2], e.rotated, strict=True):  # ∂L/∂Q̃ at the pair, each a sum over keys
        shown = mn_values(str(line))
        assert shown[-1] == pytest.approx(round(inner.total, 4))
        assert sum(shown[-1 - len(inner.terms):-1]) == pytest.approx(inner.total, abs=1e-3)
    angle = next(str(line) for line in w.lines if "the angle" in str(line))
    assert mn_values(angle)[:5] == [2, 1, 2, 1.0, 2.0]  # α = 2·θ₁ = 2·1.0000 = 2.0000
    assert mn_values(str(w.lines[-1])) == [pytest.approx(round(grads.heads[1].q[2, 1], 4))]


def test_hidden_keys_and_the_attention_loss_say_why_they_are_zero() -> None:
    x = np.random.default_rng(5).normal(size=(3, 4))
    run = run_attention(x, num_heads=2, d_k=2, mask="causal", seed=1)
    target = np.tril(np.ones((3, 3)))
    spec = {"kind": "attention", "head": 1, "target": target / target.sum(axis=1, keepdims=True)}
    grads = loss_and_gradients(run, spec)[1]
    typed = ["a", "<b>$x$</b>", r"$\frac{1}{2}$"]  # typed tokens stay text, never maths
    hidden = gradient_worked(explain_gradient(run, grads, spec, CellRef("g_scores", 0, 1, 2), typed, None,
                                              ["x"] * 4), 3)
    why = str(hidden.lines[0])
    assert "Hidden key: a constant, gradient 0." in why
    assert "Key 3 ($\\frac{1}{2}$) is hidden from query 2 (&lt;b&gt;$x$&lt;/b&gt;)" in why
    assert why.count("<math") == 1  # exp(−∞) = 0 only
    final = gradient_worked(explain_gradient(run, grads, spec, CellRef("g_final", 0, 0, 0), ["a", "b", "c"],
                                             None, ["x"] * 4), 3)
    assert "head 2" in str(final.lines[0]) and mn_values(str(final.lines[-1])) == [0.0]
