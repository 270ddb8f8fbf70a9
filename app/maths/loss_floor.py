"""How low the attention loss can go, and what ∂L/∂A is there.

The attention goal's loss is the cross-entropy L(A) = −(1/R)·Σ_{i counted} Σ_j t_ij·log A_ij over the R query
rows that count. For each row, Σ_j t_ij·log A_ij is largest at A_i = t_i (Gibbs' inequality), so

    L ≥ L(t) = (1/R)·Σ_{i counted} H(t_i),    H(t_i) = −Σ_j t_ij·log t_ij,

the target's mean row entropy: a target that is not one-hot keeps the loss above 0 however well the weights
learn it. At A = t, ∂L/∂A_ij = −t_ij / (R·A_ij) = −1/R wherever t_ij > 0: it does not vanish, and its size is

    ‖∂L/∂A‖ = √(number of entries with t_ij > 0) / R.

The softmax passes on only what differs from each row's weighted average: ∂L/∂Scaled = (A − t)/R → 0.
Pure NumPy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from app.maths.lab import entropy_rows


def _counted(target: np.ndarray, rows: Sequence[int]) -> np.ndarray:
    t = np.asarray(target, dtype=np.float64)  # (T, S)
    return t[list(rows)] if rows else t  # (R, S)


def attention_loss_floor(target: np.ndarray, rows: Sequence[int] = ()) -> float:
    """L(t): the mean entropy of the target rows that count (all rows when ``rows`` is empty), in nats."""
    return float(entropy_rows(_counted(target, rows)).mean())  # (R,) → mean


def gradient_norm_at_floor(target: np.ndarray, rows: Sequence[int] = ()) -> float:
    """‖∂L/∂A‖ at A = t: every entry with t_ij > 0 is −1/R, the others 0."""
    t = _counted(target, rows)  # (R, S)
    return float(np.sqrt(np.count_nonzero(t > 0)) / t.shape[0])
