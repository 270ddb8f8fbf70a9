"""The JSON API through TestClient: the response contract, defaults, reproducibility, the seeds, and every
kind of bad input answered with a 422 (or 413) that names the field, never a 500."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from httpx import Response

from app.config import settings
from app.lesson.presets import PRESETS
from app.maths.attention import run_attention
from tests.maths.test_attention import POOL_A_AT, POOL_OUTPUT, S003_A, S003_OUTPUT, S003_SCALED

URL = "/api/attention"
JSON = {"content-type": "application/json"}


def post_raw(client: TestClient, body: str | bytes) -> Response:
    """POST a hand-written body, so that NaN, Infinity and malformed JSON reach the server as typed."""
    return client.post(URL, content=body, headers=JSON)


def error_text(response: Response) -> str:
    """Every field and message of a 422, as one string to search."""
    detail = response.json()["detail"]
    assert isinstance(detail, list) and detail
    for item in detail:
        assert item["msg"].startswith(item["field"])
    return " | ".join(f'{item["field"]} {item["msg"]}' for item in detail)


def shape(value: list) -> tuple[int, ...]:
    return np.asarray(value).shape


def preset_request(key: str) -> dict[str, Any]:
    p = PRESETS[key]
    return {
        "tokens": list(p.tokens), "x": [list(row) for row in p.x], "num_heads": p.num_heads,
        "d_k": p.d_k, "d_v": p.d_v, "seed": p.seed, "scale": p.scale,
        "weights": {name: json.loads(json.dumps(value)) for name, value in p.weights.items()},
    }


# --- the contract ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("t", "d_model", "h", "d_k", "d_v"), [(3, 4, 1, 4, 4), (5, 6, 3, 2, 4), (2, 8, 2, 5, 3)])
def test_api_returns_every_field_with_its_shape(client: TestClient, t: int, d_model: int, h: int, d_k: int,
                                                d_v: int) -> None:
    x = np.random.default_rng(t).normal(size=(t, d_model)).round(3).tolist()
    tokens = [f"tok{i}" for i in range(t)]
    r = client.post(URL, json={"tokens": tokens, "x": x, "num_heads": h, "d_k": d_k, "d_v": d_v})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) >= {"tokens", "x", "heads", "concat", "output", "weights", "num_heads", "d_k", "d_v", "scale"}
    assert body["tokens"] == tokens
    assert body["x"] == x
    assert (body["num_heads"], body["d_k"], body["d_v"]) == (h, d_k, d_v)
    assert len(body["heads"]) == h
    for head in body["heads"]:
        assert shape(head["q"]) == (t, d_k)
        assert shape(head["k"]) == (t, d_k)
        assert shape(head["v"]) == (t, d_v)
        for name in ("scores", "scaled", "softmax"):
            assert shape(head[name]) == (t, t), name
        assert shape(head["output"]) == (t, d_v)
        np.testing.assert_allclose(np.sum(head["softmax"], axis=1), np.ones(t))
    assert shape(body["concat"]) == (t, h * d_v)
    assert shape(body["output"]) == (t, d_model)
    w = body["weights"]
    assert shape(w["w_q"]) == (h, d_model, d_k)
    assert shape(w["w_k"]) == (h, d_model, d_k)
    assert shape(w["w_v"]) == (h, d_model, d_v)
    assert shape(w["w_o"]) == (h * d_v, d_model)


def test_api_numbers_are_the_pipelines(client: TestClient) -> None:
    x = [[0.2, -0.4, 0.9, 0.1], [0.5, 0.5, -0.3, 0.0], [-0.7, 0.2, 0.4, 0.8]]
    r = client.post(URL, json={"tokens": ["a", "b", "c"], "x": x, "num_heads": 2, "seed": 42})
    assert r.status_code == 200
    body = r.json()
    run = run_attention(np.array(x), num_heads=2, seed=42)
    for got, head in zip(body["heads"], run.heads, strict=True):
        for name in ("q", "k", "v", "scores", "scaled", "softmax", "output"):
            np.testing.assert_allclose(got[name], getattr(head, name), rtol=1e-12, err_msg=name)
    np.testing.assert_allclose(body["concat"], run.concat, rtol=1e-12)
    np.testing.assert_allclose(body["output"], run.output, rtol=1e-12)


def test_api_defaults(client: TestClient) -> None:
    x = [[0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0.6, 0.5, 0.4, 0.3, 0.2, 0.1]]
    r = client.post(URL, json={"tokens": ["a", "b"], "x": x})
    assert r.status_code == 200
    body = r.json()
    assert body["num_heads"] == 1
    assert body["d_k"] == 6  # d_model // h
    assert body["d_v"] == 6  # d_k
    assert body["scale"] is True
    seeded = run_attention(np.array(x), seed=0)
    np.testing.assert_array_equal(body["weights"]["w_q"], seeded.weights.w_q)
    np.testing.assert_allclose(body["output"], seeded.output, rtol=1e-12)


def test_api_default_d_k_is_d_model_over_heads(client: TestClient) -> None:
    r = client.post(URL, json={"tokens": ["a"], "x": [[1, 2, 3, 4, 5, 6, 7]], "num_heads": 3})
    assert r.status_code == 200
    body = r.json()
    assert (body["d_k"], body["d_v"]) == (2, 2)
    assert shape(body["concat"]) == (1, 6)


def test_api_scale_false_returns_unscaled_scores(client: TestClient) -> None:
    r = client.post(URL, json={"tokens": ["a", "b"], "x": [[1, 2], [3, 4]], "scale": False})
    assert r.status_code == 200
    body = r.json()
    assert body["scale"] is False
    assert body["heads"][0]["scaled"] == body["heads"][0]["scores"]


def test_api_posting_the_returned_weights_back_reproduces_the_output(client: TestClient) -> None:
    request = {"tokens": ["a", "b", "c"], "x": [[0.3, -0.2, 0.5, 1.0], [0.0, 0.4, -0.6, 0.2], [0.9, 0.1, 0.1, -0.5]],
               "num_heads": 2, "d_v": 3, "seed": 5}
    first = client.post(URL, json=request)
    assert first.status_code == 200
    other_seed = client.post(URL, json={**request, "seed": 6})
    assert other_seed.status_code == 200
    assert other_seed.json()["output"] != first.json()["output"]
    again = client.post(URL, json={**request, "seed": 6, "weights": first.json()["weights"]})
    assert again.status_code == 200
    assert again.json()["weights"] == first.json()["weights"]
    assert again.json()["output"] == first.json()["output"]


def test_api_same_request_same_response(client: TestClient) -> None:
    request = {"tokens": ["a", "b"], "x": [[1, 0, 2], [0, 1, -1]], "seed": 77}
    a, b = client.post(URL, json=request), client.post(URL, json=request)
    assert a.status_code == b.status_code == 200
    assert a.content == b.content


def test_api_given_w_q_leaves_the_seeded_w_k(client: TestClient) -> None:
    request = {"tokens": ["a", "b"], "x": [[1, 0], [0, 1]], "seed": 3}
    seeded = client.post(URL, json=request)
    w_q = [[[0.5, 0.0], [0.0, 0.5]]]
    mixed = client.post(URL, json={**request, "weights": {"w_q": w_q}})
    assert seeded.status_code == mixed.status_code == 200
    assert mixed.json()["weights"]["w_q"] == w_q
    for name in ("w_k", "w_v", "w_o"):
        assert mixed.json()["weights"][name] == seeded.json()["weights"][name]


def test_api_reproduces_seed_001(client: TestClient) -> None:
    r = client.post(URL, json=preset_request("pool"))
    assert r.status_code == 200
    body = r.json()
    np.testing.assert_array_equal(np.round(body["heads"][0]["scores"], 2), POOL_A_AT)
    np.testing.assert_array_equal(np.round(body["output"], 2), POOL_OUTPUT)


def test_api_reproduces_seed_003(client: TestClient) -> None:
    r = client.post(URL, json=preset_request("three-token"))
    assert r.status_code == 200
    head = r.json()["heads"][0]
    np.testing.assert_array_equal(np.round(head["scaled"], 3), S003_SCALED)
    np.testing.assert_array_equal(np.round(head["softmax"], 3), S003_A)
    np.testing.assert_array_equal(np.round(head["output"], 3), S003_OUTPUT)


def test_api_accepts_the_schema_example(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()["components"]["schemas"]["AttentionRequest"]
    (example,) = schema["examples"]
    r = client.post(URL, json=example)
    assert r.status_code == 200
    assert r.json()["tokens"] == example["tokens"]
    assert r.json()["scale"] is example["scale"]


# --- health and the schema ------------------------------------------------------------------------


def test_healthz(client: TestClient) -> None:
    r = client.get("/healthz")
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}


def test_openapi_documents_both_paths(client: TestClient) -> None:
    r = client.get("/openapi.json")
    assert r.status_code == 200
    paths = r.json()["paths"]
    assert "post" in paths["/api/attention"]
    assert "get" in paths["/healthz"]
    assert "/" not in paths  # the page is not part of the API


def test_openapi_states_the_bounds(client: TestClient) -> None:
    props = client.get("/openapi.json").json()["components"]["schemas"]["AttentionRequest"]["properties"]
    assert props["num_heads"]["maximum"] == settings.max_heads
    assert props["num_heads"]["minimum"] == 1
    assert props["seed"]["maximum"] == settings.max_seed


# --- bad input: 422 naming the field --------------------------------------------------------------

TWO_BY_THREE = '"tokens":["a","b"],"x":[[1,2,3],[4,5,6]]'

BAD_BODIES: list[tuple[str, str, str]] = [
    # (id, raw body, text the field or message must contain)
    ("nan", '{"tokens":["a"],"x":[[NaN]]}', "x[0][0]"),
    ("infinity", '{"tokens":["a"],"x":[[Infinity]]}', "x[0][0]"),
    ("minus_infinity", '{"tokens":["a","b"],"x":[[1],[-Infinity]]}', "x[1][0]"),
    ("overflow_1e999", '{"tokens":["a","b"],"x":[[1,2,3],[4,5,1e999]]}', "x[1][2]"),
    ("nan_in_weights", '{' + TWO_BY_THREE + ',"weights":{"w_o":[[1,2,3],[4,5,6],[7,8,NaN]]}}', "weights.w_o[2][2]"),
    ("ragged_x", '{"tokens":["a","b"],"x":[[1,2,3],[4,5]]}', "x[1]"),
    ("tokens_rows_mismatch", '{"tokens":["a"],' + '"x":[[1,2,3],[4,5,6]]}', "tokens"),
    ("boolean_number", '{"tokens":["a","b"],"x":[[1,2,3],[4,5,true]]}', "x[1][2]"),
    ("string_number", '{"tokens":["a","b"],"x":[[1,2,3],[4,5,"1"]]}', "x[1][2]"),
    ("boolean_num_heads", '{' + TWO_BY_THREE + ',"num_heads":true}', "num_heads"),
    ("string_seed", '{' + TWO_BY_THREE + ',"seed":"1"}', "seed"),
    ("float_seed", '{' + TWO_BY_THREE + ',"seed":1.5}', "seed"),
    ("string_scale", '{' + TWO_BY_THREE + ',"scale":"yes"}', "scale"),
    ("num_heads_0", '{' + TWO_BY_THREE + ',"num_heads":0}', "num_heads"),
    ("num_heads_9", '{' + TWO_BY_THREE + ',"num_heads":9}', "num_heads"),
    ("d_k_0", '{' + TWO_BY_THREE + ',"d_k":0}', "d_k"),
    ("d_k_65", '{' + TWO_BY_THREE + ',"d_k":65}', "d_k"),
    ("d_v_65", '{' + TWO_BY_THREE + ',"d_v":65}', "d_v"),
    ("negative_seed", '{' + TWO_BY_THREE + ',"seed":-1}', "seed"),
    ("seed_too_big", '{' + TWO_BY_THREE + f',"seed":{settings.max_seed + 1}}}', "seed"),
    ("value_1001", '{"tokens":["a","b"],"x":[[1,2,3],[4,5,1001]]}', "x[1][2]"),
    ("value_minus_1001", '{"tokens":["a","b"],"x":[[1,2,3],[-1001,5,6]]}', "x[1][0]"),
    ("tokens_65", json.dumps({"tokens": ["a"] * 65, "x": [[1.0]] * 65}), "tokens"),
    ("d_model_65", json.dumps({"tokens": ["a"], "x": [[1.0] * 65]}), "x[0]"),
    ("token_too_long", json.dumps({"tokens": ["a" * (settings.max_token_chars + 1)], "x": [[1.0]]}), "tokens[0]"),
    ("token_not_string", '{"tokens":[1],"x":[[1]]}', "tokens[0]"),
    ("no_tokens", '{"tokens":[],"x":[]}', "tokens"),
    ("empty_row", '{"tokens":["a"],"x":[[]]}', "x[0]"),
    ("missing_x", '{"tokens":["a"]}', "x"),
    ("w_q_wrong_shape", '{' + TWO_BY_THREE + ',"weights":{"w_q":[[[1,2],[3,4]]]}}', "weights.w_q"),
    ("w_k_too_many_heads", '{' + TWO_BY_THREE + ',"weights":{"w_k":[[[1,2,3],[1,2,3],[1,2,3]],'
     '[[1,2,3],[1,2,3],[1,2,3]]]}}', "weights.w_k"),
    ("w_v_ragged", '{' + TWO_BY_THREE + ',"weights":{"w_v":[[[1,2,3],[1,2],[1,2,3]]]}}', "weights.w_v"),
    ("w_o_wrong_shape", '{' + TWO_BY_THREE + ',"weights":{"w_o":[[1,2,3]]}}', "weights.w_o"),
    ("w_q_too_shallow", '{' + TWO_BY_THREE + ',"weights":{"w_q":[[1,2,3]]}}', "weights.w_q"),
    ("w_q_too_deep", '{' + TWO_BY_THREE + ',"weights":{"w_q":[[[[1]]]]}}', "weights.w_q"),
    ("w_q_fits_default_d_k_not_given_d_k", '{' + TWO_BY_THREE + ',"d_k":2,"weights":{"w_q":'
     '[[[1,2,3],[1,2,3],[1,2,3]]]}}', "weights.w_q"),
    ("unknown_field", '{' + TWO_BY_THREE + ',"colour":"red"}', "colour"),
    ("unknown_weight", '{' + TWO_BY_THREE + ',"weights":{"w_x":[[1]]}}', "weights.w_x"),
    ("d_k_defaults_to_zero", '{' + TWO_BY_THREE + ',"num_heads":4}', "d_k"),
    ("malformed_json", '{"tokens":["a"],"x":[[1]', "JSON"),
    ("trailing_comma", '{"tokens":["a"],"x":[[1],]}', "JSON"),
    ("not_an_object", "[1, 2]", "body"),
    ("empty_body", "", "body"),
]


@pytest.mark.parametrize(("body", "names"), [(b, n) for _, b, n in BAD_BODIES], ids=[i for i, _, _ in BAD_BODIES])
def test_api_rejects_bad_input_naming_the_field(client: TestClient, body: str, names: str) -> None:
    r = post_raw(client, body)
    assert r.status_code == 422
    assert names in error_text(r)


def test_api_rejects_nan(client: TestClient) -> None:
    r = post_raw(client, '{"tokens":["a"],"x":[[NaN]]}')
    assert r.status_code == 422
    (item,) = r.json()["detail"]
    assert item["field"] == "x[0][0]"
    assert "finite" in item["msg"]
    assert item["loc"] == ["body", "x", "0", "0"]


def test_api_rejects_everything_wrong_at_once(client: TestClient) -> None:
    r = post_raw(client, '{"tokens":["a"],"x":[[NaN, true, "1"]],"num_heads":0}')
    assert r.status_code == 422
    fields = {item["field"] for item in r.json()["detail"]}
    assert {"x[0][0]", "x[0][1]", "x[0][2]", "num_heads"} <= fields


def test_api_malformed_json_names_the_body(client: TestClient) -> None:
    r = post_raw(client, '{"tokens":["a"],"x":[[1]')
    assert r.status_code == 422
    (item,) = r.json()["detail"]
    assert item["field"] == "body"


@pytest.mark.parametrize(("body", "field"), [
    ({"tokens": ["a", "b"], "x": [[1, 2], [3]]}, "x[1]"),
    ({"tokens": ["a"], "x": [[1, 2], [3, 4]]}, "tokens"),
    ({"tokens": ["a", "b"], "x": [[1, 2], [3, 4]], "num_heads": 2, "d_k": 1,
      "weights": {"w_q": [[[1], [2]], [[1]]]}}, "weights.w_q[1]"),
    ({"tokens": ["a", "b"], "x": [[1, 2], [3, 4]], "mask": [[False, True], [True, True]]}, "mask[1]"),
    ({"tokens": ["a"], "x": [[1, 2]], "context": {"tokens": ["s", "t"], "x": [[1, 2]]}}, "context.tokens"),
])
def test_api_checks_across_fields_name_the_field(client: TestClient, body: dict, field: str) -> None:
    """A check across fields runs on the whole body, but its 422 names the field it found wrong."""
    r = client.post(URL, json=body)
    assert r.status_code == 422
    (item,) = r.json()["detail"]
    assert (item["field"], item["type"], item["loc"]) == (field, "shape_mismatch", ["body"])
    assert item["msg"].startswith(f"{field}: ")


def test_api_rejects_a_form_body(client: TestClient) -> None:
    r = client.post(URL, data={"tokens": "a", "x": "1"})
    assert r.status_code == 422


def test_api_rejects_get(client: TestClient) -> None:
    r = client.get(URL)
    assert r.status_code == 405


# --- the body limit -------------------------------------------------------------------------------

SMALL_VALID = b'{"tokens":["a"],"x":[[1]]}'


def test_api_body_at_the_limit_is_read(client: TestClient) -> None:
    body = b" " * (settings.max_body_bytes - len(SMALL_VALID)) + SMALL_VALID
    assert len(body) == settings.max_body_bytes
    r = post_raw(client, body)
    assert r.status_code == 200
    assert r.json()["tokens"] == ["a"]


def test_api_body_over_the_limit_is_413(client: TestClient) -> None:
    body = b" " * (settings.max_body_bytes - len(SMALL_VALID) + 1) + SMALL_VALID
    r = post_raw(client, body)
    assert r.status_code == 413
    assert str(settings.max_body_bytes) in r.json()["detail"]


def test_api_declared_content_length_over_the_limit_is_413(client: TestClient) -> None:
    r = client.post(URL, content=b"{}", headers={**JSON, "content-length": str(settings.max_body_bytes + 1)})
    assert r.status_code == 413


def test_api_non_numeric_content_length_is_rejected(client: TestClient) -> None:
    r = client.post(URL, content=SMALL_VALID, headers={**JSON, "content-length": "abc"})
    assert r.status_code == 413


def chunks(total: int, size: int = 1 << 16) -> Iterator[bytes]:
    """``total`` bytes of JSON whitespace in chunks: a streamed body with no Content-Length."""
    while total > 0:
        yield b" " * min(size, total)
        total -= size


def test_pages_streamed_body_over_the_limit_is_413(client: TestClient) -> None:
    r = client.post("/stages", content=chunks(settings.max_body_bytes + 1),
                    headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 413


def test_api_streamed_body_within_the_limit_is_read(client: TestClient) -> None:
    def body() -> Iterator[bytes]:
        yield from chunks(settings.max_body_bytes - len(SMALL_VALID))
        yield SMALL_VALID

    r = client.post(URL, content=body(), headers=JSON)
    assert r.status_code == 200


def test_api_streamed_body_over_the_limit_is_413(client: TestClient) -> None:
    r = client.post(URL, content=chunks(settings.max_body_bytes + 1), headers=JSON)
    assert r.status_code == 413


def test_api_accepts_the_largest_valid_request(client: TestClient) -> None:
    """64 tokens, d_model 64, 8 heads, d_k = d_v = 64, every weight and every optional matrix given, each
    number a full-precision float, in json.dumps's default spacing: the body limit must let it in."""
    t, d, h, dh = settings.max_tokens, settings.max_d_model, settings.max_heads, settings.max_d_head
    v = -123.45678901234567
    request = {
        "tokens": ["x" * settings.max_token_chars] * t,
        "x": [[v] * d] * t,
        "num_heads": h, "d_k": dh, "d_v": dh, "seed": settings.max_seed, "scale": True,
        "weights": {
            "w_q": [[[v] * dh] * d] * h,
            "w_k": [[[v] * dh] * d] * h,
            "w_v": [[[v] * dh] * d] * h,
            "w_o": [[v] * d] * (h * dh),
        },
    }
    optional = {  # the optional inputs the schema also accepts, each at its largest
        "context": {"tokens": ["y" * settings.max_token_chars] * t, "x": [[v] * d] * t},
        "mask": [[j > i for j in range(t)] for i in range(t)],
        "positional_encoding": "learned",
        "position_table": [[v] * d] * t,
        "temperature": 0.05,
        "loss": {"kind": "mse", "target": [[v] * d] * t},
    }
    fields = client.get("/openapi.json").json()["components"]["schemas"]["AttentionRequest"]["properties"]
    request |= {name: value for name, value in optional.items() if name in fields}
    body = json.dumps(request).encode()
    assert len(body) <= settings.max_body_bytes
    r = post_raw(client, body)
    assert r.status_code == 200
    out = r.json()
    assert len(out["heads"]) == h
    assert shape(out["concat"]) == (t, h * dh)
    assert shape(out["output"]) == (t, d)
    assert np.all(np.isfinite(out["output"]))


def test_api_a_number_of_thousands_of_digits_is_a_422_naming_the_body(client: TestClient) -> None:
    r = post_raw(client, '{"tokens":["a"],"x":[[1]],"num_heads":' + "9" * 5000 + "}")
    assert r.status_code == 422
    (item,) = r.json()["detail"]
    assert item["field"] == "body" and "digits" in item["msg"]
