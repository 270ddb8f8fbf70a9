"""POST /api/model: the pretrained model's answer, its shapes and numbers, and every bad input a 422 naming
its field."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.config import settings
from app.maths.bert import run_model, tokenize
from app.maths.model_files import load_model_files

SENTENCE = "The animal didn't cross the street because it was too tired."


def test_the_answer_holds_every_head_every_layer_and_the_embedding(client: TestClient) -> None:
    r = client.post("/api/model", json={"text": SENTENCE})
    assert r.status_code == 200
    doc = r.json()
    t = len(doc["tokens"])
    assert doc["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert doc["tokens"][0] == "[CLS]" and doc["tokens"][-1] == "[SEP]" and "animal" in doc["tokens"]
    assert np.array(doc["attention"]).shape == (6, 12, t, t)
    assert np.array(doc["hidden_states"]).shape == (7, t, 384)
    assert math.isclose(np.linalg.norm(doc["embedding"]), 1.0, abs_tol=1e-6)
    assert "head" not in doc
    model = load_model_files()
    run = run_model(model, tokenize(model, SENTENCE))
    np.testing.assert_array_equal(np.array(doc["attention"], dtype=np.float32), run.attention)  # float32 round trip


def test_a_layer_and_head_add_that_heads_step_through(client: TestClient) -> None:
    doc = client.post("/api/model", json={"text": SENTENCE, "layer": 2, "head": 5}).json()
    head = {k: np.array(v) for k, v in doc["head"].items()}
    t = len(doc["tokens"])
    assert head["x"].shape == (t, 384) and head["q"].shape == (t, 32) and head["softmax"].shape == (t, t)
    np.testing.assert_allclose(head["x"], doc["hidden_states"][2], atol=0)
    np.testing.assert_allclose(head["softmax"], doc["attention"][2][5], atol=0)
    np.testing.assert_allclose(head["scaled"], head["q"] @ head["k"].T / math.sqrt(32), atol=2e-5)
    np.testing.assert_allclose(head["output"], head["softmax"] @ head["v"], atol=2e-5)


def test_heads_switched_off_weigh_nothing(client: TestClient) -> None:
    off = [{"layer": 3, "head": 4}, {"layer": 0, "head": 0}]
    doc = client.post("/api/model", json={"text": SENTENCE, "heads_off": off}).json()
    assert doc["heads_off"] == off[::-1]
    assert not np.any(doc["attention"][3][4]) and not np.any(doc["attention"][0][0])
    assert np.any(doc["attention"][3][5])


@pytest.mark.parametrize(("body", "field", "words"), [
    ({}, "text", "required"),
    ({"text": ""}, "text", "empty"),
    ({"text": "  \n\t "}, "text", "empty"),
    ({"text": 5}, "text", "string"),
    ({"text": ["a"]}, "text", "string"),
    ({"text": "a\x1bb"}, "text", "U+001B"),
    ({"text": "a\u202eb"}, "text", "U+202E"),
    ({"text": "a\x00"}, "text", "U+0000"),
    ({"text": "x" * (settings.model_max_chars + 1)}, "text", f"at most {settings.model_max_chars}"),
    ({"text": "word " * 70}, "text",
     f"72 WordPiece tokens with [CLS] and [SEP]; the limit is {settings.model_max_tokens}"),
    ({"text": "hi", "layer": 6, "head": 0}, "layer", "5"),
    ({"text": "hi", "layer": -1, "head": 0}, "layer", "0"),
    ({"text": "hi", "layer": 0, "head": 12}, "head", "11"),
    ({"text": "hi", "layer": "1", "head": 1}, "layer", "integer"),
    ({"text": "hi", "layer": 1.5, "head": 1}, "layer", "integer"),
    ({"text": "hi", "layer": True, "head": 1}, "layer", "integer"),
    ({"text": "hi", "layer": 1}, "head", "together"),
    ({"text": "hi", "head": 1}, "layer", "together"),
    ({"text": "hi", "heads_off": [{"layer": 0, "head": 12}]}, "heads_off[0].head", "11"),
    ({"text": "hi", "heads_off": [[0, 1]]}, "heads_off[0]", "object"),
    ({"text": "hi", "extra": 1}, "extra", "not permitted"),
])
def test_bad_input_is_a_422_naming_its_field(client: TestClient, body: dict, field: str, words: str) -> None:
    r = client.post("/api/model", json=body)
    assert r.status_code == 422, r.text
    problem = r.json()["detail"][0]
    assert problem["field"] == field
    assert words in problem["msg"]


def test_newlines_and_tabs_are_a_sentences_own(client: TestClient) -> None:
    r = client.post("/api/model", json={"text": "line one\nline\ttwo"})
    assert r.status_code == 200 and r.json()["tokens"] == ["[CLS]", "line", "one", "line", "two", "[SEP]"]


def test_the_api_docs_describe_it(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    op = spec["paths"]["/api/model"]["post"]
    assert "422" in op["responses"] and "all-MiniLM-L6-v2" in op["description"]
    schema = spec["components"]["schemas"]["ModelRequest"]
    assert schema["properties"]["text"]["maxLength"] == settings.model_max_chars
