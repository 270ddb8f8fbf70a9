"""One service per real model: the only way the routes reach a model.

A model is served, not called (as a model server such as vLLM or Triton holds one loaded model behind a queue).
Each service, started by the app's lifespan, reads its model's files once per process, measures what its heads do
(its catalogue) once, and answers questions:

- **records**: a computed run of the model (every layer's output and every head's attention) is kept, by the
  question that made it, in a cache bounded in bytes (``model_record_bytes``); threads that ask for the same run
  at once share one computation;
- **answers**: a finished answer (a page rendered and compressed, an API document encoded) is made by one job per
  question in the service's fair queue (app.serving.flight), kept in a cache bounded in bytes
  (``model_answer_bytes``) and, with Redis, shared with the other servers (app.serving.shared).

Every key starts with the model's name, so two models never share an entry. A job's thread reports the layers it
has computed (``progress``), which the page that waits shows as a progress bar.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import json
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Generic, TypeVar

from anyio import to_thread

from app.config import Settings, settings
from app.serving.byte_cache import ByteCache, deep_size
from app.serving.flight import Flight, Job, QueueFull, wait_for
from app.serving.shared import SharedAnswers

R = TypeVar("R")
F = TypeVar("F")

LOCK_SECONDS = 10.0  # how long another server waits for the server computing a question before computing it itself
SHARED_POLL_SECONDS = 0.1

__all__ = ["Answer", "ModelService", "QueueFull", "current_progress", "wait_for"]


@dataclass(frozen=True)
class Answer:
    """A finished answer, as plain bytes: what a response sends, and what Redis keeps for the other servers."""

    status: int
    body: bytes
    media_type: str
    headers: tuple[tuple[str, str], ...] = ()

    def packed(self) -> bytes:
        head = json.dumps([self.status, self.media_type, list(self.headers)]).encode()
        return head + b"\n" + self.body

    @classmethod
    def unpack(cls, data: bytes) -> Answer:
        head, _, body = data.partition(b"\n")
        status, media_type, headers = json.loads(head)
        return cls(status, body, media_type, tuple((k, v) for k, v in headers))

    @property
    def size(self) -> int:
        return len(self.body) + 64 * (len(self.headers) + 1)


_job: ContextVar[Job | None] = ContextVar("model_job", default=None)


def current_progress() -> Callable[[int, int], None] | None:
    """The job this thread computes for, as a function that takes its layers done (None outside a job)."""
    job = _job.get()
    return None if job is None else job.step


class _Making:
    """A record being computed by one thread, that the others wait for."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.value: object = None
        self.error: BaseException | None = None


class ModelService(Generic[F]):
    """A real model's files, catalogue, computed records and finished answers, in this process."""

    def __init__(self, name: str, read: Callable[[], F], measure: Callable[[F], R], config: Settings = settings,
                 ) -> None:
        self.name = name
        self._read = read
        self._measure = measure
        self._measured: object | None = None
        self._measuring = threading.Lock()
        self._reading: threading.Thread | None = None
        self._lock = threading.Lock()
        self.records: ByteCache[object] = ByteCache(config.model_record_bytes)
        self._making: dict[Hashable, _Making] = {}
        self.answers: ByteCache[Answer] = ByteCache(config.model_answer_bytes)
        self.flight: Flight[Answer] = Flight(config.model_runners, config.model_queue)
        # The jobs' own threads, as many as run at once: the same few threads each time, so that the C library's
        # memory arenas are the same few (the default pool's forty threads each kept one, hundreds of MB).
        self.threads = ThreadPoolExecutor(config.model_runners, thread_name_prefix=f"model-{name.split('/')[-1]}")
        self.first_screen_seconds = config.first_screen_seconds
        self.shared: SharedAnswers | None = None
        self.computed = 0  # answers this service made itself (not from its cache, nor another server's)

    # The model and its catalogue -------------------------------------------------------------------------------

    def files(self) -> F:
        """The model's files, read once per process however many threads ask at once."""
        return self._read()

    def catalogue(self) -> object:
        """What the model's heads do, measured once per process (the first caller measures, the others wait)."""
        with self._measuring:
            if self._measured is None:
                self._measured = self._measure(self.files())
            return self._measured

    def ready(self) -> bool:
        """The model read and its heads measured; until then a page says the model is loading, and the first to
        ask starts reading it in a thread of its own (where the app's start did not)."""
        if self._measured is not None:
            return True
        with self._lock:
            if self._reading is None:
                self._reading = threading.Thread(target=self.catalogue, name=f"read-{self.name}", daemon=True)
                self._reading.start()
        return False

    async def start(self) -> None:
        """Read the model and measure its heads, in a thread (the app's lifespan calls it)."""
        await to_thread.run_sync(self.catalogue)

    def share(self, shared: SharedAnswers | None) -> None:
        """Share finished answers with the other servers through Redis (None: keep them in this process only)."""
        self.shared = shared

    # Records ---------------------------------------------------------------------------------------------------

    def record(self, key: tuple, compute: Callable[[Callable[[int, int], None] | None], R]) -> R:
        """The record of ``key`` (the model's name is put first): kept, being computed by another thread (wait for
        it), or computed here by ``compute(progress)`` and kept within the byte budget."""
        full = (self.name, *key)
        with self._lock:
            found = self.records.get(full)
            if found is not None:
                return found  # type: ignore[return-value]
            making = self._making.get(full)
            mine = making is None
            if making is None:
                making = self._making[full] = _Making()
        if not mine:
            making.event.wait()
            if making.error is not None:
                raise making.error
            return making.value  # type: ignore[return-value]
        try:
            value = compute(current_progress())
            making.value = value
            with self._lock:
                self.records.put(full, value, deep_size(value))
            return value
        except BaseException as error:
            making.error = error
            raise
        finally:
            with self._lock:
                self._making.pop(full, None)
            making.event.set()

    def kept_record(self, key: tuple) -> object | None:
        with self._lock:
            return self.records.get((self.name, *key))

    # Answers ---------------------------------------------------------------------------------------------------

    def kept(self, key: tuple) -> Answer | None:
        """A finished answer to ``key`` kept in this process."""
        return self.answers.get((self.name, *key))

    def _shared_key(self, full: tuple) -> str:
        return self.name + ":" + hashlib.sha256(repr(full).encode()).hexdigest()

    async def shared_answer(self, key: tuple) -> Answer | None:
        """A finished answer to ``key`` that another server made and Redis keeps (then kept here too): asked before
        a question joins the queue, so that an answer already made never waits its turn."""
        if self.shared is None:
            return None
        found = await self.shared.get(self._shared_key((self.name, *key)))
        if found is None:
            return None
        answer = Answer.unpack(found)
        self.answers.put((self.name, *key), answer, answer.size)
        return answer

    def ask(self, key: tuple, client: str, make: Callable[[], Answer]) -> Job[Answer]:
        """The job that answers ``key`` (made by ``make()`` in a worker thread, once however many ask), queued in
        ``client``'s turn; QueueFull when the queue is. Await ``wait_for(job, seconds)`` for the answer."""
        full = (self.name, *key)

        async def work(job: Job[Answer]) -> Answer:
            shared_key = self._shared_key(full)
            answer = await self._from_other_servers(shared_key)
            job.origin = "computed" if answer is None else "shared"
            if answer is None:
                def compute() -> Answer:
                    token = _job.set(job)
                    try:
                        return make()
                    finally:
                        _job.reset(token)

                try:
                    context = contextvars.copy_context()  # the request's language, for the template
                    answer = await asyncio.get_running_loop().run_in_executor(self.threads, context.run, compute)
                    self.computed += 1
                    if answer.status < 500 and self.shared is not None:  # kept for the others before they may look
                        await self.shared.put(shared_key, answer.packed())
                finally:
                    if self.shared is not None:
                        await self.shared.unlock(shared_key)
            if answer.status < 500:  # the same question gets the same answer: an error of its fields too
                self.answers.put(full, answer, answer.size)
            return answer

        return self.flight.submit(full, client, work)

    async def _from_other_servers(self, shared_key: str) -> Answer | None:
        """The answer another server made (kept in Redis, or made now while this one waits), or None when this
        server is to make it (it then holds the question's lock)."""
        if self.shared is None:
            return None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LOCK_SECONDS
        while True:
            found = await self.shared.get(shared_key)
            if found is not None:
                return Answer.unpack(found)
            if await self.shared.lock(shared_key, LOCK_SECONDS):
                return None
            if loop.time() > deadline:
                return None
            await asyncio.sleep(SHARED_POLL_SECONDS)

    def stats(self) -> dict[str, int]:
        """What the service holds, for tests and the benches."""
        return {"answers": len(self.answers), "answer_bytes": self.answers.used, "records": len(self.records),
                "record_bytes": self.records.used, "computed": self.computed, "started": self.flight.started,
                "waiting": self.flight.waiting, "running": self.flight.running}
