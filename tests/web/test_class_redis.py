"""One class served by two servers sharing one Redis, as two replicas behind a balancer: a teacher
on server A, a student on server B. Real uvicorn processes (``python -m app.serve``, one worker each)
on free loopback ports, a real redis-server (tests/redis_server.py), httpx as the browsers.
Then ``python -m app.serve`` with two workers: refused without Redis, one class across both with it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from app.main import create_app
from bench.cases import BROWSER, HTMX
from bench.classroom import Teacher, start_class
from tests.conftest import form_fields
from tests.redis_server import RedisServer, durable_redis_server, find_redis_server
from tests.servers import LOOPBACK, REPO_ROOT, free_port, running, tail

pytestmark = [pytest.mark.anyio, pytest.mark.server]

EVENT_SECONDS = 1.0  # a step reaches a student's stream on the other server within this
BACK_SECONDS = 3.0  # after Redis's return, the teacher's next step reaches an open stream within this
PAGE_LOAD = {**BROWSER, "Accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def serve_env(port: int, *, redis_url: str = "", workers: int = 1) -> dict[str, str]:
    """The environment of ``python -m app.serve``: none of this shell's ATTENTION_* or REDIS_URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTENTION_") and k != "REDIS_URL"}
    env.update(ATTENTION_HOST=LOOPBACK, ATTENTION_PORT=str(port), ATTENTION_WORKERS=str(workers))
    if redis_url:
        env["REDIS_URL"] = redis_url
    return env


@contextmanager
def replica(redis_url: str, *, port: int | None = None, workers: int = 1) -> Iterator[tuple[str, int]]:
    """``python -m app.serve`` on a free port with REDIS_URL: its base URL and process id."""
    port = port or free_port()
    with tempfile.TemporaryFile() as log, running(["-m", "app.serve"], port=port, stdout=log, log=lambda: tail(log),
                                                  env=serve_env(port, redis_url=redis_url, workers=workers)) as proc:
        yield f"http://{LOOPBACK}:{port}", proc.pid


@dataclass
class Stream:
    """A student's EventSource: (event, version) for each message, in a queue."""

    queue: asyncio.Queue[tuple[str, int]]
    client_port: int  # this end of its connection


@asynccontextmanager
async def event_stream(client: httpx.AsyncClient, code: str) -> AsyncIterator[Stream]:
    """A student's EventSource on /class/{code}/events, read in a task while the block runs."""
    queue: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
    async with client.stream("GET", f"/class/{code}/events", headers=BROWSER) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        client_port = response.extensions["network_stream"].get_extra_info("client_addr")[1]

        async def read() -> None:
            kind = "message"
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    kind = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    queue.put_nowait((kind, int(line.removeprefix("data: ").split()[0])))
                elif not line:
                    kind = "message"

        reader = asyncio.create_task(read())
        try:
            yield Stream(queue, client_port)
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader


async def next_event(stream: Stream, seconds: float = EVENT_SECONDS) -> tuple[str, int]:
    return await asyncio.wait_for(stream.queue.get(), seconds)


async def step(teacher: httpx.AsyncClient, lesson: Teacher, stage: str, **fields: str) -> httpx.Response:
    """The teacher's Next/Prev or pipeline-map click: the page's form with goto, to /stages by htmx."""
    r = await teacher.post("/stages", data={**lesson.form, **fields, "goto": stage}, headers=HTMX)
    assert r.status_code == 200, r.text[:500]
    return r


def shown_stage(html: str) -> str:
    return form_fields(html, None)["stage"]


@pytest.mark.slow
async def test_a_step_on_server_a_reaches_a_student_on_server_b(redis_db: RedisServer) -> None:
    with replica(redis_db.url()) as (a, _), replica(redis_db.url()) as (b, _):
        async with httpx.AsyncClient(base_url=a) as teacher, httpx.AsyncClient(base_url=b) as student:
            lesson = await start_class(teacher)
            r = await student.get(f"/class/{lesson.code}", headers=BROWSER)
            assert r.status_code == 200
            assert 'class="class-panel student"' in r.text and shown_stage(r.text) == "x"
            assert student.cookies.get("attention_student")

            async with event_stream(student, lesson.code) as events:
                assert await next_event(events) == ("state", 1)  # the version now, at once
                await step(teacher, lesson, "softmax", quiz="on")
                assert await next_event(events) == ("state", 2)
                r = await student.get(f"/class/{lesson.code}/workspace", headers=HTMX)
                assert r.status_code == 200
                assert shown_stage(r.text) == "softmax"
                assert '<input type="hidden" name="quiz" value="on">' in r.text  # the teacher's quiz, not a toggle

                r = await student.post(f"/class/{lesson.code}/predict", headers=HTMX,
                                       data={"guess_matrix": "softmax", "guess_row": "1", "guess_col": "2",
                                             "guess": "0.3"})
                assert r.status_code == 200, r.text
                assert "Sent: your prediction 0.3" in r.text
                assert await next_event(events) == ("predictions", 2)

            r = await teacher.post(f"/class/{lesson.code}/results", data={"class_key": lesson.key}, headers=HTMX)
            assert r.status_code == 200
            assert "1 student joined" in r.text and "1 prediction for this stage" in r.text
            figure = r.text.split("<figcaption>")[1].split("</figcaption>")[0]
            caption = " ".join(re.sub(r"<[^>]+>", " ", figure).split())  # the text a reader sees
            assert re.match(r"\w.* row 1, column 2: 1 prediction, value 0\.\d+\.", caption), caption


async def test_a_restarted_server_finds_its_class_in_redis(redis_db: RedisServer) -> None:
    port = free_port()
    async with httpx.AsyncClient(base_url=f"http://{LOOPBACK}:{port}") as teacher, \
            httpx.AsyncClient(base_url=f"http://{LOOPBACK}:{port}") as student:
        with replica(redis_db.url(), port=port):
            lesson = await start_class(teacher)
            await step(teacher, lesson, "scores")
            r = await student.get(f"/class/{lesson.code}")
            assert r.status_code == 200
            joined = student.cookies.get("attention_student")
        with replica(redis_db.url(), port=port):  # the same address, a new process: nothing in its memory
            r = await teacher.get(f"/class/{lesson.code}/teach")  # the teacher's cookie, as after a reload
            assert r.status_code == 200
            assert shown_stage(r.text) == "scores"
            assert 'class="class-panel teacher"' in r.text and "1 student joined" in r.text
            r = await student.get(f"/class/{lesson.code}")
            assert r.status_code == 200
            assert shown_stage(r.text) == "scores"
            assert student.cookies.get("attention_student") == joined  # the same student, not a new one
            await step(teacher, lesson, "softmax")  # and the class goes on
            r = await student.get(f"/class/{lesson.code}/workspace", headers=HTMX)
            assert shown_stage(r.text) == "softmax"


async def test_a_change_is_rendered_once_however_many_students_ask_at_once(redis_db: RedisServer,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """With Redis, reading the room yields to other requests: the class's workspace requests after a
    step must wait for the one render, not each start their own."""
    from app.web import classroom

    renders = []
    finish = classroom.finish
    monkeypatch.setattr(classroom, "finish", lambda *args, **kwargs: renders.append(1) or finish(*args, **kwargs))
    app = create_app(Settings(redis_url=redis_db.url()))
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://class.test") as client:
            lesson = await start_class(client)
            workspace = f"/class/{lesson.code}/workspace"
            await asyncio.gather(*(client.get(workspace) for _ in range(50)))  # Redis connections open, as in class
            await step(client, lesson, "softmax")
            renders.clear()
            answers = await asyncio.gather(*(client.get(workspace, headers=HTMX) for _ in range(50)))
        assert {r.status_code for r in answers} == {200}
        assert {shown_stage(r.text) for r in answers} == {"softmax"}
        assert len(renders) == 1, len(renders)
    finally:
        await app.state.rooms.close()


def test_two_workers_without_redis_are_refused_with_the_reason() -> None:
    port = free_port()
    proc = subprocess.run([sys.executable, "-m", "app.serve"], cwd=REPO_ROOT, capture_output=True, text=True,
                          env=serve_env(port, workers=2), timeout=60)
    assert proc.returncode != 0
    assert "ATTENTION_WORKERS=2 needs REDIS_URL" in proc.stderr
    assert "live class rooms are kept in the worker process without Redis" in proc.stderr


def connection_owners(supervisor: int, port: int) -> dict[int, int]:
    """Client port → the worker process (a child of ``supervisor``) holding that connection to
    ``port``, read from Linux's /proc."""
    inodes: dict[str, int] = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
        if int(local.split(":")[1], 16) == port and state == "01":  # ESTABLISHED
            inodes[inode] = int(remote.split(":")[1], 16)
    owners = {}
    for pid in map(int, Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split()):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    owners[inodes[target[8:-1]]] = pid
    return owners


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="which worker holds a connection is read from /proc")
async def test_two_workers_with_redis_serve_one_class(redis_db: RedisServer) -> None:
    with replica(redis_db.url(), workers=2) as (url, supervisor):
        port = int(url.rsplit(":", 1)[1])
        async with httpx.AsyncClient(base_url=url) as teacher, httpx.AsyncClient(base_url=url) as students:
            lesson = await start_class(teacher)
            async with contextlib.AsyncExitStack() as stack:
                streams: list[Stream] = []
                for _ in range(40):  # streams until each worker holds some (the kernel picks the worker)
                    streams.append(await stack.enter_async_context(event_stream(students, lesson.code)))
                    assert await next_event(streams[-1]) == ("state", 1)
                    owners = connection_owners(supervisor, port)
                    if len({owners.get(s.client_port) for s in streams} - {None}) == 2:
                        break
                held = {s.client_port: owners.get(s.client_port) for s in streams}
                assert None not in held.values(), f"a stream's connection not found in /proc: {held}"
                assert len(set(held.values())) == 2, f"every stream went to one worker: {held}"
                await step(teacher, lesson, "qkv")
                assert [await next_event(s) for s in streams] == [("state", 2)] * len(streams)


async def test_an_open_stream_lives_through_a_redis_restart_and_gets_the_next_step() -> None:
    """Redis (its append-only file on) stopped under an open stream and started again: the stream says
    "unreachable" at once and stays open, a class page loaded meanwhile is the reconnecting page, and the
    teacher's first step after the return reaches the same stream; the class, its student and the key are kept."""
    binary = find_redis_server()
    if binary is None:
        pytest.skip("redis-server not found (make services installs it)")
    with durable_redis_server(binary) as redis, replica(redis.url()) as (base, _):
        async with httpx.AsyncClient(base_url=base, timeout=10) as teacher, \
                httpx.AsyncClient(base_url=base, timeout=10) as student:
            lesson = await start_class(teacher)
            assert (await student.get(f"/class/{lesson.code}", headers=PAGE_LOAD)).status_code == 200
            async with event_stream(student, lesson.code) as events:
                assert await next_event(events) == ("state", 1)
                redis.stop()
                assert await next_event(events, BACK_SECONDS) == ("unreachable", 0)  # not at the next keep-alive
                r = await student.get(f"/class/{lesson.code}", headers=PAGE_LOAD)
                assert r.status_code == 503 and r.headers["refresh"] == "5"
                assert "<h2>The class is reconnecting</h2>" in r.text
                assert (await student.get("/", headers=PAGE_LOAD)).status_code == 200  # the page alone needs no Redis
                redis.start()
                await step(teacher, lesson, "qkv")  # at once: perhaps before the server subscribed again
                assert await next_event(events, BACK_SECONDS) == ("state", 2)  # the same stream, still open
            r = await teacher.get(f"/class/{lesson.code}/teach", headers=PAGE_LOAD)
            assert r.status_code == 200 and 'class="class-panel teacher"' in r.text and "1 student joined" in r.text
            r = await student.get(f"/class/{lesson.code}/workspace", headers=HTMX)
            assert r.status_code == 200 and shown_stage(r.text) == "qkv"
