"""app.maths.lab: Var(q·k) = d_k and Var(q·k/√d_k) = 1 within sampling error, softmax saturation, the Jacobian
against finite differences, the sampler against dot products of drawn vectors, and seed 003's digits."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.maths.attention import softmax_rows
from app.maths.lab import (
    SEED_003_SCALED,
    SEED_003_UNSCALED,
    entropy_rows,
    jacobian_frobenius,
    scaling_lab,
    softmax_example,
    softmax_jacobian,
    softmax_stats,
)

D_KS = (4, 16, 64, 256)
SAMPLES = 4000
SIGMAS = 5  # tolerance in standard errors: a false failure has odds of about 1 in 1.7 million per check


def variance_standard_error(d_k: int, n: int) -> float:
    """SE of the sample variance of q·k: Var((q·k)²) = E(q·k)⁴ − d_k² = (3d_k² + 6d_k) − d_k² for N(0, 1) entries.

    E(q·k)⁴ = Σ E(qᵢkᵢ)⁴ + 3·Σ_{i≠j} E(qᵢkᵢ)²E(qⱼkⱼ)² = 9·d_k + 3·d_k(d_k − 1).
    """
    return math.sqrt((2 * d_k**2 + 6 * d_k) / n)


def numeric_jacobian(z: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """∂softmax(z)ᵢ/∂zⱼ by central differences, one column per zⱼ."""
    n = z.shape[0]
    cols = []
    for j in range(n):
        step = np.zeros(n)
        step[j] = eps
        cols.append((softmax_rows(z + step) - softmax_rows(z - step)) / (2 * eps))
    return np.stack(cols, axis=1)  # (n, n): row i, column j


# --- Var(q·k) = d_k, Var(q·k/√d_k) = 1 ---------------------------------------------------------------


@pytest.mark.parametrize("d_k", D_KS)
def test_unscaled_variance_is_d_k_within_sampling_error(d_k: int) -> None:
    row = scaling_lab(seed=0, samples=SAMPLES, d_ks=D_KS).row(d_k)
    assert abs(row.unscaled.variance - d_k) < SIGMAS * variance_standard_error(d_k, SAMPLES)
    assert abs(row.unscaled.mean) < SIGMAS * math.sqrt(d_k / SAMPLES)  # SE of the mean: √(d_k / n)


@pytest.mark.parametrize("d_k", D_KS)
def test_scaled_variance_is_one_within_sampling_error(d_k: int) -> None:
    row = scaling_lab(seed=0, samples=SAMPLES, d_ks=D_KS).row(d_k)
    assert abs(row.scaled.variance - 1.0) < SIGMAS * variance_standard_error(d_k, SAMPLES) / d_k
    assert row.scaled.std == pytest.approx(row.unscaled.std / math.sqrt(d_k))
    assert row.scaled.divisor == math.sqrt(d_k) and row.unscaled.divisor == 1.0


def test_variance_holds_for_other_seeds() -> None:
    for seed in (1, 2, 3):
        for row in scaling_lab(seed=seed, d_ks=D_KS).rows:
            se = variance_standard_error(row.d_k, SAMPLES)
            assert abs(row.unscaled.variance - row.d_k) < SIGMAS * se


def test_sampler_matches_dot_products_of_drawn_vectors() -> None:
    """The lab samples ‖q‖ and each key's component along q; draw whole N(0, 1) vectors instead and compare."""
    d_k, n, n_keys = 64, 4000, 8
    rng = np.random.default_rng(12345)
    q = rng.standard_normal((n, d_k))  # (n, d_k)
    k = rng.standard_normal((n, n_keys, d_k))  # (n, n_keys, d_k)
    scores = np.einsum("nd,nkd->nk", q, k)  # (n, n_keys)
    brute = softmax_stats(scores)
    row = scaling_lab(seed=0, samples=n, d_ks=(d_k,), n_keys=n_keys).row(d_k)
    # Two independent estimates of the same variance: their difference has SE √2 times one's.
    se = variance_standard_error(d_k, n)
    assert abs(scores[:, 0].var(ddof=1) - row.unscaled.variance) < SIGMAS * math.sqrt(2) * se
    # Mean largest weight: each row's max weight lies in [0, 1], so its SD is at most 0.5; ×√2 for the difference.
    # Rows are independent in both samplers, so this bound is conservative.
    assert abs(brute.max_weight - row.unscaled.softmax.max_weight) < SIGMAS * math.sqrt(2) * 0.5 / math.sqrt(n)
    assert abs(softmax_stats(scores / 8.0).max_weight - row.scaled.softmax.max_weight) < (
        SIGMAS * math.sqrt(2) * 0.5 / math.sqrt(n)
    )


# --- softmax saturates without the scaling ---------------------------------------------------------


def test_unscaled_softmax_saturates_as_d_k_grows() -> None:
    rows = scaling_lab(seed=0, d_ks=D_KS).rows
    max_w = [r.unscaled.softmax.max_weight for r in rows]
    eff = [r.unscaled.softmax.effective_keys for r in rows]
    jac = [r.unscaled.softmax.jacobian_norm for r in rows]
    assert max_w == sorted(max_w) and max_w[-1] > 0.9  # near one-hot at d_k = 256
    assert eff == sorted(eff, reverse=True) and eff[-1] < 1.5  # about one key left
    assert jac == sorted(jac, reverse=True) and jac[-1] < jac[0] / 3  # saturated weights barely respond


def test_scaled_softmax_does_not_depend_on_d_k() -> None:
    rows = scaling_lab(seed=0, d_ks=D_KS).rows
    for stat in ("max_weight", "effective_keys", "jacobian_norm"):
        values = [getattr(r.scaled.softmax, stat) for r in rows]
        assert max(values) - min(values) < 0.05 * max(values), stat
    assert all(r.scaled.softmax.max_weight < 0.4 for r in rows)  # far from one-hot (1.0); uniform is 1/8


def test_temperature_below_one_sharpens_and_above_one_flattens() -> None:
    cold, base, hot = (scaling_lab(seed=0, d_ks=D_KS, temperature=tau) for tau in (0.5, 1.0, 2.0))
    for c, b, h in zip(cold.rows, base.rows, hot.rows, strict=True):
        assert c.scaled.softmax.max_weight > b.scaled.softmax.max_weight > h.scaled.softmax.max_weight
        assert c.scaled.softmax.entropy < b.scaled.softmax.entropy < h.scaled.softmax.entropy
        assert c.scaled.variance == b.scaled.variance  # τ acts on the softmax, not on the scores


def test_entropy_and_effective_keys_bounds() -> None:
    lab = scaling_lab(seed=0, d_ks=D_KS)
    for r in lab.rows:
        for stats in (r.unscaled.softmax, r.scaled.softmax):
            assert 0 <= stats.entropy <= math.log(lab.n_keys) + 1e-12
            assert 1 <= stats.effective_keys <= lab.n_keys
            assert 1 / lab.n_keys <= stats.max_weight <= 1


def test_entropy_treats_zero_weights_as_zero() -> None:
    p = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]])
    np.testing.assert_allclose(entropy_rows(p), [0.0, math.log(2)])


# --- the Jacobian -----------------------------------------------------------------------------------


@pytest.mark.parametrize("z", [[0.3, -1.2, 2.0, 0.0], list(SEED_003_UNSCALED), list(SEED_003_SCALED), [5.0, 5.0]])
def test_jacobian_matches_finite_differences(z: list[float]) -> None:
    z_arr = np.array(z)
    np.testing.assert_allclose(softmax_jacobian(softmax_rows(z_arr)), numeric_jacobian(z_arr), atol=1e-8)


def test_frobenius_closed_form_matches_the_built_jacobian() -> None:
    rng = np.random.default_rng(7)
    p = softmax_rows(rng.normal(0, 3, (50, 6)))  # (50, 6)
    built = np.linalg.norm(softmax_jacobian(p), axis=(-2, -1))  # (50,)
    np.testing.assert_allclose(jacobian_frobenius(p), built, rtol=1e-9)  # the closed form cancels a little


def test_lab_jacobian_norm_is_the_mean_over_rows() -> None:
    """The vectorised lab number against a loop over rows with numpy's own matrix norm."""
    rng = np.random.default_rng(3)
    z = rng.normal(0, 2, (40, 8))
    looped = np.mean([np.linalg.norm(np.diag(p) - np.outer(p, p)) for p in softmax_rows(z)])
    assert softmax_stats(z).jacobian_norm == pytest.approx(looped, rel=1e-12)


# --- seed 003's worked example -------------------------------------------------------------------


def seed_fmt(x: float) -> str:
    return f"{x:.1f}" if abs(x) >= 100 else f"{x:.3f}"


def test_seed_003_unscaled_example_digits() -> None:
    ex = softmax_example(SEED_003_UNSCALED)
    assert [seed_fmt(e) for e in ex.exps] == ["2981.0", "0.018", "403.4"]
    assert seed_fmt(ex.total) == "3384.4"
    assert [f"{w:.3f}" for w in ex.weights] == ["0.881", "0.000", "0.119"]
    np.testing.assert_allclose(ex.weights, softmax_rows(np.array(SEED_003_UNSCALED)))


def test_seed_003_scaled_example_digits() -> None:
    ex = softmax_example(SEED_003_SCALED)
    assert [seed_fmt(e) for e in ex.exps] == ["2.718", "0.607", "2.117"]
    assert seed_fmt(ex.total) == "5.442"
    assert [f"{w:.3f}" for w in ex.weights] == ["0.500", "0.111", "0.389"]
    np.testing.assert_allclose(ex.weights, softmax_rows(np.array(SEED_003_SCALED)))


def test_seed_003_saturated_example_has_the_smaller_jacobian() -> None:
    sat, spread = softmax_example(SEED_003_UNSCALED), softmax_example(SEED_003_SCALED)
    assert sat.jacobian_norm == pytest.approx(np.linalg.norm(numeric_jacobian(np.array(SEED_003_UNSCALED))), rel=1e-6)
    assert spread.jacobian_norm > 2 * sat.jacobian_norm
    # "The second position gets essentially zero weight, meaning gradients for that position vanish."
    assert max(abs(v) for v in sat.jacobian[1]) < 1e-5
    assert all(abs(sum(row)) < 1e-12 for row in spread.jacobian)  # rows of J sum to 0: weights stay summing to 1


# --- determinism and validation -----------------------------------------------------------------


def test_same_seed_same_numbers_and_other_seed_other_numbers() -> None:
    first = scaling_lab(seed=42, d_ks=D_KS)
    scaling_lab.cache_clear()
    again = scaling_lab(seed=42, d_ks=D_KS)
    assert first == again and first is not again
    assert scaling_lab(seed=43, d_ks=D_KS) != first


def test_a_d_k_row_does_not_depend_on_the_other_d_ks() -> None:
    alone = scaling_lab(seed=5, d_ks=(64,)).row(64)
    assert scaling_lab(seed=5, d_ks=(4, 8, 64, 256)).row(64) == alone


def test_results_are_cached() -> None:
    assert scaling_lab(seed=9, d_ks=D_KS) is scaling_lab(seed=9, d_ks=D_KS)


@pytest.mark.parametrize(
    "kwargs",
    [{"samples": 1}, {"n_keys": 1}, {"d_ks": ()}, {"d_ks": (0, 4)}, {"temperature": 0.0}, {"temperature": -1.0}],
)
def test_invalid_arguments_raise(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        scaling_lab(**kwargs)
