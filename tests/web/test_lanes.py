"""Fairness: a heavy API request takes the bounded lane, and /healthz, the page and light requests go on
answering while it runs. Behaviour only: a heavy request is held at a gate, never timed."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import numpy as np
import pytest

from app.config import Settings
from app.main import create_app
from app.web import api_answers as api  # the work of the JSON API, apart from its routes
from app.web.lanes import INLINE_OPERATIONS
from app.web.schemas import AttentionRequest, TrainRequest

LIGHT = {"tokens": ["a", "b"], "x": [[0.1, 0.2], [0.3, 0.4]]}
HEAVY = {"tokens": [f"w{i}" for i in range(32)], "x": np.full((32, 32), 0.1).tolist(), "num_heads": 4}
LINE = 100_000  # operations: LIGHT is about 10 000, HEAVY about 220 000


class Gate:
    """Holds each heavy run (T = 32) until opened, counting those that started."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.started = 0
        self._lock = threading.Lock()

    def wrap(self, run: Any) -> Any:
        def held(x: Any, **kwargs: Any) -> Any:
            if len(x) == 32:
                with self._lock:
                    self.started += 1
                assert self.opened.wait(timeout=30), "the test never opened the gate"
            return run(x, **kwargs)

        return held


async def until(condition: Any, what: str) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


def test_the_line_between_the_lanes() -> None:
    light, heavy = AttentionRequest.model_validate(LIGHT), AttentionRequest.model_validate(HEAVY)
    assert api.estimated_operations(light) < LINE < api.estimated_operations(heavy)
    training = TrainRequest.model_validate(LIGHT | {"loss": {"kind": "mse", "target": [[0.0] * 2] * 2}, "steps": 20})
    assert api.estimated_operations(training, passes=21) == 21 * api.estimated_operations(light)
    assert api.estimated_operations(light) > api.PASS_OVERHEAD  # a pass is never free


def test_healthz_the_page_and_light_requests_answer_while_heavy_ones_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    gate = Gate()
    monkeypatch.setattr(api, "run_attention", gate.wrap(api.run_attention))
    app = create_app(Settings(heavy_requests=1, heavy_operations=LINE))
    heavy_lane = app.state.lanes.heavy

    async def scenario() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=60) as client:
            first = asyncio.create_task(client.post("/api/attention", json=HEAVY))
            await until(lambda: gate.started == 1, "the first heavy request started")
            second = asyncio.create_task(client.post("/api/attention", json=HEAVY | {"seed": 1}))
            await until(lambda: heavy_lane.statistics().tasks_waiting == 1, "the second heavy request queued")

            # While one heavy request holds the only heavy slot and another waits for it:
            health = await client.get("/healthz")
            assert health.status_code == 200 and health.json() == {"status": "ok"}
            light = await client.post("/api/attention", json=LIGHT)
            assert light.status_code == 200 and light.json()["tokens"] == ["a", "b"]
            page = await client.get("/")
            assert page.status_code == 200
            assert not first.done() and not second.done()
            assert gate.started == 1  # the second has not started: it waits for the slot

            gate.opened.set()
            answers = await asyncio.gather(first, second)
            assert [r.status_code for r in answers] == [200, 200]
            assert gate.started == 2
            assert heavy_lane.statistics().borrowed_tokens == 0

    try:
        asyncio.run(scenario())
    finally:
        gate.opened.set()  # never leave a worker thread held


def test_two_heavy_slots_run_two_heavy_requests_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    gate = Gate()
    monkeypatch.setattr(api, "run_attention", gate.wrap(api.run_attention))
    app = create_app(Settings(heavy_requests=2, heavy_operations=LINE))

    async def scenario() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=60) as client:
            tasks = [asyncio.create_task(client.post("/api/attention", json=HEAVY | {"seed": s})) for s in range(3)]
            await until(lambda: gate.started == 2, "two heavy requests started")
            assert app.state.lanes.heavy.statistics().tasks_waiting == 1
            gate.opened.set()
            assert [r.status_code for r in await asyncio.gather(*tasks)] == [200, 200, 200]

    try:
        asyncio.run(scenario())
    finally:
        gate.opened.set()


def test_a_refused_heavy_request_gives_its_slot_back() -> None:
    """A training that diverges is a 422 from inside the heavy lane; the slot is free again after it."""
    app = create_app(Settings(heavy_requests=1, heavy_operations=0))
    body = {"tokens": ["a", "b"], "x": [[900.0, -900.0], [800.0, 700.0]], "steps": 50, "learning_rate": 10.0,
            "loss": {"kind": "mse", "target": [[1000.0, -1000.0], [-1000.0, 1000.0]]}}

    async def scenario() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=60) as client:
            refused = await client.post("/api/train", json=body)
            assert refused.status_code == 422
            assert refused.json()["detail"][0]["field"] == "learning_rate"
            assert app.state.lanes.heavy.statistics().borrowed_tokens == 0
            assert (await client.post("/api/attention", json=LIGHT)).status_code == 200

    asyncio.run(scenario())


def test_the_lightest_requests_are_answered_on_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread's hop would cost as much as the default preset's edit: it runs on the loop, a larger one does not."""
    threads: list[str] = []

    def recorded(x: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return run(x, **kwargs)

    run = api.run_attention
    monkeypatch.setattr(api, "run_attention", recorded)
    app = create_app(Settings(heavy_operations=LINE))
    middle = {"tokens": [f"w{i}" for i in range(8)], "x": np.full((8, 16), 0.1).tolist(), "num_heads": 4}
    light, larger = AttentionRequest.model_validate(LIGHT), AttentionRequest.model_validate(middle)
    assert api.estimated_operations(light) <= INLINE_OPERATIONS < api.estimated_operations(larger) < LINE

    async def scenario() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            assert (await client.post("/api/attention", json=LIGHT)).status_code == 200
            assert (await client.post("/api/attention", json=middle)).status_code == 200

    asyncio.run(scenario())
    assert threads[0] == threading.main_thread().name
    assert threads[1] != threading.main_thread().name
