"""Positions: sinusoidal and learned encodings added to X, RoPE's rotation of q and k, ALiBi's bias.

Pure NumPy and the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.i18n import N_


@dataclass(frozen=True)
class PositionalEncoding:
    """How one kind of position information enters attention: the one table every layer reads."""

    value: str  # as the form, the API and a scenario file spell it
    label: str  # as the page names it (English, marked N_: translated where it is shown)
    adds_to_x: bool = False  # a (T, d_model) table added to the embeddings (sinusoidal, learned)
    rotates_qk: bool = False  # q and k turned by their position before the scores (RoPE)
    biases_scores: bool = False  # a bias added to each head's scaled scores (ALiBi)


ENCODINGS: dict[str, PositionalEncoding] = {e.value: e for e in (
    PositionalEncoding("none", N_("none")),
    PositionalEncoding("sinusoidal", N_("sinusoidal PE"), adds_to_x=True),
    PositionalEncoding("learned", N_("learned PE"), adds_to_x=True),
    PositionalEncoding("rope", "RoPE", rotates_qk=True),
    PositionalEncoding("alibi", "ALiBi", biases_scores=True),
)}
POSITIONAL_ENCODINGS = tuple(ENCODINGS)


def rotates(mode: str) -> bool:
    """Whether the encoding turns q and k (RoPE) rather than adding to x or biasing the scores."""
    return ENCODINGS[mode].rotates_qk


def biases(mode: str) -> bool:
    """Whether the encoding adds a bias to the scaled scores (ALiBi)."""
    return ENCODINGS[mode].biases_scores


def sinusoidal_encoding(t: int, d_model: int) -> np.ndarray:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).

    pos = 0 … T − 1 and columns from 0; an odd d_model ends on a sine (column d_model − 1 = 2i) with no cosine.
    """
    pos = np.arange(t)[:, None]  # (T, 1)
    two_i = (np.arange(d_model) // 2 * 2)[None, :]  # (1, d_model): 0, 0, 2, 2, 4, …
    angle = pos / np.power(10000.0, two_i / d_model)  # (T, d_model)
    return np.where(np.arange(d_model) % 2 == 0, np.sin(angle), np.cos(angle))  # (T, d_model)


ROPE_BASE = 10000.0  # RoFormer's base; Llama 3 and SmolLM2 take larger ones (SmolLM2-135M: 100,000)


def rope_theta(d: int, pair: int | np.ndarray, base: float = ROPE_BASE) -> np.ndarray:
    """θ_p = base^(−2p/d): pair p's angle per position (base 10,000 unless a model says otherwise)."""
    return np.power(base, -2.0 * np.asarray(pair) / d)


def rope_rotate(x: np.ndarray, *, base: float = ROPE_BASE, start: int = 0) -> np.ndarray:
    """RoPE: rotate each pair (x_2i, x_2i+1) at position pos by pos·θ_i, θ_i = base^(−2i/d).

    Adjacent dimensions pair (RoFormer's form, and llama.cpp's for Llama), not the halves (x_i, x_(i+d/2)) of
    GPT-NeoX and Hugging Face's Llama; pos = start … start + T − 1 (a KV cache's new rows start past the old).
    An odd last dimension is left as it is (and d in θ_i stays odd). Works on (..., T, d), in x's dtype.
    """
    t, d = x.shape[-2], x.shape[-1]
    half = d // 2
    theta = rope_theta(d, np.arange(half), base)  # (d/2,)
    angle = np.arange(start, start + t)[:, None] * theta[None, :]  # (T, d/2)
    cos, sin = np.cos(angle), np.sin(angle)
    out = x.copy()
    even, odd = x[..., 0 : 2 * half : 2], x[..., 1 : 2 * half : 2]  # (..., T, d/2) each
    out[..., 0 : 2 * half : 2] = even * cos - odd * sin
    out[..., 1 : 2 * half : 2] = even * sin + odd * cos
    return out


def alibi_slopes(num_heads: int) -> np.ndarray:
    """ALiBi's head slopes (Press et al. 2022), head 1 first. For H heads, H a power of two,
    m_h = 2^(−8h/H): 1/2, 1/4, …, 1/256 for 8 heads. Otherwise, as the paper's code does, the slopes
    of the power of two below, n = 2^⌊log₂ H⌋, then the first H − n of every other slope of 2n heads:
    m_(n+k) = 2^(−8(2k − 1)/(2n)), k = 1 … H − n (6 heads: 1/4, 1/16, 1/64, 1/256, 1/2, 1/8)."""
    n = 1 << (num_heads.bit_length() - 1)  # the largest power of two ≤ H
    first = np.power(2.0, -8.0 * np.arange(1, n + 1) / n)  # (n,)
    rest = np.power(2.0, -8.0 * (2 * np.arange(1, num_heads - n + 1) - 1) / (2 * n))  # (H − n,)
    return np.concatenate([first, rest])  # (h,)


def alibi_bias(num_heads: int, t: int, s: int) -> np.ndarray:
    """bias_h[i, j] = −m_h·|i − j|: the further the key, the lower the score."""
    distance = np.abs(np.arange(t)[:, None] - np.arange(s)[None, :])  # (T, S)
    return -alibi_slopes(num_heads)[:, None, None] * distance[None]  # (h, T, S)


def seeded_position_table(rows: int, d_model: int, seed: int) -> np.ndarray:
    """A learned position table's starting values (its own stream, apart from the weights')."""
    rng = np.random.default_rng([seed, 2])
    return np.round(rng.normal(0.0, 0.5, (rows, d_model)), 2)  # (rows, d_model)


def position_encoding(
    mode: str, rows: int, d_model: int, seed: int, position_table: np.ndarray | None = None
) -> np.ndarray | None:
    """The table added to the embeddings: sinusoidal, learned (given or seeded), else None."""
    if mode == "sinusoidal":
        return sinusoidal_encoding(rows, d_model)  # (rows, d_model)
    if mode != "learned":
        return None
    table = seeded_position_table(rows, d_model, seed) if position_table is None else (
        np.asarray(position_table, dtype=np.float64))
    if table.ndim != 2 or table.shape[0] < rows or table.shape[1] != d_model:
        raise ValueError(f"position_table must have at least {rows} rows of d_model = {d_model}")
    return table[:rows]  # (rows, d_model)
