"""Request and response models of the JSON API. Bounds come from app.config, stated once there."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from app.config import settings

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
# Each nested list is bounded by the size it stands for, so no request can make a huge array.
ModelRow = Annotated[list[Value], Field(min_length=1, max_length=settings.max_d_model)]  # d_model wide
HeadRow = Annotated[list[Value], Field(min_length=1, max_length=settings.max_d_head)]  # d_k or d_v wide
Projection = Annotated[list[HeadRow], Field(min_length=1, max_length=settings.max_d_model)]
HeadStack = Annotated[list[Projection], Field(min_length=1, max_length=settings.max_heads)]
OutProjection = Annotated[
    list[ModelRow], Field(min_length=1, max_length=settings.max_heads * settings.max_d_head)
]
Token = Annotated[str, StringConstraints(strict=True, max_length=settings.max_token_chars)]


class AttentionWeights(BaseModel):
    """Any of the four projections; those left out are drawn from the seed."""

    model_config = ConfigDict(extra="forbid")

    w_q: HeadStack | None = Field(None, description="h × d_model × d_k: head i computes Q_i = X·w_q[i].")
    w_k: HeadStack | None = Field(None, description="h × d_model × d_k.")
    w_v: HeadStack | None = Field(None, description="h × d_model × d_v.")
    w_o: OutProjection | None = Field(None, description="(h·d_v) × d_model: output = concat·w_o.")


def _shape(value: list) -> tuple[int, ...]:
    """Shape of a validated nested list, assuming it is rectangular (checked separately)."""
    dims = []
    while isinstance(value, list):
        dims.append(len(value))
        value = value[0]
    return tuple(dims)


def _check_rectangular(name: str, rows: list[list[float]], width: int) -> None:
    for i, row in enumerate(rows):
        if len(row) != width:
            raise ValueError(f"{name}[{i}] has {len(row)} numbers; every row must have {width}")


class Context(BaseModel):
    """A second sequence for cross-attention: queries come from x, keys and values from here."""

    model_config = ConfigDict(extra="forbid")

    tokens: Annotated[list[Token], Field(min_length=1, max_length=settings.max_tokens)] = Field(
        description="S token strings, one per row of context.x."
    )
    x: Annotated[list[ModelRow], Field(min_length=1, max_length=settings.max_tokens)] = Field(
        description="S × d_model embeddings (the same d_model as x)."
    )


MaskRow = Annotated[list[Annotated[bool, Field(strict=True)]], Field(min_length=1, max_length=settings.max_tokens)]


class AttentionRequest(BaseModel):
    """Input of POST /api/attention. Sizes are bounded in app.config."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "tokens": ["pool", "beats", "badminton"],
                    "x": [[0.5, 0.1, 0.1, 0.2], [0.1, 0.5, 0.2, 0.1], [0.5, 0.1, 0.2, 0.1]],
                    "num_heads": 1,
                    "seed": 0,
                    "scale": False,
                }
            ]
        },
    )

    tokens: Annotated[list[Token], Field(min_length=1, max_length=settings.max_tokens)] = Field(
        description="T token strings, one per row of x."
    )
    x: Annotated[list[ModelRow], Field(min_length=1, max_length=settings.max_tokens)] = Field(
        description="T × d_model token embeddings."
    )
    num_heads: int = Field(1, strict=True, ge=1, le=settings.max_heads, description="h")
    d_k: int | None = Field(
        None, strict=True, ge=1, le=settings.max_d_head, description="Default d_model // num_heads."
    )
    d_v: int | None = Field(None, strict=True, ge=1, le=settings.max_d_head, description="Default d_k.")
    weights: AttentionWeights | None = None
    seed: int = Field(0, strict=True, ge=0, le=settings.max_seed, description="Seeds the weights not given.")
    scale: bool = Field(True, strict=True, description="Divide the scores by √d_k.")
    temperature: float = Field(
        1.0, strict=True, allow_inf_nan=False, ge=0.05, le=20.0,
        description="Divide the scaled scores by this too: below 1 sharpens the softmax, above 1 flattens it.",
    )
    mask: Literal["none", "causal"] | Annotated[list[MaskRow], Field(min_length=1, max_length=settings.max_tokens)] = (
        Field("none", description='"none", "causal", or a T×S list of booleans: true hides key j from query i.')
    )
    context: Context | None = Field(
        None, description="Cross-attention: keys and values come from this sequence of S tokens."
    )
    positional_encoding: Literal["none", "sinusoidal", "learned", "rope", "alibi"] = Field(
        "none",
        description="sinusoidal/learned: added to x (and context); rope: rotates q and k; "
        "alibi: adds −m_h·|i − j| to head h's scaled scores.",
    )
    position_table: Annotated[list[ModelRow], Field(min_length=1, max_length=settings.max_tokens)] | None = Field(
        None, description='The learned position table (positional_encoding "learned"); seeded when absent.'
    )

    @model_validator(mode="after")
    def check_shapes(self) -> AttentionRequest:
        t, d_model = len(self.x), len(self.x[0])
        if len(self.tokens) != t:
            raise ValueError(f"tokens has {len(self.tokens)} entries but x has {t} rows; they must match")
        _check_rectangular("x", self.x, d_model)
        d_k = self.d_k if self.d_k is not None else d_model // self.num_heads
        if d_k < 1:
            raise ValueError(
                f"d_k defaults to d_model // num_heads = {d_model} // {self.num_heads} = 0; give d_k"
            )
        d_v = self.d_v if self.d_v is not None else d_k
        s_len = t
        if self.context is not None:
            s_len = len(self.context.x)
            if len(self.context.tokens) != s_len:
                raise ValueError(
                    f"context.tokens has {len(self.context.tokens)} entries but context.x has {s_len} rows"
                )
            _check_rectangular("context.x", self.context.x, d_model)
        if isinstance(self.mask, list):
            if len(self.mask) != t:
                raise ValueError(f"mask has {len(self.mask)} rows; expected T = {t}")
            _check_rectangular("mask", self.mask, s_len)
            for i, row in enumerate(self.mask):
                if all(row):
                    raise ValueError(f"mask[{i}] hides every key; a query must see at least one key")
        if self.position_table is not None:
            need = max(t, s_len)
            if len(self.position_table) < need:
                raise ValueError(f"position_table has {len(self.position_table)} rows; at least {need} are needed")
            _check_rectangular("position_table", self.position_table, d_model)
        if self.weights is None:
            return self
        h = self.num_heads
        expected = {
            "w_q": (h, d_model, d_k),
            "w_k": (h, d_model, d_k),
            "w_v": (h, d_model, d_v),
            "w_o": (h * d_v, d_model),
        }
        for name, want in expected.items():
            value = getattr(self.weights, name)
            if value is None:
                continue
            matrices = value if len(want) == 3 else [value]
            for m, matrix in enumerate(matrices):
                label = f"weights.{name}[{m}]" if len(want) == 3 else f"weights.{name}"
                _check_rectangular(label, matrix, len(matrix[0]))
            got = _shape(value)
            if got != want:
                raise ValueError(
                    f"weights.{name} has shape {'×'.join(map(str, got))}; "
                    f"expected {'×'.join(map(str, want))} for h={h}, d_model={d_model}, d_k={d_k}, d_v={d_v}"
                )
        return self


class HeadOut(BaseModel):
    q: list[list[float]] = Field(description="T × d_k")
    k: list[list[float]] = Field(description="T × d_k")
    v: list[list[float]] = Field(description="T × d_v")
    scores: list[list[float]] = Field(description="T × S: Q·Kᵀ (S = T unless cross-attention)")
    scaled: list[list[float | None]] = Field(
        description="T × S: scores ÷ √d_k ÷ temperature (+ ALiBi bias); null where the mask hides the key"
    )
    softmax: list[list[float]] = Field(description="T × S: row-wise softmax, the attention weights (0 where hidden)")
    output: list[list[float]] = Field(description="T × d_v: softmax·V")
    q_rot: list[list[float]] | None = Field(None, description="RoPE only: Q rotated by position")
    k_rot: list[list[float]] | None = Field(None, description="RoPE only: K rotated by position")
    bias: list[list[float]] | None = Field(None, description="ALiBi only: −m_h·|i − j|")


class WeightsOut(BaseModel):
    w_q: list[list[list[float]]]
    w_k: list[list[list[float]]]
    w_v: list[list[list[float]]]
    w_o: list[list[float]]


class AttentionResponse(BaseModel):
    """Every intermediate of the run, and the weights it used, so a client can reproduce it."""

    tokens: list[str]
    x: list[list[float]] = Field(description="T × d_model, with the positional encoding added when there is one")
    x_input: list[list[float]] = Field(description="T × d_model, as given")
    pe: list[list[float]] | None = Field(None, description="T × d_model: the encoding added (sinusoidal, learned)")
    context: list[list[float]] | None = Field(None, description="S × d_model, cross-attention only")
    mask: list[list[bool]] | None = Field(None, description="T × S, true = hidden")
    positional_encoding: str
    temperature: float
    heads: list[HeadOut]
    concat: list[list[float]] = Field(description="T × (h·d_v)")
    output: list[list[float]] = Field(description="T × d_model: concat·w_o")
    weights: WeightsOut
    num_heads: int
    d_k: int
    d_v: int
    scale: bool


class Health(BaseModel):
    status: str = "ok"
