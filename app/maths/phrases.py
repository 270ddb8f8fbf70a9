"""A text the maths layer builds from numbers and tokens, kept English and said in the reader's language where shown.

``Phrase(N_("Score of query {query} ({token})…"), query=2, token="bank")`` IS the English text (a ``str``: tests,
caches, comparisons and the JSON API see exactly the words they always saw), and it remembers its message and
values, so the page can say it in the request's language at display time: ``say(e.title)``. A value may itself be
a Phrase (a " (head 2)" suffix), said the same way; a token or a number is never translated. The message is
always formatted, so its literal braces (LaTeX's) are written doubled: ``\\text{{Scores}}``.
"""

from __future__ import annotations

from typing import Any

from app.i18n import gettext


def _rebuild(msgid: str, values: dict[str, Any]) -> Phrase:
    return Phrase(msgid, **values)


class Phrase(str):
    """English text made of a catalogue message (marked with N_) and the values of its named placeholders."""

    msgid: str
    values: dict[str, Any]

    def __new__(cls, msgid: str, **values: Any) -> Phrase:
        self = super().__new__(cls, msgid.format(**values))
        self.msgid = msgid
        self.values = values
        return self

    def __reduce__(self):  # pickled (the heavy lane's process, deep copies) as its message and values
        return _rebuild, (self.msgid, self.values)


def say(text: str) -> str:
    """``text`` in the request's language: a Phrase's message translated, then filled with its values (themselves
    said); any other text looked up as it is. Display time only: never inside a cached computation."""
    if isinstance(text, Phrase):
        return gettext(text.msgid).format(**{k: say(v) if isinstance(v, Phrase) else v
                                            for k, v in text.values.items()})
    return gettext(text)
