"""A pretrained BERT encoder's forward pass (all-MiniLM-L6-v2), on the pipeline's own attention maths.

BERT (Devlin et al., 2019), as Hugging Face's ``BertModel`` computes it in inference:

    E   = LayerNorm(word[ids] + position[0..T) + token_type[0])                    (ε = 1e-12)
    for each of the N layers, on its input X (T, d_model):
        Qᵢ = X·W_Qⁱ + b_Qⁱ,  Kᵢ = X·W_Kⁱ + b_Kⁱ,  Vᵢ = X·W_Vⁱ + b_Vⁱ                   (T, d_k)
        headᵢ = softmax(Qᵢ·Kᵢᵀ / √d_k)·Vᵢ                                          (app.maths.attention.attend)
        A   = LayerNorm(X + Concat(head₁ … head_h)·W_O + b_O)
        out = LayerNorm(A + GELU(A·W₁ + b₁)·W₂ + b₂)                                (exact GELU)
    embedding = normalise(mean of the last layer's rows)                           (sentence-transformers)

The embedding is what the model is for: sentences that mean alike get embeddings with a cosine
similarity near 1. ``heads_off`` zeroes heads' attention weights, as BertModel's ``head_mask`` does, to
see what a head does for that job. Computed in float32, the weights' own precision, as PyTorch does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from app.maths.attention import attend, concat_heads
from app.maths.blocks import layer_norm
from app.maths.model_files import MINILM_L6, BertConfig, BertLayerWeights, ModelFiles
from app.maths.real_model import Tokenized, heads_in
from app.maths.records import AttentionRun, HeadResult, Progress, Weights

SPECIAL_TOKENS = ("[CLS]", "[SEP]")


@dataclass(frozen=True)
class ModelRun:
    """Every layer of one sentence: what each layer took in and gave out, and every head's weights."""

    tokens: tuple[str, ...]
    ids: np.ndarray  # (T,)
    hidden_states: np.ndarray  # (N + 1, T, d_model): the embeddings' output, then each layer's
    attention: np.ndarray  # (N, h, T, T): softmax(Q·Kᵀ/√d_k) of every head of every layer
    embedding: np.ndarray  # (d_model,) the sentence's embedding, L2-normalised
    heads_off: frozenset[tuple[int, int]] = frozenset()  # (layer, head) switched off

    def off_in(self, layer: int) -> list[int]:
        """The heads of ``layer`` switched off."""
        return heads_in(self.heads_off, layer)

    @property
    def layers(self) -> int:
        return int(self.attention.shape[0])

    @property
    def heads(self) -> int:
        return int(self.attention.shape[1])


def tokenize(model: ModelFiles, text: str) -> Tokenized:
    """The sentence as the model reads it: lower-cased WordPiece between [CLS] and [SEP]."""
    encoding = model.tokenizer.encode(text)
    return Tokenized(text=text, tokens=tuple(encoding.tokens), ids=np.asarray(encoding.ids, dtype=np.int64))


def embed(model: ModelFiles, ids: np.ndarray) -> np.ndarray:
    """E = LayerNorm(word[ids] + position[0..T) + token_type[0]), (T, d_model)."""
    w = model.weights
    t = len(ids)
    summed = w.word[ids] + w.position[:t] + w.token_type[0]  # (T, d_model)
    return layer_norm(summed, w.ln_gamma, w.ln_beta, model.config.eps).output


@dataclass(frozen=True)
class LayerHeads:
    """One layer's multi-head self-attention, every head at once (h first)."""

    q: np.ndarray  # (h, T, d_k)  with biases
    k: np.ndarray  # (h, T, d_k)
    v: np.ndarray  # (h, T, d_k)
    scores: np.ndarray  # (h, T, T)  Q·Kᵀ
    scaled: np.ndarray  # (h, T, T)  ÷ √d_k
    weights: np.ndarray  # (h, T, T)  softmax, 0 for a head switched off
    output: np.ndarray  # (h, T, d_k) weights·V

    @property
    def concat(self) -> np.ndarray:
        """Concat(head₁ … head_h), (T, h·d_k)."""
        return concat_heads(self.output)

    def head(self, i: int) -> HeadResult:
        """Head i as the page's pipeline records a head (no mask: masked is scaled)."""
        return HeadResult(q=self.q[i], k=self.k[i], v=self.v[i], scores=self.scores[i], scaled=self.scaled[i],
                          masked=self.scaled[i], softmax=self.weights[i], output=self.output[i])


def encoder_heads(lw: BertLayerWeights, x: np.ndarray, off: Iterable[int] = ()) -> LayerHeads:
    """headᵢ = softmax((X·W_Qⁱ + b_Qⁱ)·(X·W_Kⁱ + b_Kⁱ)ᵀ / √d_k)·(X·W_Vⁱ + b_Vⁱ), for every head i."""
    q = x @ lw.w_q + lw.b_q[:, None, :]  # (h, T, d_k)
    k = x @ lw.w_k + lw.b_k[:, None, :]  # (h, T, d_k)
    v = x @ lw.w_v + lw.b_v[:, None, :]  # (h, T, d_k)
    scores = q @ k.transpose(0, 2, 1)  # (h, T, T)
    d_k = q.shape[-1]
    scaled, _, weights, output = attend(scores, v, divisor=math.sqrt(d_k))  # (h, T, T) ×2, (h, T, d_k)
    off = list(off)
    if off:  # BertModel's head_mask: the head's weights times 0
        weights = weights.copy()
        weights[off] = 0.0
        output = weights @ v  # (h, T, d_k)
    return LayerHeads(q=q, k=k, v=v, scores=scores, scaled=scaled, weights=weights, output=output)


def encoder_layer(model: ModelFiles, layer: int, x: np.ndarray,
                  off: Iterable[int] = ()) -> tuple[np.ndarray, LayerHeads]:
    """One encoder layer: attention, residual and LayerNorm; the FFN, residual and LayerNorm."""
    lw, eps = model.weights.layers[layer], model.config.eps
    heads = encoder_heads(lw, x, off)
    attended = layer_norm(x + heads.concat @ lw.w_o + lw.b_o, lw.ln1_gamma, lw.ln1_beta, eps).output  # (T, d_model)
    hidden = gelu(attended @ lw.ffn_w1 + lw.ffn_b1)  # (T, d_ff)
    out = layer_norm(attended + hidden @ lw.ffn_w2 + lw.ffn_b2, lw.ln2_gamma, lw.ln2_beta, eps).output
    return out, heads


# Numerical Recipes' erfc (W. H. Press et al., 3rd ed., §6.2.2, "erfcc"): a Chebyshev fit with a fractional
# error under 1.2e-7 everywhere, float32's own precision, in a dozen NumPy operations where math.erf is a
# Python call per number (12 ms for one sentence's FFN; app.maths.blocks.gelu keeps it for the float64 toy).
_ERFC = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587,
         -0.82215223, 0.17087277)


def erfc(x: np.ndarray) -> np.ndarray:
    """erfc(x) = 1 − erf(x), to a fractional error under 1.2e-7, in float64."""
    z = np.abs(x.astype(np.float64))
    t = 1.0 / (1.0 + 0.5 * z)
    poly = np.full_like(t, _ERFC[-1])
    for c in _ERFC[-2::-1]:
        poly = poly * t + c
    ans = t * np.exp(-z * z + poly)
    return np.where(x >= 0, ans, 2.0 - ans)


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU(x) = x·Φ(x) = ½·x·erfc(−x/√2): the exact form, to float32's precision, in x's dtype
    (erfc of −x keeps Φ's tiny values for very negative x, where 1 − ½·erfc(x/√2) cancels to 0)."""
    return (0.5 * x * erfc(-x / math.sqrt(2.0))).astype(x.dtype)


def sentence_embedding(last: np.ndarray) -> np.ndarray:
    """The mean of the last layer's rows, L2-normalised: sentence-transformers' pooling and Normalize."""
    mean = last.mean(axis=0)  # (d_model,)
    return mean / max(float(np.linalg.norm(mean)), 1e-12)


def run_model(model: ModelFiles, tokenized: Tokenized,
              heads_off: frozenset[tuple[int, int]] = frozenset(),
              progress: Progress | None = None) -> ModelRun:
    """The encoder on one sentence: every layer's output and every head's attention weights.
    ``progress(done, layers)`` is told after each layer."""
    x = embed(model, tokenized.ids)  # (T, d_model)
    hidden, attention = [x], []
    layers = model.config.layers
    for layer in range(layers):
        x, heads = encoder_layer(model, layer, x, heads_in(heads_off, layer))
        hidden.append(x)
        attention.append(heads.weights)
        if progress is not None:
            progress(layer + 1, layers)
    return ModelRun(tokens=tokenized.tokens, ids=tokenized.ids, hidden_states=np.stack(hidden),
                    attention=np.stack(attention), embedding=sentence_embedding(x), heads_off=heads_off)


def bert_operations(t: int, cfg: BertConfig = MINILM_L6) -> int:
    """A forward pass's multiply-adds, for the lanes: per layer 4·T·d² (Q, K, V, W_O), 2·T²·d (scores, A·V)
    and 2·T·d·d_ff (the FFN)."""
    d = cfg.d_model
    return cfg.layers * (4 * t * d * d + 2 * t * t * d + 2 * t * d * cfg.d_ff)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """cos(a, b) = a·b / (|a|·|b|)."""
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def head_result(model: ModelFiles, run: ModelRun, layer: int, head: int) -> HeadResult:
    """One head of one layer, every intermediate as the page's step-through shows it, from the layer's input."""
    return encoder_heads(model.weights.layers[layer], run.hidden_states[layer], run.off_in(layer)).head(head)


def layer_attention_run(model: ModelFiles, run: ModelRun, layer: int) -> AttentionRun:
    """One layer's multi-head attention as the page's pipeline records it: X (the layer's input), every
    head, the concatenation and Concat·W_O. BERT then adds b_O, the residual and a LayerNorm."""
    lw = model.weights.layers[layer]
    x = run.hidden_states[layer]  # (T, d_model)
    heads = encoder_heads(lw, x, run.off_in(layer))
    h, _, d_k = heads.q.shape
    empty = np.zeros((h, d_k, 0), dtype=x.dtype)
    weights = Weights(w_q=lw.w_q, w_k=lw.w_k, w_v=lw.w_v, w_o=lw.w_o, w_a=np.zeros((h, d_k, d_k), dtype=x.dtype),
                      w_1=empty, w_2=empty, v_a=np.zeros((h, 0), dtype=x.dtype))
    concat = heads.concat  # (T, h·d_k)
    return AttentionRun(x=x, heads=tuple(heads.head(i) for i in range(h)), concat=concat, output=concat @ lw.w_o,
                        weights=weights, d_k=d_k, d_v=d_k, scale=True)
