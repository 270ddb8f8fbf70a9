"""Every learned weight by name, and the check that a given array has its shape.

Pure NumPy and the standard library.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np

# Order in which seeded weights are drawn. Every matrix is drawn whether or not it is given, so
# supplying one matrix never changes the seeded values of the others. The score functions' extra
# weights come from a stream of their own, drawn after, so adding them changed no earlier value.
WEIGHT_NAMES = ("w_q", "w_k", "w_v", "w_o")
SCORE_WEIGHT_NAMES = ("w_a", "w_1", "w_2", "v_a")
ALL_WEIGHT_NAMES = WEIGHT_NAMES + SCORE_WEIGHT_NAMES
BLOCK_WEIGHT_NAMES = ("ffn_w1", "ffn_b1", "ffn_w2", "ffn_b2", "ln1_gamma", "ln1_beta", "ln2_gamma", "ln2_beta")
W = TypeVar("W")  # Weights or BlockWeights


def weight_shapes(d_model: int, num_heads: int, d_k: int, d_v: int, d_a: int | None = None) -> dict:
    """The shape of every attention weight, in ALL_WEIGHT_NAMES order."""
    d_a = d_k if d_a is None else d_a
    return {
        "w_q": (num_heads, d_model, d_k),
        "w_k": (num_heads, d_model, d_k),
        "w_v": (num_heads, d_model, d_v),
        "w_o": (num_heads * d_v, d_model),
        "w_a": (num_heads, d_k, d_k),
        "w_1": (num_heads, d_k, d_a),
        "w_2": (num_heads, d_k, d_a),
        "v_a": (num_heads, d_a),
    }


def block_weight_shapes(d_model: int, d_ff: int) -> dict:
    """The shape of every block weight, in BLOCK_WEIGHT_NAMES order."""
    return {"ffn_w1": (d_model, d_ff), "ffn_b1": (d_ff,), "ffn_w2": (d_ff, d_model), "ffn_b2": (d_model,),
            **{name: (d_model,) for name in BLOCK_WEIGHT_NAMES[4:]}}


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
