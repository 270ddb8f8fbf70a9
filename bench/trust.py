"""Trust under load: how a default edit and /healthz fare while a few clients loop on the costliest
requests a page can send, against one real uvicorn worker on loopback.

For each heavy request — the costliest page (64 tokens, d_model 64, 8 heads, 4 blocks, every stage,
a pinned state, the lab and cost panels: about 140 fields), the same as an export of the whole run,
100 training steps of the Learn panel, and a pinned state that inflates to 64 MB — ``--clients``
clients post it in a loop for ``--seconds`` while one client makes default edits and another asks
for /healthz. The figure is the edit's p95 under that load against its p95 alone, measured in the same
run (a ratio: absolute times on a shared machine are noise), the longest /healthz wait, and how much
the worker's resident memory grew. Goals (issue "Trust under abuse"): ratio ≤ 3×, /healthz ≤ 100 ms.

    python -m bench.trust                 # about a minute
    python -m bench.trust --quick         # a few seconds, to prove it runs
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import subprocess
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from app.state.pin import encode_pin
from app.state.scenario import from_preset
from tests.conftest import form_fields
from tests.servers import LOOPBACK, free_port, running, tail, uvicorn_args

HTMX = {"HX-Request": "true"}
GOAL_RATIO = 3.0
GOAL_HEALTHZ_MS = 100.0
PAUSE_S = 0.02  # between one client's default edits (and /healthz checks)


def bomb(inflated_bytes: int) -> str:
    """A pin of a few tens of KB that would inflate to ``inflated_bytes`` of fields ("a=1&a=1&…")."""
    raw = b"a=1&" * (inflated_bytes // 4)
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode("ascii")


def costliest_form(page: dict[str, str]) -> dict[str, str]:
    """A small form (about 140 fields) that asks for the costliest page: 64 tokens, d_model 64, 8 heads,
    4 blocks, every stage, a pinned state, the lab and the cost panels."""
    d_model = int(page["shape"].split(",")[0])
    form = {k: v for k, v in page.items() if not k.startswith(("token-", "x-", "grid-x"))}
    form.update({f"token-{i}": f"w{i}" for i in range(64)})
    form["grid-x"] = ";".join(" ".join(["0.1"] * d_model) for _ in range(64))
    form.update({"d_model": "64", "num_heads": "8", "blocks": "4", "show_all": "on",
                 "panels": "lab cost", "pin": encode_pin(from_preset("default")[0])})
    return form


@dataclass(frozen=True)
class Heavy:
    name: str
    path: str
    form: dict[str, str]


def heavy_requests(page: dict[str, str], learn: dict[str, str]) -> list[Heavy]:
    costliest = costliest_form(page)
    return [
        Heavy("costliest page (POST /stages)", "/stages", costliest),
        Heavy("export of the whole run (POST /export)", "/export", {**costliest, "export": "|run"}),
        Heavy("100 training steps (POST /, learn-bank)", "/", {**learn, "action": "learn_100"}),
        Heavy("a pin that inflates to 64 MB (POST /stages)", "/stages", {**page, "pin": bomb(64 << 20)}),
    ]


@dataclass(frozen=True)
class Row:
    name: str
    heavy_answers: int  # answered while the load ran, any status
    heavy_statuses: str
    p95_alone_ms: float
    p95_loaded_ms: float
    healthz_max_ms: float
    rss_growth_mb: float

    @property
    def ratio(self) -> float:
        return self.p95_loaded_ms / self.p95_alone_ms


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (the heavy lane's)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def p95(times: list[float]) -> float:
    return statistics.quantiles(times, n=20)[-1] * 1000


def timed(client: httpx.Client, send: object, count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        r = send()  # type: ignore[operator]
        assert r.status_code == 200, r.status_code
        times.append(time.perf_counter() - started)
        time.sleep(PAUSE_S)
    return times


def measure(url: str, pid: int, heavy: Heavy, page: dict[str, str], clients: int, seconds: float,
            edits: int) -> Row:
    edit = {**page, "x-1-2": "0.75"}
    with httpx.Client(timeout=120) as c:
        def send_edit() -> httpx.Response:
            return c.post(url + "/stages", data=edit, headers=HTMX)

        alone = timed(c, send_edit, edits)
        before = rss_mb(pid)
        statuses: list[int] = []
        deadline = time.monotonic() + seconds

        def loop() -> None:
            with httpx.Client(timeout=120) as h:
                while time.monotonic() < deadline:
                    statuses.append(h.post(url + heavy.path, data=heavy.form, headers=HTMX).status_code)

        threads = [threading.Thread(target=loop, daemon=True) for _ in range(clients)]
        for t in threads:
            t.start()
        time.sleep(min(1.0, seconds / 4))  # the heavy clients are under way
        health: list[float] = []

        def checks() -> None:
            with httpx.Client(timeout=120) as h:
                health.extend(timed(h, lambda: h.get(url + "/healthz"), edits))

        checker = threading.Thread(target=checks, daemon=True)
        checker.start()
        loaded = timed(c, send_edit, edits)
        checker.join()
        grown = rss_mb(pid) - before
        for t in threads:
            t.join()
    counts = {s: statuses.count(s) for s in sorted(set(statuses))}
    return Row(heavy.name, len(statuses), ", ".join(f"{n}× {s}" for s, n in counts.items()),
               p95(alone), p95(loaded), max(health) * 1000, grown)


def server_pid(proc: subprocess.Popen[bytes]) -> int:
    return proc.pid  # uvicorn without --workers serves in the process it was started as


@contextmanager
def server() -> Iterator[tuple[str, int]]:
    port = free_port()
    with tempfile.TemporaryFile() as log, running(uvicorn_args(port, "--no-access-log"), port=port, stdout=log,
                                                  log=lambda: tail(log)) as proc:
        yield f"http://{LOOPBACK}:{port}", server_pid(proc)


@dataclass(frozen=True)
class Memory:
    """Resident memory (MB) of the worker and of its heavy lane's processes, at start and after the run."""

    worker_start: float
    processes_start: list[float]
    worker_end: float
    processes_end: list[float]


def run(clients: int, seconds: float, edits: int) -> tuple[list[Row], Memory]:
    rows = []
    with server() as (url, pid):
        time.sleep(2)  # the heavy lane's first process starts beside /healthz
        start = rss_mb(pid), [rss_mb(p) for p in child_pids(pid)]
        with httpx.Client(timeout=60) as c:
            page = form_fields(c.get(url + "/").text)
            learn = form_fields(c.get(url + "/?preset=learn-bank").text)
        for heavy in heavy_requests(page, learn):
            rows.append(measure(url, pid, heavy, page, clients, seconds, edits))
        memory = Memory(*start, rss_mb(pid), [rss_mb(p) for p in child_pids(pid)])
    return rows, memory


def megabytes(values: list[float]) -> str:
    return " + ".join(f"{v:.0f}" for v in values) or "none"


def markdown(rows: list[Row], clients: int, memory: Memory) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [f"{clients} clients loop on each heavy request while one makes default edits "
             f"(load average {load:.1f}); goals: edit p95 ≤ {GOAL_RATIO:g}× alone, /healthz ≤ {GOAL_HEALTHZ_MS:g} ms.",
             "",
             "| heavy request | its answers | edit p95 alone | edit p95 loaded | ratio | /healthz max | memory |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        verdict = "met" if r.ratio <= GOAL_RATIO and r.healthz_max_ms <= GOAL_HEALTHZ_MS else "NOT met"
        lines.append(f"| {r.name} | {r.heavy_answers} ({r.heavy_statuses}) | {r.p95_alone_ms:.1f} ms | "
                     f"{r.p95_loaded_ms:.1f} ms | **{r.ratio:.2f}×** ({verdict}) | {r.healthz_max_ms:.0f} ms | "
                     f"{r.rss_growth_mb:+.0f} MB |")
    lines += ["", f"Resident memory: the worker {memory.worker_start:.0f} MB at start, {memory.worker_end:.0f} MB "
                  f"after; its heavy lane's processes {megabytes(memory.processes_start)} MB at start, "
                  f"{megabytes(memory.processes_end)} MB after."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--edits", type=int, default=100, help="default edits timed alone, and again under load")
    parser.add_argument("--quick", action="store_true", help="1 client, 2 s, 10 edits: to prove it runs")
    args = parser.parse_args()
    if args.quick:
        args.clients, args.seconds, args.edits = 1, 2.0, 10
    rows, memory = run(args.clients, args.seconds, args.edits)
    print(markdown(rows, args.clients, memory))


if __name__ == "__main__":
    main()
