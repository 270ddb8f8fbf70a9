"""What a token may hold: visible text. The rule a form's token, the API's schema and a page without
JavaScript all read."""

from __future__ import annotations

import functools
import sys
import unicodedata

from app.i18n import gettext as _

# Characters no token may hold: controls (Cc: NUL, ESC, newline), invisible formatting (Cf: the
# right-to-left override, a zero width space, a byte order mark) and line breaks (Zl, Zp). Escaped,
# they still reorder, hide or break the text around them on the page and in what is copied from it.
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})
# The zero width non-joiner and joiner may stand between two visible characters: Persian writes them
# inside ordinary words, Indic scripts and emoji sequences need them. At an end or alone they only hide.
JOINERS = "\u200c\u200d"


def _hidden(c: str) -> bool:
    return unicodedata.category(c) in HIDDEN_CATEGORIES


def hidden_character(text: str) -> str | None:
    """What to remove from a token, in plain words ("the control character U+001B"), or None."""
    if text.isprintable():  # holds no character of Unicode's "Other" or "Separator" categories but the space
        return None
    for k, c in enumerate(text):
        if not _hidden(c) or (c in JOINERS and 0 < k < len(text) - 1 and not _hidden(text[k - 1])
                              and not _hidden(text[k + 1])):
            continue
        category, name = unicodedata.category(c), unicodedata.name(c, "").lower()
        code = f"U+{ord(c):04X}"
        if category == "Cc":
            return _("the control character {code}").format(code=code)
        code += f" ({name})" if name else ""  # the character's Unicode name stays as Unicode writes it
        if category in ("Zl", "Zp"):
            return _("the line break {code}").format(code=code)
        return _("the invisible character {code}").format(code=code)
    return None


def visible(text: str) -> str:
    """The token without the characters hidden_character names (every joiner too): what a page
    without JavaScript computes with while the typed token stays in its input, marked."""
    return text if text.isprintable() else "".join(c for c in text if not _hidden(c))


@functools.cache
def token_pattern(allowed: str = "", nonblank: bool = False) -> str:
    """hidden_character's rule as a regular expression, for the API's schema: visible characters (and
    those of ``allowed``, such as a sentence's newlines), a joiner only between two of them; with
    ``nonblank``, at least one that is not white space. Built once from this Python's Unicode tables
    (a tenth of a second)."""
    ranges: list[list[int]] = []
    for c in range(sys.maxunicode + 1):
        if _hidden(chr(c)) and chr(c) not in allowed:
            if ranges and ranges[-1][1] == c - 1:
                ranges[-1][1] = c
            else:
                ranges.append([c, c])

    def escaped(c: int) -> str:  # an astral character as itself: JSON Schema's regular expressions have no \\U
        return f"\\u{c:04x}" if c <= 0xFFFF else chr(c)

    hidden = "".join(escaped(a) if a == b else f"{escaped(a)}-{escaped(b)}" for a, b in ranges)
    joiners = "".join(escaped(ord(c)) for c in JOINERS)
    if nonblank:
        return f"^(?=[\\s\\S]*\\S)(?:[^{hidden}]+(?:[{joiners}][^{hidden}]+)*)$"
    return f"^(?:[^{hidden}]+(?:[{joiners}][^{hidden}]+)*)?$"
