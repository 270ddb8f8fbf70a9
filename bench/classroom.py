"""A class following its teacher: N students' event streams on one uvicorn worker.

The teacher starts a class as on the page (the page's state form posted to /class with *Teach a
live class*, the teacher link followed, its key moved into a cookie) and steps through the stages
with the page's own request: the teacher page's form with ``goto=<stage>``, posted to /stages with
``HX-Request: true``. Each student joins (GET /class/{code}), holds a server-sent event stream to
/class/{code}/events and, on each "state" event, fetches /class/{code}/workspace as a following
student's page does (static/class.js), checking that it shows the teacher's new stage.

Per step: from the teacher's request sent to the last student's event received, and to the last
student's workspace read; the teacher's own answer; the server's CPU time. The server is a real
``uvicorn app.main:app --workers 1`` on 127.0.0.1, with the rooms in the process (the default) or,
with ``--redis``, in a redis-server of its own; the students are coroutines of one aiohttp client
on the same machine, so on 2 cores the client competes with the server for the CPU.

    python -m bench.classroom --students 300 --steps 20
    python -m bench.classroom --students 300 --steps 20 --redis
"""

from __future__ import annotations

import argparse
import asyncio
import os
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
STREAM_ENCODINGS = {"Accept-Encoding": "gzip, deflate, br"}  # as a browser without zstd: this client decodes these


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


async def follow_class(base_url: str, students: int, steps: int = STEPS, *, server_pid: int | None = None,
                       store: str = "memory", pause: float = PAUSE_S) -> FollowResult:
    """``students`` following a teacher who steps ``steps`` times, against ``base_url`` (loopback only)."""
    if httpx.URL(base_url).host not in (LOOPBACK, "localhost"):
        raise ValueError("the class bench only targets this machine's loopback")

    errors: Counter = Counter()
    received: dict[int, list[float]] = {}  # version → when each student's event came
    fetched: dict[int, list[float]] = {}  # version → when each student's workspace was read
    done: dict[int, asyncio.Event] = {}
    stage_of: dict[int, str] = {}
    listening = 0
    all_listening = asyncio.Event()
    wire = 0

    async with httpx.AsyncClient(base_url=base_url, timeout=STEP_TIMEOUT_S) as teacher_client:
        teacher = await start_class(teacher_client)
        page = f"/class/{teacher.code}"
        async with aiohttp.ClientSession(base_url, connector=aiohttp.TCPConnector(limit=0),
                                         cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False,
                                         timeout=aiohttp.ClientTimeout(total=STEP_TIMEOUT_S)) as pages, \
                aiohttp.ClientSession(base_url, connector=aiohttp.TCPConnector(limit=0),
                                      cookie_jar=aiohttp.DummyCookieJar(),
                                      timeout=aiohttp.ClientTimeout(total=None, sock_connect=10)) as streams:

            async def workspace(version: int) -> None:
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
                fetched.setdefault(version, []).append(time.perf_counter())
                if len(fetched[version]) == students and version in done:
                    done[version].set()

            async def student() -> None:
                nonlocal listening
                async with pages.get(page, headers=BROWSER) as r:  # joins: a new anonymous id (no cookie kept)
                    await r.read()
                    if r.status != 200:
                        errors[f"join HTTP {r.status}"] += 1
                        return
                async with streams.get(page + "/events", headers=STREAM_ENCODINGS) as r:
                    if r.status != 200:
                        errors[f"events HTTP {r.status}"] += 1
                        return
                    kind, shown = b"", None
                    async for line in r.content:
                        line = line.rstrip(b"\r\n")
                        if line.startswith(b"event: "):
                            kind = line[7:]
                        elif line.startswith(b"data: ") and kind == b"state":
                            version = int(line[6:].split()[0])
                            if shown is None:  # the version now, at once: the page joined shows it
                                shown = version
                                listening += 1
                                if listening == students:
                                    all_listening.set()
                                continue
                            received.setdefault(version, []).append(time.perf_counter())
                            if version != shown:
                                shown = version
                                await workspace(version)

            start = time.perf_counter()
            tasks = [asyncio.create_task(student()) for _ in range(students)]
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
                cpu_before = _cpu_seconds(server_pid) if server_pid else None
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
                cpu_after = _cpu_seconds(server_pid) if server_pid else None
                if cpu_before is not None and cpu_after is not None:
                    cpu_ms.append((cpu_after - cpu_before) * 1000)
                if received.get(version):
                    to_event.append((max(received[version]) - t0) * 1000)
                if len(fetched.get(version, [])) == students:
                    to_workspace.append((max(fetched[version]) - t0) * 1000)
                await asyncio.sleep(pause)
            client_cpu = (time.process_time() - client_before) / wall if wall else None
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    return FollowResult(students, store, steps, to_event, to_workspace, teacher_ms, cpu_ms, missed, errors,
                        wire, connect_s, client_cpu, os.getloadavg()[0] if hasattr(os, "getloadavg") else None, pause)


def run_follow(students: int, steps: int = STEPS, log: Callable[[str], None] = print, *, redis: bool = False,
               pause: float = PAUSE_S) -> FollowResult:
    """One fresh server (and, with ``redis``, a fresh redis-server), the class, then both stopped."""

    raise_open_files(4 * students + 256)
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env["ATTENTION_CLASS_MAX_STUDENTS"] = str(max(students, 500))
    env["ATTENTION_CLASS_MAX_STREAMS"] = str(max(students + 10, 1000))
    if redis:
        binary = find_redis_server()
        if binary is None:
            raise RuntimeError("redis-server not found (make services installs it)")
        with redis_server(binary) as service:
            with uvicorn_server({**env, "REDIS_URL": service.url()}) as server:
                result = asyncio.run(follow_class(server.url, students, steps, server_pid=server.pid, store="redis",
                                                  pause=pause))
    else:
        with uvicorn_server(env) as server:
            result = asyncio.run(follow_class(server.url, students, steps, server_pid=server.pid, pause=pause))
    log(f"  {students} students, {result.store}: last workspace p95 "
        f"{result.pct(result.to_workspace_ms, 95):.0f} ms, {result.error_count} errors")
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=GOAL_STUDENTS)
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--redis", action="store_true", help="the rooms in a redis-server of their own")
    args = parser.parse_args(argv)
    from bench.report import follow_table

    print(follow_table([run_follow(args.students, args.steps, redis=args.redis)]))


if __name__ == "__main__":
    main()
