"""Snapshot and diff: a pinned state travels with the page as one compressed form field.

The server keeps no per-user state, so "pin this state" writes the state's permalink query
(app.state.permalink), zlib-compressed and base64url-encoded, into a hidden field ``pin``. Every later
request decodes it, runs the pinned scenario too, and each stage shows what changed since.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from functools import lru_cache
from urllib.parse import parse_qsl

from app.config import settings
from app.lesson.presets import PRESETS
from app.state.form import FormError
from app.state.permalink import query_string, state_query
from app.state.scenario import Scenario, View, read_form

# What a pinned state may inflate to: the largest valid state's query (app.config), so a zip bomb
# stops there (an 85 KB pin inflated to 64 MB before), and never more fields than the largest state's
# query has (X, P and C one field a cell, tokens, flags).
MAX_PIN_QUERY_BYTES = settings.max_state_bytes
MAX_PIN_FIELDS = (3 * settings.max_tokens * settings.max_d_model  # x, pos, c: one field a cell
                  + 3 * settings.max_tokens + 100)  # tokens, source tokens, padding marks; settings
CACHED_PIN_CHARS = 64 * 1024  # pins up to this long are kept once read (64 of them: at most 4 MB of text)


def encode_pin(sc: Scenario) -> str:
    """The scenario (not the view) as a compact, URL- and form-safe string."""
    query = query_string(state_query(sc, View()))
    return base64.urlsafe_b64encode(zlib.compress(query.encode(), 9)).decode("ascii")


def decode_pin(text: str) -> Scenario:
    """The pinned scenario. Raises FormError naming ``pin`` when the text is not a pinned state.

    Every edit after a pin posts the same text, and a request both checks it (app.state.page.read_page) and
    uses it (app.view.context.page_context): a pin of ordinary size is inflated and read once, then shared (a
    Scenario is frozen). A large one is read each time, in the heavy lane (app.web.page_work.is_large_form),
    so the cache stays small."""
    if len(text) <= CACHED_PIN_CHARS:
        return _decode_cached(text)
    return _decode(text)


@lru_cache(maxsize=64)
def _decode_cached(text: str) -> Scenario:
    return _decode(text)


def _decode(text: str) -> Scenario:
    try:
        packed = base64.urlsafe_b64decode(text.encode("ascii"))
        inflate = zlib.decompressobj()
        raw = inflate.decompress(packed, MAX_PIN_QUERY_BYTES)
        if inflate.unconsumed_tail or not inflate.eof:
            raise ValueError("truncated or too large")
        # parse_qsl counts the separators first and refuses before building anything
        fields = dict(parse_qsl(raw.decode("utf-8"), keep_blank_values=True, max_num_fields=MAX_PIN_FIELDS))
    except (ValueError, UnicodeError, binascii.Error, zlib.error):
        raise FormError("pin", "pin: the pinned state cannot be read; unpin it") from None
    try:
        sc, _ = read_form(fields)
    except FormError as e:
        raise FormError("pin", f"pin: the pinned state is not valid ({e.message}); unpin it") from None
    return sc


def describe_pin(sc: Scenario) -> str:
    """A one-line reminder of what was pinned."""
    p = PRESETS.get(sc.preset)
    name = f"“{p.title}”" if p is not None else "a custom state"
    t, h = len(sc.tokens), sc.num_heads
    return (f"{name}: {' · '.join(sc.tokens)} ({t} token{'s' if t != 1 else ''}, embeddings of {sc.d_model}, "
            f"{h} head{'s' if h != 1 else ''})")
