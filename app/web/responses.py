"""Response models of the JSON API: every intermediate of a run, as the API returns it."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from app.config import settings
from app.maths.attention import ATTENTION_MODES, SCORE_FUNCTIONS
from app.maths.masks import MASK_MODES
from app.maths.positions import POSITIONAL_ENCODINGS
from app.web.fields import HeadCount, HeadSize, Window

Matrix = list[list[float]]
Weight = Annotated[float, Field(ge=0.0, le=1.0)]  # a softmax weight: in [0, 1] even after rounding


class LinearOut(BaseModel):
    phi_q: Matrix = Field(description="T × d_k: elu(Q) + 1")
    phi_k: Matrix = Field(description="S × d_k: elu(K) + 1")
    kv: Matrix = Field(
        description="d_k × d_v: φ(K)ᵀ·V = Σ_j φ(k_j)·v_jᵀ, built once from every key, whatever the mask. "
        "Without a mask output_i = φ(q_i)ᵀ·kv / z_i. Under a mask it does not give the output: each query's "
        "sums skip the keys hidden from it, output_i = Σ_(j seen by i) φ(q_i)·φ(k_j)·v_j / z_i = (weights·V)_i."
    )
    z: list[Annotated[float, Field(ge=0.0)]] = Field(
        description="T: the normaliser z_i = Σ_(j seen by i) φ(q_i)·φ(k_j) (every key without a mask)"
    )
    weights: list[list[Annotated[float, Field(ge=0.0)]]] = Field(
        description="T × S: the weights linear attention implies, φ(q_i)·φ(k_j) / z_i, 0 at a hidden key; "
        "each row sums to 1 and output = weights·V (without a mask the factorised form never needs them)"
    )
    output: Matrix = Field(description="T × d_v")


class HeadOut(BaseModel):
    q: Matrix = Field(description="T × d_k")
    k: Matrix = Field(description="S × d_k")
    v: Matrix = Field(description="S × d_v")
    scores: Matrix = Field(description="T × S: Q·Kᵀ, or the general or additive score (S = T unless cross-attention)")
    scaled: list[list[float | None]] = Field(
        description="T × S: scores ÷ scale_factor (+ ALiBi bias); null where the mask hides the key"
    )
    softmax: list[list[Weight]] = Field(
        description="T × S: row-wise softmax, the attention weights (0 where hidden); each row sums to 1"
    )
    output: Matrix = Field(description="T × d_v: softmax·V, or linear attention's output")
    q_rot: Matrix | None = Field(description="RoPE only: Q rotated by position")
    k_rot: Matrix | None = Field(description="RoPE only: K rotated by position")
    bias: Matrix | None = Field(description="ALiBi only: −m_h·|i − j|")
    q_w: Matrix | None = Field(description="general score only: Q·W_a")
    q_1: Matrix | None = Field(description="additive score only: Q·W₁")
    k_2: Matrix | None = Field(description="additive score only: K·W₂")
    linear: LinearOut | None = Field(description="linear attention only")
    softmax_output: Matrix | None = Field(description="linear attention only: softmax·V, to compare")


class WeightsOut(BaseModel):
    w_q: list[Matrix] = Field(description="h × d_model × d_k")
    w_k: list[Matrix] = Field(description="h × d_model × d_k")
    w_v: list[Matrix] = Field(description="h × d_model × d_v")
    w_o: Matrix = Field(description="(h·d_v) × d_model")
    w_a: list[Matrix] = Field(description="h × d_k × d_k")
    w_1: list[Matrix] = Field(description="h × d_k × d_a")
    w_2: list[Matrix] = Field(description="h × d_k × d_a")
    v_a: Matrix = Field(description="h × d_a")


class HeadGradientsOut(BaseModel):
    output: Matrix = Field(description="T × d_v: ∂L/∂(this head's output)")
    softmax: Matrix | None = Field(
        description="T × S: ∂L/∂A, exactly 0 at hidden keys (their weights are constants); null with linear attention"
    )
    scaled: Matrix | None = Field(description="T × S: ∂L/∂scaled, exactly 0 at hidden keys; null with linear attention")
    scores: Matrix | None = Field(description="T × S: ∂L/∂scores, exactly 0 at hidden keys; null with linear attention")
    q: Matrix = Field(description="T × d_k: ∂L/∂Q (before RoPE's rotation; through φ with linear attention)")
    k: Matrix = Field(description="S × d_k: ∂L/∂K (before RoPE's rotation; through φ with linear attention)")
    v: Matrix = Field(description="S × d_v: ∂L/∂V")


class WeightGradientsOut(BaseModel):
    w_q: list[Matrix] = Field(description="h × d_model × d_k")
    w_k: list[Matrix] = Field(description="h × d_model × d_k")
    w_v: list[Matrix] = Field(description="h × d_model × d_v")
    w_o: Matrix = Field(description="(h·d_v) × d_model")
    w_a: list[Matrix] | None = Field(description='h × d_k × d_k; null unless the score is "general"')
    w_1: list[Matrix] | None = Field(description='h × d_k × d_a; null unless the score is "additive"')
    w_2: list[Matrix] | None = Field(description='h × d_k × d_a; null unless the score is "additive"')
    v_a: Matrix | None = Field(description='h × d_a; null unless the score is "additive"')


class GradientsOut(BaseModel):
    """∂L/∂ each intermediate and input, each the shape of what it differentiates."""

    output: Matrix = Field(description="T × d_model: ∂L/∂output, where the backward pass starts")
    concat: Matrix = Field(description="T × (h·d_v)")
    heads: list[HeadGradientsOut] = Field(min_length=1, max_length=settings.max_heads)
    x: Matrix = Field(description="T × d_model: ∂L/∂ the input embeddings as given (x_input)")
    context: Matrix | None = Field(description="S × d_model, cross-attention only (the context is not trainable)")
    weights: WeightGradientsOut


class AttentionOut(BaseModel):
    heads: list[HeadOut]
    concat: Matrix
    output: Matrix
    weights: WeightsOut


class LayerNormOut(BaseModel):
    mean: list[float] = Field(description="T: each row's mean")
    var: list[Annotated[float, Field(ge=0.0)]] = Field(
        description="T: each row's biased variance, Σ(z − mean)²/d_model (as PyTorch's LayerNorm)"
    )
    normalized: Matrix = Field(description="T × d_model: (z − mean)/√(var + 1e-5)")
    output: Matrix = Field(description="T × d_model: γ·normalized + β")


class BlockWeightsOut(BaseModel):
    ffn_w1: Matrix
    ffn_b1: list[float]
    ffn_w2: Matrix
    ffn_b2: list[float]
    ln1_gamma: list[float]
    ln1_beta: list[float]
    ln2_gamma: list[float]
    ln2_beta: list[float]


class BlockOut(BaseModel):
    x: Matrix = Field(description="T × d_model: the block's input")
    attention: AttentionOut | None = Field(
        description="The block's attention; null for the first block, whose attention is the top level"
    )
    residual1: Matrix = Field(description="x + MultiHead(·)")
    ln1: LayerNormOut = Field(description="post-norm: of residual1; pre-norm: of x")
    h: Matrix = Field(description="after the first sub-layer")
    ffn_hidden: Matrix = Field(description="T × d_ff: ffn_in·W₁ + b₁")
    ffn_act: Matrix = Field(description="T × d_ff: the activation (ReLU, GELU or GELU_tanh) of it")
    ffn_out: Matrix = Field(description="T × d_model: ffn_act·W₂ + b₂")
    residual2: Matrix = Field(description="h + FFN(·)")
    ln2: LayerNormOut = Field(description="post-norm: of residual2; pre-norm: of h")
    output: Matrix = Field(description="T × d_model: the block's output")
    weights: BlockWeightsOut


class AttentionResponse(BaseModel):
    """Every intermediate of the run, and the weights it used, so a client can reproduce it.
    Every field is always present; the optional stages are null when they do not apply."""

    tokens: list[str]
    x: Matrix = Field(
        description="T × d_model: what the heads see: the input plus its positional encoding "
        "(pre-norm blocks: LayerNorm₁ of that)"
    )
    x_input: Matrix = Field(description="T × d_model, as given")
    pe: Matrix | None = Field(description="T × d_model: the encoding added (sinusoidal, learned)")
    context: Matrix | None = Field(description="S × d_model, cross-attention only")
    mask: list[list[bool]] | None = Field(description="T × S, true = hidden")
    mask_mode: Literal[(*MASK_MODES, "custom")] = Field(
        description='"custom" when the request gave the mask as booleans'
    )
    window: Window | None = Field(description="The local window or the stride")
    positional_encoding: Literal[POSITIONAL_ENCODINGS]
    temperature: float = Field(ge=0.05, le=20.0)
    score: Literal[SCORE_FUNCTIONS]
    attention: Literal[ATTENTION_MODES]
    scale_factor: float = Field(gt=0.0, description="What the scores were divided by: √d_k·τ, or τ when not scaling")
    heads: list[HeadOut] = Field(min_length=1, max_length=settings.max_heads)
    concat: Matrix = Field(description="T × (h·d_v)")
    output: Matrix = Field(description="T × d_model: concat·w_o")
    weights: WeightsOut
    num_heads: HeadCount
    d_k: HeadSize
    d_v: HeadSize
    scale: bool
    blocks: list[BlockOut] = Field(
        max_length=settings.max_blocks, description="One entry per transformer block; empty when blocks = 0"
    )
    final: Matrix = Field(description="T × d_model: the last block's output, or the attention output")
    loss: Annotated[float, Field(ge=0.0)] | None = Field(description="The loss asked for; null without one")
    gradients: GradientsOut | None = Field(description="Every gradient of the loss; null without one")


class TrainResponse(AttentionResponse):
    """The final state of the training, as POST /api/attention describes a run: `weights` are the trained
    weights, `x_input` the trained input, `loss` the last of `losses`, `gradients` those of the final state."""

    losses: list[Annotated[float, Field(ge=0.0)]] = Field(
        min_length=2, description="steps + 1 values: before the first step, …, after the last"
    )
    loss: Annotated[float, Field(ge=0.0)] = Field(description="The final loss: the last of losses")
    gradients: GradientsOut = Field(description="Every gradient of the loss at the final state")


class FieldError(BaseModel):
    loc: list[str] = Field(description='Where, as pydantic reports it: ["body", "x", "1", "2"]')
    field: str = Field(description='The field as a path: "x[1][2]", "weights.w_q[1]", or "body" for the whole body '
                                   '(malformed JSON). A check across fields names the field it found wrong.')
    msg: str = Field(description='The message, starting with the field: "x[1][2]: Input should be a finite number"')
    type: str = Field(description='The kind of error, e.g. "finite_number", "json_invalid", '
                                  '"shape_mismatch" (a check across fields: sizes that do not agree)')


class ValidationErrorResponse(BaseModel):
    """422: every field that is wrong, each named."""

    detail: list[FieldError] = Field(min_length=1)


class BodyTooLarge(BaseModel):
    """413: the body is over the limit (app.config.Settings.max_body_bytes)."""

    detail: str


class Health(BaseModel):
    status: Literal["ok"] = "ok"
