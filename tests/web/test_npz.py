"""The API's .npz answer (Accept: application/x-npz): every array of the JSON answer, named by its place in
it, equal bit for bit; JSON stays the default, and no Accept header makes a 5xx."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.web.npz_encoding import answer_media_type

NPZ = "application/x-npz"
BODIES = {
    "causal, two heads, a loss": {
        "tokens": ["a", "b", "c"], "x": [[0.3, -0.2, 0.5, 1.0], [0.0, 0.4, -0.6, 0.2], [0.9, 0.1, 0.1, -0.5]],
        "num_heads": 2, "mask": "causal", "seed": 5,
        "loss": {"kind": "attention", "head": 1, "target": [[1, 0, 0], [0.5, 0.5, 0], [0, 0, 1]]},
    },
    "blocks, RoPE, linear": {
        "tokens": ["x", "y"], "x": [[1, 0, 2, -1], [0, 1, -1, 3]], "blocks": 2, "positional_encoding": "rope",
        "attention": "linear", "seed": 9,
    },
}


def leaves(doc: Any, path: str = "") -> dict[str, Any]:
    """Every array-like value of the JSON answer by the .npz's name for it (nulls and [] hold none)."""
    out: dict[str, Any] = {}
    if doc is None or doc == []:
        return out
    if isinstance(doc, dict):
        for key, value in doc.items():
            out.update(leaves(value, f"{path}/{key}" if path else key))
    elif isinstance(doc, list) and not all(isinstance(v, (str, int, float, list)) or v is None for v in doc):
        for i, value in enumerate(doc):
            out.update(leaves(value, f"{path}/{i}"))
    else:
        out[path] = doc
    return out


def as_array(value: Any) -> np.ndarray:
    """A JSON leaf as the .npz holds it: numbers as float64 with null as NaN, a whole number alone as an
    integer, strings and booleans as such."""
    a = np.array(value, dtype=object)
    if a.size and all(isinstance(v, bool) for v in a.flat):
        return a.astype(bool)
    if a.size and all(isinstance(v, str) for v in a.flat):
        return a.astype(str)
    if a.ndim == 0 and isinstance(value, int):  # sizes: d_k, num_heads, window
        return np.array(value)
    return np.array([np.nan if v is None else v for v in a.flat], dtype=np.float64).reshape(a.shape)


def assert_same(npz: np.lib.npyio.NpzFile, doc: dict) -> None:
    expected = leaves(doc)
    assert set(npz.files) == set(expected)
    for name, value in expected.items():
        got, want = npz[name], as_array(value)
        if want.dtype.kind == "f":  # bit for bit, NaN at null; the model computes in float32 and says so
            assert got.dtype in (np.float64, np.float32), name
            assert got.shape == want.shape and got.tobytes() == want.astype(got.dtype).tobytes(), name
        else:
            assert np.array_equal(got, want), name


@pytest.mark.parametrize("name", sorted(BODIES))
def test_the_npz_answer_holds_the_json_answer_s_arrays_bit_for_bit(client: TestClient, name: str) -> None:
    body = BODIES[name]
    as_json = client.post("/api/attention", json=body)
    as_npz = client.post("/api/attention", json=body, headers={"Accept": NPZ})
    assert as_json.status_code == 200 and as_npz.status_code == 200
    assert as_json.headers["content-type"] == "application/json"
    assert as_npz.headers["content-type"] == NPZ and "Accept" in as_npz.headers["vary"]
    npz = np.load(io.BytesIO(as_npz.content), allow_pickle=False)
    assert_same(npz, as_json.json())
    assert npz["heads/0/softmax"].shape == (len(body["tokens"]),) * 2


def test_the_model_s_npz_answer(client: TestClient) -> None:
    body = {"text": "The cat sat.", "layer": 2, "head": 5}
    as_json = client.post("/api/model", json=body).json()
    npz = np.load(io.BytesIO(client.post("/api/model", json=body, headers={"Accept": NPZ}).content))
    assert_same(npz, as_json)
    assert npz["attention"].shape[:2] == (6, 12) and npz["head/softmax"].dtype == np.float32  # as the model computes


@pytest.mark.parametrize("accept", ["", "*/*", "text/html", "application/json, application/x-npz;q=0.5",
                                    "application/x-npz;q=0", "application/x-npz;q=banana", "\x00;;;,,q=",
                                    "application/x-npz;q=0.1, application/json;q=0.05"])
def test_any_accept_header_gets_an_answer(client: TestClient, accept: str) -> None:
    r = client.post("/api/attention", json=BODIES["causal, two heads, a loss"], headers={"Accept": accept})
    assert r.status_code == 200
    assert r.headers["content-type"] == answer_media_type(accept)
    assert r.headers["content-type"] == (NPZ if accept.startswith("application/x-npz;q=0.1") else "application/json")


def test_a_diverged_training_is_a_422_in_either_format(client: TestClient) -> None:
    body = {"tokens": ["a", "b"], "x": [[900, -900], [-900, 900]], "steps": 50, "learning_rate": 10.0,
            "optimizer": "sgd", "train": ["w_q", "w_k", "x"],
            "loss": {"kind": "mse", "target": [[1000, -1000], [-1000, 1000]]}}
    codes = {client.post("/api/train", json=body, headers={"Accept": a}).status_code for a in ("", NPZ)}
    assert len(codes) == 1 and codes <= {200, 422}
