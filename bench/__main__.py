"""``python -m bench``: measure, print the tables, and write bench/RESULTS.md.

    python -m bench                       # everything (a few minutes); writes bench/RESULTS.md
    python -m bench --docs docs/performance.md    # … and that page's block between the bench markers
    python -m bench --quick               # a few seconds, to prove it runs; writes only with --out

The real models against Hugging Face (bench.model, bench.decoder) run too where /tmp/refvenv has torch and
transformers.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import httpx

from app.main import create_app
from bench import compression
from bench import decoder as language_model
from bench import model as real_model
from bench.cases import (
    DEFAULT_CASE,
    GRID,
    LARGEST_REQUEST,
    LARGEST_RESPONSE,
    SCALING_D_MODEL,
    SCALING_HEADS,
    SCALING_TOKENS,
    ApiCase,
    Case,
    api_requests,
    edit_requests,
    stage_requests,
)
from bench.classroom import run_follow
from bench.load import REPO_ROOT, run_class_load
from bench.report import GOAL_CASE, Results, markdown, update_docs
from bench.results import GOAL_STUDENTS
from bench.timing import FULL, QUICK, Budget, first_page, measure
from tests.redis_server import find_redis_server

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
FULL_PLAN = dict(
    cases=(DEFAULT_CASE, *GRID), stages=(Case(64, 64, 1), GOAL_CASE),
    scaling=tuple(Case(t, SCALING_D_MODEL, SCALING_HEADS) for t in SCALING_TOKENS),
    api=(LARGEST_REQUEST, LARGEST_RESPONSE), students=(50, 200, 500), load_seconds=20.0, budget=FULL,
    mixed=(200, 4), heavy=LARGEST_REQUEST,  # 200 students while 4 clients send the largest request in a loop
    following=(GOAL_STUDENTS, 20, 0.5),  # students following the teacher's steps, steps, pause between (s)
)
QUICK_PLAN = dict(
    cases=(DEFAULT_CASE, Case(5, 3, 8)), stages=(DEFAULT_CASE,),
    scaling=tuple(Case(t, 3, 1) for t in (4, 8, 12)),
    api=(ApiCase(8, 8, 2, blocks=1),), students=(5,), load_seconds=1.5, budget=QUICK,
    mixed=(5, 1), heavy=ApiCase(8, 8, 2, blocks=1),
    following=(5, 3, 0.05),
)


def environment() -> str:
    """What the figures were measured on."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
        commit += " with uncommitted changes" if dirty else ""
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (f"Measured {when} on {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, "
            f"Python {platform.python_version()}, commit {commit}; {load_average()} at the start")


def load_average() -> str:
    """The machine's 1-minute load average: above the CPU count, other work competed with the bench."""
    return f"load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "load average unknown"


async def in_process(plan: dict, log: callable) -> Results:
    """Everything timed inside this process: the cost table, the stages, the T curve, the first page."""
    results = Results(environment())
    budget: Budget = plan["budget"]
    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://bench.local") as client:
        for title, key, build in (("cost per edit", "cases", edit_requests), ("stages", "stages", stage_requests),
                                  ("growth with T", "scaling", edit_requests)):
            log(f"{title}:")
            for case in plan[key]:
                start = time.perf_counter()
                getattr(results, key).append((case, await measure(client, await build(client, case), budget)))
                log(f"  {case.label}: {time.perf_counter() - start:.1f} s")
        log("large API requests:")
        start = time.perf_counter()
        results.api = await measure(client, await api_requests(client, plan["api"]), budget)
        log(f"  {', '.join(case.label for case in plan['api'])}: {time.perf_counter() - start:.1f} s")
        results.page = await first_page(client)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Measure the edit's cost, the class load and growth with T.")
    parser.add_argument("--quick", action="store_true", help="a few seconds, only to prove the bench runs")
    parser.add_argument("--out", type=Path, help=f"the results file (default {RESULTS.relative_to(REPO_ROOT)}; "
                                                 "none with --quick)")
    parser.add_argument("--docs", type=Path, help="also rewrite this page's block between the bench markers")
    parser.add_argument("--no-load", action="store_true",
                        help="skip the class load and the class following its teacher")
    parser.add_argument("--no-model", action="store_true",
                        help="skip the real model against Hugging Face (skipped anyway without its venv)")
    parser.add_argument("--no-redis", action="store_true", help="the class following its teacher in memory only, "
                                                                "not also with Redis")
    args = parser.parse_args(argv)
    plan = QUICK_PLAN if args.quick else FULL_PLAN
    out = args.out or (None if args.quick else RESULTS)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    results = asyncio.run(in_process(plan, log))
    log("compression:")
    results.compression = compression.run(quick=args.quick, log=log)
    if not args.no_load:
        students, heavy = plan["mixed"]
        log(f"class load: {', '.join(map(str, plan['students']))} students, then {students} with {heavy} heavy "
            f"clients, {plan['load_seconds']:g} s each")
        results.load = run_class_load(plan["students"], plan["load_seconds"], log, mixed=plan["mixed"],
                                      heavy_body=plan["heavy"].body())
    if not args.no_load:
        students, steps, pause = plan["following"]
        # One server in memory, then two sharing Redis (as compose.yaml's replicas).
        setups = [("memory", 1)] + ([] if args.no_redis or find_redis_server() is None else [("redis", 2)])
        log(f"a class following its teacher: {students} students, {steps} steps "
            f"({', '.join(f'{store} on {n}' for store, n in setups)})")
        results.following = [run_follow(students, steps, log, redis=store == "redis", pause=pause, servers=n)
                             for store, n in setups]
    if not args.no_model and real_model.HF_PYTHON.exists():
        log(f"the real model against Hugging Face ({real_model.HF_PYTHON}):")
        results.model = f"## {real_model.TITLE}\n\n{real_model.run(args.quick, log)}"
    elif not args.no_model:
        log(f"the real model skipped: {real_model.HF_PYTHON} is missing ({real_model.HF_INSTALL}; then "
            "python -m bench.model)")
    if not args.no_model and language_model.HF_PYTHON.exists():
        log(f"the language model against transformers ({language_model.HF_PYTHON}):")
        results.model += f"\n\n## {language_model.TITLE}\n\n{language_model.run(args.quick, log)}"
    elif not args.no_model:
        log(f"the language model skipped: {language_model.HF_PYTHON} is missing ({language_model.HF_INSTALL}; "
            "then python -m bench.decoder)")
    results.environment += f", {load_average()} at the end."
    text = markdown(results)
    print(text)
    if out:
        out.write_text(text)
        log(f"wrote {out}")
    if args.docs:
        log(f"updated {args.docs}" if update_docs(args.docs, results) else
            f"{args.docs} has no bench markers: left as it is")
    return 0


if __name__ == "__main__":
    sys.exit(main())
