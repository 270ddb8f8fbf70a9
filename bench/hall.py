"""A lecture hall opens the real models at once: N students on one server (one uvicorn worker, as the container
runs), each a browser with JavaScript as the page's own script behaves.

- **one link**: the lecturer says "everyone, open this link": N students open the same URL (``/decoder?text=…``,
  ``/model?text=…`` and the embeds of both) spread over one second;
- **own sentences**: N students each open ``/decoder`` with a sentence of their own (5–20 tokens), spread over ten
  seconds, while one more student edits the toy page (its edit's p95 against the same edits alone, in this run).

A student's first screen is its first whole answer (the page, or the page that says where its question stands);
its answer is the page with the model's answer in it: a student shown the waiting page asks again as the page
does (``Attention-Wait: page`` every 0.3 s, the server holding each ask up to 1.5 s) and reloads when told.
/healthz is asked every 50 ms throughout. Students are coroutines of one aiohttp client on the same 2-core machine,
so the client competes with the server for the CPU.

    python -m bench.hall                       # 300 students; prints the tables
    python -m bench.hall --students 100 --docs docs/performance.md   # … and writes its block there
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import multiprocessing
import multiprocessing.synchronize
import os
import random
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import aiohttp
import httpx
import zstandard

from bench.cases import BROWSER, DEFAULT_CASE, HTMX, edit_requests
from bench.classroom import raise_open_files
from bench.load import uvicorn_server
from tests.redis_server import find_redis_server, redis_server

WAITING = b'class="waiting"'
SLOT_RE = re.compile(rb'<div id="([a-z-]+)" class="waiting"')
PAGE_SECONDS = 1.0  # the lecturer's link: every student opens it within a second
OWN_SECONDS = 10.0  # students typing their own sentence: within ten seconds
HEALTH_EVERY_S = 0.05
EDIT_EVERY_S = 0.2
TIMEOUT_S = 600.0  # a student still without an answer then counts as failed
RELOADS = 10  # … or still shown the waiting page after this many reloads
WORDS = ("the bank of river money teacher student class lesson attention model word sentence cat sat on mat "
         "Paris France capital Tower Eiffel is was in at by a big small green old new quick brown fox jumps over "
         "lazy dog school Harry Potter went to Hogwarts castle hill light dark morning evening train station "
         "book read wrote because it animal street cross wide tired").split()
MARKERS = ("<!-- bench.hall -->", "<!-- /bench.hall -->")


def body_of(response: aiohttp.ClientResponse, raw: bytes) -> bytes:
    """The body as the browser reads it (Chromium takes zstd, which aiohttp does not decode by itself)."""
    if response.headers.get("Content-Encoding") == "zstd":
        return zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    return raw


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


@dataclass
class Student:
    first: float = float("nan")  # seconds to the first whole screen
    answer: float = float("nan")  # seconds to the model's answer on screen
    waited: bool = False  # shown the waiting page first
    error: str = ""


@dataclass
class Figures:
    name: str
    students: list[Student]
    health: list[float]
    seconds: float  # from the first student's request to the last answer
    edits: tuple[float, float] | None = None  # the toy edit's p95 alone, and beside the hall

    def row(self) -> list[str]:
        done = [s for s in self.students if not s.error]
        firsts = [s.first for s in done]
        answers = [s.answer for s in done]
        within = sum(f <= 1.0 for f in firsts)
        edit = "" if self.edits is None else f"{self.edits[1] * 1000:.0f} ms ({self.edits[1] / self.edits[0]:.1f}×)"
        return [self.name, f"{len(done)}/{len(self.students)}", f"{within}", f"{percentile(answers, 0.5):.2f} s",
                f"{percentile(answers, 0.95):.2f} s", f"{max(answers, default=float('nan')):.2f} s",
                f"{sum(s.waited for s in done)}", f"{self.seconds:.1f} s",
                f"{percentile(self.health, 0.95) * 1000:.0f} / {max(self.health, default=0) * 1000:.0f} ms", edit]

    def errors(self) -> str:
        """What went wrong for the students who got no answer, counted by kind ("" when none)."""
        kinds = Counter(s.error for s in self.students if s.error)
        return "" if not kinds else "\n  failed: " + ", ".join(f"{n} × {kind}" for kind, n in kinds.most_common())


HEADER = ["what", "answered", "first screen ≤ 1 s", "answer p50", "answer p95", "answer max", "shown the queue",
          "all answered in", "/healthz p95 / max", "toy edit p95 (× alone)"]


async def student(session: aiohttp.ClientSession, url: str, started: float) -> Student:
    """One browser: the page, and while it says the question waits, the page's own asks until told to reload (a
    reload that meets the waiting page again, from another worker, waits again as the page would)."""
    s = Student()
    t0 = time.perf_counter()
    try:
        for _ in range(RELOADS):
            async with session.get(url, headers=BROWSER) as r:
                body = body_of(r, await r.read())
                if r.status != 200:
                    s.error = f"HTTP {r.status}"
                    return s
            if s.first != s.first:  # nan: this is the first screen
                s.first = time.perf_counter() - t0
            if WAITING not in body:
                s.answer = time.perf_counter() - t0
                return s
            s.waited = True
            slot = SLOT_RE.search(body).group(1).decode()  # type: ignore[union-attr]
            asked = {**HTMX, "HX-Target": slot, "HX-Trigger": slot, "Attention-Wait": "page"}
            while True:
                await asyncio.sleep(0.3)
                async with session.get(url, headers=asked) as r:
                    await r.read()
                    if r.headers.get("HX-Refresh") == "true":
                        break
                    if r.status != 200:
                        s.error = f"HTTP {r.status} while waiting"
                        return s
        s.error = f"still waiting after {RELOADS} reloads"
    except (aiohttp.ClientError, TimeoutError) as e:
        s.error = type(e).__name__
    return s


def health_probe(url: str, every: float, stop: multiprocessing.synchronize.Event, out: multiprocessing.Queue) -> None:
    """/healthz every ``every`` seconds from a process of its own (the students' client is busy: its own loop's
    lag would be counted as the server's), until ``stop``; the latencies go to ``out``."""
    with contextlib.suppress(OSError):  # its own wait for a core is not the server's: before the students' (root)
        os.nice(-10)
    times = []
    with httpx.Client(timeout=30) as client:
        while not stop.is_set():
            t0 = time.perf_counter()
            client.get(url)
            times.append(time.perf_counter() - t0)
            time.sleep(max(0.0, every - (time.perf_counter() - t0)))
    out.put(times)


async def probe(send: Callable[[], Awaitable[None]], every: float, stop: asyncio.Event) -> list[float]:
    times = []
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            await send()
        except aiohttp.ClientError:  # a kept-alive connection the server had closed: the next one is new
            continue
        times.append(time.perf_counter() - t0)
        await asyncio.sleep(max(0.0, every - (time.perf_counter() - t0)))
    return times


def own_sentence(rng: random.Random) -> str:
    words = rng.choices(WORDS, k=rng.randint(4, 15))  # 5–20 tokens with the words' pieces
    return " ".join(words).capitalize()


async def hall(base: str, name: str, urls: list[str], spread: float, *, edits: list[httpx.Request] | None = None,
               edit_alone: float | None = None) -> Figures:
    """``urls`` opened by one student each, their starts spread over ``spread`` seconds; /healthz meanwhile."""
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
    async with aiohttp.ClientSession(base, connector=connector, timeout=timeout, auto_decompress=False) as session:
        stop = asyncio.Event()
        # A fresh interpreter, not a fork: a forked probe inherits this client's heap (every earlier student's
        # answer) and its own collector's full pass over it held the probe for 120 ms, counted as the server's.
        spawn = multiprocessing.get_context("spawn")
        health_stop, health_out = spawn.Event(), spawn.Queue()
        prober = spawn.Process(target=health_probe, args=(f"{base}/healthz", HEALTH_EVERY_S, health_stop,
                                                                     health_out), daemon=True)
        prober.start()
        await asyncio.sleep(0.5)  # /healthz answered before the hall, and throughout
        edit_task = asyncio.create_task(probe(editor(session, edits), EDIT_EVERY_S, stop)) if edits else None
        started = time.perf_counter()

        async def one(i: int, url: str) -> Student:
            await asyncio.sleep(spread * i / len(urls))
            return await student(session, url, started)

        students = await asyncio.gather(*(one(i, u) for i, u in enumerate(urls)))
        seconds = time.perf_counter() - started
        stop.set()
        await asyncio.sleep(0.5)
        health_stop.set()
        health_times = await asyncio.to_thread(health_out.get, True, 30)
        prober.join(5)
        edit_times = await edit_task if edit_task else None
    figures = Figures(name, list(students), health_times, seconds)
    if edit_times and edit_alone:
        figures.edits = (edit_alone, percentile(edit_times, 0.95))
    return figures


def editor(session: aiohttp.ClientSession, edits: list[httpx.Request]) -> Callable[[], Awaitable[None]]:
    """A student editing the toy page: each call posts the next of ``edits`` (prebuilt, in turn)."""
    cycle = itertools.cycle(edits)

    async def edit() -> None:
        request = next(cycle)
        async with session.post(request.url.raw_path.decode(), data=request.content,
                                headers=dict(request.headers)) as r:
            await r.read()

    return edit


async def edits_alone(base: str, edits: list[httpx.Request], seconds: float = 5.0) -> float:
    async with aiohttp.ClientSession(base, auto_decompress=False) as session:
        stop = asyncio.Event()
        task = asyncio.create_task(probe(editor(session, edits), EDIT_EVERY_S, stop))
        await asyncio.sleep(seconds)
        stop.set()
        return percentile(await task, 0.95)


async def wait_ready(base: str, workers: int = 1) -> None:
    """Until the models are read and their heads measured: /decoder answered 200 ten times in a row (by every
    worker, as the kernel spreads the connections), and /model; then the workers' start settles."""
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        ready = 0
        for _ in range(1200):
            async with httpx.AsyncClient(base_url=base, timeout=30) as fresh:  # a new connection: any worker
                ready = ready + 1 if (await fresh.get("/decoder")).status_code == 200 else 0
            if ready >= 10 * workers:
                await client.get("/model")
                await asyncio.sleep(2.0 * (workers - 1))
                return
            await asyncio.sleep(0.1)
    raise RuntimeError("the language model was not read within two minutes")


async def measure(base: str, students: int, log: Callable[[str], None], workers: int = 1) -> list[Figures]:
    await wait_ready(base, workers)
    stamp = time.strftime("%H%M%S")
    results = []
    for path, text in (("/decoder", "The Eiffel Tower is in"), ("/model", "The bank of the river"),
                       ("/embed/decoder", "The capital of France is"), ("/embed/model", "The animal was tired")):
        url = f"{path}?{urlencode({'text': f'{text} {stamp}'})}"  # a question no earlier run left in the cache
        figures = await hall(base, f"{students} × one link: {path}", [url] * students, PAGE_SECONDS)
        log(" | ".join(figures.row()) + figures.errors())
        results.append(figures)
    async with httpx.AsyncClient(base_url=base) as client:
        edits = (await edit_requests(client, DEFAULT_CASE))["stage"]
    alone = await edits_alone(base, edits)
    rng = random.Random(0)
    urls = [f"/decoder?{urlencode({'text': own_sentence(rng) + f' {stamp}'})}" for _ in range(students)]
    figures = await hall(base, f"{students} × own sentence: /decoder", urls, OWN_SECONDS, edits=edits,
                         edit_alone=alone)
    log(" | ".join(figures.row()) + figures.errors())
    results.append(figures)
    return results


def markdown(results: list[Figures], students: int, workers: int, memory: tuple[float, float]) -> str:
    lines = [MARKERS[0], "", f"Measured by `python -m bench.hall --students {students}` on "
             f"{time.strftime('%Y-%m-%d')}: {workers} uvicorn worker{'s' if workers > 1 else ''}, {students} students "
             f"as coroutines of one client on the same 2-core machine; afterwards the server's resident memory "
             f"{memory[0]:.0f} MB, its child processes' {memory[1]:.0f} MB.", "",
             "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(f.row()) + " |" for f in results]
    return "\n".join([*lines, "", MARKERS[1]])


def write_docs(path: Path, block: str) -> None:
    text = path.read_text(encoding="utf-8")
    start, end = text.find(MARKERS[0]), text.find(MARKERS[1])
    if start < 0 or end < 0:
        raise SystemExit(f"{path} has no {MARKERS[0]} … {MARKERS[1]} block")
    path.write_text(text[:start] + block + text[end + len(MARKERS[1]):], encoding="utf-8")


def resident_mb(pid: int) -> tuple[float, float]:
    """The resident memory of a server's process, and of its children (the heavy lane's processes, or with several
    workers the workers), in MB (VmRSS, from /proc)."""
    children = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            children += [int(c) for c in (task / "children").read_text().split()]

    def rss(p: int) -> float:
        with contextlib.suppress(OSError, StopIteration):
            line = next(x for x in Path(f"/proc/{p}/status").read_text().splitlines() if x.startswith("VmRSS:"))
            return int(line.split()[1]) / 1024
        return 0.0

    return rss(pid), sum(rss(c) for c in children)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=300)
    parser.add_argument("--workers", type=int, default=1, help="uvicorn workers (2: with --redis, as the image)")
    parser.add_argument("--redis", action="store_true", help="a redis-server of its own: answers shared by workers")
    parser.add_argument("--docs", type=Path, help="write the block between the bench.hall markers of this file")
    args = parser.parse_args(argv)
    raise_open_files(4 * args.students + 256)
    env = {"ATTENTION_PRELOAD_LANGUAGE_MODEL": "true", "OPENBLAS_NUM_THREADS": "1",
           **{k: v for k, v in os.environ.items() if k != "ATTENTION_FIRST_SCREEN_SECONDS"}}
    print(" | ".join(HEADER))
    with contextlib.ExitStack() as stack:
        if args.redis:
            binary = find_redis_server()
            if binary is None:
                raise SystemExit("redis-server not found (make services)")
            env["REDIS_URL"] = stack.enter_context(redis_server(binary)).url()
        server = stack.enter_context(uvicorn_server(env, workers=args.workers))
        results = asyncio.run(measure(server.url, args.students, print, args.workers))
        memory = resident_mb(server.pid)
    print(f"resident memory of the server after the hall: {memory[0]:.0f} MB, its child processes {memory[1]:.0f} MB")
    if args.docs:
        write_docs(args.docs, markdown(results, args.students, args.workers, memory))


if __name__ == "__main__":
    main()

