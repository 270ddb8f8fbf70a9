"""The JSON API's mechanisms: masks (causal, given, a row that hides every key refused), cross-attention,
positional encodings and temperature; a bad field is named."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fastapi.testclient import TestClient

BASE = {"tokens": ["a", "b", "c"], "x": [[1.0, 0.5], [0.2, -0.3], [0.4, 0.9]]}


def post(client: TestClient, **extra: object) -> tuple[int, dict]:
    r = client.post("/api/attention", content=json.dumps({**BASE, **extra}),
                    headers={"content-type": "application/json"})
    return r.status_code, r.json()


def test_api_causal_mask_nulls_hidden_scaled_and_zeroes_weights(client: TestClient) -> None:
    status, body = post(client, mask="causal")
    assert status == 200
    head = body["heads"][0]
    assert head["scaled"][0][1] is None and head["scaled"][0][2] is None and head["scaled"][1][2] is None
    assert head["scaled"][2][0] is not None
    assert head["softmax"][0] == [1.0, 0.0, 0.0]
    assert body["mask"][0] == [False, True, True]


def test_api_explicit_mask_and_full_row_rejected(client: TestClient) -> None:
    status, body = post(client, mask=[[False, True, False], [False, False, False], [True, False, False]])
    assert status == 200
    assert body["heads"][0]["softmax"][0][1] == 0.0
    status, body = post(client, mask=[[True, True, True], [False, False, False], [False, False, False]])
    assert status == 422
    assert "mask[0]" in body["detail"][0]["msg"]


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"mask": [[False, False]]}, "mask"),
        ({"mask": [[False, False], [False, False], [False, False]]}, "mask[0]"),
        ({"mask": "diagonal"}, "mask"),
        ({"mask": [[0, 1, 0], [0, 0, 0], [0, 0, 0]]}, "mask"),
        ({"context": {"tokens": [], "x": []}}, "context"),
        ({"context": {"tokens": ["x"], "x": [[1.0, 2.0, 3.0]]}}, "context.x"),
        ({"context": {"tokens": ["x", "y"], "x": [[1.0, 2.0]]}}, "context.tokens"),
        ({"positional_encoding": "fourier"}, "positional_encoding"),
        ({"temperature": 0}, "temperature"),
        ({"temperature": "hot"}, "temperature"),
        ({"position_table": [[0.0, 0.0]]}, "position_table"),
    ],
)
def test_api_rejects_bad_mechanism_fields(client: TestClient, extra: dict, needle: str) -> None:
    status, body = post(client, **extra)
    assert status == 422
    assert any(needle in d["msg"] for d in body["detail"])


def test_api_cross_attention_and_positions(client: TestClient) -> None:
    context = {"tokens": ["u", "v", "w", "z"], "x": [[0.1, 0.2], [0.3, -0.1], [0.0, 1.0], [0.5, 0.5]]}
    status, body = post(client, context=context, positional_encoding="sinusoidal", num_heads=2, d_k=1)
    assert status == 200
    head = body["heads"][1]
    assert len(head["scores"]) == 3 and len(head["scores"][0]) == 4
    assert len(head["v"]) == 4
    assert np.allclose(np.array(body["x"]) - np.array(BASE["x"]), body["pe"])
    assert len(body["context"]) == 4
    status, body = post(client, positional_encoding="rope")
    assert status == 200 and body["heads"][0]["q_rot"] is not None
    status, body = post(client, positional_encoding="alibi")
    assert status == 200 and body["heads"][0]["bias"][0][2] < 0
    status, body = post(client, positional_encoding="learned", position_table=[[1.0, 0.0]] * 3)
    assert status == 200 and body["pe"] == [[1.0, 0.0]] * 3
