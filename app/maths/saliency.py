"""Which input tokens the decoder's answer rests on: gradient × input and integrated gradients, with the decoder's
backward pass written out in NumPy.

The quantity explained is, at the last position, f(x) = log p(y | x) = logit_y − log Σ_v exp(logit_v), or, "why y
and not y′", f(x) = logit_y − logit_y′, as a function of the input embeddings x = E[ids] (T, d_model).

Gradient × input (Shrikumar et al., 2016; Baehrens et al., 2010) scores token t by aₜ = xₜ ⊙ ∂f/∂xₜ (d_model,).
Integrated gradients (Sundararajan et al., 2017, "Axiomatic Attribution for Deep Networks") integrates the gradient
along the straight path from a baseline x′ to x, with the midpoint rule over n steps:

    aₜ = (xₜ − x′ₜ) ⊙ (1/n) Σₖ ∂f/∂xₜ (x′ + αₖ·(x − x′)),     αₖ = (k − ½)/n,  k = 1 … n

and its attributions add up to f(x) − f(x′) as n grows (completeness); the rest, |Σₜ Σ_d aₜ − (f(x) − f(x′))|, is
the error of the quadrature. Each token gets two numbers: signed = Σ_d aₜ,d (towards or against y) and
norm = ‖aₜ‖₂ (how much, either way). Gradient × input is one step from the zero baseline with the gradient taken at
x itself (α = 1) rather than at the midpoint; its completeness error against f(0) is reported too, and shows how far
it is from a sum that adds up.

The backward pass, from f down to x, every layer in reverse (row vectors; dY is ∂f/∂Y, the shape of Y):

    final norm, LM head   d_x̂_N = E[y] − softmax(logits)·E  (E[y] − E[y′] with a contrast), at the last row only
    RMSNorm               y = x/r ⊙ g, r = √(mean(x²) + ε), n = x/r:   dx = (u − n·mean(u ⊙ n)) / r,  u = g ⊙ dy
    SwiGLU                h = SiLU(a) ⊙ u, a = x̂·W_gate, u = x̂·W_up:   du = dh ⊙ SiLU(a),
                          da = dh ⊙ u ⊙ σ(a)·(1 + a·(1 − σ(a))),   dx̂ = da·W_gateᵀ + du·W_upᵀ,   dh = dy·W_downᵀ
    attention output      d(Concat) = dy·W_Oᵀ;  headᵢ = Aᵢ·V_g:  dAᵢ = d(headᵢ)·V_gᵀ,  dV_g = Σ_{i in g} Aᵢᵀ·d(headᵢ)
    softmax, 1/√d_k, mask dSᵢ = Aᵢ ⊙ (dAᵢ − rowsum(Aᵢ ⊙ dAᵢ)) / √d_k: 0 where the mask hid a key (Aᵢ = 0 there)
    scores Sᵢ = Qᵢ·K_gᵀ   dQᵢ = dSᵢ·K_g,   dK_g = Σ_{i in g} dSᵢᵀ·Qᵢ   (grouped-query heads share K_g and V_g)
    RoPE                  rotation R(m·θ) is orthogonal: d(pre-rotation) = R(−m·θ)·d(rotated)
    projections           dx̂ = dQ·W_Qᵀ + dK·W_Kᵀ + dV·W_Vᵀ;   residuals: the gradient of x + F(x) is dy + dF

A head switched off (as app.maths.llama.extend switches it off: its weights 0) passes no gradient. Everything is
float32, as the forward pass; log p, the path's mean gradient and the per-token sums are taken in float64. A batch of
inputs (B, T, d_model) runs in one pass, so that the path's points run together, in chunks whose saved activations
stay under _TAPE_BYTES; the attention weights are not saved but worked again from Q and K on the way down (h·T²
numbers per layer would outgrow everything else at the page's longest texts).

The baseline, measured. x = 0 is a poor reference for this model: f(0) itself is exact (every RMSNorm gives 0, every
layer adds 0, every logit is 0: f(0) = −log 49152 = −10.80, or 0 for a difference), but the inputs around it are not
like it (on "The capital of France is", f(10⁻⁴·x) = −18.68 and f(10⁻²·x) = −12.46): RMSNorm's ε makes f jump at 0,
where no quadrature looks. No straight path is smooth on this model either: along every path tried, f(α) has steep
stretches (several nats within Δα ≈ 0.005, |df/dα| in the thousands, the gradient checked there against finite
differences), which the midpoint rule hits or misses by chance, so the error does not fall steadily with n (with 64
steps it was larger than with 16 in 31 of the 55 cases measured). Completeness error with 16 steps as a share of
|f(x) − f(x′)|, on 1 "The capital of France is", 2 "Harry Potter went to Hogwarts. Harry Potter went to", 3 "When
Mary and John went to the store, John gave a drink to", 4 "The cat sat on the mat because it was tired. The cat"; y
the model's first choice, y′ its second (difference: logit(y) − logit(y′)); a token baseline holds that token at
every position:

    baseline                    log p(y): 1     2     3     4    difference: 1     2     3     4   median  worst
    zero                               0.24  0.43  0.05  0.79             1.08  9.53  0.19  7.62     0.61    9.5
    mean embedding                     0.72  0.23  0.19  0.26             0.33  0.69  0.48  1.62     0.40    1.6
    token 0 "<|endoftext|>"            0.74  1.09  5.55  0.56             1.84  3.72  2.25  0.85     1.46    5.6
    token 2 "<|im_end|>" (EOS)         3.24  0.62  9.33  0.05             1.22  0.09 10.11  0.62     0.92   10.1
    token 260 " the"                   0.05  0.30  0.06  4.77             2.19  4.06  0.07  1.58     0.94    4.8
    token 216 " "                      8.13  0.20  0.04 10.12            13.68  0.47  0.73  3.10     1.92   13.7
    token 198 (a newline)              5.96  3.24  0.61  2.28             2.94 16.25  1.68  0.59     2.61   16.3
    token 30 "."                       0.34  4.14  0.13  1.64             0.69 13.65  0.24  1.48     1.08   13.6

DEFAULT_BASELINE is "mean", the embedding table's mean row at every position: an average token with no meaning of
its own, the smallest median error and by far the smallest worst case. Zero is about as good for log p but fails for
a difference (f(0) = 0 leaves a gap of 0.35 … 3.76 that the error swamps). None is complete at 16 steps on this
model (with 64 steps the mean's error was larger than with 16 in 6 of the 8 cases, 0.66 … 2.95): the page should
show completeness_error beside the attributions, a large one saying that the path crossed a steep stretch, which
more steps do not reliably cure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.maths.decoder_files import DecoderConfig, DecoderFiles
from app.maths.positions import rope_theta
from app.maths.real_model import heads_in
from app.maths.records import Progress

METHODS = ("gradient_x_input", "integrated_gradients")
MAX_STEPS = 64  # integrated gradients' steps, 1 … MAX_STEPS
DEFAULT_STEPS = 16
DEFAULT_BASELINE: str | int = "mean"  # measured on four texts: see the module's docstring
_TAPE_BYTES = 768 << 20  # the saved activations of one chunk of a batch; the pass's temporaries come on top

Baseline = str | int | np.ndarray  # "zero", "mean", a token id, or embeddings (T, d_model) or (d_model,)


@dataclass(frozen=True)
class Saliency:
    """Each input token's share of f, by one attribution method."""

    tokens: tuple[str, ...]  # the pieces as the vocabulary spells them ("Ġ" is a space)
    ids: np.ndarray  # (T,)
    method: str  # "gradient_x_input" or "integrated_gradients"
    target: int  # y
    contrast: int | None  # y′: f is logit(y) − logit(y′); None: f is log p(y)
    signed: np.ndarray  # (T,) Σ_d aₜ,d: towards y (> 0) or against it
    norm: np.ndarray  # (T,) ‖aₜ‖₂
    f_x: float  # f at the input
    f_baseline: float  # f at the baseline (the zero embeddings for gradient × input)
    steps: int  # the path's steps; 1 for gradient × input
    baseline: str  # "zero", "mean embedding", "token 0 '<|endoftext|>'" or "given embeddings"
    completeness_error: float  # |Σ signed − (f_x − f_baseline)|

    @property
    def total(self) -> float:
        """Σₜ signedₜ: for integrated gradients, f_x − f_baseline up to the completeness error."""
        return float(self.signed.sum())


@dataclass(frozen=True)
class _LayerTape:
    """What one layer's backward pass reads of its forward pass, for a batch of B inputs."""

    x: np.ndarray  # (B, T, d_model)  the layer's input
    r_attn: np.ndarray  # (B, T, 1)  √(mean(x²) + ε) of the attention's RMSNorm
    w_qkv: np.ndarray  # (d_model, (h + 2·h_kv)·d_k)  W_Q, W_K, W_V side by side, head after head
    q: np.ndarray  # (B, h_kv, group·T, d_k)  after RoPE, the query heads of one key/value head stacked
    k: np.ndarray  # (B, h_kv, T, d_k)  after RoPE
    v: np.ndarray  # (B, h_kv, T, d_k)
    off: list[int]  # the layer's heads switched off
    x_mid: np.ndarray  # (B, T, d_model)  after the attention's residual
    r_ffn: np.ndarray  # (B, T, 1)
    gate: np.ndarray  # (B, T, d_ff)  x̂·W_gate, before SiLU
    up: np.ndarray  # (B, T, d_ff)  x̂·W_up


def _rms(x: np.ndarray, eps: float) -> np.ndarray:
    """r = √(mean(x²) + ε) over the last axis, (..., 1)."""
    return np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + np.float32(eps))


def rms_norm_backward(x: np.ndarray, r: np.ndarray, gain: np.ndarray, d_y: np.ndarray) -> np.ndarray:
    """∂f/∂x for y = x/r ⊙ g: (u − n·mean(u ⊙ n)) / r with n = x/r, u = g ⊙ ∂f/∂y. Shapes (..., d_model)."""
    n = x / r  # (..., d_model)
    u = gain * d_y  # (..., d_model)
    return (u - n * np.mean(u * n, axis=-1, keepdims=True)) / r


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.float32(0.5) * (np.float32(1.0) + np.tanh(np.float32(0.5) * x))  # no exp to overflow


def _rope_tables(cfg: DecoderConfig, t: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of m·θᵢ, (T, d_k/2), for positions m = 0 … T − 1 (app.maths.positions.rope_rotate's angles)."""
    angle = np.arange(t)[:, None] * rope_theta(cfg.d_k, np.arange(cfg.d_k // 2), cfg.rope_base)[None, :]
    return np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)


def _rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Each adjacent pair (x₂ᵢ, x₂ᵢ₊₁) at position m turned by m·θᵢ; with −sin, turned back (Rᵀ = R(−m·θ)).
    x is (..., T, d_k); the result is C-contiguous."""
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, d_k/2)
    out = np.empty(x.shape, dtype=np.float32)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def _qkv_weights(model: DecoderFiles, layer: int) -> np.ndarray:
    """W_Q, W_K and W_V of a layer as one (d_model, (h + 2·h_kv)·d_k) matrix: one product for the three."""
    lw = model.weights.layers[layer]
    return np.concatenate([w.transpose(1, 0, 2).reshape(w.shape[1], -1) for w in (lw.w_q, lw.w_k, lw.w_v)], axis=1)


def _attention_weights(q: np.ndarray, k: np.ndarray, hidden: np.ndarray, off: list[int]) -> np.ndarray:
    """A = softmax(Q·Kᵀ/√d_k, −∞ where ``hidden``), the query heads of a key/value head stacked: (B, h_kv, gT, T)
    from q (B, h_kv, gT, d_k) and k (B, h_kv, T, d_k); 0 for a head switched off. The backward pass works it again
    from q and k rather than keeping h·T² numbers per input and layer."""
    b, d_k, t = q.shape[0], q.shape[-1], k.shape[2]
    s = q @ k.transpose(0, 1, 3, 2) / np.float32(math.sqrt(d_k))  # (B, h_kv, gT, T)
    s[:, :, hidden] = -np.inf
    a = np.exp(s - s.max(axis=-1, keepdims=True))  # (B, h_kv, gT, T)
    a /= a.sum(axis=-1, keepdims=True)
    if off:
        a.reshape(b, -1, t, t)[:, off] = 0.0  # (B, h, T, T) view: the head's weights, so its output, are 0
    return a


def _causal(t: int, group: int) -> np.ndarray:
    """True where a key comes after its query, for the ``group`` query heads of a key/value head stacked."""
    return np.tile(np.triu(np.ones((t, t), dtype=bool), k=1), (group, 1))  # (group·T, T)


def _forward(model: DecoderFiles, x: np.ndarray, heads_off: frozenset[tuple[int, int]],
             keep: bool) -> tuple[np.ndarray, list[_LayerTape]]:
    """The decoder on a batch of embeddings (B, T, d_model): the last layer's output (B, T, d_model) and, with
    ``keep``, each layer's tape. The same maths as app.maths.llama.extend, batched, heads of a group stacked."""
    cfg = model.config
    b, t, _ = x.shape
    h, h_kv, g, d_k = cfg.heads, cfg.kv_heads, cfg.group, cfg.d_k
    cos, sin = _rope_tables(cfg, t)
    hidden = _causal(t, g)  # (group·T, T)
    tape = []
    for layer in range(cfg.layers):
        lw = model.weights.layers[layer]
        # 1) RMSNorm, then Q, K, V in one product, RoPE on Q and K.
        r_attn = _rms(x, cfg.eps)  # (B, T, 1)
        w_qkv = _qkv_weights(model, layer)  # (d_model, (h + 2·h_kv)·d_k)
        qkv = ((x / r_attn * lw.attn_norm) @ w_qkv).reshape(b, t, h + 2 * h_kv, d_k)  # (B, T, h + 2·h_kv, d_k)
        q = _rotate(qkv[:, :, :h].transpose(0, 2, 1, 3), cos, sin).reshape(b, h_kv, g * t, d_k)  # (B, h_kv, gT, d_k)
        k = _rotate(qkv[:, :, h : h + h_kv].transpose(0, 2, 1, 3), cos, sin)  # (B, h_kv, T, d_k)
        v = np.ascontiguousarray(qkv[:, :, h + h_kv :].transpose(0, 2, 1, 3))  # (B, h_kv, T, d_k)
        # 2) Scores ÷ √d_k, the causal mask, softmax; a head switched off gets weights 0.
        off = heads_in(heads_off, layer)
        a = _attention_weights(q, k, hidden, off)  # (B, h_kv, gT, T)
        # 3) A·V, the heads concatenated, W_O, the residual.
        heads = (a @ v).reshape(b, h, t, d_k).transpose(0, 2, 1, 3).reshape(b, t, h * d_k)  # (B, T, h·d_k)
        x_mid = x + heads @ lw.w_o  # (B, T, d_model)
        # 4) RMSNorm, SwiGLU, the residual.
        r_ffn = _rms(x_mid, cfg.eps)  # (B, T, 1)
        x_hat = x_mid / r_ffn * lw.ffn_norm  # (B, T, d_model)
        gate, up = x_hat @ lw.w_gate, x_hat @ lw.w_up  # (B, T, d_ff) twice
        x_out = x_mid + (gate * _sigmoid(gate) * up) @ lw.w_down  # (B, T, d_model)
        if keep:
            tape.append(_LayerTape(x=x, r_attn=r_attn, w_qkv=w_qkv, q=q, k=k, v=v, off=off, x_mid=x_mid, r_ffn=r_ffn,
                                   gate=gate, up=up))
        x = x_out
    return x, tape


def _objective(model: DecoderFiles, last: np.ndarray, target: int,
               contrast: int | None) -> tuple[np.ndarray, np.ndarray]:
    """f and ∂f/∂x̂_N at the last position, from its residual stream ``last`` (B, d_model) after the final
    RMSNorm x̂_N: log p(y) = logit_y − logsumexp(logits), or logit_y − logit_y′. Returns (B,) and (B, d_model)."""
    e = model.weights.embedding  # (vocab, d_model): the tied LM head
    x_hat = last / _rms(last, model.config.eps) * model.weights.final_norm  # (B, d_model)
    if contrast is not None:
        direction = e[target] - e[contrast]  # (d_model,)
        return x_hat.astype(np.float64) @ direction.astype(np.float64), np.broadcast_to(direction, x_hat.shape)
    logits = (x_hat @ e.T).astype(np.float64)  # (B, vocab)
    top = logits.max(axis=-1, keepdims=True)  # (B, 1)
    p = np.exp(logits - top)  # (B, vocab)
    total = p.sum(axis=-1, keepdims=True)  # (B, 1)
    f = logits[:, target] - top[:, 0] - np.log(total[:, 0])  # (B,)
    return f, e[target] - (p / total).astype(np.float32) @ e  # (B,), (B, d_model): E[y] − softmax·E


def _backward(model: DecoderFiles, tape: list[_LayerTape], last: np.ndarray, d_last: np.ndarray) -> np.ndarray:
    """∂f/∂x (B, T, d_model) from ∂f/∂x̂_N at the last position, every layer in reverse."""
    cfg, w = model.config, model.weights
    b, t, d = tape[0].x.shape
    h, h_kv, g, d_k = cfg.heads, cfg.kv_heads, cfg.group, cfg.d_k
    cos, sin = _rope_tables(cfg, t)
    hidden = _causal(t, g)  # (group·T, T)
    d_x = np.zeros((b, t, d), dtype=np.float32)  # (B, T, d_model)
    d_x[:, -1] = rms_norm_backward(last, _rms(last, cfg.eps), w.final_norm, d_last)
    for layer in reversed(range(cfg.layers)):
        lw, s = w.layers[layer], tape.pop()  # the tape is let go of as the pass goes down
        # 4) SwiGLU and its RMSNorm; the residual passes d_x through unchanged.
        d_h = d_x @ lw.w_down.T  # (B, T, d_ff)
        sig = _sigmoid(s.gate)  # (B, T, d_ff)
        d_up = d_h * s.gate * sig  # (B, T, d_ff)
        d_gate = d_h * s.up * sig * (np.float32(1.0) + s.gate * (np.float32(1.0) - sig))  # SiLU'
        d_x_hat = d_gate @ lw.w_gate.T + d_up @ lw.w_up.T  # (B, T, d_model)
        d_x = d_x + rms_norm_backward(s.x_mid, s.r_ffn, lw.ffn_norm, d_x_hat)  # (B, T, d_model)
        # 3) W_O and the heads: d(headᵢ) in the stacked layout; dV_g sums its query heads.
        d_heads = (d_x @ lw.w_o.T).reshape(b, t, h, d_k).transpose(0, 2, 1, 3)  # (B, h, T, d_k)
        d_heads = d_heads.reshape(b, h_kv, g * t, d_k)  # (B, h_kv, gT, d_k)
        a = _attention_weights(s.q, s.k, hidden, s.off)  # (B, h_kv, gT, T)
        d_v = a.transpose(0, 1, 3, 2) @ d_heads  # (B, h_kv, T, d_k)
        # 2) Softmax and the scaling; 0 where a key was hidden or the head switched off (A = 0 there).
        d_a = d_heads @ s.v.transpose(0, 1, 3, 2)  # (B, h_kv, gT, T)
        d_s = a * (d_a - (a * d_a).sum(axis=-1, keepdims=True)) / np.float32(math.sqrt(d_k))
        # 1) Scores, RoPE turned back, the three projections, the attention's RMSNorm.
        d_q = _rotate((d_s @ s.k).reshape(b, h, t, d_k), cos, -sin)  # (B, h, T, d_k)
        d_k_ = _rotate(d_s.transpose(0, 1, 3, 2) @ s.q, cos, -sin)  # (B, h_kv, T, d_k)
        d_qkv = np.empty((b, t, h + 2 * h_kv, d_k), dtype=np.float32)  # (B, T, h + 2·h_kv, d_k)
        d_qkv[:, :, :h] = d_q.transpose(0, 2, 1, 3)
        d_qkv[:, :, h : h + h_kv] = d_k_.transpose(0, 2, 1, 3)
        d_qkv[:, :, h + h_kv :] = d_v.transpose(0, 2, 1, 3)
        d_x_hat = d_qkv.reshape(b, t, -1) @ s.w_qkv.T  # (B, T, d_model)
        d_x = d_x + rms_norm_backward(s.x, s.r_attn, lw.attn_norm, d_x_hat)  # (B, T, d_model)
    return d_x


def _chunk(cfg: DecoderConfig, t: int) -> int:
    """How many inputs of T tokens one pass takes, so that their tape stays under _TAPE_BYTES."""
    per_input = 4 * cfg.layers * t * (2 * cfg.d_model + (cfg.heads + 2 * cfg.kv_heads) * cfg.d_k + 2 * cfg.d_ff)
    return max(1, _TAPE_BYTES // per_input)


def _check(model: DecoderFiles, ids: np.ndarray, target: int, contrast: int | None) -> None:
    vocab = model.config.vocab
    if ids.ndim != 1 or not len(ids):
        raise ValueError("ids must hold at least one token")
    if ids.min() < 0 or ids.max() >= vocab or not 0 <= target < vocab:
        raise ValueError(f"token ids must be in 0 … {vocab - 1}")
    if contrast is not None and (not 0 <= contrast < vocab or contrast == target):
        raise ValueError("contrast must be another token than the target")


def evaluate(model: DecoderFiles, embeddings: np.ndarray, target: int, contrast: int | None = None,
             heads_off: frozenset[tuple[int, int]] = frozenset()) -> np.ndarray:
    """f at each of a batch of embeddings (B, T, d_model), forward only: (B,) in float64."""
    x = np.asarray(embeddings, dtype=np.float32)
    step = _chunk(model.config, x.shape[1])
    parts = [_objective(model, _forward(model, x[i : i + step], heads_off, keep=False)[0][:, -1], target,
                        contrast)[0] for i in range(0, len(x), step)]
    return np.concatenate(parts)


def value_at_zero(model: DecoderFiles, contrast: int | None = None) -> float:
    """f(0), without a pass: at x = 0 every RMSNorm gives 0, so every layer adds 0 (nothing has a bias, whatever
    heads are off) and every logit is 0: log p(y) = −log |vocab|, logit(y) − logit(y′) = 0."""
    return 0.0 if contrast is not None else -math.log(model.config.vocab)


def input_gradient(model: DecoderFiles, ids: np.ndarray | Sequence[int], target: int, contrast: int | None = None,
                   heads_off: frozenset[tuple[int, int]] = frozenset(), embeddings: np.ndarray | None = None,
                   progress: Progress | None = None) -> tuple[np.ndarray, np.ndarray]:
    """f and ∂f/∂x at the input embeddings: E[ids] (T, d_model), or ``embeddings`` (T, d_model) or a batch
    (B, T, d_model) in their place. Returns f () or (B,) in float64 and ∂f/∂x, the shape of x, in float32.
    ``progress(done, B)`` is told after each chunk of the batch."""
    ids = np.asarray(ids, dtype=np.int64)
    _check(model, ids, target, contrast)
    x = model.weights.embedding[ids] if embeddings is None else np.asarray(embeddings, dtype=np.float32)
    if x.shape[-2:] != (len(ids), model.config.d_model) or x.ndim not in (2, 3):
        raise ValueError(f"embeddings must be (T, d_model) or (B, T, d_model) with T = {len(ids)}")
    batch = x[None] if x.ndim == 2 else x  # (B, T, d_model)
    f = np.empty(len(batch), dtype=np.float64)
    grad = np.empty(batch.shape, dtype=np.float32)
    step = _chunk(model.config, len(ids))
    for i in range(0, len(batch), step):
        out, tape = _forward(model, batch[i : i + step], heads_off, keep=True)  # (b, T, d_model)
        f[i : i + step], d_last = _objective(model, out[:, -1], target, contrast)
        grad[i : i + step] = _backward(model, tape, out[:, -1], d_last)
        if progress is not None:
            progress(min(i + step, len(batch)), len(batch))
    return (f[0], grad[0]) if x.ndim == 2 else (f, grad)


def baseline_embeddings(model: DecoderFiles, ids: np.ndarray, baseline: Baseline) -> tuple[np.ndarray, str]:
    """The reference input x′ (T, d_model) and how to name it: "zero", "mean" (the mean of the embedding
    table, every position), a token id (that token's embedding at every position), or embeddings given."""
    e, t = model.weights.embedding, len(ids)
    if isinstance(baseline, str):
        if baseline == "zero":
            return np.zeros((t, e.shape[1]), dtype=np.float32), "zero"
        if baseline == "mean":
            mean = e.mean(axis=0, dtype=np.float64).astype(np.float32)  # (d_model,)
            return np.broadcast_to(mean, (t, e.shape[1])).copy(), "mean embedding"
        raise ValueError('baseline must be "zero", "mean", a token id or embeddings')
    if isinstance(baseline, int | np.integer):
        token = int(baseline)
        if not 0 <= token < len(e):
            raise ValueError(f"a baseline token must be in 0 … {len(e) - 1}")
        return np.broadcast_to(e[token], (t, e.shape[1])).copy(), f"token {token} {model.vocabulary[token]!r}"
    given = np.asarray(baseline, dtype=np.float32)
    if given.shape not in ((e.shape[1],), (t, e.shape[1])):
        raise ValueError(f"baseline embeddings must be (d_model,) or (T, d_model) with T = {t}")
    return np.broadcast_to(given, (t, e.shape[1])).copy(), "given embeddings"


def _saliency(model: DecoderFiles, ids: np.ndarray, method: str, target: int, contrast: int | None,
              attribution: np.ndarray, f_x: float, f_baseline: float, steps: int, baseline: str) -> Saliency:
    signed = attribution.sum(axis=-1)  # (T,) float64
    return Saliency(tokens=tuple(model.vocabulary[i] for i in ids), ids=ids, method=method, target=target,
                    contrast=contrast, signed=signed, norm=np.sqrt((attribution * attribution).sum(axis=-1)),
                    f_x=float(f_x), f_baseline=float(f_baseline), steps=steps, baseline=baseline,
                    completeness_error=float(abs(signed.sum() - (f_x - f_baseline))))


def gradient_x_input(model: DecoderFiles, ids: np.ndarray | Sequence[int], target: int, contrast: int | None = None,
                     heads_off: frozenset[tuple[int, int]] = frozenset()) -> Saliency:
    """aₜ = xₜ ⊙ ∂f/∂xₜ at x = E[ids]; the completeness error is measured against f(0), the zero embeddings'."""
    ids = np.asarray(ids, dtype=np.int64)
    f_x, grad = input_gradient(model, ids, target, contrast, heads_off)  # (), (T, d_model)
    attribution = model.weights.embedding[ids].astype(np.float64) * grad  # (T, d_model)
    return _saliency(model, ids, "gradient_x_input", target, contrast, attribution, f_x,
                     value_at_zero(model, contrast), 1, "zero")


def integrated_gradients(model: DecoderFiles, ids: np.ndarray | Sequence[int], target: int,
                         contrast: int | None = None, steps: int = DEFAULT_STEPS,
                         baseline: Baseline = DEFAULT_BASELINE,
                         heads_off: frozenset[tuple[int, int]] = frozenset(),
                         progress: Progress | None = None) -> Saliency:
    """aₜ = (xₜ − x′ₜ) ⊙ mean over k of ∂f/∂xₜ at x′ + αₖ·(x − x′), αₖ = (k − ½)/n: the midpoint rule, n = steps
    (1 … MAX_STEPS), the path's points batched. ``progress(done, steps)`` is told as steps finish."""
    if not 1 <= steps <= MAX_STEPS:
        raise ValueError(f"steps must be in 1 … {MAX_STEPS}")
    ids = np.asarray(ids, dtype=np.int64)
    _check(model, ids, target, contrast)
    x = model.weights.embedding[ids]  # (T, d_model)
    x_base, name = baseline_embeddings(model, ids, baseline)  # (T, d_model)
    diff = x - x_base  # (T, d_model)
    alphas = (np.arange(1, steps + 1, dtype=np.float32) - np.float32(0.5)) / np.float32(steps)  # (n,)
    path = x_base[None] + alphas[:, None, None] * diff[None]  # (n, T, d_model)
    _, grads = input_gradient(model, ids, target, contrast, heads_off, embeddings=path, progress=progress)
    attribution = diff.astype(np.float64) * grads.mean(axis=0, dtype=np.float64)  # (T, d_model)
    f_x, f_base = evaluate(model, np.stack([x, x_base]), target, contrast, heads_off)  # the two ends
    return _saliency(model, ids, "integrated_gradients", target, contrast, attribution, f_x, f_base, steps, name)
