"""app.maths.arithmetic: the inspector's written-out terms add up to the numbers the pipeline stored."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from app.maths.arithmetic import (
    ATTENTION_CELLS,
    BLOCK_CELLS,
    AdditiveScore,
    CellRef,
    Division,
    DotProduct,
    Elementwise,
    Explanation,
    LayerNormCell,
    SoftmaxRow,
    WeightedSum,
    explain,
    parse_ref,
)
from app.maths.attention import run_attention
from app.maths.blocks import run_transformer
from app.maths.records import AttentionRun

T, D_MODEL, H, D_K, D_V = 4, 5, 2, 3, 2
TOKENS = [f"t{i}" for i in range(T)]
DIMS = [f"x{j + 1}" for j in range(D_MODEL)]


@pytest.fixture(scope="module", params=[True, False], ids=["scaled", "unscaled"])
def run(request: pytest.FixtureRequest) -> AttentionRun:
    x = np.random.default_rng(2024).normal(0.0, 1.0, (T, D_MODEL))
    return run_attention(x, num_heads=H, d_k=D_K, d_v=D_V, seed=17, scale=request.param)


def stored(run: AttentionRun, ref: CellRef) -> np.ndarray:
    """The matrix the pipeline stored for ``ref`` (the whole matrix; index it with row and col)."""
    if ref.matrix == "final":
        return run.output
    return getattr(run.heads[ref.head], ref.matrix)


def every_ref(run: AttentionRun, matrix: str) -> list[CellRef]:
    heads = [0] if matrix == "final" else range(run.num_heads)
    refs = []
    for h in heads:
        rows, cols = stored(run, CellRef(matrix, h, 0, 0)).shape
        refs += [CellRef(matrix, h, i, j) for i, j in itertools.product(range(rows), range(cols))]
    return refs


def explained(run: AttentionRun, ref: CellRef) -> Explanation:
    parsed = parse_ref(str(ref), run)
    assert parsed == ref
    return explain(run, parsed, TOKENS, DIMS)


@pytest.mark.parametrize("matrix", ["q", "k", "v", "scores", "final"])
def test_dot_product_terms_add_up_to_the_stored_cell(run: AttentionRun, matrix: str) -> None:
    for ref in every_ref(run, matrix):
        e = explained(run, ref)
        assert isinstance(e, DotProduct)
        assert e.ref == ref
        for term in e.terms:
            assert np.isclose(term.left * term.right, term.product)
        assert np.isclose(sum(term.product for term in e.terms), e.total)
        assert np.isclose(e.total, stored(run, ref)[ref.row, ref.col]), ref


def test_q_terms_are_x_row_times_w_q_column(run: AttentionRun) -> None:
    e = explained(run, CellRef("q", 1, 2, 0))
    assert isinstance(e, DotProduct)
    np.testing.assert_allclose([t.left for t in e.terms], run.x[2])
    np.testing.assert_allclose([t.right for t in e.terms], run.weights.w_q[1][:, 0])
    assert [t.label for t in e.terms] == DIMS


def test_division_gives_the_stored_scaled_cell(run: AttentionRun) -> None:
    for ref in every_ref(run, "scaled"):
        e = explained(run, ref)
        assert isinstance(e, Division)
        assert np.isclose(e.score, run.heads[ref.head].scores[ref.row, ref.col])
        assert np.isclose(e.divisor, np.sqrt(D_K) if run.scale else 1.0)
        assert np.isclose(e.score / e.divisor, e.result)
        assert np.isclose(e.result, stored(run, ref)[ref.row, ref.col]), ref


def test_softmax_entries_are_the_stored_row(run: AttentionRun) -> None:
    for ref in every_ref(run, "softmax"):
        e = explained(run, ref)
        assert isinstance(e, SoftmaxRow)
        row = run.heads[ref.head].softmax[ref.row]
        np.testing.assert_allclose([en.weight for en in e.entries], row)
        assert np.isclose(sum(en.weight for en in e.entries), 1.0)
        assert np.isclose(sum(en.exp for en in e.entries), e.total)
        for en in e.entries:
            assert np.isclose(en.exp, np.exp(en.scaled - e.shift))
            assert np.isclose(en.exp / e.total, en.weight)
        np.testing.assert_allclose([en.scaled for en in e.entries], run.heads[ref.head].scaled[ref.row])
        assert [en.selected for en in e.entries] == [j == ref.col for j in range(T)]
        assert [en.token for en in e.entries] == TOKENS


def test_weighted_sum_adds_up_to_the_stored_output_row(run: AttentionRun) -> None:
    for ref in every_ref(run, "output"):
        e = explained(run, ref)
        assert isinstance(e, WeightedSum)
        head = run.heads[ref.head]
        np.testing.assert_allclose([r.weight for r in e.rows], head.softmax[ref.row])
        for r, v in zip(e.rows, head.v, strict=True):
            np.testing.assert_allclose(r.value_row, v)
            np.testing.assert_allclose(r.contribution, r.weight * np.asarray(r.value_row))
        total = np.sum([r.contribution for r in e.rows], axis=0)
        np.testing.assert_allclose(total, e.result)
        np.testing.assert_allclose(e.result, head.output[ref.row])
        assert np.isclose(e.result[ref.col], stored(run, ref)[ref.row, ref.col])


def test_every_inspectable_matrix_is_explained(run: AttentionRun) -> None:
    kinds = {m: explained(run, CellRef(m, 0, 0, 0)).kind for m in ATTENTION_CELLS}
    assert kinds == {"q": "dot", "k": "dot", "v": "dot", "scores": "dot", "final": "dot",
                     "scaled": "division", "softmax": "softmax", "output": "weighted"}


def test_seed_003_softmax_row_by_hand() -> None:
    """Seed 003: exp(0.707) ≈ 2.028, row sum 5.056; row 2: exp(1.414) ≈ 4.113, sum 8.169, weight 0.503."""
    q = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    k = [[1.0, 1.0], [0.0, 1.0], [1.0, 0.0]]
    v = [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]
    run = run_attention(np.eye(3), d_k=2, weights={"w_q": [q], "w_k": [k], "w_v": [v]})
    tokens = ["token 1", "token 2", "token 3"]
    row0 = explain(run, CellRef("softmax", 0, 0, 0), tokens, ["x1", "x2", "x3"])
    assert isinstance(row0, SoftmaxRow)
    assert row0.shift == 0.0
    assert [round(en.exp, 3) for en in row0.entries] == [2.028, 1.0, 2.028]
    assert round(row0.total, 3) == 5.056
    row2 = explain(run, CellRef("softmax", 0, 2, 0), tokens, ["x1", "x2", "x3"])
    assert isinstance(row2, SoftmaxRow)
    assert [round(en.exp, 3) for en in row2.entries] == [4.113, 2.028, 2.028]
    assert round(row2.total, 3) == 8.169
    assert [round(en.weight, 3) for en in row2.entries] == [0.503, 0.248, 0.248]


def test_softmax_explanation_shifts_large_scores() -> None:
    """Scores in the hundreds would overflow exp by hand; the row maximum is subtracted and shown."""
    x = np.array([[30.0, 0.0], [0.0, 30.0]])
    run = run_attention(x, weights={"w_q": np.eye(2)[None], "w_k": np.eye(2)[None]}, scale=False)
    e = explain(run, CellRef("softmax", 0, 0, 0), ["a", "b"], ["x1", "x2"])
    assert isinstance(e, SoftmaxRow)
    assert e.shift == 900.0
    assert all(np.isfinite(en.exp) for en in e.entries)
    np.testing.assert_allclose([en.weight for en in e.entries], run.heads[0].softmax[0])


def test_softmax_explanation_of_very_negative_scores_matches_the_pipeline() -> None:
    # Q = 30·x, K = −30·x: the only score is −900, whose exp underflows to 0.
    run = run_attention([[1.0]], weights={"w_q": [[[30.0]]], "w_k": [[[-30.0]]]}, scale=False)
    assert run.heads[0].softmax[0, 0] == 1.0
    e = explain(run, CellRef("softmax", 0, 0, 0), ["a"], ["x1"])
    assert isinstance(e, SoftmaxRow)
    assert [en.weight for en in e.entries] == [1.0]


# --- parse_ref ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        f"softmax.{H}.0.0",  # head out of range
        f"q.0.{T}.0",  # row out of range
        f"q.0.0.{D_K}",  # q has d_k columns
        f"v.0.0.{D_V}",  # v has d_v columns
        f"output.0.0.{D_V}",
        f"scores.0.0.{T}",
        f"final.0.0.{D_MODEL}",
        f"final.0.{T}.0",
        f"final.{H}.0.0",  # final has one "head"
        "softmax.0.0",
        "softmax.0.0.0.0",
        "softmax.-1.0.0",
        "softmax.a.0.0",
        "w_q.0.0.0",  # weights are inputs, not inspected cells
        "concat.0.0.0",
        "x.0.0.0",
        "",
        "garbage",
        " softmax.0.0.0",
        "SOFTMAX.0.0.0",
    ],
)
def test_parse_ref_rejects(run: AttentionRun, text: str) -> None:
    assert parse_ref(text, run) is None


def test_parse_ref_accepts_the_last_cell_of_each_matrix(run: AttentionRun) -> None:
    assert parse_ref(f"softmax.{H - 1}.{T - 1}.{T - 1}", run) == CellRef("softmax", H - 1, T - 1, T - 1)
    assert parse_ref(f"v.1.{T - 1}.{D_V - 1}", run) == CellRef("v", 1, T - 1, D_V - 1)
    assert parse_ref(f"final.0.{T - 1}.{D_MODEL - 1}", run) == CellRef("final", 0, T - 1, D_MODEL - 1)
    assert str(CellRef("q", 1, 2, 0)) == "q.1.2.0"


# --- score functions, linear attention, transformer blocks ----------------------------------------

X = np.random.default_rng(5).normal(0.0, 1.0, (T, D_MODEL))


def test_general_score_terms_add_up() -> None:
    run = run_attention(X, num_heads=H, d_k=D_K, score="general", seed=3)
    for ref in every_ref(run, "scores"):
        e = explained(run, ref)
        assert isinstance(e, DotProduct) and "W_a" in e.left_name
        assert np.isclose(e.total, stored(run, ref)[ref.row, ref.col])


def test_additive_score_terms_add_up_and_show_each_tanh() -> None:
    run = run_attention(X, num_heads=H, d_k=D_K, score="additive", seed=3)
    for ref in every_ref(run, "scores"):
        e = explained(run, ref)
        assert isinstance(e, AdditiveScore)
        assert len(e.terms) == D_K
        for term in e.terms:
            assert np.isclose(term.tanh, np.tanh(term.q + term.k))
            assert np.isclose(term.product, term.v * term.tanh)
        assert np.isclose(e.total, stored(run, ref)[ref.row, ref.col])
    scaled = explained(run, CellRef("scaled", 0, 0, 0))
    assert isinstance(scaled, Division) and scaled.divisor == 1.0 and "not scaled" in scaled.divisor_text


def test_linear_output_is_a_weighted_sum_with_the_implied_weights() -> None:
    run = run_attention(X, num_heads=H, d_k=D_K, attention="linear")
    for ref in every_ref(run, "output"):
        e = explained(run, ref)
        assert isinstance(e, WeightedSum) and "linear attention" in e.title
        assert np.isclose(e.result[ref.col], stored(run, ref)[ref.row, ref.col])


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh"])
def test_block_cells_are_explained_and_add_up(norm: str, activation: str) -> None:
    stack = run_transformer(X, blocks=2, d_ff=6, num_heads=H, d_k=D_K, norm=norm, activation=activation, seed=8)
    run = stack.blocks[0].attention
    for b, block in enumerate(stack.blocks):
        for matrix in BLOCK_CELLS:
            value = getattr(block, matrix)
            m = value.output if matrix in ("ln1", "ln2") else value
            for i, j in itertools.product(range(m.shape[0]), range(m.shape[1])):
                ref = parse_ref(f"{matrix}.{b}.{i}.{j}", run, stack)
                assert ref == CellRef(matrix, b, i, j)
                e = explain(run, ref, TOKENS, DIMS, stack=stack)
                if matrix in ("ln1", "ln2"):
                    assert isinstance(e, LayerNormCell)
                    row = np.array(e.row)
                    assert np.isclose(e.mean, row.mean()) and np.isclose(e.var, row.var())
                    by_hand = e.gamma * (e.value - e.mean) / np.sqrt(e.var + e.eps) + e.beta
                    assert np.isclose(by_hand, e.result) and np.isclose(e.result, m[i, j])
                elif matrix in ("ffn_hidden", "ffn_out"):
                    assert isinstance(e, DotProduct) and e.bias is not None
                    assert np.isclose(sum(t.product for t in e.terms) + e.bias, m[i, j])
                    assert np.isclose(e.total, m[i, j])
                else:
                    assert isinstance(e, Elementwise) and np.isclose(e.result, m[i, j])
    assert parse_ref("ln1.2.0.0", run, stack) is None  # no third block
    activation_cell = explain(run, parse_ref("ffn_act.0.0.0", run, stack), TOKENS, DIMS, stack=stack)
    named = {"relu": r"\max(0,", "gelu": r"\text{erf}", "gelu_tanh": r"\tanh\big("}
    assert [name for name, sign in named.items() if sign in activation_cell.formula] == [activation]
    assert parse_ref("ln1.0.0.0", run, None) is None  # no blocks at all
