"""Isolation under concurrency: the server keeps no per-user state.

A real uvicorn serves the app on 127.0.0.1. Fifty clients, each with a state of its own (tokens,
x, sizes, seed, mask, score, blocks; or a page form from its own preset with its own edits), send
at the same moment, several rounds over, on their own connections. Each must get exactly its own
answer: the JSON API's body byte for byte as the route computes it in-process, and the page
fragment exactly as an in-process client of a fresh app renders it for the same form.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.lesson.presets import PRESETS
from app.main import create_app
from app.web import api
from app.web.json_encoding import dumps
from app.web.schemas import AttentionRequest
from tests.conftest import form_fields
from tests.servers import LOOPBACK, free_port, running, tail, uvicorn_args

pytestmark = pytest.mark.server

CLIENTS = 50
ROUNDS = 2


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The app under uvicorn (one process, as a classroom runs it) on a free port of 127.0.0.1."""
    port = free_port()
    with tempfile.TemporaryFile() as log, running(uvicorn_args(port, "--log-level", "warning"), port=port,
                                                   stdout=log, log=lambda: tail(log)):
        yield f"http://{LOOPBACK}:{port}"


def client_state(i: int) -> dict[str, Any]:
    """Client i's request: every client differs in its values, and most in sizes and options too."""
    rng = np.random.default_rng(i)
    t, d_model, h = 2 + i % 7, 2 + i % 5, 1 + i % 3
    body: dict[str, Any] = {
        "tokens": [f"client{i}-{j}" for j in range(t)],
        "x": rng.uniform(-2.0, 2.0, (t, d_model)).round(3).tolist(),
        "num_heads": h, "d_k": 1 + i % 4, "seed": 1000 + i,
        "mask": ("none", "causal", "local", "strided")[i % 4],
        "score": ("dot", "general", "additive")[i % 3],
        "attention": ("softmax", "linear")[i % 2],
        "positional_encoding": ("none", "sinusoidal", "rope", "alibi", "learned")[i % 5],
        "blocks": i % 3, "temperature": 0.5 + (i % 4) / 2,
    }
    if i % 6 == 5:
        body["context"] = {"tokens": ["src"] * 3, "x": rng.uniform(-1.0, 1.0, (3, d_model)).round(3).tolist()}
    return body


def expected_body(body: dict[str, Any]) -> bytes:
    """What the route computes for this body in this process, without HTTP."""
    return dumps(api.attention_body(AttentionRequest.model_validate(body)))


def client_form(i: int, base_forms: dict[str, dict[str, str]]) -> dict[str, str]:
    """Client i's page form: its own preset, seed and first cell, and its own stage."""
    preset = sorted(base_forms)[i % len(base_forms)]
    form = dict(base_forms[preset])
    form["x-0-0"] = f"{(i - CLIENTS / 2) / 10:g}"
    form["goto"] = ("x", "scores", "softmax", "output")[i % 4]
    if i % 3 == 0:
        form |= {"seed": str(7 * i), "action": "new_weights"}
    return form


def run_concurrently(url: str, requests: list[dict[str, Any]], expected: list[bytes]) -> list[str]:
    """Every client sends its request ROUNDS times, all clients at once, each on its own connection;
    the problems: any answer that is not 200 with exactly the client's own body."""
    start = threading.Barrier(CLIENTS)

    def one(i: int) -> list[str]:
        problems = []
        with httpx.Client(timeout=60) as client:
            start.wait()
            for r in range(ROUNDS):
                response = client.post(url, **requests[i])
                if response.status_code != 200:
                    problems.append(f"client {i} round {r}: HTTP {response.status_code}")
                elif response.content != expected[i]:
                    owner = expected.index(response.content) if response.content in expected else "nobody"
                    problems.append(f"client {i} round {r}: got the answer of client {owner}")
        return problems

    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        return [problem for problems in pool.map(one, range(CLIENTS)) for problem in problems]


def test_fifty_concurrent_api_clients_each_get_their_own_result(server: str) -> None:
    states = [client_state(i) for i in range(CLIENTS)]
    expected = [expected_body(state) for state in states]
    assert len(set(expected)) == CLIENTS  # every client's answer differs from every other's
    assert run_concurrently(f"{server}/api/attention", [{"json": state} for state in states], expected) == []


@pytest.mark.slow
def test_fifty_concurrent_page_clients_each_get_their_own_stages(server: str) -> None:
    local = TestClient(create_app())
    base_forms = {key: form_fields(local.get("/", params={"preset": key}).text) for key in PRESETS}
    requests = [{"data": client_form(i, base_forms), "headers": {"HX-Request": "true"}} for i in range(CLIENTS)]
    expected = []
    for request in requests:
        response = local.post("/stages", **request)
        assert response.status_code == 200
        expected.append(response.content)
    assert len(set(expected)) == CLIENTS
    assert run_concurrently(f"{server}/stages", requests, expected) == []
