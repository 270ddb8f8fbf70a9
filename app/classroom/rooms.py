"""Class rooms: what a teacher shows, where every worker can read it, and the events that tell students.

A room holds the teacher's state (the page's state as a query string, the same as a permalink's),
a version that goes up with each change, the anonymous students' ids, and their predictions. No
names, nothing personal. Two stores keep rooms behind one interface:

- ``MemoryRooms``: in this process, for ``make run`` and one worker (the default);
- ``RedisRooms``: in Redis (``REDIS_URL``), so several workers and replicas serve one class. A
  change is published on the room's channel, and each worker passes it to its own open streams.

Codes are six characters from an alphabet without look-alikes (``KQ7-M4P`` read aloud); with
``class_max_rooms`` rooms alive, a guess names one with odds of about one in a million, and failed
guesses are limited per browser and per address. The teacher key is a 32-byte secret; the store keeps
its SHA-256. Addresses are kept only as a short SHA-256, to count one address's share of seats, rooms
and streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import secrets
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import orjson
from limits import RateLimitItemPerSecond
from limits.aio.storage import MemoryStorage, RedisStorage
from limits.aio.strategies import MovingWindowRateLimiter

CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L: easy to read aloud and to type
CODE_LENGTH = 6  # 31⁶ ≈ 8.9 × 10⁸ codes
REDIS_CONNECTIONS = 50  # per worker, its subscription included: Redis answers in well under a millisecond
SUBSCRIBE_SECONDS = 2.0  # how long a new stream waits for Redis to confirm its room's subscription


class RoomsFull(Exception):
    """A bound of the settings is reached (rooms per server, students per room, streams per worker)."""


class ShareUsed(RoomsFull):
    """One address has its share (of a class's seats, of the server's rooms, of a worker's streams)."""


class StoreUnavailable(Exception):
    """The store did not take a change in time (a frozen Redis): it was dropped, not applied late."""


def address_hash(address: str) -> str:
    """An address as the store keeps it: enough to count its share, nothing to read it back."""
    return hashlib.sha256(address.encode("utf-8", errors="replace")).hexdigest()[:16] if address else ""


@dataclass(frozen=True)
class Room:
    code: str
    state: str  # the teacher's page state, as a permalink's query string
    version: int  # goes up with every change the teacher makes
    fingerprint: str  # the scenario the predictions are about (a new scenario starts them afresh)
    students: int  # ids given out


@dataclass(frozen=True)
class Event:
    kind: str  # "state": the teacher changed something; "predictions": a student predicted; "joined"
    version: int
    count: int = 0  # with "predictions": how many predictions the room holds; with "joined", students

    def encode(self) -> bytes:
        return orjson.dumps({"kind": self.kind, "version": self.version, "count": self.count})

    @classmethod
    def decode(cls, data: bytes | str) -> Event:
        d = orjson.loads(data)
        return cls(str(d["kind"]), int(d["version"]), int(d.get("count", 0)))


def normal_code(text: str) -> str:
    """What a student typed, as a code: capitals, without spaces or dashes; "" when it cannot be one."""
    code = "".join(c for c in text.upper() if c not in " -").strip()
    return code if len(code) == CODE_LENGTH and all(c in CODE_ALPHABET for c in code) else ""


def spoken_code(code: str) -> str:
    """KQ7M4P → KQ7-M4P: two halves, easier to read aloud and to copy from a projector."""
    half = len(code) // 2
    return f"{code[:half]}-{code[half:]}"


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", errors="replace")).hexdigest()


def same_key(key: str, stored_hash: str) -> bool:
    return bool(key) and len(key) <= 128 and hmac.compare_digest(key_hash(key), stored_hash)


class Mailbox:
    """One stream's events not yet sent: the latest of each kind, so it holds three at most and a burst
    of predictions or joins can never push out the teacher's step. The step goes first."""

    def __init__(self, address: str = "") -> None:
        self.address = address
        self.latest: dict[str, Event] = {}
        self.ready = asyncio.Event()

    def put(self, event: Event) -> None:
        kept = self.latest.get(event.kind)
        if kept is None or event.version >= kept.version:  # an older state never replaces a newer one
            self.latest[event.kind] = event
        self.ready.set()

    def get_nowait(self) -> Event:
        if not self.latest:
            raise asyncio.QueueEmpty
        return self.latest.pop("state" if "state" in self.latest else next(iter(self.latest)))

    async def get(self) -> Event:
        while not self.latest:
            self.ready.clear()
            await self.ready.wait()
        return self.get_nowait()

    def empty(self) -> bool:
        return not self.latest

    def qsize(self) -> int:
        return len(self.latest)


class Fanout:
    """This worker's open event streams, by room, each with its mailbox; at most ``max_streams`` in all
    and ``per_address`` from one address."""

    def __init__(self, max_streams: int, per_address: int | None = None) -> None:
        self.max_streams = max_streams
        self.per_address = per_address or max_streams
        self.queues: dict[str, set[Mailbox]] = {}
        self.by_address: Counter[str] = Counter()
        self.open = 0

    def add(self, code: str, address: str = "") -> Mailbox:
        if self.open >= self.max_streams:
            raise RoomsFull(f"this worker has its {self.max_streams} event streams open")
        if address and self.by_address[address] >= self.per_address:
            raise ShareUsed(f"this address has {self.per_address} event streams open on this worker")
        box = Mailbox(address)
        self.queues.setdefault(code, set()).add(box)
        self.open += 1
        if address:
            self.by_address[address] += 1
        return box

    def remove(self, code: str, box: Mailbox) -> bool:
        """Forget a stream; True when it was the room's last one here."""
        queues = self.queues.get(code)
        if queues is None or box not in queues:
            return False
        queues.discard(box)
        self.open -= 1
        if box.address:
            self.by_address[box.address] -= 1
            if self.by_address[box.address] <= 0:
                del self.by_address[box.address]
        if not queues:
            del self.queues[code]
            return True
        return False

    def deliver(self, code: str, event: Event) -> None:
        for box in self.queues.get(code, ()):
            box.put(event)


class Rooms(ABC):
    """The interface both stores implement. Every method is a coroutine but ``listen``, an async
    context manager yielding the mailbox of the room's events for one stream. ``errors``: what the
    store raises when it cannot be reached (the app answers them with 503)."""

    errors: tuple[type[Exception], ...] = (StoreUnavailable,)

    def __init__(self, *, max_rooms: int, max_students: int, max_streams: int, idle_seconds: float,
                 seats_per_address: int | None = None, rooms_per_address: int | None = None,
                 streams_per_address: int | None = None) -> None:
        self.max_rooms = max_rooms
        self.max_students = max_students
        self.idle_seconds = idle_seconds
        self.seats_per_address = seats_per_address or max_students
        self.rooms_per_address = rooms_per_address or max_rooms
        self.fanout = Fanout(max_streams, streams_per_address)
        self._limits: dict[tuple[int, int], RateLimitItemPerSecond] = {}

    def _limit(self, limit: int, window: float) -> RateLimitItemPerSecond:
        item = self._limits.get((limit, int(window)))
        if item is None:
            item = self._limits[limit, int(window)] = RateLimitItemPerSecond(limit, max(1, int(window)))
        return item

    @abstractmethod
    async def create(self, state: str, fingerprint: str, owner: str = "") -> tuple[str, str]:
        """A new room showing ``state``: its code and the teacher's key. RoomsFull at the bound,
        ShareUsed when ``owner`` (the teacher's address) has its share of rooms alive."""

    @abstractmethod
    async def get(self, code: str) -> Room | None:
        """The room of ``code``, or None when there is none (never was, or expired)."""

    @abstractmethod
    async def is_teacher(self, code: str, key: str) -> bool:
        """Whether ``key`` is the teacher key of the room of ``code``."""

    @abstractmethod
    async def teach(self, code: str, key: str, state: str, fingerprint: str, deadline: float = 0.0) -> int | None:
        """The teacher shows ``state``: the new version, or None for a wrong key or a gone room.
        A new fingerprint (another scenario) clears the predictions. Past ``deadline`` (a time.time(),
        0 for none) the change is not made: StoreUnavailable."""

    @abstractmethod
    async def join(self, code: str, address: str = "") -> str | None:
        """A new anonymous student id, or None when the room is gone. RoomsFull at the bound,
        ShareUsed when ``address`` has its share of the class's seats."""

    @abstractmethod
    async def is_student(self, code: str, student: str) -> bool:
        """Whether ``student`` is an id this room gave out."""

    @abstractmethod
    async def predict(self, code: str, student: str, ref: str, value: float) -> int:
        """Keep a student's prediction for a cell (a new one replaces theirs); the room's count after."""

    @abstractmethod
    async def predictions(self, code: str) -> dict[str, list[float]]:
        """Every prediction of the room, by cell ref."""

    @abstractmethod
    async def mine(self, code: str, student: str) -> dict[str, float]:
        """One student's predictions, by cell ref."""

    async def allow(self, bucket: str, limit: int, window: float = 60.0, peek: bool = False) -> bool:
        """Count one use of ``bucket``; False once it had ``limit`` uses in the last ``window``
        seconds (a moving window, the ``limits`` library's). With ``peek``, only whether one more
        would be allowed, counting nothing."""
        item = self._limit(limit, window)
        if peek:
            return await self.limiter.test(item, bucket)
        return await self.limiter.hit(item, bucket)

    async def ready(self) -> str:
        """"" when the store answers, else what is wrong (for /readyz)."""
        return ""

    @contextlib.asynccontextmanager
    async def listen(self, code: str, address: str = "") -> AsyncIterator[Mailbox]:
        queue = self.fanout.add(code, address)
        try:
            await self._subscribed(code)
            yield queue
        finally:
            if self.fanout.remove(code, queue):
                await self._unsubscribed(code)

    async def _subscribed(self, code: str) -> None:
        """A store with channels (RedisRooms) subscribes to the room's here; in the process, nothing to do."""
        return None

    async def _unsubscribed(self, code: str) -> None:
        """And lets the channel go with the room's last stream on this worker."""
        return None

    async def close(self) -> None:
        """Connections to let go when the app stops (RedisRooms); in the process, none."""
        return None


# --- in this process ----------------------------------------------------------------------------


@dataclass
class _MemoryRoom:
    key_hash: str
    state: str
    fingerprint: str
    owner: str = ""  # the teacher's address's hash
    seats: Counter[str] = field(default_factory=Counter)  # seats given out by address hash
    version: int = 1
    touched: float = field(default_factory=time.monotonic)
    students: set[str] = field(default_factory=set)
    predictions: dict[str, dict[str, float]] = field(default_factory=dict)  # ref → student → value

    def count(self) -> int:
        return sum(len(p) for p in self.predictions.values())


class MemoryRooms(Rooms):
    """Rooms in this process: one worker only (app.serve refuses more without Redis)."""

    def __init__(self, **bounds: float) -> None:
        super().__init__(**bounds)  # type: ignore[arg-type]
        self.rooms: dict[str, _MemoryRoom] = {}
        self.limiter = MovingWindowRateLimiter(MemoryStorage())

    def _room(self, code: str) -> _MemoryRoom | None:
        room = self.rooms.get(code)
        if room is not None and time.monotonic() - room.touched > self.idle_seconds:
            del self.rooms[code]
            return None
        return room

    def _expire(self) -> None:
        now = time.monotonic()
        for code in [c for c, r in self.rooms.items() if now - r.touched > self.idle_seconds]:
            del self.rooms[code]

    async def create(self, state: str, fingerprint: str, owner: str = "") -> tuple[str, str]:
        self._expire()
        if len(self.rooms) >= self.max_rooms:
            raise RoomsFull(f"this server holds its {self.max_rooms} rooms")
        owner = address_hash(owner)
        if owner and sum(r.owner == owner for r in self.rooms.values()) >= self.rooms_per_address:
            raise ShareUsed(f"{self.rooms_per_address} classes started from this address are still open")
        code = new_code()
        while code in self.rooms:
            code = new_code()
        key = secrets.token_urlsafe(32)
        self.rooms[code] = _MemoryRoom(key_hash(key), state, fingerprint, owner)
        return code, key

    async def get(self, code: str) -> Room | None:
        room = self._room(code)
        if room is None:
            return None
        return Room(code, room.state, room.version, room.fingerprint, len(room.students))

    async def is_teacher(self, code: str, key: str) -> bool:
        room = self._room(code)
        return room is not None and same_key(key, room.key_hash)

    async def teach(self, code: str, key: str, state: str, fingerprint: str, deadline: float = 0.0) -> int | None:
        room = self._room(code)
        if room is None or not same_key(key, room.key_hash):
            return None
        if deadline and time.time() > deadline:
            raise StoreUnavailable("the change came too late")
        room.touched = time.monotonic()
        if fingerprint != room.fingerprint:
            room.fingerprint = fingerprint
            room.predictions.clear()
        if state != room.state:
            room.state = state
            room.version += 1
            self.fanout.deliver(code, Event("state", room.version))
        return room.version

    async def join(self, code: str, address: str = "") -> str | None:
        room = self._room(code)
        if room is None:
            return None
        if len(room.students) >= self.max_students:
            raise RoomsFull(f"this class has its {self.max_students} students")
        address = address_hash(address)
        if address and room.seats[address] >= self.seats_per_address:
            raise ShareUsed(f"{self.seats_per_address} students of this class joined from this address")
        student = secrets.token_urlsafe(16)
        room.students.add(student)
        if address:
            room.seats[address] += 1
        room.touched = time.monotonic()
        self.fanout.deliver(code, Event("joined", room.version, len(room.students)))
        return student

    async def is_student(self, code: str, student: str) -> bool:
        room = self._room(code)
        return room is not None and student in room.students

    async def predict(self, code: str, student: str, ref: str, value: float) -> int:
        room = self._room(code)
        if room is None:
            return 0
        room.predictions.setdefault(ref, {})[student] = value
        room.touched = time.monotonic()
        count = room.count()
        self.fanout.deliver(code, Event("predictions", room.version, count))
        return count

    async def predictions(self, code: str) -> dict[str, list[float]]:
        room = self._room(code)
        if room is None:
            return {}
        return {ref: list(by_student.values()) for ref, by_student in room.predictions.items()}

    async def mine(self, code: str, student: str) -> dict[str, float]:
        room = self._room(code)
        if room is None:
            return {}
        return {ref: by_student[student] for ref, by_student in room.predictions.items() if student in by_student}


# --- in Redis -----------------------------------------------------------------------------------

PREFIX = "attention:room:"
OWNER_PREFIX = "attention:owner:"  # by teacher's address hash: the codes of the rooms started from it
REDIS_RETRIES = 4  # tries again after a lost connection, waiting 0.05 s, 0.1 s, 0.2 s, 0.4 s

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
  redis.call('DEL', KEYS[3])
end
local version, changed = tonumber(room[3]), 0
if ARGV[2] ~= room[2] then
  redis.call('HSET', KEYS[1], 'state', ARGV[2])
  version, changed = redis.call('HINCRBY', KEYS[1], 'version', 1), 1
end
for i = 1, 4 do redis.call('EXPIRE', KEYS[i], ARGV[5]) end
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
    hash; ``…:predictions`` a hash of "<ref> <student>" → value; ``attention:owner:<address hash>`` the
    codes started from an address. Changes are published on ``…:events``; this worker subscribes to the
    rooms it has streams open for, and passes each event to them. Every command gives up after
    ``timeout`` seconds (connecting too), and waiting for a pooled connection after twice that.
    """

    def __init__(self, url: str, *, timeout: float = 1.0, **bounds: float) -> None:
        super().__init__(**bounds)  # type: ignore[arg-type]
        import redis.asyncio as redis  # only with REDIS_URL set

        # A blocking pool: a burst of requests (a whole class joining at once) waits for a connection,
        # where the default pool would fail every command beyond its hundredth at once.
        # A command on a connection Redis has closed (a restart of Redis) is tried again on a new one;
        # a command that timed out is not (Redis is stuck: the request answers 503 at once).
        from redis.asyncio.retry import Retry
        from redis.backoff import ExponentialBackoff
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

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
                raise RoomsFull(f"this server holds its {self.max_rooms} rooms")
        owned = OWNER_PREFIX + address_hash(owner) if owner else ""
        if owned and int(await self._owned(keys=[owned], args=[PREFIX])) >= self.rooms_per_address:
            raise ShareUsed(f"{self.rooms_per_address} classes started from this address are still open")
        from redis.exceptions import WatchError

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
            keys=[room, students, predictions, room + ":seats"],
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
            raise RoomsFull(f"this class has its {self.max_students} students")
        if int(count) == -3:
            raise ShareUsed(f"{self.seats_per_address} students of this class joined from this address")
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

    async def _subscribed(self, code: str) -> None:
        """Subscribe to the room's channel once per worker, and wait until Redis confirms it: a stream
        reads the room after this, so no change falls between that read and its first event."""
        channel = self._keys(code)[3]
        async with self.lock:
            confirmed = self.channels.get(channel)
            if confirmed is None:
                confirmed = self.channels[channel] = asyncio.get_running_loop().create_future()
                await self.pubsub.subscribe(channel)
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
            await self.pubsub.unsubscribe(channel)

    async def _read(self) -> None:
        """Pass every event published on a room's channel to this worker's streams of that room."""
        while True:
            try:
                message = await self.pubsub.get_message(timeout=1.0)
            except asyncio.CancelledError:
                raise
            except Exception:  # Redis went away: retry until it is back (the client subscribes again)
                await asyncio.sleep(0.5)
                continue
            if message is None:
                if not self.fanout.queues:
                    await asyncio.sleep(0.05)
                continue
            channel = message.get("channel", "")
            if message.get("type") == "subscribe":
                confirmed = self.channels.get(channel)
                if confirmed is not None and not confirmed.done():
                    confirmed.set_result(None)
            elif message.get("type") == "message" and channel.startswith(PREFIX):
                code = channel.removeprefix(PREFIX).removesuffix(":events")
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    self.fanout.deliver(code, Event.decode(message["data"]))

    async def close(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.reader
        with contextlib.suppress(Exception):
            await self.pubsub.aclose()
        await self.redis.aclose()


def make_rooms(config) -> Rooms:  # noqa: ANN001 - app.config.Settings, imported late to keep this module free of it
    bounds = dict(max_rooms=config.class_max_rooms, max_students=config.class_max_students,
                  max_streams=config.class_max_streams, idle_seconds=config.class_idle_minutes * 60.0,
                  seats_per_address=config.class_seats_per_address, rooms_per_address=config.class_rooms_per_address,
                  streams_per_address=config.class_streams_per_address)
    if config.redis_url:
        return RedisRooms(config.redis_url, timeout=config.redis_timeout_seconds, **bounds)
    return MemoryRooms(**bounds)
