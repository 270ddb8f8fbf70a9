"""The backward pass of multi-head attention, the losses that start it, and training steps.

Pure NumPy and the standard library, like app.maths.attention: nothing from the web layer is imported here.
:func:`backward` takes the record :func:`run_attention` returned and ∂L/∂output (or ∂L/∂A of some
heads, or both) and walks the forward's stages in reverse, 6) down to 0), naming every gradient.

Notation: row vectors as in the forward (Q = X·W_Q), ∂L/∂Y has the shape of Y and is written ``d_y``
in the code. T queries, S keys (S = T in self-attention), ``h`` heads of size ``d_k``, ``d_v``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from app.maths.attention import log_elu_plus_one, run_attention, softmax_rows
from app.maths.positions import rope_rotate, rotates
from app.maths.records import AttentionRun, LinearAttention, Weights
from app.maths.weights import ALL_WEIGHT_NAMES


@dataclass(frozen=True)
class HeadGradients:
    """∂L/∂ each intermediate of one head, each the shape of what it differentiates."""

    output: np.ndarray  # (T, d_v) ∂L/∂(A·V)
    softmax: np.ndarray | None  # (T, S) ∂L/∂A, exactly 0 at hidden keys; None with linear attention
    scaled: np.ndarray | None  # (T, S) ∂L/∂scaled, exactly 0 at hidden keys; None with linear attention
    scores: np.ndarray | None  # (T, S) ∂L/∂scores, exactly 0 at hidden keys; None with linear attention
    q: np.ndarray  # (T, d_k) ∂L/∂Q, before RoPE's rotation
    k: np.ndarray  # (S, d_k) ∂L/∂K, before RoPE's rotation
    v: np.ndarray  # (S, d_v) ∂L/∂V


@dataclass(frozen=True)
class WeightGradients:
    """∂L/∂ each weight; a score function's own weights only when that score is used."""

    w_q: np.ndarray  # (h, d_model, d_k)
    w_k: np.ndarray  # (h, d_model, d_k)
    w_v: np.ndarray  # (h, d_model, d_v)
    w_o: np.ndarray  # (h·d_v, d_model)
    w_a: np.ndarray | None = None  # (h, d_k, d_k)  "general" score only
    w_1: np.ndarray | None = None  # (h, d_k, d_a)  "additive" score only
    w_2: np.ndarray | None = None  # (h, d_k, d_a)
    v_a: np.ndarray | None = None  # (h, d_a)


@dataclass(frozen=True)
class Gradients:
    """Every gradient of one backward pass, from the output back to the inputs."""

    output: np.ndarray  # (T, d_model) ∂L/∂output, where the pass starts
    concat: np.ndarray  # (T, h·d_v)
    heads: tuple[HeadGradients, ...]  # h entries
    x: np.ndarray  # (T, d_model) ∂L/∂X for the embeddings as given (before a positional encoding is added)
    context: np.ndarray | None  # (S, d_model) ∂L/∂C, cross-attention only
    weights: WeightGradients


def softmax_backward(a: np.ndarray, d_a: np.ndarray) -> np.ndarray:
    """∂L/∂s_ij = A_ij·(∂L/∂A_ij − Σ_k A_ik·∂L/∂A_ik), for A = softmax(s) row by row.

    That is ∂L/∂A times the softmax's Jacobian diag(A_i) − A_i·A_iᵀ, without building it.
    """
    return a * (d_a - (a * d_a).sum(axis=-1, keepdims=True))  # (..., T, S)


def rope_rotate_back(g: np.ndarray) -> np.ndarray:
    """The gradient through RoPE: its rotation by pos·θ_i is orthogonal, so ∂L/∂q = Rᵀ·∂L/∂q_rot,
    the rotation by −pos·θ_i: ∂L/∂q_2i = g_2i·cos + g_2i+1·sin, ∂L/∂q_2i+1 = −g_2i·sin + g_2i+1·cos.

    Computed with rope_rotate itself, so the pairs and angles are the forward's: negating the odd
    member of every pair (a reflection P) turns a rotation into its inverse, R(−α) = P·R(α)·P.
    """
    flip = np.ones(g.shape[-1])  # (d,)
    flip[1 : 2 * (g.shape[-1] // 2) : 2] = -1.0  # the odd member of each pair; an odd last dim stays
    return rope_rotate(g * flip) * flip  # (..., T, d)


def elu_plus_one_grad(x: np.ndarray) -> np.ndarray:
    """φ'(x) for φ(x) = elu(x) + 1: 1 for x > 0, exp(x) otherwise."""
    return np.where(x > 0, 1.0, np.exp(np.minimum(x, 0.0)))


def log_elu_plus_one_grad(x: np.ndarray) -> np.ndarray:
    """(log φ)'(x) = φ'(x)/φ(x): 1/(1 + x) for x > 0, 1 otherwise. Never underflows."""
    return np.where(x > 0, 1.0 / (1.0 + np.maximum(x, 0.0)), 1.0)


# Below this normaliser the factorised form would divide by almost nothing; the kernel form in log space is used.
_SAFE_Z = math.sqrt(np.finfo(np.float64).tiny)


def linear_attention_backward(
    lin: LinearAttention, q: np.ndarray, k: np.ndarray, v: np.ndarray, d_out: np.ndarray,
    mask: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(∂L/∂q, ∂L/∂k, ∂L/∂v) of one head of linear attention, q and k as φ saw them.

    Without a mask, through the factorised form output_i = num_i / z_i, num = φ(Q)·kv, z = φ(Q)·Σ_j φ(k_j),
    kv = φ(K)ᵀ·V, in O(T·d_k·d_v) like the forward:
        ∂L/∂num_i = ∂L/∂out_i / z_i,   ∂L/∂z_i = −∂L/∂out_i · out_i / z_i,
        ∂L/∂φ(Q) = ∂L/∂num·kvᵀ + ∂L/∂z·(Σ_j φ(k_j))ᵀ,   ∂L/∂kv = φ(Q)ᵀ·∂L/∂num,
        ∂L/∂φ(K) = V·∂L/∂kvᵀ + 1·(φ(Q)ᵀ·∂L/∂z)ᵀ,   ∂L/∂V = φ(K)·∂L/∂kv,   ∂L/∂q = ∂L/∂φ(Q) ⊙ φ'(q).
    With a mask (or a normaliser too small to divide by), through the weights w_ij = κ_ij / Σ_j' κ_ij',
    κ_ij = φ(q_i)·φ(k_j) (0 at a hidden key), in log space so that nothing underflows:
        ∂L/∂log κ_ij = w_ij·∂L/∂out_i·(v_j − out_i),   r_ijd = φ(q_i)_d·φ(k_j)_d / κ_ij,
        ∂L/∂q_id = (log φ)'(q_id)·Σ_j ∂L/∂log κ_ij·r_ijd,   ∂L/∂V = wᵀ·∂L/∂out.
    """
    out = lin.output  # (T, d_v)
    if mask is None and bool(np.all(lin.z >= _SAFE_Z)):
        d_num = d_out / lin.z[:, None]  # (T, d_v)
        d_z = -(d_out * out).sum(axis=1) / lin.z  # (T,)
        k_sum = lin.phi_k.sum(axis=0)  # (d_k,)
        d_phi_q = d_num @ lin.kv.T + d_z[:, None] * k_sum[None, :]  # (T, d_k)
        d_kv = lin.phi_q.T @ d_num  # (d_k, d_v)
        d_phi_k = v @ d_kv.T + (lin.phi_q.T @ d_z)[None, :]  # (S, d_k)
        d_v = lin.phi_k @ d_kv  # (S, d_v)
        return d_phi_q * elu_plus_one_grad(q), d_phi_k * elu_plus_one_grad(k), d_v
    w = lin.weights  # (T, S), 0 at hidden keys
    d_log_kernel = w * (d_out @ v.T - (d_out * out).sum(axis=1, keepdims=True))  # (T, S)
    r = softmax_rows(log_elu_plus_one(q)[:, None, :] + log_elu_plus_one(k)[None, :, :])  # (T, S, d_k)
    d_q = log_elu_plus_one_grad(q) * np.einsum("ts,tsd->td", d_log_kernel, r)  # (T, d_k)
    d_k = log_elu_plus_one_grad(k) * np.einsum("ts,tsd->sd", d_log_kernel, r)  # (S, d_k)
    return d_q, d_k, w.T @ d_out  # (S, d_v) last


def _stack(run: AttentionRun, name: str) -> np.ndarray:
    return np.stack([getattr(head, name) for head in run.heads])  # (h, …)


def _checked_d_output(run: AttentionRun, d_output: np.ndarray | None) -> np.ndarray:
    if d_output is None:
        return np.zeros_like(run.output)  # (T, d_model)
    d_out = np.asarray(d_output, dtype=np.float64)  # (T, d_model)
    if d_out.shape != run.output.shape:
        raise ValueError(f"d_output must have the output's shape {run.output.shape}, got {d_out.shape}")
    return d_out


def _checked_d_softmax(run: AttentionRun, d_softmax: Mapping[int, np.ndarray] | None) -> np.ndarray | None:
    """The gradients given on heads' weights A, as one (h, T, S) array (zeros for the other heads)."""
    if not d_softmax:
        return None
    if run.attention == "linear":
        raise ValueError("linear attention has no softmax weights A to take a gradient on")
    shape = run.heads[0].softmax.shape
    stacked = np.zeros((run.num_heads, *shape))  # (h, T, S)
    for head, d_a in d_softmax.items():
        if not 0 <= head < run.num_heads:
            raise ValueError(f"head {head} does not exist: the run has heads 0 to {run.num_heads - 1}")
        d_a = np.asarray(d_a, dtype=np.float64)  # (T, S)
        if d_a.shape != shape:
            raise ValueError(f"d_softmax[{head}] must have the weights' shape {shape}, got {d_a.shape}")
        stacked[head] += d_a
    return stacked


def backward(
    run: AttentionRun, d_output: np.ndarray | None = None, *, d_softmax: Mapping[int, np.ndarray] | None = None
) -> Gradients:
    """Every ∂L/∂·, given ∂L/∂output (T, d_model) and/or ∂L/∂A for some heads ({head: (T, S)}).

    Either may be left out (it counts as 0). The steps are the forward's, numbered as there, in reverse.
    A hidden key's weight is the constant exp(−∞) = 0, not a function of anything, so its entries of
    ∂L/∂A, ∂L/∂scaled and ∂L/∂scores are exactly 0.
    """
    d_out = _checked_d_output(run, d_output)  # (T, d_model)
    d_a_given = _checked_d_softmax(run, d_softmax)  # (h, T, S) or None
    t, h, d_v = run.x.shape[0], run.num_heads, run.d_v
    w = run.weights
    rope = rotates(run.positional_encoding)
    q_s = _stack(run, "q_rot" if rope else "q")  # (h, T, d_k) what the score function compared
    k_s = _stack(run, "k_rot" if rope else "k")  # (h, S, d_k)
    v = _stack(run, "v")  # (h, S, d_v)
    mask = run.mask  # (T, S) or None

    # 6) output = concat·W_O:  ∂L/∂W_O = concatᵀ·∂L/∂output,  ∂L/∂concat = ∂L/∂output·W_Oᵀ.
    d_w_o = run.concat.T @ d_out  # (h·d_v, d_model)
    d_concat = d_out @ w.w_o.T  # (T, h·d_v)
    d_head_out = d_concat.reshape(t, h, d_v).transpose(1, 0, 2)  # (h, T, d_v) the concat undone

    d_a = d_scaled = d_scores = None
    d_w_a = d_w_1 = d_w_2 = d_v_a = None
    if run.attention == "linear":
        # 5)–2) linear attention: q, k and v reach the output only through φ and the normaliser.
        parts = [linear_attention_backward(head.linear, q_s[i], k_s[i], v[i], d_head_out[i], mask)
                 for i, head in enumerate(run.heads)]
        # (h, T, d_k), (h, S, d_k), (h, S, d_v)
        d_q_s, d_k_s, d_v_heads = (np.stack(p) for p in zip(*parts, strict=True))
    else:
        a = _stack(run, "softmax")  # (h, T, S)
        # 5) head = A·V:  ∂L/∂A = ∂L/∂head·Vᵀ (plus any gradient given on A),  ∂L/∂V = Aᵀ·∂L/∂head.
        d_a = d_head_out @ v.swapaxes(-2, -1)  # (h, T, S)
        if d_a_given is not None:
            d_a = d_a + d_a_given  # (h, T, S)
        d_v_heads = a.swapaxes(-2, -1) @ d_head_out  # (h, S, d_v)
        # 4) A = softmax(masked), masked = scaled with −∞ at hidden keys: a hidden key gets exactly 0.
        if mask is not None:
            d_a = np.where(mask, 0.0, d_a)  # (h, T, S)
        d_scaled = softmax_backward(a, d_a)  # (h, T, S)
        if mask is not None:
            d_scaled = np.where(mask, 0.0, d_scaled)  # (h, T, S) +0.0, never −0.0
        # 3) scaled = scores / (√d_k·τ) + bias: ALiBi's bias is a constant, so only the divisor is left.
        d_scores = d_scaled / run.scale_factor  # (h, T, S)
        # 2) scores from the (rotated) queries and keys.
        if run.score == "dot":
            # scores = Q·Kᵀ:  ∂L/∂Q = ∂L/∂scores·K,  ∂L/∂K = ∂L/∂scoresᵀ·Q.
            d_q_s = d_scores @ k_s  # (h, T, d_k)
            d_k_s = d_scores.swapaxes(-2, -1) @ q_s  # (h, S, d_k)
        elif run.score == "general":
            # scores = (Q·W_a)·Kᵀ:  ∂L/∂(Q·W_a) = ∂L/∂scores·K,  ∂L/∂W_a = Qᵀ·∂L/∂(Q·W_a),  ∂L/∂Q = ∂L/∂(Q·W_a)·W_aᵀ.
            q_w = _stack(run, "q_w")  # (h, T, d_k)
            d_q_w = d_scores @ k_s  # (h, T, d_k)
            d_k_s = d_scores.swapaxes(-2, -1) @ q_w  # (h, S, d_k)
            d_w_a = q_s.swapaxes(-2, -1) @ d_q_w  # (h, d_k, d_k)
            d_q_s = d_q_w @ w.w_a.swapaxes(-2, -1)  # (h, T, d_k)
        else:
            # scores_ij = v_a·tanh(q_i·W₁ + k_j·W₂), row vectors:  with H_ij = tanh(…),
            # ∂L/∂v_a = Σ_ij ∂L/∂scores_ij·H_ij,  ∂L/∂pre_ij = ∂L/∂scores_ij·v_a ⊙ (1 − H_ij²),
            # ∂L/∂(Q·W₁)_i = Σ_j ∂L/∂pre_ij,  ∂L/∂(K·W₂)_j = Σ_i ∂L/∂pre_ij,  then W₁, W₂, Q, K as in a product.
            q_1, k_2 = _stack(run, "q_1"), _stack(run, "k_2")  # (h, T, d_a), (h, S, d_a)
            hidden = np.tanh(q_1[:, :, None, :] + k_2[:, None, :, :])  # (h, T, S, d_a)
            d_v_a = np.einsum("hts,htsa->ha", d_scores, hidden, optimize=True)  # (h, d_a)
            d_pre = 1.0 - hidden**2  # (h, T, S, d_a) tanh' = 1 − tanh², then times v_a and ∂L/∂scores in place
            d_pre *= w.v_a[:, None, None, :]
            d_pre *= d_scores[..., None]
            d_q_1, d_k_2 = d_pre.sum(axis=2), d_pre.sum(axis=1)  # (h, T, d_a), (h, S, d_a)
            d_w_1 = q_s.swapaxes(-2, -1) @ d_q_1  # (h, d_k, d_a)
            d_w_2 = k_s.swapaxes(-2, -1) @ d_k_2  # (h, d_k, d_a)
            d_q_s = d_q_1 @ w.w_1.swapaxes(-2, -1)  # (h, T, d_k)
            d_k_s = d_k_2 @ w.w_2.swapaxes(-2, -1)  # (h, S, d_k)

    # 1) RoPE's rotation, undone: the gradient of a rotation is the inverse rotation.
    d_q = rope_rotate_back(d_q_s) if rope else d_q_s  # (h, T, d_k)
    d_k = rope_rotate_back(d_k_s) if rope else d_k_s  # (h, S, d_k)
    # 1) Q = X·W_Q, K = C·W_K, V = C·W_V per head:  ∂L/∂W_Q = Xᵀ·∂L/∂Q,  ∂L/∂X = Σ_heads ∂L/∂Q·W_Qᵀ, …
    source = run.source  # (S, d_model)
    d_w_q = np.einsum("td,htk->hdk", run.x, d_q)  # (h, d_model, d_k)
    d_w_k = np.einsum("sd,hsk->hdk", source, d_k)  # (h, d_model, d_k)
    d_w_v = np.einsum("sd,hsv->hdv", source, d_v_heads)  # (h, d_model, d_v)
    d_x = np.einsum("htk,hdk->td", d_q, w.w_q)  # (T, d_model)
    d_source = np.einsum("hsk,hdk->sd", d_k, w.w_k) + np.einsum("hsv,hdv->sd", d_v_heads, w.w_v)  # (S, d_model)
    # 0) Positions: x = x_input + PE (and C = C_input + PE), so each passes its gradient on unchanged.
    d_context = None
    if run.context is None:
        d_x = d_x + d_source  # (T, d_model) self-attention: X gave the keys and values too
    else:
        d_context = d_source  # (S, d_model)

    heads = tuple(
        HeadGradients(
            output=d_head_out[i],
            softmax=None if d_a is None else d_a[i],
            scaled=None if d_scaled is None else d_scaled[i],
            scores=None if d_scores is None else d_scores[i],
            q=d_q[i], k=d_k[i], v=d_v_heads[i],
        )
        for i in range(h)
    )
    return Gradients(
        output=d_out, concat=d_concat, heads=heads, x=d_x, context=d_context,
        weights=WeightGradients(w_q=d_w_q, w_k=d_w_k, w_v=d_w_v, w_o=d_w_o,
                                w_a=d_w_a, w_1=d_w_1, w_2=d_w_2, v_a=d_v_a),
    )


# --- losses ---------------------------------------------------------------------------------------

LOSS_KINDS = ("mse", "attention")
TARGET_ROW_SUM_TOLERANCE = 1e-6


def mse_loss(output: np.ndarray, target: np.ndarray) -> tuple[float, np.ndarray]:
    """L = (1 / T·d_model)·Σ_ij (output_ij − target_ij)²,  ∂L/∂output = 2·(output − target) / (T·d_model)."""
    output = np.asarray(output, dtype=np.float64)  # (T, d_model)
    target = np.asarray(target, dtype=np.float64)  # (T, d_model)
    if target.shape != output.shape:
        raise ValueError(f"target must have the output's shape {output.shape}, got {target.shape}")
    if not np.all(np.isfinite(target)):
        raise ValueError("target must contain only finite numbers")
    diff = output - target  # (T, d_model)
    return float(np.mean(diff**2)), 2.0 * diff / diff.size


def check_attention_target(target: np.ndarray, shape: tuple[int, int], mask: np.ndarray | None) -> np.ndarray:
    """A target alignment: T×S, finite, no negative entry, each row summing to 1, no weight on a hidden key."""
    target = np.asarray(target, dtype=np.float64)  # (T, S)
    if target.shape != shape:
        raise ValueError(f"target must have the weights' shape {shape[0]}×{shape[1]}, got {target.shape}")
    if not np.all(np.isfinite(target)):
        raise ValueError("target must contain only finite numbers")
    if np.any(target < 0):
        i, j = np.argwhere(target < 0)[0]
        raise ValueError(f"target[{i}][{j}] is negative; a target row is a distribution over the keys")
    sums = target.sum(axis=1)  # (T,)
    off = np.abs(sums - 1.0) > TARGET_ROW_SUM_TOLERANCE
    if off.any():
        i = int(np.argmax(off))
        raise ValueError(f"target[{i}] sums to {sums[i]:.6g}; every target row must sum to 1")
    if mask is not None and np.any(mask & (target > 0)):
        i, j = np.argwhere(mask & (target > 0))[0]
        raise ValueError(f"target[{i}][{j}] puts weight on key {j}, which the mask hides from query {i}")
    return target


def attention_loss(run: AttentionRun, head: int, target: np.ndarray) -> tuple[float, np.ndarray]:
    """Cross-entropy of head ``head``'s weights A against a target alignment t (T, S):

        L = −(1/T)·Σ_i Σ_j t_ij·log A_ij,    ∂L/∂A_ij = −t_ij / (T·A_ij),

    an entry with t_ij = 0 contributing exactly 0 to both, even where A_ij = 0. Through the softmax,
    ∂L/∂scaled = (A − t)/T. log A is taken from the masked scores (log-softmax), so L stays finite where
    a weight underflowed to 0 (a score some 745 below its row's best); ∂L/∂A divides by the smallest
    positive float there instead of 0, so nothing becomes ∞ or NaN, but such a weight passes no gradient
    on through the softmax (A_ij·∂L/∂A_ij is 0, not −t_ij/T).
    """
    if run.attention == "linear":
        raise ValueError("the attention loss is defined on softmax weights; linear attention has none")
    if not 0 <= head < run.num_heads:
        raise ValueError(f"head {head} does not exist: the run has heads 0 to {run.num_heads - 1}")
    result = run.heads[head]
    a = result.softmax  # (T, S)
    target = check_attention_target(target, a.shape, run.mask)  # (T, S)
    top = result.masked.max(axis=1, keepdims=True)  # (T, 1)
    log_a = result.masked - top - np.log(np.exp(result.masked - top).sum(axis=1, keepdims=True))  # (T, S)
    used = target > 0  # (T, S)
    t = a.shape[0]
    loss = -float(np.sum(target[used] * log_a[used])) / t
    d_a = np.zeros_like(a)  # (T, S)
    d_a[used] = -target[used] / (t * np.maximum(a[used], np.finfo(np.float64).tiny))
    return loss, d_a


def _loss_and_seed(run: AttentionRun, loss_spec: Mapping) -> tuple[float, dict]:
    """The loss and the keyword arguments that start its backward pass."""
    kind = loss_spec.get("kind")
    if kind not in LOSS_KINDS:
        raise ValueError(f"loss kind must be one of {', '.join(LOSS_KINDS)}")
    if "target" not in loss_spec:
        raise ValueError("the loss needs a target")
    if kind == "mse":
        loss, d_output = mse_loss(run.output, loss_spec["target"])
        return loss, {"d_output": d_output}
    if "head" not in loss_spec:
        raise ValueError("the attention loss needs a head")
    head = int(loss_spec["head"])
    loss, d_a = attention_loss(run, head, loss_spec["target"])
    return loss, {"d_softmax": {head: d_a}}


def loss_and_gradients(run: AttentionRun, loss_spec: Mapping) -> tuple[float, Gradients]:
    """(L, every gradient) for ``{"kind": "mse", "target": (T, d_model)}`` or
    ``{"kind": "attention", "head": i, "target": (T, S)}``."""
    loss, seed = _loss_and_seed(run, loss_spec)
    return loss, backward(run, **seed)


# --- training -------------------------------------------------------------------------------------

OPTIMIZERS = ("sgd", "adam")
TRAINABLE = ALL_WEIGHT_NAMES + ("x",)
ADAM_BETA1 = 0.9  # decay of the mean of the gradients
ADAM_BETA2 = 0.999  # decay of the mean of their squares
ADAM_EPS = 1e-8  # keeps the step finite where a gradient has been 0


@dataclass(frozen=True)
class TrainingResult:
    losses: tuple[float, ...]  # steps + 1 values: before the first step … after the last
    weights: Weights  # after the last step
    x: np.ndarray  # (T, d_model) the input embeddings after the last step
    run: AttentionRun  # the forward pass with them, whose loss is losses[-1]


def _gradient_of(grads: Gradients, name: str) -> np.ndarray | None:
    return grads.x if name == "x" else getattr(grads.weights, name)


def descend(p: np.ndarray, g: np.ndarray, moments: dict[str, tuple[np.ndarray, np.ndarray]], name: str,
            step: int, optimizer: str, learning_rate: float) -> np.ndarray:
    """One step on parameter ``name``. SGD: p ← p − lr·g. Adam: m ← β₁m + (1 − β₁)g, v ← β₂v + (1 − β₂)g²,
    p ← p − lr·m̂ / (√v̂ + ε) with m̂ = m / (1 − β₁ᵗ), v̂ = v / (1 − β₂ᵗ); ``moments[name]`` holds (m, v)."""
    if optimizer == "sgd":
        return p - learning_rate * g
    if optimizer != "adam":
        raise ValueError("optimizer must be one of sgd, adam")
    m, v = moments[name]
    m = ADAM_BETA1 * m + (1.0 - ADAM_BETA1) * g
    v = ADAM_BETA2 * v + (1.0 - ADAM_BETA2) * g**2
    moments[name] = (m, v)
    m_hat, v_hat = m / (1.0 - ADAM_BETA1**step), v / (1.0 - ADAM_BETA2**step)
    return p - learning_rate * m_hat / (np.sqrt(v_hat) + ADAM_EPS)


def train(
    x: np.ndarray,
    run_kwargs: Mapping,
    loss_spec: Mapping,
    *,
    steps: int,
    optimizer: str = "sgd",
    learning_rate: float = 0.1,
    train: tuple[str, ...] = ("w_q", "w_k", "w_v", "w_o"),
) -> TrainingResult:
    """``steps`` steps of gradient descent on the parameters named in ``train`` (weights, or "x").

    SGD:   p ← p − lr·∂L/∂p.
    Adam:  m ← β₁·m + (1 − β₁)·g,  v ← β₂·v + (1 − β₂)·g²,  m̂ = m/(1 − β₁ᵗ),  v̂ = v/(1 − β₂ᵗ),
           p ← p − lr·m̂/(√v̂ + ε),  β₁ = 0.9, β₂ = 0.999, ε = 1e-8, no weight decay.
    ``run_kwargs`` are run_attention's (num_heads, seed, weights, mask, context, …); the weights it does
    not give are seeded once, then every step runs with all of them given. Nothing is changed in place.
    """
    if steps < 1:
        raise ValueError("steps must be at least 1")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}")
    if not (math.isfinite(learning_rate) and learning_rate > 0):
        raise ValueError("learning_rate must be a positive number")
    if not train or any(name not in TRAINABLE for name in train):
        raise ValueError(f"train must name some of {', '.join(TRAINABLE)}")
    kwargs = dict(run_kwargs)
    run = run_attention(x, **kwargs)
    weights = {name: getattr(run.weights, name) for name in ALL_WEIGHT_NAMES}
    params = {**weights, "x": run.x_input}
    moments = {name: (np.zeros_like(params[name]), np.zeros_like(params[name])) for name in train}

    losses = []
    for step in range(1, steps + 1):
        loss, grads = loss_and_gradients(run, loss_spec)
        losses.append(loss)
        for name in train:
            g = _gradient_of(grads, name)
            if g is None:
                raise ValueError(f"{name} is not used with the {run.score} score, so it cannot be trained")
            params[name] = descend(params[name], g, moments, name, step, optimizer, learning_rate)
        kwargs["weights"] = {name: params[name] for name in ALL_WEIGHT_NAMES}
        run = run_attention(params["x"], **kwargs)
    losses.append(_loss_and_seed(run, loss_spec)[0])
    return TrainingResult(losses=tuple(losses), weights=run.weights, x=params["x"], run=run)
