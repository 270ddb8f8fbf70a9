"""Gradients and training through the JSON API: POST /api/attention with a loss, and POST /api/train.

The numbers are app.maths.backward's (checked there against finite differences); here the API must hand
them over whole, agree with finite differences of its own answers, train as SGD and Adam say, and
refuse every bad loss or training request with a 422 that names the field.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.config import settings
from app.lesson.presets import PRESETS
from app.maths.attention import run_attention
from app.maths.backward import loss_and_gradients
from app.maths.cost import attention_cost
from tests.maths.test_backward import S003_ALIGNMENT

ATTENTION_URL = "/api/attention"
TRAIN_URL = "/api/train"
X = [[0.2, -0.4, 0.9, 0.1], [0.5, 0.5, -0.3, 0.0], [-0.7, 0.2, 0.4, 0.8]]
BASE: dict[str, Any] = {"tokens": ["a", "b", "c"], "x": X, "seed": 7}
MSE = {"kind": "mse", "target": [[0.1, 0.0, -0.2, 0.3], [0.0, 0.4, 0.1, -0.1], [0.2, 0.2, 0.0, 0.0]]}
ALIGN = {"kind": "attention", "head": 0, "target": [[0.8, 0.1, 0.1], [0.0, 1.0, 0.0], [0.25, 0.25, 0.5]]}
WEIGHT_NAMES = ("w_q", "w_k", "w_v", "w_o")


def shape(value: Any) -> tuple[int, ...]:
    return np.asarray(value).shape


def the_field(response: Any) -> str:
    """The one field a 422 names."""
    (item,) = response.json()["detail"]
    assert item["msg"].startswith(item["field"])
    return item["field"]


def spec_arrays(loss: dict[str, Any]) -> dict[str, Any]:
    return {**loss, "target": np.array(loss["target"], dtype=np.float64)}


# --- POST /api/attention with a loss --------------------------------------------------------------


def test_attention_without_a_loss_has_null_loss_and_gradients(client: TestClient) -> None:
    r = client.post(ATTENTION_URL, json=BASE)
    assert r.status_code == 200
    body = r.json()
    assert body["loss"] is None and body["gradients"] is None


CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("dot_mse", {}, MSE),
    ("dot_attention", {}, ALIGN),
    ("two_heads_d_v", {"num_heads": 2, "d_k": 3, "d_v": 5}, {**ALIGN, "head": 1}),
    ("general", {"score": "general"}, MSE),
    ("additive", {"score": "additive", "num_heads": 2}, MSE),
    ("linear", {"attention": "linear"}, MSE),
    ("cross", {"context": {"tokens": ["s", "t"], "x": [[1.0, 0.0, 0.5, 0.2], [0.3, -0.2, 0.0, 0.9]]}},
     {**ALIGN, "target": [[0.5, 0.5], [1.0, 0.0], [0.1, 0.9]]}),
    ("rope_causal", {"positional_encoding": "rope", "mask": "causal"},
     {**ALIGN, "target": [[1.0, 0.0, 0.0], [0.3, 0.7, 0.0], [0.2, 0.2, 0.6]]}),
    ("learned_alibi", {"positional_encoding": "learned", "num_heads": 2}, MSE),
]


def run_kwargs(body: dict[str, Any]) -> dict[str, Any]:
    options = {k: v for k, v in body.items() if k not in ("tokens", "x", "loss", "context")}
    if "context" in body:
        options["context"] = np.array(body["context"]["x"])
    return options


@pytest.mark.parametrize(("options", "loss"), [(o, loss) for _, o, loss in CASES], ids=[i for i, _, _ in CASES])
def test_attention_gradients_are_app_backwards_with_every_shape(client: TestClient, options: dict[str, Any],
                                                                loss: dict[str, Any]) -> None:
    body = {**BASE, **options, "loss": loss}
    r = client.post(ATTENTION_URL, json=body)
    assert r.status_code == 200
    out = r.json()
    grads = out["gradients"]
    t, d_model = shape(X)
    s = len(body["context"]["x"]) if "context" in body else t
    h, d_k, d_v = out["num_heads"], out["d_k"], out["d_v"]
    assert shape(grads["output"]) == (t, d_model)
    assert shape(grads["concat"]) == (t, h * d_v)
    assert shape(grads["x"]) == (t, d_model)
    assert len(grads["heads"]) == h
    linear = options.get("attention") == "linear"
    for head in grads["heads"]:
        assert (shape(head["q"]), shape(head["k"]), shape(head["v"])) == ((t, d_k), (s, d_k), (s, d_v))
        assert shape(head["output"]) == (t, d_v)
        for name in ("softmax", "scaled", "scores"):
            assert head[name] is None if linear else shape(head[name]) == (t, s), name
    assert grads["context"] is None if s == t else shape(grads["context"]) == (s, d_model)
    w = grads["weights"]
    for name in WEIGHT_NAMES:
        assert shape(w[name]) == shape(out["weights"][name]), name
    score = options.get("score", "dot")
    assert (w["w_a"] is not None) == (score == "general" and not linear)
    for name in ("w_1", "w_2", "v_a"):
        assert (w[name] is not None) == (score == "additive" and not linear), name
        if w[name] is not None:
            assert shape(w[name]) == shape(out["weights"][name])

    run = run_attention(np.array(X), **run_kwargs(body))
    loss_value, expected = loss_and_gradients(run, spec_arrays(loss))
    assert out["loss"] == pytest.approx(loss_value, rel=1e-12)
    np.testing.assert_allclose(grads["output"], expected.output, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(grads["x"], expected.x, rtol=1e-12, atol=1e-15)
    for got, want in zip(grads["heads"], expected.heads, strict=True):
        for name in ("q", "k", "v", "output"):
            np.testing.assert_allclose(got[name], getattr(want, name), rtol=1e-12, atol=1e-15, err_msg=name)
    for name in WEIGHT_NAMES:
        np.testing.assert_allclose(w[name], getattr(expected.weights, name), rtol=1e-12, atol=1e-15, err_msg=name)


@pytest.mark.parametrize("loss", [MSE, ALIGN], ids=["mse", "attention"])
@pytest.mark.parametrize(("i", "j"), [(0, 2), (2, 1)])
def test_attention_x_gradient_matches_finite_differences_of_the_apis_loss(client: TestClient, loss: dict[str, Any],
                                                                          i: int, j: int) -> None:
    """∂L/∂x_ij ≈ (L(x + ε·e_ij) − L(x − ε·e_ij)) / 2ε, every number through the API."""
    body = {**BASE, "num_heads": 2, "d_k": 2, "positional_encoding": "sinusoidal", "loss": loss}
    r = client.post(ATTENTION_URL, json=body)
    assert r.status_code == 200
    gradient = r.json()["gradients"]["x"][i][j]
    eps = 1e-6
    losses = []
    for sign in (1, -1):
        x = [row[:] for row in X]
        x[i][j] += sign * eps
        moved = client.post(ATTENTION_URL, json={**body, "x": x})
        assert moved.status_code == 200
        losses.append(moved.json()["loss"])
    assert gradient == pytest.approx((losses[0] - losses[1]) / (2 * eps), rel=1e-5, abs=1e-9)


def test_attention_hidden_keys_have_zero_gradients_and_null_scaled(client: TestClient) -> None:
    target = [[1.0, 0.0, 0.0], [0.4, 0.6, 0.0], [0.2, 0.3, 0.5]]
    r = client.post(ATTENTION_URL, json={**BASE, "mask": "causal", "loss": {**ALIGN, "target": target}})
    assert r.status_code == 200
    out = r.json()
    grad = out["gradients"]["heads"][0]
    for i in range(3):
        for j in range(i + 1, 3):
            assert out["heads"][0]["scaled"][i][j] is None
            for name in ("softmax", "scaled", "scores"):
                assert grad[name][i][j] == 0.0, (name, i, j)
    assert grad["softmax"][1][0] != 0.0


# --- POST /api/train -------------------------------------------------------------------------------


def test_train_answers_losses_and_the_final_state(client: TestClient) -> None:
    r = client.post(TRAIN_URL, json={**BASE, "loss": MSE, "steps": 4})
    assert r.status_code == 200
    out = r.json()
    assert len(out["losses"]) == 5
    assert out["loss"] == out["losses"][-1]
    assert out["x_input"] == X  # the default trains the four weights only
    assert shape(out["gradients"]["x"]) == shape(X)
    # The answer describes its final state: posting it back gives the same loss and gradients.
    again = client.post(ATTENTION_URL, json={**BASE, "x": out["x_input"], "loss": MSE,
                                             "weights": {n: out["weights"][n] for n in WEIGHT_NAMES}})
    assert again.status_code == 200
    assert again.json()["loss"] == out["loss"]
    assert again.json()["gradients"] == out["gradients"]


def test_train_one_sgd_step_is_p_minus_lr_g_from_the_attention_gradients(client: TestClient) -> None:
    body = {**BASE, "num_heads": 2, "mask": "causal", "loss": {**ALIGN, "head": 1, "target": [
        [1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.0, 0.1, 0.9]]}}
    before = client.post(ATTENTION_URL, json=body)
    assert before.status_code == 200
    start = before.json()
    lr = 0.05
    r = client.post(TRAIN_URL, json={**body, "steps": 1, "optimizer": "sgd", "learning_rate": lr,
                                     "train": [*WEIGHT_NAMES, "x"]})
    assert r.status_code == 200
    out = r.json()
    assert out["losses"][0] == start["loss"]
    for name in WEIGHT_NAMES:
        want = np.array(start["weights"][name]) - lr * np.array(start["gradients"]["weights"][name])
        np.testing.assert_allclose(out["weights"][name], want, rtol=1e-12, atol=1e-15, err_msg=name)
    want_x = np.array(X) - lr * np.array(start["gradients"]["x"])
    np.testing.assert_allclose(out["x_input"], want_x, rtol=1e-12, atol=1e-15)
    assert out["losses"][1] < out["losses"][0]


def translate_body() -> dict[str, Any]:
    """The translate preset with W_Q and W_K left to the seed, so its alignment must be learned."""
    p = PRESETS["translate"]
    weights = {name: json.loads(json.dumps(v)) for name, v in p.weights.items() if name not in ("w_q", "w_k")}
    return {"tokens": list(p.tokens), "x": [list(row) for row in p.x], "seed": 3, "weights": weights,
            "context": {"tokens": list(p.context_tokens), "x": [list(row) for row in p.context_x]},
            "loss": {"kind": "attention", "head": 0, "target": S003_ALIGNMENT.tolist()}}


def test_train_adam_learns_the_translate_alignment(client: TestClient) -> None:
    r = client.post(TRAIN_URL, json={**translate_body(), "optimizer": "adam", "steps": 60, "train": ["w_q", "w_k"]})
    assert r.status_code == 200
    out = r.json()
    losses = out["losses"]
    assert losses[-1] < losses[0] - 0.5
    entropy = -float(np.sum(S003_ALIGNMENT * np.log(S003_ALIGNMENT))) / 6
    assert losses[-1] > entropy - 1e-9  # no weights do better than the target's own entropy
    np.testing.assert_array_equal(np.argmax(out["heads"][0]["softmax"], axis=1), np.arange(6))
    assert out["gradients"]["context"] is not None  # reported, but the context stays as given
    assert out["context"] == translate_body()["context"]["x"]


def test_train_keeps_a_learned_position_table_fixed(client: TestClient) -> None:
    table = [[0.1, 0.2, 0.3, 0.4], [0.0, -0.1, 0.2, 0.0], [0.3, 0.3, 0.3, 0.3]]
    body = {**BASE, "positional_encoding": "learned", "position_table": table, "loss": MSE, "steps": 3,
            "train": ["x", "w_o"]}
    r = client.post(TRAIN_URL, json=body)
    assert r.status_code == 200
    out = r.json()
    assert out["pe"] == table
    assert out["x_input"] != X
    np.testing.assert_allclose(out["x"], np.array(out["x_input"]) + np.array(table), rtol=1e-12)


def test_train_runs_at_the_work_bound_and_refuses_beyond_it(client: TestClient) -> None:
    """The bound is steps × one forward pass's operations as the cost panel counts them."""
    t = d = 64
    body = {"tokens": ["w"] * t, "x": np.random.default_rng(0).normal(size=(t, d)).round(3).tolist(),
            "loss": {"kind": "mse", "target": [[0.0] * d] * t}}
    cost = attention_cost(t=t, s=t, d_model=d, num_heads=1, d_k=d, d_v=d)
    most = settings.max_train_operations // (cost.total_macs + cost.total_elementwise)
    assert 1 <= most < settings.max_train_steps
    over = client.post(TRAIN_URL, json={**body, "steps": settings.max_train_steps})
    assert over.status_code == 422
    assert the_field(over) == "steps"
    assert f"at most {most} steps" in over.json()["detail"][0]["msg"]
    assert client.post(TRAIN_URL, json={**body, "steps": most + 1}).status_code == 422
    r = client.post(TRAIN_URL, json={**body, "steps": most})
    assert r.status_code == 200
    assert len(r.json()["losses"]) == most + 1


def test_train_that_diverges_is_a_422_naming_learning_rate(client: TestClient) -> None:
    big = {**BASE, "x": [[1000.0] * 4] * 3, "weights": {"w_q": [[[1000.0] * 4] * 4], "w_o": [[1000.0] * 4] * 4},
           "loss": MSE, "steps": 10, "learning_rate": 10}
    r = client.post(TRAIN_URL, json=big)
    assert r.status_code == 422
    assert the_field(r) == "learning_rate"
    assert "diverged" in r.json()["detail"][0]["msg"]


# --- bad input: 422 naming the field --------------------------------------------------------------

LOSS_ERRORS: list[tuple[str, dict[str, Any], str]] = [
    ("mse_target_wrong_shape", {"loss": {**MSE, "target": [[0.0] * 3] * 3}}, "loss.target"),
    ("mse_target_ragged", {"loss": {**MSE, "target": [[0.0] * 4, [0.0] * 3, [0.0] * 4]}}, "loss.target[1]"),
    ("mse_target_nan", {"loss": {**MSE, "target": [[0.0] * 4, [0.0] * 4, [0.0, 0.0, 0.0, float("nan")]]}},
     "loss.target[2][3]"),
    ("mse_with_a_head", {"loss": {**MSE, "head": 0}}, "loss.head"),
    ("attention_target_wrong_shape", {"loss": {**ALIGN, "target": [[0.5, 0.5]] * 3}}, "loss.target"),
    ("attention_row_not_summing_to_1", {"loss": {**ALIGN, "target": [[0.8, 0.1, 0.1], [0.0, 0.9, 0.0],
                                                                      [0.2, 0.3, 0.5]]}}, "loss.target"),
    ("attention_negative_entry", {"loss": {**ALIGN, "target": [[1.2, -0.2, 0.0], [0.0, 1.0, 0.0],
                                                                [0.2, 0.3, 0.5]]}}, "loss.target"),
    ("attention_weight_on_a_hidden_key", {"mask": "causal", "loss": ALIGN}, "loss.target"),
    ("attention_head_out_of_range", {"loss": {**ALIGN, "head": 1}}, "loss.head"),
    ("attention_head_negative", {"loss": {**ALIGN, "head": -1}}, "loss.head"),
    ("attention_head_over_the_bound", {"loss": {**ALIGN, "head": settings.max_heads}}, "loss.head"),
    ("attention_head_missing", {"loss": {k: v for k, v in ALIGN.items() if k != "head"}}, "loss.head"),
    ("attention_head_text", {"loss": {**ALIGN, "head": "0"}}, "loss.head"),
    ("attention_loss_with_linear_attention", {"attention": "linear", "loss": ALIGN}, "loss.kind"),
    ("unknown_kind", {"loss": {**MSE, "kind": "l1"}}, "loss.kind"),
    ("no_target", {"loss": {"kind": "mse"}}, "loss.target"),
    ("unknown_loss_field", {"loss": {**MSE, "weight": 2}}, "loss.weight"),
    ("a_loss_with_blocks", {"blocks": 1, "loss": MSE}, "loss"),
]


@pytest.mark.parametrize(("url"), [ATTENTION_URL, TRAIN_URL])
@pytest.mark.parametrize(("change", "field"), [(c, f) for _, c, f in LOSS_ERRORS], ids=[i for i, _, _ in LOSS_ERRORS])
def test_a_bad_loss_is_a_422_naming_its_field(client: TestClient, url: str, change: dict[str, Any],
                                              field: str) -> None:
    r = client.post(url, content=json.dumps({**BASE, "steps": 1, **change}) if url == TRAIN_URL
                    else json.dumps({**BASE, **change}), headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert the_field(r) == field


def test_bad_attention_targets_say_what_is_wrong(client: TestClient) -> None:
    messages = {}
    for name, change, _ in LOSS_ERRORS[5:8]:
        r = client.post(ATTENTION_URL, json={**BASE, **change})
        assert r.status_code == 422
        messages[name] = r.json()["detail"][0]["msg"]
    assert "target[1] sums to 0.9" in messages["attention_row_not_summing_to_1"]
    assert "target[0][1] is negative" in messages["attention_negative_entry"]
    assert "mask hides" in messages["attention_weight_on_a_hidden_key"]


TRAIN_ERRORS: list[tuple[str, dict[str, Any], str]] = [
    ("no_loss", {"loss": None}, "loss"),
    ("no_steps", {"steps": None}, "steps"),
    ("zero_steps", {"steps": 0}, "steps"),
    ("too_many_steps", {"steps": settings.max_train_steps + 1}, "steps"),
    ("fractional_steps", {"steps": 1.5}, "steps"),
    ("unknown_optimizer", {"optimizer": "rmsprop"}, "optimizer"),
    ("zero_learning_rate", {"learning_rate": 0}, "learning_rate"),
    ("negative_learning_rate", {"learning_rate": -0.1}, "learning_rate"),
    ("huge_learning_rate", {"learning_rate": settings.max_learning_rate * 1.01}, "learning_rate"),
    ("text_learning_rate", {"learning_rate": "0.1"}, "learning_rate"),
    ("unknown_parameter", {"train": ["w_q", "position_table"]}, "train[1]"),
    ("the_context", {"train": ["context"]}, "train[0]"),
    ("a_score_weight", {"train": ["w_a"]}, "train[0]"),
    ("nothing_to_train", {"train": []}, "train"),
    ("a_parameter_twice", {"train": ["x", "x"]}, "train"),
]


@pytest.mark.parametrize(("change", "field"), [(c, f) for _, c, f in TRAIN_ERRORS], ids=[i for i, _, _ in TRAIN_ERRORS])
def test_a_bad_training_request_is_a_422_naming_its_field(client: TestClient, change: dict[str, Any],
                                                          field: str) -> None:
    body = {k: v for k, v in {**BASE, "loss": MSE, "steps": 2, **change}.items() if v is not None}
    r = client.post(TRAIN_URL, json=body)
    assert r.status_code == 422
    assert the_field(r) == field


# --- the schema ------------------------------------------------------------------------------------


def test_openapi_documents_train_and_the_gradients(client: TestClient) -> None:
    r = client.get("/openapi.json")
    assert r.status_code == 200
    spec = r.json()
    post = spec["paths"]["/api/train"]["post"]
    assert {"200", "413", "422"} <= set(post["responses"])
    schemas = spec["components"]["schemas"]
    train = schemas["TrainRequest"]["properties"]
    assert {"loss", "optimizer", "learning_rate", "steps", "train"} <= set(train)
    assert set(schemas["TrainRequest"]["required"]) >= {"tokens", "x", "loss", "steps"}
    assert (train["steps"]["minimum"], train["steps"]["maximum"]) == (1, settings.max_train_steps)
    assert (train["learning_rate"]["exclusiveMinimum"], train["learning_rate"]["maximum"]) == (
        0, settings.max_learning_rate)
    assert train["learning_rate"]["default"] == 0.1 and train["optimizer"]["default"] == "sgd"
    assert "loss" in schemas["AttentionRequest"]["properties"]
    assert {"loss", "gradients"} <= set(schemas["AttentionResponse"]["properties"])
    assert {"losses", "loss", "gradients"} <= set(schemas["TrainResponse"]["required"])
    head = schemas["HeadGradientsOut"]["properties"]
    assert "exactly 0 at hidden keys" in head["softmax"]["description"]
    assert "null with linear attention" in head["scores"]["description"]
    assert set(schemas["GradientsOut"]["properties"]) == {"output", "concat", "heads", "x", "context", "weights"}
