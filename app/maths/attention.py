"""Multi-head scaled dot-product attention, one named intermediate per stage.

Pure NumPy and the standard library: no web framework is imported here. The page and the
JSON API render the record that :func:`run_attention` returns; they compute nothing.

Notation follows "Attention Is All You Need": T tokens, ``d_model`` embedding size, ``h`` heads,
``d_k`` query/key size and ``d_v`` value size per head.
"""

from __future__ import annotations

import math

import numpy as np

from app.maths.masks import build_mask, default_window
from app.maths.positions import POSITIONAL_ENCODINGS, alibi_bias, biases, position_encoding, rope_rotate, rotates
from app.maths.records import AttentionRun, HeadResult, LinearAttention, Weights
from app.maths.weights import SCORE_WEIGHT_NAMES, WEIGHT_NAMES, resolve_weights, weight_shapes

SCORE_FUNCTIONS = ("dot", "general", "additive")
ATTENTION_MODES = ("softmax", "linear")


def softmax_rows(z: np.ndarray) -> np.ndarray:
    """softmax(z)ᵢⱼ = exp(zᵢⱼ − maxⱼ' zᵢⱼ') / Σⱼ' exp(zᵢⱼ' − maxⱼ' zᵢⱼ').

    Subtracting the row maximum changes nothing mathematically and keeps exp from overflowing.
    """
    shifted = z - z.max(axis=-1, keepdims=True)  # (..., T)
    e = np.exp(shifted)  # (..., T)
    return e / e.sum(axis=-1, keepdims=True)  # (..., T), each row sums to 1



def concat_heads(output: np.ndarray) -> np.ndarray:
    """Concat(head₁ … head_h): the heads' outputs side by side, (T, h·d_v) from (h, T, d_v)."""
    h, t, d_v = output.shape
    return output.transpose(1, 0, 2).reshape(t, h * d_v)


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}")



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
    if rotates(positional_encoding):
        q_rot, k_rot = rope_rotate(q), rope_rotate(k)  # (h, T, d_k), (h, S, d_k)
    if biases(positional_encoding):
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
    concat = concat_heads(head_out)  # (T, h·d_v)
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
