"""The real models' pages and API through their services (app.web.served): a hall opening one link computes it
once; a question that must wait answers at once with its place in the queue, with and without JavaScript, and
then the answer; a full queue is a 503 with Retry-After, never a lost request."""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import tempfile
import time
from collections.abc import Iterator

import httpx
import pytest

from app.main import create_app
from app.serving.flight import Job
from app.serving.models import Answer
from app.serving.real_models import language_model, sentence_model
from app.web.api import healthz
from tests.redis_server import RedisServer
from tests.servers import LOOPBACK, free_port, running, tail

ANSWERED = 'id="candidates"'  # the next word's candidates: the answer, not the waiting page


@pytest.fixture(scope="module", autouse=True)
def measured() -> None:
    language_model().catalogue()  # the model read and its heads measured, as the app's start does


@pytest.fixture
def first_screen_now(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A page not ready at once answers with its place in the queue (the tests' default waits for the answer)."""
    for s in (language_model(), sentence_model()):
        monkeypatch.setattr(s, "first_screen_seconds", 0.0)
    yield


def unique(text: str) -> str:
    return f"{text} {time.monotonic_ns()}"


async def in_app(work):  # noqa: ANN001, ANN202 - one app, one event loop
    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=60) as client:
        return await work(client)


def test_a_hall_opening_the_same_link_at_once_computes_it_once() -> None:
    text = unique("The Eiffel Tower is in")
    before = language_model().computed

    async def work(client: httpx.AsyncClient) -> list[httpx.Response]:
        return await asyncio.gather(*(client.get("/decoder", params={"text": text}) for _ in range(40)))

    responses = asyncio.run(in_app(work))
    assert {r.status_code for r in responses} == {200}
    assert len({r.content for r in responses}) == 1 and ANSWERED in responses[0].text
    assert language_model().computed - before == 1


def test_the_api_answers_identical_questions_once_and_the_same() -> None:
    text = unique("The capital of France is")
    before = language_model().computed

    async def work(client: httpx.AsyncClient) -> list[httpx.Response]:
        return await asyncio.gather(*(client.post("/api/decoder", json={"text": text}) for _ in range(20)))

    responses = asyncio.run(in_app(work))
    assert {r.status_code for r in responses} == {200}
    assert len({r.content for r in responses}) == 1 and responses[0].json()["tokens"][0] == "The"
    assert language_model().computed - before == 1


def test_a_waiting_page_without_javascript_says_where_it_stands_and_reloads_until_the_answer(
        first_screen_now: None) -> None:
    text = unique("Harry Potter went to Hogwarts. Harry Potter went to")

    async def work(client: httpx.AsyncClient) -> tuple[httpx.Response, httpx.Response, int]:
        first = await client.get("/decoder", params={"text": text})
        for tries in range(1, 100):  # what the page's <meta http-equiv="refresh"> does
            again = await client.get("/decoder", params={"text": text})
            if ANSWERED in again.text:
                return first, again, tries
            await asyncio.sleep(0.1)
        raise AssertionError("no answer after 100 reloads")

    first, answered, _ = asyncio.run(in_app(work))
    assert first.status_code == 200 and first.headers["cache-control"] == "no-store"
    assert 'class="waiting"' in first.text and ANSWERED not in first.text
    assert re.search(r'<noscript><meta http-equiv="refresh" content="2"></noscript>', first.text)
    assert "Your question is" in first.text or "ahead of yours" in first.text
    assert '<progress max="' in first.text
    assert 'id="text"' in first.text and "Harry Potter" in first.text  # the form keeps the student's text
    assert answered.status_code == 200 and '<meta http-equiv="refresh"' not in answered.text


def test_a_waiting_fragment_with_javascript_asks_again_and_swaps_in_the_answer(first_screen_now: None) -> None:
    text = unique("The bank of the river")
    htmx = {"HX-Request": "true", "HX-Target": "decoder-work", "HX-Trigger": "decoder-form"}
    poll = {"HX-Request": "true", "HX-Target": "decoder-work", "HX-Trigger": "decoder-work"}

    async def work(client: httpx.AsyncClient) -> tuple[httpx.Response, httpx.Response]:
        first = await client.get("/decoder", params={"text": text}, headers=htmx)
        for _ in range(20):
            again = await client.get("/decoder", params={"text": text}, headers=poll)
            if ANSWERED in again.text:
                return first, again
        raise AssertionError("no answer after 20 polls")

    first, answered = asyncio.run(in_app(work))
    assert first.status_code == 200 and first.headers["hx-retarget"] == "#decoder-work"
    assert first.text.lstrip().startswith('<div id="decoder-work" class="waiting"')
    assert 'hx-trigger="load delay:' in first.text and "Attention-Wait" not in first.text
    assert '<textarea id="text"' in answered.text  # the workspace fragment, as the form's own request gets it


def test_a_whole_page_waiting_with_javascript_reloads_once_its_answer_is_ready(first_screen_now: None) -> None:
    text = unique("A whole page for")

    async def work(client: httpx.AsyncClient) -> tuple[httpx.Response, httpx.Response, httpx.Response]:
        first = await client.get("/decoder", params={"text": text})
        asked = {"HX-Request": "true", "HX-Target": "decoder-work", "HX-Trigger": "decoder-work",
                 "Attention-Wait": "page"}
        for _ in range(20):
            again = await client.get("/decoder", params={"text": text}, headers=asked)
            if "hx-refresh" in again.headers:
                return first, again, await client.get("/decoder", params={"text": text})
        raise AssertionError("never told to reload")

    first, told, reloaded = asyncio.run(in_app(work))
    assert """hx-headers='{"Attention-Wait": "page"}'""" in first.text
    assert told.headers["hx-refresh"] == "true" and told.content == b""
    assert ANSWERED in reloaded.text


def test_the_queue_page_counts_the_questions_ahead(first_screen_now: None) -> None:
    service = language_model()

    async def work(client: httpx.AsyncClient) -> tuple[str, list[Job]]:
        service.flight.runners = 0  # nothing starts: the queue as a busy hall leaves it
        try:
            others = [service.ask(("other", i), f"student-{i}", lambda: Answer(200, b"", "text/html"))
                      for i in range(3)]
            page = await client.get("/decoder", params={"text": unique("Mine is")})
            return page.text, others
        finally:  # the queue emptied before the event loop ends, as a hall's would be
            service.flight.runners = 1
            service.flight._pump()
            while service.flight.jobs:
                await asyncio.gather(*(job.done for job in list(service.flight.jobs.values())),
                                     return_exceptions=True)

    text, _ = asyncio.run(in_app(work))
    assert "3 questions ahead of yours." in text


def test_a_full_queue_is_503_with_retry_after_for_the_api_and_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(language_model().flight, "most_waiting", 0)

    async def work(client: httpx.AsyncClient) -> tuple[httpx.Response, httpx.Response]:
        return (await client.post("/api/decoder", json={"text": unique("Full")}),
                await client.get("/decoder", params={"text": unique("Full")}))

    api, page = asyncio.run(in_app(work))
    assert api.status_code == 503 and api.headers["retry-after"] == "5" and "busy" in api.json()["detail"]
    assert page.status_code == 503 and page.headers["retry-after"] == "5" and "try again in a moment" in page.text


def test_healthz_is_answered_on_the_event_loop() -> None:
    assert inspect.iscoroutinefunction(healthz)


@pytest.mark.server
@pytest.mark.slow
def test_two_servers_sharing_redis_compute_a_question_once(redis_db: RedisServer) -> None:
    """Two app servers behind a balancer: the page computed on one is sent by the other from Redis; the API too."""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    common = dict(env, REDIS_URL=redis_db.url(), ATTENTION_PRELOAD_LANGUAGE_MODEL="true", ATTENTION_WORKERS="1",
                  ATTENTION_HOST=LOOPBACK)
    ports = free_port(), free_port()
    with tempfile.TemporaryFile() as log_a, tempfile.TemporaryFile() as log_b, \
            running(["-m", "app.serve"], port=ports[0], stdout=log_a, log=lambda: tail(log_a),
                    env=dict(common, ATTENTION_PORT=str(ports[0]))), \
            running(["-m", "app.serve"], port=ports[1], stdout=log_b, log=lambda: tail(log_b),
                    env=dict(common, ATTENTION_PORT=str(ports[1]))):
        a, b = (httpx.Client(base_url=f"http://{LOOPBACK}:{p}", timeout=60) for p in ports)
        for client in (a, b):
            for _ in range(300):
                if client.get("/decoder").status_code == 200:
                    break
                time.sleep(0.2)
        params = {"text": unique("The river bank")}
        first = a.get("/decoder", params=params)
        second = b.get("/decoder", params=params)
        again = b.get("/decoder", params=params)
        body = {"text": unique("The capital of Italy is")}
        api = [a.post("/api/decoder", json=body), b.post("/api/decoder", json=body)]
    assert [r.status_code for r in (first, second, again, *api)] == [200] * 5
    assert first.headers["server-timing"] == 'model;desc="computed"'
    assert second.headers["server-timing"] == 'model;desc="shared"' and second.content == first.content
    assert again.headers["server-timing"] == 'model;desc="kept"'
    assert [r.headers["server-timing"] for r in api] == ['model;desc="computed"', 'model;desc="shared"']
    assert api[0].json() == api[1].json()
