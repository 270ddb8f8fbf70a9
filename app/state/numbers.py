"""Every number the page's form holds, read by one grammar: ASCII digits, a sign (or the minus sign
"−" the page prints), a point or a decimal comma (0,5: as French, German and Spanish classes write it, in
every language), an exponent; not the underscores, other scripts' digits, nan or inf that
float() also takes. A list of texts is checked in one pass over their characters and parsed in one call
of pydantic's number parser, about 3× faster than a Python loop."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, TypeAdapter, ValidationError

from app.config import settings
from app.i18n import gettext as _

# A number as a student types it and as the page prints it: ASCII digits, a sign (the minus sign "−" the
# page prints too), a decimal point, an exponent, spaces or tabs around. float() reads more: "1_0", "١٢",
# "nan", "inf", a non-breaking space around. On these characters alone pydantic's parser (like float)
# reads exactly the grammar above (tests/state/test_form.py checks it against a regular expression), so a
# grid's cells are checked in one pass over their text and parsed in one call.
MINUS = "\u2212"
NUMBER_CHARS = b"0123456789+-.,eE \t"
COMMA = ","  # the decimal comma of French, German and Spanish textbooks: 0,5 reads as 0.5 in every language
_FLOAT = Annotated[float, Field(strict=False, allow_inf_nan=False)]  # lax: text must be parsed
_BOUNDED = TypeAdapter(list[Annotated[_FLOAT, Field(ge=-settings.max_abs_value, le=settings.max_abs_value)]])
_FINITE = TypeAdapter(list[_FLOAT])


class NumberError(ValueError):
    """The first text of several that is not a number (``kind`` "empty" or "syntax") or not one in
    bounds ("range")."""

    def __init__(self, index: int, text: str, kind: str) -> None:
        super().__init__(f"text {index}: {kind}")
        self.index, self.text, self.kind = index, text, kind


def _point(text: str) -> str:
    """0,5 as 0.5; a text with a point too, or two commas (1,000.5, 1,2,3), keeps its comma and is no number."""
    return text.replace(COMMA, ".") if text.count(COMMA) == 1 and "." not in text else text


def _only_number_chars(text: str) -> bool:
    return text.isascii() and not text.encode().translate(None, NUMBER_CHARS)


def read_numbers(texts: list[str], bounded: bool = True) -> list[float]:
    """Each text as a finite number (within ±max_abs_value when ``bounded``), or a NumberError for
    the first that is not one."""
    adapter = _BOUNDED if bounded else _FINITE
    joined = "".join(texts)
    plain = texts
    if MINUS in joined:
        joined, plain = joined.replace(MINUS, "-"), [text.replace(MINUS, "-") for text in texts]
    if COMMA in joined:  # a decimal comma (0,5): never a list separator, since a grid's cells are apart by spaces
        plain = [_point(text) for text in plain]
        joined = "".join(plain)
    if _only_number_chars(joined):
        try:
            return adapter.validate_python(plain)
        except ValidationError as e:
            err = e.errors()[0]
            i = err["loc"][0]
            kind = "range" if err["type"] != "float_parsing" else "syntax" if texts[i].strip() else "empty"
            raise NumberError(i, texts[i], kind) from None
    for i, text in enumerate(texts):  # the first text that is not a number, one by one
        if not text.strip():
            raise NumberError(i, text, "empty")
        if not _only_number_chars(plain[i]):
            raise NumberError(i, text, "syntax")
        try:
            read_numbers([text], bounded)
        except NumberError as e:
            raise NumberError(i, text, e.kind) from None
    raise AssertionError("unreachable: the characters of some text were refused")


def read_number(text: str) -> float:
    """The finite number ``text`` spells, of any size, or a ValueError (a NumberError)."""
    return read_numbers([text], bounded=False)[0]


def is_number(text: str) -> bool:
    """Whether a prediction as typed is a finite number (in any size: it is only compared)."""
    try:
        read_number(text)
    except ValueError:
        return False
    return True


def number_message(e: NumberError, label: str) -> str:
    if e.kind == "empty":
        return _("{label}: enter a number").format(label=label)
    if e.kind == "syntax":
        return _("{label}: “{text}” is not a number").format(label=label, text=e.text.strip()[:20])
    limit = settings.max_abs_value
    return _("{label}: enter a finite number between −{limit} and {limit}").format(label=label, limit=f"{limit:g}")
