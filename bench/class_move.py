"""A class moved by its teacher to "Next word" and back: N students' pages follow by their event streams.

The teacher starts a class on a toy scenario (bench.classroom.start_class) and moves it to "Next word" (POST
/class/{code}/decoder with a text, as *Show the language model* does), then back to a scenario (POST
/class/{code}/teach), ``--moves`` times in all. Each student joins (GET /class/{code}) and holds the stream its page
holds (``?workspace=<kind>&v=<version>``, static/class.js). When the class moves, the event carries the class's whole
page for the new kind ("page" before it, app.web.class_stream): the student inflates it and has the page. With
``--fetch``, the students do what a page did before events carried a page (and what a browser without
DecompressionStream still does): GET /class/{code}/workspace, answered 204 with HX-Redirect to the class's page,
then GET that page. Either way the student then opens the stream of the new page's kind, as its script does.

Per move: from the teacher's request sent to each student having the new page's bytes (p50, p95, max over the
students: the event's payload, or the fetched page's body, read off the wire; each distinct one is then inflated and
checked off the clock, as 300 browsers inflate theirs each on its own device); the teacher's answer (the teacher's
own page of the new kind is then loaded, as the teacher's browser follows the answer's redirect); the server's CPU
time. Before the class joins, the teacher shows "Next word" once and comes back (the server's first page of each kind
is not the class's). A real ``uvicorn app.main:app --workers 1`` on 127.0.0.1, its rooms in the process;
the students are coroutines of one aiohttp client on the same machine.

    python -m bench.class_move --students 300 --moves 6
    python -m bench.class_move --students 300 --moves 6 --fetch
    python -m bench.class_move --students 300 --moves 6 --no-teacher-page
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import gzip
import math
import os
import re
import statistics
import time
import urllib.request
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import aiohttp
import httpx
import zstandard

from bench.cases import BROWSER, HTMX
from bench.classroom import CONNECT_TIMEOUT_S, JOINS_PER_S, STREAM_ENCODINGS, raise_open_files, start_class
from bench.load import _cpu_seconds, uvicorn_server
from bench.results import GOAL_STUDENTS
from tests.servers import LOOPBACK

MOVES = 6  # to "Next word", back, and so on
MOVE_TIMEOUT_S = 20.0  # a student without the new page by then has missed it
PAUSE_S = 1.0  # between a move's last student and the next move
LOAD_TIMEOUT_S = 180.0  # the language model's weights read by the server
# A new text at each move, as a teacher types one: its forward pass is not one the server already holds.
TEXTS = ("The capital of France is", "Once upon a time there was a", "The opposite of hot is",
         "Water boils at a temperature of", "The first month of the year is", "My favourite colour is")
HOW = {"carried": "carried by the event", "fetched": "fetched (workspace, redirect, page)"}
KIND_RE = re.compile(rb'data-events="[^"]*/events\?workspace=([a-z]*)"')
VERSION_RE = re.compile(rb'data-version="(\d+)"')


@dataclass
class MoveResult:
    students: int
    fetch: bool  # the students fetched the page even when an event carried it (the path before events carried it)
    teacher_page: bool  # the teacher's browser loaded its own page of the new kind as the students' pages moved
    to_page_ms: dict[str, list[list[float]]] = field(default_factory=dict)  # kind → per move, each student's time
    to_event_ms: dict[str, list[float]] = field(default_factory=dict)  # kind → each student's event, every move
    first_ms: dict[str, list[float]] = field(default_factory=dict)  # kind → per move, the first student's event
    teacher_ms: dict[str, list[float]] = field(default_factory=dict)  # kind → the teacher's answer, per move
    cpu_ms: list[float] = field(default_factory=list)  # per move: the server's CPU time
    client_cpu: float = float("nan")  # the students' client's CPU time over the moves' wall time (1.0: a core)
    load: float = float("nan")  # the machine's load average at the end
    missed: int = 0
    errors: Counter = field(default_factory=Counter)
    wire_kb: dict[str, float] = field(default_factory=dict)  # how and kind: the bytes a student received for the page

    def table(self) -> str:
        rows = ["| students | page | to | teacher's page | moves | teacher's answer p50 ms | to the event p50 / p95 ms "
                "| to the page p50 ms | p95 ms | max ms | missed | errors | server CPU per move ms |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for kind, moves in self.to_page_ms.items():
            every = [ms for move in moves for ms in move]
            got = {key.split()[0] for key in self.wire_kb if key.split()[1] == (kind or "toy")}
            how = " and ".join(HOW[g] for g in sorted(got)) or "?"
            events = self.to_event_ms.get(kind, [])
            rows.append(f"| {self.students} | {how} | {kind or 'a toy scenario'} | "
                        f"{'loaded meanwhile' if self.teacher_page else 'not loaded'} | {len(moves)} | "
                        f"{_pct(self.teacher_ms.get(kind, []), 50):.0f} | {_pct(events, 50):.0f} / "
                        f"{_pct(events, 95):.0f} | {_pct(every, 50):.0f} | {_pct(every, 95):.0f} | "
                        f"{max(every, default=float('nan')):.0f} | {self.missed} | {sum(self.errors.values())} | "
                        f"{_pct(self.cpu_ms, 50):.0f} |")
        for kind, moves in self.to_page_ms.items():
            rows.append(f"to {kind or 'a toy scenario'}, each move's first event → last student: " + ", ".join(
                f"{first:.0f} → {max(move, default=float('nan')):.0f} ms"
                for first, move in zip(self.first_ms.get(kind, []), moves, strict=False)))
        if self.errors:
            rows.append("errors: " + ", ".join(f"{k} ×{n}" for k, n in self.errors.most_common()))
        rows.append("on the wire per student: " + ", ".join(f"{k} {v:.0f} KB" for k, v in self.wire_kb.items()) +
                    f"; the students' client's CPU {self.client_cpu:.0%} of a core; load average {self.load:.1f}")
        return "\n".join(rows)


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if p != 50 else statistics.median(ordered)


def _decoded(body: bytes, encoding: str) -> bytes:
    if encoding == "zstd":
        return zstandard.ZstdDecompressor().decompressobj().decompress(body)
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding:
        raise ValueError(f"unexpected Content-Encoding {encoding}")
    return body


def wait_for_model(base_url: str) -> None:
    """The language model read: /decoder answers 200 instead of its 503 "loading" page (bounded)."""
    deadline = time.monotonic() + LOAD_TIMEOUT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{base_url}/decoder", timeout=30) as r:
            if r.status == 200:
                return
        time.sleep(1)
    raise RuntimeError(f"the language model was not read within {LOAD_TIMEOUT_S:g} s")


async def move_class(base_url: str, students: int, moves: int = MOVES, *, fetch: bool = False,
                     teacher_page: bool = True, server_pid: int | None = None, pause: float = PAUSE_S) -> MoveResult:
    """``students`` following a teacher who moves the class ``moves`` times between a toy scenario and "Next word"
    (``teacher_page``: the teacher's browser loads its own page of the new kind meanwhile)."""
    if httpx.URL(base_url).host not in (LOOPBACK, "localhost"):
        raise ValueError("the class bench only targets this machine's loopback")
    result = MoveResult(students, fetch, teacher_page)
    errors = result.errors
    has_page: dict[int, list[float]] = {}  # version → when each student had its page
    done: dict[int, asyncio.Event] = {}
    kind_of: dict[int, str] = {}  # version → the kind of page the class moved to
    arrived: defaultdict[int, list[float]] = defaultdict(list)  # version → when each student's event came
    listening = 0
    all_listening = asyncio.Event()

    async with httpx.AsyncClient(base_url=base_url, timeout=MOVE_TIMEOUT_S * 3) as teacher_client, \
            aiohttp.ClientSession(base_url, connector=aiohttp.TCPConnector(limit=0),
                                  cookie_jar=aiohttp.CookieJar(unsafe=True),
                                  timeout=aiohttp.ClientTimeout(total=None, sock_connect=10)) as streams:
        teacher = await start_class(teacher_client)
        page = f"/class/{teacher.code}"
        async with httpx.AsyncClient(base_url=base_url, timeout=MOVE_TIMEOUT_S * 3) as warmer:
            for warm in ({"text": "Hello"}, {"preset": "three-token"}):  # each kind's first page: not measured
                r = await teacher_client.post(f"{page}/{'decoder' if 'text' in warm else 'teach'}", data=warm,
                                              headers=BROWSER)
                shown = await warmer.get(page, headers=BROWSER)
                if r.status_code != 303 or shown.status_code != 200:
                    errors[f"warm-up HTTP {r.status_code}, {shown.status_code}"] += 1

        received: dict[int, set[tuple[str, bytes, str]]] = defaultdict(set)  # version → (how, bytes, encoding)

        def have(version: int, body: bytes, how: str, encoding: str = "") -> None:
            """The page's bytes are here: checked once the move is over (the same bytes are checked once)."""
            has_page.setdefault(version, []).append(time.perf_counter())
            received[version].add((how, body, encoding))
            if len(has_page[version]) == students and version in done:
                done[version].set()

        def check(version: int) -> None:
            for how, body, encoding in received.pop(version, ()):
                html = gzip.decompress(base64.b64decode(body)) if how == "carried" else _decoded(body, encoding)
                found = KIND_RE.search(html)
                if found is None or found[1].decode() != kind_of.get(version):
                    errors[f"a page ({how}) not of the class's kind"] += 1
                result.wire_kb[f"{how} {kind_of[version] or 'toy'}"] = len(body) / 1024

        async def fetched(session: aiohttp.ClientSession, kind: str, version: int) -> None:
            """As the page did: its workspace, a 204 sending it to the class's page, that page."""
            workspace = f"{page}/workspace" + (f"?page={kind}" if kind else "")
            async with session.get(workspace, headers=HTMX, timeout=aiohttp.ClientTimeout(MOVE_TIMEOUT_S)) as r:
                await r.read()
                where = r.headers.get("HX-Redirect")
                if r.status != 204 or where is None:
                    errors[f"workspace HTTP {r.status} without HX-Redirect"] += 1
                    return
            async with session.get(where, headers=BROWSER, auto_decompress=False,
                                   timeout=aiohttp.ClientTimeout(MOVE_TIMEOUT_S)) as r:
                body = await r.read()
                if r.status != 200:
                    errors[f"page HTTP {r.status}"] += 1
                    return
                have(version, body, "fetched", r.headers.get("Content-Encoding", ""))

        async def student(k: int) -> None:
            nonlocal listening
            await asyncio.sleep(k / JOINS_PER_S)
            jar = aiohttp.CookieJar(unsafe=True)  # the student's own id, as a browser keeps it
            async with aiohttp.ClientSession(base_url, connector=streams.connector, connector_owner=False,
                                             cookie_jar=jar) as own:
                async with own.get(page, headers=BROWSER, auto_decompress=False) as r:
                    body = _decoded(await r.read(), r.headers.get("Content-Encoding", ""))
                    if r.status != 200:
                        errors[f"join HTTP {r.status}"] += 1
                        return
                kind, shown = "", int(VERSION_RE.search(body)[1])
                first = True
                for _ in range(moves + 1):  # one stream per page the student's browser shows
                    url = f"{page}/events?workspace={kind}&v={shown}"
                    moved = None
                    async with own.get(url, headers=STREAM_ENCODINGS) as r:
                        if r.status != 200:
                            errors[f"events HTTP {r.status}"] += 1
                            return
                        event = b""
                        async for line in r.content:
                            line = line.rstrip(b"\r\n")
                            if line.startswith(b"event: "):
                                event = line[7:]
                            elif line.startswith(b"data: ") and event == b"state":
                                version, _, carried = line[6:].partition(b" ")
                                if first:
                                    first = False
                                    listening += 1
                                    if listening == students:
                                        all_listening.set()
                                if int(version) == shown:
                                    continue
                                moved = int(version)
                                arrived[moved].append(time.perf_counter())
                                break
                    if moved is None:
                        errors["a stream that ended"] += 1
                        return
                    mark, _, packed = carried.partition(b" ")
                    if mark == b"page" and packed and not fetch:
                        have(moved, packed, "carried")
                    else:
                        await fetched(own, kind, moved)
                    kind, shown = kind_of.get(moved, kind), moved

        tasks = [asyncio.create_task(student(k)) for k in range(students)]
        try:
            await asyncio.wait_for(all_listening.wait(), CONNECT_TIMEOUT_S)
        except TimeoutError:
            errors[f"not listening within {CONNECT_TIMEOUT_S:g} s"] += students - listening

        client_before, wall = time.process_time(), 0.0
        for k in range(moves):
            version = k + 4  # the class starts at 1, the warm-up's two moves; each move changes the kind of page
            kind = "decoder" if k % 2 == 0 else ""
            kind_of[version], done[version] = kind, asyncio.Event()
            cpu_before = _cpu_seconds(server_pid) if server_pid else None
            t0 = time.perf_counter()
            if kind:
                r = await teacher_client.post(f"{page}/decoder", data={"text": TEXTS[k // 2 % len(TEXTS)]},
                                              headers=BROWSER)
            else:
                r = await teacher_client.post(f"{page}/teach", data={"preset": "three-token"}, headers=BROWSER)
            result.teacher_ms.setdefault(kind, []).append((time.perf_counter() - t0) * 1000)
            if r.status_code != 303:
                errors[f"teacher HTTP {r.status_code}"] += 1
            # The teacher's browser follows to its page of the new kind meanwhile, as the students' pages move.
            teachers_page = asyncio.create_task(teacher_client.get(r.headers.get("location", page), headers=BROWSER)
                                                if teacher_page else asyncio.sleep(0, httpx.Response(200)))
            try:
                await asyncio.wait_for(done[version].wait(), MOVE_TIMEOUT_S)
            except TimeoutError:
                result.missed += students - len(has_page.get(version, []))
            wall += time.perf_counter() - t0
            if (await teachers_page).status_code != 200:
                errors["the teacher's page not 200"] += 1
            cpu_after = _cpu_seconds(server_pid) if server_pid else None
            if cpu_before is not None and cpu_after is not None:
                result.cpu_ms.append((cpu_after - cpu_before) * 1000)
            result.to_page_ms.setdefault(kind, []).append([(t - t0) * 1000 for t in has_page.get(version, [])])
            result.to_event_ms.setdefault(kind, []).extend((t - t0) * 1000 for t in arrived[version])
            result.first_ms.setdefault(kind, []).append((min(arrived[version], default=math.nan) - t0) * 1000)
            check(version)
            await asyncio.sleep(pause)
        result.client_cpu = (time.process_time() - client_before) / wall if wall else float("nan")
        result.load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return result


def run_moves(students: int, moves: int = MOVES, *, fetch: bool = False, teacher_page: bool = True) -> MoveResult:
    """A fresh server (its language model read first), the class, then the server stopped."""
    raise_open_files(4 * students + 256)
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env["ATTENTION_CLASS_MAX_STUDENTS"] = str(max(students, 500))
    env["ATTENTION_CLASS_MAX_STREAMS"] = str(max(2 * students + 10, 1000))  # a page's old stream may linger
    # Every student here comes from 127.0.0.1: one address's shares are the whole class's.
    env["ATTENTION_CLASS_SEATS_PER_ADDRESS"] = env["ATTENTION_CLASS_MAX_STUDENTS"]
    env["ATTENTION_CLASS_STREAMS_PER_ADDRESS"] = env["ATTENTION_CLASS_MAX_STREAMS"]
    with uvicorn_server(env) as server:
        wait_for_model(server.url)
        return asyncio.run(move_class(server.url, students, moves, fetch=fetch, teacher_page=teacher_page,
                                      server_pid=server.pid))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=GOAL_STUDENTS)
    parser.add_argument("--moves", type=int, default=MOVES)
    parser.add_argument("--fetch", action="store_true",
                        help="the students fetch the new page (workspace, redirect, page), as before")
    parser.add_argument("--no-teacher-page", action="store_true",
                        help="the teacher's browser does not load its own page of the new kind meanwhile")
    args = parser.parse_args(argv)
    print(run_moves(args.students, args.moves, fetch=args.fetch, teacher_page=not args.no_teacher_page).table())


if __name__ == "__main__":
    main()
