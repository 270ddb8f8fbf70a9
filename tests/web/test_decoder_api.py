"""POST /api/decoder and POST /api/generate: the language model's answer, its shapes and numbers against the
NumPy pipeline and a hand computation, .npz on request, and every bad input a 422 naming its field."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.config import settings
from app.maths.decoder_files import load_decoder_files
from app.maths.llama import run_decoder

TEXT = "The capital of France is"


def test_the_answer_holds_tokens_attention_candidates_and_the_lens(client: TestClient) -> None:
    r = client.post("/api/decoder", json={"text": TEXT})
    assert r.status_code == 200
    doc = r.json()
    assert doc["model"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert doc["tokens"] == ["The", "Ġcapital", "Ġof", "ĠFrance", "Ġis"] and doc["ids"] == [504, 3575, 282, 4649, 314]
    attention = np.array(doc["attention"])
    assert attention.shape == (30, 9, 5, 5)
    assert not np.any(np.triu(attention, k=1)), "a token never looks at a later one"
    np.testing.assert_allclose(attention.sum(-1), 1.0, atol=1e-6)
    candidates = doc["next"]["candidates"]
    assert len(candidates) == 10 and candidates[0]["token"] == "ĠParis"
    assert math.isclose(candidates[0]["probability"], 0.7725, abs_tol=5e-4)
    assert [c["probability"] for c in candidates] == sorted((c["probability"] for c in candidates), reverse=True)
    assert len(doc["lens"]) == 30 and doc["lens"][-1]["token"] == "ĠParis"
    assert math.isclose(doc["lens"][-1]["probability"], candidates[0]["probability"], abs_tol=1e-5)
    run = run_decoder(load_decoder_files(), TEXT)
    np.testing.assert_array_equal(np.array(doc["attention"], dtype=np.float32), run.attention)  # float32 round trip


def test_a_temperature_is_softmax_of_the_logits_over_tau(client: TestClient) -> None:
    """p_i = exp(l_i/τ) / Σ exp(l_j/τ): the ratio of two candidates' probabilities is exp((l_1 − l_2)/τ)."""
    for tau in (0.5, 1.0, 2.0):
        c = client.post("/api/decoder", json={"text": TEXT, "temperature": tau, "top": 3}).json()["next"]["candidates"]
        assert len(c) == 3
        ratio = c[0]["probability"] / c[1]["probability"]
        assert math.isclose(ratio, math.exp((c[0]["logit"] - c[1]["logit"]) / tau), rel_tol=1e-6)
    cold = client.post("/api/decoder", json={"text": TEXT, "temperature": 0.5}).json()["next"]["candidates"][0]
    hot = client.post("/api/decoder", json={"text": TEXT, "temperature": 2}).json()["next"]["candidates"][0]
    assert cold["probability"] > 0.77 > hot["probability"]


def test_a_layer_and_head_add_that_heads_step_through(client: TestClient) -> None:
    doc = client.post("/api/decoder", json={"text": TEXT, "layer": 3, "head": 4}).json()
    h = doc["head"]
    assert (h["layer"], h["head"], h["kv_head"]) == (3, 4, 1)  # heads 3, 4, 5 share key/value head 1
    q, k, v = (np.array(h[n]) for n in ("q", "k", "v"))
    assert q.shape == (5, 64) and np.array(h["x"]).shape == (5, 576)
    np.testing.assert_allclose(np.array(h["scores"]), q @ k.T, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(np.array(h["scaled"]), q @ k.T / 8, rtol=1e-5, atol=1e-4)
    masked = h["masked"]
    assert all(masked[i][j] is None for i in range(5) for j in range(i + 1, 5))  # −∞ written null
    assert all(masked[i][j] == h["scaled"][i][j] for i in range(5) for j in range(i + 1))
    np.testing.assert_allclose(np.array(h["softmax"]), np.array(doc["attention"][3][4]), atol=0)
    np.testing.assert_allclose(np.array(h["output"]), np.array(h["softmax"]) @ v, rtol=1e-5, atol=1e-5)
    # Position 0 is not turned by RoPE; position 1 turns pair 0 by 1 radian.
    q_pre = np.array(h["q_pre"])
    np.testing.assert_allclose(q[0], q_pre[0], atol=1e-6)
    c, s = math.cos(1.0), math.sin(1.0)
    np.testing.assert_allclose(q[1, :2], [q_pre[1, 0] * c - q_pre[1, 1] * s, q_pre[1, 0] * s + q_pre[1, 1] * c],
                               rtol=1e-5, atol=1e-5)


def test_heads_switched_off_weigh_nothing(client: TestClient) -> None:
    off = [{"layer": 3, "head": 4}, {"layer": 0, "head": 0}]
    doc = client.post("/api/decoder", json={"text": TEXT, "heads_off": off}).json()
    assert doc["heads_off"] == off[::-1]
    assert not np.any(doc["attention"][3][4]) and not np.any(doc["attention"][0][0])
    assert np.any(doc["attention"][3][5])


def test_npz_on_request_holds_the_same_numbers(client: TestClient) -> None:
    r = client.post("/api/decoder", json={"text": TEXT, "layer": 0, "head": 0},
                    headers={"Accept": "application/x-npz"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-npz")
    arrays = np.load(io.BytesIO(r.content))
    js = client.post("/api/decoder", json={"text": TEXT, "layer": 0, "head": 0}).json()
    np.testing.assert_array_equal(arrays["attention"], np.array(js["attention"], dtype=np.float32))  # float32 both
    assert np.isnan(arrays["head/masked"][0, 1])  # null as NaN


def test_greedy_generation_writes_the_likeliest_tokens(client: TestClient) -> None:
    r = client.post("/api/generate", json={"text": TEXT, "max_new_tokens": 4, "temperature": 0})
    assert r.status_code == 200
    doc = r.json()
    assert doc["text"].startswith(" Paris") and len(doc["steps"]) == 4
    first = doc["steps"][0]
    assert first["token"] == "ĠParis" and first["candidates"][0]["id"] == first["id"]
    # Each step is the next token's argmax of the text so far: the second one, from the text with " Paris".
    again = client.post("/api/decoder", json={"text": TEXT + " Paris", "top": 1}).json()
    assert again["next"]["candidates"][0]["id"] == doc["steps"][1]["id"]


def test_the_same_seed_writes_the_same_text(client: TestClient) -> None:
    body = {"text": "Once upon a time", "max_new_tokens": 8, "temperature": 1.2, "top_k": 40, "seed": 3}
    one, two = (client.post("/api/generate", json=body).json() for _ in range(2))
    assert one == two
    others = {client.post("/api/generate", json=body | {"seed": s}).json()["text"] for s in range(4)}
    assert len(others) > 1, "different seeds draw different texts"
    for step in one["steps"]:  # top_k = 40: every drawn token is among the 40 likeliest
        assert step["probability"] > 0


@pytest.mark.parametrize(("path", "body", "field", "words"), [
    ("/api/decoder", {}, "text", "required"),
    ("/api/decoder", {"text": ""}, "text", "empty"),
    ("/api/decoder", {"text": 5}, "text", "string"),
    ("/api/decoder", {"text": "a\x1bb"}, "text", "U+001B"),
    ("/api/decoder", {"text": "x" * (settings.model_max_chars + 1)}, "text", f"at most {settings.model_max_chars}"),
    ("/api/decoder", {"text": "word " * 130}, "text",  # 130 words and the trailing space
     f"131 tokens; the limit is {settings.decoder_max_tokens}"),
    ("/api/decoder", {"text": "hi", "layer": 30, "head": 0}, "layer", "29"),
    ("/api/decoder", {"text": "hi", "layer": 0, "head": 9}, "head", "8"),
    ("/api/decoder", {"text": "hi", "layer": 1}, "head", "together"),
    ("/api/decoder", {"text": "hi", "temperature": 0}, "temperature", "greater than 0"),
    ("/api/decoder", {"text": "hi", "temperature": 5.5}, "temperature", "5"),
    ("/api/decoder", {"text": "hi", "top": 0}, "top", "1"),
    ("/api/decoder", {"text": "hi", "top": 51}, "top", "50"),
    ("/api/decoder", {"text": "hi", "heads_off": [{"layer": 0, "head": 9}]}, "heads_off[0].head", "8"),
    ("/api/decoder", {"text": "hi", "extra": 1}, "extra", "not permitted"),
    ("/api/generate", {"text": "hi", "temperature": 0}, "max_new_tokens", "required"),
    ("/api/generate", {"text": "hi", "max_new_tokens": 0, "temperature": 0}, "max_new_tokens", "1"),
    ("/api/generate", {"text": "hi", "max_new_tokens": 33, "temperature": 0}, "max_new_tokens", "32"),
    ("/api/generate", {"text": "hi", "max_new_tokens": 2, "temperature": -1}, "temperature", "0"),
    ("/api/generate", {"text": "hi", "max_new_tokens": 2, "temperature": False}, "temperature", "number"),
    ("/api/generate", {"text": "hi", "max_new_tokens": 2, "temperature": "1"}, "temperature", "number"),
    ("/api/decoder", {"text": "hi", "temperature": True}, "temperature", "number"),
    ("/api/generate", {"text": "hi", "max_new_tokens": 2, "temperature": 1, "top_p": True}, "top_p", "number"),
    ("/api/generate", {"text": "hi", "max_new_tokens": 2, "temperature": 1, "top_p": 0}, "top_p", "0"),
    ("/api/generate", {"text": "hi", "max_new_tokens": 2, "temperature": 1, "top_k": 0}, "top_k", "1"),
    ("/api/generate", {"text": "hi", "max_new_tokens": 2, "temperature": 1, "seed": -1}, "seed", "0"),
    ("/api/generate", {"text": "", "max_new_tokens": 2, "temperature": 1}, "text", "empty"),
])
def test_bad_input_is_a_422_naming_its_field(client: TestClient, path: str, body: dict, field: str,
                                             words: str) -> None:
    r = client.post(path, json=body)
    assert r.status_code == 422, r.text
    problem = r.json()["detail"][0]
    assert problem["field"] == field
    assert words in problem["msg"]


def test_the_api_docs_describe_both(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert "SmolLM2-135M" in spec["paths"]["/api/decoder"]["post"]["description"]
    assert "greedy" in spec["paths"]["/api/generate"]["post"]["description"]
    schema = spec["components"]["schemas"]["GenerateRequest"]
    assert schema["properties"]["max_new_tokens"]["maximum"] == settings.decoder_max_new_tokens


@pytest.mark.parametrize("tau", [5e-324, 1e-300, 1e-9])
def test_the_smallest_temperature_is_the_argmax(client: TestClient, tau: float) -> None:
    """logits/τ overflows a double for a tiny τ: the answer is still every probability on the likeliest token."""
    r = client.post("/api/decoder", json={"text": TEXT, "temperature": tau, "top": 3})
    assert r.status_code == 200, r.text
    c = r.json()["next"]["candidates"]
    assert c[0]["token"] == "ĠParis" and c[0]["probability"] == 1.0 and c[1]["probability"] == 0.0
    g = client.post("/api/generate", json={"text": TEXT, "max_new_tokens": 2, "temperature": tau})
    assert g.status_code == 200 and g.json()["steps"][0]["token"] == "ĠParis"
