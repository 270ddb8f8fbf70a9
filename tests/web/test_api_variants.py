"""The JSON API's variants: score functions, sparse masks, linear attention and transformer blocks; a bad field
is named."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.maths.test_blocks import by_hand

BASE = {"tokens": ["a", "b", "c", "d"], "x": [[1.0, 0.5], [0.2, -0.3], [0.4, 0.9], [-0.6, 0.1]]}


def post(client: TestClient, **extra: object) -> tuple[int, dict]:
    r = client.post("/api/attention", content=json.dumps({**BASE, **extra}),
                    headers={"content-type": "application/json"})
    return r.status_code, r.json()


def test_api_score_functions(client: TestClient) -> None:
    status, body = post(client, score="general")
    assert status == 200 and body["score"] == "general"
    head = body["heads"][0]
    assert np.allclose(np.array(head["q_w"]) @ np.array(head["k"]).T, head["scores"])
    assert body["scale_factor"] == pytest.approx(math.sqrt(2))
    status, body = post(client, score="additive", weights={"v_a": [[1.0, -1.0]]})
    assert status == 200 and body["scale_factor"] == 1.0
    assert body["weights"]["v_a"] == [[1.0, -1.0]]
    assert np.all(np.abs(body["heads"][0]["scores"]) <= 2.0)
    assert len(body["heads"][0]["q_1"]) == 4 and len(body["heads"][0]["k_2"][0]) == 2


def test_api_linear_attention_returns_both_outputs(client: TestClient) -> None:
    status, body = post(client, attention="linear")
    assert status == 200
    head = body["heads"][0]
    assert head["output"] == head["linear"]["output"]
    assert np.allclose(head["softmax_output"], np.array(head["softmax"]) @ np.array(head["v"]))
    assert np.allclose(np.array(head["linear"]["weights"]).sum(axis=1), 1.0)


def test_api_linear_summary_gives_the_output_without_a_mask_and_says_so(client: TestClient) -> None:
    status, body = post(client, attention="linear")
    assert status == 200
    lin = body["heads"][0]["linear"]
    output = np.array(lin["phi_q"]) @ np.array(lin["kv"]) / np.array(lin["z"])[:, None]  # (T, d_v)
    np.testing.assert_allclose(output, body["heads"][0]["output"], rtol=1e-13)
    status, masked = post(client, attention="linear", mask="causal")
    assert status == 200 and masked["heads"][0]["linear"]["kv"] == lin["kv"]  # every key's, mask or not
    described = client.get("/openapi.json").json()["components"]["schemas"]["LinearOut"]["properties"]
    assert "built once from every key, whatever the mask" in described["kv"]["description"]
    assert "Under a mask it does not give the output" in described["kv"]["description"]
    assert "0 at a hidden key" in described["weights"]["description"]


def test_api_sparse_masks(client: TestClient) -> None:
    status, body = post(client, mask="local", window=1)
    assert status == 200 and body["mask_mode"] == "local" and body["window"] == 1
    assert body["mask"][0] == [False, False, True, True]
    assert body["heads"][0]["softmax"][0][3] == 0.0 and body["heads"][0]["scaled"][0][3] is None
    status, body = post(client, mask="strided")
    assert status == 200 and body["window"] == 2  # ⌈√4⌉


def test_api_transformer_blocks(client: TestClient) -> None:
    status, body = post(client, blocks=2, d_ff=3, activation="gelu", num_heads=2, d_k=1)
    assert status == 200
    assert len(body["blocks"]) == 2
    first, second = body["blocks"]
    assert first["attention"] is None and second["attention"] is not None
    assert len(first["ffn_hidden"][0]) == 3
    assert np.allclose(np.array(first["ln1"]["normalized"]).mean(axis=1), 0.0)
    assert np.allclose(first["residual1"], np.array(first["x"]) + np.array(body["output"]))
    assert second["x"] == first["output"]
    assert body["final"] == second["output"]
    status, body = post(client)
    assert body["blocks"] == [] and body["final"] == body["output"]


def test_api_first_block_weights_are_used(client: TestClient) -> None:
    ffn = {"ffn_w1": [[1.0], [0.0]], "ffn_b1": [0.5], "ffn_w2": [[1.0, -1.0]], "ln2_gamma": [2.0, 2.0]}
    status, body = post(client, blocks=1, d_ff=1, weights=ffn)
    assert status == 200
    block = body["blocks"][0]
    assert block["weights"]["ffn_w1"] == [[1.0], [0.0]] and block["weights"]["ln2_gamma"] == [2.0, 2.0]
    h = np.array(block["h"])
    assert np.allclose(block["ffn_hidden"], h[:, :1] + 0.5)


def test_api_gelu_is_exact_and_gelu_tanh_the_approximation(client: TestClient) -> None:
    acts = {}
    for activation in ("gelu", "gelu_tanh"):
        status, body = post(client, blocks=1, d_ff=16, activation=activation)
        assert status == 200
        hidden = np.array(body["blocks"][0]["ffn_hidden"])  # (T, d_ff)
        acts[activation] = np.array(body["blocks"][0]["ffn_act"])
        np.testing.assert_allclose(acts[activation], by_hand(activation, hidden), rtol=1e-14, atol=1e-14)
    assert 0 < np.abs(acts["gelu"] - acts["gelu_tanh"]).max() < 4.74e-4


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"score": "cosine"}, "score"),
        ({"attention": "sparse"}, "attention"),
        ({"mask": "local", "window": 0}, "window"),
        ({"blocks": 5}, "blocks"),
        ({"blocks": 1, "d_ff": 0}, "d_ff"),
        ({"blocks": 1, "d_ff": 100000}, "d_ff"),
        ({"activation": "tanh"}, "activation"),
        ({"norm": "sandwich"}, "norm"),
        ({"weights": {"ffn_w1": [[1.0]]}}, "weights.ffn_w1"),
        ({"weights": {"v_a": [[1.0, 2.0, 3.0]]}}, "weights.v_a"),
        ({"weights": {"ln1_gamma": [1.0, float("nan")]}}, "ln1_gamma"),
        # 4 queries against 1 source key: query 3 has no key within ±1.
        ({"context": {"tokens": ["s"], "x": [[0.1, 0.2]]}, "mask": "local", "window": 1}, "hides every key"),
    ],
)
def test_api_rejects_bad_variant_fields(client: TestClient, extra: dict, needle: str) -> None:
    r = client.post("/api/attention", content=json.dumps({**BASE, **extra}),
                    headers={"content-type": "application/json"})
    assert r.status_code == 422
    body = r.json()
    assert any(needle in d["msg"] or needle in d.get("field", "") for d in body["detail"]), body
