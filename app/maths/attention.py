"""Multi-head scaled dot-product attention, one named intermediate per stage.

Pure NumPy and the standard library: no web framework is imported here. The page and the
JSON API render the record that :func:`run_attention` returns; they compute nothing.

Notation follows "Attention Is All You Need": T tokens, ``d_model`` embedding size, ``h`` heads,
``d_k`` query/key size and ``d_v`` value size per head.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

# Order in which seeded weights are drawn. Every matrix is drawn whether or not it is given, so
# supplying one matrix never changes the seeded values of the others. The score functions' extra
# weights come from a stream of their own, drawn after, so adding them changed no earlier value.
WEIGHT_NAMES = ("w_q", "w_k", "w_v", "w_o")
SCORE_WEIGHT_NAMES = ("w_a", "w_1", "w_2", "v_a")
ALL_WEIGHT_NAMES = WEIGHT_NAMES + SCORE_WEIGHT_NAMES
SCORE_FUNCTIONS = ("dot", "general", "additive")
ATTENTION_MODES = ("softmax", "linear")
W = TypeVar("W")  # Weights or BlockWeights


@dataclass(frozen=True)
class Weights:
    """The projections one run used: ``w_q[i]`` is head i's W_Q."""

    w_q: np.ndarray  # (h, d_model, d_k)
    w_k: np.ndarray  # (h, d_model, d_k)
    w_v: np.ndarray  # (h, d_model, d_v)
    w_o: np.ndarray  # (h·d_v, d_model)
    w_a: np.ndarray  # (h, d_k, d_k)  Luong's "general" score q_i·W_a·k_jᵀ (q_i, k_j rows of Q, K)
    w_1: np.ndarray  # (h, d_k, d_a)  Bahdanau's additive score v_a·tanh(q_i·W₁ + k_j·W₂)
    w_2: np.ndarray  # (h, d_k, d_a)
    v_a: np.ndarray  # (h, d_a)


@dataclass(frozen=True)
class LinearAttention:
    """Linear attention (Katharopoulos et al. 2020): φ(x) = elu(x) + 1 replaces exp(q·k).

    output_i = φ(q_i)ᵀ·(Σ_j φ(k_j)·v_jᵀ) / φ(q_i)ᵀ·Σ_j φ(k_j): the d_k×d_v summary kv is built once,
    so the cost is O(T·d_k·d_v) instead of O(T·S·d). ``weights`` is the T×S matrix it implies,
    φ(q_i)·φ(k_j) / z_i, for reading: without a mask the factorised form never needs it.

    Under a mask each query's sums skip the keys hidden from it: output_i = Σ_{j seen} φ(q_i)·φ(k_j)·v_j
    / z_i = (weights·V)_i. ``kv`` is still φ(K)ᵀ·V over every key, so then it does not give the output.
    """

    phi_q: np.ndarray  # (T, d_k)
    phi_k: np.ndarray  # (S, d_k)
    kv: np.ndarray  # (d_k, d_v) φ(K)ᵀ·V over every key, whatever the mask
    z: np.ndarray  # (T,) φ(q_i)·Σ_j φ(k_j) over the keys query i sees, the normaliser
    weights: np.ndarray  # (T, S) 0 at a hidden key
    output: np.ndarray  # (T, d_v)


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
    q_w: np.ndarray | None = None  # (T, d_k) Q·W_a ("general" score only)
    q_1: np.ndarray | None = None  # (T, d_a) Q·W₁ ("additive" score only)
    k_2: np.ndarray | None = None  # (S, d_a) K·W₂ ("additive" score only)
    linear: LinearAttention | None = None  # linear attention's own intermediates (mode "linear" only)
    softmax_output: np.ndarray | None = None  # (T, d_v) A·V, kept for comparison when mode is "linear"


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
    score: str = "dot"
    attention: str = "softmax"
    mask_mode: str = "none"  # "none", "causal", "local", "strided" or "custom" (an array was given)
    window: int | None = None  # local: keys within ±window; strided: the stride

    @property
    def num_heads(self) -> int:
        return len(self.heads)

    @property
    def d_a(self) -> int:
        return int(self.weights.v_a.shape[1])

    @property
    def d_model(self) -> int:
        return int(self.x.shape[1])

    @property
    def scales(self) -> bool:
        """Whether ÷√d_k applies: asked for, and the score is a dot product (Bahdanau's is not)."""
        return self.scale and self.score != "additive"

    @property
    def scale_factor(self) -> float:
        """The divisor applied to the scores: √d_k·temperature (√d_k is 1 when scaling is off)."""
        return (math.sqrt(self.d_k) if self.scales else 1.0) * self.temperature

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


MASK_MODES = ("none", "causal", "local", "strided")
POSITIONAL_ENCODINGS = ("none", "sinusoidal", "learned", "rope", "alibi")


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}")


def causal_mask(t: int, s: int | None = None) -> np.ndarray:
    """True above the diagonal: query i may not look at a later key j > i."""
    return np.triu(np.ones((t, t if s is None else s), dtype=bool), k=1)  # (T, S)


def local_mask(t: int, s: int, window: int) -> np.ndarray:
    """Sliding window (Longformer-style): query i sees only keys j with |i − j| <= window."""
    distance = np.abs(np.arange(t)[:, None] - np.arange(s)[None, :])  # (T, S)
    return distance > window


def strided_mask(t: int, s: int, stride: int) -> np.ndarray:
    """Strided sparse attention (Child et al. 2019), both directions: query i sees key j when
    |i − j| < stride (its neighbourhood) or (i − j) mod stride = 0 (every stride-th token).
    With stride ≈ √T each query sees about 2√T keys: O(T·√T) instead of O(T²)."""
    offset = np.arange(t)[:, None] - np.arange(s)[None, :]  # (T, S)
    return ~((np.abs(offset) < stride) | (offset % stride == 0))


def default_window(mode: str, s: int) -> int:
    """local: ±2 keys; strided: a stride of ⌈√S⌉."""
    return max(1, math.ceil(math.sqrt(s))) if mode == "strided" else 2


def build_mask(mode: str | np.ndarray | None, t: int, s: int, window: int | None = None) -> np.ndarray | None:
    """The (T, S) boolean mask of a named mode, or a given array checked for shape."""
    if mode is None or (isinstance(mode, str) and mode == "none"):
        return None
    if isinstance(mode, str):
        if mode not in MASK_MODES:
            raise ValueError(f"mask must be one of {', '.join(MASK_MODES)} or a T×S array of booleans")
        if mode == "causal":
            return causal_mask(t, s)
        w = default_window(mode, s) if window is None else window
        if w < 1:
            raise ValueError("window must be at least 1")
        return local_mask(t, s, w) if mode == "local" else strided_mask(t, s, w)
    hidden = np.asarray(mode, dtype=bool)
    if hidden.shape != (t, s):
        raise ValueError(f"mask must have shape {t}×{s}, got {'×'.join(map(str, hidden.shape))}")
    return hidden


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


def attend(
    scores: np.ndarray, v: np.ndarray, *, divisor: float = 1.0, mask: np.ndarray | None = None,
    bias: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """From scores to output: A = softmax(scores / divisor + bias, with hidden keys at −inf), output = A·V.

    For the transformer's dot-product score, divisor = √d_k·τ: Attention(Q, K, V) = softmax(Q·Kᵀ/√d_k)·V.
    Returns the intermediates (scaled, masked, weights, output) so that each can be shown.
    """
    scaled = scores / divisor  # (..., T, S)
    if bias is not None:
        scaled = scaled + bias  # (..., T, S)
    masked, weights = masked_softmax(scaled, mask)  # (..., T, S) twice
    output = weights @ v  # (..., T, d_v)
    return scaled, masked, weights, output


def general_scores(q: np.ndarray, k: np.ndarray, w_a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Luong's "general" score: score(q_i, k_j) = q_i·W_a·k_jᵀ (rows of Q and K), computed as (Q·W_a)·Kᵀ.

    Returns (Q·W_a, scores). Works on (..., T, d_k) with w_a (..., d_k, d_k).
    """
    q_w = q @ w_a  # (..., T, d_k)
    return q_w, q_w @ k.swapaxes(-2, -1)  # (..., T, S)


def additive_scores(
    q: np.ndarray, k: np.ndarray, w_1: np.ndarray, w_2: np.ndarray, v_a: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bahdanau's additive score: score(q_i, k_j) = v_a·tanh(q_i·W₁ + k_j·W₂), a one-layer network.

    q_i and k_j are rows of Q and K, as everywhere here: Scores_ij = Σ_a (v_a)_a·tanh((Q·W₁)_ia + (K·W₂)_ja).

    Returns (Q·W₁, K·W₂, scores). Shapes (..., T, d_k), (..., S, d_k), (..., d_k, d_a) twice, (..., d_a).
    """
    q_1 = q @ w_1  # (..., T, d_a)
    k_2 = k @ w_2  # (..., S, d_a)
    hidden = np.tanh(q_1[..., :, None, :] + k_2[..., None, :, :])  # (..., T, S, d_a)
    return q_1, k_2, np.einsum("...tsa,...a->...ts", hidden, v_a)  # (..., T, S)


def elu_plus_one(x: np.ndarray) -> np.ndarray:
    """φ(x) = elu(x) + 1: x + 1 for x > 0, exp(x) otherwise. Always positive, like exp."""
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def log_elu_plus_one(x: np.ndarray) -> np.ndarray:
    """log φ(x): log(x + 1) for x > 0, x otherwise. Finite where φ(x) itself underflows to 0."""
    return np.where(x > 0, np.log1p(np.maximum(x, 0.0)), x)


def linear_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None) -> LinearAttention:
    """Linear attention for one head: output_i = φ(q_i)ᵀ·(φ(K)ᵀ·V) / φ(q_i)ᵀ·Σ_j φ(k_j).

    Without a mask the d_k×d_v summary φ(K)ᵀ·V is built once and the output needs no T×S matrix. With
    a mask the hidden keys drop out of each query's sums, which needs the T×S kernel matrix; the summary
    φ(K)ᵀ·V is returned all the same, built from every key.
    """
    phi_q, phi_k = elu_plus_one(q), elu_plus_one(k)  # (T, d_k), (S, d_k)
    kv = phi_k.T @ v  # (d_k, d_v)
    kernel = phi_q @ phi_k.T  # (T, S) φ(q_i)·φ(k_j), for reading and for masks
    if mask is None:
        z = phi_q @ phi_k.sum(axis=0)  # (T,)
        numerator = phi_q @ kv  # (T, d_v)
    else:
        kernel = np.where(mask, 0.0, kernel)  # (T, S)
        z = kernel.sum(axis=1)  # (T,)
        numerator = kernel @ v  # (T, d_v)
    # φ > 0, but exp(x) underflows to 0 below x ≈ −745: a query whose every term did has z = 0 and
    # would get 0/0. Its weights are recomputed in log space, where nothing underflows.
    lost = ~(z >= np.finfo(np.float64).tiny)  # (T,)
    z_safe = np.where(lost, 1.0, z)  # (T,)
    weights, output = kernel / z_safe[:, None], numerator / z_safe[:, None]  # (T, S), (T, d_v)
    if lost.any():
        log_phi_q, log_phi_k = log_elu_plus_one(q[lost]), log_elu_plus_one(k)  # (L, d_k), (S, d_k)
        log_kernel = np.logaddexp.reduce(log_phi_q[:, None, :] + log_phi_k[None, :, :], axis=-1)  # (L, S)
        if mask is not None:
            log_kernel = np.where(mask[lost], -np.inf, log_kernel)  # (L, S)
        weights[lost] = softmax_rows(log_kernel)  # (L, S)
        output[lost] = weights[lost] @ v  # (L, d_v)
    return LinearAttention(phi_q=phi_q, phi_k=phi_k, kv=kv, z=z, weights=weights, output=output)


def sinusoidal_encoding(t: int, d_model: int) -> np.ndarray:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).

    pos = 0 … T − 1 and columns from 0; an odd d_model ends on a sine (column d_model − 1 = 2i) with no cosine.
    """
    pos = np.arange(t)[:, None]  # (T, 1)
    two_i = (np.arange(d_model) // 2 * 2)[None, :]  # (1, d_model): 0, 0, 2, 2, 4, …
    angle = pos / np.power(10000.0, two_i / d_model)  # (T, d_model)
    return np.where(np.arange(d_model) % 2 == 0, np.sin(angle), np.cos(angle))  # (T, d_model)


def rope_rotate(x: np.ndarray) -> np.ndarray:
    """RoPE: rotate each pair (x_2i, x_2i+1) at position pos by pos·θ_i, θ_i = 10000^(−2i/d).

    Adjacent dimensions pair (RoFormer's form), not the halves (x_i, x_(i+d/2)) of GPT-NeoX; pos = 0 … T − 1.
    An odd last dimension is left as it is (and d in θ_i stays odd). Works on (..., T, d).
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


def weight_shapes(d_model: int, num_heads: int, d_k: int, d_v: int, d_a: int | None = None) -> dict:
    """The shape of every attention weight, in ALL_WEIGHT_NAMES order."""
    d_a = d_k if d_a is None else d_a
    return {
        "w_q": (num_heads, d_model, d_k),
        "w_k": (num_heads, d_model, d_k),
        "w_v": (num_heads, d_model, d_v),
        "w_o": (num_heads * d_v, d_model),
        "w_a": (num_heads, d_k, d_k),
        "w_1": (num_heads, d_k, d_a),
        "w_2": (num_heads, d_k, d_a),
        "v_a": (num_heads, d_a),
    }


def seeded_weights(
    d_model: int, num_heads: int, d_k: int, d_v: int, seed: int, d_a: int | None = None, block: int = 0
) -> Weights:
    """Draw every projection from ``np.random.default_rng(seed)``, in WEIGHT_NAMES order, then the
    score functions' weights from their own stream ``default_rng([seed, 3])``. Blocks after the
    first (``block`` >= 1) draw theirs from streams of their own.

    Entries are N(0, 1/fan_in) so that Q, K, V keep the scale of X, rounded to two decimals so
    that a student can read and retype them.
    """
    d_a = d_k if d_a is None else d_a
    shapes = weight_shapes(d_model, num_heads, d_k, d_v, d_a)
    rng = np.random.default_rng(seed if block == 0 else [seed, 10 + block])
    std = 1.0 / math.sqrt(d_model)
    drawn = {name: np.round(rng.normal(0.0, std, shapes[name]), 2) for name in WEIGHT_NAMES}
    extra = np.random.default_rng([seed, 3] if block == 0 else [seed, 20 + block])
    for name in SCORE_WEIGHT_NAMES:
        fan_in = d_a if name == "v_a" else d_k
        drawn[name] = np.round(extra.normal(0.0, 1.0 / math.sqrt(fan_in), shapes[name]), 2)
    return Weights(**drawn)


def resolve_weights(
    cls: type[W], shapes: dict, given: dict[str, np.ndarray] | None, draw: Callable[[], W]
) -> W:
    """The given arrays, shapes checked, with ``draw()``'s seeded ones for the rest. Nothing is
    drawn when every array is given (the page always gives them all)."""
    given = given or {}
    used = {}
    for name, shape in shapes.items():
        value = given.get(name)
        if value is None:
            continue
        value = np.asarray(value, dtype=np.float64)
        if value.shape != shape:
            raise ValueError(f"{name} must have shape {shape}, got {value.shape}")
        used[name] = value
    if len(used) < len(shapes):
        seeded = draw()
        used = {name: used[name] if name in used else getattr(seeded, name) for name in shapes}
    return cls(**used)


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
    score: str = "dot",
    attention: str = "softmax",
    window: int | None = None,
    block: int = 0,
) -> AttentionRun:
    """MultiHead(X) = Concat(head₁, …, head_h)·W_O, headᵢ = Attention(X·W_Qⁱ, C·W_Kⁱ, C·W_Vⁱ).

    C is X itself (self-attention) or ``context`` (cross-attention: S tokens, same d_model).
    ``weights`` may give any of ALL_WEIGHT_NAMES; the rest are seeded (see seeded_weights).
    ``mask`` is "none", "causal", "local", "strided" (with ``window``) or a T×S boolean array
    (True hides key j from query i).
    ``positional_encoding``: "none", "sinusoidal" or "learned" (added to X and to C),
    "rope" (rotates q and k) or "alibi" (adds −m_h·|i − j| to head h's scaled scores).
    ``score``: "dot" (q·k), "general" (q_i·W_a·k_jᵀ) or "additive" (v_a·tanh(q_i·W₁ + k_j·W₂), never ÷√d_k).
    ``attention``: "softmax", or "linear" (φ = elu + 1; the softmax intermediates are kept to compare).
    ``block``: which transformer block's seeded stream fills the weights not given (0: the first).
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
    check_choice("positional_encoding", positional_encoding, POSITIONAL_ENCODINGS)
    check_choice("score", score, SCORE_FUNCTIONS)
    check_choice("attention", attention, ATTENTION_MODES)
    if not temperature > 0:
        raise ValueError("temperature must be positive")
    c_input = None if context is None else np.asarray(context, dtype=np.float64)  # (S, d_model)
    if c_input is not None and (c_input.ndim != 2 or c_input.shape[0] < 1 or c_input.shape[1] != d_model):
        raise ValueError("context.x must be a non-empty S×d_model matrix with the same d_model as x")
    s_len = t if c_input is None else c_input.shape[0]
    w = resolve_weights(Weights, weight_shapes(d_model, num_heads, d_k, d_v), weights,
                        lambda: seeded_weights(d_model, num_heads, d_k, d_v, seed, block=block))

    # 0) Positions: sinusoidal or learned encodings are added to the embeddings.
    pe = position_encoding(positional_encoding, max(t, s_len), d_model, seed, position_table)  # (max(T, S), d_model)
    x_used = x_input if pe is None else x_input + pe[:t]  # (T, d_model)
    c_used = None if c_input is None else (c_input if pe is None else c_input + pe[:s_len])  # (S, d_model)
    source = x_used if c_used is None else c_used  # (S, d_model)

    if isinstance(mask, str) and mask in ("local", "strided") and window is None:
        window = default_window(mask, s_len)
    hidden = build_mask(mask, t, s_len, window)
    mask_mode = "custom" if mask is not None and not isinstance(mask, str) else (mask or "none")

    # 1) Project X into each head's queries, and the source into keys and values (all heads at once).
    q = np.einsum("td,hdk->htk", x_used, w.w_q)  # (h, T, d_k)
    k = np.einsum("sd,hdk->hsk", source, w.w_k)  # (h, S, d_k)
    v = np.einsum("sd,hdv->hsv", source, w.w_v)  # (h, S, d_v)
    q_rot = k_rot = bias = None
    if positional_encoding == "rope":
        q_rot, k_rot = rope_rotate(q), rope_rotate(k)  # (h, T, d_k), (h, S, d_k)
    if positional_encoding == "alibi":
        bias = alibi_bias(num_heads, t, s_len)  # (h, T, S)
    q_s = q if q_rot is None else q_rot  # what the score function compares
    k_s = k if k_rot is None else k_rot
    # 2) Scores: q·k, or one of the older score functions.
    q_w = q_1 = k_2 = None
    if score == "dot":
        scores = q_s @ k_s.swapaxes(-2, -1)  # (h, T, S)
    elif score == "general":
        q_w, scores = general_scores(q_s, k_s, w.w_a)  # (h, T, d_k), (h, T, S)
    else:
        q_1, k_2, scores = additive_scores(q_s, k_s, w.w_1, w.w_2, w.v_a)  # (h, T, d_a), (h, S, d_a), (h, T, S)
    # 3) Scaling (dot products only), temperature and ALiBi; 4) mask and softmax; 5) A·V.
    divisor = (math.sqrt(d_k) if scale and score != "additive" else 1.0) * temperature
    scaled, masked, attn, head_out = attend(scores, v, divisor=divisor, mask=hidden, bias=bias)  # (h, T, S) ×3
    linear = None
    if attention == "linear":
        linear = [linear_attention(q_s[i], k_s[i], v[i], hidden) for i in range(num_heads)]
        softmax_out, head_out = head_out, np.stack([lin.output for lin in linear])  # (h, T, d_v) twice
    # 6) Concatenate the heads in order and project back to d_model.
    concat = head_out.transpose(1, 0, 2).reshape(t, num_heads * d_v)  # (T, h·d_v)
    output = concat @ w.w_o  # (T, d_model)

    def pick(a: np.ndarray | None, i: int) -> np.ndarray | None:
        return None if a is None else a[i]

    heads = tuple(
        HeadResult(
            q=q[i], k=k[i], v=v[i], scores=scores[i], scaled=scaled[i], masked=masked[i],
            softmax=attn[i], output=head_out[i],
            q_rot=pick(q_rot, i), k_rot=pick(k_rot, i), bias=pick(bias, i),
            q_w=pick(q_w, i), q_1=pick(q_1, i), k_2=pick(k_2, i),
            linear=None if linear is None else linear[i],
            softmax_output=None if linear is None else softmax_out[i],
        )
        for i in range(num_heads)
    )
    return AttentionRun(
        x=x_used, heads=heads, concat=concat, output=output, weights=w, d_k=d_k, d_v=d_v, scale=scale,
        temperature=temperature, x_input=x_input, pe=None if pe is None else pe[:t],
        positional_encoding=positional_encoding, context=c_used, mask=hidden,
        score=score, attention=attention, mask_mode=mask_mode, window=window,
    )


# --- the transformer block around attention (seeds 002, 003) -----------------------------------

BLOCK_WEIGHT_NAMES = ("ffn_w1", "ffn_b1", "ffn_w2", "ffn_b2", "ln1_gamma", "ln1_beta", "ln2_gamma", "ln2_beta")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh")  # "gelu" is the exact (erf) form; "gelu_tanh" GPT-2's
NORM_PLACEMENTS = ("post", "pre")
LAYER_NORM_EPS = 1e-5


@dataclass(frozen=True)
class BlockWeights:
    """A block's position-wise FFN and its two LayerNorms' gain and bias."""

    ffn_w1: np.ndarray  # (d_model, d_ff)
    ffn_b1: np.ndarray  # (d_ff,)
    ffn_w2: np.ndarray  # (d_ff, d_model)
    ffn_b2: np.ndarray  # (d_model,)
    ln1_gamma: np.ndarray  # (d_model,)
    ln1_beta: np.ndarray  # (d_model,)
    ln2_gamma: np.ndarray  # (d_model,)
    ln2_beta: np.ndarray  # (d_model,)


@dataclass(frozen=True)
class LayerNormResult:
    """LayerNorm(z)_i = γ ⊙ (z_i − μ_i) / √(σ²_i + ε) + β, each row over its d_model features."""

    input: np.ndarray  # (T, d_model)
    mean: np.ndarray  # (T,) μ_i
    var: np.ndarray  # (T,) σ²_i, the biased (population) variance: divided by d_model, as PyTorch
    normalized: np.ndarray  # (T, d_model) (z − μ)/√(σ² + ε): mean 0, variance ≈ 1 per row
    output: np.ndarray  # (T, d_model) γ ⊙ normalized + β


@dataclass(frozen=True)
class BlockResult:
    """One transformer block. Post-norm (the seeds, the original paper):
        h = LayerNorm₁(x + MultiHead(x)),   out = LayerNorm₂(h + FFN(h)).
    Pre-norm (GPT-2 and most recent models):
        h = x + MultiHead(LayerNorm₁(x)),   out = h + FFN(LayerNorm₂(h)).
    """

    norm: str  # "post" or "pre"
    activation: str  # "relu", "gelu" (exact) or "gelu_tanh"
    x: np.ndarray  # (T, d_model) the block's input
    attention: AttentionRun  # its x is what the heads see: x (post) or LayerNorm₁(x) (pre)
    residual1: np.ndarray  # (T, d_model) x + MultiHead(·)
    ln1: LayerNormResult  # of residual1 (post) or of x (pre)
    h: np.ndarray  # (T, d_model) after the first sub-layer
    ffn_in: np.ndarray  # (T, d_model) h (post) or LayerNorm₂(h) (pre)
    ffn_hidden: np.ndarray  # (T, d_ff) ffn_in·W₁ + b₁
    ffn_act: np.ndarray  # (T, d_ff) ReLU, GELU or GELU_tanh of it
    ffn_out: np.ndarray  # (T, d_model) ffn_act·W₂ + b₂
    residual2: np.ndarray  # (T, d_model) h + FFN(·)
    ln2: LayerNormResult  # of residual2 (post) or of h (pre)
    output: np.ndarray  # (T, d_model)
    weights: BlockWeights

    @property
    def d_ff(self) -> int:
        return int(self.ffn_hidden.shape[1])


@dataclass(frozen=True)
class TransformerRun:
    """A stack of blocks. The first block's input is the embeddings plus their positional encoding."""

    x_input: np.ndarray  # (T, d_model) the embeddings as given
    pe: np.ndarray | None  # (T, d_model) added to them (sinusoidal, learned)
    blocks: tuple[BlockResult, ...]
    positional_encoding: str = "none"

    @property
    def output(self) -> np.ndarray:
        return self.blocks[-1].output  # (T, d_model)


def layer_norm(z: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = LAYER_NORM_EPS) -> LayerNormResult:
    """LayerNorm over the last axis: each token's features get mean 0 and variance 1, then γ, β."""
    mean = z.mean(axis=-1)  # (T,)
    var = z.var(axis=-1)  # (T,)
    normalized = (z - mean[:, None]) / np.sqrt(var[:, None] + eps)  # (T, d_model)
    return LayerNormResult(input=z, mean=mean, var=var, normalized=normalized, output=gamma * normalized + beta)


def relu(x: np.ndarray) -> np.ndarray:
    """ReLU(x) = max(0, x)."""
    return np.maximum(x, 0.0)


# NumPy has no erf. math.erf is the C library's, correct to double precision, as PyTorch's GELU uses;
# applied element by element it costs about 1.3 ms at 64×256, the largest T × d_ff.
_erf = np.frompyfunc(math.erf, 1, 1)


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU(x) = x·Φ(x) = ½·x·(1 + erf(x/√2)), exact: PyTorch's default and BERT's."""
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU_tanh(x) = ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), GPT-2's approximation of GELU
    (PyTorch's ``approximate="tanh"``); it differs from the exact form by at most 4.74e-4, near |x| = 2.70."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


ACTIVATION_FUNCTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "relu": relu, "gelu": gelu, "gelu_tanh": gelu_tanh,
}


def block_weight_shapes(d_model: int, d_ff: int) -> dict:
    """The shape of every block weight, in BLOCK_WEIGHT_NAMES order."""
    return {"ffn_w1": (d_model, d_ff), "ffn_b1": (d_ff,), "ffn_w2": (d_ff, d_model), "ffn_b2": (d_model,),
            **{name: (d_model,) for name in BLOCK_WEIGHT_NAMES[4:]}}


def seeded_block_weights(d_model: int, d_ff: int, seed: int, block: int = 0) -> BlockWeights:
    """W₁ ~ N(0, 1/d_model), W₂ ~ N(0, 1/d_ff) from ``default_rng([seed, 4, block])``, rounded to
    two decimals; biases 0, LayerNorm gains 1 and biases 0, as a fresh model starts."""
    rng = np.random.default_rng([seed, 4, block])
    return BlockWeights(
        ffn_w1=np.round(rng.normal(0.0, 1.0 / math.sqrt(d_model), (d_model, d_ff)), 2),
        ffn_b1=np.zeros(d_ff),
        ffn_w2=np.round(rng.normal(0.0, 1.0 / math.sqrt(d_ff), (d_ff, d_model)), 2),
        ffn_b2=np.zeros(d_model),
        ln1_gamma=np.ones(d_model), ln1_beta=np.zeros(d_model),
        ln2_gamma=np.ones(d_model), ln2_beta=np.zeros(d_model),
    )


def transformer_block(
    x: np.ndarray, bw: BlockWeights, *, norm: str, activation: str, attend_fn
) -> BlockResult:
    """One block around ``attend_fn``, which maps what the heads see (T, d_model) to an AttentionRun."""
    if norm == "post":
        attention = attend_fn(x)
        residual1 = x + attention.output  # (T, d_model)
        ln1 = layer_norm(residual1, bw.ln1_gamma, bw.ln1_beta)
        h = ln1.output  # (T, d_model)
        ffn_in = h
    else:
        ln1 = layer_norm(x, bw.ln1_gamma, bw.ln1_beta)
        attention = attend_fn(ln1.output)
        residual1 = x + attention.output  # (T, d_model)
        h = residual1
        ln2_pre = layer_norm(h, bw.ln2_gamma, bw.ln2_beta)
        ffn_in = ln2_pre.output  # (T, d_model)
    ffn_hidden = ffn_in @ bw.ffn_w1 + bw.ffn_b1  # (T, d_ff)
    ffn_act = ACTIVATION_FUNCTIONS[activation](ffn_hidden)  # (T, d_ff)
    ffn_out = ffn_act @ bw.ffn_w2 + bw.ffn_b2  # (T, d_model)
    residual2 = h + ffn_out  # (T, d_model)
    if norm == "post":
        ln2 = layer_norm(residual2, bw.ln2_gamma, bw.ln2_beta)
        output = ln2.output
    else:
        ln2 = ln2_pre
        output = residual2
    return BlockResult(
        norm=norm, activation=activation, x=x, attention=attention, residual1=residual1, ln1=ln1, h=h,
        ffn_in=ffn_in, ffn_hidden=ffn_hidden, ffn_act=ffn_act, ffn_out=ffn_out, residual2=residual2,
        ln2=ln2, output=output, weights=bw,
    )


def run_transformer(
    x: np.ndarray,
    *,
    blocks: int = 1,
    d_ff: int | None = None,
    activation: str = "relu",
    norm: str = "post",
    block_weights: dict[str, np.ndarray] | None = None,
    seed: int = 0,
    positional_encoding: str = "none",
    position_table: np.ndarray | None = None,
    context: np.ndarray | None = None,
    **attention_options,
) -> TransformerRun:
    """A stack of ``blocks`` transformer blocks: positions are added once, before the first block.

    The first block uses the given ``weights`` (in ``attention_options``) and ``block_weights``;
    later blocks draw all of theirs from their own seeded streams. RoPE and ALiBi act inside every
    block's attention. With a ``context``, every block's attention reads keys and values from it
    (cross-attention only; a full decoder block would also have self-attention).
    ``attention_options`` are run_attention's: num_heads, d_k, d_v, weights, scale, mask, …
    """
    if not 1 <= blocks:
        raise ValueError("blocks must be at least 1")
    check_choice("activation", activation, ACTIVATIONS)
    check_choice("norm", norm, NORM_PLACEMENTS)
    check_choice("positional_encoding", positional_encoding, POSITIONAL_ENCODINGS)
    x_input = np.asarray(x, dtype=np.float64)  # (T, d_model)
    if x_input.ndim != 2 or x_input.shape[0] < 1 or x_input.shape[1] < 1:
        raise ValueError("x must be a non-empty T×d_model matrix")
    t, d_model = x_input.shape
    d_ff = 4 * d_model if d_ff is None else d_ff
    if d_ff < 1:
        raise ValueError("d_ff must be at least 1")
    c_input = None if context is None else np.asarray(context, dtype=np.float64)  # (S, d_model)
    s_len = t if c_input is None else c_input.shape[0]
    # 0) Positions, once: sinusoidal or learned tables are added here; RoPE and ALiBi act per block.
    pe = position_encoding(positional_encoding, max(t, s_len), d_model, seed, position_table)
    x0 = x_input if pe is None else x_input + pe[:t]  # (T, d_model)
    c0 = None if c_input is None or pe is None else c_input + pe[:s_len]
    c0 = c_input if c0 is None else c0  # (S, d_model) or None
    inner_pe = positional_encoding if positional_encoding in ("rope", "alibi") else "none"
    given = attention_options.pop("weights", None)

    results: list[BlockResult] = []
    current = x0
    for b in range(blocks):
        bw = resolve_weights(BlockWeights, block_weight_shapes(d_model, d_ff), block_weights if b == 0 else None,
                             lambda b=b: seeded_block_weights(d_model, d_ff, seed, b))

        def attend_fn(seen: np.ndarray, b: int = b) -> AttentionRun:
            return run_attention(seen, weights=given if b == 0 else None, seed=seed, block=b, context=c0,
                                 positional_encoding=inner_pe, **attention_options)

        block = transformer_block(current, bw, norm=norm, activation=activation, attend_fn=attend_fn)
        results.append(block)
        current = block.output
    return TransformerRun(x_input=x_input, pe=None if pe is None else pe[:t], blocks=tuple(results),
                          positional_encoding=positional_encoding)
