"""JSON text straight from NumPy arrays, with orjson: each float the shortest text that reads back as
the same double (as float.__repr__ writes it, though 1e-05 is written 0.00001), from a C loop over
the array instead of a Python float per number.

A document is dicts, lists, strings, numbers, booleans, None, arrays and masked arrays (np.ma), whose
masked entries are written null. It is encoded one array at a time, never in one call for the whole
document, and after every YIELD_BYTES of text the encoding thread lets go of the GIL: a worker thread
encoding a large answer would otherwise keep the event loop waiting for it up to the interpreter's
switch interval (5 ms) at a time, again and again. It lets go with time.sleep(0), whose 50–100 µs of
the kernel's timer slack are what give a loop thread that is slow to be scheduled (a busy machine) the
time to take the GIL; a select() that waits for nothing lets go as briefly as a syscall, and under the
mixed load the class's p95 got several times worse with it. Every float is checked finite first: orjson
would write NaN and ±∞ as null without a word, and JSON has no other way to carry them.
"""

from __future__ import annotations

import math
import time

import numpy as np
import orjson

_NUMPY = orjson.OPT_SERIALIZE_NUMPY
_CONTAINERS = (dict, list, tuple, np.ndarray)
YIELD_BYTES = 256 * 1024  # about 0.3 ms of orjson's work; an edit's answer (5 KB) never lets go


class NotFinite(ValueError):
    """A number JSON cannot carry (NaN, ±∞); ``path`` says where, as ``heads[0].scores``."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path or 'the document'} holds a number that is not finite")
        self.path = path


def dumps(doc: object) -> bytes:
    """Compact JSON (no spaces) of ``doc``; raises NotFinite naming the first non-finite number's place."""
    out = _Pieces()
    _encode(doc, out)
    return b"".join(out.parts)


def let_go() -> None:
    """Release the GIL for a moment, so that a thread waiting for it (the event loop) takes it now."""
    time.sleep(0)


class _Pieces:
    """The encoded text so far, and how much of it since the GIL was last let go."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.held = 0

    def add(self, piece: bytes) -> None:
        self.parts.append(piece)
        self.held += len(piece)
        if self.held >= YIELD_BYTES:
            self.held = 0
            let_go()


# A key's text and colon, kept: a document's keys are the response's field names, a few dozen in all.
_KEYS: dict[str, bytes] = {}
MAX_KEYS = 1024


def _key(key: object) -> bytes:
    text = _KEYS.get(key) if isinstance(key, str) else None
    if text is None:
        text = orjson.dumps(key) + b":"
        if isinstance(key, str) and len(_KEYS) < MAX_KEYS:
            _KEYS[key] = text
    return text


def _within(outer: str, inner: str) -> str:
    """A place inside ``outer``: "heads" and "[1].q" make "heads[1].q", "ln1" and "mean" "ln1.mean"."""
    if not inner:
        return outer
    return outer + inner if inner.startswith("[") else f"{outer}.{inner}"


def _encode(obj: object, out: _Pieces) -> None:
    # A place is named only on the way out of a refusal, not built for every value on the way in.
    if isinstance(obj, dict):
        if not obj:
            out.parts.append(b"{}")
            return
        sep = b"{"
        for key, value in obj.items():
            head = sep + _key(key)
            sep = b","
            kind = type(value)
            if value is None or kind is str or kind is int or kind is bool or (kind is float and math.isfinite(value)):
                out.parts.append(head + orjson.dumps(value))  # a plain value, most of a document's fields
                continue
            out.parts.append(head)
            try:
                _encode(value, out)
            except NotFinite as e:
                raise NotFinite(_within(str(key), e.path)) from None
        out.parts.append(b"}")
    elif isinstance(obj, np.ma.MaskedArray):
        if not np.isfinite(obj.compressed()).all():
            raise NotFinite("")
        out.add(orjson.dumps(obj.filled(np.nan), option=_NUMPY))  # the masked entries: NaN, written null
    elif isinstance(obj, np.ndarray):
        if obj.dtype.kind in "fc" and not np.isfinite(obj).all():
            raise NotFinite("")
        out.add(orjson.dumps(np.ascontiguousarray(obj), option=_NUMPY))
    elif isinstance(obj, list | tuple) and any(isinstance(v, _CONTAINERS) for v in obj):
        sep = b"["
        for i, value in enumerate(obj):
            out.parts.append(sep)
            sep = b","
            try:
                _encode(value, out)
            except NotFinite as e:
                raise NotFinite(_within(f"[{i}]", e.path)) from None
        out.parts.append(b"]" if obj else b"[]")
    else:  # a scalar, or a flat list of them
        values = obj if isinstance(obj, list | tuple) else (obj,)
        if any(isinstance(v, float | np.floating) and not math.isfinite(v) for v in values):
            raise NotFinite("")
        out.add(orjson.dumps(obj, option=_NUMPY))
