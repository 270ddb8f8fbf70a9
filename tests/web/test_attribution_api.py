"""POST /api/decoder/attribution: why the model says a token, each part's share of its logit, against PyTorch hooks
(tests/fixtures/smollm2_attribution.npz) and against /api/decoder's own logits; every bad input a 422 naming its
field."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "smollm2_attribution.npz"
with np.load(FIXTURE) as npz:
    REF = dict(npz)
TEXT = str(REF["text_0"])  # "The capital of France is"


def shares(doc: dict) -> tuple[float, np.ndarray, np.ndarray]:
    parts = doc["parts"]
    assert [p["kind"] for p in parts] == ["embedding"] + ["head"] * 270 + ["mlp"] * 30
    heads = np.zeros((30, 9))
    for p in parts[1:271]:
        heads[p["layer"], p["head"]] = p["value"]
    mlp = np.array([p["value"] for p in parts[271:]])
    assert [p["layer"] for p in parts[271:]] == list(range(30))
    return parts[0]["value"], heads, mlp


def test_by_default_it_explains_the_most_likely_token_and_equals_the_hooks(client: TestClient) -> None:
    r = client.post("/api/decoder/attribution", json={"text": TEXT})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["target"] == {"id": int(REF["target_0"]), "token": "ĠParis"} and doc["contrast"] is None
    embedding, heads, mlp = shares(doc)
    np.testing.assert_allclose(heads, REF["heads_0"], atol=1e-3)
    np.testing.assert_allclose(mlp, REF["mlp_0"], atol=1e-3)
    assert embedding == pytest.approx(float(REF["embedding_0"]), abs=1e-3)
    assert doc["sum"] == pytest.approx(doc["logit"], abs=1e-3)
    assert embedding + heads.sum() + mlp.sum() == pytest.approx(doc["logit"], abs=1e-3)
    top = client.post("/api/decoder", json={"text": TEXT, "top": 1}).json()["next"]["candidates"][0]
    assert doc["logit"] == pytest.approx(top["logit"], abs=1e-4)


def test_a_token_named_by_id_piece_or_one_token_text_is_the_same(client: TestClient) -> None:
    paris = int(REF["target_0"])
    docs = [client.post("/api/decoder/attribution", json={"text": TEXT, "target": t}).json()
            for t in (paris, "ĠParis", " Paris")]
    assert all(d["target"]["id"] == paris for d in docs)
    assert docs[0]["parts"] == docs[1]["parts"] == docs[2]["parts"]


def test_a_contrast_explains_the_logit_difference(client: TestClient) -> None:
    doc = client.post("/api/decoder/attribution",
                      json={"text": TEXT, "contrast": int(REF["contrast_0"])}).json()
    embedding, heads, mlp = shares(doc)
    np.testing.assert_allclose(heads, REF["heads_c_0"], atol=1e-3)
    assert doc["logit"] == pytest.approx(float(REF["difference_0"]), abs=1e-3)
    assert doc["sum"] == pytest.approx(doc["logit"], abs=1e-3)
    rome = client.post("/api/decoder/attribution", json={"text": TEXT, "target": " Paris", "contrast": " Rome"}).json()
    cands = {c["token"]: c["logit"] for c in client.post(
        "/api/decoder", json={"text": TEXT, "top": 50}).json()["next"]["candidates"]}
    if "ĠRome" in cands:
        assert rome["logit"] == pytest.approx(cands["ĠParis"] - cands["ĠRome"], abs=1e-4)
    assert rome["contrast"]["token"] == "ĠRome" and rome["sum"] == pytest.approx(rome["logit"], abs=1e-3)


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"text": TEXT, "target": "Paris is"}, "target", "2 tokens"),
    ({"text": TEXT, "target": 49152}, "target", "0 to 49151"),
    ({"text": TEXT, "target": -1}, "target", "0 to 49151"),
    ({"text": TEXT, "target": " Paris", "contrast": "ĠParis"}, "contrast", "another token"),
    ({"text": TEXT, "contrast": "the capital"}, "contrast", "2 tokens"),
    ({"text": "", "target": 5}, "text", "empty"),
    ({"text": TEXT, "why": 1}, "why", "xtra"),
])
def test_a_bad_request_is_a_422_naming_its_field(client: TestClient, body: dict, field: str, words: str) -> None:
    r = client.post("/api/decoder/attribution", json=body)
    assert r.status_code == 422, r.text
    problem = r.json()["detail"][0]
    assert problem["field"] == field and words in problem["msg"], problem


def test_the_decoders_and_the_encoders_answers_carry_the_rollout(client: TestClient) -> None:
    from app.maths.attribution import attention_rollout

    doc = client.post("/api/decoder", json={"text": TEXT}).json()
    rolled = np.array(doc["rollout"])
    np.testing.assert_allclose(rolled, attention_rollout(np.array(doc["attention"])), atol=1e-6)
    assert rolled.shape == (5, 5) and rolled[:, 0].min() >= 0.999
    doc = client.post("/api/model", json={"text": "The bank of the river."}).json()
    np.testing.assert_allclose(np.array(doc["rollout"]), attention_rollout(np.array(doc["attention"])), atol=1e-6)
    np.testing.assert_allclose(np.array(doc["rollout"]).sum(axis=-1), 1.0, atol=1e-6)


def test_a_heads_step_through_carries_its_queries_and_keys_in_one_picture(client: TestClient) -> None:
    from app.maths.attribution import qk_map

    h = client.post("/api/decoder", json={"text": TEXT, "layer": 3, "head": 4}).json()["head"]
    qk = h["qk_map"]
    assert [p["kind"] for p in qk["points"]] == ["q"] * 5 + ["k"] * 5
    assert [p["token"] for p in qk["points"][:5]] == ["The", "Ġcapital", "Ġof", "ĠFrance", "Ġis"]
    qs, ks, explained = qk_map(np.array(h["q"], dtype=np.float32), np.array(h["k"], dtype=np.float32))
    np.testing.assert_allclose([[p["x"], p["y"]] for p in qk["points"]], np.concatenate([qs, ks]), atol=1e-5)
    np.testing.assert_allclose(qk["explained_variance"], explained, atol=1e-6)


def test_the_candidates_say_what_the_cut_offs_leave_a_sampler(client: TestClient) -> None:

    plain = client.post("/api/decoder", json={"text": TEXT, "top": 20}).json()["next"]["candidates"]
    assert all(c.get("drawn") is None for c in plain)
    cut = client.post("/api/decoder", json={"text": TEXT, "top": 20, "temperature": 1.3, "top_k": 8,
                                            "top_p": 0.95, "min_p": 0.02}).json()["next"]["candidates"]
    logits = np.zeros(49152)
    for c in cut:
        logits[c["id"]] = c["logit"]
    drawn = [c["drawn"] for c in cut]
    assert sum(drawn) == pytest.approx(1.0, abs=1e-9)  # the kept ones are among the 20 shown
    assert drawn[0] > cut[0]["probability"] and all(d == 0 for d in drawn[8:])  # top-k 8 keeps 8 at most
    kept = [d > 0 for d in drawn]
    assert kept == sorted(kept, reverse=True)  # a cut never keeps a less likely token over a likelier one
    p = np.array([c["probability"] for c in cut])
    assert all(p[i] >= 0.02 * p[0] for i in range(20) if kept[i])


@pytest.mark.parametrize("min_p", [0, 1.5, "0.1"])
def test_min_p_out_of_range_is_a_422_naming_it(client: TestClient, min_p: object) -> None:
    for path, body in (("/api/decoder", {"text": TEXT}), ("/api/generate", {"text": TEXT, "max_new_tokens": 2,
                                                                           "temperature": 1})):
        r = client.post(path, json={**body, "min_p": min_p})
        assert r.status_code == 422 and r.json()["detail"][0]["field"] == "min_p", r.text


def test_generation_with_min_p_draws_only_what_it_keeps(client: TestClient) -> None:
    steps = client.post("/api/generate", json={"text": "Once upon a time", "max_new_tokens": 6, "temperature": 1.5,
                                               "min_p": 0.3, "seed": 3}).json()["steps"]
    for s in steps:
        best = s["candidates"][0]["probability"]  # at τ = 1.5, the likeliest of its step
        assert s["probability"] >= 0.3 * best - 1e-12
