"""Two lanes of work per worker, so that a few large requests cannot stall a class.

The JSON API computes, encodes and compresses its answer in a worker thread, off the event loop. A
request whose estimated work — the operations of its forward pass as app.cost counts them — is over
``heavy_operations`` takes the heavy lane: at most ``heavy_requests`` of them run at once and the rest
wait their turn, without a thread each. Lighter requests take the light lane (anyio's default pool of
threads) and never queue behind a heavy one; /healthz and the page do not queue at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from anyio import CapacityLimiter, to_thread

T = TypeVar("T")


class Lanes:
    def __init__(self, heavy_requests: int, heavy_operations: int) -> None:
        self.heavy = CapacityLimiter(heavy_requests)
        self.heavy_operations = heavy_operations

    def is_heavy(self, operations: int) -> bool:
        return operations > self.heavy_operations

    async def run(self, operations: int, work: Callable[[], T]) -> T:
        """``work()`` in a worker thread: in the heavy lane when ``operations`` is over the line."""
        return await to_thread.run_sync(work, limiter=self.heavy if self.is_heavy(operations) else None)
