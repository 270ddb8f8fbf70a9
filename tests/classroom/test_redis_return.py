"""Redis lost and back under a worker's open streams: the streams are told at once, and when the worker's
subscription comes back each room's streams are brought to its version, even a step that was published (or
written) while no worker was subscribed. Against a real redis-server (tests/redis_server.py): the session's one
for a subscription cut by Redis (CLIENT KILL), and one with its append-only file, stopped and started again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from app.classroom.redis_store import PREFIX, RedisRooms
from app.classroom.store import Event, Fanout, Mailbox
from tests.redis_server import DurableRedis, RedisServer, durable_redis_server, find_redis_server

pytestmark = pytest.mark.anyio

BOUNDS = dict(max_rooms=4, max_students=3, max_streams=6, idle_seconds=60.0)
STATE, FP = "shape=5&stage=x", "fp-1"
CAUGHT_UP_SECONDS = 3.0  # a stream has the room's version within this of its subscription's return
QUIET_SECONDS = 0.5  # and a stream that has it already is told nothing within this


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def next_event(box: Mailbox, seconds: float = CAUGHT_UP_SECONDS) -> Event:
    return await asyncio.wait_for(box.get(), seconds)


async def no_event(box: Mailbox) -> None:
    await asyncio.sleep(QUIET_SECONDS)
    assert box.empty(), f"an unexpected event: {box.get_nowait()}"


def silent_step(client, code: str) -> int:  # noqa: ANN001 - a redis.Redis
    """The room's version raised in Redis with no event published: a step no stream heard."""
    return int(client.hincrby(PREFIX + code, "version", 1))


# --- the mailbox and the fanout, alone ------------------------------------------------------------


def test_a_step_clears_an_unreachable_not_yet_sent_and_goes_first() -> None:
    box = Mailbox()
    box.put(Event("unreachable", 0))
    box.put(Event("state", 3))
    assert box.get_nowait() == Event("state", 3)
    assert box.empty()  # the store is back: "unreachable" is not sent after the step
    box.put(Event("state", 4))
    box.put(Event("unreachable", 0))  # lost after the step: the step first, then the news
    assert [box.get_nowait(), box.get_nowait()] == [Event("state", 4), Event("unreachable", 0)]


def test_a_catch_up_tells_the_streams_behind_and_those_that_said_unreachable() -> None:
    fanout = Fanout(10)
    behind, current, warned, elsewhere = fanout.add("ROOM"), fanout.add("ROOM"), fanout.add("ROOM"), fanout.add("OTHER")
    behind.sent, current.sent, warned.sent, elsewhere.sent = 2, 3, 3, 1
    warned.warned = True
    assert fanout.catch_up("ROOM", 3) == 2
    assert behind.get_nowait() == Event("state", 3)
    assert warned.get_nowait() == Event("state", 3)
    assert current.empty() and elsewhere.empty()
    fanout.deliver_all(Event("unreachable", 0))
    assert {box.get_nowait() for box in (behind, current, warned, elsewhere)} == {Event("unreachable", 0)}


# --- a subscription cut by Redis ------------------------------------------------------------------


@pytest.fixture
async def store(redis_db: RedisServer) -> AsyncIterator[RedisRooms]:
    rooms = RedisRooms(redis_db.url(), **BOUNDS)
    yield rooms
    await rooms.close()


async def test_a_subscription_cut_and_back_brings_its_streams_to_the_rooms_version(
        store: RedisRooms, redis_db: RedisServer) -> None:
    code, _ = await store.create(STATE, FP)
    other, _ = await store.create(STATE, FP)
    async with store.listen(code) as behind, store.listen(code) as ahead, store.listen(other) as elsewhere:
        behind.sent = elsewhere.sent = 1
        with redis_db.client() as r:
            version = silent_step(r, code)  # a step while the subscription is down: published to no one
            ahead.sent = version
            host, port = store.pubsub.connection._writer.get_extra_info("sockname")[:2]
            assert r.client_kill_filter(_type="pubsub", addr=f"{host}:{port}") == 1  # this worker's subscription
        assert await next_event(behind) == Event("state", version)
        await no_event(ahead)
        await no_event(elsewhere)
        channel = PREFIX + code + ":events"
        assert await store.redis.pubsub_numsub(channel) == [(channel, 1)]  # subscribed again, once


async def test_without_a_catch_up_the_silent_step_would_be_missed(store: RedisRooms, redis_db: RedisServer) -> None:
    """The control of the test above: with the subscription left alone, a step no one published reaches no one."""
    code, _ = await store.create(STATE, FP)
    async with store.listen(code) as box:
        box.sent = 1
        with redis_db.client() as r:
            silent_step(r, code)
        await no_event(box)


# --- Redis stopped and started again, with its append-only file --------------------------------------


@pytest.fixture
def durable_redis() -> Iterator[DurableRedis]:
    binary = find_redis_server()
    if binary is None:
        pytest.skip("redis-server not found (make services installs it)")
    with durable_redis_server(binary) as server:
        yield server


async def test_redis_restarted_streams_are_told_and_caught_up(durable_redis: DurableRedis) -> None:
    store = RedisRooms(durable_redis.url(), timeout=0.5, **BOUNDS)
    try:
        code, key = await store.create(STATE, FP)
        student = await store.join(code)
        await store.predict(code, student, "softmax.0.1.2", 0.25)
        async with store.listen(code) as box:
            box.sent = 1
            durable_redis.stop()
            assert await next_event(box) == Event("unreachable", 0)  # told at once, not at the next keep-alive
            with pytest.raises(store.errors):  # a new stream of another room now: refused, and nothing left behind
                async with store.listen("ABCDEFGH"):
                    pass
            assert PREFIX + "ABCDEFGH:events" not in store.channels
            durable_redis.start()
            with durable_redis.client() as r:
                version = silent_step(r, code)  # the teacher's first step, before the worker subscribed again
            assert await next_event(box) == Event("state", version)
        room = await store.get(code)  # kept by the append-only file: the class, its student, the key, the prediction
        assert room is not None and room.state == STATE and room.students == 1
        assert await store.is_teacher(code, key) and await store.is_student(code, student)
        assert await store.mine(code, student) == {"softmax.0.1.2": 0.25}
    finally:
        await store.close()
