"""Why the language model answered what it did, as JSON: POST /api/decoder/attribution (each part's direct share of
a next token's logit), POST /api/decoder/patching (which activations carry the difference between two texts) and
POST /api/decoder/saliency (which input words made the answer). Each is a question for the language model's
service (app.serving.real_models), computed once however many ask, in its fair queue.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from anyio import to_thread
from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from app.maths.attribution import logit_attribution
from app.maths.decoder_files import DecoderFiles
from app.maths.llama import DecoderRun
from app.maths.saliency import DEFAULT_BASELINE, DEFAULT_STEPS, MAX_STEPS, Saliency
from app.serving.real_models import language_model
from app.state.decoder_state import read_next_token
from app.state.form import FormError
from app.state.patching_state import PATCHING_MAX_TOKENS, PatchingRead, read_patching_page
from app.view.patching_view import patched
from app.web.api_answers import RESPONSES, JSONBodyRoute, served_answer
from app.web.decoder_requests import HEADS, LAYERS, Text, TextRequest, TokenRef
from app.web.fields import whole_number
from app.web.schemas import mismatch

router = APIRouter(route_class=JSONBodyRoute)

Steps = whole_number(1, MAX_STEPS)


class AttributionRequest(TextRequest):
    """Input of POST /api/decoder/attribution."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "examples": [{"text": "The capital of France is"},
                     {"text": "The capital of France is", "target": " Paris", "contrast": " Rome"}],
    })
    target: int | str | None = Field(
        default=None, description="The next token to explain: its id, its piece ('ĠParis') or a one-token text "
                                  "(' Paris'); by default the most likely.")
    contrast: int | str | None = Field(
        default=None, description="With it, explain logit(target) − logit(contrast): why the target and not this.")
    _target: int = PrivateAttr(default=0)
    _contrast: int | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _across_fields(self) -> AttributionRequest:
        self._read_tokens()
        model = language_model().files()
        for name in ("target", "contrast"):
            value = getattr(self, name)
            if value is None:
                continue
            try:
                setattr(self, f"_{name}", read_next_token(model, value))
            except ValueError as e:
                raise mismatch(name, str(e)) from None
        if self.contrast is not None and self._contrast == self._target and self.target is not None:
            raise mismatch("contrast", "the contrast must be another token than the target")
        return self

    def tokens_of(self, run: DecoderRun) -> tuple[int, int | None]:
        """The target (the run's most likely token unless one was named) and the contrast."""
        target = self._target if self.target is not None else int(np.argmax(run.logits))
        return target, self._contrast


class Part(BaseModel):
    kind: str = Field(description="'embedding' (the last token's own), 'head' (one head's output through its "
                                  "rows of W_O) or 'mlp' (one layer's feed-forward block)")
    layer: int | None = Field(default=None, description="From 0")
    head: int | None = Field(default=None, description="From 0, for a head")
    value: float = Field(description="Its share of the logit (or of the logit difference)")


class AttributionResponse(BaseModel):
    model: str
    tokens: list[str]
    target: TokenRef
    contrast: TokenRef | None
    logit: float = Field(description="logit(target), or logit(target) − logit(contrast), from the forward pass")
    scale: float = Field(description="r = √(mean(x_N²) + ε): the final RMSNorm's divisor at the last position, "
                                     "held fixed so that the shares add up")
    parts: list[Part] = Field(description=f"1 + {LAYERS} × {HEADS} + {LAYERS}: the embedding, every head, every "
                                          "feed-forward block")
    sum: float = Field(description="The parts added up: the logit, within float32 rounding")


class SaliencyRequest(AttributionRequest):
    """Input of POST /api/decoder/saliency."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "examples": [{"text": "The capital of France is"},
                     {"text": "The capital of France is", "method": "integrated_gradients", "steps": 16},
                     {"text": "The capital of France is", "contrast": " the", "method": "integrated_gradients",
                      "baseline": "zero"}],
    })
    method: Literal["gradient_x_input", "integrated_gradients"] = Field(
        default="gradient_x_input",
        description="gradient_x_input: aₜ = xₜ ⊙ ∂f/∂xₜ; integrated_gradients: aₜ = (xₜ − x′ₜ) ⊙ the mean gradient at "
                    "the midpoints x′ + (k − ½)/n·(x − x′), k = 1 … n, of the straight path from the baseline x′.")
    steps: Steps = Field(default=DEFAULT_STEPS, description=f"n, integrated gradients' steps, 1–{MAX_STEPS}.")
    baseline: int | str = Field(
        default=DEFAULT_BASELINE,
        description="x′ for integrated gradients: 'mean' (the embedding table's mean row at every position, the "
                    "default: of those measured, its completeness error is the smallest on this model), 'zero', or "
                    "a token (id, piece or one-token text) whose embedding replaces every input token.")
    _baseline: int | str = PrivateAttr(default=DEFAULT_BASELINE)

    @model_validator(mode="after")
    def _the_baseline(self) -> SaliencyRequest:
        if isinstance(self.baseline, str) and self.baseline in ("mean", "zero"):
            self._baseline = self.baseline
            return self
        try:
            self._baseline = read_next_token(language_model().files(), self.baseline)
        except ValueError as e:
            raise mismatch("baseline", f"'mean', 'zero' or one token: {e}") from None
        return self

    @property
    def baseline_ref(self) -> int | str:
        """The baseline as app.maths.saliency takes it: "mean", "zero" or a token id."""
        return self._baseline


class Score(BaseModel):
    token: str
    signed: float = Field(description="Σ_d aₜ,d: towards the target (> 0) or against it")
    norm: float = Field(description="‖aₜ‖₂: how much, either way")


class SaliencyResponse(BaseModel):
    model: str
    tokens: list[str]
    method: str
    target: TokenRef
    contrast: TokenRef | None
    f: str = Field(description="What is explained: 'log p(target)' or 'logit(target) − logit(contrast)'")
    f_x: float = Field(description="f at the input")
    f_baseline: float = Field(description="f at the baseline (the zero embeddings for gradient × input)")
    baseline: str
    steps: int
    scores: list[Score]
    completeness_error: float = Field(
        description="|Σ signed − (f_x − f_baseline)|: 0 for attributions that add up exactly; on this model the "
                    "straight path has steep stretches that the midpoint rule hits or misses, so it stays large "
                    "at times whatever the steps")


class HabitHead(BaseModel):
    layer: int = Field(description="From 0")
    head: int = Field(description="From 0")
    score: float = Field(description="Its mean attention weight on the behaviour's places (where it looks)")
    change: float = Field(description="Switched off alone: the mean change of log p(the right next token) on the "
                                      "behaviour's texts (what it does; < 0: the model does worse without it)")


class Habit(BaseModel):
    behaviour: str = Field(description="'previous', 'sink' or 'induction'")
    threshold: float
    baseline: float = Field(description="The score of a head that spreads its weight evenly")
    showing: int = Field(description="Heads whose score reaches the threshold")
    heads: list[HabitHead] = Field(description="The heads with the highest scores, best first")
    together: float = Field(description="The listed heads switched off at once: the mean change of log p")
    log_p: float = Field(description="The mean log p(the right next token) with every head on")
    positions: int = Field(description="The (text, position) pairs the changes are averaged over")


class HabitsResponse(BaseModel):
    model: str
    habits: list[Habit]


class PatchingRequest(BaseModel):
    """Input of POST /api/decoder/patching."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "examples": [{"clean": "The capital of France is", "corrupted": "The capital of Italy is"},
                     {"clean": "The capital of France is", "corrupted": "The capital of Italy is",
                      "target": " Paris", "contrast": " Rome"}],
    })
    clean: Text = Field(description=f"The clean text, at most {PATCHING_MAX_TOKENS} tokens.")
    corrupted: Text = Field(description="The corrupted text: as many tokens as the clean one, a word changed.")
    target: int | str | None = Field(
        default=None, description="y: a token id, piece or one-token text; by default the clean run's likeliest.")
    contrast: int | str | None = Field(
        default=None, description="y′: by default the corrupted run's likeliest.")
    _read: PatchingRead | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _across_fields(self) -> PatchingRequest:
        pairs = [("clean", self.clean), ("corrupted", self.corrupted)]
        pairs += [(name, str(value)) for name, value in (("target", self.target), ("contrast", self.contrast))
                  if value is not None]
        try:
            self._read = read_patching_page(language_model().files(), pairs)
        except FormError as e:
            raise mismatch(e.field, e.message) from None
        return self

    @property
    def read(self) -> PatchingRead:
        assert self._read is not None
        return self._read


class PatchingResponse(BaseModel):
    model: str
    clean_tokens: list[str]
    corrupted_tokens: list[str]
    target: TokenRef
    contrast: TokenRef
    metric_clean: float = Field(description="m(clean) = logit(target) − logit(contrast) at the last position")
    metric_corrupted: float = Field(description="m(corrupted), the same difference on the corrupted text")
    residual: list[list[float]] = Field(
        description=f"[{LAYERS}][T]: the corrupted run with row p of layer l's input (the residual stream before its "
                    "RMSNorm; layer 0's is the embeddings) copied from the clean run, its m normalised: "
                    "(m − m(corrupted)) / (m(clean) − m(corrupted)), 0 as corrupted, 1 as clean")
    heads: list[list[float]] = Field(
        description=f"[{LAYERS}][{HEADS}]: the corrupted run with head i's output at layer l (softmax·V at every "
                    "position, before W_O) copied from the clean run, normalised the same way")


def attribution_document(model: DecoderFiles, run: DecoderRun, target: int, contrast: int | None) -> dict:
    a = logit_attribution(model, run, target, contrast)
    parts = [{"kind": "embedding", "value": a.embedding}]
    parts += [{"kind": "head", "layer": la, "head": h, "value": float(a.heads[la, h])}
              for la in range(LAYERS) for h in range(HEADS)]
    parts += [{"kind": "mlp", "layer": la, "value": float(a.mlp[la])} for la in range(LAYERS)]
    return {"model": model.name, "tokens": list(run.tokens),
            "target": {"id": target, "token": model.vocabulary[target]},
            "contrast": None if contrast is None else {"id": contrast, "token": model.vocabulary[contrast]},
            "logit": a.logit, "scale": a.scale, "parts": parts, "sum": a.total}


@router.post("/api/decoder/attribution", response_model=AttributionResponse, tags=["model"], responses=RESPONSES)
async def attribution(req: AttributionRequest, request: Request) -> Response:
    """Why the model says `target` next (direct logit attribution): the last token's embedding's, each of the
    heads' and each feed-forward block's share of logit(target) — or, with `contrast`, of logit(target) −
    logit(contrast) — read through the final RMSNorm with the run's own scale, so that the parts add up to the
    logit. A share is what a part writes directly towards the token; what later layers make of it is not counted.
    The shares agree with PyTorch hooks on transformers' reading of the same file within 1e-3."""
    service = language_model()

    def body() -> dict:
        run = service.run(req.text, req.off)
        return attribution_document(service.files(), run, *req.tokens_of(run))

    return await served_answer(request, service, req, body)


@router.post("/api/decoder/saliency", response_model=SaliencyResponse, tags=["model"], responses=RESPONSES)
async def saliency(req: SaliencyRequest, request: Request) -> Response:
    """Which input words made the model's answer: gradient × input or integrated gradients of f = log p(target)
    (or logit(target) − logit(contrast)) with respect to the input embeddings, through a backward pass of the
    decoder written in NumPy; per token the signed sum and the L2 norm of its attribution, and how far the sum is
    from f(x) − f(baseline). Equal to PyTorch autograd on transformers' reading of the same file, with the same
    rule and steps, within 1e-3."""
    service = language_model()

    def body() -> dict:
        run = service.run(req.text, req.off)
        target, contrast = req.tokens_of(run)
        return saliency_document(service.files(), service.saliency(
            req.text, req.ids, req.off, target, contrast, req.method, req.steps, req.baseline_ref))

    return await served_answer(request, service, req, body)


def saliency_document(model: DecoderFiles, s: Saliency) -> dict:
    vocab = model.vocabulary
    return {"model": model.name, "tokens": list(s.tokens), "method": s.method,
            "target": {"id": s.target, "token": vocab[s.target]},
            "contrast": None if s.contrast is None else {"id": s.contrast, "token": vocab[s.contrast]},
            "f": "log p(target)" if s.contrast is None else "logit(target) − logit(contrast)",
            "f_x": s.f_x, "f_baseline": s.f_baseline, "baseline": s.baseline, "steps": s.steps,
            "scores": [{"token": t, "signed": float(a), "norm": float(n)}
                       for t, a, n in zip(s.tokens, s.signed, s.norm, strict=True)],
            "completeness_error": s.completeness_error}


@router.get("/api/decoder/habits", response_model=HabitsResponse, tags=["model"], responses=RESPONSES)
async def habits() -> HabitsResponse:
    """What the language model's heads do, measured once per process over the lesson's fixed texts: per behaviour
    (the previous token, the first token, induction on a random sequence read twice) the heads with the highest
    attention scores, and each one's effect — switched off, how the right next token's log-probability changes on
    the same texts — alone and together. Where a head looks is not what it does."""
    service = language_model()
    entries, effects = await to_thread.run_sync(lambda: (service.catalogue(), service.effects()))
    return HabitsResponse(model=service.name, habits=[Habit(
        behaviour=e.behaviour, threshold=e.threshold, baseline=e.baseline, showing=e.showing,
        heads=[HabitHead(layer=h.layer, head=h.head, score=h.score, change=x.change)
               for h, x in zip(e.heads, effect.heads, strict=True)],
        together=effect.together, log_p=effect.log_p, positions=effect.positions)
        for e, effect in zip(entries, effects, strict=True)])


@router.post("/api/decoder/patching", response_model=PatchingResponse, tags=["model"], responses=RESPONSES)
async def patching(req: PatchingRequest, request: Request) -> Response:
    """Activation patching (causal tracing): which activations carry the difference between a `clean` and a
    `corrupted` text of the same token count to the model's answer. Every row of every layer's input, and every
    head's output, copied from the clean run into the corrupted run, one at a time, each patched run scored by
    logit(target) − logit(contrast) and normalised to 0 (corrupted) … 1 (clean). Equal to the same patching done
    with PyTorch hooks on transformers' reading of the same file within 1e-3. Heavy (seconds): computed once per
    question by the model's service, in its queue."""
    service = language_model()

    def body() -> dict:
        read = req.read
        p = patched(read)
        vocab = service.files().vocabulary
        return {"model": service.files().name, "clean_tokens": list(p.clean_tokens),
                "corrupted_tokens": list(p.corrupted_tokens),
                "target": {"id": p.target, "token": vocab[p.target]},
                "contrast": {"id": p.contrast, "token": vocab[p.contrast]},
                "metric_clean": p.metric_clean, "metric_corrupted": p.metric_corrupted,
                "residual": p.residual, "heads": p.heads}

    return await served_answer(request, service, req, body)
