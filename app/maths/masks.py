"""Masks: which keys each query may not see, as a (T, S) boolean array (True = hidden).

The one place where mask patterns are built. Pure NumPy and the standard library.
"""

from __future__ import annotations

import math

import numpy as np

MASK_MODES = ("none", "causal", "local", "strided")


def causal_mask(t: int, s: int | None = None, offset: int = 0) -> np.ndarray:
    """True above the diagonal: query i may not look at a later key j > i + offset. With a KV cache of
    ``offset`` earlier tokens, query i is the token at position offset + i and sees keys 0 … offset + i."""
    return np.triu(np.ones((t, t if s is None else s), dtype=bool), k=1 + offset)  # (T, S)


def local_mask(t: int, s: int, window: int) -> np.ndarray:
    """Sliding window (Longformer-style): query i sees only keys j with |i − j| <= window."""
    distance = np.abs(np.arange(t)[:, None] - np.arange(s)[None, :])  # (T, S)
    return distance > window


def strided_mask(t: int, s: int, stride: int) -> np.ndarray:
    """Strided sparse attention (Child et al. 2019), both directions: query i sees key j when
    |i − j| < stride (its neighbourhood) or (i − j) mod stride = 0 (every stride-th token).
    With stride ≈ √T each query sees about 2√T keys: O(T·√T) instead of O(T²)."""
    offset = np.arange(t)[:, None] - np.arange(s)[None, :]  # (T, S)
    return ~((np.abs(offset) < stride) | (offset % stride == 0))


def default_window(mode: str, s: int) -> int:
    """local: ±2 keys; strided: a stride of ⌈√S⌉."""
    return max(1, math.ceil(math.sqrt(s))) if mode == "strided" else 2


def build_mask(mode: str | np.ndarray | None, t: int, s: int, window: int | None = None) -> np.ndarray | None:
    """The (T, S) boolean mask of a named mode, or a given array checked for shape."""
    if mode is None or (isinstance(mode, str) and mode == "none"):
        return None
    if isinstance(mode, str):
        if mode not in MASK_MODES:
            raise ValueError(f"mask must be one of {', '.join(MASK_MODES)} or a T×S array of booleans")
        if mode == "causal":
            return causal_mask(t, s)
        w = default_window(mode, s) if window is None else window
        if w < 1:
            raise ValueError("window must be at least 1")
        return local_mask(t, s, w) if mode == "local" else strided_mask(t, s, w)
    hidden = np.asarray(mode, dtype=bool)
    if hidden.shape != (t, s):
        raise ValueError(f"mask must have shape {t}×{s}, got {'×'.join(map(str, hidden.shape))}")
    return hidden
