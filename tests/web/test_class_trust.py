"""A live class under abuse, through the HTTP routes: what one client may take (seats, rooms,
predictions, failed codes, streams), what a room may hold (bytes), what a GET and a post from
another site may change, and what a student's page costs. Each test reproduces a way a class was
broken and checks it no longer is; a school's NAT (a class of 30 behind one address) must never see
a 429 for honest use. Event delivery and Redis faults, which need real servers, are at the end."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient

from app.classroom.store import CODE_ALPHABET
from app.config import Settings
from app.main import create_app
from app.state.page import preset_page
from app.state.permalink import state_query
from bench.classroom import start_class
from tests.redis_server import RedisServer, find_redis_server, redis_server
from tests.servers import LOOPBACK, free_port, running, tail
from tests.web.test_class_redis import event_stream, next_event, shown_stage, step

pytestmark = pytest.mark.server

PRESET = "three-token"
HTMX = {"HX-Request": "true"}
SCHOOL = ("198.51.100.7", 40000)  # a school's NAT: every browser of the class behind this one address


def preset_fields(preset: str = PRESET, **view: str) -> dict[str, str]:
    sc, v = preset_page(preset)
    return {**dict(state_query(sc, v)), **view}


def browser(app, address: tuple[str, int] = SCHOOL) -> TestClient:  # noqa: ANN001
    """A browser of its own (its own cookies) from ``address``."""
    return TestClient(app, follow_redirects=False, client=address)


def start(app, address: tuple[str, int] = SCHOOL, preset: str = PRESET) -> tuple[TestClient, str, str]:  # noqa: ANN001
    """A teacher starts a class: their browser (the key now in its cookie), the code and the key."""
    teacher = browser(app, address)
    r = teacher.post("/class", data={**preset_fields(preset), "action": "start_class"})
    assert r.status_code == 303, r.text[:300]
    link = r.headers["location"]
    code = re.fullmatch(r"/class/([A-Z0-9]{8})/teach\?key=.+", link)[1]
    key = dict(parse_qsl(urlsplit(link).query))["key"]
    assert teacher.get(link).status_code == 303
    return teacher, code, key


def room(app, code: str):  # noqa: ANN001, ANN201
    return asyncio.run(app.state.rooms.get(code))


def other_codes(code: str, n: int) -> list[str]:
    return [a + b + "234567" for a in CODE_ALPHABET for b in CODE_ALPHABET if a + b + "234567" != code][:n]


@pytest.fixture
def app():  # noqa: ANN201
    return create_app(Settings())


@pytest.fixture(autouse=True)
def _no_cross_test_rooms():  # noqa: ANN202
    yield
    from app.classroom import lesson

    lesson._shown.clear()
    lesson._rendered.clear()


# --- 3. memory by bytes ------------------------------------------------------------------------------


def test_an_oversize_state_is_refused_naming_its_field_and_never_stored(app) -> None:  # noqa: ANN001
    """An 8.5 MB hidden field (the state before training) was stored and sent to every student."""
    huge = {**preset_fields("learn-bank"), "learn_losses": "1.5 0.9", "learn_before": "A" * 1_500_000}
    r = browser(app).post("/class", data={**huge, "action": "start_class"})
    assert r.status_code == 422, r.status_code
    assert "learn_before" in r.text and "1,048,576" in r.text
    assert app.state.rooms.rooms == {}

    teacher, code, _ = start(app, preset="learn-bank")
    r = teacher.post("/stages", data={**huge, "class_code": code, "goto": "softmax"}, headers=HTMX)
    assert r.status_code == 422 and "learn_before" in r.text
    assert len(room(app, code).state) < 100_000  # the room kept its state
    r = teacher.post("/stages", data={**preset_fields("learn-bank"), "class_code": code, "goto": "softmax"},
                     headers=HTMX)
    assert r.status_code == 200 and "stage=softmax" in room(app, code).state


def test_the_class_caches_are_bounded_by_bytes(app, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """256 cached rooms of up to 35 MB each: the caches now hold at most their byte budgets."""
    from app.classroom import lesson
    from app.serving.byte_cache import ByteCache

    monkeypatch.setattr(lesson, "_shown", ByteCache(50_000))
    monkeypatch.setattr(lesson, "_rendered", ByteCache(400_000))
    for _ in range(6):
        _, code, _ = start(app, ("192.0.2.1", 1), preset="block")
        assert browser(app).get(f"/class/{code}").status_code == 200
        assert lesson._shown.used <= 50_000 and lesson._rendered.used <= 400_000
    assert 0 < len(lesson._shown) < 6 and 0 < len(lesson._rendered) < 6


def test_a_students_page_is_rendered_once_per_change_off_the_event_loop(app, monkeypatch: pytest.MonkeyPatch
                                                                        ) -> None:  # noqa: ANN001
    """Each student's GET /class/CODE ran the room's whole page on the event loop, uncached."""
    from app.web import classroom

    renders: list[bool] = []
    finish = classroom.finish

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        try:
            asyncio.get_running_loop()
            renders.append(True)  # on the event loop
        except RuntimeError:
            renders.append(False)  # in a worker thread
        return finish(*args, **kwargs)

    monkeypatch.setattr(classroom, "finish", counted)
    teacher, code, _ = start(app)
    renders.clear()
    for _ in range(20):
        assert browser(app).get(f"/class/{code}").status_code == 200
    assert renders == [False], renders
    teacher.post("/stages", data={**preset_fields(), "class_code": code, "goto": "softmax"}, headers=HTMX)
    renders.clear()
    pages = [browser(app).get(f"/class/{code}") for _ in range(5)]
    assert {p.status_code for p in pages} == {200} and renders == [False]
    assert all('id="stage-softmax"' in p.text for p in pages)


# --- 4. fair shares ----------------------------------------------------------------------------------


def test_cookieless_joins_from_one_address_take_only_its_share_of_seats(app) -> None:  # noqa: ANN001
    """520 cookieless joins from one address filled a class's 500 seats."""
    _, code, _ = start(app)
    share = Settings().class_seats_per_address
    attacker = browser(app, ("203.0.113.9", 1))
    answers = []
    for _ in range(share + 1):
        attacker.cookies.clear()
        answers.append(attacker.get(f"/class/{code}").status_code)
    assert answers == [200] * share + [429]
    assert room(app, code).students == share
    assert browser(app).get(f"/class/{code}").status_code == 200  # the class itself still joins
    assert Settings().class_max_students >= 4 * share  # four addresses at least to fill a class


def test_a_class_of_30_behind_one_nat_never_sees_a_429(app) -> None:  # noqa: ANN001
    """Joining, mistyping a code once each, reloading: 10 mistyped codes locked the next 20 out."""
    _, code, _ = start(app)
    wrong = other_codes(code, 30)
    students = [browser(app) for _ in range(30)]
    for i, student in enumerate(students):
        assert student.get("/class", params={"code": wrong[i]}).status_code == 404
        assert student.get("/class", params={"code": code}).status_code == 303
        for _ in range(3):  # the page and two reloads
            r = student.get(f"/class/{code}")
            assert r.status_code == 200, (i, r.status_code)
        assert student.get(f"/class/{code}/workspace", headers=HTMX).status_code == 200
    assert room(app, code).students == 30


def test_the_predictions_limit_holds_across_joining_again(app) -> None:  # noqa: ANN001
    """The 30-per-minute limit was per student id: joining again gave a fresh one."""
    limited = create_app(Settings(class_predictions_per_minute=3))
    teacher, code, _ = start(limited)
    teacher.post("/stages", data={**preset_fields(), "class_code": code, "goto": "softmax", "stage": "softmax",
                                  "quiz": "on"}, headers=HTMX)
    student = browser(limited)
    guess = {"guess_matrix": "softmax", "guess_row": "1", "guess_col": "2", "guess": "0.5"}
    sent = []
    for _ in range(3):
        assert student.get(f"/class/{code}").status_code == 200  # (again) a new seat each time
        sent.append(student.post(f"/class/{code}/predict", data=guess, headers=HTMX).status_code)
        for cookie in [c for c in student.cookies.jar if c.name == "attention_student"]:  # joining again
            student.cookies.jar.clear(cookie.domain, cookie.path, cookie.name)
    assert sent == [200, 200, 200]
    assert student.get(f"/class/{code}").status_code == 200
    assert student.post(f"/class/{code}/predict", data=guess, headers=HTMX).status_code == 429


def test_one_address_cannot_fill_the_servers_rooms(app) -> None:  # noqa: ANN001
    """181 class starts from one address filled the 200-room cap (10 a minute); a school's teachers
    behind one NAT still start their classes."""
    share = Settings().class_rooms_per_address
    assert Settings().class_max_rooms >= 10 * share
    for _ in range(share):
        start(app, ("203.0.113.50", 1))
    r = browser(app, ("203.0.113.50", 1)).post("/class", data={**preset_fields(), "action": "start_class"})
    assert r.status_code == 429 and "classes started from this address" in r.text
    start(app, ("203.0.113.51", 1))  # another school


# --- 7. guessing codes -------------------------------------------------------------------------------


def test_failed_codes_on_every_class_route_count_toward_the_limit(app) -> None:  # noqa: ANN001
    """/class/<code>/workspace and /events answered 404 without counting: ~2,000 guesses a second."""
    _, code, _ = start(app)
    limit = Settings().class_failures_per_address
    guesser = browser(app, ("203.0.113.77", 1))
    routes = ("workspace", "events", "mine")
    answers = []
    for i, guess in enumerate(other_codes(code, limit + 3)):
        guesser.cookies.clear()  # a guesser keeps no cookie: the address counts
        answers.append(guesser.get(f"/class/{guess}/{routes[i % 3]}").status_code)
    assert set(answers[:limit]) == {404} and set(answers[limit:]) == {429}, answers
    # Over the limit even the right code is refused, on every route: a hit looks like a miss.
    for path in (f"/class/{code}", f"/class/{code}/workspace", f"/class/{code}/events"):
        assert guesser.get(path).status_code == 429, path
    assert browser(app).get(f"/class/{code}").status_code == 200  # the school's address is not the guesser's


# --- 8. no change on GET, no post from another site, no key in the page -----------------------------


def test_a_get_never_changes_the_class(app) -> None:  # noqa: ANN001
    """GET /class/CODE/teach?preset=pool with the teacher's cookie moved the class (a cross-site link)."""
    teacher, code, _ = start(app)
    before = room(app, code)
    r = teacher.get(f"/class/{code}/teach", params={"preset": "pool"})
    assert r.status_code in (200, 303)
    assert room(app, code) == before
    r = teacher.post(f"/class/{code}/teach", data={"preset": "pool"})  # the menu's post (a form without JS)
    assert r.status_code == 303 and room(app, code).version == before.version + 1
    assert "preset=pool" in room(app, code).state


@pytest.mark.parametrize("headers", [{"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"},
                                     {"Origin": "null"}, {"Sec-Fetch-Site": "same-site",
                                                          "Origin": "https://other.testserver"}])
def test_a_post_from_another_site_changes_nothing(app, headers: dict[str, str]) -> None:  # noqa: ANN001
    teacher, code, _ = start(app)
    before = room(app, code)
    step = {**preset_fields(), "class_code": code, "goto": "softmax"}
    for path, data in (("/stages", step), ("/", step), (f"/class/{code}/teach", {"preset": "pool"}),
                       ("/class", {**preset_fields(), "action": "start_class"})):
        r = teacher.post(path, data=data, headers={**HTMX, **headers})
        assert r.status_code == 403 and "another site" in r.text, (path, r.status_code)
    assert room(app, code) == before and len(app.state.rooms.rooms) == 1
    same = {"Origin": "http://testserver", "Sec-Fetch-Site": "same-origin"}
    assert teacher.post("/stages", data=step, headers={**HTMX, **same}).status_code == 200
    assert room(app, code).version == before.version + 1


def test_the_teacher_key_is_never_in_the_page_and_posts_need_the_cookie(app) -> None:  # noqa: ANN001
    teacher, code, key = start(app)
    page = teacher.get(f"/class/{code}/teach")
    assert page.status_code == 200 and key not in page.text
    cookie = next(c for c in teacher.cookies.jar if c.value == key)
    assert cookie.has_nonstandard_attr("HttpOnly") or "httponly" in str(cookie._rest).lower()
    # The key only in the form (as the page had it) opens nothing now.
    stranger = browser(app, ("203.0.113.5", 1))
    before = room(app, code)
    r = stranger.post("/stages", data={**preset_fields(), "class_code": code, "class_key": key, "goto": "softmax"},
                      headers=HTMX)
    assert r.status_code == 200 and room(app, code) == before
    assert stranger.post(f"/class/{code}/results", data={"class_key": key}).status_code == 403
    # The teacher link shows when the teacher asks for it, to them only.
    shown = teacher.post(f"/class/{code}/teacher-link", headers=HTMX)
    assert shown.status_code == 200 and f"/class/{code}/teach?key={key}" in shown.text
    assert stranger.post(f"/class/{code}/teacher-link").status_code == 403
    plain = teacher.post(f"/class/{code}/teacher-link")  # without JavaScript: a page with the link
    assert plain.status_code == 200 and key in plain.text and "Back to the class" in plain.text


# --- with real servers: streams per address, delivery (5), Redis faults (6) ------------------------

FOLLOWERS, PREDICTIONS, JOINS = 30, 40, 10
STEP_SECONDS = 3.0  # every follower has the teacher's step by then
FAST_503_SECONDS = 3.0  # any class route answers within this while Redis is frozen


@contextmanager
def class_server(redis_url: str = "", **env: str) -> Iterator[str]:
    """``python -m app.serve`` with one worker, rooms in memory or in Redis: its base URL."""
    from tests.web.test_class_redis import serve_env

    port = free_port()
    with tempfile.TemporaryFile() as log, running(["-m", "app.serve"], port=port, stdout=log, log=lambda: tail(log),
                                                  env={**serve_env(port, redis_url=redis_url), **env}):
        yield f"http://{LOOPBACK}:{port}"


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_one_address_holds_only_its_share_of_a_workers_streams(anyio_backend: str) -> None:
    """1,000 event streams from one address took every stream of the worker."""
    with class_server(ATTENTION_CLASS_MAX_STREAMS="6", ATTENTION_CLASS_STREAMS_PER_ADDRESS="2") as base:
        async with httpx.AsyncClient(base_url=base) as teacher, httpx.AsyncClient(base_url=base) as one, \
                httpx.AsyncClient(base_url=base, transport=httpx.AsyncHTTPTransport(local_address="127.0.0.2")) as two:
            lesson = await start_class(teacher)
            async with event_stream(one, lesson.code), event_stream(one, lesson.code):
                r = await one.get(f"/class/{lesson.code}/events")
                assert r.status_code == 429 and "2 event streams" in r.text
                async with event_stream(two, lesson.code) as other:  # another address: its own share
                    assert await next_event(other) == ("state", 1)


def raw_request(base: str, method: str, path: str, client: httpx.AsyncClient | None = None,
                data: dict[str, str] | None = None, headers: dict[str, str] | None = None) -> bytes:
    """An HTTP/1.1 request as bytes, with ``client``'s cookies for ``path``: sent with others at once."""
    request = httpx.Request(method, base + path, data=data, headers={**(headers or {}), "Connection": "close"})
    if client is not None:
        client.cookies.set_cookie_header(request)
    lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in request.headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + request.read()


async def send_at_once(base: str, requests: list[bytes]) -> list[int]:
    """Every request on its own connection, all written in one go (so the server reads them in one turn
    of its loop, as when a class acts at once); their status codes."""
    host, port = base.removeprefix("http://").split(":")
    connections = [await asyncio.open_connection(host, int(port)) for _ in requests]
    for (_, writer), request in zip(connections, requests, strict=True):
        writer.write(request)
    statuses = []
    for reader, writer in connections:
        head = await asyncio.wait_for(reader.readline(), 20)
        statuses.append(int(head.split()[1]))
        writer.close()
    return statuses


async def _burst(base: str) -> None:
    """A class of FOLLOWERS following by their streams; the teacher's step sent with PREDICTIONS
    predictions and JOINS joins at once; every follower must have the step within STEP_SECONDS."""
    async with contextlib.AsyncExitStack() as stack:
        client = lambda: stack.enter_async_context(httpx.AsyncClient(base_url=base, timeout=20))  # noqa: E731
        teacher = await client()
        lesson = await start_class(teacher)
        await step(teacher, lesson, "softmax", quiz="on")  # version 2
        predictors = [await client() for _ in range(PREDICTIONS)]
        followers = await client()
        for c in (*predictors, followers):
            assert (await c.get(f"/class/{lesson.code}")).status_code == 200
        streams = [await stack.enter_async_context(event_stream(followers, lesson.code)) for _ in range(FOLLOWERS)]
        assert [await next_event(s) for s in streams] == [("state", 2)] * FOLLOWERS

        code = lesson.code
        burst = [raw_request(base, "POST", f"/class/{code}/predict", predictors[i], {
            "guess_matrix": "softmax", "guess_row": str(1 + i % 3), "guess_col": str(1 + i % 2), "guess": "0.2"}, HTMX)
            for i in range(PREDICTIONS)]
        burst += [raw_request(base, "GET", f"/class/{code}") for _ in range(JOINS)]
        # The step in the middle: whichever order the server takes them in, 25 events come after it.
        burst.insert(len(burst) // 2, raw_request(base, "POST", "/stages", teacher, {
            **lesson.form, "goto": "softmax", "quiz": "on", "decimals": "2"}, HTMX))
        assert await send_at_once(base, burst) == [200] * len(burst)

        async def has_step(s) -> bool:  # noqa: ANN001
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STEP_SECONDS):
                    while await next_event(s, STEP_SECONDS) != ("state", 3):
                        pass
                    return True
            return False

        missed = (await asyncio.gather(*(has_step(s) for s in streams))).count(False)
        assert missed == 0, f"{missed} of {FOLLOWERS} followers missed the teacher's step"


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_every_follower_gets_the_step_beside_a_burst_in_memory(anyio_backend: str) -> None:
    """Each stream kept 8 events: a step sent with 40 predictions and 10 joins left all 30 followers
    on the old stage (memory: 10 trials in 10)."""
    with class_server() as base:
        await _burst(base)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.slow
async def test_every_follower_gets_the_step_beside_a_burst_with_redis(anyio_backend: str, redis_db: RedisServer
                                                                     ) -> None:
    """The same with the class in Redis, its events through the worker's subscription (4–6 trials in 10)."""
    with class_server(redis_db.url()) as base:
        await _burst(base)


@contextmanager
def own_redis() -> Iterator[RedisServer]:
    """A redis-server for this test alone: it is frozen (SIGSTOP), so not the session's."""
    binary = find_redis_server()
    if binary is None:
        pytest.skip("redis-server not found")
    with redis_server(binary) as server:
        yield server


@contextmanager
def frozen(server: RedisServer) -> Iterator[None]:
    """Redis stopped by SIGSTOP (it keeps its port: connections are accepted, nothing is answered),
    and resumed by SIGCONT whatever happens."""
    os.kill(server.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.pid, signal.SIGCONT)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.slow
async def test_a_frozen_redis_gets_a_fast_503_on_every_class_route(anyio_backend: str) -> None:
    """No socket timeout: edits, pages, streams and POST /class hung past 15 s; /healthz said ok."""
    with own_redis() as redis, class_server(redis.url()) as base:
        async with httpx.AsyncClient(base_url=base, timeout=8) as teacher, \
                httpx.AsyncClient(base_url=base, timeout=8) as student:
            lesson = await start_class(teacher)
            assert (await student.get(f"/class/{lesson.code}")).status_code == 200
            assert (await teacher.get("/readyz")).status_code == 200
            code = lesson.code
            requests = {
                "page": lambda: student.get(f"/class/{code}"),
                "workspace": lambda: student.get(f"/class/{code}/workspace", headers=HTMX),
                "events": lambda: student.get(f"/class/{code}/events"),
                "join": lambda: student.get("/class", params={"code": code}),
                "edit": lambda: teacher.post("/stages", data={**lesson.form, "goto": "softmax"}, headers=HTMX),
                "teach": lambda: teacher.get(f"/class/{code}/teach"),
                "start": lambda: teacher.post("/class", data={**lesson.form, "action": "start_class"}),
                "results": lambda: teacher.post(f"/class/{code}/results", headers=HTMX),
                "readyz": lambda: teacher.get("/readyz"),
            }
            with frozen(redis):
                for name, send in requests.items():
                    began = time.monotonic()
                    r = await send()
                    took = time.monotonic() - began
                    assert r.status_code == 503 and r.headers.get("retry-after"), (name, r.status_code, r.text[:200])
                    assert took <= FAST_503_SECONDS, (name, took)
                began = time.monotonic()
                assert (await teacher.get("/healthz")).status_code == 200  # liveness needs no store
                assert time.monotonic() - began < 0.5
            for _ in range(50):  # Redis back: the class goes on where it was
                if (await teacher.get("/readyz")).status_code == 200:
                    break
                await asyncio.sleep(0.1)
            r = await student.get(f"/class/{code}/workspace", headers=HTMX)
            assert r.status_code == 200 and shown_stage(r.text) == "x"  # the edit that got 503 never landed
            await step(teacher, lesson, "qkv")
            assert shown_stage((await student.get(f"/class/{code}/workspace", headers=HTMX)).text) == "qkv"


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_change_sent_to_a_frozen_redis_is_not_applied_when_it_resumes(anyio_backend: str) -> None:
    """An edit the teacher gave up on was applied 40 s later, when Redis came back."""
    from app.classroom.redis_store import RedisRooms

    with own_redis() as redis:
        store = RedisRooms(redis.url(), timeout=0.5, max_rooms=4, max_students=4, max_streams=4, idle_seconds=60)
        try:
            code, key = await store.create("stage=x", "fp")
            assert await store.teach(code, key, "stage=x&decimals=2", "fp", deadline=time.time() + 5) == 2
            with frozen(redis):
                with pytest.raises(store.errors):  # the store gives up within its timeout …
                    await store.teach(code, key, "stage=softmax", "fp", deadline=time.time() + 0.3)
                await asyncio.sleep(0.5)  # … past the change's deadline, while Redis still holds the command
            await asyncio.sleep(0.3)
            room = await store.get(code)
            assert (room.state, room.version) == ("stage=x&decimals=2", 2)  # Redis ran it, found it late, dropped it
        finally:
            await store.close()
