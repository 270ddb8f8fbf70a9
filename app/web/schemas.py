"""Request models of the JSON API (the responses are in app.web.responses). Bounds come from app.config, stated
once there."""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from app.config import settings
from app.lesson.seed_numbers import POOL_A
from app.maths.attention import ATTENTION_MODES, SCORE_FUNCTIONS
from app.maths.backward import OPTIMIZERS, check_attention_target
from app.maths.blocks import ACTIVATIONS, NORM_PLACEMENTS
from app.maths.cost import attention_cost
from app.maths.masks import MASK_MODES, build_mask
from app.maths.positions import POSITIONAL_ENCODINGS
from app.maths.weights import WEIGHTS, Sizes, shape_table
from app.web.fields import (
    BlockCount,
    HeadCount,
    HeadIndex,
    HeadSize,
    HeadStack,
    HeadVectors,
    HiddenRow,
    HiddenSize,
    HiddenVector,
    ModelRow,
    ModelVector,
    OutProjection,
    Seed,
    SquareStack,
    Token,
    TrainSteps,
    Value,
    Window,
)


class AttentionWeights(BaseModel):
    """Any of the projections, score weights and (first block's) FFN and LayerNorm weights; those
    left out are drawn from the seed."""

    model_config = ConfigDict(extra="forbid")

    w_q: HeadStack | None = Field(None, description="h × d_model × d_k: head i computes Q_i = X·w_q[i].")
    w_k: HeadStack | None = Field(None, description="h × d_model × d_k.")
    w_v: HeadStack | None = Field(None, description="h × d_model × d_v.")
    w_o: OutProjection | None = Field(None, description="(h·d_v) × d_model: output = concat·w_o.")
    w_a: SquareStack | None = Field(None, description='h × d_k × d_k: the "general" score q_i·w_a[h]·k_jᵀ.')
    w_1: SquareStack | None = Field(None, description='h × d_k × d_a (d_a = d_k): the "additive" score\'s W₁.')
    w_2: SquareStack | None = Field(None, description="h × d_k × d_a: the additive score's W₂.")
    v_a: HeadVectors | None = Field(None, description="h × d_a: the additive score's v_a.")
    ffn_w1: Annotated[list[HiddenRow], Field(min_length=1, max_length=settings.max_d_model)] | None = Field(
        None, description="d_model × d_ff: the first block's FFN, first layer."
    )
    ffn_b1: HiddenVector | None = Field(None, description="d_ff")
    ffn_w2: Annotated[list[ModelRow], Field(min_length=1, max_length=settings.max_d_ff)] | None = Field(
        None, description="d_ff × d_model: the first block's FFN, second layer."
    )
    ffn_b2: ModelVector | None = Field(None, description="d_model")
    ln1_gamma: ModelVector | None = Field(None, description="d_model: the first LayerNorm's gain (default 1).")
    ln1_beta: ModelVector | None = Field(None, description="d_model: its bias (default 0).")
    ln2_gamma: ModelVector | None = Field(None, description="d_model: the second LayerNorm's gain.")
    ln2_beta: ModelVector | None = Field(None, description="d_model: its bias.")


def _shape(value: list) -> tuple[int, ...]:
    """Shape of a validated nested list, assuming it is rectangular (checked separately)."""
    dims = []
    while isinstance(value, list):
        dims.append(len(value))
        value = value[0]
    return tuple(dims)


def mismatch(field: str, what: str) -> PydanticCustomError:
    """A check across fields failed: "<field>: <what>". Its loc can only be the whole body, so the
    error carries the field it found wrong, and the 422 names that field (app.main.validation_error)."""
    return PydanticCustomError("shape_mismatch", "{message}", {"field": field, "message": what})


def _check_rectangular(name: str, rows: list[list[float]], width: int) -> None:
    for i, row in enumerate(rows):
        if len(row) != width:
            raise mismatch(f"{name}[{i}]", f"has {len(row)} numbers; every row must have {width}")


class Context(BaseModel):
    """A second sequence for cross-attention: queries come from x, keys and values from here."""

    model_config = ConfigDict(extra="forbid")

    tokens: Annotated[list[Token], Field(min_length=1, max_length=settings.max_tokens)] = Field(
        description="S token strings, one per row of context.x."
    )
    x: Annotated[list[ModelRow], Field(min_length=1, max_length=settings.max_tokens)] = Field(
        description="S × d_model embeddings (the same d_model as x)."
    )


TargetRow = Annotated[list[Value], Field(min_length=1, max_length=max(settings.max_d_model, settings.max_tokens))]


class Loss(BaseModel):
    """A loss on the run, which asks for its value and every gradient of it."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["mse", "attention"] = Field(
        description="mse: L = mean over all T·d_model entries of (output − target)², output = concat·W_O. "
        "attention: L = −(1/T)·Σ_i Σ_j target_ij·log A_ij, the cross-entropy of head `head`'s weights A "
        "against a target alignment."
    )
    target: Annotated[list[TargetRow], Field(min_length=1, max_length=settings.max_tokens)] = Field(
        description="mse: T × d_model. attention: T × S, each row non-negative and summing to 1 (within 1e-6), "
        "with no weight on a key the mask hides."
    )
    head: HeadIndex | None = Field(None, description="attention only: the head whose weights are compared, from 0.")


MaskRow = Annotated[list[Annotated[bool, Field(strict=True)]], Field(min_length=1, max_length=settings.max_tokens)]


# The examples in the API's docs: seed 001's pool sentence (the "pool" preset).
EXAMPLE_TOKENS = ["pool", "beats", "badminton"]
EXAMPLE_X = [list(row) for row in POOL_A]


class AttentionRequest(BaseModel):
    """Input of POST /api/attention. Sizes are bounded in app.config."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "tokens": EXAMPLE_TOKENS,
                    "x": EXAMPLE_X,
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
    num_heads: HeadCount = Field(1, description="h")
    d_k: HeadSize | None = Field(None, description="Default d_model // num_heads.")
    d_v: HeadSize | None = Field(None, description="Default d_k.")
    weights: AttentionWeights | None = None
    seed: Seed = Field(0, description="Seeds the weights not given.")
    scale: bool = Field(True, strict=True, description="Divide the scores by √d_k.")
    temperature: float = Field(
        1.0, strict=True, allow_inf_nan=False, ge=0.05, le=20.0,
        description="Divide the scaled scores by this too: below 1 sharpens the softmax, above 1 flattens it.",
    )
    mask: Literal[MASK_MODES] | Annotated[
        list[MaskRow], Field(min_length=1, max_length=settings.max_tokens)
    ] = Field(
        "none",
        description='"none", "causal", "local" (keys within ±window), "strided" (|i − j| < window or '
        "(i − j) mod window = 0), or a T×S list of booleans: true hides key j from query i.",
    )
    window: Window | None = Field(
        None,
        description="local: the window half-width (default 2); strided: the stride (default ⌈√S⌉).",
    )
    score: Literal[SCORE_FUNCTIONS] = Field(
        "dot",
        description="q_i and k_j are rows of Q and K. dot: q_i·k_j (÷√d_k when scale); general (Luong): "
        "q_i·W_a·k_jᵀ (÷√d_k when scale); additive (Bahdanau): v_a·tanh(q_i·W₁ + k_j·W₂) = "
        "Σ_a (v_a)_a·tanh((Q·W₁)_ia + (K·W₂)_ja), never scaled.",
    )
    attention: Literal[ATTENTION_MODES] = Field(
        "softmax",
        description="linear: φ(q)ᵀ(φ(K)ᵀV)/φ(q)ᵀΣφ(k) with φ = elu + 1; each head's output is linear "
        "attention's, and softmax_output keeps softmax's for comparison.",
    )
    blocks: BlockCount = Field(
        0,
        description="0: attention only. 1–4: transformer blocks (attention, Add & Norm, FFN, Add & Norm); "
        "the top-level fields describe the first block's attention.",
    )
    d_ff: HiddenSize | None = Field(None, description="FFN hidden size; default 4·d_model.")
    activation: Literal[ACTIVATIONS] = Field(
        "relu",
        description="The FFN's activation. relu: max(0, z). gelu: exact, z·Φ(z) = ½·z·(1 + erf(z/√2)), as PyTorch's "
        "default and BERT. gelu_tanh: GPT-2's approximation ½·z·(1 + tanh(√(2/π)·(z + 0.044715·z³))), "
        "PyTorch's approximate=\"tanh\"; within 4.74e-4 of gelu.",
    )
    norm: Literal[NORM_PLACEMENTS] = Field(
        "post", description="post: LayerNorm(x + sublayer(x)) as in the paper; pre: x + sublayer(LayerNorm(x))."
    )
    context: Context | None = Field(
        None, description="Cross-attention: keys and values come from this sequence of S tokens."
    )
    positional_encoding: Literal[POSITIONAL_ENCODINGS] = Field(
        "none",
        description="sinusoidal: PE(pos, 2i) = sin(pos/10000^(2i/d_model)), PE(pos, 2i+1) = cos(same), pos and "
        "columns from 0 (an odd d_model ends on a sine); learned: a table; both added to x (and context). "
        "rope: turns each pair of adjacent dimensions (2m, 2m+1) of q and k at position pos by pos·10000^(−2m/d_k) "
        "(an odd last dimension is not turned; keys at their own positions in the context); "
        "alibi: adds −m_h·|i − j| to head h's scaled scores, m_h = 2^(−8h/H) for H heads, H a power of two; "
        "otherwise the slopes for n = 2^⌊log₂ H⌋, then 2^(−8(2k − 1)/(2n)) for k = 1 … H − n (the ALiBi paper's rule).",
    )
    position_table: Annotated[list[ModelRow], Field(min_length=1, max_length=settings.max_tokens)] | None = Field(
        None, description='The learned position table (positional_encoding "learned"); seeded when absent.'
    )
    loss: Loss | None = Field(
        None,
        description="Ask for the loss and every gradient ∂L/∂· of it (attention without transformer blocks "
        "only). Without it, the response's loss and gradients are null.",
    )

    @model_validator(mode="after")
    def check_shapes(self) -> AttentionRequest:
        t, d_model = len(self.x), len(self.x[0])
        if len(self.tokens) != t:
            raise mismatch("tokens", f"has {len(self.tokens)} entries but x has {t} rows; they must match")
        _check_rectangular("x", self.x, d_model)
        d_k = self.d_k if self.d_k is not None else d_model // self.num_heads
        if d_k < 1:
            raise mismatch("d_k", f"defaults to d_model // num_heads = {d_model} // {self.num_heads} = 0; give d_k")
        d_v = self.d_v if self.d_v is not None else d_k
        s_len = t
        if self.context is not None:
            s_len = len(self.context.x)
            if len(self.context.tokens) != s_len:
                raise mismatch("context.tokens",
                               f"has {len(self.context.tokens)} entries but context.x has {s_len} rows")
            _check_rectangular("context.x", self.context.x, d_model)
        if isinstance(self.mask, list):
            if len(self.mask) != t:
                raise mismatch("mask", f"has {len(self.mask)} rows; expected T = {t}")
            _check_rectangular("mask", self.mask, s_len)
        hidden = build_mask(self.mask, t, s_len, self.window)
        if hidden is not None and hidden.all(axis=1).any():
            i = int(np.argmax(hidden.all(axis=1)))
            raise mismatch(f"mask[{i}]", "hides every key; a query must see at least one key")
        if self.position_table is not None:
            need = max(t, s_len)
            if len(self.position_table) < need:
                raise mismatch("position_table", f"has {len(self.position_table)} rows; at least {need} are needed")
            _check_rectangular("position_table", self.position_table, d_model)
        if self.weights is None:
            return self
        h = self.num_heads
        d_ff = self.d_ff if self.d_ff is not None else 4 * d_model
        expected = shape_table(tuple(WEIGHTS), Sizes(d_model=d_model, h=h, d_k=d_k, d_v=d_v, d_ff=d_ff))
        for name, want in expected.items():
            value = getattr(self.weights, name)
            if value is None:
                continue
            if len(want) > 1:
                matrices = value if len(want) == 3 else [value]
                for m, matrix in enumerate(matrices):
                    label = f"weights.{name}[{m}]" if len(want) == 3 else f"weights.{name}"
                    _check_rectangular(label, matrix, len(matrix[0]))
            sizes = f"for h={h}, d_model={d_model}, d_k={d_k}, d_v={d_v}, d_ff={d_ff}"
            got = _shape(value)
            if got != want:
                raise mismatch(f"weights.{name}",
                               f"has shape {'×'.join(map(str, got))}; expected {'×'.join(map(str, want))} {sizes}")
            if len(want) == 3:  # _shape reads head 0 only: every head must match it
                for m, matrix in enumerate(value):
                    if _shape(matrix) != want[1:]:
                        raise mismatch(f"weights.{name}[{m}]", f"has shape {'×'.join(map(str, _shape(matrix)))}; "
                                                               f"expected {'×'.join(map(str, want[1:]))} {sizes}")
        return self

    @model_validator(mode="after")
    def check_loss(self) -> AttentionRequest:
        """The loss against the run it differentiates (after check_shapes, so the sizes agree)."""
        loss = self.loss
        if loss is None:
            return self
        if self.blocks:
            raise mismatch("loss", "gradients cover attention without transformer blocks; set blocks to 0")
        t, d_model = len(self.x), len(self.x[0])
        s_len = len(self.context.x) if self.context is not None else t
        _check_rectangular("loss.target", loss.target, len(loss.target[0]))
        got = "×".join(map(str, _shape(loss.target)))
        if loss.kind == "mse":
            if loss.head is not None:
                raise mismatch("loss.head", "only the attention loss takes a head")
            if _shape(loss.target) != (t, d_model):
                raise mismatch("loss.target", f"has shape {got}; the mse target is T×d_model = {t}×{d_model}")
            return self
        if self.attention == "linear":
            raise mismatch("loss.kind", "linear attention has no softmax weights to compare; use the mse loss")
        if loss.head is None:
            raise mismatch("loss.head", "the attention loss needs the head whose weights it compares (from 0)")
        if loss.head >= self.num_heads:
            raise mismatch("loss.head", f"is {loss.head}; the run has heads 0 to {self.num_heads - 1}")
        if _shape(loss.target) != (t, s_len):
            raise mismatch("loss.target", f"has shape {got}; the attention target is T×S = {t}×{s_len}")
        try:
            check_attention_target(np.array(loss.target), (t, s_len), build_mask(self.mask, t, s_len, self.window))
        except ValueError as e:
            raise mismatch("loss.target", f"{e}") from None
        return self


Trainable = Literal["w_q", "w_k", "w_v", "w_o", "x"]


class TrainRequest(AttentionRequest):
    """Input of POST /api/train: a run as for POST /api/attention, a loss, and how to descend it."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "tokens": EXAMPLE_TOKENS,
                    "x": EXAMPLE_X,
                    "loss": {"kind": "attention", "head": 0,
                             "target": [[1, 0, 0], [0, 1, 0], [0, 0, 1]]},
                    "optimizer": "adam",
                    "steps": 20,
                }
            ]
        },
    )

    loss: Loss = Field(description="The loss to descend; the response's loss and gradients are of the final state.")
    optimizer: Literal[OPTIMIZERS] = Field(
        "sgd",
        description="sgd: p ← p − lr·∂L/∂p. adam: β₁ = 0.9, β₂ = 0.999, ε = 1e-8, bias-corrected, no weight decay.",
    )
    learning_rate: float = Field(
        0.1, strict=True, allow_inf_nan=False, gt=0.0, le=settings.max_learning_rate,
        description="lr, for either optimizer (default 0.1).",
    )
    steps: TrainSteps = Field(
        description=f"Optimisation steps, 1–{settings.max_train_steps}; also steps × the operations of one "
        f"forward pass (multiply-adds plus elementwise, as the cost panel counts them) must stay within "
        f"{settings.max_train_operations:,}."
    )
    train: Annotated[list[Trainable], Field(min_length=1, max_length=5)] = Field(
        ["w_q", "w_k", "w_v", "w_o"],
        description='What to train: any of the projections and "x", the input embeddings (before a positional '
        "encoding). The score functions' weights, a learned position table and the context stay fixed.",
    )

    @model_validator(mode="after")
    def check_training(self) -> TrainRequest:
        if len(set(self.train)) != len(self.train):
            raise mismatch("train", "names a parameter twice")
        t, d_model = len(self.x), len(self.x[0])
        d_k = self.d_k if self.d_k is not None else d_model // self.num_heads
        cost = attention_cost(
            t=t, s=len(self.context.x) if self.context is not None else t, d_model=d_model,
            num_heads=self.num_heads, d_k=d_k, d_v=self.d_v if self.d_v is not None else d_k,
            score=self.score, attention=self.attention, scale=self.scale,
        )
        per_step = cost.total_macs + cost.total_elementwise
        if self.steps * per_step > settings.max_train_operations:
            most = max(settings.max_train_operations // per_step, 0)
            raise mismatch("steps", f"is {self.steps}, but one forward pass of these sizes is {per_step:,} "
                                    f"operations and a request may train for {settings.max_train_operations:,}: "
                                    f"at most {most} steps here")
        return self
