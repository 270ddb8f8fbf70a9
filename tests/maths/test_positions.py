"""app.maths.positions: the sinusoidal encoding against seed 003's table and its formula, RoPE against a 2×2
rotation per pair written out, ALiBi's slopes against the paper's own rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.maths.attention import run_attention
from app.maths.positions import (
    ENCODINGS,
    POSITIONAL_ENCODINGS,
    alibi_bias,
    alibi_slopes,
    biases,
    rope_rotate,
    rotates,
    sinusoidal_encoding,
)
from app.state.scenario import from_preset

RNG = np.random.default_rng(7)


# --- sinusoidal -----------------------------------------------------------------------------------


def test_sinusoidal_encoding_reproduces_seed_003_table() -> None:
    seed_table = [[0.000, 1.000, 0.000, 1.000], [0.841, 0.540, 0.010, 1.000], [0.909, -0.416, 0.020, 1.000]]
    assert np.round(sinusoidal_encoding(3, 4), 3).tolist() == seed_table
    sc, _ = from_preset("positions")
    assert np.round(sc.run().x, 3).tolist() == seed_table


def test_sinusoidal_encoding_with_an_odd_d_model_ends_on_a_sine() -> None:
    pe = sinusoidal_encoding(4, 5)  # (T, d_model)
    for pos in range(4):
        for col in range(5):
            angle = pos / 10000 ** ((col // 2 * 2) / 5)
            assert pe[pos, col] == pytest.approx(math.sin(angle) if col % 2 == 0 else math.cos(angle), abs=1e-15)
    assert pe[1, 4] == pytest.approx(math.sin(10000**-0.8), rel=1e-14)  # 6.3096e-4: the last column is a sine
    assert not np.allclose(pe[:, :4], sinusoidal_encoding(4, 4))  # 10000^(2/5), not 10000^(2/4)


# --- RoPE -----------------------------------------------------------------------------------------


def test_rope_keeps_norms_and_depends_only_on_relative_position() -> None:
    q = RNG.normal(size=(6, 4))
    rotated = rope_rotate(q)
    assert np.allclose(np.linalg.norm(rotated, axis=1), np.linalg.norm(q, axis=1))
    assert np.allclose(rotated[0], q[0])  # position 0 is not rotated
    # the same vector at positions (1, 3) and (2, 4): equal dot products
    same = np.tile(q[:1], (6, 1))
    r = rope_rotate(same)
    assert np.isclose(r[1] @ r[3], r[2] @ r[4])


def rope_by_hand(x: list[float], pos: int) -> list[float]:
    """Turn dimensions (0, 1), (2, 3), … of one vector by pos·10000^(−2m/d): a 2×2 rotation per pair."""
    d, out = len(x), list(x)
    for m in range(d // 2):
        angle = pos * 10000 ** (-2 * m / d)
        a, b = x[2 * m], x[2 * m + 1]
        out[2 * m] = a * math.cos(angle) - b * math.sin(angle)
        out[2 * m + 1] = a * math.sin(angle) + b * math.cos(angle)
    return out


@pytest.mark.parametrize("d", [1, 4, 5, 6])
def test_rope_turns_adjacent_pairs_by_pos_times_10000_to_the_minus_2m_over_d(d: int) -> None:
    x = RNG.normal(size=(2, 7, d))  # (h, T, d)
    rotated = rope_rotate(x)
    for h in range(2):
        for pos in range(7):
            np.testing.assert_allclose(rotated[h, pos], rope_by_hand(x[h, pos].tolist(), pos), rtol=1e-13, atol=1e-15)
    if d % 2:
        np.testing.assert_array_equal(rotated[..., -1], x[..., -1])  # an odd last dimension is not turned
    # Adjacent pairing: a vector along dimension 1 stays within dimensions 0 and 1.
    e1 = np.zeros((7, 6))
    e1[:, 1] = 1.0
    turned = rope_rotate(e1)
    assert np.all(turned[:, 2:] == 0.0) and turned[3, 0] == pytest.approx(-math.sin(3.0))


# --- ALiBi ----------------------------------------------------------------------------------------


def test_alibi_bias_is_minus_slope_times_distance() -> None:
    bias = alibi_bias(2, 3, 3)
    assert bias.shape == (2, 3, 3)
    assert bias[0, 0, 2] == pytest.approx(-(2**-4) * 2)  # m_1 = 2^(−8·1/2)
    assert bias[1, 2, 0] == pytest.approx(-(2**-8) * 2)
    run = run_attention(RNG.normal(size=(3, 4)), num_heads=2, positional_encoding="alibi")
    head = run.heads[0]
    assert np.allclose(head.scaled, head.scores / math.sqrt(run.d_k) + head.bias)


def alibi_slopes_as_the_paper_s_code(n: int) -> list[float]:
    """The ALiBi repository's rule, recursive as it is written there: a geometric sequence starting
    at 2^(−8/n) for n a power of two; otherwise the power of two below, then every other slope of
    twice that, as many as are missing."""
    if math.log2(n).is_integer():
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]
    below = 2 ** math.floor(math.log2(n))
    return alibi_slopes_as_the_paper_s_code(below) + alibi_slopes_as_the_paper_s_code(2 * below)[0::2][: n - below]


def test_alibi_slopes_are_the_paper_s() -> None:
    # The paper (Press et al. 2022, section 3): for 8 heads 1/2, 1/4, …, 1/256; for 16 heads 1/√2, 1/2, …, 1/256.
    assert alibi_slopes(8).tolist() == [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256]
    np.testing.assert_allclose(alibi_slopes(16), [2 ** -(k / 2) for k in range(1, 17)], rtol=1e-15)
    # Head counts that are not a power of two: the power of two below, then every other slope above.
    assert alibi_slopes(3).tolist() == [1 / 16, 1 / 256, 1 / 4]
    assert alibi_slopes(6).tolist() == [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8]
    assert alibi_slopes(7).tolist() == [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8, 1 / 32]
    for h in range(1, 17):
        np.testing.assert_allclose(alibi_slopes(h), alibi_slopes_as_the_paper_s_code(h), rtol=1e-14)


def test_alibi_with_six_heads_biases_each_head_by_its_slope() -> None:
    run = run_attention(RNG.normal(size=(4, 12)), num_heads=6, positional_encoding="alibi")
    distance = np.abs(np.arange(4)[:, None] - np.arange(4)[None, :])  # (T, S)
    for head, m in zip(run.heads, [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8], strict=True):
        np.testing.assert_array_equal(head.bias, -m * distance)


def test_each_positional_encoding_enters_attention_one_way() -> None:
    """The table every layer reads: none, two added to x, RoPE turning q and k, ALiBi biasing the scores."""
    assert POSITIONAL_ENCODINGS == ("none", "sinusoidal", "learned", "rope", "alibi")
    ways = {v: (e.adds_to_x, e.rotates_qk, e.biases_scores) for v, e in ENCODINGS.items()}
    assert ways["none"] == (False, False, False)
    assert all(sum(w) == 1 for v, w in ways.items() if v != "none")
    assert [v for v in POSITIONAL_ENCODINGS if rotates(v)] == ["rope"]
    assert [v for v in POSITIONAL_ENCODINGS if biases(v)] == ["alibi"]
