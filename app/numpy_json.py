"""JSON text straight from NumPy arrays, with orjson: each float the shortest text that reads back as
the same double (as float.__repr__ writes it, though 1e-05 is written 0.00001), from a C loop over
the array instead of a Python float per number.

A document is dicts, lists, strings, numbers, booleans, None, arrays and masked arrays (np.ma), whose
masked entries are written null. It is encoded one array at a time, never in one call for the whole
document, so that a worker thread encoding a large answer lets go of the GIL between arrays and the
event loop keeps answering. Every float is checked finite first: orjson would write NaN and ±∞ as
null without a word, and JSON has no other way to carry them.
"""

from __future__ import annotations

import math

import numpy as np
import orjson

_NUMPY = orjson.OPT_SERIALIZE_NUMPY
_CONTAINERS = (dict, list, tuple, np.ndarray)


class NotFinite(ValueError):
    """A number JSON cannot carry (NaN, ±∞); ``path`` says where, as ``heads[0].scores``."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path or 'the document'} holds a number that is not finite")
        self.path = path


def dumps(doc: object) -> bytes:
    """Compact JSON (no spaces) of ``doc``; raises NotFinite naming the first non-finite number's place."""
    out: list[bytes] = []
    _encode(doc, "", out)
    return b"".join(out)


def _encode(obj: object, path: str, out: list[bytes]) -> None:
    if isinstance(obj, dict):
        out.append(b"{")
        for i, (key, value) in enumerate(obj.items()):
            out.append(b"," + orjson.dumps(key) + b":" if i else orjson.dumps(key) + b":")
            _encode(value, f"{path}.{key}" if path else str(key), out)
        out.append(b"}")
    elif isinstance(obj, np.ma.MaskedArray):
        if not np.isfinite(obj.compressed()).all():
            raise NotFinite(path)
        out.append(orjson.dumps(obj.filled(np.nan), option=_NUMPY))  # the masked entries: NaN, written null
    elif isinstance(obj, np.ndarray):
        if obj.dtype.kind in "fc" and not np.isfinite(obj).all():
            raise NotFinite(path)
        out.append(orjson.dumps(np.ascontiguousarray(obj), option=_NUMPY))
    elif isinstance(obj, list | tuple) and any(isinstance(v, _CONTAINERS) for v in obj):
        out.append(b"[")
        for i, value in enumerate(obj):
            if i:
                out.append(b",")
            _encode(value, f"{path}[{i}]", out)
        out.append(b"]")
    else:  # a scalar, or a flat list of them
        values = obj if isinstance(obj, list | tuple) else (obj,)
        if any(isinstance(v, float | np.floating) and not math.isfinite(v) for v in values):
            raise NotFinite(path)
        out.append(orjson.dumps(obj, option=_NUMPY))
