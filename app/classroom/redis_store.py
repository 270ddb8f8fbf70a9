"""Rooms in Redis (``REDIS_URL``): several workers and replicas serve one class. A change is published on
the room's channel, and each worker passes it to its own open streams."""

from __future__ import annotations

import asyncio
import contextlib
import secrets

import redis.asyncio as redis
from limits.aio.storage import RedisStorage
from limits.aio.strategies import MovingWindowRateLimiter
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.exceptions import WatchError

from app.classroom.store import (
    CODE_LENGTH,
    Event,
    Room,
    Rooms,
    RoomsFull,
    ShareUsed,
    StoreUnavailable,
    address_hash,
    key_hash,
    new_code,
    same_key,
)
from app.i18n import gettext, ngettext

REDIS_CONNECTIONS = 50  # per worker, its subscription included: Redis answers in well under a millisecond
SUBSCRIBE_SECONDS = 2.0  # how long a new stream waits for Redis to confirm its room's subscription
PREFIX = "attention:room:"
OWNER_PREFIX = "attention:owner:"  # by teacher's address hash: the codes of the rooms started from it
REDIS_RETRIES = 4  # tries again after a lost connection, waiting 0.05 s, 0.1 s, 0.2 s, 0.4 s
RECONNECT_SECONDS = 0.5  # the subscription lost: how long the reader waits before it tries again

# A join checks the room, the class's size and the address's seats and takes a seat in one step:
# concurrent joins on any number of workers never pass a bound.
JOIN_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, 0} end
if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[2]) then return {-2, 0} end
if ARGV[3] ~= '' and tonumber(redis.call('HGET', KEYS[3], ARGV[3]) or '0') >= tonumber(ARGV[4]) then
  return {-3, 0}
end
redis.call('SADD', KEYS[2], ARGV[1])
if ARGV[3] ~= '' then redis.call('HINCRBY', KEYS[3], ARGV[3], 1) end
for i = 1, 3 do redis.call('EXPIRE', KEYS[i], ARGV[5]) end
return {redis.call('SCARD', KEYS[2]), tonumber(redis.call('HGET', KEYS[1], 'version'))}
"""

# The teacher's change, with the key checked and a deadline on Redis's own clock: a change that reaches
# Redis late (queued while Redis was frozen, long after the teacher gave up) is dropped, never applied.
TEACH_SCRIPT = """
local room = redis.call('HMGET', KEYS[1], 'key', 'state', 'version', 'fingerprint')
if not room[1] or room[1] ~= ARGV[1] then return {0, 0} end
if tonumber(ARGV[4]) > 0 then
  local now = redis.call('TIME')
  if tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) > tonumber(ARGV[4]) then return {-1, 0} end
end
if ARGV[3] ~= room[4] then
  redis.call('HSET', KEYS[1], 'fingerprint', ARGV[3])
  redis.call('DEL', KEYS[3], KEYS[5])
end
local version, changed = tonumber(room[3]), 0
if ARGV[2] ~= room[2] then
  redis.call('HSET', KEYS[1], 'state', ARGV[2])
  version, changed = redis.call('HINCRBY', KEYS[1], 'version', 1), 1
end
for i = 1, 5 do redis.call('EXPIRE', KEYS[i], ARGV[5]) end
return {version, changed}
"""

# The rooms started from one address that are still alive (the gone ones forgotten on the way).
OWNED_SCRIPT = """
local alive = 0
for _, code in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('EXISTS', ARGV[1] .. code) == 1 then alive = alive + 1 else redis.call('SREM', KEYS[1], code) end
end
return alive
"""


class RedisRooms(Rooms):
    """Rooms in Redis, so any worker of any replica serves any student of a class.

    Keys (each expires after the idle time, renewed by every change): ``attention:room:<code>`` a hash
    of key, state, version and fingerprint; ``…:students`` a set of ids; ``…:seats`` seats by address
    hash; ``…:predictions`` a hash of "<ref> <student>" → value; ``…:guesses`` a hash of "<ref> <student>" →
    word; ``attention:owner:<address hash>`` the codes started from an address. Changes are published on
    ``…:events``; this worker subscribes to the rooms it has streams open for, and passes each event to
    them. Every command gives up after ``timeout`` seconds (connecting too), and waiting for a pooled
    connection after twice that.
    """

    def __init__(self, url: str, *, timeout: float = 1.0, **bounds: float) -> None:
        super().__init__(**bounds)  # type: ignore[arg-type]
        # A blocking pool: a burst of requests (a whole class joining at once) waits for a connection,
        # where the default pool would fail every command beyond its hundredth at once.
        # A command on a connection Redis has closed (a restart of Redis) is tried again on a new one;
        # a command that timed out is not (Redis is stuck: the request answers 503 at once).
        self.errors = (RedisConnectionError, RedisTimeoutError, StoreUnavailable)
        retry = Retry(ExponentialBackoff(cap=1.0, base=0.05), REDIS_RETRIES, supported_errors=(RedisConnectionError,))
        # A burst waits up to twice the command timeout for a connection: with each command bounded by
        # ``timeout``, a request still answers (or gets 503) within about three timeouts.
        pool = redis.BlockingConnectionPool.from_url(url, max_connections=REDIS_CONNECTIONS, timeout=2 * timeout,
                                                     socket_timeout=timeout, socket_connect_timeout=timeout,
                                                     decode_responses=True, health_check_interval=30, retry=retry,
                                                     retry_on_error=[RedisConnectionError])
        self.redis = redis.Redis.from_pool(pool)
        self.pubsub = self.redis.pubsub()
        self.reader: asyncio.Task[None] | None = None
        self.catching: set[asyncio.Task[None]] = set()  # the rooms' catch-ups after a lost subscription
        self.lock = asyncio.Lock()
        self.channels: dict[str, asyncio.Future[None]] = {}  # subscribed here → Redis confirmed it
        self._join = self.redis.register_script(JOIN_SCRIPT)
        self._teach = self.redis.register_script(TEACH_SCRIPT)
        self._owned = self.redis.register_script(OWNED_SCRIPT)
        # Rate windows in the same Redis, through the same pool (so with the same timeouts).
        self.limiter = MovingWindowRateLimiter(RedisStorage("async+redis://", implementation="redispy",
                                                            connection_pool=pool, key_prefix="attention:limit"))

    @staticmethod
    def _keys(code: str) -> tuple[str, str, str, str]:
        base = PREFIX + code
        return base, base + ":students", base + ":predictions", base + ":events"

    def _ttl(self) -> int:
        return max(1, int(self.idle_seconds))

    async def ready(self) -> str:
        try:
            await self.redis.ping()
        except self.errors as e:
            return f"Redis does not answer ({type(e).__name__})"
        return ""

    async def create(self, state: str, fingerprint: str, owner: str = "") -> tuple[str, str]:
        # Rooms alive: a counter of creations that each expires with its room would drift, so count the keys.
        alive = 0
        async for _ in self.redis.scan_iter(match=PREFIX + "?" * CODE_LENGTH, count=1000):
            alive += 1
            if alive >= self.max_rooms:
                raise RoomsFull(gettext("this server holds its {most} rooms").format(most=self.max_rooms))
        owned = OWNER_PREFIX + address_hash(owner) if owner else ""
        if owned and int(await self._owned(keys=[owned], args=[PREFIX])) >= self.rooms_per_address:
            raise ShareUsed(gettext("{n} classes started from this address are still open").format(
                n=self.rooms_per_address))
        key = secrets.token_urlsafe(32)
        fields = {"key": key_hash(key), "state": state, "version": 1, "fingerprint": fingerprint}
        async with self.redis.pipeline(transaction=True) as pipe:
            while True:  # a code no room has, written whole with its expiry in one transaction
                code = new_code()
                room = self._keys(code)[0]
                await pipe.watch(room)
                if await pipe.exists(room):
                    await pipe.unwatch()
                    continue
                pipe.multi()
                pipe.hset(room, mapping=fields)
                pipe.expire(room, self._ttl())
                if owned:
                    pipe.sadd(owned, code)
                    pipe.expire(owned, self._ttl())
                try:
                    await pipe.execute()
                except WatchError:  # another worker took this code meanwhile
                    continue
                return code, key

    async def _hash(self, code: str) -> dict[str, str] | None:
        if not code:
            return None
        data = await self.redis.hgetall(self._keys(code)[0])
        return data if data.get("key") and "state" in data else None

    async def get(self, code: str) -> Room | None:
        if not code:
            return None
        room, students = self._keys(code)[:2]
        async with self.redis.pipeline(transaction=False) as pipe:  # one round trip: every request reads the room
            pipe.hgetall(room)
            pipe.scard(students)
            data, count = await pipe.execute()
        if not (data.get("key") and "state" in data):
            return None
        return Room(code, data["state"], int(data["version"]), data["fingerprint"], int(count))

    async def is_teacher(self, code: str, key: str) -> bool:
        stored = await self.redis.hget(self._keys(code)[0], "key") if code else None
        return bool(stored) and same_key(key, stored)

    async def teach(self, code: str, key: str, state: str, fingerprint: str, deadline: float = 0.0) -> int | None:
        room, students, predictions, channel = self._keys(code)
        if not code or not key or len(key) > 128:
            return None
        version, changed = await self._teach(
            keys=[room, students, predictions, room + ":seats", room + ":guesses"],
            args=[key_hash(key), state, fingerprint, int(deadline * 1000), self._ttl()])
        if int(version) == -1:
            raise StoreUnavailable("the change reached Redis after its deadline: dropped")
        if int(version) == 0:
            return None
        if int(changed):
            await self.redis.publish(channel, Event("state", int(version)).encode())
        return int(version)

    async def join(self, code: str, address: str = "") -> str | None:
        room, students, _, channel = self._keys(code)
        student = secrets.token_urlsafe(16)
        count, version = await self._join(keys=[room, students, room + ":seats"],
                                          args=[student, self.max_students, address_hash(address),
                                                self.seats_per_address, self._ttl()])
        if int(count) == -1:
            return None
        if int(count) == -2:
            raise RoomsFull(gettext("this class has its {most} students").format(most=self.max_students))
        if int(count) == -3:
            raise ShareUsed(ngettext("{n} student of this class joined from this address",
                                     "{n} students of this class joined from this address",
                                     self.seats_per_address).format(
                n=self.seats_per_address))
        await self.redis.publish(channel, Event("joined", int(version or 0), int(count)).encode())
        return student

    async def is_student(self, code: str, student: str) -> bool:
        return bool(code and student) and bool(await self.redis.sismember(self._keys(code)[1], student))

    async def predict(self, code: str, student: str, ref: str, value: float) -> int:
        room, students, predictions, channel = self._keys(code)
        if not await self.redis.exists(room):  # a gone room keeps nothing, as in memory
            return 0
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(predictions, f"{ref} {student}", repr(float(value)))
            pipe.hlen(predictions)
            pipe.hget(room, "version")
            for name in (room, students, predictions):
                pipe.expire(name, self._ttl())
            _, count, version, *_ = await pipe.execute()
        await self.redis.publish(channel, Event("predictions", int(version or 0), int(count)).encode())
        return int(count)

    async def predictions(self, code: str) -> dict[str, list[float]]:
        found: dict[str, list[float]] = {}
        for name, value in (await self.redis.hgetall(self._keys(code)[2])).items():
            ref = name.partition(" ")[0]
            found.setdefault(ref, []).append(float(value))
        return found

    async def mine(self, code: str, student: str) -> dict[str, float]:
        suffix = f" {student}"
        return {name.removesuffix(suffix): float(value)
                for name, value in (await self.redis.hgetall(self._keys(code)[2])).items() if name.endswith(suffix)}

    async def guess(self, code: str, student: str, ref: str, word: str) -> int:
        room, students, _, channel = self._keys(code)
        guesses = room + ":guesses"
        if not await self.redis.exists(room):  # a gone room keeps nothing, as in memory
            return 0
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(guesses, f"{ref} {student}", word)
            pipe.hkeys(guesses)
            pipe.hget(room, "version")
            for name in (room, students, guesses):
                pipe.expire(name, self._ttl())
            _, names, version, *_ = await pipe.execute()
        count = sum(name.startswith(f"{ref} ") for name in names)
        await self.redis.publish(channel, Event("predictions", int(version or 0), count).encode())
        return count

    async def guesses(self, code: str, ref: str) -> list[str]:
        prefix = f"{ref} "
        found = await self.redis.hgetall(self._keys(code)[0] + ":guesses")
        return [word for name, word in found.items() if name.startswith(prefix)]

    async def _subscribed(self, code: str) -> None:
        """Subscribe to the room's channel once per worker, and wait until Redis confirms it: a stream
        reads the room after this, so no change falls between that read and its first event."""
        channel = self._keys(code)[3]
        async with self.lock:
            confirmed = self.channels.get(channel)
            if confirmed is None:
                confirmed = self.channels[channel] = asyncio.get_running_loop().create_future()
                try:
                    await self.pubsub.subscribe(channel)
                except BaseException:  # Redis down: the next stream of the room subscribes afresh
                    self.channels.pop(channel, None)
                    raise
                if self.reader is None or self.reader.done():
                    self.reader = asyncio.create_task(self._read())
        with contextlib.suppress(TimeoutError):  # Redis slow: the stream goes on, as it would have
            await asyncio.wait_for(asyncio.shield(confirmed), SUBSCRIBE_SECONDS)

    async def _unsubscribed(self, code: str) -> None:
        channel = self._keys(code)[3]
        async with self.lock:
            if code in self.fanout.queues:  # a stream of the room opened meanwhile
                return
            self.channels.pop(channel, None)
            with contextlib.suppress(*self.errors):  # Redis down: the subscription is dropped at its return
                await self.pubsub.unsubscribe(channel)

    async def _read(self) -> None:
        """Pass every event published on a room's channel to this worker's streams of that room.

        Redis lost (restarted, down): every open stream is told "unreachable" at once and stays open. The client
        connects again and subscribes again to the channels it had; once it reads again, the rooms with open
        streams here and no subscription are subscribed, and the channels of none let go. Each subscription that
        Redis confirms again brings its room's streams up to date (``_catch_up``): a step published before it
        (the teacher's first step after Redis's return) reached no stream of this worker."""
        lost = False
        while True:
            try:
                message = await self.pubsub.get_message(timeout=1.0)
            except asyncio.CancelledError:
                raise
            except Exception:  # Redis went away: retry until it is back (the client subscribes again)
                if not lost:
                    self.fanout.deliver_all(Event("unreachable", 0))
                lost = True
                await asyncio.sleep(RECONNECT_SECONDS)
                continue
            if lost:
                lost = not await self._resubscribe()
            if message is None:
                if not self.fanout.queues:
                    await asyncio.sleep(0.05)
                continue
            channel = message.get("channel", "")
            if message.get("type") == "subscribe":
                confirmed = self.channels.get(channel)
                if confirmed is not None and not confirmed.done():
                    confirmed.set_result(None)
                elif confirmed is not None:  # subscribed again after a lost connection
                    self._catch_up(channel.removeprefix(PREFIX).removesuffix(":events"))
            elif message.get("type") == "message" and channel.startswith(PREFIX):
                code = channel.removeprefix(PREFIX).removesuffix(":events")
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    self.fanout.deliver(code, Event.decode(message["data"]))

    async def _resubscribe(self) -> bool:
        """After a lost connection: every room with streams here subscribed (a confirmation catches each up),
        every channel without one let go. False when Redis is gone again."""
        async with self.lock:
            wanted = {self._keys(code)[3] for code in self.fanout.queues}
            held = {name.decode() if isinstance(name, bytes) else name for name in self.pubsub.channels}
            for channel in wanted - held:
                confirmed = self.channels.get(channel)
                if confirmed is None or not confirmed.done():  # its confirmation is then a catch-up's
                    done = asyncio.get_running_loop().create_future()
                    done.set_result(None)
                    if confirmed is not None:
                        confirmed.set_result(None)  # a stream waiting for it goes on
                    self.channels[channel] = done
            try:
                if wanted - held:
                    await self.pubsub.subscribe(*sorted(wanted - held))
                if held - wanted:
                    await self.pubsub.unsubscribe(*sorted(held - wanted))
            except self.errors:
                return False
            for channel in held - wanted:
                self.channels.pop(channel, None)
        return True

    def _catch_up(self, code: str) -> None:
        """Read the room's version, once its subscription is confirmed again, and tell each of its streams that
        has not sent it (app.classroom.store.Fanout.catch_up)."""

        async def read() -> None:
            with contextlib.suppress(*self.errors, ValueError, TypeError):
                version = await self.redis.hget(self._keys(code)[0], "version")
                if version is not None:
                    self.fanout.catch_up(code, int(version))

        task = asyncio.create_task(read())
        self.catching.add(task)
        task.add_done_callback(self.catching.discard)

    async def close(self) -> None:
        for task in list(self.catching):
            task.cancel()
        if self.reader is not None:
            self.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.reader
        with contextlib.suppress(Exception):
            await self.pubsub.aclose()
        await self.redis.aclose()
