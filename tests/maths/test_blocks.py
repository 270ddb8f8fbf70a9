"""app.maths.blocks: LayerNorm against the statistics module, the activations against their scalar formulas and
a table of Φ, and post- and pre-norm blocks against the same sums written out."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from app.maths.attention import run_attention, seeded_weights
from app.maths.blocks import LAYER_NORM_EPS, gelu, gelu_tanh, layer_norm, relu, run_transformer
from app.maths.positions import sinusoidal_encoding

RNG = np.random.default_rng(11)


# --- LayerNorm ------------------------------------------------------------------------------------


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


def test_layer_norm_uses_the_biased_variance_and_eps_1e_5() -> None:
    ones, zeros = np.ones(4), np.zeros(4)
    ln = layer_norm(np.array([[1.0, 2.0, 3.0, 4.0]]), ones, zeros)
    assert ln.var[0] == 1.25  # Σ(z − 2.5)²/4, not /3
    assert ln.normalized[0, 0] == pytest.approx(-1.5 / math.sqrt(1.25 + 1e-5), rel=1e-14)
    # A row whose variance, 1e-6, is below ε: (z − μ)/√(σ² + 1e-5) = ±1e-3/√1.1e-5 ≈ ±0.3015, not ±1.
    small = layer_norm(np.array([[0.0, 2e-3, 0.0, 2e-3]]), ones, zeros)
    np.testing.assert_allclose(small.normalized[0], [-1, 1, -1, 1] * np.array(1e-3 / math.sqrt(1.1e-5)), rtol=1e-9)
    assert LAYER_NORM_EPS == 1e-5


# --- activations ----------------------------------------------------------------------------------


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


# --- the block ------------------------------------------------------------------------------------


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
