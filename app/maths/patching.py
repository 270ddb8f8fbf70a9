"""Activation patching: which activations carry the difference between two texts to the language model's answer.

Causal tracing (Meng et al., 2022, "Locating and Editing Factual Associations in GPT") and activation patching
(Wang et al., 2022, "Interpretability in the Wild"; TransformerLens's ``patching`` module), on SmolLM2.

Two texts of the same T tokens, clean ("The capital of France is") and corrupted ("The capital of Italy is").
y is the clean run's top next token (" Paris"), y′ the corrupted run's (" Rome"), and a run is scored at the last
position by

    m(run) = logit(y) − logit(y′)                                              the raw logit difference

A patched run is the corrupted run with one activation replaced by the clean run's, and everything after it
computed again. Its score is read on the scale the two runs set:

    patched = (m(patched run) − m(corrupted)) / (m(clean) − m(corrupted))      0: as corrupted, 1: as clean

Two maps, for layers l = 0 … N − 1 (0-based, as app.maths.llama counts them):

    residual[l, p]   the residual stream at the INPUT of layer l, row p: x_l = the embeddings E[ids] for l = 0,
                     layer l − 1's output otherwise (DecoderRun.hidden_states[l]; TransformerLens's
                     blocks.l.hook_resid_pre), before the layer's RMSNorm; then layers l … N − 1 run again.
    heads[l, i]      head i's output at layer l, headᵢ = softmax(QᵢK_gᵀ/√d_k, causal)·V_g at every position,
                     before W_O (its d_k columns of Concat(head₁ … head_h); TransformerLens's blocks.l.attn.hook_z);
                     then the rest of layer l (W_O, the SwiGLU) and layers l + 1 … N − 1 run again.

How it is computed, exactly (no approximation, only float32 rounding), at a fraction of one run per patch:

1) The clean and the corrupted runs once, every layer's input, every head's output and the corrupted run's KV
   cache kept. A patch at layer l starts from the corrupted run's x_l: nothing before layer l is computed again.
2) The mask is causal: a row at any layer depends only on the rows up to it. A patch at row p leaves rows < p as
   the corrupted run has them at every layer, so their keys and values are the corrupted run's cache and only
   rows p … T − 1 are computed. Rows before the first token where the two texts differ are the same in both runs:
   patching one of them is the corrupted run itself (0, not computed), and a head's patch changes only the rows
   from that token on. So is a head whose output is the same in both runs (a head switched off).
3) The N patches of one row p go through the layers together, one batch (B, T − p, d_model) that a new patch
   joins at its own layer; the N·h head patches likewise, h new ones at each layer. At each layer every row of
   every batch goes through each product (W_Q, W_K, W_V, W_O, the SwiGLU) at once; only the attention itself is
   worked batch by batch, each against its own shared rows.
4) Only the last position's y and y′ logits are read, so the last layer works only the last row's query, W_O and
   SwiGLU (every row's keys and values still feed it).

The cost is that of (T − p₀)·N(N + 1)/2·(h + (T − p₀ + 1)/2) rows through one layer, p₀ the first token where the
texts differ, at about 7 MFLOP a row: for T = 12 and p₀ = 0 some 600 GFLOP, which one core does in about 7 s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from app.maths.attention import masked_softmax
from app.maths.decoder_files import DecoderFiles
from app.maths.llama import KVCache, extend, final_logits, rms_norm, swiglu, tokenize
from app.maths.masks import causal_mask
from app.maths.positions import rope_rotate
from app.maths.real_model import Tokenized, heads_in
from app.maths.records import Progress

TextOrIds = str | Sequence[int] | np.ndarray
ROWS = 1024  # rows per product in finish_layer: a chunk's SwiGLU temporaries are ROWS × d_ff floats, 6 MB each


@dataclass(frozen=True)
class Patching:
    """Activation patching of a corrupted text by a clean one: the two runs' metrics and both maps."""

    clean_tokens: tuple[str, ...]
    corrupted_tokens: tuple[str, ...]
    target: int  # y, the clean run's top token unless given
    contrast: int  # y′, the corrupted run's top token unless given
    metric_clean: float  # m(clean) = logit(y) − logit(y′) at the last position, raw
    metric_corrupted: float  # m(corrupted), raw
    residual: np.ndarray  # (N, T) normalised: row p of layer l's input patched
    heads: np.ndarray  # (N, h) normalised: head i's output at layer l patched

    def normalise(self, metric: np.ndarray | float) -> np.ndarray:
        """(m − m(corrupted)) / (m(clean) − m(corrupted)): 0 as the corrupted run, 1 as the clean one."""
        return normalised(metric, self.metric_clean, self.metric_corrupted)


def normalised(metric: np.ndarray | float, clean: float, corrupted: float) -> np.ndarray:
    """(m − m(corrupted)) / (m(clean) − m(corrupted)), float64."""
    return (np.asarray(metric, dtype=np.float64) - corrupted) / (clean - corrupted)


def logit_difference(model: DecoderFiles, x: np.ndarray, target: int, contrast: int) -> np.ndarray:
    """m = logit(y) − logit(y′) of residual rows x (..., d_model) after the last layer: RMSNorm(x)·Eᵀ at the two
    tokens only (the LM head's other 49 150 columns are never needed). Float64, (...)."""
    two = rms_norm(x, model.weights.final_norm, model.config.eps) @ model.weights.embedding[[target, contrast]].T
    return two[..., 0].astype(np.float64) - two[..., 1]  # (...)


def heads_side_by_side(w: np.ndarray) -> np.ndarray:
    """A per-head projection (heads, d_model, d_k) as one matrix (d_model, heads·d_k): x̂·W for every head in one
    product, head g in columns g·d_k … (g + 1)·d_k − 1."""
    heads, d, d_k = w.shape
    return w.transpose(1, 0, 2).reshape(d, heads * d_k)


def finish_layer(model: DecoderFiles, layer: int, x: np.ndarray, concat: np.ndarray) -> np.ndarray:
    """The rest of a layer after its heads, row by row: x + Concat(head₁ … head_h)·W_O, then x + SwiGLU(RMSNorm(x)).
    x (R, d_model), concat (R, h·d_k); in chunks of ROWS rows, so that the SwiGLU's temporaries stay small."""
    lw, eps = model.weights.layers[layer], model.config.eps
    out = np.empty_like(x)  # (R, d_model)
    for i in range(0, len(x), ROWS):
        y = x[i : i + ROWS] + concat[i : i + ROWS] @ lw.w_o  # (rows, d_model)
        out[i : i + ROWS] = y + swiglu(model, layer, rms_norm(y, lw.ffn_norm, eps))
    return out


def grouped_attention(
    model: DecoderFiles, q: np.ndarray, k: np.ndarray, v: np.ndarray, first: int, off: list[int]
) -> np.ndarray:
    """headᵢ = softmax(Qᵢ·K_gᵀ/√d_k, causal)·V_g for B runs: q (B, h, T_q, d_k) the queries at positions first …,
    k and v (B, h_kv, S, d_k) every key and value from position 0. The h / h_kv query heads that share key head g
    are stacked as the rows of one product. Returns Concat(head₁ … head_h), (B·T_q, h·d_k)."""
    cfg = model.config
    b, h, t, d_k = q.shape
    s = k.shape[2]
    q_g = q.reshape(b, cfg.kv_heads, cfg.group * t, d_k)  # (B, h_kv, group·T_q, d_k): query head i reads key i // group
    scores = (q_g @ k.transpose(0, 1, 3, 2)).reshape(b, h, t, s)  # (B, h, T_q, S)
    _, weights = masked_softmax(scores / np.float32(math.sqrt(d_k)), causal_mask(t, s, offset=first))  # (B, h, T_q, S)
    if off:  # a head switched off: its weights times 0, so its output is 0
        weights[:, off] = 0.0
    output = (weights.reshape(b, cfg.kv_heads, cfg.group * t, s) @ v).reshape(b, h, t, d_k)  # (B, h, T_q, d_k)
    return output.transpose(0, 2, 1, 3).reshape(b * t, h * d_k)  # (B·T_q, h·d_k)


def batched_layer(
    model: DecoderFiles,
    layer: int,
    batches: Sequence[tuple[np.ndarray, int]],
    cache: KVCache,
    off: Iterable[int] = (),
    last_only: bool = False,
) -> list[np.ndarray]:
    """app.maths.llama.decoder_layer for many runs at once. Each batch (x, start) holds B runs that share their first
    ``start`` rows: x (B, T', d_model) is rows start … start + T' − 1 of each, and the rows before are read as keys
    and values from ``cache`` (one for all). Every row of every batch goes through each product together. Returns
    each batch's output at the same rows, or with ``last_only`` at each run's last row alone, (B, 1, d_model),
    whose query still reads every row's key and value."""
    cfg, lw = model.config, model.weights.layers[layer]
    h, h_kv, d_k, d = cfg.heads, cfg.kv_heads, cfg.d_k, cfg.d_model
    off = list(off)
    shapes = [x.shape[:2] for x, _ in batches]  # (B, T') of each
    ends = np.cumsum([b * t for b, t in shapes])  # where each batch's rows end in the rows of all

    # 1) every row at once: x̂ = RMSNorm(x), K = x̂·W_K, V = x̂·W_V (every head side by side)
    rows = np.concatenate([x.reshape(-1, d) for x, _ in batches])  # (R, d_model)
    x_hat = rms_norm(rows, lw.attn_norm, cfg.eps)  # (R, d_model)
    k_rows = x_hat @ heads_side_by_side(lw.w_k)  # (R, h_kv·d_k)
    v_rows = x_hat @ heads_side_by_side(lw.w_v)  # (R, h_kv·d_k)

    # 2) Q = x̂·W_Q at the rows whose output is wanted: every row, or each run's last
    wanted = np.arange(len(rows))
    if last_only:
        wanted = np.concatenate(
            [np.arange(end - 1, end - b * t - 1, -t)[::-1] for (b, t), end in zip(shapes, ends, strict=True)]
        )
    q_rows = x_hat[wanted] @ heads_side_by_side(lw.w_q)  # (R_q, h·d_k)

    # 3) each batch's heads, against the shared rows' keys and values and its own (RoPE at their positions)
    concat = np.empty((len(wanted), h * d_k), dtype=np.float32)  # (R_q, h·d_k)
    done = 0
    for (b, t), end, (_, start) in zip(shapes, ends, batches, strict=True):
        t_q = 1 if last_only else t
        r = slice(end - b * t, end)
        k = rope_rotate(k_rows[r].reshape(b, t, h_kv, d_k).transpose(0, 2, 1, 3), base=cfg.rope_base, start=start)
        v = v_rows[r].reshape(b, t, h_kv, d_k).transpose(0, 2, 1, 3)  # (B, h_kv, T', d_k)
        if start:
            shared = (b, h_kv, start, d_k)
            k = np.concatenate([np.broadcast_to(cache.k[layer][:, :start], shared), k], axis=2)  # (B, h_kv, S, d_k)
            v = np.concatenate([np.broadcast_to(cache.v[layer][:, :start], shared), v], axis=2)  # (B, h_kv, S, d_k)
        first = start + t - t_q  # the first query's position
        q = q_rows[done : done + b * t_q].reshape(b, t_q, h, d_k).transpose(0, 2, 1, 3)  # (B, h, T_q, d_k)
        q = rope_rotate(q, base=cfg.rope_base, start=first)
        concat[done : done + b * t_q] = grouped_attention(model, q, k, v, first, off)
        done += b * t_q

    # 4) x + Concat·W_O, then x + SwiGLU(RMSNorm(x)), every wanted row at once
    out = finish_layer(model, layer, rows[wanted], concat)  # (R_q, d_model)
    sizes = [b * (1 if last_only else t) for b, t in shapes]
    return [part.reshape(b, -1, d) for part, (b, _) in zip(np.split(out, np.cumsum(sizes)[:-1]), shapes, strict=True)]


def run_from(
    model: DecoderFiles,
    layer: int,
    x: np.ndarray,
    cache: KVCache | None = None,
    start: int = 0,
    heads_off: frozenset[tuple[int, int]] = frozenset(),
) -> np.ndarray:
    """Layers ``layer`` … N − 1 on B runs whose input of ``layer`` is x (B, T', d_model) at rows start …, the rows
    before read from ``cache``: each run's last row after the last layer, (B, d_model)."""
    n, cache = model.config.layers, KVCache() if cache is None else cache
    for at in range(layer, n):
        (x,) = batched_layer(model, at, [(x, start)], cache, heads_in(heads_off, at), last_only=at == n - 1)
    return x[:, -1]


def patched_heads(
    model: DecoderFiles,
    layer: int,
    x: np.ndarray,
    corrupted: np.ndarray,
    clean: np.ndarray,
    which: Sequence[int],
    last_only: bool = False,
) -> np.ndarray:
    """Layer ``layer`` of the corrupted run once per head i of ``which``, with head i's output the clean run's:
    x (T', d_model) is the corrupted run's input of the layer, ``corrupted`` and ``clean`` (h, T', d_k) the heads'
    outputs at those rows. Returns (len(which), T', d_model), or (len(which), 1, d_model) with ``last_only``."""
    if last_only:
        x, corrupted, clean = x[-1:], corrupted[:, -1:], clean[:, -1:]
    h, t, d_k = corrupted.shape
    heads = np.repeat(corrupted[None], len(which), axis=0)  # (patches, h, T', d_k)
    heads[np.arange(len(which)), which] = clean[which]  # patch j: head which[j]'s output the clean run's
    concat = heads.transpose(0, 2, 1, 3).reshape(len(which) * t, h * d_k)  # (patches·T', h·d_k)
    return finish_layer(model, layer, np.tile(x, (len(which), 1)), concat).reshape(len(which), t, -1)


def read_text(model: DecoderFiles, text_or_ids: TextOrIds) -> Tokenized:
    """A text as the model reads it, or token ids with their pieces and their decoded text."""
    if isinstance(text_or_ids, str):
        return tokenize(model, text_or_ids)
    ids = np.asarray(text_or_ids, dtype=np.int64).reshape(-1)
    if ids.size and (ids.min() < 0 or ids.max() >= model.config.vocab):
        raise ValueError(f"token ids must lie in 0 … {model.config.vocab - 1}")
    return Tokenized(
        text=model.tokenizer.decode(ids.tolist(), skip_special_tokens=False),
        tokens=tuple(model.vocabulary[i] for i in ids),
        ids=ids,
    )


def activation_patching(
    model: DecoderFiles,
    clean_text_or_ids: TextOrIds,
    corrupted_text_or_ids: TextOrIds,
    target: int | None = None,
    contrast: int | None = None,
    heads_off: frozenset[tuple[int, int]] = frozenset(),
    progress: Progress | None = None,
) -> Patching:
    """Patch every row of every layer's input, and every head of every layer, of the corrupted run with the clean
    run's; each patched run's normalised logit difference. ``progress(done, N)`` is told after each layer.
    Raises ValueError when the texts' token counts differ, or when m(clean) = m(corrupted) (no scale to read)."""
    cfg = model.config
    n, h = cfg.layers, cfg.heads
    clean, corrupted = read_text(model, clean_text_or_ids), read_text(model, corrupted_text_or_ids)
    t = len(clean.ids)
    if t != len(corrupted.ids):
        raise ValueError(
            f"the clean text {clean.text!r} has {t} tokens and the corrupted text {corrupted.text!r} "
            f"has {len(corrupted.ids)}: patching needs the same number of tokens in both"
        )
    if t == 0:
        raise ValueError("the texts must hold at least one token")

    # 1) the two runs: every layer's input (N + 1, T, d_model), every head's output, the corrupted run's cache
    clean_x, clean_heads, _ = extend(model, clean.ids, KVCache(), heads_off)
    corrupted_x, corrupted_heads, cache = extend(model, corrupted.ids, KVCache(), heads_off)
    clean_logits, corrupted_logits = final_logits(model, clean_x[-1, -1]), final_logits(model, corrupted_x[-1, -1])
    target = int(np.argmax(clean_logits)) if target is None else int(target)
    contrast = int(np.argmax(corrupted_logits)) if contrast is None else int(contrast)
    for token in (target, contrast):
        if not 0 <= token < cfg.vocab:
            raise ValueError(f"token {token} is not in the vocabulary (0 … {cfg.vocab - 1})")
    m_clean = float(clean_logits[target]) - float(clean_logits[contrast])
    m_corrupted = float(corrupted_logits[target]) - float(corrupted_logits[contrast])
    if m_clean == m_corrupted:
        raise ValueError(
            f"the clean text {clean.text!r} and the corrupted text {corrupted.text!r} give the same "
            f"logit difference {m_clean:.4g} between tokens {target} and {contrast}: there is no scale "
            "to measure a patch on"
        )

    # 2) rows before the first token where the texts differ are the same in both runs, patched or not
    differ = np.flatnonzero(clean.ids != corrupted.ids)
    first = int(differ[0]) if differ.size else t
    d = cfg.d_model

    # 3) layer by layer, all together: the runs patched at row p (one per layer so far), the runs with a head patched
    rows: dict[int, np.ndarray] = {p: np.empty((0, t - p, d), dtype=np.float32) for p in range(first, t)}
    head_runs = np.empty((0, t - first, d), dtype=np.float32)  # (patches so far, T − first, d_model)
    patched: list[tuple[int, int]] = []  # head_runs' (layer, head), in order
    for layer in range(n):
        off, last_only = heads_in(heads_off, layer), layer == n - 1
        for p, runs in rows.items():
            x = corrupted_x[layer, p:].copy()  # (T − p, d_model): this layer's input, row p the clean run's
            x[0] = clean_x[layer, p]
            rows[p] = np.concatenate([runs, x[None]])  # (layer + 1, T − p, d_model)
        batches = [(runs, p) for p, runs in rows.items()] + ([(head_runs, first)] if len(head_runs) else [])
        if batches:
            out = batched_layer(model, layer, batches, cache, off, last_only)
            rows = dict(zip(rows, out[: len(rows)], strict=True))
            head_runs = out[-1] if len(head_runs) else head_runs
        # this layer's head patches, leaving out a head whose output is the same in both runs (one switched off)
        clean_out, corrupted_out = clean_heads[layer].output[:, first:], corrupted_heads[layer].output[:, first:]
        which = [i for i in range(h) if not np.array_equal(clean_out[i], corrupted_out[i])]
        if which:
            new = patched_heads(model, layer, corrupted_x[layer, first:], corrupted_out, clean_out, which, last_only)
            head_runs = np.concatenate([head_runs, new]) if len(head_runs) else new  # (patches so far, T′, d_model)
            patched += [(layer, i) for i in which]
        if progress is not None:
            progress(layer + 1, n)

    # 4) each run's m at the last position, normalised; a patch that changes nothing is the corrupted run, 0
    residual = np.zeros((n, t), dtype=np.float64)
    for p, runs in rows.items():
        residual[:, p] = normalised(logit_difference(model, runs[:, -1], target, contrast), m_clean, m_corrupted)
    heads = np.zeros((n, h), dtype=np.float64)
    if patched:
        layers, which = zip(*patched, strict=True)
        m = logit_difference(model, head_runs[:, -1], target, contrast)  # (patches,)
        heads[layers, which] = normalised(m, m_clean, m_corrupted)
    return Patching(
        clean_tokens=clean.tokens,
        corrupted_tokens=corrupted.tokens,
        target=target,
        contrast=contrast,
        metric_clean=m_clean,
        metric_corrupted=m_corrupted,
        residual=residual,
        heads=heads,
    )
