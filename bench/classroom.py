"""A class following its teacher: N students' event streams on one uvicorn worker, or on two sharing Redis.

The teacher starts a class as on the page (the page's state form posted to /class with *Teach a
live class*, the teacher link followed, its key moved into a cookie) and steps through the stages
with the page's own request: the teacher page's form with ``goto=<stage>``, posted to /stages with
``HX-Request: true``. Each student joins (GET /class/{code}) and holds a server-sent event stream to
/class/{code}/events as a following student's page does (static/class.js): with ``?workspace=`` and the
version its page shows, so each "state" event carries the room's workspace, gzip-compressed once for the
class (app.web.class_stream). The student inflates it and checks that it shows the teacher's new stage; an
event without one is followed by a GET of /class/{code}/workspace, as the page does.

Per step: from the teacher's request sent to the last student's event received, and to the last
student's workspace read; the teacher's own answer; the servers' CPU time. The servers are real
``uvicorn app.main:app --workers 1`` on 127.0.0.1, with the rooms in the process (the default) or,
with ``--redis``, in a redis-server of their own; ``--servers 2`` runs two of them sharing that Redis,
the students joining each in turn (as behind a balancer). The students are coroutines of one aiohttp
client on the same machine, so on 2 cores the client competes with the servers for the CPU.

    python -m bench.classroom --students 300 --steps 20
    python -m bench.classroom --students 300 --steps 20 --redis
    python -m bench.classroom --students 300 --steps 20 --redis --servers 2
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import gzip
import os
import re
import resource
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
import httpx
import zstandard

from app.lesson.presets import DEFAULT_PRESET
from bench.cases import ATTENTION_STAGES, BROWSER, HTMX
from bench.load import _cpu_seconds, uvicorn_server
from bench.results import GOAL_STUDENTS, PAUSE_S, STEP_TIMEOUT_S, FollowResult
from tests.conftest import form_fields, join_grids
from tests.redis_server import find_redis_server, redis_server
from tests.servers import LOOPBACK

STEPS = 20  # the teacher's steps
CONNECT_TIMEOUT_S = 60.0  # the whole class joined and listening by then
JOINS_PER_S = 100.0  # a hall scanning the QR code: a student joins every 10 ms, not all in the same instant
STREAM_ENCODINGS = {"Accept-Encoding": "gzip, deflate, br, zstd"}  # as Chromium asks
VERSION_RE = re.compile(rb'data-version="(\d+)"')


@dataclass(frozen=True)
class Teacher:
    code: str
    key: str
    form: dict[str, str]  # the teacher page's state form as its script posts it (class_code in it; the key is a cookie)


async def start_class(client: httpx.AsyncClient, preset: str = DEFAULT_PRESET) -> Teacher:
    """Start a class as a teacher does: the preset's page, *Teach a live class* (its form posted to
    /class with action=start_class), the teacher link (303: the key moves into a cookie), the
    teacher's page. ``client`` keeps the teacher's cookie."""
    r = await client.get("/", params={"preset": preset}, headers=BROWSER)
    if r.status_code != 200:
        raise RuntimeError(f"the page answered {r.status_code}")
    r = await client.post("/class", data={**form_fields(r.text), "action": "start_class"}, headers=BROWSER)
    if r.status_code != 303:
        raise RuntimeError(f"POST /class answered {r.status_code}: {r.text[:300]}")
    link = r.headers["location"]
    r = await client.get(link, headers=BROWSER)  # the teacher link, with its key
    if r.status_code != 303 or "key=" in r.headers["location"]:
        raise RuntimeError(f"the teacher link answered {r.status_code}")
    r = await client.get(r.headers["location"], headers=BROWSER)
    if r.status_code != 200:
        raise RuntimeError(f"the teacher's page answered {r.status_code}")
    form = join_grids(form_fields(r.text))  # as the page's script posts it: each grid one field
    return Teacher(form["class_code"], link.rsplit("key=", 1)[1], form)


def raise_open_files(needed: int) -> None:
    """Each student holds two connections, here and in the server (which inherits this limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def _shows(body: bytes, encoding: str, stage: str) -> bool:
    """Whether a workspace as received (still compressed: the client decodes it only to check) shows ``stage``."""
    if encoding == "zstd":
        body = zstandard.ZstdDecompressor().decompressobj().decompress(body)
    elif encoding:
        raise ValueError(f"unexpected Content-Encoding {encoding}")
    return f'name="stage" value="{stage}"'.encode() in body


def _carried_stage(packed: bytes) -> str:
    """The stage a carried workspace shows (the page inflates it as this does)."""
    html = gzip.decompress(base64.b64decode(packed))
    found = re.search(rb'name="stage" value="([a-z_]+)"', html)
    return found[1].decode() if found else "?"


async def follow_class(base_urls: list[str], students: int, steps: int = STEPS, *, server_pids: list[int] = (),
                       store: str = "memory", pause: float = PAUSE_S) -> FollowResult:
    """``students`` following a teacher who steps ``steps`` times, against ``base_urls`` (loopback only; student
    k joins the k-th modulo their number)."""
    for url in base_urls:
        if httpx.URL(url).host not in (LOOPBACK, "localhost"):
            raise ValueError("the class bench only targets this machine's loopback")

    errors: Counter = Counter()
    received: dict[int, list[float]] = {}  # version → when each student's event came
    fetched: dict[int, list[float]] = {}  # version → when each student's workspace was read (carried or fetched)
    done: dict[int, asyncio.Event] = {}
    stage_of: dict[int, str] = {}
    listening = 0
    all_listening = asyncio.Event()
    wire = 0
    carried = 0

    async with httpx.AsyncClient(base_url=base_urls[0], timeout=STEP_TIMEOUT_S) as teacher_client, \
            contextlib.AsyncExitStack() as stack:
        teacher = await start_class(teacher_client)
        page = f"/class/{teacher.code}"
        pages, streams = [], []
        for url in base_urls:
            pages.append(await stack.enter_async_context(aiohttp.ClientSession(
                url, connector=aiohttp.TCPConnector(limit=0), cookie_jar=aiohttp.DummyCookieJar(),
                auto_decompress=False, timeout=aiohttp.ClientTimeout(total=STEP_TIMEOUT_S))))
            streams.append(await stack.enter_async_context(aiohttp.ClientSession(
                url, connector=aiohttp.TCPConnector(limit=0), cookie_jar=aiohttp.DummyCookieJar(),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10))))

        def read(version: int) -> None:
            fetched.setdefault(version, []).append(time.perf_counter())
            if len(fetched[version]) == students and version in done:
                done[version].set()

        async def workspace(pages: aiohttp.ClientSession, version: int) -> None:
            nonlocal wire
            try:
                async with pages.get(page + "/workspace", headers=HTMX) as r:
                    body = await r.read()
                    if r.status != 200:
                        errors[f"workspace HTTP {r.status}"] += 1
                        return
                    wire = len(body)
                    if not _shows(body, r.headers.get("Content-Encoding", ""), stage_of.get(version, "?")):
                        errors["a workspace without the teacher's stage"] += 1
                        return
            except (TimeoutError, aiohttp.ClientError) as e:
                errors[f"workspace {type(e).__name__}"] += 1
                return
            read(version)

        async def student(k: int) -> None:
            nonlocal listening, wire, carried
            own_pages, own_streams = pages[k % len(pages)], streams[k % len(streams)]
            await asyncio.sleep(k / JOINS_PER_S)
            async with own_pages.get(page, headers=BROWSER) as r:  # joins: a new anonymous id (no cookie kept)
                body = await r.read()
                if r.status != 200:
                    errors[f"join HTTP {r.status}"] += 1
                    return
                if r.headers.get("Content-Encoding") == "zstd":
                    body = zstandard.ZstdDecompressor().decompressobj().decompress(body)
                found = VERSION_RE.search(body)
                shown = int(found[1]) if found else 0
            async with own_streams.get(f"{page}/events?workspace=&v={shown}", headers=STREAM_ENCODINGS) as r:
                if r.status != 200:
                    errors[f"events HTTP {r.status}"] += 1
                    return
                if r.headers.get("Content-Encoding"):
                    errors[f"a stream compressed again ({r.headers['Content-Encoding']})"] += 1
                kind, first = b"", True
                async for line in r.content:
                    line = line.rstrip(b"\r\n")
                    if line.startswith(b"event: "):
                        kind = line[7:]
                    elif line.startswith(b"data: ") and kind == b"state":
                        version, _, packed = line[6:].partition(b" ")
                        version = int(version)
                        if first:  # the version now, at once: the page joined shows it
                            first = False
                            listening += 1
                            if listening == students:
                                all_listening.set()
                            if version == shown:
                                continue
                        received.setdefault(version, []).append(time.perf_counter())
                        if version != shown:
                            shown = version
                            if not packed:
                                await workspace(own_pages, version)
                            elif _carried_stage(packed) == stage_of.get(version, "?"):
                                wire, carried = len(packed), carried + 1
                                read(version)
                            else:
                                errors["an event without the teacher's stage"] += 1

            errors["a stream that ended"] += 1

        start = time.perf_counter()
        tasks = [asyncio.create_task(student(k)) for k in range(students)]
        try:
            await asyncio.wait_for(all_listening.wait(), CONNECT_TIMEOUT_S)
        except TimeoutError:
            errors[f"not listening within {CONNECT_TIMEOUT_S:g} s"] += students - listening
        connect_s = time.perf_counter() - start

        to_event, to_workspace, teacher_ms, cpu_ms = [], [], [], []
        missed = 0
        client_before, wall = time.process_time(), 0.0
        current = teacher.form.get("stage", "x")
        for k in range(steps):
            version = k + 2  # the class starts at 1; each step changes the stage
            stage = ATTENTION_STAGES[(ATTENTION_STAGES.index(current) + 1) % len(ATTENTION_STAGES)]
            stage_of[version], done[version], current = stage, asyncio.Event(), stage
            cpu_before = [_cpu_seconds(pid) for pid in server_pids]
            t0 = time.perf_counter()
            r = await teacher_client.post("/stages", data={**teacher.form, "goto": stage}, headers=HTMX)
            teacher_ms.append((time.perf_counter() - t0) * 1000)
            if r.status_code != 200:
                errors[f"teacher HTTP {r.status_code}"] += 1
            try:
                await asyncio.wait_for(done[version].wait(), STEP_TIMEOUT_S)
            except TimeoutError:
                missed += students - len(fetched.get(version, []))
            wall += time.perf_counter() - t0
            cpu_after = [_cpu_seconds(pid) for pid in server_pids]
            if server_pids and None not in cpu_before and None not in cpu_after:
                cpu_ms.append(sum(after - before for before, after in zip(cpu_before, cpu_after, strict=True)) * 1000)
            if received.get(version):
                to_event.append((max(received[version]) - t0) * 1000)
            if len(fetched.get(version, [])) == students:
                to_workspace.append((max(fetched[version]) - t0) * 1000)
            await asyncio.sleep(pause)
        client_cpu = (time.process_time() - client_before) / wall if wall else None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        errors.pop("a stream that ended", None)  # cancelled at the end: not an error

    return FollowResult(students, store, steps, to_event, to_workspace, teacher_ms, cpu_ms, missed, errors,
                        wire, connect_s, client_cpu, os.getloadavg()[0] if hasattr(os, "getloadavg") else None, pause,
                        servers=len(base_urls), carried=carried)


def run_follow(students: int, steps: int = STEPS, log: Callable[[str], None] = print, *, redis: bool = False,
               pause: float = PAUSE_S, servers: int = 1) -> FollowResult:
    """Fresh servers (and, with ``redis``, a fresh redis-server they share), the class, then all stopped. More
    than one server needs Redis, as the app does."""
    if servers > 1 and not redis:
        raise ValueError("servers sharing a class need Redis (--redis)")
    raise_open_files(4 * students + 256)
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env["ATTENTION_CLASS_MAX_STUDENTS"] = str(max(students, 500))
    env["ATTENTION_CLASS_MAX_STREAMS"] = str(max(students + 10, 1000))
    # Every student here comes from 127.0.0.1: one address's shares are the whole class's.
    env["ATTENTION_CLASS_SEATS_PER_ADDRESS"] = env["ATTENTION_CLASS_MAX_STUDENTS"]
    env["ATTENTION_CLASS_STREAMS_PER_ADDRESS"] = env["ATTENTION_CLASS_MAX_STREAMS"]
    with contextlib.ExitStack() as stack:
        store = "memory"
        if redis:
            binary = find_redis_server()
            if binary is None:
                raise RuntimeError("redis-server not found (make services installs it)")
            env["REDIS_URL"] = stack.enter_context(redis_server(binary)).url()
            store = "redis" if servers == 1 else f"redis, {servers} servers"
        running = [stack.enter_context(uvicorn_server(env)) for _ in range(servers)]
        result = asyncio.run(follow_class([s.url for s in running], students, steps,
                                          server_pids=[s.pid for s in running], store=store, pause=pause))
    log(f"  {students} students, {result.store}: last workspace p95 "
        f"{result.pct(result.to_workspace_ms, 95):.0f} ms, max {max(result.to_workspace_ms, default=float('nan')):.0f}"
        f" ms, server CPU {result.pct(result.cpu_ms, 50) / students:.2f} ms per student, {result.error_count} errors")
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=GOAL_STUDENTS)
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--redis", action="store_true", help="the rooms in a redis-server of their own")
    parser.add_argument("--servers", type=int, default=1, help="app servers sharing the class (2 needs --redis)")
    args = parser.parse_args(argv)
    from bench.report import follow_table

    print(follow_table([run_follow(args.students, args.steps, redis=args.redis, servers=args.servers)]))


if __name__ == "__main__":
    main()
