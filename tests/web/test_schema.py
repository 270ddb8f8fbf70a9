"""The JSON API against its own OpenAPI schema, with Schemathesis.

Schemathesis reads /openapi.json and generates requests for every operation, valid ones (within
the bounds the schema states) and invalid ones (out of range, wrong types, missing fields): no
answer may be a 5xx, every answer must have a documented status, content type and body, and
invalid input must be refused. What the schema cannot state — that x has as many rows as tokens,
that a weight has the shape the sizes ask for — is checked by the request model's validator; a
schema-valid body may be refused only by that check (see `only_shape_checks_refuse_valid_bodies`),
and valid_requests() below generates bodies that pass it too, which must then be answered with 200.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from app.config import settings as bounds
from app.main import create_app
from app.maths.attention import run_attention
from app.maths.blocks import run_transformer
from app.maths.masks import build_mask, default_window
from app.serving.real_models import language_model as served_language_model
from tests.conftest import FULL_RUN

APP = create_app()
# The coverage phase's boundary cases take about 95 s to generate, at collection, in every test process: only a
# full run (make test-all, CI: tests/conftest.py sets FULL_RUN) has them; every run has the examples and the
# generated cases.
PHASES = ["examples", "coverage", "fuzzing"] if os.environ.get(FULL_RUN) == "1" else ["examples", "fuzzing"]
# The language model's operations: 30 layers each, some of them many times (fewer cases, below).
LANGUAGE_MODEL = "^/api/(decoder|generate|decoder/(attribution|saliency|patching|habits))$"
schema = schemathesis.openapi.from_asgi("/openapi.json", APP).exclude(path_regex=LANGUAGE_MODEL)
# Bounded: every operation gets its schema examples, the boundary cases of the coverage phase (in a full
# run) and this many generated cases per mode.
schema.config.generation.update(modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE], max_examples=40)
schema.config.phases.update(phases=PHASES)
language_model = schemathesis.openapi.from_asgi("/openapi.json", APP).include(path_regex=LANGUAGE_MODEL)
language_model.config.generation.update(modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE], max_examples=6)
language_model.config.phases.update(phases=PHASES)
ATTENTION = schema["/api/attention"]["POST"]
TRAIN = schema["/api/train"]["POST"]


def diverged(item: dict[str, Any]) -> bool:
    """A training whose numbers overflowed a double: valid input, refused as a 422 naming learning_rate."""
    return item["type"] == "not_finite" and item["field"] == "learning_rate"


def only_shape_checks_refuse_valid_bodies(ctx: Any, response: Any, case: schemathesis.Case) -> bool | None:
    """A body valid by the schema may be refused only by the checks across fields (its loc is the
    whole body, its type shape_mismatch, and it names the field: "tokens: has 2 entries but x has 3 rows"),
    or because its training diverged."""
    if case.meta is None or not case.meta.generation.mode.is_positive or response.status_code != 422:
        return None
    for item in response.json()["detail"]:
        assert diverged(item) or (item["loc"] == ["body"] and item["type"] == "shape_mismatch"
                                  and item["field"] != "body"), (
            f"a schema-valid body was refused on {item['field']}: {item['msg']}"
        )
    return None


@schema.parametrize()
def test_every_operation_conforms_to_the_schema(case: schemathesis.Case) -> None:
    """No 5xx; documented status codes, content types and bodies; invalid input refused; valid input
    refused only by the shape checks. (Schemathesis's own positive_data_acceptance would demand a 2xx
    for every schema-valid body, which the cross-field shapes make impossible to promise.)"""
    case.call_and_validate(excluded_checks=[positive_data_acceptance],
                           additional_checks=[only_shape_checks_refuse_valid_bodies])


@pytest.fixture(scope="module")
def language_model_read() -> None:
    """The language model read and its heads measured, as the app's start does (seconds): Schemathesis's client
    gives each call 10 s, and the first would otherwise read the model inside its own."""
    served_language_model().catalogue()


@language_model.parametrize()
@pytest.mark.usefixtures("language_model_read")
def test_the_language_models_operations_conform_to_the_schema(case: schemathesis.Case) -> None:
    """As above for the language model's operations (/api/decoder, /api/generate and why it answered), with fewer
    generated cases (each runs the model, some of them many times)."""
    case.call_and_validate(excluded_checks=[positive_data_acceptance],
                           additional_checks=[only_shape_checks_refuse_valid_bodies])


# --- valid requests, shapes and all ---------------------------------------------------------------

VALUE = st.one_of(st.floats(-bounds.max_abs_value, bounds.max_abs_value, allow_nan=False),
                  st.sampled_from([-bounds.max_abs_value, bounds.max_abs_value, 0.0]))
# Tokens a student can see (app.state.tokens: no control, invisible formatting or line break characters).
TOKEN = st.text(st.characters(exclude_categories=["Cc", "Cf", "Zl", "Zp", "Cs"]), max_size=bounds.max_token_chars)


def matrix(rows: int, cols: int) -> st.SearchStrategy[list[list[float]]]:
    return st.lists(st.lists(VALUE, min_size=cols, max_size=cols), min_size=rows, max_size=rows)


def nested(shape: tuple[int, ...]) -> st.SearchStrategy[Any]:
    """A nested list of numbers of the given shape."""
    if len(shape) == 1:
        return st.lists(VALUE, min_size=shape[0], max_size=shape[0])
    return st.lists(nested(shape[1:]), min_size=shape[0], max_size=shape[0])


@st.composite
def valid_requests(draw: st.DrawFn) -> dict[str, Any]:
    """A body POST /api/attention must accept: any option, sizes that fit together, values at the bounds.
    Sizes stay small (the bounds themselves are tested in test_api and test_fuzz)."""
    t, d_model, h = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    body: dict[str, Any] = {"tokens": draw(st.lists(TOKEN, min_size=t, max_size=t)), "x": draw(matrix(t, d_model))}
    d_k = draw(st.none() | st.integers(1, 4)) if d_model // h else draw(st.integers(1, 4))
    d_v = draw(st.none() | st.integers(1, 4))
    body |= {"num_heads": h, "d_k": d_k, "d_v": d_v}
    d_k = d_model // h if d_k is None else d_k
    d_v = d_k if d_v is None else d_v
    s = t
    if draw(st.booleans()):
        s = draw(st.integers(1, 4))
        body["context"] = {"tokens": draw(st.lists(TOKEN, min_size=s, max_size=s)), "x": draw(matrix(s, d_model))}
    mask = draw(st.sampled_from(["none", "causal", "local", "strided", "booleans"]))
    if mask == "booleans":
        rows = draw(st.lists(st.lists(st.booleans(), min_size=s, max_size=s), min_size=t, max_size=t))
        body["mask"] = [row if not all(row) else [False, *row[1:]] for row in rows]
    else:
        body["mask"] = mask
        window = draw(st.none() | st.integers(1, bounds.max_tokens))
        body["window"] = window
        hidden = build_mask(mask, t, s, window or default_window(mask, s))
        if hidden is not None and hidden.all(axis=1).any():  # a window that misses a short source
            body["window"] = bounds.max_tokens
    body |= {
        "seed": draw(st.integers(0, bounds.max_seed)), "scale": draw(st.booleans()),
        "temperature": draw(st.floats(0.05, 20.0)),
        "score": draw(st.sampled_from(["dot", "general", "additive"])),
        "attention": draw(st.sampled_from(["softmax", "linear"])),
        "positional_encoding": draw(st.sampled_from(["none", "sinusoidal", "learned", "rope", "alibi"])),
        "blocks": draw(st.integers(0, 2)), "d_ff": draw(st.none() | st.integers(1, 6)),
        "activation": draw(st.sampled_from(["relu", "gelu"])), "norm": draw(st.sampled_from(["post", "pre"])),
    }
    if body["positional_encoding"] == "learned" and draw(st.booleans()):
        body["position_table"] = draw(matrix(max(t, s) + draw(st.integers(0, 2)), d_model))
    d_ff = body["d_ff"] or 4 * d_model
    shapes = {"w_q": (h, d_model, d_k), "w_k": (h, d_model, d_k), "w_v": (h, d_model, d_v),
              "w_o": (h * d_v, d_model), "w_a": (h, d_k, d_k), "w_1": (h, d_k, d_k), "w_2": (h, d_k, d_k),
              "v_a": (h, d_k), "ffn_w1": (d_model, d_ff), "ffn_b1": (d_ff,), "ffn_w2": (d_ff, d_model),
              "ffn_b2": (d_model,), "ln1_gamma": (d_model,), "ln2_beta": (d_model,)}
    given_names = draw(st.lists(st.sampled_from(sorted(shapes)), unique=True, max_size=4))
    if given_names:
        body["weights"] = {name: draw(nested(shapes[name])) for name in given_names}
    return body


@st.composite
def valid_train_requests(draw: st.DrawFn) -> dict[str, Any]:
    """A body POST /api/train must accept: a valid attention request without blocks, a loss that fits
    it (an attention target spread over each query's visible keys), and a few steps."""
    body = draw(valid_requests()) | {"blocks": 0}
    t, d_model, h = len(body["x"]), len(body["x"][0]), body["num_heads"]
    s = len(body["context"]["x"]) if "context" in body else t
    if body["attention"] == "linear" or draw(st.booleans()):
        loss = {"kind": "mse", "target": draw(matrix(t, d_model))}
    else:
        mask = body["mask"]
        hidden = build_mask(np.array(mask) if isinstance(mask, list) else mask, t, s,
                            body.get("window") or default_window(mask, s))
        visible = np.ones((t, s), dtype=bool) if hidden is None else ~hidden
        raw = np.array(draw(matrix(t, s).map(np.abs))) * visible + visible * 1e-3  # (T, S) ≥ 0, 0 where hidden
        loss = {"kind": "attention", "head": draw(st.integers(0, h - 1)),
                "target": (raw / raw.sum(axis=1, keepdims=True)).tolist()}
    trainable = ["w_q", "w_k", "w_v", "w_o", "x"]
    return body | {
        "loss": loss, "steps": draw(st.integers(1, 3)), "optimizer": draw(st.sampled_from(["sgd", "adam"])),
        "learning_rate": draw(st.floats(1e-3, bounds.max_learning_rate)),
        "train": draw(st.lists(st.sampled_from(trainable), min_size=1, max_size=5, unique=True)),
    }


def reference_output(body: dict[str, Any]) -> np.ndarray:
    """The final output the pipeline computes in-process for a request body."""
    given_weights = {k: np.array(v) for k, v in (body.get("weights") or {}).items()}
    attention_names = ("w_q", "w_k", "w_v", "w_o", "w_a", "w_1", "w_2", "v_a")
    options = dict(
        num_heads=body["num_heads"], d_k=body["d_k"], d_v=body["d_v"], seed=body["seed"], scale=body["scale"],
        mask=np.array(body["mask"]) if isinstance(body["mask"], list) else body["mask"], window=body.get("window"),
        temperature=body["temperature"], score=body["score"], attention=body["attention"],
        positional_encoding=body["positional_encoding"],
        position_table=np.array(body["position_table"]) if "position_table" in body else None,
        context=np.array(body["context"]["x"]) if "context" in body else None,
        weights={k: v for k, v in given_weights.items() if k in attention_names},
    )
    x = np.array(body["x"], dtype=np.float64)
    if not body["blocks"]:
        return run_attention(x, **options).output
    block_weights = {k: v for k, v in given_weights.items() if k not in attention_names}
    return run_transformer(x, blocks=body["blocks"], d_ff=body["d_ff"], activation=body["activation"],
                           norm=body["norm"], block_weights=block_weights, **options).output


@settings(max_examples=max(10, settings.default.max_examples), suppress_health_check=[HealthCheck.too_slow])
@given(valid_requests())
def test_valid_requests_are_answered_200_and_conform_to_the_schema(body: dict[str, Any]) -> None:
    case = ATTENTION.Case(body=body)
    response = case.call_and_validate()  # status, content type and the response schema
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["tokens"] == body["tokens"]
    assert len(out["heads"]) == body["num_heads"] and len(out["blocks"]) == body["blocks"]
    np.testing.assert_array_equal(out["final"], reference_output(body))  # the same numbers, to the last bit
    for head in out["heads"]:
        np.testing.assert_allclose(np.sum(head["softmax"], axis=1), 1.0, rtol=1e-12)


@settings(max_examples=max(10, settings.default.max_examples), suppress_health_check=[HealthCheck.too_slow])
@given(valid_train_requests())
def test_valid_training_requests_are_answered_and_conform_to_the_schema(body: dict[str, Any]) -> None:
    response = TRAIN.Case(body=body).call_and_validate()
    if response.status_code == 422:  # values near ±1000 and a large learning rate may overflow
        assert all(diverged(item) for item in response.json()["detail"]), response.text
        return
    assert response.status_code == 200, response.text
    out = response.json()
    assert len(out["losses"]) == body["steps"] + 1
    assert out["loss"] == out["losses"][-1]
    assert len(out["gradients"]["heads"]) == body["num_heads"]


# --- invalid input the generator cannot send: JSON's NaN and Infinity, sizes out of range ----------

BASE = {"tokens": ["a", "b"], "x": [[1.0, 2.0], [3.0, 4.0]]}
INVALID = [
    ("nan", {**BASE, "x": [[1.0, math.nan], [3.0, 4.0]]}, "x[0][1]"),
    ("infinity", {**BASE, "x": [[1.0, 2.0], [math.inf, 4.0]]}, "x[1][0]"),
    ("nan_temperature", {**BASE, "temperature": math.nan}, "temperature"),
    ("nan_weight", {**BASE, "weights": {"w_o": [[1.0, 2.0], [-math.inf, 0.0]]}}, "weights.w_o[1][0]"),
    ("negative_d_k", {**BASE, "d_k": -1}, "d_k"),
    ("huge_d_v", {**BASE, "d_v": 10**9}, "d_v"),
    ("zero_heads", {**BASE, "num_heads": 0}, "num_heads"),
    ("negative_blocks", {**BASE, "blocks": -1}, "blocks"),
    ("huge_d_ff", {**BASE, "blocks": 1, "d_ff": 10**9}, "d_ff"),
    ("zero_window", {**BASE, "mask": "local", "window": 0}, "window"),
    ("tokens_do_not_match_x", {**BASE, "tokens": ["a"]}, "tokens"),
    ("nul_in_a_token", {**BASE, "tokens": ["a", "b\x00"]}, "tokens[1]"),
    ("rtl_override_in_a_source_token", {**BASE, "context": {"tokens": ["\u202ex", "y"], "x": [[1.0, 2.0], [3.0, 4.0]]}},
     "context.tokens[0]"),
    ("nan_target", {**BASE, "loss": {"kind": "mse", "target": [[1.0, math.nan], [0.0, 0.0]]}}, "loss.target[0][1]"),
]
TRAIN_INVALID = [
    ("nan_learning_rate", {**BASE, "loss": {"kind": "mse", "target": [[0.0] * 2] * 2}, "steps": 1,
                           "learning_rate": math.nan}, "learning_rate"),
    ("infinite_learning_rate", {**BASE, "loss": {"kind": "mse", "target": [[0.0] * 2] * 2}, "steps": 1,
                                "learning_rate": math.inf}, "learning_rate"),
    ("zero_steps", {**BASE, "loss": {"kind": "mse", "target": [[0.0] * 2] * 2}, "steps": 0}, "steps"),
]


@pytest.mark.parametrize(("body", "field"), [(b, f) for _, b, f in INVALID], ids=[i for i, _, _ in INVALID])
def test_invalid_input_is_refused_with_a_documented_422(body: dict[str, Any], field: str) -> None:
    raw = json.dumps(body).encode()  # NaN and Infinity go out as the tokens NaN and Infinity, as a client may send them
    case = ATTENTION.Case(body=raw, media_type="application/json")
    response = case.call_and_validate()  # the 422 body must conform to ValidationErrorResponse
    assert response.status_code == 422
    assert any(field in item["msg"] for item in response.json()["detail"]), response.text


@pytest.mark.parametrize(("body", "field"), [(b, f) for _, b, f in TRAIN_INVALID], ids=[i for i, _, _ in TRAIN_INVALID])
def test_invalid_training_input_is_refused_with_a_documented_422(body: dict[str, Any], field: str) -> None:
    case = TRAIN.Case(body=json.dumps(body).encode(), media_type="application/json")
    response = case.call_and_validate()  # the 422 body must conform to ValidationErrorResponse
    assert response.status_code == 422
    assert any(field in item["msg"] for item in response.json()["detail"]), response.text


def test_the_schema_states_the_bounds() -> None:
    """The generator can only produce what the schema describes: the bounds must be in it."""
    components = schema.raw_schema["components"]["schemas"]
    props = components["AttentionRequest"]["properties"]
    value = props["x"]["items"]["items"]
    assert (value["minimum"], value["maximum"]) == (-bounds.max_abs_value, bounds.max_abs_value)
    assert props["x"]["maxItems"] == props["tokens"]["maxItems"] == bounds.max_tokens
    assert props["x"]["items"]["maxItems"] == bounds.max_d_model
    assert props["tokens"]["items"]["maxLength"] == bounds.max_token_chars
    for name, top in (("num_heads", bounds.max_heads), ("blocks", bounds.max_blocks)):
        assert props[name]["maximum"] == top
    for name, top in (("d_k", bounds.max_d_head), ("d_v", bounds.max_d_head), ("d_ff", bounds.max_d_ff),
                      ("window", bounds.max_tokens)):
        (bounded,) = [option for option in props[name]["anyOf"] if option.get("type") == "integer"]
        assert (bounded["minimum"], bounded["maximum"]) == (1, top)
    softmax = components["HeadOut"]["properties"]["softmax"]["items"]["items"]
    assert (softmax["minimum"], softmax["maximum"]) == (0, 1)
    for path in ("/api/attention", "/api/train"):
        responses = schema.raw_schema["paths"][path]["post"]["responses"]
        assert {"200", "413", "422"} <= set(responses)
    train = components["TrainRequest"]["properties"]
    assert (train["steps"]["minimum"], train["steps"]["maximum"]) == (1, bounds.max_train_steps)
    assert (train["learning_rate"]["exclusiveMinimum"], train["learning_rate"]["maximum"]) == (
        0, bounds.max_learning_rate)
    assert train["train"]["maxItems"] == 5
