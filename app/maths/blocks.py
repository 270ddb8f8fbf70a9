"""The transformer block around attention (seeds 002, 003): LayerNorm, the position-wise FFN, the
residual sub-layers in post- or pre-norm order, and a stack of blocks.

Pure NumPy and the standard library.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from app.maths.attention import check_choice, run_attention
from app.maths.positions import ENCODINGS, POSITIONAL_ENCODINGS, position_encoding
from app.maths.records import AttentionRun, BlockResult, BlockWeights, LayerNormResult, TransformerRun
from app.maths.weights import block_weight_shapes, resolve_weights

ACTIVATIONS = ("relu", "gelu", "gelu_tanh")  # "gelu" is the exact (erf) form; "gelu_tanh" GPT-2's
NORM_PLACEMENTS = ("post", "pre")
LAYER_NORM_EPS = 1e-5



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
    inner_pe = "none" if ENCODINGS[positional_encoding].adds_to_x else positional_encoding  # added once, below
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
