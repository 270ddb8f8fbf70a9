"""The API's answer as NumPy's .npz, for Python clients that ask for it (``Accept: application/x-npz``):
one array per intermediate, named by its place in the JSON answer (``heads/0/q``, ``blocks/1/ln1/mean``,
``gradients/weights/w_q``), so ``np.load(io.BytesIO(r.content))["heads/0/softmax"]`` is the JSON's
``heads[0].softmax`` bit for bit, without JSON's cost.

Numbers keep the dtype they were computed in (float64; the real model's float32); booleans (the mask)
stay booleans; strings (tokens, options) are unicode arrays, which ``np.load`` reads without pickling. A
masked entry, written null in JSON, is NaN here. Nulls and empty lists are left out, as they hold no array.
As in JSON, a number that is not finite elsewhere raises NotFinite, naming its place.
"""

from __future__ import annotations

import io
import math

import numpy as np

from app.web.json_encoding import NotFinite

NPZ_MEDIA_TYPE = "application/x-npz"
JSON_MEDIA_TYPE = "application/json"


def _flatten(doc: object, path: str, out: dict[str, np.ndarray]) -> None:
    if doc is None:
        return
    if isinstance(doc, dict):
        for key, value in doc.items():
            _flatten(value, f"{path}/{key}" if path else str(key), out)
        return
    if isinstance(doc, np.ma.MaskedArray):
        out[path] = _finite(np.ma.filled(doc.astype(np.float64), np.nan), ~np.ma.getmaskarray(doc), path)
        return
    if isinstance(doc, np.ndarray):
        out[path] = _finite(doc, None, path)
        return
    if isinstance(doc, (list, tuple)):
        if not doc:
            return
        if all(isinstance(v, str) for v in doc):
            out[path] = np.array(doc, dtype=str)
            return
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in doc):
            out[path] = _finite(np.array(doc, dtype=np.float64), None, path)
            return
        for i, value in enumerate(doc):
            _flatten(value, f"{path}/{i}", out)
        return
    if isinstance(doc, float) and not math.isfinite(doc):
        raise NotFinite(path)
    out[path] = np.array(doc)


def _finite(a: np.ndarray, shown: np.ndarray | None, path: str) -> np.ndarray:
    """``a`` itself, after checking that its numbers (those ``shown``, for a masked array) are finite."""
    if a.dtype.kind == "f":
        values = a if shown is None else a[shown]
        if not np.isfinite(values).all():
            raise NotFinite(path)
    return a


def npz_dumps(doc: dict) -> bytes:
    """The document as an uncompressed .npz (the response is compressed as the client accepts)."""
    arrays: dict[str, np.ndarray] = {}
    _flatten(doc, "", arrays)
    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=False, **arrays)
    return buffer.getvalue()


def _quality(accept: str, wanted: tuple[str, ...]) -> float:
    """The highest q the Accept header gives any of the media ranges ``wanted`` (0 when none is listed)."""
    best = 0.0
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        if media.lower() not in wanted:
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = min(max(float(value), 0.0), 1.0)
                except ValueError:
                    q = 0.0
        best = max(best, q)
    return best


def answer_media_type(accept: str) -> str:
    """.npz when the client asks for it at least as much as for JSON; JSON otherwise, whatever else it asks
    for (the JSON answer is the default: an Accept the API cannot meet still gets it, never an error)."""
    npz = _quality(accept, (NPZ_MEDIA_TYPE,))
    json = _quality(accept, (JSON_MEDIA_TYPE, "application/*", "*/*"))
    return NPZ_MEDIA_TYPE if npz > 0 and npz >= json else JSON_MEDIA_TYPE
