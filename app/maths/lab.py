"""The scaling lab: why attention divides the scores by √d_k (seed 003), measured by sampling.

Seed 003: if every entry of q and k is drawn from N(0, 1), q·k = Σᵢ qᵢkᵢ is a sum of d_k independent
terms of mean 0 and variance 1, so E[q·k] = 0 and Var(q·k) = d_k; dividing by √d_k brings the
variance back to 1. With d_k = 64 the scores have a standard deviation of 8, softmax turns them into
near-one-hot weights, and "gradients become tiny, and learning stalls".

Pure NumPy and the standard library. Every result is a frozen record of plain floats, so the
lru_cache can hand the same object to every request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from app.maths.attention import softmax_rows

DEFAULT_D_KS = (4, 16, 64, 256)
SEED_003_UNSCALED = (8.0, -4.0, 6.0)  # "simulating d_k = 64, where values have std ≈ 8"
SEED_003_SCALED = (1.0, -0.5, 0.75)  # "properly scaled scores (std ≈ 1)"


@dataclass(frozen=True)
class SoftmaxStats:
    """What softmax makes of rows of n_keys scores z / τ (means over the sampled rows)."""

    max_weight: float  # mean of maxⱼ pⱼ: 1/n_keys when uniform, 1 when one-hot
    entropy: float  # mean of −Σⱼ pⱼ·ln pⱼ (nats): ln n_keys when uniform, 0 when one-hot
    effective_keys: float  # mean of exp(entropy): how many keys a row really spreads over
    jacobian_norm: float  # mean of ‖diag(p) − p·pᵀ‖_F: how much the weights still respond to the scores


@dataclass(frozen=True)
class ScoreStats:
    """Sample statistics of one kind of score (q·k, or q·k/√d_k) and of its softmax."""

    divisor: float  # 1 (unscaled) or √d_k (scaled)
    mean: float
    variance: float
    std: float
    softmax: SoftmaxStats


@dataclass(frozen=True)
class DkResult:
    d_k: int
    unscaled: ScoreStats  # q·k
    scaled: ScoreStats  # q·k / √d_k


@dataclass(frozen=True)
class ScalingLab:
    seed: int
    samples: int  # pairs per d_k, and rows of n_keys scores per d_k
    n_keys: int
    temperature: float  # τ: the softmax sees z / τ
    rows: tuple[DkResult, ...]  # one per d_k, in the order asked

    def row(self, d_k: int) -> DkResult:
        for r in self.rows:
            if r.d_k == d_k:
                return r
        raise KeyError(d_k)


@dataclass(frozen=True)
class SoftmaxExample:
    """Seed 003's worked example written out: exp(zⱼ), their sum, the weights and the Jacobian."""

    z: tuple[float, ...]
    exps: tuple[float, ...]  # exp(zⱼ), no max shift: the seed prints exp(8) ≈ 2981.0 itself
    total: float  # Σⱼ exp(zⱼ)
    weights: tuple[float, ...]  # pⱼ = exp(zⱼ) / Σ
    jacobian: tuple[tuple[float, ...], ...]  # ∂pᵢ/∂zⱼ = pᵢ(δᵢⱼ − pⱼ)
    jacobian_norm: float  # ‖J‖_F


def softmax_jacobian(p: np.ndarray) -> np.ndarray:
    """J = diag(p) − p·pᵀ, i.e. ∂pᵢ/∂zⱼ = pᵢ(δᵢⱼ − pⱼ), for each row p of weights.

    Near one-hot weights make every entry small: a saturated softmax barely responds to its
    scores, so the weights learn slowly.
    """
    eye = np.eye(p.shape[-1])  # (n, n)
    return p[..., :, None] * eye - p[..., :, None] * p[..., None, :]  # (..., n, n)


def row_sums(a: np.ndarray) -> np.ndarray:
    """Σⱼ aᵢⱼ as a matrix–vector product: several times faster than .sum(axis=-1) over a few columns."""
    return a @ np.ones(a.shape[-1])  # (...,)


def jacobian_frobenius(p: np.ndarray) -> np.ndarray:
    """‖diag(p) − p·pᵀ‖_F per row without building J: √(Σpᵢ² − 2·Σpᵢ³ + (Σpᵢ²)²).

    Σᵢ(pᵢ − pᵢ²)² + Σᵢ≠ⱼ pᵢ²pⱼ² = Σpᵢ² − 2Σpᵢ³ + Σpᵢ⁴ + (Σpᵢ²)² − Σpᵢ⁴.
    """
    p2 = row_sums(p * p)  # (...,)
    p3 = row_sums(p * p * p)  # (...,)
    return np.sqrt(np.maximum(p2 - 2.0 * p3 + p2 * p2, 0.0))  # (...,) rounding can dip below 0 near one-hot


def entropy_rows(p: np.ndarray) -> np.ndarray:
    """H(p) = −Σⱼ pⱼ·ln pⱼ per row, with 0·ln 0 = 0 (a weight can underflow to exactly 0)."""
    safe = np.where(p > 0, p, 1.0)  # (..., n) ln 1 = 0 where p = 0
    return -row_sums(p * np.log(safe))  # (...,)


def softmax_stats(z: np.ndarray) -> SoftmaxStats:
    """Mean max weight, entropy, effective number of keys and Jacobian norm over rows of z."""
    p = softmax_rows(z)  # (rows, n_keys)
    entropy = entropy_rows(p)  # (rows,)
    return SoftmaxStats(
        max_weight=float(p.max(axis=-1).mean()),
        entropy=float(entropy.mean()),
        effective_keys=float(np.exp(entropy).mean()),
        jacobian_norm=float(jacobian_frobenius(p).mean()),
    )


def score_stats(scores: np.ndarray, divisor: float, temperature: float) -> ScoreStats:
    """Statistics of scores / divisor over their first column (independent pairs) and of its softmax."""
    z = scores / divisor  # (samples, n_keys)
    pairs = z[:, 0]  # (samples,) one independent (q, k) pair per row
    variance = float(pairs.var(ddof=1))
    return ScoreStats(
        divisor=divisor,
        mean=float(pairs.mean()),
        variance=variance,
        std=math.sqrt(variance),
        softmax=softmax_stats(z / temperature),
    )


def sample_scores(rng: np.random.Generator, d_k: int, samples: int, n_keys: int) -> np.ndarray:
    """Rows of q·k₁ … q·k_n for q, kⱼ with independent N(0, 1) entries, without drawing the vectors.

    q·kⱼ = ‖q‖·(q̂·kⱼ), q̂ = q/‖q‖. A standard normal vector looks the same in every direction, so
    each key's component along q̂ is N(0, 1), independent of q and of the other keys; and ‖q‖² is a
    sum of d_k squared N(0, 1), a χ² with d_k degrees of freedom. Drawing those two gives exactly
    the distribution of the dot products at 1 + n_keys numbers a row instead of (1 + n_keys)·d_k.
    (tests/maths/test_lab.py checks it against dot products of drawn vectors.)
    """
    q_norm = np.sqrt(rng.chisquare(d_k, size=samples))  # (samples,) ‖q‖, E‖q‖² = d_k
    along_q = rng.standard_normal((samples, n_keys))  # (samples, n_keys) q̂·kⱼ
    return q_norm[:, None] * along_q  # (samples, n_keys) q·kⱼ


@lru_cache(maxsize=64)
def scaling_lab(
    seed: int = 0,
    samples: int = 4000,
    d_ks: tuple[int, ...] = DEFAULT_D_KS,
    n_keys: int = 8,
    temperature: float = 1.0,
) -> ScalingLab:
    """Var(q·k) = d_k and Var(q·k / √d_k) = 1, and what softmax(z / τ) does with each, per d_k.

    For each d_k: ``samples`` rows of n_keys scores q·kⱼ (q, kⱼ with N(0, 1) entries); the mean
    and variance come from the first score of each row (independent pairs); the softmax statistics
    from the whole rows. Each d_k draws from ``np.random.default_rng([seed, d_k])``, so its numbers
    do not depend on which other d_k are asked for. ``d_ks`` must be a tuple (the cache key).
    """
    if samples < 2:
        raise ValueError("samples must be at least 2")
    if n_keys < 2:
        raise ValueError("n_keys must be at least 2")
    if not d_ks or min(d_ks) < 1:
        raise ValueError("every d_k must be at least 1")
    if not temperature > 0:
        raise ValueError("temperature must be positive")
    rows = []
    for d_k in d_ks:
        rng = np.random.default_rng([seed, d_k])
        scores = sample_scores(rng, d_k, samples, n_keys)  # (samples, n_keys)
        rows.append(DkResult(
            d_k=d_k,
            unscaled=score_stats(scores, 1.0, temperature),
            scaled=score_stats(scores, math.sqrt(d_k), temperature),
        ))
    return ScalingLab(seed=seed, samples=samples, n_keys=n_keys, temperature=temperature, rows=tuple(rows))


def softmax_example(z: tuple[float, ...] | list[float] | np.ndarray) -> SoftmaxExample:
    """softmax(z)ⱼ = exp(zⱼ) / Σₖ exp(zₖ), each step kept, and its Jacobian diag(p) − p·pᵀ."""
    z_arr = np.asarray(z, dtype=np.float64)  # (n,)
    exps = np.exp(z_arr)  # (n,) small z here: no overflow, and the seed shows these very numbers
    total = float(exps.sum())
    weights = exps / total  # (n,)
    jac = softmax_jacobian(weights)  # (n, n)
    return SoftmaxExample(
        z=tuple(z_arr.tolist()),
        exps=tuple(exps.tolist()),
        total=total,
        weights=tuple(weights.tolist()),
        jacobian=tuple(tuple(r) for r in jac.tolist()),
        jacobian_norm=float(np.linalg.norm(jac)),
    )

