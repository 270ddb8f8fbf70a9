"""JSON API: POST /api/attention runs the pipeline and returns every intermediate."""

from __future__ import annotations

import json

import numpy as np
from fastapi import APIRouter
from fastapi.responses import Response

from app.pipeline import AttentionRun, run_attention
from app.schemas import AttentionRequest, AttentionResponse, Health

router = APIRouter()


def _opt(a: np.ndarray | None) -> list | None:
    return None if a is None else a.tolist()


def _hidden_as_null(scaled: np.ndarray, mask: np.ndarray | None) -> list:
    if mask is None:
        return scaled.tolist()
    return np.where(mask, None, scaled).tolist()  # object array: None where the key is hidden


def run_to_json(run: AttentionRun, tokens: list[str]) -> dict:
    """The response body: NumPy arrays become nested lists in C (ndarray.tolist), not per element."""
    w = run.weights
    return {
        "tokens": tokens,
        "x": run.x.tolist(),
        "x_input": run.x_input.tolist() if run.x_input is not None else run.x.tolist(),
        "pe": _opt(run.pe),
        "context": _opt(run.context),
        "mask": _opt(run.mask),
        "positional_encoding": run.positional_encoding,
        "temperature": run.temperature,
        "heads": [
            {
                "q": h.q.tolist(), "k": h.k.tolist(), "v": h.v.tolist(),
                "scores": h.scores.tolist(), "scaled": _hidden_as_null(h.scaled, run.mask),
                "softmax": h.softmax.tolist(), "output": h.output.tolist(),
                "q_rot": _opt(h.q_rot), "k_rot": _opt(h.k_rot), "bias": _opt(h.bias),
            }
            for h in run.heads
        ],
        "concat": run.concat.tolist(),
        "output": run.output.tolist(),
        "weights": {"w_q": w.w_q.tolist(), "w_k": w.w_k.tolist(), "w_v": w.w_v.tolist(), "w_o": w.w_o.tolist()},
        "num_heads": run.num_heads,
        "d_k": run.d_k,
        "d_v": run.d_v,
        "scale": run.scale,
    }


@router.post("/api/attention", response_model=AttentionResponse, tags=["attention"])
def attention(req: AttentionRequest) -> Response:
    """Run multi-head scaled dot-product attention and return X, every head's Q, K, V, scores,
    scaled scores, softmax weights and output, the concatenation, the final output, and the
    weights used (given or drawn from `seed`). Optional: a mask, a context sequence for
    cross-attention, a positional encoding, and a softmax temperature."""
    given = req.weights.model_dump(exclude_none=True) if req.weights else {}
    run = run_attention(
        req.x, num_heads=req.num_heads, d_k=req.d_k, d_v=req.d_v,
        weights=given, seed=req.seed, scale=req.scale, mask=req.mask,
        context=req.context.x if req.context else None,
        positional_encoding=req.positional_encoding, position_table=req.position_table,
        temperature=req.temperature,
    )
    # Serialised directly: the arrays are finite by construction and already plain lists.
    body = json.dumps(run_to_json(run, req.tokens), separators=(",", ":"), allow_nan=False)
    return Response(body, media_type="application/json")


@router.get("/healthz", response_model=Health, tags=["health"])
def healthz() -> dict[str, str]:
    return {"status": "ok"}
