"""Fair shares of a live class: what one address can take, what a school's NAT never loses, and what
the rate windows cost (the ``limits`` library's moving window against a fixed-window counter, the
baseline, in the same run), in memory and in a redis-server of its own.

    python -m bench.fairness
"""

from __future__ import annotations

import asyncio
import time

from fastapi.testclient import TestClient

from app.classroom.memory import MemoryRooms
from app.classroom.redis_store import RedisRooms
from app.classroom.store import CODE_ALPHABET, CODE_LENGTH
from app.config import Settings
from app.main import create_app
from tests.redis_server import find_redis_server, redis_server

CALLS = 5000  # allow() calls timed per store
KEYS = 2000  # buckets they fall in: as many addresses and browsers
SETTLE_SECONDS = 0.5  # after the calls, for the memory windows' background expiry to run
BOUNDS = dict(max_rooms=200, max_students=500, max_streams=1000, idle_seconds=600.0)


class FixedWindow:
    """The baseline: a count per bucket per window, reset when the window ends (two windows' worth
    can pass across a boundary)."""

    def __init__(self) -> None:
        self.buckets: dict[str, tuple[float, int]] = {}

    async def allow(self, bucket: str, limit: int, window: float = 60.0) -> bool:
        now = time.monotonic()
        start, used = self.buckets.get(bucket, (now, 0))
        if now - start >= window:
            start, used = now, 0
        self.buckets[bucket] = (start, used + 1)
        return used < limit


async def fixed_window_redis(store: RedisRooms, bucket: str, limit: int, window: float = 60.0) -> bool:
    name = f"bench:fixed:{bucket}:{int(time.time() // window)}"
    async with store.redis.pipeline(transaction=True) as pipe:
        pipe.incr(name)
        pipe.expire(name, int(window) + 1)
        used, _ = await pipe.execute()
    return int(used) <= limit


async def per_call_us(allow, calls: int = CALLS, *, cpu: bool = False) -> float:  # noqa: ANN001
    """Time per call over KEYS buckets: wall time, or with ``cpu`` this process's CPU time, the
    windows' background expiry included (it runs while the loop is idle)."""
    clock = time.process_time if cpu else time.perf_counter
    began = clock()
    for i in range(calls):
        await allow(f"address-{i % KEYS}", 60)
        if i % 100 == 0:
            await asyncio.sleep(0)  # as between requests: background tasks get their turn
    if cpu:
        await asyncio.sleep(SETTLE_SECONDS)
    return (clock() - began) / calls * 1e6


async def window_costs() -> list[tuple[str, float, float]]:
    rows = []
    memory = MemoryRooms(**BOUNDS)
    fixed = FixedWindow()
    rows.append(("memory (CPU)", await per_call_us(fixed.allow, cpu=True), await per_call_us(memory.allow, cpu=True)))
    binary = find_redis_server()
    if binary is not None:
        with redis_server(binary) as server:
            store = RedisRooms(server.url(), **BOUNDS)
            try:
                calls = CALLS // 5
                base = await per_call_us(lambda b, n: fixed_window_redis(store, b, n), calls)
                rows.append(("redis (wall)", base, await per_call_us(store.allow, calls)))
            finally:
                await store.close()
    return rows


def shares() -> dict[str, object]:
    """One address against the default settings, through the routes (rooms in memory)."""
    from tests.web.test_class_trust import other_codes, preset_fields, start

    config = Settings()
    app = create_app(config)
    _, code, _ = start(app, ("198.51.100.7", 1))
    # A school's NAT: 30 students, each mistypes a code once, joins, reloads twice.
    refused = 0
    for wrong in other_codes(code, 30):
        student = TestClient(app, follow_redirects=False, client=("198.51.100.7", 2))
        answers = [student.get("/class", params={"code": wrong}).status_code,
                   *(student.get(f"/class/{code}").status_code for _ in range(3))]
        refused += answers.count(429)
    # One address without cookies: seats, guesses, rooms.
    attacker = TestClient(app, follow_redirects=False, client=("203.0.113.9", 1))
    seats = 0
    while True:
        attacker.cookies.clear()
        if attacker.get(f"/class/{code}").status_code != 200:
            break
        seats += 1
    guesses = 0
    for guess in other_codes(code, 500):
        attacker.cookies.clear()
        if attacker.get(f"/class/{guess}/workspace").status_code != 404:
            break
        guesses += 1
    rooms = 0
    while attacker.post("/class", data={**preset_fields(), "action": "start_class"}).status_code == 303:
        rooms += 1
    codes = len(CODE_ALPHABET) ** CODE_LENGTH
    days = codes / config.class_max_rooms / (config.class_failures_per_address * 60 * 24)
    return {"nat_429s": refused, "seats": seats, "guesses_per_minute": guesses, "rooms": rooms,
            "days_to_find_a_room": days, "seats_of_class": config.class_max_students,
            "rooms_of_server": config.class_max_rooms, "streams_per_address": config.class_streams_per_address,
            "streams_of_worker": config.class_max_streams}


def main() -> None:
    costs = asyncio.run(window_costs())
    print("Rate windows, per allow() call (µs): fixed-window counter (baseline) vs limits' moving window")
    for store, base, moving in costs:
        print(f"  {store:13} {base:8.1f} {moving:8.1f}   ×{moving / base:.2f}")
    s = shares()
    print("One address against the default settings:")
    print(f"  a class of 30 behind one NAT (a mistyped code each, two reloads): {s['nat_429s']} answers 429")
    print(f"  seats taken by cookieless joins: {s['seats']} of a class's {s['seats_of_class']}")
    print(f"  codes guessed before 429, per minute: {s['guesses_per_minute']} "
          f"(one of {s['rooms_of_server']} rooms found in {s['days_to_find_a_room']:.0f} days on average)")
    print(f"  classes started: {s['rooms']} of the server's {s['rooms_of_server']}")
    print(f"  event streams: {s['streams_per_address']} of a worker's {s['streams_of_worker']}")


if __name__ == "__main__":
    main()
