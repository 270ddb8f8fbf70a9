"""NumPy arrays as Python source a student can read, and as exact bytes for the notebook's own check.

Pure NumPy and the standard library. A float is written with ``repr``, which round-trips it exactly, so the
notebook computes from the very numbers the page did.
"""

from __future__ import annotations

import base64

import numpy as np


def number(v: float) -> str:
    """A float as Python source: ``repr`` (exact), and ``np.inf`` for the infinities."""
    v = float(v)
    if v == np.inf:
        return "np.inf"
    if v == -np.inf:
        return "-np.inf"
    if v != v:
        return "np.nan"
    return repr(v)


def _cell(v: object, dtype: np.dtype) -> str:
    if dtype.kind == "b":
        return str(bool(v))
    if dtype == np.float32 and np.isfinite(v):  # the shortest text that reads back as the same float32
        return str(np.float32(v))
    return number(float(v))


def _rows(a: np.ndarray, indent: str) -> list[str]:
    """One line per innermost row, brackets nested around them."""
    if a.ndim == 1:
        cells = [_cell(v, a.dtype) for v in a]
        return [indent + "[" + ", ".join(cells) + "],"]
    lines = [indent + "["]
    for part in a:
        lines += _rows(part, indent + "    ")
    lines.append(indent + "],")
    return lines


def array_literal(a: np.ndarray) -> str:
    """``np.array([...])`` with one row per line (``dtype=bool`` for a mask, ``dtype=np.float32`` for float32,
    each number the shortest text that reads back as the same float32)."""
    a = np.asarray(a)
    suffix = {np.dtype(bool): ", dtype=bool)", np.dtype(np.float32): ", dtype=np.float32)"}.get(a.dtype, ")")
    if a.ndim == 0:
        return f"np.array({number(float(a))})"
    if a.ndim == 1:
        return "np.array(" + _rows(a, "")[0][:-1] + suffix
    body = _rows(a, "")
    body[-1] = body[-1][:-1]  # no comma after the outermost bracket
    return "np.array(" + "\n".join(body)[:] + suffix


def packed(a: np.ndarray) -> str:
    """An array's float64 bytes in base64: the notebook unpacks it bit for bit (``unpack``)."""
    return base64.b64encode(np.ascontiguousarray(a, dtype="<f8").tobytes()).decode("ascii")


def shape_text(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"
