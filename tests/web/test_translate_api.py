"""POST /api/translate: the translator's answer, its shapes and numbers against the NumPy pass and a hand
computation, .npz on request, one computation however many ask, and every bad input a 422 naming its field."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.maths.marian import translate
from app.maths.marian_files import load_translator_files
from app.serving.real_models import translator

BANK = "The bank of the river was muddy."


def test_the_answer_holds_pieces_maps_steps_and_the_alignment(client: TestClient) -> None:
    r = client.post("/api/translate", json={"text": BANK})
    assert r.status_code == 200
    doc = r.json()
    assert doc["direction"] == "en-pt" and doc["text"] == "A margem do rio estava enlameado."
    assert doc["source"] == ["▁The", "▁bank", "▁of", "▁the", "▁river", "▁was", "▁mu", "ddy", ".", "</s>"]
    assert doc["source_ids"][-1] == 0 and len(doc["source_ids"]) == len(doc["source"])
    s, t = len(doc["source"]), len(doc["target"])
    assert doc["target"][:4] == ["▁A", "▁margem", "▁do", "▁rio"] and len(doc["target_ids"]) == t
    encoder, cross = np.array(doc["encoder_attention"]), np.array(doc["cross_attention"])
    assert encoder.shape == (6, 8, s, s) and cross.shape == (2, 8, t, s)
    np.testing.assert_allclose(encoder.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(cross.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(np.array(doc["alignment"]), cross[1, 0])
    assert [step["token"] for step in doc["steps"]] == [*doc["target"], "</s>"]
    for step in doc["steps"]:
        assert step["candidates"][0]["token"] == step["token"] and len(step["candidates"]) == 5
        assert math.isclose(step["candidates"][0]["probability"], step["probability"])
    assert 50 < doc["shortlist_size"] < 32000
    run = translate(load_translator_files("en-pt"), BANK)
    np.testing.assert_array_equal(np.array(doc["cross_attention"], dtype=np.float32), run.cross_attention)


def test_a_cross_head_step_through_recomputes_by_hand(client: TestClient) -> None:
    doc = client.post("/api/translate", json={"text": BANK, "layer": 1, "head": 3}).json()
    head = doc["head"]
    q, k, v = (np.array(head[name], dtype=np.float64) for name in ("q", "k", "v"))
    t, s = len(doc["target"]), len(doc["source"])
    assert q.shape == (t, 32) and k.shape == v.shape == (s, 32)
    scores = q @ k.T
    np.testing.assert_allclose(head["scores"], scores, atol=1e-4)
    np.testing.assert_allclose(head["scaled"], scores / math.sqrt(32), atol=1e-5)
    weights = np.exp(scores / math.sqrt(32))
    weights /= weights.sum(1, keepdims=True)
    np.testing.assert_allclose(head["softmax"], weights, atol=1e-5)
    np.testing.assert_allclose(head["output"], weights @ v, atol=1e-5)
    np.testing.assert_allclose(head["softmax"], np.array(doc["cross_attention"])[1, 3], atol=1e-5)


def test_portuguese_to_english(client: TestClient) -> None:
    doc = client.post("/api/translate", json={"text": "Eu depositei dinheiro no banco.", "direction": "pt-en"}).json()
    assert doc["direction"] == "pt-en" and doc["text"] == "I deposited money in the bank."


def test_npz_on_request_holds_the_same_numbers(client: TestClient) -> None:
    r = client.post("/api/translate", json={"text": BANK}, headers={"Accept": "application/x-npz"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-npz")
    arrays = np.load(io.BytesIO(r.content))
    doc = client.post("/api/translate", json={"text": BANK}).json()
    np.testing.assert_array_equal(arrays["cross_attention"], np.array(doc["cross_attention"], dtype=np.float32))
    np.testing.assert_array_equal(arrays["source_ids"], doc["source_ids"])


def test_the_same_question_is_computed_once(client: TestClient) -> None:
    service = translator()
    text = "Attention is all you need, twice."
    before = service.computed
    answers = [client.post("/api/translate", json={"text": text}).content for _ in range(3)]
    assert answers[0] == answers[1] == answers[2]
    assert service.computed == before + 1


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"text": ""}, "text", ""),
    ({"text": "word " * 150}, "text", "more than 128"),
    ({"text": "x" * 1001}, "text", "1000"),
    ({"text": BANK, "direction": "en-fr"}, "direction", "'en-pt' or 'pt-en'"),
    ({"text": BANK, "layer": 1}, "head", "together"),
    ({"text": BANK, "layer": 2, "head": 0}, "layer", "1"),
    ({"text": BANK, "layer": 0, "head": 8}, "head", "7"),
    ({"text": BANK, "beam": 4}, "beam", ""),
])
def test_bad_input_is_a_422_naming_its_field(client: TestClient, body: dict, field: str, words: str) -> None:
    r = client.post("/api/translate", json=body)
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert any(d["field"] == field and words in d["msg"] for d in detail), detail
