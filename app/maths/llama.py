"""A pretrained Llama decoder's forward pass (SmolLM2-135M-Instruct), on the pipeline's own attention maths.

Llama (Touvron et al., 2023), as Hugging Face's ``LlamaForCausalLM`` computes it in inference, token m at
position m (0-based):

    x   = E[ids]                                                              (T, d_model)
    for each of the N layers:
        x̂   = RMSNorm(x) = x / √(mean(x²) + ε) ⊙ g                            (T, d_model)
        Qᵢ = RoPE(x̂·W_Qⁱ),  K_g = RoPE(x̂·W_Kᵍ),  V_g = x̂·W_Vᵍ                  (T, d_k); g = i // (h / h_kv)
        headᵢ = softmax(Qᵢ·K_gᵀ / √d_k, −∞ above the diagonal)·V_g              (app.maths.attention.attend)
        x   = x + Concat(head₁ … head_h)·W_O
        x   = x + (SiLU(RMSNorm(x)·W_gate) ⊙ RMSNorm(x)·W_up)·W_down             (SwiGLU)
    logits = RMSNorm(x)·Eᵀ                                                    (the LM head, tied to E)

RoPE turns pair i of a query or key at position m by m·θᵢ, θᵢ = base^(−2i/d_k) (app.maths.positions); the
causal mask (app.maths.masks) hides every later token; h query heads share h_kv key/value heads
(grouped-query attention). A KV cache keeps every layer's rotated keys and values, so that each new token
costs one token's forward pass. Computed in float32, the weights' own precision, as PyTorch does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from app.maths.attention import attend, concat_heads
from app.maths.decoder_files import SMOLLM2_135M, DecoderConfig, DecoderFiles
from app.maths.masks import causal_mask
from app.maths.positions import rope_rotate
from app.maths.real_model import Tokenized, heads_in
from app.maths.records import AttentionRun, HeadResult, Progress, Weights


@dataclass(frozen=True)
class KVCache:
    """Every layer's keys (after RoPE) and values of the tokens read so far."""

    k: tuple[np.ndarray, ...] = ()  # N × (h_kv, S, d_k)
    v: tuple[np.ndarray, ...] = ()  # N × (h_kv, S, d_k)

    @property
    def length(self) -> int:
        return int(self.k[0].shape[1]) if self.k else 0


@dataclass(frozen=True)
class DecoderHeads:
    """One layer's grouped-query attention over the new tokens, every query head at once (h first)."""

    x: np.ndarray  # (T, d_model)  RMSNorm(x), the heads' input
    q_pre: np.ndarray  # (h, T, d_k)  x̂·W_Q, before RoPE
    k_pre: np.ndarray  # (h_kv, T, d_k)  x̂·W_K, before RoPE
    q: np.ndarray  # (h, T, d_k)  after RoPE
    k: np.ndarray  # (h_kv, S, d_k)  after RoPE, the cache's keys first
    v: np.ndarray  # (h_kv, S, d_k)
    scores: np.ndarray  # (h, T, S)  Q·Kᵀ
    scaled: np.ndarray  # (h, T, S)  ÷ √d_k
    masked: np.ndarray  # (h, T, S)  −∞ where a key comes later
    weights: np.ndarray  # (h, T, S)  softmax, 0 for a head switched off
    output: np.ndarray  # (h, T, d_k)  weights·V

    @property
    def concat(self) -> np.ndarray:
        """Concat(head₁ … head_h), (T, h·d_k)."""
        return concat_heads(self.output)


@dataclass(frozen=True)
class DecoderRun:
    """The decoder on a text: what each layer took in and gave out, every head's weights, the next token's logits."""

    tokens: tuple[str, ...]
    ids: np.ndarray  # (T,)
    hidden_states: np.ndarray  # (N + 1, T, d_model): the embeddings, then each layer's output (before the final norm)
    attention: np.ndarray  # (N, h, T, T): every head's softmax weights (rows: queries), 0 above the diagonal
    logits: np.ndarray  # (vocab,) the last position's: the next token's scores
    cache: KVCache = field(repr=False, default_factory=KVCache)
    heads_off: frozenset[tuple[int, int]] = frozenset()  # (layer, head) switched off

    @property
    def layers(self) -> int:
        return int(self.attention.shape[0])

    @property
    def heads(self) -> int:
        return int(self.attention.shape[1])


def rms_norm(x: np.ndarray, gain: np.ndarray, eps: float) -> np.ndarray:
    """RMSNorm(x) = x / √(mean(x²) + ε) ⊙ g, over each row (Zhang & Sennrich, 2019): no mean taken away, no bias."""
    mean_square = np.mean(x * x, axis=-1, keepdims=True)  # (..., 1)
    return (x / np.sqrt(mean_square + np.float32(eps))) * gain  # (..., d_model)


def silu(x: np.ndarray) -> np.ndarray:
    """SiLU(x) = x·σ(x), with σ(x) = ½(1 + tanh(x/2)): no exp to overflow for very negative x."""
    return x * (np.float32(0.5) * (np.float32(1.0) + np.tanh(np.float32(0.5) * x)))


def swiglu(model: DecoderFiles, layer: int, x: np.ndarray) -> np.ndarray:
    """FFN(x̂) = (SiLU(x̂·W_gate) ⊙ x̂·W_up)·W_down (Shazeer, 2020), (T, d_model)."""
    lw = model.weights.layers[layer]
    return (silu(x @ lw.w_gate) * (x @ lw.w_up)) @ lw.w_down  # (T, d_ff) → (T, d_model)


def decoder_heads(model: DecoderFiles, layer: int, x: np.ndarray, cache: KVCache,
                off: Iterable[int] = ()) -> DecoderHeads:
    """headᵢ = softmax(RoPE(x̂·W_Qⁱ)·RoPE(x̂·W_Kᵍ)ᵀ / √d_k, causal)·x̂·W_Vᵍ for every query head i of ``layer``,
    the new tokens at positions S₀ … S₀ + T − 1 after the S₀ the cache holds."""
    cfg, lw = model.config, model.weights.layers[layer]
    start = cache.length
    x_hat = rms_norm(x, lw.attn_norm, cfg.eps)  # (T, d_model)
    q_pre = x_hat @ lw.w_q  # (h, T, d_k)
    k_pre = x_hat @ lw.w_k  # (h_kv, T, d_k)
    v_new = x_hat @ lw.w_v  # (h_kv, T, d_k)
    q = rope_rotate(q_pre, base=cfg.rope_base, start=start)  # (h, T, d_k)
    k_new = rope_rotate(k_pre, base=cfg.rope_base, start=start)  # (h_kv, T, d_k)
    k = np.concatenate([cache.k[layer], k_new], axis=1) if start else k_new  # (h_kv, S, d_k)
    v = np.concatenate([cache.v[layer], v_new], axis=1) if start else v_new  # (h_kv, S, d_k)
    k_shared = np.repeat(k, cfg.group, axis=0)  # (h, S, d_k): query head i reads key head i // group
    v_shared = np.repeat(v, cfg.group, axis=0)  # (h, S, d_k)
    scores = q @ k_shared.transpose(0, 2, 1)  # (h, T, S)
    t, s = scores.shape[-2:]
    scaled, masked, weights, output = attend(scores, v_shared, divisor=math.sqrt(cfg.d_k),
                                             mask=causal_mask(t, s, offset=start))  # (h, T, S) ×3, (h, T, d_k)
    off = list(off)
    if off:  # a head switched off: its weights times 0, so its slice of the concatenation is 0
        weights = weights.copy()
        weights[off] = 0.0
        output = weights @ v_shared  # (h, T, d_k)
    return DecoderHeads(x=x_hat, q_pre=q_pre, k_pre=k_pre, q=q, k=k, v=v, scores=scores, scaled=scaled,
                        masked=masked, weights=weights, output=output)


def decoder_layer(model: DecoderFiles, layer: int, x: np.ndarray, cache: KVCache,
                  off: Iterable[int] = ()) -> tuple[np.ndarray, DecoderHeads]:
    """One decoder layer, pre-norm: x + Attention(RMSNorm(x)), then x + SwiGLU(RMSNorm(x))."""
    lw, eps = model.weights.layers[layer], model.config.eps
    heads = decoder_heads(model, layer, x, cache, off)
    x = x + heads.concat @ lw.w_o  # (T, d_model)
    x = x + swiglu(model, layer, rms_norm(x, lw.ffn_norm, eps))  # (T, d_model)
    return x, heads


def final_logits(model: DecoderFiles, x: np.ndarray) -> np.ndarray:
    """logits = RMSNorm(x)·Eᵀ: the LM head, tied to the embeddings; (..., vocab) from (..., d_model)."""
    return rms_norm(x, model.weights.final_norm, model.config.eps) @ model.weights.embedding.T


def tokenize(model: DecoderFiles, text: str) -> Tokenized:
    """The text as the model reads it: byte-level BPE pieces ("Ġ" is a space) and their ids, no BOS."""
    encoding = model.tokenizer.encode(text, add_special_tokens=False)
    return Tokenized(text=text, tokens=tuple(encoding.tokens), ids=np.asarray(encoding.ids, dtype=np.int64))


def extend(model: DecoderFiles, ids: np.ndarray, cache: KVCache = KVCache(),
           heads_off: frozenset[tuple[int, int]] = frozenset(),
           progress: Progress | None = None) -> tuple[np.ndarray, list[DecoderHeads], KVCache]:
    """The new tokens ``ids`` through every layer after the cache's tokens: each layer's output for them
    ((N + 1, T, d_model), the embeddings first), each layer's heads, and the cache grown by them.
    ``progress(done, layers)`` is told after each layer."""
    x = model.weights.embedding[ids]  # (T, d_model)
    hidden, heads_of, ks, vs = [x], [], [], []
    layers = model.config.layers
    for layer in range(layers):
        x, heads = decoder_layer(model, layer, x, cache, heads_in(heads_off, layer))
        hidden.append(x)
        heads_of.append(heads)
        ks.append(heads.k)
        vs.append(heads.v)
        if progress is not None:
            progress(layer + 1, layers)
    return np.stack(hidden), heads_of, KVCache(k=tuple(ks), v=tuple(vs))


def run_decoder(model: DecoderFiles, text: str, heads_off: frozenset[tuple[int, int]] = frozenset(),
                progress: Progress | None = None) -> DecoderRun:
    """The decoder on a text: every layer's output, every head's attention, the next token's logits."""
    read = tokenize(model, text)
    tokens, ids = read.tokens, read.ids
    if not len(ids):
        raise ValueError("text must hold at least one token")
    hidden, heads, cache = extend(model, ids, KVCache(), heads_off, progress)
    return DecoderRun(tokens=tokens, ids=ids, hidden_states=hidden,
                      attention=np.stack([h.weights for h in heads]), logits=final_logits(model, hidden[-1, -1]),
                      cache=cache, heads_off=heads_off)


def head_at(model: DecoderFiles, run: DecoderRun, layer: int) -> DecoderHeads:
    """One layer's heads on the whole text again, from the layer's input, every intermediate kept."""
    return decoder_heads(model, layer, run.hidden_states[layer], KVCache(), heads_in(run.heads_off, layer))


def decoder_operations(t: int, passes: int = 1, cfg: DecoderConfig = SMOLLM2_135M) -> int:
    """A forward pass's multiply-adds, for the lanes: per layer T·d·(2·d + 2·d·h_kv/h) (Q, O; K, V), 2·T²·d
    (scores, A·V) and 3·T·d·d_ff (the SwiGLU); and the LM head's T·d·vocab for the logits and the lens."""
    d, d_kv = cfg.d_model, cfg.d_k * cfg.kv_heads
    per_layer = t * d * (2 * d + 2 * d_kv) + 2 * t * t * d + 3 * t * d * cfg.d_ff
    return passes * (cfg.layers * per_layer) + (cfg.layers + 1) * d * cfg.vocab


def lens(model: DecoderFiles, hidden: np.ndarray, chunk: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """The logit lens (nostalgebraist, 2020): each row of ``hidden`` (..., d_model) read through the final
    RMSNorm and the LM head as if it were the last layer's. Returns the top token's id and probability, (...)."""
    rows = hidden.reshape(-1, hidden.shape[-1])  # (R, d_model)
    ids = np.empty(len(rows), dtype=np.int64)
    probs = np.empty(len(rows), dtype=np.float64)
    for i in range(0, len(rows), chunk):  # a chunk's logits are chunk × vocab floats (12 MB for 64 rows)
        logits = final_logits(model, rows[i : i + chunk])  # (chunk, vocab)
        top = logits.max(axis=-1, keepdims=True)  # (chunk, 1)
        ids[i : i + chunk] = logits.argmax(axis=-1)
        probs[i : i + chunk] = 1.0 / np.exp(logits - top).sum(axis=-1)  # the top's softmax: e⁰ / Σ e^(l − max)
    return ids.reshape(hidden.shape[:-1]), probs.reshape(hidden.shape[:-1])


class DecoderContinuation:
    """The language model part-way through a text, for app.maths.sampling.generate: the text read through every
    layer once, then one token's forward pass through the KV cache for each token written."""

    def __init__(self, model: DecoderFiles, ids: np.ndarray,
                 heads_off: frozenset[tuple[int, int]] = frozenset()) -> None:
        self.model, self.heads_off, self.eos_id = model, heads_off, model.eos_id
        hidden, _, self.cache = extend(model, np.asarray(ids, dtype=np.int64), KVCache(), heads_off)
        self._logits = final_logits(model, hidden[-1, -1])  # (vocab,)

    def logits(self) -> np.ndarray:
        return self._logits

    def read(self, token: int) -> None:
        hidden, _, self.cache = extend(self.model, np.array([token], dtype=np.int64), self.cache, self.heads_off)
        self._logits = final_logits(self.model, hidden[-1, -1])


def layer_attention_run(model: DecoderFiles, run: DecoderRun, layer: int) -> AttentionRun:
    """One layer's attention as the page's pipeline records it, for the cell inspector: X is the heads' input
    RMSNorm(x); each query head with the key/value head it shares (RoPE's q_rot, k_rot), under the causal mask."""
    cfg, lw = model.config, model.weights.layers[layer]
    heads = head_at(model, run, layer)
    g = [cfg.kv_head(i) for i in range(cfg.heads)]
    k_pre = np.repeat(heads.k_pre, cfg.group, axis=0)  # (h, T, d_k)
    results = tuple(HeadResult(q=heads.q_pre[i], k=k_pre[i], v=heads.v[g[i]], scores=heads.scores[i],
                               scaled=heads.scaled[i], masked=heads.masked[i], softmax=heads.weights[i],
                               output=heads.output[i], q_rot=heads.q[i], k_rot=heads.k[g[i]])
                    for i in range(cfg.heads))
    h, d_k = cfg.heads, cfg.d_k
    empty = np.zeros((h, d_k, 0), dtype=np.float32)
    weights = Weights(w_q=lw.w_q, w_k=np.repeat(lw.w_k, cfg.group, axis=0), w_v=np.repeat(lw.w_v, cfg.group, axis=0),
                      w_o=lw.w_o, w_a=np.zeros((h, d_k, d_k), dtype=np.float32), w_1=empty, w_2=empty,
                      v_a=np.zeros((h, 0), dtype=np.float32))
    concat = heads.concat  # (T, h·d_k)
    t = concat.shape[0]
    return AttentionRun(x=heads.x, heads=results, concat=concat, output=concat @ lw.w_o, weights=weights, d_k=d_k,
                        d_v=d_k, scale=True, positional_encoding="rope", mask=causal_mask(t), mask_mode="causal")
