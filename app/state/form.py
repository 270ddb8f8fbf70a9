"""The page's form, validated at the edge: a strict pydantic model of its named fields.

A form posts text only, so every field is text until it is read here. ``PageForm`` is strict: a
field's text is read by its own validator (a whole number in its bounds, one of a few choices, a
finite number, a flag), and nothing else is coerced. Each validator's error names the form field
and says what to enter; ``read_fields`` turns the first into a FormError, which the page shows
beside that input. The grids of numbers are read by app.state.grids, every number by
app.state.numbers, and app.state.reading puts the page's state together from all three.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import PydanticCustomError

from app.config import settings
from app.i18n import gettext as _
from app.lesson.presets import PRESETS
from app.maths.attention import ATTENTION_MODES, SCORE_FUNCTIONS
from app.maths.blocks import ACTIVATIONS, NORM_PLACEMENTS
from app.maths.masks import MASK_MODES
from app.maths.positions import POSITIONAL_ENCODINGS
from app.maths.weights import ALL_WEIGHT_NAMES, BLOCK_WEIGHT_NAMES
from app.state.numbers import NumberError, number_message, read_number, read_numbers
from app.state.tokens import hidden_character

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


_WHOLE = re.compile(r"[+-]?[0-9]{1,24}")


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
            raise _problem(info.field_name, _("{field}: enter a whole number from {lo} to {hi}").format(
                field=info.field_name, lo=lo, hi=hi))
        number = int(raw)
        if not lo <= number <= hi:
            raise _problem(info.field_name, _("{field}: {number} is out of range; enter {lo} to {hi}").format(
                field=info.field_name, number=number, lo=lo, hi=hi))
        return number

    return Annotated[int | None, BeforeValidator(read)]


def choice(options: tuple[str, ...]) -> Any:
    """One of options; empty or absent is the first, the default."""

    def read(value: object, info: ValidationInfo) -> str:
        text = value if isinstance(value, str) and value else options[0]
        if text not in options:
            raise _problem(info.field_name, _("{field}: choose one of {options}").format(
                field=info.field_name, options=", ".join(options)))
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
        raise _problem("temperature", _("temperature: choose a value from 0.05 to 20"))
    return t


def _preset(value: object) -> str:
    key = value if isinstance(value, str) else ""
    if key and key not in PRESETS:
        raise _problem("preset", _("preset: unknown preset “{key}”").format(key=key[:30]))
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
        raise _problem("shape", _("shape: the form is incomplete; reload the page")) from None
    s = settings
    if not (1 <= r_d_model <= s.max_d_model and 1 <= r_heads <= s.max_heads and 0 <= r_head < r_heads
            and 1 <= r_d_k <= s.max_d_head and 1 <= r_d_v <= s.max_d_head and 0 <= r_d_ff <= s.max_d_ff):
        raise _problem("shape", _("shape: out of range; reload the page"))
    return r_d_model, r_heads, r_d_k, r_d_v, r_head, r_d_ff


def _check_tokens(tokens: tuple[str, ...], prefix: str) -> None:
    source = prefix == "ctoken"
    for i, text in enumerate(tokens):
        if len(text) > settings.max_token_chars:  # the page counts tokens from 1
            message = (_("source token {n}: at most {most} characters") if source
                       else _("token {n}: at most {most} characters"))
            raise _problem(f"{prefix}-{i}", message.format(n=i + 1, most=settings.max_token_chars))
        if (hidden := hidden_character(text)) is not None:
            message = (_("source token {n}: remove {hidden} from it") if source
                       else _("token {n}: remove {hidden} from it"))
            raise _problem(f"{prefix}-{i}", message.format(n=i + 1, hidden=hidden))
    if len(tokens) > settings.max_tokens:
        raise _problem(f"{prefix}-0", _("tokens: at most {most}").format(most=settings.max_tokens))


def _tokens(value: object) -> tuple[str, ...]:
    tokens = tuple(t if isinstance(t, str) else "" for t in value) if isinstance(value, list) else ()
    _check_tokens(tokens, "token")
    if not tokens:
        raise _problem("token-0", _("tokens: at least one token is needed"))
    return tokens


def _source_tokens(value: object) -> tuple[str, ...]:
    """Kept as sent; checked by PageForm._when_used only when cross-attention is on."""
    return tuple(t if isinstance(t, str) else "" for t in value) if isinstance(value, list) else ()


def _cells(value: object) -> frozenset[tuple[int, int]]:
    """"i.j i.j …": the (query, key) cells hidden by hand."""
    cells = set()
    for part in _text(value).split()[: settings.max_tokens**2]:
        i, _dot, j = part.partition(".")
        if not (is_index(i) and is_index(j)):
            raise _problem("blocked", _("blocked: cannot read “{part}”").format(part=part[:20]))
        cells.add((int(i), int(j)))
    return frozenset(cells)


def _edits(value: object) -> dict[tuple[str, int, int, int], float]:
    """"name.head.row.col=value …": the weights edited off screen."""
    keys, texts = [], []
    for part in _text(value).split()[: settings.max_heads * 4 * settings.max_d_model * settings.max_d_head]:
        m = EDIT_RE.match(part)
        if not m:
            raise _problem("edits", _("edits: cannot read “{part}”").format(part=part[:30]))
        keys.append((m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))))
        texts.append(m.group(5))
    try:
        values = read_numbers(texts)
    except NumberError as e:
        name, h, r, c = keys[e.index]
        # The entry as the hidden field writes it (0-based, like every internal reference).
        raise _problem("edits", number_message(e, f"edits: {name}.{h}.{r}.{c}")) from None
    return dict(zip(keys, values, strict=True))


def _pin(value: object) -> str:
    pin = value if isinstance(value, str) else ""
    if len(pin) > MAX_PIN_CHARS:
        raise _problem("pin", _("pin: the pinned state is too large; unpin it"))
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
            raise _problem("form", _("form: expected the page's fields"))
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
                    raise _problem(name, _("{field}: enter a whole number from {lo} to {hi}").format(
                        field=name, lo=1, hi=MAX_CELL_REF))
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
