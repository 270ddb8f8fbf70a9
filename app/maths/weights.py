"""Every learned weight, once: its name, its shape in paper notation, its label, whether it is per head.

The pipeline checks given arrays against these shapes, the API's request model states them, and the
page reads its weight grids by them. Pure NumPy and the standard library.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np


@dataclass(frozen=True)
class Sizes:
    """The sizes every weight's shape is written in."""

    d_model: int
    h: int = 1
    d_k: int = 1
    d_v: int = 1
    d_a: int | None = None  # the additive score's hidden size; None: d_k, as the pipeline draws it
    d_ff: int = 1

    @property
    def hidden(self) -> int:
        return self.d_k if self.d_a is None else self.d_a


@dataclass(frozen=True)
class WeightSpec:
    name: str
    shape: Callable[[Sizes], tuple[int, ...]]
    label: str  # plain text, as in titles and error messages
    tex: str  # LaTeX
    per_head: bool  # one matrix (or row) per head, stacked on the first axis
    block: bool = False  # the transformer block's (FFN, LayerNorm), not attention's

    def grid(self, sizes: Sizes) -> tuple[int, int]:
        """Rows × columns of the matrix one head edits: the head axis dropped, a vector as one row."""
        shape = self.shape(sizes)[1:] if self.per_head else self.shape(sizes)
        return (1, shape[0]) if len(shape) == 1 else (shape[0], shape[1])


_SPECS = (
    WeightSpec("w_q", lambda s: (s.h, s.d_model, s.d_k), "W_Q", "W_Q", per_head=True),
    WeightSpec("w_k", lambda s: (s.h, s.d_model, s.d_k), "W_K", "W_K", per_head=True),
    WeightSpec("w_v", lambda s: (s.h, s.d_model, s.d_v), "W_V", "W_V", per_head=True),
    WeightSpec("w_o", lambda s: (s.h * s.d_v, s.d_model), "W_O", "W_O", per_head=False),
    # Luong's "general" score q_i·W_a·k_jᵀ; Bahdanau's additive score v_a·tanh(q_i·W₁ + k_j·W₂).
    WeightSpec("w_a", lambda s: (s.h, s.d_k, s.d_k), "W_a", "W_a", per_head=True),
    WeightSpec("w_1", lambda s: (s.h, s.d_k, s.hidden), "W₁", "W_1", per_head=True),
    WeightSpec("w_2", lambda s: (s.h, s.d_k, s.hidden), "W₂", "W_2", per_head=True),
    WeightSpec("v_a", lambda s: (s.h, s.hidden), "v_a", "v_a", per_head=True),
    # The block: FFN(h) = act(h·W₁ + b₁)·W₂ + b₂ and two LayerNorms' gain γ and bias β.
    WeightSpec("ffn_w1", lambda s: (s.d_model, s.d_ff), "FFN W₁", r"\text{FFN } W_1", per_head=False, block=True),
    WeightSpec("ffn_b1", lambda s: (s.d_ff,), "FFN b₁", r"\text{FFN } b_1", per_head=False, block=True),
    WeightSpec("ffn_w2", lambda s: (s.d_ff, s.d_model), "FFN W₂", r"\text{FFN } W_2", per_head=False, block=True),
    WeightSpec("ffn_b2", lambda s: (s.d_model,), "FFN b₂", r"\text{FFN } b_2", per_head=False, block=True),
    WeightSpec("ln1_gamma", lambda s: (s.d_model,), "LayerNorm₁ γ", r"\text{LayerNorm}_1\ \gamma", per_head=False,
               block=True),
    WeightSpec("ln1_beta", lambda s: (s.d_model,), "LayerNorm₁ β", r"\text{LayerNorm}_1\ \beta", per_head=False,
               block=True),
    WeightSpec("ln2_gamma", lambda s: (s.d_model,), "LayerNorm₂ γ", r"\text{LayerNorm}_2\ \gamma", per_head=False,
               block=True),
    WeightSpec("ln2_beta", lambda s: (s.d_model,), "LayerNorm₂ β", r"\text{LayerNorm}_2\ \beta", per_head=False,
               block=True),
)
WEIGHTS: dict[str, WeightSpec] = {spec.name: spec for spec in _SPECS}

# Order in which seeded weights are drawn. Every matrix is drawn whether or not it is given, so
# supplying one matrix never changes the seeded values of the others. The score functions' extra
# weights come from a stream of their own, drawn after, so adding them changed no earlier value.
WEIGHT_NAMES = ("w_q", "w_k", "w_v", "w_o")
SCORE_WEIGHT_NAMES = ("w_a", "w_1", "w_2", "v_a")
ALL_WEIGHT_NAMES = WEIGHT_NAMES + SCORE_WEIGHT_NAMES
BLOCK_WEIGHT_NAMES = tuple(name for name, spec in WEIGHTS.items() if spec.block)
W = TypeVar("W")  # Weights or BlockWeights


def shape_table(names: tuple[str, ...], sizes: Sizes) -> dict[str, tuple[int, ...]]:
    """The shape of each named weight, in the order given."""
    return {name: WEIGHTS[name].shape(sizes) for name in names}


def weight_shapes(d_model: int, num_heads: int, d_k: int, d_v: int, d_a: int | None = None) -> dict:
    """The shape of every attention weight, in ALL_WEIGHT_NAMES order."""
    return shape_table(ALL_WEIGHT_NAMES, Sizes(d_model=d_model, h=num_heads, d_k=d_k, d_v=d_v, d_a=d_a))


def block_weight_shapes(d_model: int, d_ff: int) -> dict:
    """The shape of every block weight, in BLOCK_WEIGHT_NAMES order."""
    return shape_table(BLOCK_WEIGHT_NAMES, Sizes(d_model=d_model, d_ff=d_ff))


def resolve_weights(
    cls: type[W], shapes: dict, given: dict[str, np.ndarray] | None, draw: Callable[[], W]
) -> W:
    """The given arrays, shapes checked, with ``draw()``'s seeded ones for the rest. Nothing is
    drawn when every array is given (the page always gives them all)."""
    given = given or {}
    used = {}
    for name, shape in shapes.items():
        value = given.get(name)
        if value is None:
            continue
        value = np.asarray(value, dtype=np.float64)
        if value.shape != shape:
            raise ValueError(f"{name} must have shape {shape}, got {value.shape}")
        used[name] = value
    if len(used) < len(shapes):
        seeded = draw()
        used = {name: used[name] if name in used else getattr(seeded, name) for name in shapes}
    return cls(**used)
