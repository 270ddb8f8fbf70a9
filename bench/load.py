"""Class load: N students, each editing a cell about every 2 s, against one uvicorn worker on loopback;
and a mixed load: the same students while a few clients send the largest valid API request in a loop.

The server is a real ``uvicorn app.main:app --workers 1`` subprocess on 127.0.0.1 (no access log);
the students are coroutines of one asyncio aiohttp client in this process, so on a 2-core machine
the client shares the CPU with the server, as a teacher's laptop would not, but the server keeps
one core to itself. Each student loads nothing but edits: the default preset's state form with one
X cell changed, posted to /stages with HX-Request: true, the stage in view being the softmax.
A heavy client posts one request body to /api/attention, reads the whole answer and sends it again
at once. A run lasts a fixed time, waits at most ``TIMEOUT_S`` for requests in flight, and stops the
server: it always ends by itself.

    python -m bench.load --students 200 --seconds 20
    python -m bench.load --students 200 --heavy 4 --seconds 20
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import urlencode

import aiohttp
import httpx
import numpy as np

from bench.cases import BROWSER, DEFAULT_CASE, HTMX, LARGEST_REQUEST, VALUE_EDIT, edited, page_state
from bench.results import INTERVAL_S, HeavyResult, LoadResult
from tests.conftest import join_grids
from tests.servers import LOOPBACK, free_port, running, tail, uvicorn_args

REPO_ROOT = Path(__file__).resolve().parent.parent
JITTER = 0.25  # … ± 25 %, drawn per edit
TIMEOUT_S = 10.0  # a request not answered by then counts as an error
HEAVY_TIMEOUT_S = 60.0  # the same for a heavy client's request, which may queue behind the others'
BODIES = 64  # distinct edits, prebuilt and cycled through


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process, from /proc (None where there is no /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


@dataclass(frozen=True)
class Server:
    url: str
    pid: int
    log: IO[bytes]  # uvicorn's warnings and tracebacks

    def log_tail(self, chars: int = 3000) -> str:
        return tail(self.log, chars)


@contextmanager
def uvicorn_server(env: Mapping[str, str] | None = None, workers: int = 1) -> Iterator[Server]:
    """One uvicorn worker (or ``workers``) on a free loopback port (``env``: its environment, else this one's).
    Stopped on exit, whatever happens."""
    port = free_port()
    args = uvicorn_args(port, "--workers", str(workers), "--no-access-log", "--log-level", "warning")
    with tempfile.TemporaryFile() as log, running(args, port=port, stderr=log, env=env, log=lambda: tail(log)) as proc:
        yield Server(f"http://{LOOPBACK}:{port}", proc.pid, log)


async def timed(send: Callable[[], Awaitable[int]], latencies: list[float], errors: Counter,
                timeout_s: float) -> None:
    """One request: its time when answered 200, else what went wrong, counted by kind."""
    t0 = time.perf_counter()
    try:
        status = await send()
        if status == 200:
            latencies.append(time.perf_counter() - t0)
        else:
            errors[f"HTTP {status}"] += 1
    except TimeoutError:
        errors[f"no answer in {timeout_s:g} s"] += 1
    except aiohttp.ClientError as e:
        errors[type(e).__name__] += 1


async def class_load(base_url: str, students: int, seconds: float, *, server_pid: int | None = None,
                     seed: int = 0, heavy: int = 0, heavy_body: bytes = b"") -> LoadResult:
    """``students`` editing for ``seconds`` against ``base_url`` (loopback only), and ``heavy`` clients
    posting ``heavy_body`` to /api/attention in a loop meanwhile."""
    if httpx.URL(base_url).host not in (LOOPBACK, "localhost"):
        raise ValueError("the class load only targets this machine's loopback")
    async with httpx.AsyncClient(base_url=base_url) as setup:
        base = await page_state(setup, DEFAULT_CASE)
    # Edits are encoded before the clock starts, and answers are not decompressed: the client
    # shares the machine with the server and should take as little of it as it can.
    bodies = [urlencode(join_grids(edited(base, k))).encode() for k in range(BODIES)]  # as the page's script posts
    headers = {**HTMX, **VALUE_EDIT, "Content-Type": "application/x-www-form-urlencoded"}  # a value edit
    latencies: list[float] = []
    lags: list[float] = []
    errors: Counter = Counter()
    sent = 0
    connector = aiohttp.TCPConnector(limit=students + heavy + 8)
    timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)  # the whole request, not each phase of it
    async with aiohttp.ClientSession(base_url, connector=connector, timeout=timeout, auto_decompress=False) as session:

        async def post(body: bytes) -> int:
            async with session.post("/stages", data=body, headers=headers) as response:
                await response.read()
                return response.status

        for k in range(10):  # warm-up: the first requests pay for imports and template compilation
            await post(bodies[k % BODIES])
        loop = asyncio.get_running_loop()
        start = loop.time() + 0.2
        end = start + seconds

        async def student(i: int) -> None:
            nonlocal sent
            rng = random.Random(seed * 100_003 + i)
            at = start + rng.uniform(0, INTERVAL_S)  # the class does not start typing in step
            k = i
            while at < end and loop.time() < end:
                await asyncio.sleep(max(0.0, at - loop.time()))
                lags.append(loop.time() - at)
                sent += 1
                await timed(lambda k=k: post(bodies[k % BODIES]), latencies, errors, TIMEOUT_S)
                k += 1
                at += INTERVAL_S * rng.uniform(1 - JITTER, 1 + JITTER)

        heavy_latencies: list[float] = []
        heavy_errors: Counter = Counter()
        heavy_wire = 0
        heavy_timeout = aiohttp.ClientTimeout(total=HEAVY_TIMEOUT_S)

        async def heavy_post() -> int:
            nonlocal heavy_wire
            async with session.post("/api/attention", data=heavy_body, timeout=heavy_timeout,
                                    headers={**BROWSER, "Content-Type": "application/json"}) as response:
                heavy_wire = len(await response.read())
                return response.status

        async def heavy_client() -> None:
            await asyncio.sleep(max(0.0, start - loop.time()))
            while loop.time() < end:
                await timed(heavy_post, heavy_latencies, heavy_errors, HEAVY_TIMEOUT_S)

        cpu_before = _cpu_seconds(server_pid) if server_pid else None
        client_before, wall_before = time.process_time(), time.perf_counter()
        await asyncio.gather(*(student(i) for i in range(students)),  # each ends by `end` + TIMEOUT_S
                             *(heavy_client() for _ in range(heavy)))  # … or + HEAVY_TIMEOUT_S
        wall = time.perf_counter() - wall_before
        client_cpu = (time.process_time() - client_before) / wall
        cpu_after = _cpu_seconds(server_pid) if server_pid else None

    ms = np.array(latencies) * 1000
    pct = np.percentile(ms, [50, 95, 99]) if len(ms) else [float("nan")] * 3
    heavy_ms = np.percentile(np.array(heavy_latencies) * 1000, [50, 95]) if heavy_latencies else [float("nan")] * 2
    return LoadResult(
        students=students, seconds=seconds, sent=sent, ok=len(latencies), errors=errors,
        p50_ms=float(pct[0]), p95_ms=float(pct[1]), p99_ms=float(pct[2]),
        max_ms=float(ms.max()) if len(ms) else float("nan"),
        lag_p95_ms=float(np.percentile(np.array(lags) * 1000, 95)) if lags else float("nan"),
        server_cpu=(cpu_after - cpu_before) / wall if cpu_before is not None and cpu_after is not None else None,
        client_cpu=client_cpu,
        load_average=os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        heavy=HeavyResult(heavy, len(heavy_latencies), heavy_errors, float(heavy_ms[0]), float(heavy_ms[1]),
                          heavy_wire) if heavy else None,
    )


def run_class_load(student_counts: tuple[int, ...], seconds: float, log: Callable[[str], None] = print, *,
                   mixed: tuple[int, int] | None = None, heavy_body: bytes = b"") -> list[LoadResult]:
    """One server; each class size in turn, smallest first; then, given ``mixed`` = (students, heavy
    clients), those students while the heavy clients post ``heavy_body`` in a loop."""
    plans = [(n, 0) for n in student_counts] + ([mixed] if mixed else [])
    results = []
    with uvicorn_server() as server:
        for n, heavy in plans:
            results.append(asyncio.run(class_load(server.url, n, seconds, server_pid=server.pid, heavy=heavy,
                                                  heavy_body=heavy_body)))
            r = results[-1]
            log(f"  {n} students{f' and {heavy} heavy clients' if heavy else ''}: {r.ok} answered, "
                f"{r.error_count} errors, p95 {r.p95_ms:.1f} ms"
                + (f"; heavy: {r.heavy.ok} answered, {r.heavy.error_count} errors" if r.heavy else ""))
            if any(kind.startswith("HTTP 5") for kind in r.errors + (r.heavy.errors if r.heavy else Counter())):
                log(f"  the server's log ends with:\n{server.log_tail()}")
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, nargs="+", default=[50, 200, 500])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--heavy", type=int, default=0,
                        help="then the last class size again, with this many clients sending the largest request")
    args = parser.parse_args(argv)
    from bench.report import load_table, mixed_table

    mixed = (args.students[-1], args.heavy) if args.heavy else None
    results = run_class_load(tuple(args.students), args.seconds, mixed=mixed, heavy_body=LARGEST_REQUEST.body())
    print(load_table([r for r in results if r.heavy is None]))
    if mixed:
        print(mixed_table(results))


if __name__ == "__main__":
    main()
