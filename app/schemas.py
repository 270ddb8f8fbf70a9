"""Request and response models of the JSON API. Bounds come from app.config, stated once there."""

from __future__ import annotations

from typing import Annotated

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
    scores: list[list[float]] = Field(description="T × T: Q·Kᵀ")
    scaled: list[list[float]] = Field(description="T × T: scores ÷ √d_k (equal to scores when scale is false)")
    softmax: list[list[float]] = Field(description="T × T: row-wise softmax, the attention weights")
    output: list[list[float]] = Field(description="T × d_v: softmax·V")


class WeightsOut(BaseModel):
    w_q: list[list[list[float]]]
    w_k: list[list[list[float]]]
    w_v: list[list[list[float]]]
    w_o: list[list[float]]


class AttentionResponse(BaseModel):
    """Every intermediate of the run, and the weights it used, so a client can reproduce it."""

    tokens: list[str]
    x: list[list[float]] = Field(description="T × d_model")
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
