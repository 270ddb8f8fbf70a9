"""POST /api/model: a pretrained transformer (all-MiniLM-L6-v2) on a sentence — every head's attention
weights, every layer's hidden states, the sentence embedding, and one head's step-through on request.

The model is read once per worker process (app.maths.model_files) and run in the API's thread lane.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from app.config import settings
from app.maths.attribution import attention_rollout
from app.maths.bert import ModelRun, head_result
from app.maths.model_files import ModelFiles
from app.maths.real_model import Tokenized
from app.maths.registry import ENCODER
from app.serving.real_models import sentence_model
from app.state.model_state import read_wordpieces
from app.web.api_answers import RESPONSES, JSONBodyRoute, served_answer
from app.web.fields import ModelText, whole_number
from app.web.schemas import mismatch

router = APIRouter(route_class=JSONBodyRoute)

MODEL_LAYERS, MODEL_HEADS = ENCODER.layers, ENCODER.heads  # the schema's bounds (app.maths.registry)


Sentence = ModelText


Layer = whole_number(0, MODEL_LAYERS - 1)
Head = whole_number(0, MODEL_HEADS - 1)


class HeadRef(BaseModel):
    """One head of one layer, each counted from 0."""

    model_config = ConfigDict(extra="forbid")
    layer: Layer
    head: Head


class ModelRequest(BaseModel):
    """Input of POST /api/model."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "examples": [{"text": "The animal didn't cross the street because it was too tired."},
                     {"text": "The animal didn't cross the street because it was too tired.", "layer": 2, "head": 5}],
    })

    text: Sentence = Field(description=f"A sentence of at most {settings.model_max_chars} characters and "
                                       f"{settings.model_max_tokens} WordPiece tokens with [CLS] and [SEP]; "
                                       "newlines and tabs are its only control characters.")
    layer: Layer | None = Field(default=None, description="With head: add that head's step-through (counted from 0).")
    head: Head | None = Field(default=None, description="With layer: the head, counted from 0.")
    heads_off: list[HeadRef] = Field(
        default=[], max_length=MODEL_LAYERS * MODEL_HEADS,
        description="Heads switched off: their attention weights are 0, as BertModel's head_mask does.")
    _tokens: Tokenized | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _across_fields(self) -> ModelRequest:
        """Layer and head come together; the text's WordPiece tokens are within the limit (known only
        once the tokenizer has read it)."""
        if (self.layer is None) != (self.head is None):
            raise mismatch("head" if self.head is None else "layer", "give layer and head together")
        try:
            self._tokens = read_wordpieces(sentence_model().files(), self.text)
        except ValueError as e:
            raise mismatch("text", str(e)) from None
        return self

    @property
    def wordpieces(self) -> Tokenized:
        assert self._tokens is not None
        return self._tokens


class HeadSteps(BaseModel):
    x: list[list[float]] = Field(description=f"(T, {ENCODER.d_model}) the layer's input")
    q: list[list[float]] = Field(description="(T, 32) X·W_Q + b_Q")
    k: list[list[float]] = Field(description="(T, 32) X·W_K + b_K")
    v: list[list[float]] = Field(description="(T, 32) X·W_V + b_V")
    scores: list[list[float]] = Field(description="(T, T) Q·Kᵀ")
    scaled: list[list[float]] = Field(description="(T, T) Q·Kᵀ/√32")
    softmax: list[list[float]] = Field(description="(T, T) the attention weights")
    output: list[list[float]] = Field(description="(T, 32) softmax·V")


class ModelResponse(BaseModel):
    model: str
    tokens: list[str] = Field(description="WordPiece tokens, with [CLS] first and [SEP] last")
    attention: list[list[list[list[float]]]] = Field(
        description=f"[{ENCODER.layers}][{ENCODER.heads}][T][T]: every head's attention weights")
    rollout: list[list[float]] = Field(
        description="(T, T) attention rollout (Abnar & Zuidema, 2020): per layer the heads' mean attention, "
                    "0.5·A + 0.5·I, rows normalised, multiplied from the first layer up; row i: how much of token "
                    "i's last row flows, on that rule, from each input token")
    hidden_states: list[list[list[float]]] = Field(
        description=f"[{ENCODER.layers + 1}][T][{ENCODER.d_model}]: the embeddings' output, then each layer's "
                    "(Hugging Face's output_hidden_states)")
    embedding: list[float] = Field(
        description=f"[{ENCODER.d_model}]: the sentence embedding (mean of the last layer, L2-normalised)")
    heads_off: list[HeadRef]
    head: HeadSteps | None = None


def model_document(model: ModelFiles, run: ModelRun, layer: int | None = None, head: int | None = None) -> dict:
    doc = {"model": model.name, "tokens": list(run.tokens), "attention": run.attention,
           "rollout": attention_rollout(run.attention), "hidden_states": run.hidden_states, "embedding": run.embedding,
           "heads_off": [{"layer": la, "head": h} for la, h in sorted(run.heads_off)]}
    if layer is not None and head is not None:
        h = head_result(model, run, layer, head)
        doc["head"] = {"x": run.hidden_states[layer], "q": h.q, "k": h.k, "v": h.v, "scores": h.scores,
                       "scaled": h.scaled, "softmax": h.softmax, "output": h.output}
    return doc


@router.post("/api/model", response_model=ModelResponse, tags=["model"], responses=RESPONSES, description=(
    f"Run {ENCODER.name} (BERT: {ENCODER.layers} layers × {ENCODER.heads} heads, d_model {ENCODER.d_model}) on "
    "`text`: its WordPiece `tokens`, every head's `attention` weights, every layer's `hidden_states` and the "
    "sentence `embedding`. With `layer` and `head`, also that head's step-through (`head`). `heads_off` switches "
    "heads off. The numbers agree with Hugging Face's BertModel to float32 precision."))
async def model(req: ModelRequest, request: Request) -> Response:
    service = sentence_model()
    tokens = req.wordpieces

    def body() -> dict:
        run = service.run(tokens, frozenset((r.layer, r.head) for r in req.heads_off))
        return model_document(service.files(), run, req.layer, req.head)

    return await served_answer(request, service, req, body)

