"""The frozen records a run returns: every intermediate the page shows, named.

Notation follows "Attention Is All You Need": T tokens, ``d_model`` embedding size, ``h`` heads,
``d_k`` query/key size and ``d_v`` value size per head. Pure NumPy and the standard library.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# A long computation tells how far it is: (layers done, layers in all), after each layer.
Progress = Callable[[int, int], None]


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
