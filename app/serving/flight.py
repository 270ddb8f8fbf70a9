"""One computation per question, in a fair queue that says where each question stands.

A question (a model, a text, the options that change the computation, and how the answer is written) is a key.
The first request that asks it starts a job; every request that asks the same while the job waits or runs waits
for that one job (a single flight, as Go's ``singleflight`` and CDNs' request coalescing do). Jobs wait in one
queue per browser and take turns, one browser after another (round robin), so one student's many questions do
not starve the others'. At most ``runners`` jobs run at once; the queue holds at most ``most_waiting`` and
refuses the next (``QueueFull``). A job says how far it is (``progress``: the layers computed) and how many
questions are ahead of it (``ahead``), for the page that waits.

The jobs' work is a coroutine function: a model service runs its NumPy in a worker thread from there.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


class QueueFull(Exception):
    """Every place in the queue is taken: try again in a moment."""


@dataclass(eq=False)
class Job(Generic[T]):
    """One question being answered: its waiters share ``done``."""

    key: Hashable
    client: str
    work: Callable[[Job[T]], Awaitable[T]]
    done: asyncio.Future[T]
    queued_at: float = field(default_factory=time.monotonic)
    started: bool = False
    progress: int = 0  # of ``steps`` (a model's layers), written by the job's thread as it goes
    steps: int = 0
    waiters: int = 1
    origin: str = ""  # where its answer came from: "computed" here, or "shared" by another server

    def step(self, done: int, of: int) -> None:
        """The job's work reports ``done`` of ``of`` steps (called from any thread: two ints, no lock needed)."""
        self.steps, self.progress = of, done


class Flight(Generic[T]):
    """Jobs by key, waiting in per-client queues taken in turn, ``runners`` at a time."""

    def __init__(self, runners: int = 1, most_waiting: int = 1000) -> None:
        self.runners = runners
        self.most_waiting = most_waiting
        self.jobs: dict[Hashable, Job[T]] = {}  # waiting or running
        self.queues: OrderedDict[str, deque[Job[T]]] = OrderedDict()  # the clients in their turn's order
        self.running = 0
        self.started = 0  # jobs started since the flight was made: what tests and benches count
        self._loop: asyncio.AbstractEventLoop | None = None  # the event loop the jobs' futures belong to

    @property
    def waiting(self) -> int:
        return sum(len(q) for q in self.queues.values())

    def submit(self, key: Hashable, client: str, work: Callable[[Job[T]], Awaitable[T]]) -> Job[T]:
        """The job that answers ``key``: the one in flight, or a new one queued behind ``client``'s own."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop (an app started again in this process): the old one's jobs
            self._loop = loop       # can never finish, and must not hold a runner's place or a key
            self.jobs.clear()
            self.queues.clear()
            self.running = 0
        job = self.jobs.get(key)
        if job is not None:
            job.waiters += 1
            return job
        if self.waiting >= self.most_waiting:
            raise QueueFull
        job = Job(key, client, work, loop.create_future())
        job.done.add_done_callback(_consume)  # a job nobody waits for any more does not log its error
        self.jobs[key] = job
        self.queues.setdefault(client, deque()).append(job)
        self._pump()
        return job

    def ahead(self, job: Job[T]) -> int:
        """The questions that will be answered before ``job``: those running, and those its turn comes after.
        In turn, each client before ``job``'s gets one more turn than it has jobs ahead in its own queue."""
        if job.started or job.done.done():
            return 0
        clients = list(self.queues)
        mine = self.queues.get(job.client)
        if mine is None or job not in mine:
            return 0
        rank, at = mine.index(job), clients.index(job.client)
        before = sum(min(len(self.queues[c]), rank + 1) for c in clients[:at])
        after = sum(min(len(self.queues[c]), rank) for c in clients[at + 1:])
        return self.running + rank + before + after

    def _next(self) -> Job[T] | None:
        while self.queues:
            client, queue = next(iter(self.queues.items()))
            job = queue.popleft()
            del self.queues[client]
            if queue:  # its next question waits for the other clients' turns
                self.queues[client] = queue
            return job
        return None

    def _pump(self) -> None:
        while self.running < self.runners:
            job = self._next()
            if job is None:
                return
            self.running += 1
            self.started += 1
            job.started = True
            task = asyncio.get_running_loop().create_task(job.work(job))
            task.add_done_callback(lambda task, job=job: self._finished(job, task))

    def _finished(self, job: Job[T], task: asyncio.Task[T]) -> None:
        """The job's task ended (answered, failed, or cancelled before or while it ran): its waiters are told, and
        its runner's place goes to the next in turn. A done callback, so a task cancelled before it ever started
        (an event loop closing) still gives its place back."""
        self.running -= 1
        if self.jobs.get(job.key) is job:
            del self.jobs[job.key]
        if not job.done.done():
            if task.cancelled():
                job.done.cancel()
            elif task.exception() is not None:
                job.done.set_exception(task.exception())
            else:
                job.done.set_result(task.result())
        if not task.get_loop().is_closed():
            self._pump()


def _consume(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()


async def wait_for(job: Job[T], seconds: float | None) -> T | None:
    """The job's answer, or None when it is not done within ``seconds`` (None: as long as it takes). A waiter that
    goes away does not cancel the job: the others still get it, and it is kept for the next to ask."""
    if seconds is not None and seconds <= 0 and not job.done.done():
        return None
    try:
        return await asyncio.wait_for(asyncio.shield(job.done), seconds)
    except TimeoutError:
        return None
