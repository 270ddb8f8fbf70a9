"""A lecture survives faults: two app servers behind nginx sharing a Redis that keeps its append-only file.

Real processes on 127.0.0.1 only, as compose.yaml runs them: redis-server with ``--appendonly yes`` in a
directory of its own, two ``python -m app.serve`` (one worker each, REDIS_URL naming that Redis), and nginx
with deploy/nginx.conf in front of both. A teacher starts a class as on the page and steps it; N students join
through nginx, hold a following page's event stream (``/class/{code}/events?workspace=``) as a browser's
EventSource does (it reconnects after the stream's ``retry:`` with ``Last-Event-ID``, and the page's script
connects again after a refused stream, waiting 2 s, then 4 s, then 8 s), and each sends a prediction. Then two
faults, in turn:

A. **An app server SIGKILLed**: the teacher steps at once; for each student, the time from the teacher's
   request to its stream having the new version (the streams on the killed server reconnect through nginx to
   the other). Then: every prediction kept, the teacher's key still steering, the killed server started again
   on its port and serving the class.

B. **Redis restarted**: SIGTERM (Redis writes its file), a few seconds down, then started again on the same
   port and directory. During the outage: how many open streams were told "unreachable", what a class page
   load answers (the reconnecting page: 503, ``Refresh``), and ``/`` and ``/model?text=…`` answering. As soon
   as Redis answers PING again the teacher steps; for each student, the time until it has that step. Then:
   the class under its code, its students, their predictions and the teacher's key, all still there.

    python -m bench.faults                          # 100 students; the table into docs/performance.md
    python -m bench.faults --students 10 --docs ''  # a smaller class, the page left as it is
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

from app.classroom.redis_store import PREFIX
from bench.cases import ATTENTION_STAGES, BROWSER, HTMX
from bench.classroom import Teacher, raise_open_files, start_class
from tests.redis_server import DurableRedis, durable_redis_server, find_redis_server
from tests.servers import LOOPBACK, REPO_ROOT, find_nginx, free_port, nginx, start, stop, tail

STUDENTS = 100
GOAL_S = 3.0  # every student on the teacher's new step within this of the step, whatever the fault
OUTAGE_S = 3.0  # how long Redis stays down before it is started again
FOLLOW_TIMEOUT_S = 15.0  # a student without the step by then has missed it
JOINS_PER_S = 100.0  # a student joins every 10 ms, as a hall scanning the QR code
CONNECT_TIMEOUT_S = 60.0  # the whole class listening by then
REQUEST_TIMEOUT_S = 10.0  # any one request of the bench's clients
STREAM_READ_TIMEOUT_S = 40.0  # a stream silent for this long is dead (the app sends a comment every 15 s)
STREAM_RETRY_S = 2.0  # EventSource's wait before it reconnects, until the stream says its own ``retry:``
REFUSED_RETRY_S = (2.0, 4.0, 8.0)  # static/class.js: after a refused stream, 2 s doubling up to 8 s
MAX_CONNECTS = 200  # a student's stream connections in one run, at most
RUN_TIMEOUT_S = 600.0  # the whole run
PAGE_LOAD = {**BROWSER, "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
             "Accept-Language": "en"}
MODEL_TEXT = "The bank of the river."  # the real model's page: a short sentence, cheap once the model is read
DOCS = REPO_ROOT / "docs" / "performance.md"
DOCS_BEGIN, DOCS_END = "<!-- bench-faults:begin -->", "<!-- bench-faults:end -->"
VERSION_RE = re.compile(r'data-version="(\d+)"')
STAGE_RE = re.compile(r'name="stage" value="([a-z_0-9]+)"')


@dataclass
class FaultResult:
    """One fault: how soon the class was back on the teacher's step, and what survived."""

    fault: str
    students: int
    back_s: list[float] = field(default_factory=list)  # per student who had the step: seconds after it
    teacher_status: int = 0  # the answer to the teacher's step right after the fault
    predictions_kept: int = 0
    predictions_sent: int = 0
    teacher_key: bool = False  # the teacher's page still opens with the key in its cookie
    reconnected: int = 0  # students whose stream was cut and connected again
    told_unreachable: int = 0  # students whose open stream said "unreachable" during the fault
    checks: dict[str, str] = field(default_factory=dict)  # what else was seen, by name ("ok" or what went wrong)
    took_ms: dict[str, float] = field(default_factory=dict)  # how long the pages checked took to answer
    subscribed_at_step: int | None = None  # app servers subscribed to the room's channel just before the step

    @property
    def missed(self) -> int:
        return self.students - len(self.back_s)

    @property
    def within_goal(self) -> int:
        return sum(s <= GOAL_S for s in self.back_s)

    def pct(self, q: float) -> float:
        return float(np.percentile(self.back_s, q)) if self.back_s else float("nan")

    @property
    def ok(self) -> bool:
        return (self.within_goal == self.students and self.predictions_kept == self.predictions_sent
                and self.teacher_key and self.teacher_status == 200 and all(v == "ok" for v in self.checks.values()))


class Student:
    """One student's browser: its cookie (its anonymous id), its page's version and its event stream."""

    def __init__(self, base_url: str, code: str) -> None:
        self.client = httpx.AsyncClient(base_url=base_url, timeout=REQUEST_TIMEOUT_S)
        self.code = code
        self.seen: list[tuple[float, int]] = []  # (when, version) of each "state" event
        self.unreachable: list[float] = []  # when each "unreachable" event came
        self.connects = 0  # stream connections opened (200)
        self.refused: Counter = Counter()  # stream connections refused, by status or error
        self.cut = 0  # streams that ended without the app saying so (a killed server)
        self.value: float | None = None  # the prediction the class took from it

    @property
    def id(self) -> str:
        return self.client.cookies.get("attention_student", "")

    @property
    def version(self) -> int:
        return self.seen[-1][1] if self.seen else 0

    def reached(self, version: int, since: float) -> float | None:
        """When its stream first had ``version`` (or a later one) after ``since``."""
        return next((t for t, v in self.seen if v >= version and t >= since), None)

    async def join(self) -> int:
        """The class's page (a new anonymous id in a cookie): the version it shows."""
        r = await self.client.get(f"/class/{self.code}", headers=PAGE_LOAD)
        r.raise_for_status()
        found = VERSION_RE.search(r.text)
        return int(found[1]) if found else 0

    async def predict(self, value: float) -> int:
        """The quiz's hidden cell of softmax, row 1, column 2: predicted, as the page's form posts it."""
        r = await self.client.post(f"/class/{self.code}/predict", headers=HTMX, data={
            "guess_matrix": "softmax", "guess_row": "1", "guess_col": "2", "guess": repr(value)})
        if r.status_code == 200:
            self.value = value
        return r.status_code

    async def follow(self, shown: int, stop: asyncio.Event) -> None:
        """The page's event stream until ``stop``: reconnected as a browser does, at most MAX_CONNECTS times."""
        retry_s, refused_in_a_row, last_id = STREAM_RETRY_S, 0, str(shown)
        url = f"/class/{self.code}/events?workspace=&v={shown}"  # an EventSource keeps the URL it was made with
        timeout = httpx.Timeout(REQUEST_TIMEOUT_S, read=STREAM_READ_TIMEOUT_S)
        for _ in range(MAX_CONNECTS):
            if stop.is_set():
                return
            wait = retry_s
            try:
                async with self.client.stream("GET", url, headers={**BROWSER, "Last-Event-ID": last_id},
                                              timeout=timeout) as r:
                    if r.status_code != 200:
                        self.refused[f"HTTP {r.status_code}"] += 1
                        wait = REFUSED_RETRY_S[min(refused_in_a_row, len(REFUSED_RETRY_S) - 1)]
                        refused_in_a_row += 1
                    else:
                        self.connects += 1
                        refused_in_a_row = 0
                        kind = "message"
                        async for line in r.aiter_lines():
                            if line.startswith("retry: "):
                                retry_s = int(line.removeprefix("retry: ")) / 1000
                            elif line.startswith("id: "):
                                last_id = line.removeprefix("id: ")
                            elif line.startswith("event: "):
                                kind = line.removeprefix("event: ")
                            elif line.startswith("data: "):
                                data = line.removeprefix("data: ")
                                if kind == "state":
                                    self.seen.append((time.perf_counter(), int(data.split(" ", 1)[0])))
                                elif kind == "unreachable":
                                    self.unreachable.append(time.perf_counter())
                                elif kind == "closed":
                                    return
                            elif not line:
                                kind = "message"
            except (httpx.TransportError, httpx.StreamError) as e:
                self.cut += 1
                self.refused[type(e).__name__] += 1
            if stop.is_set():
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)

    async def aclose(self) -> None:
        await self.client.aclose()


async def wait_all(students: list[Student], version: int, since: float, seconds: float = FOLLOW_TIMEOUT_S) -> None:
    """Until every student has ``version`` after ``since``, or ``seconds`` have passed."""
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline and any(s.reached(version, since) is None for s in students):
        await asyncio.sleep(0.02)


def back_times(students: list[Student], version: int, since: float) -> list[float]:
    return [t - since for s in students if (t := s.reached(version, since)) is not None]


async def step(teacher: httpx.AsyncClient, lesson: Teacher, stage: str, tries: int = 1) -> tuple[int, float]:
    """The teacher's Next (the page's form with goto, posted to /stages by htmx): its status, and when it was sent.
    With ``tries``, a 503 is sent again after half a second, as a teacher clicks again."""
    status, sent = 0, time.perf_counter()
    for attempt in range(tries):
        if attempt:
            await asyncio.sleep(0.5)
        try:
            r = await teacher.post("/stages", data={**lesson.form, "goto": stage, "quiz": "on"}, headers=HTMX)
            status = r.status_code
        except httpx.TransportError:
            status = 0
        if status == 200:
            break
    return status, sent


def next_stage(stage: str) -> str:
    return ATTENTION_STAGES[(ATTENTION_STAGES.index(stage) + 1) % len(ATTENTION_STAGES)]


def predictions_kept(redis: DurableRedis, code: str, students: list[Student]) -> int:
    """How many students' predictions Redis still holds, with the value each sent."""
    with redis.client() as r:
        found = r.hgetall(PREFIX + code + ":predictions")
    held = {name.rsplit(" ", 1)[1]: float(value) for name, value in found.items()}
    return sum(1 for s in students if s.value is not None and s.id and held.get(s.id) == s.value)


async def teacher_key_works(teacher: httpx.AsyncClient, code: str) -> bool:
    r = await teacher.get(f"/class/{code}/teach", headers=PAGE_LOAD)
    return r.status_code == 200 and 'class="class-panel teacher"' in r.text


async def page_check(client: httpx.AsyncClient, path: str, **params: str) -> tuple[str, float]:
    """A page load that must answer 200: "ok" or what came instead, and how long it took."""
    began = time.perf_counter()
    try:
        r = await client.get(path, params=params or None, headers=PAGE_LOAD)
        seen = "ok" if r.status_code == 200 else f"HTTP {r.status_code}"
    except httpx.HTTPError as e:
        seen = type(e).__name__
    return seen, time.perf_counter() - began


class AppServer:
    """``python -m app.serve`` (one worker) on a fixed loopback port, killed and started again on that port."""

    def __init__(self, port: int, env: dict[str, str], log: Path) -> None:
        self.port, self.env = port, env
        self.log = open(log, "ab")  # noqa: SIM115 - kept across restarts, closed by close()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> float:
        """Start it, and return once /healthz answers: the seconds that took."""
        began = time.perf_counter()
        self.proc = start(["-m", "app.serve"], port=self.port, stdout=self.log, env=self.env,
                          log=lambda: tail(self.log))
        return time.perf_counter() - began

    def kill(self) -> None:
        """SIGKILL, as a crash or an OOM kill: no shutdown, its streams cut."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc = None

    def close(self) -> None:
        if self.proc is not None:
            stop(self.proc)
            self.proc = None
        self.log.close()


def server_env(redis_url: str, port: int, students: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTENTION_") and k != "REDIS_URL"}
    env.update(ATTENTION_HOST=LOOPBACK, ATTENTION_PORT=str(port), ATTENTION_WORKERS="1", REDIS_URL=redis_url)
    # Every student here comes from 127.0.0.1: one address's shares are the whole class's.
    env["ATTENTION_CLASS_MAX_STUDENTS"] = env["ATTENTION_CLASS_SEATS_PER_ADDRESS"] = str(max(students + 10, 500))
    env["ATTENTION_CLASS_MAX_STREAMS"] = env["ATTENTION_CLASS_STREAMS_PER_ADDRESS"] = str(max(2 * students, 1000))
    return env


@contextlib.contextmanager
def deployment(students: int) -> Iterator[tuple[DurableRedis, list[AppServer], str]]:
    """Redis with its append-only file, two app servers on it, nginx in front: all stopped on leaving."""
    redis_binary, nginx_binary = find_redis_server(), find_nginx()
    if redis_binary is None or nginx_binary is None:
        raise RuntimeError("redis-server and nginx are needed (make services installs them)")
    with durable_redis_server(redis_binary) as redis, tempfile.TemporaryDirectory(prefix="attention-faults-") as tmp:
        servers = [AppServer(port, server_env(redis.url(), port, students), Path(tmp) / f"server-{k}.log")
                   for k, port in enumerate((free_port(), free_port()))]
        try:
            for server in servers:
                server.start()
            with nginx(nginx_binary, [f"{LOOPBACK}:{s.port}" for s in servers], connections=4 * students + 256) as url:
                yield redis, servers, url
        finally:
            for server in servers:
                server.close()


async def run_class(students_n: int, redis: DurableRedis, servers: list[AppServer], base: str, *,
                    outage_s: float = OUTAGE_S, log: Callable[[str], None] = print) -> list[FaultResult]:
    """The class, then fault A, then fault B (see the module's docstring)."""
    results: list[FaultResult] = []
    stop_streams = asyncio.Event()
    async with httpx.AsyncClient(base_url=base, timeout=REQUEST_TIMEOUT_S) as teacher, \
            httpx.AsyncClient(base_url=base, timeout=REQUEST_TIMEOUT_S) as visitor:
        lesson = await start_class(teacher)
        code, stage = lesson.code, lesson.form.get("stage", "x")
        students = [Student(base, code) for _ in range(students_n)]
        tasks: list[asyncio.Task[None]] = []
        try:
            async def join_and_follow(k: int, s: Student) -> None:
                await asyncio.sleep(k / JOINS_PER_S)
                shown = await s.join()
                await s.follow(shown, stop_streams)

            tasks = [asyncio.create_task(join_and_follow(k, s)) for k, s in enumerate(students)]
            await wait_all(students, 1, 0.0, CONNECT_TIMEOUT_S)
            listening = sum(s.version >= 1 for s in students)
            log(f"  {listening} of {students_n} students listening")

            # The quiz's stage, and a prediction from every student.
            stage = "softmax"
            status, sent = await step(teacher, lesson, stage)
            if status != 200:
                raise RuntimeError(f"the teacher's step to the quiz answered {status}")
            version = 2
            await wait_all(students, version, sent)
            answers = Counter(await asyncio.gather(*(s.predict(round((k + 1) / (students_n + 1), 6))
                                                     for k, s in enumerate(students))))
            log(f"  predictions answered {dict(answers)}")

            # A. One app server SIGKILLed, the teacher steps at once.
            before = [s.cut for s in students]
            servers[0].kill()
            stage = next_stage(stage)
            status, sent = await step(teacher, lesson, stage)
            version += 1
            await wait_all(students, version, sent)
            a = FaultResult("an app server SIGKILLed", students_n, back_times(students, version, sent), status)
            a.reconnected = sum(s.cut > b for s, b in zip(students, before, strict=True))
            a.predictions_sent = sum(1 for s in students if s.value is not None)
            a.predictions_kept = predictions_kept(redis, code, students)
            a.teacher_key = await teacher_key_works(teacher, code)
            restart_s = servers[0].start()
            async with httpx.AsyncClient(base_url=servers[0].url, timeout=REQUEST_TIMEOUT_S) as direct:
                r = await direct.get(f"/class/{code}", headers=PAGE_LOAD)
                shows = STAGE_RE.search(r.text)
                a.checks["the killed server, started again, serves the class"] = (
                    "ok" if r.status_code == 200 and shows and shows[1] == stage
                    else f"HTTP {r.status_code}, stage {shows[1] if shows else '?'}")
            a.took_ms["the killed server started again, to its /healthz answering"] = restart_s * 1000
            log(f"  A: back within {max(a.back_s, default=float('nan')):.2f} s, {a.missed} missed; "
                f"the killed server served again {restart_s:.1f} s after its start")
            results.append(a)

            # B. Redis restarted: down for outage_s, the teacher steps as soon as it answers again.
            for server in servers:  # the real model read on both (the killed one read it again), as in a class
                async with httpx.AsyncClient(base_url=server.url, timeout=60) as direct:
                    await direct.get("/model", params={"text": MODEL_TEXT}, headers=PAGE_LOAD)
            with redis.client() as rc:
                joined = rc.scard(PREFIX + code + ":students")
            before_unreachable = [len(s.unreachable) for s in students]
            down_at = time.perf_counter()
            await asyncio.to_thread(redis.stop)
            b = FaultResult("Redis restarted", students_n)
            page_began = time.perf_counter()
            during = await visitor.get(f"/class/{code}", headers=PAGE_LOAD)
            page_s = time.perf_counter() - page_began
            reconnecting = (during.status_code == 503 and during.headers.get("content-type", "").startswith("text/html")
                            and during.headers.get("refresh") and during.headers.get("retry-after")
                            and "The class is reconnecting" in during.text)
            b.checks["a class page during the outage: the reconnecting page"] = (
                "ok" if reconnecting else f"HTTP {during.status_code} {during.headers.get('content-type', '')}")
            index, index_s = await page_check(visitor, "/")
            model, model_s = await page_check(visitor, "/model", text=MODEL_TEXT)
            b.checks["/ during the outage"] = index
            b.checks["/model during the outage"] = model
            await asyncio.sleep(max(0.0, outage_s - (time.perf_counter() - down_at)))
            b.told_unreachable = sum(len(s.unreachable) > n for s, n in zip(students, before_unreachable, strict=True))
            await asyncio.to_thread(redis.start)
            with redis.client() as rc:  # the app servers subscribed to the room's channel as the step is made
                b.subscribed_at_step = dict(rc.pubsub_numsub(PREFIX + code + ":events")).get(
                    PREFIX + code + ":events", 0)
            stage = next_stage(stage)
            status, sent = await step(teacher, lesson, stage, tries=3)
            version += 1
            with redis.client() as rc:
                stored = int(rc.hget(PREFIX + code, "version") or 0)
            b.checks["the step after Redis's return taken once"] = "ok" if stored == version else f"version {stored}"
            await wait_all(students, version, sent)
            b.back_s, b.teacher_status = back_times(students, version, sent), status
            b.predictions_sent = a.predictions_sent
            b.predictions_kept = predictions_kept(redis, code, students)
            b.teacher_key = await teacher_key_works(teacher, code)
            with redis.client() as rc:
                kept = rc.scard(PREFIX + code + ":students")
            b.checks["every student still in the class"] = "ok" if kept == joined else f"{kept} of {joined}"
            r = await visitor.get(f"/class/{code}", headers=PAGE_LOAD)
            shows = STAGE_RE.search(r.text)
            b.checks["the class under its code, on the new step"] = (
                "ok" if r.status_code == 200 and shows and shows[1] == stage else f"HTTP {r.status_code}")
            log(f"  B: class page during the outage {during.status_code} in {page_s * 1000:.0f} ms, / in "
                f"{index_s * 1000:.0f} ms, /model in {model_s * 1000:.0f} ms; told unreachable "
                f"{b.told_unreachable}; back within {max(b.back_s, default=float('nan')):.2f} s, {b.missed} missed")
            b.took_ms.update({"a class page during the outage": page_s * 1000, "/ during the outage": index_s * 1000,
                              "/model during the outage": model_s * 1000})
            results.append(b)
        finally:
            stop_streams.set()  # a stream waiting for its next line is cancelled: it would wait for the keep-alive
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.gather(*(s.aclose() for s in students))
    return results


def run_faults(students: int = STUDENTS, *, outage_s: float = OUTAGE_S,
               log: Callable[[str], None] = print) -> list[FaultResult]:
    """The deployment started, the class and both faults, everything stopped: one result per fault."""
    raise_open_files(6 * students + 512)
    with deployment(students) as (redis, servers, base):
        log(f"  Redis on port {redis.port} (append-only file), app servers on {', '.join(str(s.port) for s in servers)}"
            f", nginx at {base}")

        async def bounded() -> list[FaultResult]:
            return await asyncio.wait_for(run_class(students, redis, servers, base, outage_s=outage_s, log=log),
                                          RUN_TIMEOUT_S)

        return asyncio.run(bounded())


def seconds(value: float) -> str:
    return "—" if value != value else f"{value:.2f}"  # NaN: nobody had it


def faults_table(results: list[FaultResult]) -> str:
    """Per fault: how soon every student was back on the teacher's step, and what survived."""
    from bench.report import table

    rows = [[r.fault, r.students, seconds(r.pct(50)), seconds(r.pct(95)), seconds(max(r.back_s, default=float("nan"))),
             f"{r.within_goal} of {r.students}", r.teacher_status, r.reconnected, r.told_unreachable,
             f"{r.predictions_kept} of {r.predictions_sent}", "yes" if r.teacher_key else "**no**"] for r in results]
    return table(["fault", "students", "back p50 s", "back p95 s", "back max s", f"within {GOAL_S:g} s",
                  "teacher's step", "streams cut", "told unreachable", "predictions kept", "teacher's key"], rows)


def checks_list(results: list[FaultResult]) -> str:
    lines = []
    for r in results:
        for name, seen in r.checks.items():
            lines.append(f"- {r.fault}: {name}: {'yes' if seen == 'ok' else f'**no** ({seen})'}")
        for name, ms in r.took_ms.items():
            lines.append(f"- {r.fault}: {name}: {ms:,.0f} ms")
        if r.subscribed_at_step is not None:
            lines.append(f"- {r.fault}: app servers subscribed to the class's channel just before the step: "
                         f"{r.subscribed_at_step} of 2")
    return "\n".join(lines)


def docs_block(results: list[FaultResult], command: str) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    when = time.strftime("%Y-%m-%d")
    verdict = "every check passed" if all(r.ok for r in results) else "**a check failed** (below)"
    return (f"{DOCS_BEGIN}\nMeasured {when} on this machine ({os.cpu_count()} cores, load average {load:.1f} at the "
            f"end, the students' client on the same cores), {verdict}. Repeat: `{command}`.\n\n"
            f"{faults_table(results)}\n\n{checks_list(results)}\n{DOCS_END}")


def write_docs(path: Path, block: str) -> bool:
    """Replace the block between the page's faults markers; False (the page left as it is) without them."""
    text = path.read_text()
    begin, end = text.find(DOCS_BEGIN), text.find(DOCS_END)
    if begin < 0 or end < begin:
        return False
    path.write_text(text[:begin] + block + text[end + len(DOCS_END):])
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=STUDENTS)
    parser.add_argument("--outage", type=float, default=OUTAGE_S, help="seconds Redis stays down")
    parser.add_argument("--docs", default=str(DOCS), help="the page whose faults block is rewritten ('' for none)")
    args = parser.parse_args(argv)
    results = run_faults(args.students, outage_s=args.outage)
    command = "python -m bench.faults" + (f" --students {args.students}" if args.students != STUDENTS else "") + (
        f" --outage {args.outage:g}" if args.outage != OUTAGE_S else "")
    print(faults_table(results))
    print(checks_list(results))
    if args.docs:
        path = Path(args.docs)
        if write_docs(path, docs_block(results, command)):
            print(f"{path}: its faults block rewritten")
        else:
            print(f"{path} has no {DOCS_BEGIN} … {DOCS_END} markers: left as it is")
    if not all(r.ok for r in results):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
