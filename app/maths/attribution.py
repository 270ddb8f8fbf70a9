"""Why the language model answered what it did: direct logit attribution (each head's, each feed-forward block's
and the embedding's share of a token's logit, adding up to it), attention rollout, and a head's queries and keys
projected to one picture.

Direct logit attribution (Elhage et al., 2021, "A Mathematical Framework for Transformer Circuits";
TransformerLens's ``logit_attrs``), exactly, on SmolLM2.

The residual stream at the last position is a sum: the token's embedding, then what each layer's attention and
feed-forward block added,

    x_N = e + Σ_l ( Σ_i headᵢˡ·W_Oⁱ  +  FFN_l )                             (d_model,); W_Oⁱ: head i's rows of W_O

and the next token's logit reads it through the final RMSNorm and the tied unembedding:

    logit(y) = (x_N / r) · (g ⊙ E[y]),   r = √(mean(x_N²) + ε)               the run's own scale r, held fixed

so with r fixed every part's share, part · (g ⊙ E[y]) / r, adds up to the logit exactly (up to float32 rounding).
"Why y and not y′" reads every part against E[y] − E[y′]: the parts add up to logit(y) − logit(y′). A share is what
the part writes directly towards the token; a head can also matter by what later layers read from it, which
this does not count (activation patching measures that).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from app.maths.attention import attend
from app.maths.decoder_files import DecoderFiles
from app.maths.llama import DecoderRun, rms_norm
from app.maths.positions import rope_rotate
from app.maths.real_model import heads_in


@dataclass(frozen=True)
class LogitAttribution:
    """Each part of the residual stream's share of logit(target) (− logit(contrast) when there is one)."""

    target: int
    contrast: int | None
    logit: float  # logit(target) − logit(contrast), from the run's forward pass
    scale: float  # r = √(mean(x_N²) + ε), the final RMSNorm's divisor at the last position
    embedding: float  # the token's own embedding's share
    heads: np.ndarray  # (N, h): each head's share
    mlp: np.ndarray  # (N,): each feed-forward block's share

    @property
    def total(self) -> float:
        """The parts added up: the logit, within float32 rounding."""
        return float(self.embedding + self.heads.sum() + self.mlp.sum())


def residual_parts(model: DecoderFiles, run: DecoderRun) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The last position's residual stream split into what wrote it: the embedding (d_model,), each head's
    headᵢ·W_Oⁱ (N, h, d_model) and each feed-forward block's output (N, d_model). They add up to x_N.

    Only the last query is worked again, against the run's own keys and values (its KV cache): the last token
    sees every token, so no mask."""
    cfg = model.config
    hidden = run.hidden_states  # (N + 1, T, d_model)
    t = hidden.shape[1]
    heads_out = np.empty((cfg.layers, cfg.heads, cfg.d_model), dtype=np.float32)
    mlp_out = np.empty((cfg.layers, cfg.d_model), dtype=np.float32)
    for layer in range(cfg.layers):
        lw = model.weights.layers[layer]
        x_hat = rms_norm(hidden[layer, -1:], lw.attn_norm, cfg.eps)  # (1, d_model)
        q = rope_rotate(x_hat @ lw.w_q, base=cfg.rope_base, start=t - 1)  # (h, 1, d_k)
        k = np.repeat(run.cache.k[layer], cfg.group, axis=0)  # (h, T, d_k): after RoPE
        v = np.repeat(run.cache.v[layer], cfg.group, axis=0)  # (h, T, d_k)
        _, _, weights, output = attend(q @ k.transpose(0, 2, 1), v, divisor=math.sqrt(cfg.d_k))  # (h, 1, d_k)
        off = heads_in(run.heads_off, layer)
        if off:  # a head switched off writes nothing
            output = output.copy()
            output[off] = 0.0
        w_o = lw.w_o.reshape(cfg.heads, cfg.d_k, cfg.d_model)  # (h, d_k, d_model): W_O's rows per head
        heads_out[layer] = np.einsum("hk,hkd->hd", output[:, 0, :], w_o)  # (h, d_model)
        attention = heads_out[layer].sum(axis=0)  # (d_model,) Concat·W_O, head by head
        mlp_out[layer] = hidden[layer + 1, -1] - hidden[layer, -1] - attention  # what the FFN added after it
    return hidden[0, -1], heads_out, mlp_out


def logit_attribution(model: DecoderFiles, run: DecoderRun, target: int,
                      contrast: int | None = None) -> LogitAttribution:
    """Every part's direct share of logit(target), or of logit(target) − logit(contrast)."""
    cfg, w = model.config, model.weights
    x_n = run.hidden_states[-1, -1].astype(np.float64)  # (d_model,)
    scale = float(np.sqrt(np.mean(x_n * x_n) + cfg.eps))
    direction = w.embedding[target].astype(np.float64)  # (d_model,): E[y], the tied unembedding's row
    if contrast is not None:
        direction = direction - w.embedding[contrast]
    read = w.final_norm.astype(np.float64) * direction / scale  # (d_model,): g ⊙ (E[y] − E[y′]) / r
    embedding, heads, mlp = residual_parts(model, run)
    logit = float(run.logits[target] - (run.logits[contrast] if contrast is not None else 0.0))
    return LogitAttribution(target=target, contrast=contrast, logit=logit, scale=scale,
                            embedding=float(embedding.astype(np.float64) @ read),
                            heads=heads.astype(np.float64) @ read, mlp=mlp.astype(np.float64) @ read)


def attention_rollout(attention: np.ndarray) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema, 2020, "Quantifying Attention Flow in Transformers"): per layer the
    heads' mean attention with the residual added as the identity, Â = 0.5·mean_h(A) + 0.5·I, rows normalised,
    multiplied from the first layer up: R = Â_N ⋯ Â_2·Â_1, (T, T); row i is how much of token i's last-layer
    row flows, on this rule, from each input token. It assumes that a layer mixes its tokens only through the
    heads' weights, and that the residual stream carries half of each row: a picture of where information can
    flow, not a measure of what the model uses. ``attention`` is (N, h, T, T)."""
    a = np.asarray(attention, dtype=np.float64).mean(axis=1)  # (N, T, T)
    t = a.shape[-1]
    rolled = np.eye(t)
    for layer in a:
        mixed = 0.5 * layer + 0.5 * np.eye(t)
        mixed /= mixed.sum(axis=-1, keepdims=True)
        rolled = mixed @ rolled
    return rolled


def qk_map(q: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Queries and keys in one picture (AttentionViz, Yeh et al., 2023): the rows of q (T, d_k) and k (S, d_k)
    projected to 2-D by one PCA fitted on both together — centred on their joint mean, the two directions of
    largest variance (the SVD's first right singular vectors, each signed so that its largest loading is
    positive). Returns the queries' points (T, 2), the keys' points (S, 2), and the share of the variance each
    direction explains (2,)."""
    both = np.concatenate([q, k]).astype(np.float64)  # (T + S, d_k)
    centred = both - both.mean(axis=0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    axes = vt[:2]  # (2, d_k)
    axes = axes * np.sign(axes[np.arange(2), np.argmax(np.abs(axes), axis=1)])[:, None]
    points = centred @ axes.T  # (T + S, 2)
    explained = s[:2] ** 2 / max(float((s**2).sum()), np.finfo(float).tiny)
    return points[: len(q)], points[len(q) :], explained
