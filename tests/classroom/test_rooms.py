"""Both room stores against one contract: MemoryRooms in this process, and RedisRooms on a real
redis-server (tests/redis_server.py), emptied before each test. Then what only Redis has: events
between two workers' stores, keys that expire whole, and no plain teacher key anywhere in it."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Callable

import pytest

from app.classroom.memory import MemoryRooms
from app.classroom.redis_store import PREFIX, REDIS_CONNECTIONS, RedisRooms
from app.classroom.store import (
    CODE_ALPHABET,
    CODE_LENGTH,
    Event,
    Rooms,
    RoomsFull,
    ShareUsed,
    StoreUnavailable,
    key_hash,
    new_code,
    normal_code,
    spoken_code,
)
from tests.redis_server import RedisServer

pytestmark = pytest.mark.anyio

BOUNDS = dict(max_rooms=4, max_students=3, max_streams=6, idle_seconds=60.0)
STATE, FP = "shape=5&stage=x", "fp-1"
EVENT_SECONDS = 2.0  # an event must reach a stream within this
QUIET_SECONDS = 0.3  # and none may arrive within this when nothing changed

MakeRooms = Callable[..., Rooms]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["memory", "redis"])
async def make_rooms(request: pytest.FixtureRequest) -> AsyncIterator[MakeRooms]:
    """Stores of one kind with the test's bounds; several Redis stores are several workers of one class."""
    server: RedisServer | None = request.getfixturevalue("redis_db") if request.param == "redis" else None
    made: list[Rooms] = []

    def make(redis_timeout: float = 1.0, **bounds: float) -> Rooms:
        bounds = {**BOUNDS, **bounds}
        store = MemoryRooms(**bounds) if server is None else RedisRooms(server.url(), timeout=redis_timeout, **bounds)
        made.append(store)
        return store

    yield make
    for store in made:
        await store.close()


@pytest.fixture
def rooms(make_rooms: MakeRooms) -> Rooms:
    return make_rooms()


async def next_event(queue: asyncio.Queue[Event]) -> Event:
    return await asyncio.wait_for(queue.get(), EVENT_SECONDS)


async def no_event(queue: asyncio.Queue[Event]) -> None:
    await asyncio.sleep(QUIET_SECONDS)
    assert queue.empty(), f"an unexpected event: {queue.get_nowait()}"


# --- codes and keys -----------------------------------------------------------------------------


@pytest.mark.parametrize(("typed", "code"), [
    ("KQ7M4PXR", "KQ7M4PXR"), ("kq7m-4pxr", "KQ7M4PXR"), (" KQ7M 4PXR ", "KQ7M4PXR"), ("kq7m4pxr", "KQ7M4PXR"),
    ("KQ7M4PX", ""), ("KQ7M4PXRR", ""), ("KQ7M0PXR", ""), ("KQ7M1PXR", ""), ("KQ7MOPXR", ""), ("KQ7MIPXR", ""),
    ("KQ7MLPXR", ""), ("KQ7_M4PXR", ""), ("", ""), ("KQ7M4P", ""),
    ("КQ7M4PXR", ""),  # the last starts with a Cyrillic К
])
def test_a_typed_code_is_normalised_or_refused(typed: str, code: str) -> None:
    assert normal_code(typed) == code


def test_a_code_is_read_aloud_in_two_halves() -> None:
    assert spoken_code("KQ7M4PXR") == "KQ7M-4PXR"
    assert normal_code(spoken_code("KQ7M4PXR")) == "KQ7M4PXR"


def test_new_codes_are_normal_and_differ() -> None:
    codes = {new_code() for _ in range(200)}
    assert len(codes) == 200
    assert all(len(c) == CODE_LENGTH and set(c) <= set(CODE_ALPHABET) and normal_code(c) == c for c in codes)


def test_a_key_is_kept_as_its_sha256() -> None:
    assert key_hash("secret") == hashlib.sha256(b"secret").hexdigest()


# --- the contract -------------------------------------------------------------------------------


async def test_a_new_room_shows_its_state_at_version_1(rooms: Rooms) -> None:
    code, key = await rooms.create(STATE, FP)
    assert normal_code(code) == code
    assert len(key) >= 40
    room = await rooms.get(code)
    assert room is not None
    assert (room.code, room.state, room.version, room.fingerprint, room.students) == (code, STATE, 1, FP, 0)


async def test_no_room_for_an_unknown_or_empty_code(rooms: Rooms) -> None:
    await rooms.create(STATE, FP)
    assert await rooms.get(new_code()) is None
    assert await rooms.get("") is None
    assert await rooms.join("") is None
    assert await rooms.teach("", "key", STATE, FP) is None


async def test_only_the_right_key_is_the_teachers(rooms: Rooms) -> None:
    code, key = await rooms.create(STATE, FP)
    other, other_key = await rooms.create(STATE, FP)
    assert await rooms.is_teacher(code, key)
    for wrong in ("", key[:-1], key + "x", other_key, "x" * 200):
        assert not await rooms.is_teacher(code, wrong)
    assert not await rooms.is_teacher(new_code(), key)
    assert not await rooms.is_teacher("", key)


async def test_a_wrong_key_changes_nothing(rooms: Rooms) -> None:
    code, key = await rooms.create(STATE, FP)
    _, other_key = await rooms.create(STATE, FP)
    assert await rooms.teach(code, other_key, "stage=softmax", "fp-2") is None
    assert await rooms.teach(code, "", "stage=softmax", "fp-2") is None
    assert await rooms.teach(new_code(), key, "stage=softmax", "fp-2") is None
    room = await rooms.get(code)
    assert (room.state, room.version, room.fingerprint) == (STATE, 1, FP)


async def test_the_version_goes_up_only_when_the_state_changes(rooms: Rooms) -> None:
    code, key = await rooms.create(STATE, FP)
    assert await rooms.teach(code, key, STATE, FP) == 1  # the same page posted again
    assert await rooms.teach(code, key, "stage=qkv", FP) == 2  # a step: same scenario, another view
    assert await rooms.teach(code, key, "stage=qkv&x=2", "fp-2") == 3  # an edit: another scenario
    assert await rooms.teach(code, key, "stage=qkv&x=2", "fp-3") == 3  # only the fingerprint: no new state
    assert await rooms.teach(code, key, "stage=scores", FP) == 4
    room = await rooms.get(code)
    assert (room.state, room.version, room.fingerprint) == ("stage=scores", 4, FP)


async def test_a_new_scenario_clears_the_predictions_and_a_step_keeps_them(rooms: Rooms) -> None:
    code, key = await rooms.create(STATE, FP)
    student = await rooms.join(code)
    await rooms.predict(code, student, "softmax.0.1.2", 0.3)
    await rooms.teach(code, key, "stage=softmax", FP)  # a step: the same scenario
    assert await rooms.predictions(code) == {"softmax.0.1.2": [0.3]}
    await rooms.teach(code, key, "stage=softmax&x=1", "fp-2")  # an edit
    assert await rooms.predictions(code) == {}
    assert (await rooms.get(code)).fingerprint == "fp-2"
    assert await rooms.predict(code, student, "softmax.0.1.2", 0.4) == 1  # predicting starts afresh


async def test_students_join_anonymously_and_are_known_to_their_room_only(rooms: Rooms) -> None:
    code, _ = await rooms.create(STATE, FP)
    other, _ = await rooms.create(STATE, FP)
    first, second = await rooms.join(code), await rooms.join(code)
    assert first and second and first != second
    assert (await rooms.get(code)).students == 2
    assert await rooms.is_student(code, first) and await rooms.is_student(code, second)
    assert not await rooms.is_student(other, first)
    assert not await rooms.is_student(code, "")
    assert not await rooms.is_student(code, first + "x")
    assert not await rooms.is_student("", first)
    assert await rooms.join(new_code()) is None


async def test_a_full_class_refuses_the_next_student(rooms: Rooms) -> None:
    code, _ = await rooms.create(STATE, FP)
    joined = [await rooms.join(code) for _ in range(BOUNDS["max_students"])]
    with pytest.raises(RoomsFull, match="3 students"):
        await rooms.join(code)
    assert all([await rooms.is_student(code, s) for s in joined])
    assert (await rooms.get(code)).students == 3
    other, _ = await rooms.create(STATE, FP)  # the bound is per room
    assert await rooms.join(other)


async def test_a_full_server_refuses_the_next_room(rooms: Rooms) -> None:
    codes = [(await rooms.create(STATE, FP))[0] for _ in range(BOUNDS["max_rooms"])]
    assert len(set(codes)) == BOUNDS["max_rooms"]
    with pytest.raises(RoomsFull, match="4 rooms"):
        await rooms.create(STATE, FP)
    assert all([await rooms.get(c) is not None for c in codes])


async def test_a_whole_class_at_once(make_rooms: MakeRooms) -> None:
    """300 students scanning the QR code in the same second: every join and read is answered (a
    worker's Redis connections are bounded, so the 51st waits for one instead of failing).

    What is tested is the pool's bound, not the clock: 300 joins at once on a machine busy with the
    rest of the suite once left this worker's loop more than a second behind, and a connection the
    loop had not got back to in time timed out (a 503 in service, under that load). So Redis's timeout
    is 5 s here."""
    rooms = make_rooms(redis_timeout=5.0, max_students=500)
    code, key = await rooms.create(STATE, FP)
    students = await asyncio.gather(*(rooms.join(code) for _ in range(300)))
    assert len(set(students)) == 300
    rooms_read = await asyncio.gather(*(rooms.get(code) for _ in range(300)))
    assert {room.students for room in rooms_read} == {300}
    counts = await asyncio.gather(*(rooms.predict(code, s, "softmax.0.1.2", 0.5) for s in students))
    assert max(counts) == 300
    assert len((await rooms.predictions(code))["softmax.0.1.2"]) == 300
    if isinstance(rooms, RedisRooms):  # the bound held: this store opened the pool's 50, never 300
        clients = (await rooms.redis.info("clients"))["connected_clients"]
        assert clients <= REDIS_CONNECTIONS + 5  # + the few of earlier tests Redis may not yet have seen close


async def test_one_prediction_per_student_per_cell(rooms: Rooms) -> None:
    code, _ = await rooms.create(STATE, FP)
    ann, bob = await rooms.join(code), await rooms.join(code)
    assert await rooms.predict(code, ann, "softmax.0.1.2", 0.3) == 1
    assert await rooms.predict(code, bob, "softmax.0.1.2", 0.5) == 2
    assert await rooms.predict(code, ann, "softmax.0.1.2", 0.25) == 2  # Ann changes her mind
    assert await rooms.predict(code, ann, "scores.0.0.0", -1.5) == 3  # another cell
    found = await rooms.predictions(code)
    assert set(found) == {"softmax.0.1.2", "scores.0.0.0"}
    assert sorted(found["softmax.0.1.2"]) == [0.25, 0.5]
    assert found["scores.0.0.0"] == [-1.5]
    assert await rooms.predictions(new_code()) == {}
    assert await rooms.mine(code, ann) == {"softmax.0.1.2": 0.25, "scores.0.0.0": -1.5}  # each student's own
    assert await rooms.mine(code, bob) == {"softmax.0.1.2": 0.5}
    assert await rooms.mine(code, "someone") == {} and await rooms.mine(new_code(), ann) == {}


async def test_a_prediction_for_a_gone_room_is_not_kept(rooms: Rooms) -> None:
    code = new_code()
    assert await rooms.predict(code, "someone", "softmax.0.1.2", 0.3) == 0
    assert await rooms.predictions(code) == {}
    assert await rooms.get(code) is None


async def test_one_guess_per_student_per_text_kept_apart_from_the_predictions(rooms: Rooms) -> None:
    code, key = await rooms.create(STATE, FP)
    ann, bob = await rooms.join(code), await rooms.join(code)
    assert await rooms.guess(code, ann, "next.a", "Paris") == 1
    assert await rooms.guess(code, bob, "next.a", "paris") == 2
    assert await rooms.guess(code, ann, "next.a", "Lyon") == 2  # Ann changes her mind
    assert await rooms.guess(code, ann, "next.b", "cat") == 1  # another text
    assert sorted(await rooms.guesses(code, "next.a")) == ["Lyon", "paris"]
    assert await rooms.guesses(code, "next.b") == ["cat"] and await rooms.guesses(code, "next.c") == []
    assert await rooms.predictions(code) == {} and await rooms.mine(code, ann) == {}
    await rooms.teach(code, key, "decoder:text=x", FP)  # the same fingerprint: the guesses stay
    assert len(await rooms.guesses(code, "next.a")) == 2
    await rooms.teach(code, key, STATE, "fp-2")  # another scenario: they start afresh
    assert await rooms.guesses(code, "next.a") == []
    assert await rooms.guess(new_code(), ann, "next.a", "Paris") == 0  # a gone room keeps nothing
    assert await rooms.guesses(new_code(), "next.a") == []


async def test_a_guess_tells_the_rooms_streams(rooms: Rooms) -> None:
    code, _ = await rooms.create(STATE, FP)
    student = await rooms.join(code)
    async with rooms.listen(code) as queue:
        await rooms.guess(code, student, "next.a", "Paris")
        assert await next_event(queue) == Event("predictions", 1, 1)


async def test_allow_counts_uses_within_a_window(rooms: Rooms) -> None:
    window = 3600.0  # far longer than the test: no window ends in it
    assert await rooms.allow("a", 3, window, peek=True)
    assert [await rooms.allow("a", 3, window) for _ in range(4)] == [True, True, True, False]
    assert not await rooms.allow("a", 3, window, peek=True)
    assert not await rooms.allow("a", 3, window)
    assert await rooms.allow("b", 3, window)  # each bucket counts alone


async def test_peeking_counts_nothing(rooms: Rooms) -> None:
    window = 3600.0
    for _ in range(10):
        assert await rooms.allow("peeked", 2, window, peek=True)
    assert [await rooms.allow("peeked", 2, window) for _ in range(3)] == [True, True, False]


async def test_allow_again_in_the_next_window(rooms: Rooms) -> None:
    window = 1.0  # Redis counts per whole second of the clock, memory from the first use: 1.1 s ends both
    assert [await rooms.allow("w", 2, window) for _ in range(3)][:2] == [True, True]
    await asyncio.sleep(1.1)
    assert await rooms.allow("w", 2, window, peek=True)
    assert await rooms.allow("w", 2, window)


async def test_a_step_is_told_to_the_rooms_streams(rooms: Rooms) -> None:
    code, key = await rooms.create(STATE, FP)
    other, other_key = await rooms.create(STATE, FP)
    async with rooms.listen(code) as queue, rooms.listen(code) as second, rooms.listen(other) as elsewhere:
        assert await rooms.teach(code, key, "stage=qkv", FP) == 2
        assert await next_event(queue) == Event("state", 2)
        assert await next_event(second) == Event("state", 2)
        await rooms.teach(code, key, "stage=qkv", FP)  # no change: no event
        await rooms.teach(other, other_key, STATE, FP)
        await no_event(queue)
        await no_event(elsewhere)


async def test_a_prediction_is_told_with_the_rooms_count(rooms: Rooms) -> None:
    code, key = await rooms.create(STATE, FP)
    await rooms.teach(code, key, "stage=softmax", FP)
    student = await rooms.join(code)
    async with rooms.listen(code) as queue:
        await rooms.predict(code, student, "softmax.0.1.2", 0.3)
        assert await next_event(queue) == Event("predictions", 2, 1)
        await rooms.predict(code, student, "softmax.0.1.2", 0.4)
        assert await next_event(queue) == Event("predictions", 2, 1)


async def test_a_join_is_told_with_the_class_size(rooms: Rooms) -> None:
    code, key = await rooms.create(STATE, FP)
    async with rooms.listen(code) as queue:
        await rooms.join(code)
        assert await next_event(queue) == Event("joined", 1, 1)
        await rooms.join(code)
        assert await next_event(queue) == Event("joined", 1, 2)


async def test_a_closed_stream_hears_nothing_and_the_others_go_on(rooms: Rooms) -> None:
    code, key = await rooms.create(STATE, FP)
    async with rooms.listen(code) as staying:
        async with rooms.listen(code) as leaving:
            await rooms.teach(code, key, "stage=qkv", FP)
            assert await next_event(leaving) == Event("state", 2)
            assert await next_event(staying) == Event("state", 2)
        await rooms.teach(code, key, "stage=scores", FP)
        assert await next_event(staying) == Event("state", 3)
        await no_event(leaving)
    assert rooms.fanout.open == 0 and rooms.fanout.queues == {}


async def test_a_stream_opened_again_hears_the_room_again(rooms: Rooms) -> None:
    """The last stream of a room closes (the worker unsubscribes) just as a new one opens."""
    code, key = await rooms.create(STATE, FP)
    for step in range(3):
        leaving = rooms.listen(code)
        await leaving.__aenter__()
        coming = rooms.listen(code)
        _, queue = await asyncio.gather(leaving.__aexit__(None, None, None), coming.__aenter__())
        try:
            await rooms.teach(code, key, f"stage=qkv&step={step}", FP)
            assert await next_event(queue) == Event("state", step + 2)
        finally:
            await coming.__aexit__(None, None, None)


async def test_a_slow_stream_keeps_the_latest_events(rooms: Rooms) -> None:
    code, key = await rooms.create(STATE, FP)
    async with rooms.listen(code) as queue:
        for step in range(20):
            await rooms.teach(code, key, f"stage=qkv&step={step}", FP)
        await asyncio.sleep(0.3)
        kept = []
        while not queue.empty():
            kept.append(queue.get_nowait().version)
        assert kept == [21]  # only the latest state: a slow stream is told the step it must show


async def test_a_step_beside_a_burst_of_predictions_and_joins_is_never_dropped(make_rooms: MakeRooms) -> None:
    """The teacher's step, then 40 predictions and 10 joins before the stream reads anything: the
    step is still there, first (a queue of the 8 latest events lost it)."""
    rooms = make_rooms(max_students=50)
    code, key = await rooms.create(STATE, FP)
    students = [await rooms.join(code) for _ in range(4)]
    async with rooms.listen(code) as queue:
        await rooms.teach(code, key, "stage=softmax", FP)
        for i in range(40):
            await rooms.predict(code, students[i % 4], f"softmax.0.{i % 3}.{i % 5}", 0.1)
        for _ in range(10):
            await rooms.join(code)
        await asyncio.sleep(0.3)  # every event delivered (through Redis too), none read yet
        kept = []
        while not queue.empty():
            kept.append(queue.get_nowait())
        assert kept[0] == Event("state", 2), kept
        assert {e.kind for e in kept} == {"state", "predictions", "joined"}
        assert len(kept) == 3  # the latest of each kind: a stream's pending events are bounded
        assert [e for e in kept if e.kind == "joined"][0].count == 14


async def test_concurrent_joins_never_pass_the_class_size(make_rooms: MakeRooms) -> None:
    """Two workers' stores, 60 joins at once for 20 seats: exactly 20 students (Redis overshot)."""
    a, b = make_rooms(max_students=20), make_rooms(max_students=20)
    if isinstance(a, MemoryRooms):
        b = a  # one process: one store
    code, _ = await a.create(STATE, FP)

    async def join(store: Rooms) -> str | None:
        try:
            return await store.join(code)
        except RoomsFull:
            return None

    joined = await asyncio.gather(*(join(a if i % 2 else b) for i in range(60)))
    assert sum(s is not None for s in joined) == 20
    assert (await a.get(code)).students == 20


async def test_one_address_takes_its_share_of_seats_and_rooms(make_rooms: MakeRooms) -> None:
    rooms = make_rooms(max_students=10, seats_per_address=3, max_rooms=10, rooms_per_address=2)
    code, _ = await rooms.create(STATE, FP, owner="192.0.2.1")
    assert [await rooms.join(code, "192.0.2.7") is not None for _ in range(3)] == [True] * 3
    with pytest.raises(ShareUsed, match="3 students of this class joined from this address"):
        await rooms.join(code, "192.0.2.7")
    assert await rooms.join(code, "192.0.2.8") is not None  # another address: its own share
    await rooms.create(STATE, FP, owner="192.0.2.1")
    with pytest.raises(ShareUsed, match="2 classes started from this address"):
        await rooms.create(STATE, FP, owner="192.0.2.1")
    await rooms.create(STATE, FP, owner="192.0.2.2")


async def test_streams_per_address_are_bounded(make_rooms: MakeRooms) -> None:
    rooms = make_rooms(max_streams=6, streams_per_address=2)
    code, _ = await rooms.create(STATE, FP)
    async with rooms.listen(code, "192.0.2.1"), rooms.listen(code, "192.0.2.1"):
        with pytest.raises(ShareUsed, match="2 event streams"):
            async with rooms.listen(code, "192.0.2.1"):
                pass
        async with rooms.listen(code, "192.0.2.2"):
            assert rooms.fanout.open == 3
    assert rooms.fanout.by_address == {} and rooms.fanout.open == 0


async def test_a_change_past_its_deadline_is_dropped(rooms: Rooms) -> None:
    """An edit that reaches the store after the teacher gave up (Redis was frozen) is never applied."""
    import time

    code, key = await rooms.create(STATE, FP)
    with pytest.raises(StoreUnavailable):
        await rooms.teach(code, key, "stage=qkv", "fp-2", deadline=time.time() - 1)
    room = await rooms.get(code)
    assert (room.state, room.version, room.fingerprint) == (STATE, 1, FP)
    assert await rooms.teach(code, key, "stage=qkv", FP, deadline=time.time() + 5) == 2


async def test_streams_per_worker_are_bounded(make_rooms: MakeRooms) -> None:
    rooms = make_rooms(max_streams=2)
    code, _ = await rooms.create(STATE, FP)
    async with rooms.listen(code), rooms.listen(code):
        with pytest.raises(RoomsFull, match="2 event streams"):
            async with rooms.listen(code):
                pass
    async with rooms.listen(code):  # closed streams give their places back
        assert rooms.fanout.open == 1


async def test_an_idle_room_is_gone(make_rooms: MakeRooms) -> None:
    rooms = make_rooms(idle_seconds=1.0)  # Redis expires keys after whole seconds: 1 s is the least
    code, key = await rooms.create(STATE, FP)
    student = await rooms.join(code)
    await rooms.predict(code, student, "softmax.0.1.2", 0.3)
    await asyncio.sleep(0.6)
    assert await rooms.teach(code, key, "stage=qkv", FP) == 2  # a change keeps the room alive
    await asyncio.sleep(0.6)
    assert (await rooms.get(code)).version == 2  # 1.2 s after its start, 0.6 s after the change
    await asyncio.sleep(1.1)
    assert await rooms.get(code) is None
    assert not await rooms.is_teacher(code, key)
    assert not await rooms.is_student(code, student)
    assert await rooms.teach(code, key, "stage=scores", FP) is None
    assert await rooms.join(code) is None
    assert await rooms.predictions(code) == {}


async def test_an_idle_room_gives_its_place_back(make_rooms: MakeRooms) -> None:
    rooms = make_rooms(idle_seconds=1.0, max_rooms=1)
    await rooms.create(STATE, FP)
    with pytest.raises(RoomsFull):
        await rooms.create(STATE, FP)
    await asyncio.sleep(1.1)
    code, _ = await rooms.create(STATE, FP)
    assert await rooms.get(code) is not None


async def test_the_teacher_key_itself_is_not_kept(rooms: Rooms) -> None:
    code, key = await rooms.create(STATE, FP)
    if isinstance(rooms, MemoryRooms):
        kept = repr(rooms.rooms)
    else:
        kept = repr(await dump(rooms))
    assert key not in kept
    assert key_hash(key) in kept


# --- what only Redis has ------------------------------------------------------------------------


async def dump(rooms: RedisRooms) -> dict[str, object]:
    """Every key in the store's Redis with its value, whatever its type."""
    found: dict[str, object] = {}
    async for name in rooms.redis.scan_iter(match="*"):
        kind = await rooms.redis.type(name)
        read = {"hash": rooms.redis.hgetall, "set": rooms.redis.smembers, "string": rooms.redis.get}[kind]
        found[name] = await read(name)
    return found


@pytest.fixture
async def workers(redis_db: RedisServer) -> AsyncIterator[tuple[RedisRooms, RedisRooms]]:
    """Two stores on one Redis, as two worker processes (or two replicas) have."""
    a, b = RedisRooms(redis_db.url(), **BOUNDS), RedisRooms(redis_db.url(), **BOUNDS)
    yield a, b
    await a.close()
    await b.close()


async def test_a_step_on_one_worker_reaches_the_streams_of_another(workers: tuple[RedisRooms, RedisRooms]) -> None:
    a, b = workers
    code, key = await a.create(STATE, FP)
    async with b.listen(code) as on_b, a.listen(code) as on_a:
        assert await a.teach(code, key, "stage=qkv", FP) == 2
        assert await next_event(on_b) == Event("state", 2)
        assert await next_event(on_a) == Event("state", 2)
        student = await b.join(code)
        assert await next_event(on_a) == Event("joined", 2, 1)  # the teacher's count, on the other worker
        assert await next_event(on_b) == Event("joined", 2, 1)
        assert await a.is_student(code, student)
        await b.predict(code, student, "qkv.0.0.0", 1.0)
        assert await next_event(on_a) == Event("predictions", 2, 1)
        assert await next_event(on_b) == Event("predictions", 2, 1)
    assert (await b.get(code)).state == "stage=qkv"
    assert await b.is_teacher(code, key)


async def test_one_redis_bounds_the_rooms_of_every_worker(redis_db: RedisServer) -> None:
    a = RedisRooms(redis_db.url(), **{**BOUNDS, "max_rooms": 2})
    b = RedisRooms(redis_db.url(), **{**BOUNDS, "max_rooms": 2})
    try:
        await a.create(STATE, FP)
        await b.create(STATE, FP)
        with pytest.raises(RoomsFull):
            await a.create(STATE, FP)
    finally:
        await a.close()
        await b.close()


async def test_every_key_of_a_room_expires_with_it(redis_db: RedisServer) -> None:
    rooms = RedisRooms(redis_db.url(), **{**BOUNDS, "idle_seconds": 1.0})
    try:
        code, key = await rooms.create(STATE, FP)
        student = await rooms.join(code)
        await rooms.predict(code, student, "softmax.0.1.2", 0.3)
        await rooms.guess(code, student, "next.a", "Paris")
        names = {name async for name in rooms.redis.scan_iter(match=PREFIX + code + "*")}
        assert names == {PREFIX + code, PREFIX + code + ":students", PREFIX + code + ":predictions",
                         PREFIX + code + ":guesses"}
        for name in names:
            assert 0 < await rooms.redis.pttl(name) <= 1000
        await asyncio.sleep(1.2)
        assert [name async for name in rooms.redis.scan_iter(match=PREFIX + "*")] == []
    finally:
        await rooms.close()


async def test_the_room_is_one_hash_with_the_keys_hash(redis_db: RedisServer) -> None:
    rooms = RedisRooms(redis_db.url(), **BOUNDS)
    try:
        code, key = await rooms.create(STATE, FP)
        stored = await rooms.redis.hgetall(PREFIX + code)
        assert stored == {"key": key_hash(key), "state": STATE, "version": "1", "fingerprint": FP}
        assert await rooms.redis.ttl(PREFIX + code) > 0  # no room without an expiry, ever
    finally:
        await rooms.close()


async def test_a_worker_holds_one_subscription_per_room_while_it_has_streams(redis_db: RedisServer) -> None:
    """Subscribed (and confirmed by Redis) when the first stream is open; unsubscribed with the last."""
    rooms = RedisRooms(redis_db.url(), **BOUNDS)
    try:
        code, _ = await rooms.create(STATE, FP)
        channel = PREFIX + code + ":events"
        async with rooms.listen(code), rooms.listen(code), rooms.listen(code):
            assert await rooms.redis.pubsub_numsub(channel) == [(channel, 1)]
            assert list(rooms.channels) == [channel] and rooms.channels[channel].done()
        assert rooms.channels == {}
        await asyncio.sleep(0.1)
        assert await rooms.redis.pubsub_numsub(channel) == [(channel, 0)]
    finally:
        await rooms.close()


async def test_a_restart_of_redis_keeps_the_room_and_the_next_command_works(tmp_path) -> None:  # noqa: ANN001
    """Redis with its append-only file, stopped and started again under a store that stays open: the
    store's pooled connections are dead, and its next commands reconnect instead of failing."""
    import subprocess
    import time

    from tests.redis_server import _answers_ping, find_redis_server
    from tests.servers import LOOPBACK, free_port

    binary = find_redis_server()
    if binary is None:
        pytest.skip("redis-server not found")
    port = free_port()
    args = [binary, "--port", str(port), "--bind", LOOPBACK, "--save", "", "--appendonly", "yes",
            "--dir", str(tmp_path), "--daemonize", "no", "--loglevel", "warning"]

    def start() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            if _answers_ping(port):
                return proc
            time.sleep(0.05)
        proc.kill()
        raise RuntimeError("redis-server did not start")

    proc = start()
    store = RedisRooms(f"redis://{LOOPBACK}:{port}/0", **BOUNDS)
    try:
        code, key = await store.create(STATE, FP)
        student = await store.join(code)
        proc.terminate()  # SIGTERM: Redis writes its append-only file and stops
        proc.wait(timeout=10)
        proc = start()
        room = await store.get(code)  # on a connection Redis closed: tried again on a new one
        assert room is not None and room.state == STATE and room.students == 1
        assert await store.is_teacher(code, key) and await store.is_student(code, student)
        assert await store.teach(code, key, STATE + "&stage=qkv", FP) == 2
    finally:
        await store.close()
        proc.terminate()
        proc.wait(timeout=10)

