"""Multi-head scaled dot-product attention, one named intermediate per stage.

Pure NumPy and the standard library: no web framework is imported here. The page and the
JSON API render the record that :func:`run_attention` returns; they compute nothing.

Notation follows "Attention Is All You Need": T tokens, ``d_model`` embedding size, ``h`` heads,
``d_k`` query/key size and ``d_v`` value size per head.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Order in which seeded weights are drawn. Every matrix is drawn whether or not it is given, so
# supplying one matrix never changes the seeded values of the others.
WEIGHT_NAMES = ("w_q", "w_k", "w_v", "w_o")


@dataclass(frozen=True)
class Weights:
    """The projections one run used: ``w_q[i]`` is head i's W_Q."""

    w_q: np.ndarray  # (h, d_model, d_k)
    w_k: np.ndarray  # (h, d_model, d_k)
    w_v: np.ndarray  # (h, d_model, d_v)
    w_o: np.ndarray  # (h·d_v, d_model)


@dataclass(frozen=True)
class HeadResult:
    """Every intermediate of one head, in the order the page steps through them."""

    q: np.ndarray  # (T, d_k)
    k: np.ndarray  # (T, d_k)
    v: np.ndarray  # (T, d_v)
    scores: np.ndarray  # (T, T)   Q·Kᵀ
    scaled: np.ndarray  # (T, T)   scores ÷ √d_k (or scores, when scaling is off)
    softmax: np.ndarray  # (T, T)  row-wise softmax: the attention weights A
    output: np.ndarray  # (T, d_v) A·V


@dataclass(frozen=True)
class AttentionRun:
    """The whole pipeline for one input: X → per-head Q, K, V … A·V → concat → concat·W_O."""

    x: np.ndarray  # (T, d_model)
    heads: tuple[HeadResult, ...]  # h entries
    concat: np.ndarray  # (T, h·d_v)
    output: np.ndarray  # (T, d_model)
    weights: Weights
    d_k: int
    d_v: int
    scale: bool

    @property
    def num_heads(self) -> int:
        return len(self.heads)

    @property
    def d_model(self) -> int:
        return int(self.x.shape[1])

    @property
    def scale_factor(self) -> float:
        """The divisor applied to the scores: √d_k, or 1 when scaling is off."""
        return math.sqrt(self.d_k) if self.scale else 1.0


def softmax_rows(z: np.ndarray) -> np.ndarray:
    """softmax(z)ᵢⱼ = exp(zᵢⱼ − maxⱼ' zᵢⱼ') / Σⱼ' exp(zᵢⱼ' − maxⱼ' zᵢⱼ').

    Subtracting the row maximum changes nothing mathematically and keeps exp from overflowing.
    """
    shifted = z - z.max(axis=-1, keepdims=True)  # (..., T)
    e = np.exp(shifted)  # (..., T)
    return e / e.sum(axis=-1, keepdims=True)  # (..., T), each row sums to 1


def scaled_dot_product_attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, *, scale: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Attention(Q, K, V) = softmax(Q·Kᵀ / √d_k) · V.

    Returns the intermediates (scores, scaled, weights, output) so that each can be shown.
    """
    d_k = q.shape[-1]
    scores = q @ k.swapaxes(-2, -1)  # (..., T, T)
    scaled = scores / math.sqrt(d_k) if scale else scores.copy()  # (..., T, T)
    weights = softmax_rows(scaled)  # (..., T, T)
    output = weights @ v  # (..., T, d_v)
    return scores, scaled, weights, output


def seeded_weights(d_model: int, num_heads: int, d_k: int, d_v: int, seed: int) -> Weights:
    """Draw every projection from ``np.random.default_rng(seed)``, in WEIGHT_NAMES order.

    Entries are N(0, 1/d_model) so that Q, K, V keep the scale of X, rounded to two decimals so
    that a student can read and retype them.
    """
    rng = np.random.default_rng(seed)
    std = 1.0 / math.sqrt(d_model)
    shapes = {
        "w_q": (num_heads, d_model, d_k),
        "w_k": (num_heads, d_model, d_k),
        "w_v": (num_heads, d_model, d_v),
        "w_o": (num_heads * d_v, d_model),
    }
    drawn = {name: np.round(rng.normal(0.0, std, shapes[name]), 2) for name in WEIGHT_NAMES}
    return Weights(**drawn)


def run_attention(
    x: np.ndarray,
    *,
    num_heads: int = 1,
    d_k: int | None = None,
    d_v: int | None = None,
    weights: dict[str, np.ndarray] | None = None,
    seed: int = 0,
    scale: bool = True,
) -> AttentionRun:
    """MultiHead(X) = Concat(head₁, …, head_h)·W_O, headᵢ = Attention(X·W_Qⁱ, X·W_Kⁱ, X·W_Vⁱ).

    ``weights`` may give any of w_q, w_k, w_v, w_o; the rest are seeded (see seeded_weights).
    Shapes are the caller's to validate; a mismatch raises ValueError naming the array.
    """
    x = np.asarray(x, dtype=np.float64)  # (T, d_model)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError("x must be a non-empty T×d_model matrix")
    _, d_model = x.shape
    if num_heads < 1:
        raise ValueError("num_heads must be at least 1")
    d_k = d_model // num_heads if d_k is None else d_k
    d_v = d_k if d_v is None else d_v
    if d_k < 1 or d_v < 1:
        raise ValueError("d_k and d_v must be at least 1 (d_model // num_heads is 0)")

    seeded = seeded_weights(d_model, num_heads, d_k, d_v, seed)
    given = weights or {}
    used = {}
    for name in WEIGHT_NAMES:
        default = getattr(seeded, name)
        value = given.get(name)
        value = default if value is None else np.asarray(value, dtype=np.float64)
        if value.shape != default.shape:
            raise ValueError(f"{name} must have shape {default.shape}, got {value.shape}")
        used[name] = value
    w = Weights(**used)

    # 1) Project X into each head's queries, keys and values (all heads at once).
    q = np.einsum("td,hdk->htk", x, w.w_q)  # (h, T, d_k)
    k = np.einsum("td,hdk->htk", x, w.w_k)  # (h, T, d_k)
    v = np.einsum("td,hdv->htv", x, w.w_v)  # (h, T, d_v)
    # 2) Scores, 3) scaling, 4) softmax and 5) weighted sum of values, per head.
    scores, scaled, attn, head_out = scaled_dot_product_attention(q, k, v, scale=scale)
    # 6) Concatenate the heads in order and project back to d_model.
    concat = head_out.transpose(1, 0, 2).reshape(x.shape[0], num_heads * d_v)  # (T, h·d_v)
    output = concat @ w.w_o  # (T, d_model)

    heads = tuple(
        HeadResult(
            q=q[i], k=k[i], v=v[i],
            scores=scores[i], scaled=scaled[i], softmax=attn[i], output=head_out[i],
        )
        for i in range(num_heads)
    )
    return AttentionRun(
        x=x, heads=heads, concat=concat, output=output, weights=w, d_k=d_k, d_v=d_v, scale=scale
    )
