"""The JSON API's answers, apart from its routes: the route class that reads a body once and names what is wrong
with it, the documents of a run (every intermediate and gradient), the work of POST /api/attention and /api/train,
and an answer encoded (JSON or .npz), compressed and computed in its lane, or through a real model's service. The
routers (app.web.api and the real models' APIs) import it; it imports no router."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import numpy as np
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from app.maths.attention import run_attention
from app.maths.backward import Gradients, loss_and_gradients, train
from app.maths.blocks import run_transformer
from app.maths.cost import attention_cost
from app.maths.records import AttentionRun, BlockResult, LayerNormResult, TransformerRun, Weights
from app.maths.weights import ALL_WEIGHT_NAMES, BLOCK_WEIGHT_NAMES
from app.serving.models import Answer, ModelService
from app.web.compression import compressed, preferred_encoding
from app.web.json_encoding import NotFinite, dumps
from app.web.lanes import Lanes
from app.web.npz_encoding import NPZ_MEDIA_TYPE, answer_media_type, npz_dumps
from app.web.responses import BodyTooLarge, ValidationErrorResponse
from app.web.schemas import AttentionRequest, Loss, TrainRequest
from app.web.served import served_api

# Why json.loads can fail other than with a JSONDecodeError (which FastAPI already answers with a 422).
# The order matters: UnicodeDecodeError is a ValueError too.
UNREADABLE_BODY = {UnicodeDecodeError: "the body is not UTF-8 text", RecursionError: "the body is nested too deeply",
                   ValueError: "a number has more digits than the parser reads (4300)"}


class JSONBodyRoute(APIRoute):
    """A body that is not UTF-8 text, is nested too deeply for the parser or holds a number of
    thousands of digits gets the 422 that
    malformed JSON gets, naming the body, instead of FastAPI's bare 400 "There was an error
    parsing the body"."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except HTTPException as exc:
                reason = next((r for kind, r in UNREADABLE_BODY.items() if isinstance(exc.__cause__, kind)), None)
                if exc.status_code != 400 or reason is None:
                    raise
                error = {"type": "json_invalid", "loc": ("body",), "input": {}, "msg": f"JSON decode error: {reason}"}
                raise RequestValidationError([error]) from exc

        return route_handler


def _hidden_as_null(scaled: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """The scaled scores with the hidden keys masked: written null."""
    return scaled if mask is None else np.ma.masked_array(scaled, mask)  # (T, S)


def _layer_norm_doc(ln: LayerNormResult) -> dict:
    return {"mean": ln.mean, "var": ln.var, "normalized": ln.normalized, "output": ln.output}


def _heads_doc(run: AttentionRun) -> list[dict]:
    heads = []
    for h in run.heads:
        lin = h.linear
        heads.append({
            "q": h.q, "k": h.k, "v": h.v,
            "scores": h.scores, "scaled": _hidden_as_null(h.scaled, run.mask),
            "softmax": h.softmax, "output": h.output,
            "q_rot": h.q_rot, "k_rot": h.k_rot, "bias": h.bias,
            "q_w": h.q_w, "q_1": h.q_1, "k_2": h.k_2,
            "linear": None if lin is None else {
                "phi_q": lin.phi_q, "phi_k": lin.phi_k, "kv": lin.kv,
                "z": lin.z, "weights": lin.weights, "output": lin.output,
            },
            "softmax_output": h.softmax_output,
        })
    return heads


def _weights_doc(w: Weights) -> dict:
    return {name: getattr(w, name) for name in ALL_WEIGHT_NAMES}


def _block_doc(block: BlockResult, first: bool) -> dict:
    attn = block.attention
    return {
        "x": block.x,
        "attention": None if first else {
            "heads": _heads_doc(attn), "concat": attn.concat, "output": attn.output,
            "weights": _weights_doc(attn.weights),
        },
        "residual1": block.residual1, "ln1": _layer_norm_doc(block.ln1), "h": block.h,
        "ffn_hidden": block.ffn_hidden, "ffn_act": block.ffn_act,
        "ffn_out": block.ffn_out, "residual2": block.residual2,
        "ln2": _layer_norm_doc(block.ln2), "output": block.output,
        "weights": {name: getattr(block.weights, name) for name in BLOCK_WEIGHT_NAMES},
    }


def _gradients_doc(grads: Gradients) -> dict:
    w = grads.weights
    return {
        "output": grads.output, "concat": grads.concat,
        "heads": [{"output": g.output, "softmax": g.softmax, "scaled": g.scaled,
                   "scores": g.scores, "q": g.q, "k": g.k, "v": g.v}
                  for g in grads.heads],
        "x": grads.x, "context": grads.context,
        "weights": {name: getattr(w, name) for name in ALL_WEIGHT_NAMES},
    }


def run_document(
    run: AttentionRun, tokens: list[str], transformer: TransformerRun | None = None,
    loss: float | None = None, gradients: Gradients | None = None,
) -> dict:
    """The response body as a document of the pipeline's own arrays, for app.web.json_encoding to encode
    (no nested lists of Python floats are made). Its fields are AttentionResponse's, in its order.

    With transformer blocks, ``run`` is the first block's attention and ``transformer`` the stack.
    ``loss`` and ``gradients`` are null unless a loss was asked for.
    """
    x_input = transformer.x_input if transformer else (run.x_input if run.x_input is not None else run.x)
    pe = transformer.pe if transformer else run.pe
    return {
        "tokens": tokens,
        "x": run.x,
        "x_input": x_input,
        "pe": pe,
        "context": run.context,
        "mask": run.mask,
        "mask_mode": run.mask_mode,
        "window": run.window,
        "positional_encoding": transformer.positional_encoding if transformer else run.positional_encoding,
        "temperature": run.temperature,
        "score": run.score,
        "attention": run.attention,
        "scale_factor": run.scale_factor,
        "heads": _heads_doc(run),
        "concat": run.concat,
        "output": run.output,
        "weights": _weights_doc(run.weights),
        "num_heads": run.num_heads,
        "d_k": run.d_k,
        "d_v": run.d_v,
        "scale": run.scale,
        "blocks": [_block_doc(b, i == 0) for i, b in enumerate(transformer.blocks)] if transformer else [],
        "final": transformer.output if transformer else run.output,
        "loss": loss,
        "gradients": None if gradients is None else _gradients_doc(gradients),
    }


def run_json(run: AttentionRun, tokens: list[str], transformer: TransformerRun | None = None) -> bytes:
    """The response body as compact JSON, encoded straight from the arrays. A forward pass's numbers
    are finite by construction (inputs within ±1000); one that is not would be a bug, and a 500."""
    return dumps(run_document(run, tokens, transformer))


def _loss_spec(loss: Loss) -> dict:
    spec: dict = {"kind": loss.kind, "target": np.array(loss.target, dtype=np.float64)}
    if loss.kind == "attention":
        spec["head"] = loss.head
    return spec


def _run_kwargs(req: AttentionRequest, attention_weights: dict) -> dict:
    """run_attention's keyword arguments for a request (all but x)."""
    return dict(
        num_heads=req.num_heads, d_k=req.d_k, d_v=req.d_v, scale=req.scale, mask=req.mask,
        temperature=req.temperature, score=req.score, attention=req.attention, window=req.window,
        weights=attention_weights, seed=req.seed, context=req.context.x if req.context else None,
        positional_encoding=req.positional_encoding, position_table=req.position_table,
    )


RESPONSES: dict = {
    200: {"description": "JSON by default; with `Accept: application/x-npz`, the same arrays as a NumPy .npz, "
                         "each named by its place in the JSON (`heads/0/softmax`)",
          "content": {"application/x-npz": {"schema": {"type": "string", "format": "binary"}}}},
    413: {"model": BodyTooLarge, "description": "The body is larger than the largest valid request"},
    422: {"model": ValidationErrorResponse, "description": "Invalid input: each problem names its field"},
}


# What a pass costs beyond its arithmetic (NumPy's overhead per call, some 50 calls), in operations: it makes
# 500 training steps at the smallest sizes (about 0.2 s) as heavy as their time says.
PASS_OVERHEAD = 10_000


def estimated_operations(req: AttentionRequest, passes: int = 1) -> int:
    """How heavy a request is, known before any array is made: the operations of its forward pass, every
    block (multiply-adds plus elementwise, as the cost panel counts them), plus PASS_OVERHEAD, times the
    passes made (a training's steps + 1)."""
    t, d_model = len(req.x), len(req.x[0])
    d_k = req.d_k if req.d_k is not None else d_model // req.num_heads
    cost = attention_cost(
        t=t, s=len(req.context.x) if req.context is not None else t, d_model=d_model, num_heads=req.num_heads,
        d_k=d_k, d_v=req.d_v if req.d_v is not None else d_k, score=req.score, attention=req.attention,
        scale=req.scale, blocks=req.blocks, d_ff=(req.d_ff or 4 * d_model) if req.blocks else 0,
    )
    return passes * (cost.total_macs + cost.total_elementwise + PASS_OVERHEAD)


def attention_body(req: AttentionRequest) -> dict:
    """POST /api/attention's answer as a document of the pipeline's arrays (blocking: a worker thread's work)."""
    given = req.weights.model_dump(exclude_none=True) if req.weights else {}
    kwargs = _run_kwargs(req, {k: v for k, v in given.items() if k in ALL_WEIGHT_NAMES})
    if req.blocks:
        transformer = run_transformer(
            req.x, blocks=req.blocks, d_ff=req.d_ff, activation=req.activation, norm=req.norm,
            block_weights={k: v for k, v in given.items() if k in BLOCK_WEIGHT_NAMES}, **kwargs,
        )
        return run_document(transformer.blocks[0].attention, req.tokens, transformer)
    run = run_attention(req.x, **kwargs)
    if req.loss is None:
        return run_document(run, req.tokens)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is answered as a 422, not warned about
        loss, grads = loss_and_gradients(run, _loss_spec(req.loss))
    return run_document(run, req.tokens, loss=loss, gradients=grads)


def train_body(req: TrainRequest) -> dict:
    """POST /api/train's answer: the training, then its final state as a document (blocking)."""
    given = req.weights.model_dump(exclude_none=True) if req.weights else {}
    attention_weights = {k: v for k, v in given.items() if k in ALL_WEIGHT_NAMES}
    spec = _loss_spec(req.loss)
    with np.errstate(over="ignore", invalid="ignore"):  # divergence is answered as a 422, not warned about
        result = train(
            np.array(req.x, dtype=np.float64), _run_kwargs(req, attention_weights), spec, steps=req.steps,
            optimizer=req.optimizer, learning_rate=req.learning_rate, train=tuple(req.train),
        )
        loss, grads = loss_and_gradients(result.run, spec)
    return run_document(result.run, req.tokens, loss=loss, gradients=grads) | {"losses": list(result.losses)}


def encoded_answer(doc: dict, media_type: str, not_finite: tuple[str, str] | None = None) -> bytes:
    """The document as JSON or .npz. A number that is not finite is a 422 naming ``not_finite``'s field, with
    its reason (a loss or training that overflowed); without one, it would be a bug, and a 500."""
    try:
        return npz_dumps(doc) if media_type == NPZ_MEDIA_TYPE else dumps(doc)
    except NotFinite:
        if not_finite is None:
            raise
        field, why = not_finite
        error = {"type": "not_finite", "loc": ("body", field), "input": None,
                 "ctx": {"field": field, "message": why}, "msg": why}
        raise RequestValidationError([error]) from None


async def answer(request: Request, operations: int, document: Callable[[], dict],
                 not_finite: tuple[str, str] | None = None) -> Response:
    """The answer, as JSON or as the .npz the client asks for in Accept, computed, encoded and compressed in a
    worker thread of the lane its work asks for."""
    lanes: Lanes = request.app.state.lanes
    accept_encoding = request.headers.get("accept-encoding", "")
    media_type = answer_media_type(request.headers.get("accept", ""))

    def work() -> Response:
        response = compressed(encoded_answer(document(), media_type, not_finite), media_type, accept_encoding)
        response.headers["Vary"] = ", ".join(filter(None, (response.headers.get("Vary"), "Accept")))
        return response

    return await lanes.run(operations, work)


async def served_answer(request: Request, service: ModelService, req: BaseModel,
                        document: Callable[[], dict]) -> Response:
    """A real model's answer, as ``answer`` writes it, through the model's service: the same request (its body, the
    media type and encoding it takes) is computed once however many ask, and kept."""
    accept_encoding = request.headers.get("accept-encoding", "")
    media_type = answer_media_type(request.headers.get("accept", ""))
    question = ("api", request.url.path, req.model_dump_json(), media_type, preferred_encoding(accept_encoding))

    def make() -> Answer:
        response = compressed(encoded_answer(document(), media_type), media_type, accept_encoding)
        vary = ", ".join(filter(None, (response.headers.get("Vary"), "Accept")))
        headers = {k: v for k, v in response.headers.items() if k not in ("content-length", "content-type", "vary")}
        return Answer(response.status_code, bytes(response.body), media_type, (*headers.items(), ("Vary", vary)))

    return await served_api(request, service, question, make)
