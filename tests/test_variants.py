"""Score functions, sparse masks, linear attention and the transformer block, against plain loops
and hand-computed values (no vectorised helper from the app in the references)."""

from __future__ import annotations

import html
import json
import math
import re
import statistics
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.lesson.presets import PRESETS
from app.lesson.stages import BY_KEY, Options, describe
from app.maths.attention import elu_plus_one, run_attention, seeded_weights
from app.maths.blocks import gelu, gelu_tanh, layer_norm, relu, run_transformer
from app.maths.masks import local_mask, strided_mask
from app.maths.positions import sinusoidal_encoding
from app.state.scenario import from_preset
from tests.conftest import form_fields

RNG = np.random.default_rng(11)


def weights_dict(run) -> dict[str, np.ndarray]:
    return {name: getattr(run.weights, name) for name in ("w_q", "w_k", "w_v", "w_o")}


# --- score functions -----------------------------------------------------------------------------


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


def test_the_score_functions_are_written_in_one_orientation_everywhere(client: TestClient) -> None:
    """q_i and k_j are rows, as the code computes (Q·W₁)_ia + (K·W₂)_ja: q_i·W₁, never W₁q or W₁ᵀq."""
    schema = client.get("/openapi.json").text
    readme = "".join(p.read_text() for p in (Path(__file__).resolve().parent.parent / "docs").glob("*.md"))
    sources = [schema, readme, PRESETS["additive"].summary,
               *(" ".join(describe(BY_KEY["scores"], Options(score=score))) for score in ("general", "additive"))]
    column_forms = ("W₁q", "W₁ᵀq", "W_1 q", "W_1^{\\top} q", "qᵀ·W", "q_i^{\\top} W_a", "v_aᵀ", "v_a^{\\top}")
    for text in sources:
        assert not [form for form in column_forms if form in text], text[:200]
    for text in (schema, readme):
        assert "v_a·tanh(q_i·W₁ + k_j·W₂)" in text and "q_i·W_a·k_jᵀ" in text
    assert r"v_a \cdot \tanh(q_i W_1 + k_j W_2)" in describe(BY_KEY["scores"], Options(score="additive"))[0]
    assert r"q_i W_a\, k_j^{\top}" in describe(BY_KEY["scores"], Options(score="general"))[0]


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


# --- sparse masks ----------------------------------------------------------------------------------


def test_local_window_hides_keys_further_than_the_window() -> None:
    m = local_mask(5, 5, 1)
    for i in range(5):
        for j in range(5):
            assert m[i, j] == (abs(i - j) > 1)


def test_strided_pattern_is_neighbourhood_or_every_stride_th_token() -> None:
    m = strided_mask(9, 9, 3)
    for i in range(9):
        for j in range(9):
            assert m[i, j] == (not (abs(i - j) < 3 or (i - j) % 3 == 0))
    assert m.sum(axis=1).min() > 0  # every query hides something at T = 9, stride 3


@pytest.mark.parametrize(("mode", "window"), [("local", 1), ("strided", 2), ("strided", None)])
def test_sparse_masks_give_exact_zeros_where_hidden(mode: str, window: int | None) -> None:
    run = run_attention(RNG.normal(size=(7, 4)), mask=mode, window=window)
    assert run.mask_mode == mode
    assert run.window == (window or 3)  # strided default: ⌈√7⌉ = 3
    for head in run.heads:
        assert np.all(head.softmax[run.mask] == 0.0)
        np.testing.assert_allclose(head.softmax.sum(axis=1), 1.0)


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


# --- transformer block ----------------------------------------------------------------------------


def test_layer_norm_rows_have_mean_0_and_variance_1() -> None:
    z = RNG.normal(3.0, 5.0, size=(4, 6))
    ln = layer_norm(z, np.ones(6), np.zeros(6))
    np.testing.assert_allclose(ln.normalized.mean(axis=1), 0.0, atol=1e-12)
    np.testing.assert_allclose(ln.normalized.var(axis=1), 1.0, rtol=1e-5)
    for r in range(4):  # the statistics module as an independent reference
        row = list(z[r])
        mu, var = statistics.fmean(row), statistics.pvariance(row)
        expected = [(v - mu) / math.sqrt(var + 1e-5) for v in row]
        np.testing.assert_allclose(ln.output[r], expected)


def test_layer_norm_applies_gain_and_bias() -> None:
    z = np.array([[1.0, 2.0, 3.0]])
    ln = layer_norm(z, np.array([2.0, 2.0, 2.0]), np.array([0.5, 0.5, 0.5]))
    # hand: μ = 2, σ² = 2/3, (z − μ)/√σ² = [−1.2247, 0, 1.2247]
    np.testing.assert_allclose(ln.output, [[0.5 - 2 * 1.2247357, 0.5, 0.5 + 2 * 1.2247357]], rtol=1e-6)


def gelu_erf_by_hand(z: float) -> float:
    """GELU(z) = z·Φ(z), Φ the standard normal CDF: ½·z·(1 + erf(z/√2)), one scalar at a time."""
    return 0.5 * z * (1.0 + math.erf(z / math.sqrt(2.0)))


def gelu_tanh_by_hand(z: float) -> float:
    """GPT-2's tanh approximation, ½·z·(1 + tanh(√(2/π)·(z + 0.044715·z³))), one scalar at a time."""
    return 0.5 * z * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z**3)))


# Φ(z) from a table of the standard normal distribution, to 16 digits: GELU(z) = z·Φ(z).
NORMAL_CDF = {-1.0: 0.15865525393145705, 0.5: 0.6914624612740131, 1.0: 0.8413447460685429,
              2.0: 0.9772498680518208, 3.0: 0.9986501019683699}
ACTIVATIONS_BY_HAND = {
    "relu": lambda z: max(0.0, z), "gelu": gelu_erf_by_hand, "gelu_tanh": gelu_tanh_by_hand,
}


def by_hand(activation: str, z: np.ndarray) -> np.ndarray:
    return np.vectorize(ACTIVATIONS_BY_HAND[activation])(z)


def test_relu_sets_negatives_to_zero() -> None:
    z = np.linspace(-4, 4, 81)
    np.testing.assert_array_equal(relu(z), np.where(z > 0, z, 0.0))


def test_gelu_is_the_exact_erf_form() -> None:
    z = RNG.normal(0.0, 3.0, size=(64, 256))  # the largest T × d_ff
    np.testing.assert_allclose(gelu(z), by_hand("gelu", z), rtol=1e-15, atol=1e-300)
    for v, phi in NORMAL_CDF.items():
        assert gelu(np.array([v]))[0] == pytest.approx(v * phi, rel=1e-15)
    assert gelu(np.array([1.0]))[0] == 0.8413447460685429  # GELU(1) = Φ(1)
    assert gelu(np.array([0.0]))[0] == 0.0
    np.testing.assert_allclose(gelu(z) - gelu(-z), z, rtol=1e-13)  # Φ(z) + Φ(−z) = 1


def test_gelu_tanh_is_gpt2s_approximation() -> None:
    z = RNG.normal(0.0, 3.0, size=(64, 256))
    # np.tanh and math.tanh may differ in the last bit; 1 + tanh cancels far left, so an absolute bound
    np.testing.assert_allclose(gelu_tanh(z), by_hand("gelu_tanh", z), rtol=1e-14, atol=1e-14)
    # ½·(1 + tanh(√(2/π)·1.044715)) at z = 1, and the same at z = 2 with 2 + 0.044715·8
    assert gelu_tanh(np.array([1.0]))[0] == pytest.approx(0.8411919906082768, rel=1e-15)
    assert gelu_tanh(np.array([2.0]))[0] == pytest.approx(1.954597694087775, rel=1e-15)
    np.testing.assert_allclose(gelu_tanh(z) - gelu_tanh(-z), z, rtol=1e-13)  # tanh is odd


def test_the_two_gelus_differ_by_at_most_4_74e_4() -> None:
    z = np.linspace(-8.0, 8.0, 160_001)
    gap = np.abs(gelu(z) - gelu_tanh(z))  # (160001,)
    assert 4.73e-4 < gap.max() < 4.74e-4
    assert abs(abs(z[gap.argmax()]) - 2.699) < 1e-3
    assert gelu(np.array([1.0]))[0] - gelu_tanh(np.array([1.0]))[0] == pytest.approx(1.5276e-4, rel=1e-3)


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh"])
def test_post_norm_block_is_layernorm_of_residuals(activation: str) -> None:
    x = RNG.normal(size=(4, 4))
    trun = run_transformer(x, blocks=1, d_ff=8, activation=activation, num_heads=2, seed=1)
    block = trun.blocks[0]
    attn = run_attention(x, num_heads=2, seed=1).output  # the same seeded attention, run alone

    def act(z: np.ndarray) -> np.ndarray:
        return by_hand(activation, z)

    def ln(z: np.ndarray) -> np.ndarray:
        return (z - z.mean(1, keepdims=True)) / np.sqrt(z.var(1, keepdims=True) + 1e-5)

    bw = block.weights
    h = ln(x + attn)
    out = ln(h + act(h @ bw.ffn_w1 + bw.ffn_b1) @ bw.ffn_w2 + bw.ffn_b2)
    np.testing.assert_allclose(block.h, h)
    np.testing.assert_allclose(block.output, out)
    assert block.d_ff == 8
    np.testing.assert_allclose(block.output.mean(axis=1), 0.0, atol=1e-12)


def test_pre_norm_block_adds_the_residual_after_the_sub_layers() -> None:
    x = RNG.normal(size=(3, 4))
    block = run_transformer(x, blocks=1, norm="pre", seed=4).blocks[0]

    def ln(z: np.ndarray) -> np.ndarray:
        return (z - z.mean(1, keepdims=True)) / np.sqrt(z.var(1, keepdims=True) + 1e-5)

    attn = run_attention(ln(x), seed=4).output
    h = x + attn
    bw = block.weights
    out = h + relu(ln(h) @ bw.ffn_w1 + bw.ffn_b1) @ bw.ffn_w2 + bw.ffn_b2
    np.testing.assert_allclose(block.output, out)
    np.testing.assert_allclose(block.attention.x, ln(x))


def test_blocks_stack_with_their_own_weights() -> None:
    x = RNG.normal(size=(4, 4))
    trun = run_transformer(x, blocks=3, seed=2)
    assert len(trun.blocks) == 3
    for a, b in zip(trun.blocks, trun.blocks[1:], strict=False):
        np.testing.assert_array_equal(b.x, a.output)
        assert not np.array_equal(a.attention.weights.w_q, b.attention.weights.w_q)
        assert not np.array_equal(a.weights.ffn_w1, b.weights.ffn_w1)
    np.testing.assert_array_equal(trun.output, trun.blocks[-1].output)
    again = run_transformer(x, blocks=3, seed=2)
    np.testing.assert_array_equal(again.output, trun.output)


def test_positions_are_added_once_before_the_first_block() -> None:
    x = RNG.normal(size=(3, 4))
    trun = run_transformer(x, blocks=2, positional_encoding="sinusoidal")
    pe = sinusoidal_encoding(3, 4)
    np.testing.assert_allclose(trun.pe, pe)
    np.testing.assert_allclose(trun.blocks[0].x, x + pe)
    np.testing.assert_array_equal(trun.blocks[1].x, trun.blocks[0].output)
    assert trun.blocks[1].attention.pe is None


def test_first_block_uses_given_weights() -> None:
    x = np.eye(3)
    w = seeded_weights(3, 1, 3, 3, seed=9)
    given = {"w_q": w.w_q, "w_k": w.w_k, "w_v": w.w_v, "w_o": w.w_o}
    ffn = {"ffn_w1": np.ones((3, 2)), "ffn_w2": np.ones((2, 3))}
    block = run_transformer(x, blocks=1, d_ff=2, weights=given, block_weights=ffn).blocks[0]
    np.testing.assert_array_equal(block.attention.weights.w_q, w.w_q)
    np.testing.assert_array_equal(block.weights.ffn_w1, np.ones((3, 2)))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"blocks": 0}, "blocks"), ({"activation": "tanh"}, "activation"), ({"norm": "middle"}, "norm"),
    ({"d_ff": 0}, "d_ff"), ({"block_weights": {"ffn_w1": np.ones((2, 2))}}, "ffn_w1"),
])
def test_block_errors_name_the_argument(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        run_transformer(np.eye(3), **kwargs)


# --- the API ------------------------------------------------------------------------------------

BASE = {"tokens": ["a", "b", "c", "d"], "x": [[1.0, 0.5], [0.2, -0.3], [0.4, 0.9], [-0.6, 0.1]]}


def post(client: TestClient, **extra: object) -> tuple[int, dict]:
    r = client.post("/api/attention", content=json.dumps({**BASE, **extra}),
                    headers={"content-type": "application/json"})
    return r.status_code, r.json()


def test_api_score_functions(client: TestClient) -> None:
    status, body = post(client, score="general")
    assert status == 200 and body["score"] == "general"
    head = body["heads"][0]
    assert np.allclose(np.array(head["q_w"]) @ np.array(head["k"]).T, head["scores"])
    assert body["scale_factor"] == pytest.approx(math.sqrt(2))
    status, body = post(client, score="additive", weights={"v_a": [[1.0, -1.0]]})
    assert status == 200 and body["scale_factor"] == 1.0
    assert body["weights"]["v_a"] == [[1.0, -1.0]]
    assert np.all(np.abs(body["heads"][0]["scores"]) <= 2.0)
    assert len(body["heads"][0]["q_1"]) == 4 and len(body["heads"][0]["k_2"][0]) == 2


def test_api_linear_attention_returns_both_outputs(client: TestClient) -> None:
    status, body = post(client, attention="linear")
    assert status == 200
    head = body["heads"][0]
    assert head["output"] == head["linear"]["output"]
    assert np.allclose(head["softmax_output"], np.array(head["softmax"]) @ np.array(head["v"]))
    assert np.allclose(np.array(head["linear"]["weights"]).sum(axis=1), 1.0)


def test_api_linear_summary_gives_the_output_without_a_mask_and_says_so(client: TestClient) -> None:
    status, body = post(client, attention="linear")
    assert status == 200
    lin = body["heads"][0]["linear"]
    output = np.array(lin["phi_q"]) @ np.array(lin["kv"]) / np.array(lin["z"])[:, None]  # (T, d_v)
    np.testing.assert_allclose(output, body["heads"][0]["output"], rtol=1e-13)
    status, masked = post(client, attention="linear", mask="causal")
    assert status == 200 and masked["heads"][0]["linear"]["kv"] == lin["kv"]  # every key's, mask or not
    described = client.get("/openapi.json").json()["components"]["schemas"]["LinearOut"]["properties"]
    assert "built once from every key, whatever the mask" in described["kv"]["description"]
    assert "Under a mask it does not give the output" in described["kv"]["description"]
    assert "0 at a hidden key" in described["weights"]["description"]


def test_api_sparse_masks(client: TestClient) -> None:
    status, body = post(client, mask="local", window=1)
    assert status == 200 and body["mask_mode"] == "local" and body["window"] == 1
    assert body["mask"][0] == [False, False, True, True]
    assert body["heads"][0]["softmax"][0][3] == 0.0 and body["heads"][0]["scaled"][0][3] is None
    status, body = post(client, mask="strided")
    assert status == 200 and body["window"] == 2  # ⌈√4⌉


def test_api_transformer_blocks(client: TestClient) -> None:
    status, body = post(client, blocks=2, d_ff=3, activation="gelu", num_heads=2, d_k=1)
    assert status == 200
    assert len(body["blocks"]) == 2
    first, second = body["blocks"]
    assert first["attention"] is None and second["attention"] is not None
    assert len(first["ffn_hidden"][0]) == 3
    assert np.allclose(np.array(first["ln1"]["normalized"]).mean(axis=1), 0.0)
    assert np.allclose(first["residual1"], np.array(first["x"]) + np.array(body["output"]))
    assert second["x"] == first["output"]
    assert body["final"] == second["output"]
    status, body = post(client)
    assert body["blocks"] == [] and body["final"] == body["output"]


def test_api_first_block_weights_are_used(client: TestClient) -> None:
    ffn = {"ffn_w1": [[1.0], [0.0]], "ffn_b1": [0.5], "ffn_w2": [[1.0, -1.0]], "ln2_gamma": [2.0, 2.0]}
    status, body = post(client, blocks=1, d_ff=1, weights=ffn)
    assert status == 200
    block = body["blocks"][0]
    assert block["weights"]["ffn_w1"] == [[1.0], [0.0]] and block["weights"]["ln2_gamma"] == [2.0, 2.0]
    h = np.array(block["h"])
    assert np.allclose(block["ffn_hidden"], h[:, :1] + 0.5)


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"score": "cosine"}, "score"),
        ({"attention": "sparse"}, "attention"),
        ({"mask": "local", "window": 0}, "window"),
        ({"blocks": 5}, "blocks"),
        ({"blocks": 1, "d_ff": 0}, "d_ff"),
        ({"blocks": 1, "d_ff": 100000}, "d_ff"),
        ({"activation": "tanh"}, "activation"),
        ({"norm": "sandwich"}, "norm"),
        ({"weights": {"ffn_w1": [[1.0]]}}, "weights.ffn_w1"),
        ({"weights": {"v_a": [[1.0, 2.0, 3.0]]}}, "weights.v_a"),
        ({"weights": {"ln1_gamma": [1.0, float("nan")]}}, "ln1_gamma"),
        # 4 queries against 1 source key: query 3 has no key within ±1.
        ({"context": {"tokens": ["s"], "x": [[0.1, 0.2]]}, "mask": "local", "window": 1}, "hides every key"),
    ],
)
def test_api_rejects_bad_variant_fields(client: TestClient, extra: dict, needle: str) -> None:
    r = client.post("/api/attention", content=json.dumps({**BASE, **extra}),
                    headers={"content-type": "application/json"})
    assert r.status_code == 422
    body = r.json()
    assert any(needle in d["msg"] or needle in d.get("field", "") for d in body["detail"]), body


# --- the page -------------------------------------------------------------------------------------

HTMX = {"HX-Request": "true"}


def page_form(client: TestClient, preset: str = "default") -> dict[str, str]:
    r = client.get("/", params={"preset": preset})
    assert r.status_code == 200
    return form_fields(r.text)


def articles(html: str) -> list[str]:
    return re.findall(r'<article class="stage" id="stage-([a-z0-9]+)"', html)


@pytest.mark.parametrize(("extra", "expected"), [
    ({}, ["x", "qkv", "scores", "scaled", "mask", "softmax", "output", "multihead"]),
    ({"blocks": "1"}, ["x", "qkv", "scores", "scaled", "mask", "softmax", "output", "multihead",
                       "addnorm1", "ffn", "addnorm2"]),
])
def test_block_stages_appear_only_with_blocks(client: TestClient, extra: dict, expected: list[str]) -> None:
    r = client.post("/", data={**page_form(client), **extra}, headers=HTMX)
    assert r.status_code == 200
    r = client.post("/stages", data={**form_fields(r.text), "show_all": "on"}, headers=HTMX)
    assert r.status_code == 200
    assert articles(r.text) == expected


@pytest.mark.parametrize("preset", ["additive", "sparse", "linear", "block"])
@pytest.mark.parametrize("block", ["0", "1"])
def test_every_stage_of_the_new_presets_renders(client: TestClient, preset: str, block: str) -> None:
    r = client.post("/stages", data={**page_form(client, preset), "show_all": "on", "block": block}, headers=HTMX)
    assert r.status_code == 200
    assert "multihead" in articles(r.text)


def test_block_page_numbers_are_the_pipeline_s(client: TestClient) -> None:
    form = page_form(client, "block")
    sc, _ = from_preset("block")
    _, stack = sc.compute()
    r = client.post("/stages", data={**form, "goto": "addnorm2", "block": "1"}, headers=HTMX)
    assert r.status_code == 200
    shown = table_numbers(r.text, "ln2.1")
    assert shown == [[f"{v:.3f}" for v in row] for row in (np.round(stack.blocks[1].ln2.output, 3) + 0.0).tolist()]
    assert "block 2 of 2" in r.text


def test_ffn_edit_and_d_ff_change_through_the_form(client: TestClient) -> None:
    form = page_form(client, "block")
    assert form["shape"].endswith(",12")  # d_ff = 4·d_model is rendered
    r = client.post("/stages", data={**form, "ffn_w1-0-0": "1.5"}, headers=HTMX)
    assert r.status_code == 200
    r = client.post("/", data={**form, "ffn_w1-0-0": "1.5", "d_ff": "5"}, headers=HTMX)
    assert r.status_code == 200
    after = form_fields(r.text)
    assert after["shape"].endswith(",5") and after["ffn_w1-0-0"] == "1.5"  # the edit survives a narrower FFN
    assert "ffn_w1-0-5" not in after


@pytest.mark.parametrize(("activation", "shown", "not_shown"), [
    ("relu", ["ReLU(z) = max(0, z)"], ["erf", "GPT-2"]),
    ("gelu", ["erf", "the exact form (PyTorch's default, BERT)"], ["GPT-2", "0.044715"]),
    ("gelu_tanh", ["0.044715", "GPT-2's approximation", "4.74"], ["PyTorch's default"]),
])
def test_the_ffn_stage_names_its_activation(client: TestClient, activation: str, shown: list[str],
                                            not_shown: list[str]) -> None:
    form = {**page_form(client, "block"), "activation": activation}
    r = client.post("/stages", data={**form, "goto": "ffn"}, headers=HTMX)
    assert r.status_code == 200
    note = re.search(r'<article class="stage" id="stage-ffn".*?</article>', r.text, re.S).group(0)
    text = "".join(html.unescape(re.sub(r"<[^>]+>", "", note)).split())  # its words and maths, no spaces

    def found(words: str) -> bool:
        return "".join(words.split()) in text

    assert all(map(found, shown)) and not any(map(found, not_shown)), text
    assert 'selected>' + {"relu": "ReLU", "gelu": "GELU (exact)", "gelu_tanh": "GELU (tanh approximation)"}[
        activation] in client.post("/", data=form, headers=HTMX).text


def test_api_gelu_is_exact_and_gelu_tanh_the_approximation(client: TestClient) -> None:
    acts = {}
    for activation in ("gelu", "gelu_tanh"):
        status, body = post(client, blocks=1, d_ff=16, activation=activation)
        assert status == 200
        hidden = np.array(body["blocks"][0]["ffn_hidden"])  # (T, d_ff)
        acts[activation] = np.array(body["blocks"][0]["ffn_act"])
        np.testing.assert_allclose(acts[activation], by_hand(activation, hidden), rtol=1e-14, atol=1e-14)
    assert 0 < np.abs(acts["gelu"] - acts["gelu_tanh"]).max() < 4.74e-4


@pytest.mark.parametrize("mask", ["none", "causal"])
def test_the_linear_output_stage_says_how_a_mask_enters(client: TestClient, mask: str) -> None:
    form = {**page_form(client, "linear"), "mask": mask}
    r = client.post("/stages", data={**form, "goto": "output"}, headers=HTMX)
    assert r.status_code == 200
    stage = re.search(r'<article class="stage" id="stage-output".*?</article>', r.text, re.S).group(0)
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", "", stage)).split())
    said = "is still built from every key; the mask is applied per query inside the sums"
    assert (said in text) == (mask == "causal")
    assert ("seen by" in text) == (mask == "causal")  # the formula and the equation skip hidden keys


def test_bad_block_fields_get_a_message_not_a_500(client: TestClient) -> None:
    form = page_form(client, "block")
    for field, value in (("d_ff", "0"), ("d_ff", "9999"), ("blocks", "9"), ("window", "0"),
                         ("ffn_w1-0-0", "x"), ("ln1_gamma-0-0", "nan"), ("score", "cosine")):
        r = client.post("/", data={**form, field: value}, headers=HTMX)
        assert r.status_code == 422, (field, value)
        assert f'data-field="{field}"' in r.text


def test_extra_panels_are_computed_only_when_opened(client: TestClient) -> None:
    form = page_form(client)
    assert 'id="lab-panel"' in client.get("/").text
    closed = client.post("/stages", data=form, headers=HTMX)
    chart = 'role="img" class="chart '  # the lab's SVG charts (the pipeline map is an SVG too)
    assert 'name="show_panel" value="lab"' in closed.text and chart not in closed.text
    opened = client.post("/stages", data={**form, "show_panel": "lab"}, headers=HTMX)
    assert chart in opened.text and "0.881" in opened.text  # seed 003's softmax([8, −4, 6])
    assert form_fields(opened.text)["panels"] == "lab"
    both = client.post("/stages", data={**form, "panels": "lab", "show_panel": "cost"}, headers=HTMX)
    assert re.search(r'id="cost-panel" open>', both.text) and re.search(r'id="lab-panel" open>', both.text)
    assert form_fields(both.text)["panels"] == "cost lab"
    assert "crossover" in both.text
    ignored = client.post("/stages", data={**form, "panels": "lab <script>"}, headers=HTMX)
    assert form_fields(ignored.text)["panels"] == "lab"


def table_numbers(html: str, ref: str) -> list[list[str]]:
    m = re.search(rf'<table class="heatmap [^"]*" data-ref="{re.escape(ref)}"[^>]*>(.*?)</table>', html, re.S)
    assert m, f"no heatmap {ref}"
    body = m.group(1).split("<tbody>", 1)[1]
    return [re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]
