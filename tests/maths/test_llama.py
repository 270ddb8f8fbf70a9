"""The decoder's forward pass (app.maths.llama) against references written out by hand: a KV cache against one
pass over the whole text, a layer with heads switched off against a plain per-head loop in float64, RMSNorm,
SiLU, RoPE and the sampler's cut-offs against their formulas, grouped-query attention's shared keys. The
numbers of Hugging Face transformers themselves are checked in test_decoder_reference.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.maths.decoder_files import DecoderFiles, load_decoder_files
from app.maths.llama import (
    DecoderContinuation,
    KVCache,
    extend,
    final_logits,
    head_at,
    layer_attention_run,
    rms_norm,
    run_decoder,
    silu,
    tokenize,
)
from app.maths.positions import rope_rotate
from app.maths.sampling import generate, temperature_softmax

TEXT = "The cat sat on the mat because it was tired."
OFF_LAYER, OFF_HEADS = 3, (1, 4)  # heads switched off: one in key/value group 0, one in group 1


@pytest.fixture(scope="module")
def model() -> DecoderFiles:
    return load_decoder_files()


@pytest.fixture(scope="module")
def run(model: DecoderFiles):
    return run_decoder(model, TEXT)


def rope_complex(x: np.ndarray, base: float, start: int = 0) -> np.ndarray:
    """RoPE written as RoFormer's complex product: the pair (x₂ᵢ, x₂ᵢ₊₁) is x₂ᵢ + i·x₂ᵢ₊₁, times e^{i·m·θᵢ} at
    position m, θᵢ = base^(−2i/d). Float64, one row at a time."""
    t, d = x.shape
    out = np.empty((t, d))
    for m in range(t):
        for i in range(d // 2):
            z = complex(x[m, 2 * i], x[m, 2 * i + 1]) * np.exp(1j * (start + m) * base ** (-2 * i / d))
            out[m, 2 * i], out[m, 2 * i + 1] = z.real, z.imag
    return out


def plain_rms_norm(row: np.ndarray, gain: np.ndarray, eps: float) -> np.ndarray:
    return row / math.sqrt(sum(float(v) ** 2 for v in row) / len(row) + eps) * gain


def plain_layer(model: DecoderFiles, layer: int, x: np.ndarray, off: tuple[int, ...]) -> tuple[np.ndarray, list]:
    """One decoder layer in float64, each query head in its own loop over queries and keys, the heads in ``off``
    giving zeros: the layer's output (T, d_model) and each head's weights (T rows of t + 1 keys)."""
    cfg = model.config
    lw = model.weights.layers[layer]
    x = x.astype(np.float64)
    t = len(x)
    x_hat = np.stack([plain_rms_norm(row, lw.attn_norm.astype(np.float64), cfg.eps) for row in x])  # (T, d_model)
    outputs, weights = [], []
    for i in range(cfg.heads):
        g = i // (cfg.heads // cfg.kv_heads)  # heads 0, 1, 2 read key/value head 0; 3, 4, 5 head 1; …
        q = rope_complex(x_hat @ lw.w_q[i].astype(np.float64), cfg.rope_base)  # (T, d_k)
        k = rope_complex(x_hat @ lw.w_k[g].astype(np.float64), cfg.rope_base)  # (T, d_k)
        v = x_hat @ lw.w_v[g].astype(np.float64)  # (T, d_k)
        out = np.zeros((t, cfg.d_k))
        rows = []
        for m in range(t):
            s = np.array([q[m] @ k[j] / math.sqrt(cfg.d_k) for j in range(m + 1)])  # keys 0 … m only
            w = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
            rows.append(w)
            if i not in off:
                out[m] = sum(w[j] * v[j] for j in range(m + 1))
        outputs.append(out)
        weights.append(rows)
    x = x + np.concatenate(outputs, axis=1) @ lw.w_o.astype(np.float64)  # (T, d_model)
    x_ffn = np.stack([plain_rms_norm(row, lw.ffn_norm.astype(np.float64), cfg.eps) for row in x])
    gate, up = x_ffn @ lw.w_gate.astype(np.float64), x_ffn @ lw.w_up.astype(np.float64)  # (T, d_ff)
    return x + (gate / (1 + np.exp(-gate)) * up) @ lw.w_down.astype(np.float64), weights


def test_extending_token_by_token_through_the_cache_equals_one_pass(model: DecoderFiles, run) -> None:
    """Attention rows within 1e-5; logits (up to ~30) within 1e-5 of their largest, float32's reach for a
    576-term dot product (one row against many: the sums are not in the same order)."""
    ids = run.ids
    t = len(ids)
    assert t >= 8
    cache = KVCache()
    for m in range(t):
        hidden, heads, cache = extend(model, ids[m : m + 1], cache)
        assert cache.length == m + 1
        for layer in range(model.config.layers):
            assert heads[layer].weights.shape == (model.config.heads, 1, m + 1)
            np.testing.assert_allclose(heads[layer].weights[:, 0], run.attention[layer, :, m, : m + 1],
                                       atol=1e-5, rtol=0)
        full = final_logits(model, run.hidden_states[-1, m])  # (vocab,) position m's prediction in one pass
        np.testing.assert_allclose(final_logits(model, hidden[-1, -1]), full, atol=1e-5 * np.abs(full).max(), rtol=0)
    np.testing.assert_allclose(final_logits(model, hidden[-1, -1]), run.logits,
                               atol=1e-5 * np.abs(run.logits).max(), rtol=0)
    for layer in (0, 29):  # the cache holds the same keys and values as one pass over the text
        np.testing.assert_allclose(cache.k[layer], run.cache.k[layer], atol=1e-4, rtol=1e-5)
        np.testing.assert_allclose(cache.v[layer], run.cache.v[layer], atol=1e-4, rtol=1e-5)


def test_a_cache_extended_by_several_tokens_at_once_masks_only_their_later_ones(model: DecoderFiles, run) -> None:
    ids = run.ids
    _, _, cache = extend(model, ids[:5], KVCache())
    hidden, heads, _ = extend(model, ids[5:], cache)
    for layer in range(model.config.layers):
        w = heads[layer].weights  # (h, T − 5, T): the new tokens see the 5 cached ones and each other causally
        np.testing.assert_allclose(w, run.attention[layer, :, 5:, :], atol=1e-5, rtol=0)
        assert np.all(w[:, 0, 6:] == 0) and np.all(w[:, 0, :6] > 0)
    np.testing.assert_allclose(hidden[-1, -1], run.hidden_states[-1, -1],
                               atol=1e-5 * np.abs(run.hidden_states[-1, -1]).max(), rtol=0)


def test_the_causal_mask_gives_exactly_zero_above_the_diagonal(model: DecoderFiles, run) -> None:
    t = len(run.ids)
    above = np.triu(np.ones((t, t), dtype=bool), k=1)
    assert run.attention.shape == (model.config.layers, model.config.heads, t, t)
    assert np.all(run.attention[..., above] == 0.0)
    assert np.all(run.attention[..., ~above] > 0.0)  # every earlier key keeps some weight
    np.testing.assert_allclose(run.attention.sum(axis=-1), 1.0, atol=1e-6, rtol=0)
    heads = head_at(model, run, 7)
    assert np.all(np.isneginf(heads.masked[..., above])) and np.all(np.isfinite(heads.masked[..., ~above]))


def test_heads_switched_off_equal_a_per_head_loop_with_their_output_zeroed(model: DecoderFiles, run) -> None:
    off = frozenset((OFF_LAYER, h) for h in OFF_HEADS)
    run_off = run_decoder(model, TEXT, off)
    d_k = model.config.d_k
    concat = head_at(model, run_off, OFF_LAYER).concat  # (T, h·d_k)
    for h in range(model.config.heads):
        block = concat[:, h * d_k : (h + 1) * d_k]
        if h in OFF_HEADS:
            assert np.all(block == 0.0) and np.all(run_off.attention[OFF_LAYER, h] == 0.0)
        else:
            assert np.all(np.any(block != 0.0, axis=1))
    # Earlier layers are untouched; this layer's output is the plain loop's.
    np.testing.assert_array_equal(run_off.hidden_states[: OFF_LAYER + 1], run.hidden_states[: OFF_LAYER + 1])
    expected, weights = plain_layer(model, OFF_LAYER, run.hidden_states[OFF_LAYER], OFF_HEADS)
    got = run_off.hidden_states[OFF_LAYER + 1]  # (T, d_model)
    scale = np.abs(expected).max(axis=1, keepdims=True)  # (T, 1) each row's own size
    assert np.all(np.abs(got - expected) <= 1e-5 * scale)
    for h in set(range(model.config.heads)) - set(OFF_HEADS):  # the heads still on: the loop's weights
        for m, row in enumerate(weights[h]):
            np.testing.assert_allclose(run_off.attention[OFF_LAYER, h, m, : m + 1], row, atol=1e-5, rtol=0)
    # And it matters: without those heads the layer's output is not the same.
    assert np.abs(got - run.hidden_states[OFF_LAYER + 1]).max() > 1e-2


def test_rms_norm_equals_its_formula_in_float64() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(0, 2, (5, 576)).astype(np.float32)
    x[0, 7] = 22_500.0  # a row with one huge activation, as the first token carries in the model
    x[1] *= 1e-3  # a row whose mean square is near ε
    gain = rng.normal(1, 0.3, 576).astype(np.float32)
    eps = 1e-5
    got = rms_norm(x, gain, eps)
    assert got.dtype == np.float32
    for row_got, row in zip(got, x, strict=True):
        want = plain_rms_norm(row.astype(np.float64), gain.astype(np.float64), eps)
        np.testing.assert_allclose(row_got, want, atol=1e-6 * max(1.0, np.abs(want).max()), rtol=0)


def test_silu_equals_x_over_one_plus_e_to_minus_x() -> None:
    x = np.concatenate([np.linspace(-30, 30, 2001), [-200.0, -88.0, 0.0, 88.0, 200.0]])
    got = silu(x.astype(np.float32))
    want = x / (1 + np.exp(-x))  # float64
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=1e-6)


def test_generate_with_one_seed_repeats_and_other_seeds_differ(model: DecoderFiles) -> None:
    ids = tokenize(model, "Once upon a time, there was").ids
    first = [s.id for s in generate(DecoderContinuation(model, ids), 6, temperature=1.2, top_k=40, seed=3)]
    again = [s.id for s in generate(DecoderContinuation(model, ids), 6, temperature=1.2, top_k=40, seed=3)]
    other = [s.id for s in generate(DecoderContinuation(model, ids), 6, temperature=1.2, top_k=40, seed=4)]
    assert first == again
    assert other != first
    for steps in (first, other):
        assert len(steps) == 6


def test_sampled_tokens_come_from_the_cut_off_distribution(model: DecoderFiles) -> None:
    ids = tokenize(model, "Once upon a time, there was").ids
    steps = generate(DecoderContinuation(model, ids), 5, temperature=1.0, top_k=3, seed=11)
    for step in steps:
        assert step.id in np.argsort(-step.logits, kind="stable")[:3]
        assert step.probability == pytest.approx(float(temperature_softmax(step.logits, 1.0)[step.id]), rel=1e-12)


def test_greedy_generation_equals_argmax_without_the_cache(model: DecoderFiles) -> None:
    ids = tokenize(model, "The capital of France is").ids
    steps = generate(DecoderContinuation(model, ids), 4, temperature=0)
    sequence = list(ids)
    for step in steps:  # each step from one pass over the whole sequence so far, no cache
        hidden, _, _ = extend(model, np.array(sequence), KVCache())
        logits = final_logits(model, hidden[-1, -1])
        assert step.id == int(np.argmax(logits))
        np.testing.assert_allclose(step.logits, logits, atol=1e-5 * np.abs(logits).max(), rtol=0)
        sequence.append(step.id)


@pytest.mark.parametrize("start", [0, 1, 5, 17])
def test_rope_from_a_start_equals_rotating_the_whole_sequence_and_slicing(start: int) -> None:
    rng = np.random.default_rng(start)
    x = rng.normal(size=(3, start + 6, 64)).astype(np.float32)  # (heads, positions, d_k)
    whole = rope_rotate(x, base=100_000.0)
    part = rope_rotate(x[:, start:], base=100_000.0, start=start)
    np.testing.assert_allclose(part, whole[:, start:], atol=1e-6, rtol=0)
    for head in range(3):
        np.testing.assert_allclose(part[head], rope_complex(x[head, start:].astype(np.float64), 100_000.0, start),
                                   atol=1e-5, rtol=0)
    assert not np.allclose(rope_rotate(x, base=10_000.0)[:, 1:], whole[:, 1:], atol=1e-3)  # the base matters


def test_grouped_query_heads_share_their_key_and_value_head(model: DecoderFiles, run) -> None:
    layer = 5
    att = layer_attention_run(model, run, layer)
    heads = head_at(model, run, layer)
    group = model.config.heads // model.config.kv_heads
    assert group == 3
    for i, head in enumerate(att.heads):
        np.testing.assert_array_equal(head.k_rot, heads.k[i // 3])
        np.testing.assert_array_equal(head.v, heads.v[i // 3])
        np.testing.assert_array_equal(head.k_rot, att.heads[3 * (i // 3)].k_rot)
        # scores = Q·Kᵀ with the shared keys, against a plain dot product per query and key
        q = head.q_rot.astype(np.float64)
        k = heads.k[i // 3].astype(np.float64)
        t = len(q)
        plain = np.array([[q[m] @ k[j] for j in range(t)] for m in range(t)])
        np.testing.assert_allclose(heads.scores[i], plain, atol=1e-4 * np.abs(plain).max(), rtol=0)
    assert not np.allclose(att.heads[0].k_rot, att.heads[3].k_rot)  # two groups, two key heads
    assert not np.allclose(att.heads[0].q_rot, att.heads[1].q_rot)  # each query head its own queries
