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
    scores: np.ndarray  # (T, S)   Q·Kᵀ (S = T in self-attention)
    scaled: np.ndarray  # (T, S)   scores ÷ √d_k ÷ temperature, plus the ALiBi bias when on
    masked: np.ndarray  # (T, S)   scaled, with −inf where the mask hides a key
    softmax: np.ndarray  # (T, S)  row-wise softmax: the attention weights A
    output: np.ndarray  # (T, d_v) A·V
    q_rot: np.ndarray | None = None  # (T, d_k) Q rotated by position (RoPE only)
    k_rot: np.ndarray | None = None  # (S, d_k)
    bias: np.ndarray | None = None  # (T, S) ALiBi's −m·|i − j| (ALiBi only)


@dataclass(frozen=True)
class AttentionRun:
    """The whole pipeline for one input: X → per-head Q, K, V … A·V → concat → concat·W_O."""

    x: np.ndarray  # (T, d_model) what the heads see: the input plus its positional encoding
    heads: tuple[HeadResult, ...]  # h entries
    concat: np.ndarray  # (T, h·d_v)
    output: np.ndarray  # (T, d_model)
    weights: Weights
    d_k: int
    d_v: int
    scale: bool
    temperature: float = 1.0
    x_input: np.ndarray | None = None  # (T, d_model) the input before positional encoding
    pe: np.ndarray | None = None  # (T, d_model) the positional encoding added to x (sinusoidal, learned)
    positional_encoding: str = "none"
    context: np.ndarray | None = None  # (S, d_model) keys and values come from here (cross-attention)
    mask: np.ndarray | None = None  # (T, S) bool, True = key j hidden from query i

    @property
    def num_heads(self) -> int:
        return len(self.heads)

    @property
    def d_model(self) -> int:
        return int(self.x.shape[1])

    @property
    def scale_factor(self) -> float:
        """The divisor applied to the scores: √d_k·temperature (√d_k is 1 when scaling is off)."""
        return (math.sqrt(self.d_k) if self.scale else 1.0) * self.temperature

    @property
    def source(self) -> np.ndarray:
        """Where keys and values come from: the context in cross-attention, else x itself."""
        return self.x if self.context is None else self.context


def softmax_rows(z: np.ndarray) -> np.ndarray:
    """softmax(z)ᵢⱼ = exp(zᵢⱼ − maxⱼ' zᵢⱼ') / Σⱼ' exp(zᵢⱼ' − maxⱼ' zᵢⱼ').

    Subtracting the row maximum changes nothing mathematically and keeps exp from overflowing.
    """
    shifted = z - z.max(axis=-1, keepdims=True)  # (..., T)
    e = np.exp(shifted)  # (..., T)
    return e / e.sum(axis=-1, keepdims=True)  # (..., T), each row sums to 1


MASK_MODES = ("none", "causal")
POSITIONAL_ENCODINGS = ("none", "sinusoidal", "learned", "rope", "alibi")


def causal_mask(t: int, s: int | None = None) -> np.ndarray:
    """True above the diagonal: query i may not look at a later key j > i."""
    return np.triu(np.ones((t, t if s is None else s), dtype=bool), k=1)  # (T, S)


def masked_softmax(scaled: np.ndarray, mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Hidden entries become −inf before the softmax, so their weights are exactly 0.

    A row whose every key is hidden has no distribution; it raises ValueError naming the row.
    """
    if mask is None:
        return scaled, softmax_rows(scaled)
    full = mask.all(axis=-1)  # (..., T)
    if full.any():
        row = int(np.argwhere(full)[0][-1])
        raise ValueError(f"mask row {row} hides every key; a query must see at least one key")
    masked = np.where(mask, -np.inf, scaled)  # (..., T, S)
    return masked, softmax_rows(masked)


def scaled_dot_product_attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, *, scale: bool = True, mask: np.ndarray | None = None,
    temperature: float = 1.0, bias: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Attention(Q, K, V) = softmax(Q·Kᵀ / (√d_k·τ) + bias, with hidden keys at −inf) · V.

    Returns the intermediates (scores, scaled, masked, weights, output) so that each can be shown.
    """
    d_k = q.shape[-1]
    scores = q @ k.swapaxes(-2, -1)  # (..., T, S)
    divisor = (math.sqrt(d_k) if scale else 1.0) * temperature
    scaled = scores / divisor  # (..., T, S)
    if bias is not None:
        scaled = scaled + bias  # (..., T, S)
    masked, weights = masked_softmax(scaled, mask)  # (..., T, S) twice
    output = weights @ v  # (..., T, d_v)
    return scores, scaled, masked, weights, output


def sinusoidal_encoding(t: int, d_model: int) -> np.ndarray:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))."""
    pos = np.arange(t)[:, None]  # (T, 1)
    two_i = (np.arange(d_model) // 2 * 2)[None, :]  # (1, d_model): 0, 0, 2, 2, 4, …
    angle = pos / np.power(10000.0, two_i / d_model)  # (T, d_model)
    return np.where(np.arange(d_model) % 2 == 0, np.sin(angle), np.cos(angle))  # (T, d_model)


def rope_rotate(x: np.ndarray) -> np.ndarray:
    """RoPE: rotate each pair (x_2i, x_2i+1) at position pos by pos·θ_i, θ_i = 10000^(−2i/d).

    An odd last dimension is left as it is. Works on (..., T, d).
    """
    t, d = x.shape[-2], x.shape[-1]
    half = d // 2
    theta = np.power(10000.0, -2.0 * np.arange(half) / d)  # (d/2,)
    angle = np.arange(t)[:, None] * theta[None, :]  # (T, d/2)
    cos, sin = np.cos(angle), np.sin(angle)
    out = x.copy()
    even, odd = x[..., 0 : 2 * half : 2], x[..., 1 : 2 * half : 2]  # (..., T, d/2) each
    out[..., 0 : 2 * half : 2] = even * cos - odd * sin
    out[..., 1 : 2 * half : 2] = even * sin + odd * cos
    return out


def alibi_slopes(num_heads: int) -> np.ndarray:
    """ALiBi's head slopes m_h = 2^(−8(h+1)/H): a geometric sequence, steepest for head 1."""
    return np.power(2.0, -8.0 * np.arange(1, num_heads + 1) / num_heads)  # (h,)


def alibi_bias(num_heads: int, t: int, s: int) -> np.ndarray:
    """bias_h[i, j] = −m_h·|i − j|: the further the key, the lower the score."""
    distance = np.abs(np.arange(t)[:, None] - np.arange(s)[None, :])  # (T, S)
    return -alibi_slopes(num_heads)[:, None, None] * distance[None]  # (h, T, S)


def seeded_position_table(rows: int, d_model: int, seed: int) -> np.ndarray:
    """A learned position table's starting values (its own stream, apart from the weights')."""
    rng = np.random.default_rng([seed, 2])
    return np.round(rng.normal(0.0, 0.5, (rows, d_model)), 2)  # (rows, d_model)


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
    mask: str | np.ndarray | None = None,
    context: np.ndarray | None = None,
    positional_encoding: str = "none",
    position_table: np.ndarray | None = None,
    temperature: float = 1.0,
) -> AttentionRun:
    """MultiHead(X) = Concat(head₁, …, head_h)·W_O, headᵢ = Attention(X·W_Qⁱ, C·W_Kⁱ, C·W_Vⁱ).

    C is X itself (self-attention) or ``context`` (cross-attention: S tokens, same d_model).
    ``weights`` may give any of w_q, w_k, w_v, w_o; the rest are seeded (see seeded_weights).
    ``mask`` is "none", "causal" or a T×S boolean array (True hides key j from query i).
    ``positional_encoding``: "none", "sinusoidal" or "learned" (added to X and to C),
    "rope" (rotates q and k) or "alibi" (adds −m_h·|i − j| to head h's scaled scores).
    Shapes are the caller's to validate; a mismatch raises ValueError naming the array.
    """
    x_input = np.asarray(x, dtype=np.float64)  # (T, d_model)
    if x_input.ndim != 2 or x_input.shape[0] < 1 or x_input.shape[1] < 1:
        raise ValueError("x must be a non-empty T×d_model matrix")
    t, d_model = x_input.shape
    if num_heads < 1:
        raise ValueError("num_heads must be at least 1")
    d_k = d_model // num_heads if d_k is None else d_k
    d_v = d_k if d_v is None else d_v
    if d_k < 1 or d_v < 1:
        raise ValueError("d_k and d_v must be at least 1 (d_model // num_heads is 0)")
    if positional_encoding not in POSITIONAL_ENCODINGS:
        raise ValueError(f"positional_encoding must be one of {', '.join(POSITIONAL_ENCODINGS)}")
    if not temperature > 0:
        raise ValueError("temperature must be positive")
    c_input = None if context is None else np.asarray(context, dtype=np.float64)  # (S, d_model)
    if c_input is not None and (c_input.ndim != 2 or c_input.shape[0] < 1 or c_input.shape[1] != d_model):
        raise ValueError("context.x must be a non-empty S×d_model matrix with the same d_model as x")
    s_len = t if c_input is None else c_input.shape[0]

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

    # 0) Positions: sinusoidal or learned encodings are added to the embeddings.
    pe = None
    if positional_encoding == "sinusoidal":
        pe = sinusoidal_encoding(max(t, s_len), d_model)  # (max(T, S), d_model)
    elif positional_encoding == "learned":
        table = seeded_position_table(max(t, s_len), d_model, seed) if position_table is None else (
            np.asarray(position_table, dtype=np.float64))
        if table.ndim != 2 or table.shape[0] < max(t, s_len) or table.shape[1] != d_model:
            raise ValueError(f"position_table must have at least {max(t, s_len)} rows of d_model = {d_model}")
        pe = table[: max(t, s_len)]
    x_used = x_input if pe is None else x_input + pe[:t]  # (T, d_model)
    c_used = None if c_input is None else (c_input if pe is None else c_input + pe[:s_len])  # (S, d_model)
    source = x_used if c_used is None else c_used  # (S, d_model)

    if mask is None or (isinstance(mask, str) and mask == "none"):
        hidden = None
    elif isinstance(mask, str):
        if mask != "causal":
            raise ValueError(f"mask must be one of {', '.join(MASK_MODES)} or a T×S array of booleans")
        hidden = causal_mask(t, s_len)
    else:
        hidden = np.asarray(mask, dtype=bool)
        if hidden.shape != (t, s_len):
            raise ValueError(f"mask must have shape {t}×{s_len}, got {'×'.join(map(str, hidden.shape))}")

    # 1) Project X into each head's queries, and the source into keys and values (all heads at once).
    q = np.einsum("td,hdk->htk", x_used, w.w_q)  # (h, T, d_k)
    k = np.einsum("sd,hdk->hsk", source, w.w_k)  # (h, S, d_k)
    v = np.einsum("sd,hdv->hsv", source, w.w_v)  # (h, S, d_v)
    q_rot = k_rot = bias = None
    if positional_encoding == "rope":
        q_rot, k_rot = rope_rotate(q), rope_rotate(k)  # (h, T, d_k), (h, S, d_k)
    if positional_encoding == "alibi":
        bias = alibi_bias(num_heads, t, s_len)  # (h, T, S)
    # 2) Scores, 3) scaling, 4) mask and softmax, 5) weighted sum of values, per head.
    scores, scaled, masked, attn, head_out = scaled_dot_product_attention(
        q if q_rot is None else q_rot, k if k_rot is None else k_rot, v,
        scale=scale, mask=hidden, temperature=temperature, bias=bias,
    )
    # 6) Concatenate the heads in order and project back to d_model.
    concat = head_out.transpose(1, 0, 2).reshape(t, num_heads * d_v)  # (T, h·d_v)
    output = concat @ w.w_o  # (T, d_model)

    heads = tuple(
        HeadResult(
            q=q[i], k=k[i], v=v[i], scores=scores[i], scaled=scaled[i], masked=masked[i],
            softmax=attn[i], output=head_out[i],
            q_rot=None if q_rot is None else q_rot[i],
            k_rot=None if k_rot is None else k_rot[i],
            bias=None if bias is None else bias[i],
        )
        for i in range(num_heads)
    )
    return AttentionRun(
        x=x_used, heads=heads, concat=concat, output=output, weights=w, d_k=d_k, d_v=d_v, scale=scale,
        temperature=temperature, x_input=x_input, pe=None if pe is None else pe[:t],
        positional_encoding=positional_encoding, context=c_used, mask=hidden,
    )
