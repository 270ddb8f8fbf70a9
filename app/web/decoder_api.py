"""POST /api/decoder and POST /api/generate: a language model (SmolLM2-135M-Instruct, Llama) on a text —
every head's causal attention, the next token's candidates at a temperature, the logit lens, one head's
step-through on request; and the text written on, token by token through a KV cache. Why it answered what it
did is app.web.why_api's.

The model is the language model's service's (app.serving.real_models): the same request is computed once however
many ask, and kept; questions wait their turn in its fair queue (503 with Retry-After when it is full), in a worker
thread, while a class's small requests go on.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.config import settings
from app.maths.attribution import attention_rollout, qk_map
from app.maths.decoder_files import DecoderFiles
from app.maths.llama import DecoderContinuation, DecoderRun, head_at, lens
from app.maths.registry import DECODER
from app.maths.sampling import generate, sampling_distribution
from app.serving.real_models import language_model
from app.state.decoder_state import candidates_of
from app.web.api_answers import RESPONSES, JSONBodyRoute, served_answer
from app.web.decoder_requests import D_K, D_MODEL, HEADS, LAYERS, DecoderHeadRef, Head, Layer, TextRequest
from app.web.fields import Seed, whole_number
from app.web.schemas import mismatch

router = APIRouter(route_class=JSONBodyRoute)

CandidateCount = whole_number(1, 50)
NewTokens = whole_number(1, settings.decoder_max_new_tokens)
TopK = whole_number(1, DECODER.config.vocab)
Temperature = Annotated[float, Field(strict=True, gt=0, le=5, allow_inf_nan=False)]
Fraction = Annotated[float, Field(strict=True, gt=0, le=1, allow_inf_nan=False)]


class _Cuts(BaseModel):
    top_k: TopK | None = Field(default=None, description="Draw only from the k most likely tokens.")
    top_p: Fraction | None = Field(
        default=None, description="Draw only from the fewest most likely tokens whose probabilities reach p.")
    min_p: Fraction | None = Field(
        default=None, description="Draw only from the tokens at least min_p times as likely as the likeliest.")


class DecoderRequest(TextRequest, _Cuts):
    """Input of POST /api/decoder."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "examples": [{"text": "The capital of France is"},
                     {"text": "The capital of France is", "layer": 3, "head": 4, "temperature": 0.7, "top": 5}],
    })
    layer: Layer | None = Field(default=None, description="With head: add that head's step-through (from 0).")
    head: Head | None = Field(default=None, description="With layer: the query head, counted from 0.")
    temperature: Temperature = Field(default=1.0, description="τ of the candidates' softmax(logits/τ), 0 < τ ≤ 5.")
    top: CandidateCount = Field(default=10, description="How many candidates, 1–50.")

    @model_validator(mode="after")
    def _across_fields(self) -> DecoderRequest:
        if (self.layer is None) != (self.head is None):
            raise mismatch("head" if self.head is None else "layer", "give layer and head together")
        self._read_tokens()
        return self


class GenerateRequest(TextRequest, _Cuts):
    """Input of POST /api/generate."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "examples": [{"text": "The capital of France is", "max_new_tokens": 8, "temperature": 0},
                     {"text": "Once upon a time", "max_new_tokens": 16, "temperature": 0.8, "top_p": 0.9, "seed": 7}],
    })
    max_new_tokens: NewTokens = Field(
        description=f"Tokens to write, 1–{settings.decoder_max_new_tokens}; it stops earlier after <|im_end|>.")
    temperature: float = Field(strict=True, ge=0, le=5, allow_inf_nan=False,
                               description="0: greedy (the most likely token each time); else τ of softmax(logits/τ)")
    seed: Seed = Field(default=0, description="The sampler's seed: the same seed gives the same text.")

    @model_validator(mode="after")
    def _across_fields(self) -> GenerateRequest:
        self._read_tokens()
        return self


class Candidate(BaseModel):
    id: int
    token: str = Field(description="The token's piece as the vocabulary spells it ('Ġ' is a space)")
    logit: float
    probability: float = Field(description="softmax(logits/τ) at this token")
    drawn: float | None = Field(default=None, description="With top_k, top_p or min_p: the probability a sampler "
                                                          "draws it with (0 when cut; those left renormalised)")


class Next(BaseModel):
    temperature: float
    candidates: list[Candidate]


class LensRow(BaseModel):
    id: int
    token: str
    probability: float


class QKPoint(BaseModel):
    token: str
    kind: str = Field(description="'q' (a query) or 'k' (a key)")
    x: float
    y: float


class QKMap(BaseModel):
    points: list[QKPoint] = Field(description="Every token's query and key (after RoPE), projected to 2-D by one "
                                              "PCA fitted on both (AttentionViz): close points attend strongly")
    explained_variance: list[float] = Field(description="[2]: the share of the variance each axis explains")


class DecoderHeadSteps(BaseModel):
    layer: int
    head: int
    kv_head: int = Field(description="The key/value head this query head shares (from 0)")
    x: list[list[float]] = Field(description=f"(T, {D_MODEL}) RMSNorm of the layer's input, the head's input")
    q_pre: list[list[float]] = Field(description=f"(T, {D_K}) x·W_Q before RoPE")
    k_pre: list[list[float]] = Field(description=f"(T, {D_K}) x·W_K before RoPE")
    q: list[list[float]] = Field(description=f"(T, {D_K}) after RoPE (GGUF's interleaved pairs)")
    k: list[list[float]] = Field(description=f"(T, {D_K}) after RoPE")
    v: list[list[float]] = Field(description=f"(T, {D_K}) x·W_V")
    scores: list[list[float]] = Field(description="(T, T) Q·Kᵀ")
    scaled: list[list[float]] = Field(description=f"(T, T) ÷ √{D_K}")
    masked: list[list[float | None]] = Field(description="(T, T) the causal mask: null (−∞) above the diagonal")
    softmax: list[list[float]] = Field(description="(T, T) the attention weights")
    output: list[list[float]] = Field(description=f"(T, {D_K}) softmax·V")
    qk_map: QKMap


class DecoderResponse(BaseModel):
    model: str
    tokens: list[str] = Field(description="The byte-level BPE pieces as Hugging Face writes them ('Ġcapital')")
    ids: list[int]
    attention: list[list[list[list[float]]]] = Field(
        description=f"[{LAYERS}][{HEADS}][T][T]: every head's attention weights, 0 above the diagonal")
    rollout: list[list[float]] = Field(
        description="(T, T) attention rollout (Abnar & Zuidema, 2020): per layer the heads' mean attention, "
                    "0.5·A + 0.5·I, rows normalised, multiplied from the first layer up; row i: how much of token "
                    "i's last row flows, on that rule, from each input token (on this model the first token takes "
                    "≥ 0.999 of every row)")
    next: Next
    lens: list[LensRow] = Field(description=f"[{LAYERS}]: the last position's top token after each layer, read "
                                            "through the final RMSNorm and the LM head (the logit lens)")
    heads_off: list[DecoderHeadRef]
    head: DecoderHeadSteps | None = None


class GeneratedToken(BaseModel):
    id: int
    token: str
    probability: float = Field(description="Its probability under softmax(logits/τ) (τ = 1 when greedy)")
    candidates: list[Candidate] = Field(description="The 5 most likely tokens it was chosen among")


class GenerateResponse(BaseModel):
    model: str
    tokens: list[str] = Field(description="The prompt's tokens")
    steps: list[GeneratedToken]
    text: str = Field(description="The tokens written, decoded")


def decoder_document(model: DecoderFiles, run: DecoderRun, temperature: float = 1.0, top: int = 10,
                     layer: int | None = None, head: int | None = None,
                     cuts: tuple[int | None, float | None, float | None] = (None, None, None)) -> dict:
    lens_ids, lens_probs = lens(model, run.hidden_states[1:, -1])  # (N,) each
    candidates = candidates_of(model, run.logits, temperature, top)
    if any(c is not None for c in cuts):  # what a sampler with these cut-offs draws each candidate with
        drawn = sampling_distribution(run.logits, temperature, *cuts)  # (vocab,)
        candidates = [{**c, "drawn": float(drawn[c["id"]])} for c in candidates]
    doc = {
        "model": model.name, "tokens": list(run.tokens), "ids": run.ids, "attention": run.attention,
        "rollout": attention_rollout(run.attention),
        "next": {"temperature": temperature, "candidates": candidates},
        "lens": [{"id": int(i), "token": model.vocabulary[i], "probability": float(p)}
                 for i, p in zip(lens_ids, lens_probs, strict=True)],
        "heads_off": [{"layer": la, "head": h} for la, h in sorted(run.heads_off)],
    }
    if layer is not None and head is not None:
        heads = head_at(model, run, layer)
        g = model.config.kv_head(head)
        doc["head"] = {
            "layer": layer, "head": head, "kv_head": g, "x": heads.x, "q_pre": heads.q_pre[head],
            "k_pre": heads.k_pre[g], "q": heads.q[head], "k": heads.k[g], "v": heads.v[g],
            "scores": heads.scores[head], "scaled": heads.scaled[head],
            "masked": np.ma.masked_invalid(heads.masked[head]), "softmax": heads.weights[head],
            "qk_map": qk_map_document(run.tokens, heads.q[head], heads.k[g]),
            "output": heads.output[head],
        }
    return doc


def qk_map_document(tokens: tuple[str, ...], q: np.ndarray, k: np.ndarray) -> dict:
    qs, ks, explained = qk_map(q, k)
    return {"points": [{"token": t, "kind": kind, "x": float(p[0]), "y": float(p[1])}
                       for kind, points in (("q", qs), ("k", ks)) for t, p in zip(tokens, points, strict=True)],
            "explained_variance": explained}


def generate_document(model: DecoderFiles, req: GenerateRequest) -> dict:
    steps = generate(DecoderContinuation(model, req.ids, req.off), req.max_new_tokens, req.temperature, req.top_k,
                     req.top_p, req.seed, req.min_p)
    shown = req.temperature or 1.0
    return {
        "model": model.name, "tokens": [model.vocabulary[i] for i in req.ids],
        "steps": [{"id": s.id, "token": model.vocabulary[s.id], "probability": s.probability,
                   "candidates": candidates_of(model, s.logits, shown, 5)} for s in steps],
        "text": model.tokenizer.decode([s.id for s in steps], skip_special_tokens=False),
    }


@router.post("/api/decoder", response_model=DecoderResponse, tags=["model"], responses=RESPONSES, description=(
    f"Run {DECODER.name} (Llama: {DECODER.layers} layers × {DECODER.heads} query heads sharing "
    f"{DECODER.config.kv_heads} key/value heads, d_model {DECODER.d_model}, RoPE, a causal mask) on `text`: its "
    "byte-level BPE `tokens` and `ids`, every head's `attention`, the `next` token's `top` candidates at "
    "`temperature`, and the logit `lens` (the last position's top token after each layer). With `layer` and `head`, "
    "also that head's step-through (`head`). The numbers agree with Hugging Face transformers' reading of the same "
    "4-bit GGUF file to float32 precision."))
async def decoder(req: DecoderRequest, request: Request) -> Response:
    service = language_model()

    def body() -> dict:
        return decoder_document(service.files(), service.run(req.text, req.off), req.temperature, req.top, req.layer,
                                req.head, (req.top_k, req.top_p, req.min_p))

    return await served_answer(request, service, req, body)


@router.post("/api/generate", response_model=GenerateResponse, tags=["model"], responses=RESPONSES)
async def generate_text(req: GenerateRequest, request: Request) -> Response:
    """Write up to `max_new_tokens` tokens after `text`, each through one token's forward pass with a KV cache.
    `temperature` 0 is greedy (token for token what transformers' `generate(do_sample=False)` writes);
    otherwise each token is drawn from softmax(logits/τ), cut to `top_k` and `top_p`, with `seed`."""
    service = language_model()
    return await served_answer(request, service, req, lambda: generate_document(service.files(), req))

