"""Real answers of the JSON API against its documented contract, the response models of app.web.responses.

The answers are encoded straight from the pipeline's arrays (app.web.json_encoding) and never pass through
the models on their way out, so this is where they are held to them: every kind of run — masks,
cross-attention, each positional encoding, each score, linear attention, blocks, both losses,
training — must validate, with exactly the models' fields at every level, and carry the pipeline's
numbers to the last bit.
"""

from __future__ import annotations

import types
import typing
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel

from app.maths.attention import run_attention
from app.web.responses import AttentionResponse, TrainResponse

X = [[0.2, -0.4, 0.9, 0.1], [0.5, 0.5, -0.3, 0.0], [-0.7, 0.2, 0.4, 0.8]]
BASE: dict[str, Any] = {"tokens": ["a", "b", "c"], "x": X, "num_heads": 2, "seed": 7}
CONTEXT = {"tokens": ["un", "deux"], "x": [[0.1, 0.2, 0.3, 0.4], [-0.4, 0.3, -0.2, 0.1]]}
MSE = {"kind": "mse", "target": [[0.1, 0.0, -0.2, 0.3], [0.0, 0.4, 0.1, -0.1], [0.2, 0.2, 0.0, 0.0]]}
ALIGN = {"kind": "attention", "head": 1, "target": [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]}
KINDS: dict[str, dict[str, Any]] = {
    "plain": {},
    "one head, no scaling": {"num_heads": 1, "scale": False},
    "causal": {"mask": "causal"},
    "mask as booleans": {"mask": [[False, True, False], [False, False, True], [True, False, False]]},
    "local": {"mask": "local", "window": 1},
    "strided": {"mask": "strided", "window": 2},
    "cross-attention": {"context": CONTEXT},
    "sinusoidal": {"positional_encoding": "sinusoidal"},
    "learned": {"positional_encoding": "learned", "position_table": [[0.1] * 4, [0.2] * 4, [0.3] * 4, [0.4] * 4]},
    "rope": {"positional_encoding": "rope"},
    "alibi, causal": {"positional_encoding": "alibi", "mask": "causal", "temperature": 2.0},
    "general": {"score": "general"},
    "additive": {"score": "additive"},
    "linear": {"attention": "linear"},
    "blocks, post-norm, relu": {"blocks": 2, "d_ff": 6},
    "blocks, pre-norm, gelu, causal": {"blocks": 3, "norm": "pre", "activation": "gelu", "mask": "causal"},
    "mse loss": {"loss": MSE},
    "attention loss, causal": {"loss": ALIGN, "mask": "causal"},
    "mse loss, cross-attention, additive": {"loss": MSE, "context": CONTEXT, "score": "additive"},
    "mse loss, linear": {"loss": MSE, "attention": "linear"},
}


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The response models an annotation holds (through lists, unions and Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) in (list, typing.Union, types.UnionType, typing.Annotated):
        return [m for arg in typing.get_args(annotation) for m in models_in(arg)]
    return []


def assert_exact_fields(model: type[BaseModel], data: Any, where: str = "") -> None:
    """Every object of ``data`` has exactly its model's fields: none missing, none extra."""
    assert isinstance(data, dict), where
    assert set(data) == set(model.model_fields), f"{where or 'the answer'}: {set(data) ^ set(model.model_fields)}"
    for name, field in model.model_fields.items():
        nested = models_in(field.annotation)
        if nested:
            _walk(nested[0], data[name], f"{where}.{name}" if where else name)


def _walk(model: type[BaseModel], value: Any, where: str) -> None:
    if isinstance(value, list):
        for i, item in enumerate(value):
            _walk(model, item, f"{where}[{i}]")
    elif value is not None:
        assert_exact_fields(model, value, where)


@pytest.mark.parametrize("extra", KINDS.values(), ids=KINDS.keys())
def test_every_kind_of_answer_conforms_to_the_response_model(client: TestClient, extra: dict[str, Any]) -> None:
    r = client.post("/api/attention", json=BASE | extra)
    assert r.status_code == 200, r.text
    AttentionResponse.model_validate_json(r.content)
    assert_exact_fields(AttentionResponse, r.json())


@pytest.mark.parametrize("extra", [
    {"loss": MSE, "optimizer": "adam", "train": ["w_q", "w_k", "x"]},
    {"loss": ALIGN, "mask": "causal", "positional_encoding": "rope"},
    {"loss": MSE, "context": CONTEXT, "score": "general", "steps": 5},
], ids=["adam", "attention loss, rope", "cross-attention, general"])
def test_every_kind_of_training_answer_conforms_to_the_response_model(client: TestClient,
                                                                      extra: dict[str, Any]) -> None:
    r = client.post("/api/train", json=BASE | {"steps": 3} | extra)
    assert r.status_code == 200, r.text
    TrainResponse.model_validate_json(r.content)
    assert_exact_fields(TrainResponse, r.json())


def test_the_contract_check_sees_a_missing_and_an_extra_field(client: TestClient) -> None:
    answer = client.post("/api/attention", json=BASE).json()
    del answer["heads"][1]["q_rot"]
    with pytest.raises(AssertionError, match="q_rot"):
        assert_exact_fields(AttentionResponse, answer)
    answer = client.post("/api/attention", json=BASE).json()
    answer["weights"]["w_z"] = []
    with pytest.raises(AssertionError, match="w_z"):
        assert_exact_fields(AttentionResponse, answer)


def test_the_numbers_are_the_pipelines_to_the_last_bit(client: TestClient) -> None:
    r = client.post("/api/attention", json=BASE | {"mask": "causal", "positional_encoding": "rope"})
    assert r.status_code == 200
    body = r.json()
    run = run_attention(np.array(X), num_heads=2, seed=7, mask="causal", positional_encoding="rope")
    hidden = np.triu(np.ones((3, 3), dtype=bool), k=1)  # (T, T) the causal mask
    for got, head in zip(body["heads"], run.heads, strict=True):
        for name in ("q", "k", "v", "scores", "softmax", "output", "q_rot", "k_rot"):
            np.testing.assert_array_equal(np.array(got[name]), getattr(head, name), err_msg=name)
        scaled = np.array(got["scaled"], dtype=object)  # (T, T): null where hidden
        assert all(v is None for v in scaled[hidden])
        np.testing.assert_array_equal(scaled[~hidden].astype(float), head.scaled[~hidden])
    for name in ("concat", "output", "final"):
        np.testing.assert_array_equal(np.array(body[name]), run.output if name == "final" else getattr(run, name))
    for name, value in body["weights"].items():
        np.testing.assert_array_equal(np.array(value), getattr(run.weights, name), err_msg=name)
