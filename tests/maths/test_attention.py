"""app.maths.attention: the seeds' worked examples, softmax invariants, multi-head against an independent loop, and
the same for cross-attention, temperature, the score functions and linear attention."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.maths.attention import elu_plus_one, run_attention, seeded_weights, softmax_rows
from app.maths.records import AttentionRun

RNG = np.random.default_rng(11)

# Seed 001, "pool beats badminton": A, A·Aᵀ and np.round(softmax(A·Aᵀ)·A, 2) as the article prints them.
POOL_A = np.array([[0.5, 0.1, 0.1, 0.2], [0.1, 0.5, 0.2, 0.1], [0.5, 0.1, 0.2, 0.1]])
POOL_A_AT = np.array([[0.31, 0.14, 0.30], [0.14, 0.31, 0.15], [0.30, 0.15, 0.31]])
POOL_OUTPUT = np.array([[0.38, 0.22, 0.16, 0.14], [0.35, 0.25, 0.17, 0.13], [0.38, 0.22, 0.17, 0.13]])

# Seed 003's three-token worked example, d_k = 2.
S003_Q = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
S003_K = np.array([[1.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
S003_V = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
S003_SCORES = np.array([[1.0, 0.0, 1.0], [1.0, 1.0, 0.0], [2.0, 1.0, 1.0]])
S003_SCALED = np.array([[0.707, 0.000, 0.707], [0.707, 0.707, 0.000], [1.414, 0.707, 0.707]])
S003_A = np.array([[0.401, 0.198, 0.401], [0.401, 0.401, 0.198], [0.503, 0.248, 0.248]])
S003_OUTPUT = np.array([[0.401, 0.198], [0.401, 0.401], [0.503, 0.248]])


def pool_run() -> AttentionRun:
    eye = np.eye(4)
    return run_attention(
        POOL_A, weights={"w_q": eye[None], "w_k": eye[None], "w_v": eye[None], "w_o": eye}, scale=False
    )


def three_token_run() -> AttentionRun:
    w_o = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    return run_attention(
        np.eye(3), d_k=2, weights={"w_q": S003_Q[None], "w_k": S003_K[None], "w_v": S003_V[None], "w_o": w_o}
    )


# --- the seeds ------------------------------------------------------------------------------------


def test_pool_scores_are_a_times_a_transposed() -> None:
    run = pool_run()
    head = run.heads[0]
    np.testing.assert_array_equal(np.round(head.scores, 2), POOL_A_AT)
    np.testing.assert_allclose(head.scores, POOL_A @ POOL_A.T)


def test_pool_output_matches_seed_001_rounded() -> None:
    run = pool_run()
    np.testing.assert_array_equal(np.round(run.output, 2), POOL_OUTPUT)
    # W_O = I, so the final output is the head's output.
    np.testing.assert_allclose(run.output, run.heads[0].output)


def test_pool_without_scaling_leaves_scores_unscaled() -> None:
    head = pool_run().heads[0]
    np.testing.assert_array_equal(head.scaled, head.scores)


def test_three_token_projections_are_the_seed_matrices() -> None:
    head = three_token_run().heads[0]
    np.testing.assert_array_equal(head.q, S003_Q)
    np.testing.assert_array_equal(head.k, S003_K)
    np.testing.assert_array_equal(head.v, S003_V)
    np.testing.assert_array_equal(head.scores, S003_SCORES)


def test_three_token_scaled_scores_match_seed_003() -> None:
    head = three_token_run().heads[0]
    np.testing.assert_array_equal(np.round(head.scaled, 3), S003_SCALED)


def test_three_token_weights_match_seed_003() -> None:
    head = three_token_run().heads[0]
    np.testing.assert_array_equal(np.round(head.softmax, 3), S003_A)


def test_three_token_output_matches_seed_003() -> None:
    run = three_token_run()
    np.testing.assert_array_equal(np.round(run.heads[0].output, 3), S003_OUTPUT)
    # W_O copies the head's two columns into the first two of d_model = 3.
    np.testing.assert_array_equal(np.round(run.output[:, :2], 3), S003_OUTPUT)
    np.testing.assert_array_equal(run.output[:, 2], np.zeros(3))


def test_three_token_hand_softmax_numbers() -> None:
    """Seed 003 works row 0 and row 2 by hand: exp(0.707) ≈ 2.028, sums 5.056 and 8.169."""
    scaled = three_token_run().heads[0].scaled
    e = np.exp(scaled)
    assert round(float(e[0, 0]), 3) == 2.028
    assert round(float(e[2, 0]), 3) == 4.113
    np.testing.assert_array_equal(np.round(e.sum(axis=1), 3), [5.056, 5.056, 8.169])


# --- softmax --------------------------------------------------------------------------------------


def test_softmax_rows_sum_to_one_and_are_non_negative() -> None:
    rng = np.random.default_rng(7)
    z = rng.normal(0.0, 5.0, (4, 6, 6))
    a = softmax_rows(z)
    assert a.shape == z.shape
    assert np.all(a >= 0.0)
    np.testing.assert_allclose(a.sum(axis=-1), np.ones((4, 6)))


def test_softmax_rows_is_stable_for_huge_inputs() -> None:
    a = softmax_rows(np.array([[1000.0, 999.0, -1000.0]]))
    assert np.all(np.isfinite(a))
    e1 = math.exp(-1.0)
    np.testing.assert_allclose(a, [[1.0 / (1.0 + e1), e1 / (1.0 + e1), 0.0]], atol=1e-12)


def test_softmax_rows_is_stable_for_hugely_negative_inputs() -> None:
    a = softmax_rows(np.array([[-1e6, -1e6 - 1.0]]))
    assert np.all(np.isfinite(a))
    e1 = math.exp(-1.0)
    np.testing.assert_allclose(a, [[1.0 / (1.0 + e1), e1 / (1.0 + e1)]])


def test_softmax_rows_matches_naive_formula_for_small_inputs() -> None:
    z = np.array([[0.5, -1.25, 2.0, 0.0], [3.0, 3.0, 3.0, 3.0], [-0.1, 0.2, -0.3, 0.4]])
    naive = [[math.exp(v) / sum(math.exp(u) for u in row) for v in row] for row in z.tolist()]
    np.testing.assert_allclose(softmax_rows(z), naive, rtol=1e-12)


def test_softmax_rows_of_equal_scores_is_uniform() -> None:
    np.testing.assert_allclose(softmax_rows(np.full((2, 5), 42.0)), np.full((2, 5), 0.2))


# --- multi-head against an independent per-head loop ----------------------------------------------


def reference_multihead(x: np.ndarray, w_q: np.ndarray, w_k: np.ndarray, w_v: np.ndarray, w_o: np.ndarray,
                        scale: bool) -> tuple[list[dict[str, np.ndarray]], np.ndarray, np.ndarray]:
    """MultiHead(X) written the plain way: one head at a time, np.dot and a row-by-row softmax."""
    heads = []
    for i in range(w_q.shape[0]):
        q = np.dot(x, w_q[i])  # (T, d_k)
        k = np.dot(x, w_k[i])  # (T, d_k)
        v = np.dot(x, w_v[i])  # (T, d_v)
        scores = np.dot(q, k.T)  # (T, T)
        scaled = scores / math.sqrt(q.shape[1]) if scale else scores
        weights = np.empty_like(scaled)
        for r, row in enumerate(scaled.tolist()):
            top = max(row)
            exps = [math.exp(s - top) for s in row]
            total = sum(exps)
            weights[r] = [e / total for e in exps]
        out = np.dot(weights, v)  # (T, d_v)
        heads.append({"q": q, "k": k, "v": v, "scores": scores, "scaled": scaled, "softmax": weights,
                      "output": out})
    concat = np.hstack([h["output"] for h in heads])  # (T, h·d_v)
    return heads, concat, np.dot(concat, w_o)


@pytest.mark.parametrize(("num_heads", "d_k", "d_v"), [(1, 3, 5), (2, 4, 3), (4, 2, 6)])
@pytest.mark.parametrize("scale", [True, False])
def test_multihead_matches_independent_per_head_loop(num_heads: int, d_k: int, d_v: int, scale: bool) -> None:
    rng = np.random.default_rng(num_heads * 10 + d_k)
    t, d_model = 5, 8
    x = rng.normal(0.0, 1.0, (t, d_model))
    run = run_attention(x, num_heads=num_heads, d_k=d_k, d_v=d_v, seed=11, scale=scale)
    w = run.weights
    assert w.w_q.shape == (num_heads, d_model, d_k)
    assert w.w_k.shape == (num_heads, d_model, d_k)
    assert w.w_v.shape == (num_heads, d_model, d_v)
    assert w.w_o.shape == (num_heads * d_v, d_model)

    heads, concat, output = reference_multihead(x, w.w_q, w.w_k, w.w_v, w.w_o, scale)
    assert run.num_heads == num_heads
    for got, want in zip(run.heads, heads, strict=True):
        for name, value in want.items():
            np.testing.assert_allclose(getattr(got, name), value, rtol=1e-10, atol=1e-12, err_msg=name)
    np.testing.assert_allclose(run.concat, concat, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(run.output, output, rtol=1e-10, atol=1e-12)
    assert run.concat.shape == (t, num_heads * d_v)
    assert run.output.shape == (t, d_model)


def test_heads_differ_from_each_other() -> None:
    """Each head has its own projections: a run whose heads all agreed would hide a broadcasting bug."""
    x = np.random.default_rng(3).normal(size=(4, 6))
    run = run_attention(x, num_heads=3, seed=5)
    assert not np.allclose(run.heads[0].softmax, run.heads[1].softmax)
    assert not np.allclose(run.heads[1].output, run.heads[2].output)


def test_default_sizes_follow_the_paper() -> None:
    run = run_attention(np.ones((2, 8)), num_heads=4)
    assert (run.d_k, run.d_v, run.d_model, run.num_heads) == (2, 2, 8, 4)
    assert run.scale is True
    assert run.scale_factor == pytest.approx(math.sqrt(2))


def test_scaling_divides_scores_by_root_d_k() -> None:
    x = np.random.default_rng(4).normal(size=(3, 4))
    run = run_attention(x, d_k=9, seed=2)
    np.testing.assert_allclose(run.heads[0].scaled, run.heads[0].scores / 3.0)


def test_scale_false_leaves_scaled_equal_to_scores() -> None:
    x = np.random.default_rng(4).normal(size=(3, 4))
    run = run_attention(x, num_heads=2, seed=2, scale=False)
    assert run.scale_factor == 1.0
    for head in run.heads:
        np.testing.assert_array_equal(head.scaled, head.scores)


# --- seeds and given weights ----------------------------------------------------------------------


def test_same_seed_gives_identical_weights_and_output() -> None:
    x = np.random.default_rng(1).normal(size=(4, 6))
    a = run_attention(x, num_heads=2, seed=123)
    b = run_attention(x, num_heads=2, seed=123)
    for name in ("w_q", "w_k", "w_v", "w_o"):
        np.testing.assert_array_equal(getattr(a.weights, name), getattr(b.weights, name))
    np.testing.assert_array_equal(a.output, b.output)


def test_different_seed_gives_different_weights_and_output() -> None:
    x = np.random.default_rng(1).normal(size=(4, 6))
    a = run_attention(x, num_heads=2, seed=123)
    b = run_attention(x, num_heads=2, seed=124)
    for name in ("w_q", "w_k", "w_v", "w_o"):
        assert not np.array_equal(getattr(a.weights, name), getattr(b.weights, name)), name
    assert not np.allclose(a.output, b.output)


def test_seeded_weights_are_rounded_to_two_decimals() -> None:
    w = run_attention(np.ones((2, 5)), seed=9).weights
    for name in ("w_q", "w_k", "w_v", "w_o"):
        value = getattr(w, name)
        np.testing.assert_allclose(value * 100, np.round(value * 100), atol=1e-9, err_msg=name)


def test_given_weights_are_used_verbatim() -> None:
    rng = np.random.default_rng(8)
    given = {
        "w_q": rng.normal(size=(2, 4, 3)),
        "w_k": rng.normal(size=(2, 4, 3)),
        "w_v": rng.normal(size=(2, 4, 5)),
        "w_o": rng.normal(size=(10, 4)),
    }
    x = rng.normal(size=(3, 4))
    run = run_attention(x, num_heads=2, d_k=3, d_v=5, weights=given, seed=0)
    for name, value in given.items():
        np.testing.assert_array_equal(getattr(run.weights, name), value, err_msg=name)
    np.testing.assert_allclose(run.heads[1].q, x @ given["w_q"][1])
    # The seed is irrelevant once every weight is given.
    other = run_attention(x, num_heads=2, d_k=3, d_v=5, weights=given, seed=99)
    np.testing.assert_array_equal(run.output, other.output)


def test_giving_w_q_does_not_change_the_seeded_w_k() -> None:
    x = np.random.default_rng(2).normal(size=(3, 4))
    seeded = run_attention(x, seed=31)
    w_q = np.full((1, 4, 4), 0.5)
    mixed = run_attention(x, seed=31, weights={"w_q": w_q})
    np.testing.assert_array_equal(mixed.weights.w_q, w_q)
    for name in ("w_k", "w_v", "w_o"):
        np.testing.assert_array_equal(getattr(mixed.weights, name), getattr(seeded.weights, name), err_msg=name)


def test_run_keeps_x() -> None:
    x = [[1.0, 2.0], [3.0, 4.0]]
    run = run_attention(x)
    np.testing.assert_array_equal(run.x, x)
    assert run.x.dtype == np.float64


# --- shape errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "kwargs", "match"),
    [
        (np.ones(3), {}, "x"),
        (np.ones((0, 3)), {}, "x"),
        (np.ones((2, 0)), {}, "x"),
        (np.ones((2, 3, 1)), {}, "x"),
        (np.ones((2, 3)), {"num_heads": 0}, "num_heads"),
        (np.ones((2, 3)), {"num_heads": 4}, "d_k"),
        (np.ones((2, 3)), {"d_k": 0}, "d_k"),
        (np.ones((2, 3)), {"d_v": 0}, "d_v"),
        (np.ones((2, 3)), {"weights": {"w_q": np.ones((1, 3, 2))}}, "w_q"),
        (np.ones((2, 3)), {"weights": {"w_k": np.ones((3, 3))}}, "w_k"),
        (np.ones((2, 3)), {"weights": {"w_v": np.ones((2, 3, 3))}}, "w_v"),
        (np.ones((2, 3)), {"weights": {"w_o": np.ones((3, 4))}}, "w_o"),
        (np.ones((2, 4)), {"num_heads": 2, "d_v": 3, "weights": {"w_o": np.ones((4, 4))}}, "w_o"),
    ],
)
def test_shape_errors_raise_value_error(x: np.ndarray, kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        run_attention(x, **kwargs)


# --- cross-attention and temperature against a plain loop -----------------------------------------


def reference_attention(x: np.ndarray, c: np.ndarray, w: dict, mask: np.ndarray | None, scale: bool,
                        temperature: float = 1.0) -> np.ndarray:
    """A plain loop over heads, query rows and key rows: no vectorised helper from the app."""
    h = w["w_q"].shape[0]
    heads = []
    for i in range(h):
        q, k, v = x @ w["w_q"][i], c @ w["w_k"][i], c @ w["w_v"][i]
        d_k = q.shape[1]
        out = np.zeros((x.shape[0], v.shape[1]))
        for r in range(x.shape[0]):
            logits = []
            for j in range(c.shape[0]):
                s = sum(q[r, t] * k[j, t] for t in range(d_k)) / ((math.sqrt(d_k) if scale else 1) * temperature)
                logits.append(None if mask is not None and mask[r, j] else s)
            top = max(s for s in logits if s is not None)
            e = [0.0 if s is None else math.exp(s - top) for s in logits]
            total = sum(e)
            for j in range(c.shape[0]):
                out[r] += e[j] / total * v[j]
        heads.append(out)
    return np.concatenate(heads, axis=1) @ w["w_o"]


def test_cross_attention_matches_a_per_head_loop_and_is_t_by_s() -> None:
    x, c = RNG.normal(size=(3, 4)), RNG.normal(size=(5, 4))
    run = run_attention(x, num_heads=2, context=c)
    assert run.heads[0].scores.shape == (3, 5)
    assert run.heads[1].v.shape == (5, 2)
    w = {n: getattr(run.weights, n) for n in ("w_q", "w_k", "w_v", "w_o")}
    assert np.allclose(run.output, reference_attention(x, c, w, None, True))


def test_temperature_divides_the_scaled_scores() -> None:
    x = RNG.normal(size=(4, 4))
    base, hot = run_attention(x), run_attention(x, temperature=2.0)
    assert np.allclose(hot.heads[0].scaled, base.heads[0].scaled / 2)
    # a higher temperature flattens every row: the largest weight can only fall
    assert np.all(hot.heads[0].softmax.max(axis=1) <= base.heads[0].softmax.max(axis=1) + 1e-12)


# --- score functions ------------------------------------------------------------------------------


def test_general_score_is_q_transpose_w_k_per_pair() -> None:
    x = RNG.normal(size=(4, 6))
    run = run_attention(x, num_heads=2, score="general", seed=3)
    for h, head in enumerate(run.heads):
        w_a = run.weights.w_a[h]
        for i in range(4):
            for j in range(4):
                expected = sum(head.q[i, a] * w_a[a, b] * head.k[j, b] for a in range(3) for b in range(3))
                assert head.scores[i, j] == pytest.approx(expected)
        np.testing.assert_allclose(head.scaled, head.scores / math.sqrt(3))  # still a dot product: scaled


def test_additive_score_is_a_one_layer_network_per_pair_and_is_not_scaled() -> None:
    x = RNG.normal(size=(3, 4))
    run = run_attention(x, num_heads=1, score="additive", seed=5, scale=True)
    head, w = run.heads[0], run.weights
    for i in range(3):
        for j in range(3):
            hidden = [math.tanh(sum(head.q[i, a] * w.w_1[0, a, m] + head.k[j, a] * w.w_2[0, a, m] for a in range(4)))
                      for m in range(4)]
            assert head.scores[i, j] == pytest.approx(sum(w.v_a[0, m] * hidden[m] for m in range(4)))
    np.testing.assert_array_equal(head.scaled, head.scores)  # Bahdanau's score is never divided by √d_k
    assert run.scale_factor == 1.0
    np.testing.assert_allclose(head.q_1, head.q @ w.w_1[0])
    np.testing.assert_allclose(head.k_2, head.k @ w.w_2[0])


def test_additive_scores_are_bounded_by_the_l1_norm_of_v() -> None:
    run = run_attention(RNG.normal(size=(5, 4)) * 50, score="additive")
    bound = np.abs(run.weights.v_a[0]).sum()
    assert np.all(np.abs(run.heads[0].scores) <= bound + 1e-12)


def test_score_weights_do_not_change_the_projections_drawn_before_them() -> None:
    """The score functions' weights have their own stream: W_Q … W_O are what seed 0 always gave."""
    w = seeded_weights(4, 1, 4, 4, seed=0)
    rng = np.random.default_rng(0)
    np.testing.assert_array_equal(w.w_q, np.round(rng.normal(0.0, 0.5, (1, 4, 4)), 2))
    assert w.w_a.shape == (1, 4, 4) and w.w_1.shape == (1, 4, 4) and w.v_a.shape == (1, 4)


def test_given_score_weights_are_used() -> None:
    w_a = np.eye(2)[None]
    run = run_attention(np.eye(2), d_k=2, score="general", weights={"w_a": w_a})
    head = run.heads[0]
    np.testing.assert_allclose(head.scores, head.q @ head.k.T)  # W_a = I: general = dot


# --- linear attention -----------------------------------------------------------------------------


def test_elu_plus_one_is_positive_and_matches_its_definition() -> None:
    z = np.array([-3.0, -0.5, 0.0, 0.5, 2.0])
    np.testing.assert_allclose(elu_plus_one(z), [math.exp(-3), math.exp(-0.5), 1.0, 1.5, 3.0])


def test_linear_attention_matches_a_per_query_loop() -> None:
    x = RNG.normal(size=(4, 4))
    run = run_attention(x, num_heads=2, attention="linear", seed=2)
    for head in run.heads:
        phi = lambda a: np.array([v + 1 if v > 0 else math.exp(v) for v in a])  # noqa: E731
        for i in range(4):
            num = sum(phi(head.q[i]) @ phi(head.k[j]) * head.v[j] for j in range(4))
            den = sum(phi(head.q[i]) @ phi(head.k[j]) for j in range(4))
            np.testing.assert_allclose(head.output[i], num / den)
        lin = head.linear
        np.testing.assert_allclose(lin.weights.sum(axis=1), 1.0)
        np.testing.assert_allclose(lin.weights @ head.v, head.output)  # the implied T×S matrix agrees
        np.testing.assert_allclose(head.softmax_output, head.softmax @ head.v)  # softmax kept to compare
    concat = np.concatenate([h.output for h in run.heads], axis=1)
    np.testing.assert_allclose(run.output, concat @ run.weights.w_o)


def test_linear_attention_with_a_causal_mask_ignores_later_keys() -> None:
    run = run_attention(RNG.normal(size=(5, 3)), attention="linear", mask="causal")
    lin = run.heads[0].linear
    assert np.all(lin.weights[np.triu_indices(5, k=1)] == 0.0)
    np.testing.assert_allclose(run.heads[0].output[0], run.heads[0].v[0])  # token 0 sees only itself


def test_linear_attention_s_summary_is_built_from_every_key_and_gives_the_unmasked_output() -> None:
    x = RNG.normal(size=(5, 4))
    open_run = run_attention(x, attention="linear", seed=6)
    causal = run_attention(x, attention="linear", seed=6, mask="causal")
    head = open_run.heads[0]
    phi = np.vectorize(lambda v: v + 1 if v > 0 else math.exp(v))
    summary = sum(np.outer(phi(head.k[j]), head.v[j]) for j in range(5))  # Σ_j φ(k_j)·v_jᵀ, (d_k, d_v)
    np.testing.assert_allclose(head.linear.kv, summary, rtol=1e-14)
    by_summary = phi(head.q) @ head.linear.kv / head.linear.z[:, None]  # (T, d_v)
    np.testing.assert_allclose(by_summary, head.output, rtol=1e-14)
    # Under a mask the summary is the same, every key's; the output skips each query's hidden keys.
    lin = causal.heads[0].linear
    np.testing.assert_array_equal(lin.kv, head.linear.kv)
    for i in range(5):
        seen = range(i + 1)
        kernel = [phi(head.q[i]) @ phi(head.k[j]) for j in seen]
        np.testing.assert_allclose(lin.z[i], sum(kernel), rtol=1e-14)
        expected = sum(w * head.v[j] for w, j in zip(kernel, seen, strict=True)) / sum(kernel)
        np.testing.assert_allclose(causal.heads[0].output[i], expected, rtol=1e-13)
    assert not np.allclose(phi(head.q) @ lin.kv / lin.z[:, None], causal.heads[0].output)


def test_linear_attention_differs_from_softmax() -> None:
    run = run_attention(RNG.normal(size=(5, 4)) * 2, attention="linear")
    assert np.abs(run.heads[0].output - run.heads[0].softmax_output).max() > 1e-3
