"""Trust under load: how a default edit and /healthz fare while a few clients loop on the costliest
requests a page can send, against one real uvicorn worker on loopback.

For each heavy request — the costliest page (64 tokens, d_model 64, 8 heads, 4 blocks, every stage,
a pinned state, the lab and cost panels: about 140 fields), the same as an export of the whole run,
100 training steps of the Learn panel, and a pinned state that inflates to 64 MB — ``--clients``
clients post it in a loop for ``--seconds`` while one client makes default edits and another asks
for /healthz. The figure is the edit's p95 under that load against its p95 alone, measured in the same
run (a ratio: absolute times on a shared machine are noise), the longest /healthz wait, and how much
the worker's resident memory grew. Goals: ratio ≤ 3×, /healthz ≤ 100 ms.

Then the *mixed abuse*: ``--clients`` clients each loop on all of them in turn (a pin bomb, the costliest
page, its export, a class's student requests), and the same measures are taken; and *bombs together*:
five pin bombs sent at the same instant, round after round, each one's time to its refusal (goal ≤ 1 s),
on a quiet server and again under the mixed abuse.

    python -m bench.trust                 # about two minutes
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


def measure(url: str, pid: int, name: str, mix: list[Heavy], page: dict[str, str], clients: int, seconds: float,
            edits: int, rounds: int = 0) -> tuple[Row, Bombs | None]:
    """``clients`` clients each looping on the requests of ``mix`` in turn (each starting at another) for at least
    ``seconds``, while one client makes default edits and another asks for /healthz; with ``rounds``, five bombs
    then arrive together, round after round, under the same load."""
    edit = {**page, "x-1-2": "0.75"}
    with httpx.Client(timeout=120) as c:
        def send_edit() -> httpx.Response:
            return c.post(url + "/stages", data=edit, headers=HTMX)

        alone = timed(c, send_edit, edits)
        before = rss_mb(pid)
        statuses: list[int] = []
        deadline, measured = time.monotonic() + seconds, threading.Event()

        def loop(first: int) -> None:
            with httpx.Client(timeout=120) as h:
                k = first
                while time.monotonic() < deadline or not measured.is_set():
                    heavy = mix[k % len(mix)]
                    if heavy.form:
                        statuses.append(h.post(url + heavy.path, data=heavy.form, headers=HTMX).status_code)
                    else:
                        statuses.append(h.get(url + heavy.path, headers=HTMX).status_code)
                    k += 1

        threads = [threading.Thread(target=loop, args=(k,), daemon=True) for k in range(clients)]
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
        together = bombs_together(url, page, rounds, loaded=True) if rounds else None
        grown = rss_mb(pid) - before
        measured.set()
        for t in threads:
            t.join()
    counts = {s: statuses.count(s) for s in sorted(set(statuses))}
    row = Row(name, len(statuses), ", ".join(f"{n}× {s}" for s, n in counts.items()), p95(alone), p95(loaded),
              max(health) * 1000, grown)
    return row, together


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


GOAL_BOMB_S = 1.0
BOMBS = 5  # sent at the same instant


@dataclass(frozen=True)
class Bombs:
    """Pin bombs sent ``together`` at once, round after round: each one's seconds to its answer, and the statuses."""

    together: int
    seconds: list[float]
    statuses: str
    loaded: bool  # under the mixed abuse

    @property
    def worst(self) -> float:
        return max(self.seconds, default=float("nan"))


def bombs_together(url: str, page: dict[str, str], rounds: int, *, together: int = BOMBS,
                   loaded: bool = False) -> Bombs:
    """``together`` bombs at the same instant (a barrier: each thread holds its own open connection), ``rounds``
    times."""
    form = {**page, "pin": bomb(64 << 20)}
    seconds: list[float] = []
    statuses: list[int] = []
    clients = [httpx.Client(timeout=120) for _ in range(together)]
    try:
        for c in clients:
            c.get(url + "/healthz")  # connected before the round
        for _ in range(rounds):
            barrier = threading.Barrier(together)

            def send(c: httpx.Client, barrier: threading.Barrier = barrier) -> None:
                barrier.wait()
                started = time.perf_counter()
                r = c.post(url + "/stages", data=form, headers=HTMX)
                seconds.append(time.perf_counter() - started)
                statuses.append(r.status_code)

            threads = [threading.Thread(target=send, args=(c,), daemon=True) for c in clients]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            time.sleep(0.2)
    finally:
        for c in clients:
            c.close()
    counts = {s: statuses.count(s) for s in sorted(set(statuses))}
    return Bombs(together, seconds, ", ".join(f"{n}× {s}" for s, n in counts.items()), loaded)


def class_requests(url: str) -> list[Heavy]:
    """What a hostile student of a class can ask for again and again: the class's page (a new seat each time,
    without a cookie), its workspace, and a prediction."""
    with httpx.Client(timeout=60, follow_redirects=True) as teacher:
        page = form_fields(teacher.get(url + "/").text)
        r = teacher.post(url + "/class", data={**page, "action": "start_class"})
        code = r.url.path.split("/")[2]
    return [Heavy("a class's page", f"/class/{code}", {}), Heavy("its workspace", f"/class/{code}/workspace", {}),
            Heavy("a prediction", f"/class/{code}/predict", {"ref": "softmax:1:1", "guess": "0.5"})]


def run(clients: int, seconds: float, edits: int, rounds: int = 6) -> tuple[list[Row], Memory, list[Bombs]]:
    rows, bombs = [], []
    with server() as (url, pid):
        time.sleep(2)  # the heavy lane's first process starts beside /healthz
        start = rss_mb(pid), [rss_mb(p) for p in child_pids(pid)]
        with httpx.Client(timeout=60) as c:
            page = form_fields(c.get(url + "/").text)
            learn = form_fields(c.get(url + "/?preset=learn-bank").text)
        bombs.append(bombs_together(url, page, rounds))
        heavies = heavy_requests(page, learn)
        for heavy in heavies:
            rows.append(measure(url, pid, heavy.name, [heavy], page, clients, seconds, edits)[0])
        name = f"mixed abuse: {clients} clients, each looping on all of the above and a class's requests"
        row, loaded = measure(url, pid, name, heavies + class_requests(url), page, clients, seconds, edits, rounds)
        rows.append(row)
        bombs.append(loaded)
        memory = Memory(*start, rss_mb(pid), [rss_mb(p) for p in child_pids(pid)])
    return rows, memory, bombs


def megabytes(values: list[float]) -> str:
    return " + ".join(f"{v:.0f}" for v in values) or "none"


def markdown(rows: list[Row], clients: int, memory: Memory, bombs: list[Bombs] = ()) -> str:
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
    if bombs:
        lines += ["", f"Pin bombs (64 MB inflated) sent together; goal: each refused within {GOAL_BOMB_S:g} s.", "",
                  "| bombs at once | server | answers | p50 | max | verdict |", "|---|---|---|---:|---:|---|"]
        for b in bombs:
            verdict = "met" if b.worst <= GOAL_BOMB_S else "NOT met"
            lines.append(f"| {b.together} × {len(b.seconds) // max(b.together, 1)} rounds | "
                         f"{'under the mixed abuse' if b.loaded else 'quiet'} | {b.statuses} | "
                         f"{statistics.median(b.seconds) * 1000:.0f} ms | {b.worst * 1000:.0f} ms | **{verdict}** |")
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
    rows, memory, bombs = run(args.clients, args.seconds, args.edits, rounds=2 if args.quick else 6)
    print(markdown(rows, args.clients, memory, bombs))


if __name__ == "__main__":
    main()
