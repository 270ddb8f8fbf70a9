"""Lanes of work per worker, so that a few large requests cannot stall a class.

- The JSON API computes, encodes and compresses its answer in a worker thread, off the event loop. A
  request whose estimated work — the operations of its forward pass as app.maths.cost counts them — is over
  ``heavy_operations`` takes the heavy lane: at most ``heavy_requests`` of them run at once and the rest
  wait their turn, without a thread each. Lighter requests take anyio's default pool of threads and never
  queue behind a heavy one; the lightest (``INLINE_OPERATIONS``, the default preset's edit) are answered on
  the event loop, where a thread's hop would cost as much as the work.
- A heavy page (a large form, a large pinned state, training steps, every stage of a large scenario)
  is read, computed and rendered in a worker process (``in_process``): rendering is many small Python
  calls that hold the GIL, so a thread would still slow every other request of the worker; a separate
  process does not. At most ``heavy_processes`` run at once, ``heavy_waiting`` more wait, and the rest
  are told at once that the server is busy (``LaneBusy``); each has ``heavy_seconds``, after which its
  process is killed (``LaneTimeout``). The processes run at a lower priority (``HEAVY_NICENESS``), so
  that the kernel gives a core to the server's light requests first. Light pages, /healthz and the
  class's event streams stay on the event loop and never wait for a heavy one.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

from anyio import BrokenWorkerProcess, CapacityLimiter, fail_after, to_process, to_thread

from app.i18n import DEFAULT, language, speaking

T = TypeVar("T")

HEAVY_NICENESS = 10  # of the heavy lane's processes: below the server's own (0)
# A request of at most this many operations is answered on the event loop: the default preset's edit is
# 10 400 (0.2 ms of work, its thread's hop about as much again); 5 tokens, d_model 16, 8 heads is 16 700 (0.6 ms).
INLINE_OPERATIONS = 20_000


class LaneBusy(Exception):
    """Every place of the heavy lane is taken, and its queue is full: try again in a moment."""


class LaneTimeout(Exception):
    """A heavy request ran past its time, or its process failed, and was stopped."""


def niced(lang: str, work: Callable[..., T], *args: object) -> T:
    """``work(*args)`` in a heavy lane's process, at the lane's lower priority, in the request's language
    (app.i18n: a context variable does not cross to another process by itself)."""
    if hasattr(os, "nice") and os.nice(0) < HEAVY_NICENESS:
        os.nice(HEAVY_NICENESS - os.nice(0))
    with speaking(lang):
        return work(*args)


class Lanes:
    def __init__(self, heavy_requests: int, heavy_operations: int, heavy_processes: int = 1,
                 heavy_waiting: int = 32, heavy_seconds: float = 30.0) -> None:
        self.heavy = CapacityLimiter(heavy_requests)
        self.processes = CapacityLimiter(heavy_processes)
        self.heavy_operations = heavy_operations
        self.heavy_waiting = heavy_waiting
        self.heavy_seconds = heavy_seconds
        self.in_flight = 0  # heavy pages running or waiting in this worker

    def is_heavy(self, operations: int) -> bool:
        return operations > self.heavy_operations

    async def run(self, operations: int, work: Callable[[], T]) -> T:
        """``work()`` in a worker thread, in the heavy lane when ``operations`` is over the line; on the
        event loop when they are at most INLINE_OPERATIONS (and the work is not heavy)."""
        if operations <= INLINE_OPERATIONS and not self.is_heavy(operations):
            return work()
        return await to_thread.run_sync(work, limiter=self.heavy if self.is_heavy(operations) else None)

    async def in_process(self, work: Callable[..., T], *args: object) -> T:
        """``work(*args)`` in a worker process (a module-level function and picklable arguments)."""
        if self.in_flight >= self.processes.total_tokens + self.heavy_waiting:
            raise LaneBusy
        self.in_flight += 1
        try:
            with fail_after(self.heavy_seconds):
                return await to_process.run_sync(niced, language(), work, *args, cancellable=True,
                                                 limiter=self.processes)
        except (TimeoutError, BrokenWorkerProcess):
            raise LaneTimeout from None
        finally:
            self.in_flight -= 1

    async def start(self, warm: Callable[[], object]) -> None:
        """Start the heavy lane's worker process now rather than on the first heavy page: ``warm`` is a
        function of the module whose work it will do (unpickling it there imports that module)."""
        await to_process.run_sync(niced, DEFAULT, warm, limiter=self.processes)
