"""The page's form, validated at the edge: a strict pydantic model of its named fields and one
validator for its grids of numbers.

A form posts text only, so every field is text until it is read here. ``PageForm`` is strict: a
field's text is read by its own validator (a whole number in its bounds, one of a few choices, a
finite number, a flag), and nothing else is coerced. Each validator's error names the form field
and says what to enter; ``read_fields`` turns the first into a FormError, which the page shows
beside that input. The grids (X, the weights: up to 64×64 cells each) are read in one call per
grid by ``read_matrix``, through pydantic's own number parser, about 3× faster than a Python loop.
Every number the form holds is read by one grammar (``read_numbers``): ASCII digits, a sign, a
point, an exponent; not the underscores, other scripts' digits, nan or inf that float() also takes.

A grid comes in one of two spellings. Without JavaScript the browser posts one field per cell
(``x-3-5``); with it, the page's script posts each grid as one field (``grid-x``: the rows joined
by ";", each row's cells by " "), so a d_model 64 edit sends a few dozen fields, not 20,000. The two
mean the same cells: a joined grid is read as if its cells had been posted one by one, and every
error still names the cell's own input.
"""

from __future__ import annotations

import functools
import math
import re
import sys
import unicodedata
from collections.abc import Mapping
from typing import Annotated, Any

import numpy as np
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import PydanticCustomError

from app.config import settings
from app.lesson.presets import PRESETS
from app.maths.attention import ATTENTION_MODES, SCORE_FUNCTIONS
from app.maths.blocks import ACTIVATIONS, NORM_PLACEMENTS
from app.maths.masks import MASK_MODES
from app.maths.positions import POSITIONAL_ENCODINGS
from app.maths.weights import ALL_WEIGHT_NAMES, BLOCK_WEIGHT_NAMES

EDITABLE = ALL_WEIGHT_NAMES + BLOCK_WEIGHT_NAMES
EDIT_RE = re.compile(rf"^({'|'.join(EDITABLE)})\.(\d{{1,4}})\.(\d{{1,4}})\.(\d{{1,4}})=(\S+)$", re.ASCII)
DECIMALS = (1, 2, 3, 4)
# The scaling lab, the cost panel, the inputs drawer, the Learn panel and its target and settings.
PANELS = ("lab", "cost", "inputs", "learn", "target")
MAX_REVEALED = 4096  # cell refs kept per quiz: every cell of a 64×64 matrix
MAX_PIN_CHARS = 4 * 1024 * 1024  # a compressed pinned state (app.state.pin); the largest is well under this
MAX_CELL_REF = settings.max_tokens * 8  # a row or column of any matrix the inspector can name
ON = ("on", "true", "1")  # how a checkbox or a link says yes


class FormError(ValueError):
    """Bad input, with the form field it belongs to so the page can show it beside that input."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _problem(field: str, message: str) -> PydanticCustomError:
    # The message travels in the context and is read from there (not formatted into a template),
    # so braces a student typed stay as typed.
    return PydanticCustomError("form", "{message}", {"field": field, "message": message})


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def is_index(text: str) -> bool:
    """A small whole number in ASCII digits: not "²" or "١", not thousands of digits."""
    return text.isascii() and text.isdigit() and len(text) <= 4


# --- one reader per kind of field ---------------------------------------------------------------


def whole(lo: int, hi: int) -> Any:
    """A whole number from lo to hi, or None when the field is empty or absent (its default then
    depends on other fields, which read_form knows)."""

    def read(value: object, info: ValidationInfo) -> int | None:
        raw = _text(value)
        if raw == "":
            return None
        if _WHOLE.fullmatch(raw) is None:  # int() would take "1_0", "١٢" and read 4,000 digits
            raise _problem(info.field_name, f"{info.field_name}: enter a whole number from {lo} to {hi}")
        number = int(raw)
        if not lo <= number <= hi:
            raise _problem(info.field_name, f"{info.field_name}: {number} is out of range; enter {lo} to {hi}")
        return number

    return Annotated[int | None, BeforeValidator(read)]


def choice(options: tuple[str, ...]) -> Any:
    """One of options; empty or absent is the first, the default."""

    def read(value: object, info: ValidationInfo) -> str:
        text = value if isinstance(value, str) and value else options[0]
        if text not in options:
            raise _problem(info.field_name, f"{info.field_name}: choose one of {', '.join(options)}")
        return text

    return Annotated[str, BeforeValidator(read)]


def _flag(value: object) -> bool:
    return value in ON


def short(limit: int, strip: bool = False) -> Any:
    """Free text kept to limit characters (a stage, a cell ref, a prediction as typed)."""

    def read(value: object) -> str:
        text = value if isinstance(value, str) else ""
        return (text.strip() if strip else text)[:limit]

    return Annotated[str, BeforeValidator(read)]


def _temperature(value: object) -> float:
    try:
        t = read_number(_text(value) or "1")
    except ValueError:
        t = math.nan
    if not 0.05 <= t <= 20:  # also refuses nan
        raise _problem("temperature", "temperature: choose a value from 0.05 to 20")
    return t


def _preset(value: object) -> str:
    key = value if isinstance(value, str) else ""
    if key and key not in PRESETS:
        raise _problem("preset", f"preset: unknown preset “{key[:30]}”")
    return key


def _shape(value: object) -> tuple[int, ...]:
    """"d_model,heads,d_k,d_v,head[,d_ff]": the sizes the form's grids were rendered with."""
    try:
        parts = _text(value).split(",")
        if not all(is_index(p.strip()) for p in parts):
            raise ValueError
        shape = tuple(int(p) for p in parts)
        r_d_model, r_heads, r_d_k, r_d_v, r_head = shape[:5]
        r_d_ff = shape[5] if len(shape) > 5 else 0  # the FFN grid's width, 0 when none was rendered
    except ValueError:
        raise _problem("shape", "shape: the form is incomplete; reload the page") from None
    s = settings
    if not (1 <= r_d_model <= s.max_d_model and 1 <= r_heads <= s.max_heads and 0 <= r_head < r_heads
            and 1 <= r_d_k <= s.max_d_head and 1 <= r_d_v <= s.max_d_head and 0 <= r_d_ff <= s.max_d_ff):
        raise _problem("shape", "shape: out of range; reload the page")
    return r_d_model, r_heads, r_d_k, r_d_v, r_head, r_d_ff


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
        if category == "Cc":
            return f"the control character U+{ord(c):04X}"
        what = "line break" if category in ("Zl", "Zp") else "invisible character"
        return f"the {what} U+{ord(c):04X}" + (f" ({name})" if name else "")
    return None


def visible(text: str) -> str:
    """The token without the characters hidden_character names (every joiner too): what a page
    without JavaScript computes with while the typed token stays in its input, marked."""
    return text if text.isprintable() else "".join(c for c in text if not _hidden(c))


@functools.cache
def token_pattern() -> str:
    """hidden_character's rule as a regular expression, for the API's schema: visible characters, a
    joiner only between two of them. Built once from this Python's Unicode tables (a tenth of a second)."""
    ranges: list[list[int]] = []
    for c in range(sys.maxunicode + 1):
        if _hidden(chr(c)):
            if ranges and ranges[-1][1] == c - 1:
                ranges[-1][1] = c
            else:
                ranges.append([c, c])

    def escaped(c: int) -> str:  # an astral character as itself: JSON Schema's regular expressions have no \\U
        return f"\\u{c:04x}" if c <= 0xFFFF else chr(c)

    hidden = "".join(escaped(a) if a == b else f"{escaped(a)}-{escaped(b)}" for a, b in ranges)
    joiners = "".join(escaped(ord(c)) for c in JOINERS)
    return f"^(?:[^{hidden}]+(?:[{joiners}][^{hidden}]+)*)?$"


def _check_tokens(tokens: tuple[str, ...], prefix: str) -> None:
    which = "source token" if prefix == "ctoken" else "token"
    for i, text in enumerate(tokens):
        if len(text) > settings.max_token_chars:  # the page counts tokens from 1
            raise _problem(f"{prefix}-{i}", f"{which} {i + 1}: at most {settings.max_token_chars} characters")
        if (hidden := hidden_character(text)) is not None:
            raise _problem(f"{prefix}-{i}", f"{which} {i + 1}: remove {hidden} from it")
    if len(tokens) > settings.max_tokens:
        raise _problem(f"{prefix}-0", f"tokens: at most {settings.max_tokens}")


def _tokens(value: object) -> tuple[str, ...]:
    tokens = tuple(t if isinstance(t, str) else "" for t in value) if isinstance(value, list) else ()
    _check_tokens(tokens, "token")
    if not tokens:
        raise _problem("token-0", "tokens: at least one token is needed")
    return tokens


def _source_tokens(value: object) -> tuple[str, ...]:
    """Kept as sent; checked by PageForm._when_used only when cross-attention is on."""
    return tuple(t if isinstance(t, str) else "" for t in value) if isinstance(value, list) else ()


def _cells(value: object) -> frozenset[tuple[int, int]]:
    """"i.j i.j …": the (query, key) cells hidden by hand."""
    cells = set()
    for part in _text(value).split()[: settings.max_tokens**2]:
        i, _, j = part.partition(".")
        if not (is_index(i) and is_index(j)):
            raise _problem("blocked", f"blocked: cannot read “{part[:20]}”")
        cells.add((int(i), int(j)))
    return frozenset(cells)


def _edits(value: object) -> dict[tuple[str, int, int, int], float]:
    """"name.head.row.col=value …": the weights edited off screen."""
    keys, texts = [], []
    for part in _text(value).split()[: settings.max_heads * 4 * settings.max_d_model * settings.max_d_head]:
        m = EDIT_RE.match(part)
        if not m:
            raise _problem("edits", f"edits: cannot read “{part[:30]}”")
        keys.append((m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))))
        texts.append(m.group(5))
    try:
        values = read_numbers(texts)
    except NumberError as e:
        name, h, r, c = keys[e.index]
        # The entry as the hidden field writes it (0-based, like every internal reference).
        raise _problem("edits", _number_message(e, f"edits: {name}.{h}.{r}.{c}")) from None
    return dict(zip(keys, values, strict=True))


def _pin(value: object) -> str:
    pin = value if isinstance(value, str) else ""
    if len(pin) > MAX_PIN_CHARS:
        raise _problem("pin", "pin: the pinned state is too large; unpin it")
    return pin


def _words(limit: int, allowed: tuple[str, ...] | None = None) -> Any:
    def read(value: object) -> frozenset[str]:
        words = _text(value).split()
        if allowed is not None:
            words = [w for w in words[:64] if w in allowed]
        return frozenset(words[:limit])

    return Annotated[frozenset[str], BeforeValidator(read)]


Flag = Annotated[bool, BeforeValidator(_flag)]
s = settings


class PageForm(BaseModel):
    """The named fields of the page's form, each read from its text. Grids of numbers, the mask's
    checkboxes and the padding marks are read by read_form, whose sizes come from ``shape``."""

    model_config = ConfigDict(strict=True, frozen=True, extra="ignore")

    # In the order a student meets them, which is the order errors are reported in.
    preset: Annotated[str, BeforeValidator(_preset)] = ""
    tokens: Annotated[tuple[str, ...], BeforeValidator(_tokens)]
    ctokens: Annotated[tuple[str, ...], BeforeValidator(_source_tokens)] = ()
    shape: Annotated[tuple[int, int, int, int, int, int], BeforeValidator(_shape)] = Field(validate_default=True,
                                                                                          default="")
    seed: whole(0, s.max_seed) = None
    scale: Flag = False
    edits: Annotated[dict[tuple[str, int, int, int], float], BeforeValidator(_edits)] = {}
    d_model: whole(1, s.max_d_model) = None
    num_heads: whole(1, s.max_heads) = None
    d_k: whole(1, s.max_d_head) = None
    d_v: whole(1, s.max_d_head) = None
    cross: Flag = False
    blocked: Annotated[frozenset[tuple[int, int]], BeforeValidator(_cells)] = frozenset()
    positional_encoding: choice(POSITIONAL_ENCODINGS) = POSITIONAL_ENCODINGS[0]
    temperature: Annotated[float, BeforeValidator(_temperature)] = 1.0
    mask: choice(MASK_MODES) = MASK_MODES[0]
    window: whole(1, s.max_tokens) = None
    blocks: whole(0, s.max_blocks) = None
    d_ff: whole(1, s.max_d_ff) = None
    score: choice(SCORE_FUNCTIONS) = SCORE_FUNCTIONS[0]
    attention: choice(ATTENTION_MODES) = ATTENTION_MODES[0]
    activation: choice(ACTIVATIONS) = ACTIVATIONS[0]
    norm: choice(NORM_PLACEMENTS) = NORM_PLACEMENTS[0]
    # The view.
    head: whole(0, s.max_heads - 1) = None
    block: whole(0, s.max_blocks - 1) = None
    stage: short(40) = ""  # the stage in view; an unknown one shows the first
    goto: short(40) = ""  # a stepper button: the stage to go to
    show_all: Flag = False
    decimals: whole(DECIMALS[0], DECIMALS[-1]) = None
    inspect: short(40) = ""
    action: short(40) = ""
    panels: _words(len(PANELS), PANELS) = frozenset()
    show_panel: short(10) = ""
    present: Flag = False
    quiz: Flag = False
    revealed: _words(MAX_REVEALED) = frozenset()
    guess: short(40, strip=True) = ""
    pin: Annotated[str, BeforeValidator(_pin)] = ""
    # The row/column form of the inspector and of a quiz's prediction, counting from 1 as the page does.
    # Read only when their button is the action (a student may leave anything in them otherwise).
    inspect_matrix: short(20) = ""
    inspect_row: short(24) = ""
    inspect_col: short(24) = ""
    guess_matrix: short(20) = ""
    guess_row: short(24) = ""
    guess_col: short(24) = ""

    @model_validator(mode="before")
    @classmethod
    def _gather(cls, form: object) -> dict[str, object]:
        """From the flat form: every named field present, and the numbered token inputs as lists."""
        if not isinstance(form, Mapping):
            raise _problem("form", "form: expected the page's fields")
        data = {name: form[name] for name in cls.model_fields if name in form}
        for prefix, key in (("token", "tokens"), ("ctoken", "ctokens")):
            tokens = []
            while f"{prefix}-{len(tokens)}" in form and len(tokens) <= settings.max_tokens:
                tokens.append(form[f"{prefix}-{len(tokens)}"])
            data[key] = tokens
        return data

    @model_validator(mode="after")
    def _when_used(self) -> PageForm:
        """The fields read only when used: the row/column form of the action, and the source
        sentence's tokens when cross-attention is on."""
        prefix = "inspect" if self.action == "inspect" else "guess" if self.action == "guess" and self.quiz else ""
        if prefix:
            for part in ("row", "col"):
                name = f"{prefix}_{part}"
                text = getattr(self, name).strip()
                if not (is_index(text) and 1 <= int(text) <= MAX_CELL_REF):
                    raise _problem(name, f"{name}: enter a whole number from 1 to {MAX_CELL_REF}")
        if self.cross:
            _check_tokens(self.ctokens, "ctoken")
        return self

    def cell_ref(self, prefix: str) -> tuple[str, int, int]:
        """(matrix, row, col) of the row/column form ``prefix``, checked by _when_used: typed from 1,
        returned from 0 as every cell reference counts."""
        row, col = (int(getattr(self, f"{prefix}_{part}")) - 1 for part in ("row", "col"))
        return getattr(self, f"{prefix}_matrix"), row, col


def read_fields(form: Mapping[str, str]) -> PageForm:
    """The form's named fields, or a FormError naming the first bad one."""
    try:
        return PageForm.model_validate(form)
    except ValidationError as e:
        raise _form_error(e.errors()[0]) from None


def _form_error(err: Any) -> FormError:
    ctx = err.get("ctx") or {}
    if err["type"] == "form":
        return FormError(ctx["field"], ctx["message"])
    field = str(err["loc"][0]) if err["loc"] else "form"
    return FormError(field, f"{field}: {err['msg']}")


# --- numbers ------------------------------------------------------------------------------------

# A number as a student types it and as the page prints it: ASCII digits, a sign (the minus sign "−" the
# page prints too), a decimal point, an exponent, spaces or tabs around. float() reads more: "1_0", "١٢",
# "nan", "inf", a non-breaking space around. On these characters alone pydantic's parser (like float)
# reads exactly the grammar above (tests/state/test_form.py checks it against a regular expression), so a
# grid's cells are checked in one pass over their text and parsed in one call.
MINUS = "\u2212"
NUMBER_CHARS = b"0123456789+-.eE \t"
_WHOLE = re.compile(r"[+-]?[0-9]{1,24}")
_FLOAT = Annotated[float, Field(strict=False, allow_inf_nan=False)]  # lax: text must be parsed
_BOUNDED = TypeAdapter(list[Annotated[_FLOAT, Field(ge=-s.max_abs_value, le=s.max_abs_value)]])
_FINITE = TypeAdapter(list[_FLOAT])


class NumberError(ValueError):
    """The first text of several that is not a number (``kind`` "empty" or "syntax") or not one in
    bounds ("range")."""

    def __init__(self, index: int, text: str, kind: str) -> None:
        super().__init__(f"text {index}: {kind}")
        self.index, self.text, self.kind = index, text, kind


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


def _number_message(e: NumberError, label: str) -> str:
    if e.kind == "empty":
        return f"{label}: enter a number"
    if e.kind == "syntax":
        return f"{label}: “{e.text.strip()[:20]}” is not a number"
    limit = s.max_abs_value
    return f"{label}: enter a finite number between −{limit:g} and {limit:g}"


# A joined grid: the field ``grid-<prefix>``, its rows joined by ROW_SEP and each row's cells by CELL_SEP.
# A number input's value is a valid floating-point number or empty, so it never holds either.
GRID_FIELD = "grid-"
ROW_SEP, CELL_SEP = ";", " "
# The most rows or columns any grid of the page has (the FFN's d_ff is the widest): a joined grid is
# never split further than this, whatever a client sends.
MAX_GRID_SIDE = max(settings.max_tokens, settings.max_d_model, settings.max_d_head, settings.max_d_ff)


def _joined(form: Mapping[str, str], prefix: str) -> str | None:
    text = form.get(GRID_FIELD + prefix)
    return text if isinstance(text, str) else None


def has_grid(form: Mapping[str, str], prefix: str) -> bool:
    """Whether the form holds the grid ``prefix`` (in either spelling): its first cell is there."""
    return _joined(form, prefix) is not None or f"{prefix}-0-0" in form


def grid_rows(form: Mapping[str, str], prefix: str, most: int) -> int:
    """How many rows of the grid ``prefix`` the form holds, at most ``most`` and at least 1: the
    last row whose first cell is there."""
    joined = _joined(form, prefix)
    if joined is not None:
        return max(1, min(most, joined.count(ROW_SEP) + 1))
    return next((r for r in range(most, 0, -1) if f"{prefix}-{r - 1}-0" in form), 1)


def _cell_texts(form: Mapping[str, str], prefix: str, rows: int, cols: int) -> list[str]:
    """The texts of the grid's rows × cols cells, row by row; "" for a cell the form lacks."""
    joined = _joined(form, prefix)
    if joined is None:
        return [form.get(f"{prefix}-{i}-{j}") or "" for i in range(rows) for j in range(cols)]
    texts: list[str] = []
    lines = joined.split(ROW_SEP, rows)  # rows + 1 parts at most: the rest, unread, in the last
    for i in range(rows):
        cells = lines[i].split(CELL_SEP, cols)[:cols] if i < len(lines) else []
        texts += cells if len(cells) == cols else cells + [""] * (cols - len(cells))
    return texts


def read_matrix(form: Mapping[str, str], prefix: str, rows: int, cols: int, label: str) -> np.ndarray:
    """The grid of inputs ``<prefix>-<row>-<col>`` (or its joined field ``grid-<prefix>``) as a
    (rows, cols) array. A missing or bad cell is a FormError naming that input, counted from 1 as
    the page counts: ``x-1-2`` with "X row 2, column 3: “abc” is not a number". Cells beyond rows
    × cols are not read, in either spelling."""
    try:
        values = read_numbers(_cell_texts(form, prefix, rows, cols))
    except NumberError as e:
        i, j = divmod(e.index, cols)
        raise FormError(f"{prefix}-{i}-{j}", _number_message(e, f"{label} row {i + 1}, column {j + 1}")) from None
    return np.array(values, dtype=np.float64).reshape(rows, cols)


def expand_grids(form: Mapping[str, str]) -> dict[str, str]:
    """The form with each joined grid written out as one field per cell, as a browser without
    JavaScript posts it (for the page that shows a student's typed values beside an error). A
    joined grid replaces any cell fields of the same grid, as in read_matrix. Stops at the most
    fields a page's form can hold."""
    joined = {name.removeprefix(GRID_FIELD): text for name, text in form.items()
              if name.startswith(GRID_FIELD) and isinstance(text, str)}
    out = {name: text for name, text in form.items()
           if not name.startswith(GRID_FIELD) and not (name.count("-") == 2 and name.split("-")[0] in joined)}
    for prefix, text in joined.items():
        for i, line in enumerate(text.split(ROW_SEP, MAX_GRID_SIDE)[:MAX_GRID_SIDE]):
            if len(out) >= settings.max_form_fields:
                return out
            for j, cell in enumerate(line.split(CELL_SEP, MAX_GRID_SIDE)[:MAX_GRID_SIDE]):
                out[f"{prefix}-{i}-{j}"] = cell
    return out


def count_values(form: Mapping[str, str]) -> int:
    """How many values the form holds, a joined grid counting each of its cells (a measure of the
    work it asks for, whichever way it was spelled)."""
    joined = sum(text.count(CELL_SEP) + text.count(ROW_SEP) for name, text in form.items()
                 if name.startswith(GRID_FIELD) and isinstance(text, str))
    return len(form) + joined

