"""Rooms in this process (``make run``, one worker): the store behind app.classroom.store's interface
without Redis. app.serve refuses more than one worker without Redis."""

from __future__ import annotations

import secrets
import time
from collections import Counter
from dataclasses import dataclass, field

from limits.aio.storage import MemoryStorage
from limits.aio.strategies import MovingWindowRateLimiter

from app.classroom.store import (
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
    guesses: dict[str, dict[str, str]] = field(default_factory=dict)  # ref → student → word

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
            raise RoomsFull(gettext("this server holds its {most} rooms").format(most=self.max_rooms))
        owner = address_hash(owner)
        if owner and sum(r.owner == owner for r in self.rooms.values()) >= self.rooms_per_address:
            raise ShareUsed(gettext("{n} classes started from this address are still open").format(
                n=self.rooms_per_address))
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
            room.guesses.clear()
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
            raise RoomsFull(gettext("this class has its {most} students").format(most=self.max_students))
        address = address_hash(address)
        if address and room.seats[address] >= self.seats_per_address:
            raise ShareUsed(ngettext("{n} student of this class joined from this address",
                                     "{n} students of this class joined from this address",
                                     self.seats_per_address).format(
                n=self.seats_per_address))
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

    async def guess(self, code: str, student: str, ref: str, word: str) -> int:
        room = self._room(code)
        if room is None:
            return 0
        by_student = room.guesses.setdefault(ref, {})
        by_student[student] = word
        room.touched = time.monotonic()
        self.fanout.deliver(code, Event("predictions", room.version, len(by_student)))
        return len(by_student)

    async def guesses(self, code: str, ref: str) -> list[str]:
        room = self._room(code)
        return [] if room is None else list(room.guesses.get(ref, {}).values())
