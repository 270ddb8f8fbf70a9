"""Snapshot and diff: a pinned state travels with the page as one compressed form field.

The server keeps no per-user state, so "pin this state" writes the state's permalink query
(app.state.permalink), zlib-compressed and base64url-encoded, into a hidden field ``pin``. Every later
request decodes it (app.state.reading.decode_pin), runs the pinned scenario too, and each stage shows
what changed since.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from urllib.parse import parse_qsl

from app.config import settings
from app.i18n import gettext as _
from app.i18n import ngettext
from app.lesson.presets import PRESETS
from app.state.form import FormError
from app.state.permalink import query_string, state_query
from app.state.scenario import Scenario, View

# What a pinned state may inflate to: the largest valid state's query (app.config), so a zip bomb
# stops there (an 85 KB pin inflated to 64 MB before), and never more fields than the largest state's
# query has (X, P and C one field a cell, tokens, flags).
MAX_PIN_QUERY_BYTES = settings.max_state_bytes
MAX_PIN_FIELDS = (3 * settings.max_tokens * settings.max_d_model  # x, pos, c: one field a cell
                  + 3 * settings.max_tokens + 100)  # tokens, source tokens, padding marks; settings


def encode_pin(sc: Scenario) -> str:
    """The scenario (not the view) as a compact, URL- and form-safe string."""
    query = query_string(state_query(sc, View()))
    return base64.urlsafe_b64encode(zlib.compress(query.encode(), 9)).decode("ascii")


INFLATE_STEP = 64 * 1024  # inflated bytes a step of check_pin_size (a bomb of "a=1&…" is refused after the first)
PINNED_FIELDS = ("pin", "learn_before")  # the form's fields that hold a pinned state


def check_pin_size(text: str, field: str = "pin") -> None:
    """Refuse a pin (FormError naming ``field``) that inflates past MAX_PIN_QUERY_BYTES or holds more fields than
    MAX_PIN_FIELDS, inflating it a step at a time and counting its separators, so a bomb stops at the first step
    past either bound: about a hundred microseconds for 64 MB of ``a=1&``, at most MAX_PIN_QUERY_BYTES of inflating
    (about 20 ms, with the GIL let go) for one long field. Nothing is parsed: the pin's fields are read later, by
    ``pin_fields``, only when it passed."""
    refused = FormError(field, _("pin: the pinned state cannot be read; unpin it") if field == "pin" else
                        _("learn: the state before training cannot be read; reload the preset"))
    try:
        data = base64.urlsafe_b64decode(text.encode("ascii"))
        inflate = zlib.decompressobj()
        size = fields = 0
        while data:
            chunk = inflate.decompress(data, INFLATE_STEP)
            size += len(chunk)
            fields += chunk.count(b"&")
            if size > MAX_PIN_QUERY_BYTES or fields >= MAX_PIN_FIELDS:
                raise refused
            data = inflate.unconsumed_tail
    except (ValueError, UnicodeError, binascii.Error, zlib.error):
        raise refused from None


def pin_fields(text: str) -> dict[str, str]:
    """The pinned state's form fields, inflated to at most MAX_PIN_QUERY_BYTES and MAX_PIN_FIELDS.
    Raises FormError naming ``pin`` when the text is not a pinned state (app.state.reading.decode_pin
    reads the fields into a scenario)."""
    try:
        packed = base64.urlsafe_b64decode(text.encode("ascii"))
        inflate = zlib.decompressobj()
        raw = inflate.decompress(packed, MAX_PIN_QUERY_BYTES)
        if inflate.unconsumed_tail or not inflate.eof:
            raise ValueError("truncated or too large")
        # parse_qsl counts the separators first and refuses before building anything
        return dict(parse_qsl(raw.decode("utf-8"), keep_blank_values=True, max_num_fields=MAX_PIN_FIELDS))
    except (ValueError, UnicodeError, binascii.Error, zlib.error):
        raise FormError("pin", _("pin: the pinned state cannot be read; unpin it")) from None


def describe_pin(sc: Scenario) -> str:
    """A one-line reminder of what was pinned."""
    p = PRESETS.get(sc.preset)
    name = _("“{title}”").format(title=_(p.title)) if p is not None else _("a custom state")
    t, h = len(sc.tokens), sc.num_heads
    return _("{name}: {tokens} ({token_count}, embeddings of {d_model}, {head_count})").format(
        name=name, tokens=" · ".join(sc.tokens), d_model=sc.d_model,
        token_count=ngettext("{n} token", "{n} tokens", t).format(n=t),
        head_count=ngettext("{n} head", "{n} heads", h).format(n=h))
