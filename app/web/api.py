"""JSON API: POST /api/attention runs the pipeline and returns every intermediate (and, given a loss,
every gradient of it); POST /api/train descends that loss and returns the final state."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.web.api_answers import (
    RESPONSES,
    JSONBodyRoute,
    answer,
    attention_body,
    estimated_operations,
    train_body,
)
from app.web.responses import AttentionResponse, Health, TrainResponse
from app.web.schemas import AttentionRequest, TrainRequest

router = APIRouter(route_class=JSONBodyRoute)


@router.post("/api/attention", response_model=AttentionResponse, tags=["attention"], responses=RESPONSES)
async def attention(req: AttentionRequest, request: Request) -> Response:
    """Run multi-head attention and return X, every head's Q, K, V, scores, scaled scores, softmax
    weights and output, the concatenation, the output, and the weights used (given or drawn from
    `seed`). Optional: a mask (causal, sparse or explicit), a context sequence for cross-attention,
    a positional encoding, a temperature, the general or additive score, linear attention, and
    1–4 transformer blocks around it (then `blocks` holds each block's intermediates).
    With a `loss` (attention without blocks), also the loss and every gradient of it."""
    return await answer(request, estimated_operations(req), lambda: attention_body(req),
                        ("loss", "the loss or a gradient overflows a double for these values"))


@router.post("/api/train", response_model=TrainResponse, tags=["attention"], responses=RESPONSES)
async def train_attention(req: TrainRequest, request: Request) -> Response:
    """Descend `loss` for `steps` steps of SGD or Adam on the parameters named in `train`, and return
    `losses` (before the first step … after the last) and the final state as POST /api/attention does:
    the trained weights and x_input, its intermediates, its loss and its gradients."""
    return await answer(request, estimated_operations(req, passes=req.steps + 1), lambda: train_body(req),
                        ("learning_rate", "training diverged: the loss or a parameter overflowed a double; "
                         "lower learning_rate or steps"))


@router.get("/healthz", response_model=Health, tags=["health"])
async def healthz() -> dict[str, str]:
    """Answered on the event loop, never behind a thread pool busy rendering."""
    return {"status": "ok"}
