"""Class rooms: what a teacher shows, where every worker can read it, and the events that tell students.

A room holds the teacher's state (the page's state as a query string, the same as a permalink's),
a version that goes up with each change, the anonymous students' ids, their predictions (numbers, by
cell) and their guesses (words, such as the language model's next word of a text). No names, nothing
personal. Two stores keep rooms behind one interface:

- ``MemoryRooms`` (app.classroom.memory): in this process, for ``make run`` and one worker (the default);
- ``RedisRooms`` (app.classroom.redis_store): in Redis (``REDIS_URL``), so several workers and replicas
  serve one class. A change is published on the room's channel, and each worker passes it to its own
  open streams.

Codes are eight characters from an alphabet without look-alikes (``KQ7M-4PXR`` read aloud); with
``class_max_rooms`` rooms alive, a guess names one with odds of about one in four billion, and failed
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
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass

import orjson
from limits import RateLimitItemPerSecond

CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L: easy to read aloud and to type
CODE_LENGTH = 8  # 31⁸ ≈ 8.5 × 10¹¹ codes: enough that an address's share of guesses finds no class


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
    kind: str  # "state": the teacher changed something; "predictions": a student predicted; "joined"; "unreachable":
    # this worker lost the store (a restart of Redis), told to its streams at once
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
    """KQ7M4PXR → KQ7M-4PXR: two halves, easier to read aloud and to copy from a projector."""
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
    of predictions or joins can never push out the teacher's step. The step goes first. Its stream notes what it
    sent: the last version, and whether it last said the class cannot be reached (a catch-up after the store's
    return, app.classroom.redis_store, reads both)."""

    def __init__(self, address: str = "") -> None:
        self.address = address
        self.latest: dict[str, Event] = {}
        self.ready = asyncio.Event()
        self.sent = 0  # the last version the stream sent
        self.warned = False  # the stream said "unreachable" and has sent no state since

    def put(self, event: Event) -> None:
        if event.kind == "state":
            self.latest.pop("unreachable", None)  # a step came through: the store is back
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

    def deliver_all(self, event: Event) -> None:
        """To every stream of this worker, whatever its room (the store lost, or back)."""
        for boxes in self.queues.values():
            for box in boxes:
                box.put(event)

    def catch_up(self, code: str, version: int) -> int:
        """The room's ``version`` read after its subscription came back: a "state" event to each of its streams that
        has not sent it (a step published while this worker was not subscribed) or that said the class cannot be
        reached; how many were told."""
        told = 0
        for box in self.queues.get(code, ()):
            if box.sent < version or box.warned:
                box.put(Event("state", version))
                told += 1
        return told


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

    @abstractmethod
    async def guess(self, code: str, student: str, ref: str, word: str) -> int:
        """Keep a student's guess in words about ``ref`` (the next word of one text: a new guess replaces
        theirs); how many guesses ``ref`` holds after. A new fingerprint clears them with the predictions."""

    @abstractmethod
    async def guesses(self, code: str, ref: str) -> list[str]:
        """Every guess of the room about ``ref``."""

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
