"""The bounded types every model of the JSON API is built from: each bound comes from app.config, stated
once there, and each nested list is bounded by the size it stands for."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, Field, StrictStr, StringConstraints

from app.config import settings
from app.state.model_state import ALLOWED_CONTROLS, check_sentence
from app.state.tokens import hidden_character, token_pattern

Value = Annotated[
    float,
    Field(
        strict=True,
        allow_inf_nan=False,
        ge=-settings.max_abs_value,
        le=settings.max_abs_value,
        description=f"A finite number with |value| <= {settings.max_abs_value:g}.",
    ),
]


def _integral_float_as_int(value: object) -> object:
    """JSON has one kind of number, and JSON Schema's "integer" includes 3.0: take it as 3. A
    fraction (3.5), a string ("3") or a boolean stays what it is, and strict int refuses it."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def whole_number(lo: int, hi: int) -> object:
    """A JSON integer from lo to hi, strict: 3.0 is taken as 3, but 3.5, "3" and true are refused.
    The bounds sit inside the validator, so that the schema states them as minimum and maximum."""
    return Annotated[int, Field(strict=True, ge=lo, le=hi), BeforeValidator(_integral_float_as_int)]


HeadCount = whole_number(1, settings.max_heads)
HeadSize = whole_number(1, settings.max_d_head)  # d_k, d_v
Seed = whole_number(0, settings.max_seed)
Window = whole_number(1, settings.max_tokens)
BlockCount = whole_number(0, settings.max_blocks)
HiddenSize = whole_number(1, settings.max_d_ff)  # d_ff
HeadIndex = whole_number(0, settings.max_heads - 1)  # heads are numbered from 0
TrainSteps = whole_number(1, settings.max_train_steps)
# Each nested list is bounded by the size it stands for, so no request can make a huge array.
ModelRow = Annotated[list[Value], Field(min_length=1, max_length=settings.max_d_model)]  # d_model wide
HeadRow = Annotated[list[Value], Field(min_length=1, max_length=settings.max_d_head)]  # d_k or d_v wide
Projection = Annotated[list[HeadRow], Field(min_length=1, max_length=settings.max_d_model)]
HeadStack = Annotated[list[Projection], Field(min_length=1, max_length=settings.max_heads)]
OutProjection = Annotated[
    list[ModelRow], Field(min_length=1, max_length=settings.max_heads * settings.max_d_head)
]


def _visible(token: str) -> str:
    if (hidden := hidden_character(token)) is not None:
        raise ValueError(f"remove {hidden} from it")
    return token


# A token is text a student can see: no control, invisible formatting or line break characters (app.state.tokens).
Token = Annotated[str, StringConstraints(strict=True, max_length=settings.max_token_chars), AfterValidator(_visible),
                  Field(json_schema_extra=lambda schema: schema.update(pattern=token_pattern()))]
ModelVector = Annotated[list[Value], Field(min_length=1, max_length=settings.max_d_model)]  # d_model long
HiddenRow = Annotated[list[Value], Field(min_length=1, max_length=settings.max_d_ff)]  # d_ff wide
HiddenVector = HiddenRow
HeadVectors = Annotated[list[HeadRow], Field(min_length=1, max_length=settings.max_heads)]  # h × d_a
SquareStack = Annotated[list[Annotated[list[HeadRow], Field(min_length=1, max_length=settings.max_d_head)]],
                        Field(min_length=1, max_length=settings.max_heads)]  # h × d_k × (d_k or d_a)

# A real model's text (/api/model, /api/decoder, /api/generate): visible characters, newlines and tabs, not only
# white space, at most model_max_chars; the schema says it too. Its tokens are counted by each model's request.
ModelText = Annotated[
    StrictStr, AfterValidator(check_sentence),
    Field(max_length=settings.model_max_chars,
          json_schema_extra=lambda schema: schema.update(pattern=token_pattern(ALLOWED_CONTROLS, nonblank=True))),
]
