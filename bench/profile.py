"""Where an edit's time goes: each step of POST /stages and POST /api/attention timed on its own,
then cProfile's heaviest functions over the whole request.

The steps are the handlers' own calls made directly in this thread (the app's sync routes run in a
thread pool, where a profiler in the main thread would not see them): reading the form, the
pipeline, building the heatmaps, rendering the templates, gzip at Starlette's level 9.

    python -m bench.profile                          # the cases that miss their goals
    python -m bench.profile --case 64,64,8 --stage qkv --top 25
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gzip
import io
import json
import pstats
import statistics
import time
from collections.abc import Callable
from urllib.parse import urlencode

import httpx
from starlette.requests import Request

from app.api import attention as attention_route
from app.api import run_to_json
from app.config import settings
from app.main import create_app
from app.pages import ERROR_SLOTS, templates
from app.pipeline import run_attention
from app.render import PanelBuilder, page_context, stage_views
from app.scenario import read_form
from app.schemas import AttentionRequest
from bench.cases import DEFAULT_CASE, EDIT_STAGE, HTMX, Case, api_body, edited, page_state
from bench.report import GOAL_CASE, table

GZIP_LEVEL = 9  # Starlette's GZipMiddleware default


def best_ms(fn: Callable[[], object], repeat: int) -> float:
    """The median of ``repeat`` calls, in milliseconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _request(app, path: str, body: bytes = b"", content_type: str = "") -> Request:
    """A Request the templates can resolve url_for against, with ``body`` to read."""
    sent = False

    async def receive() -> dict:
        nonlocal sent
        more, sent = not sent, True
        return {"type": "http.request", "body": body if more else b"", "more_body": False}

    scope = {"type": "http", "app": app, "router": app.router, "method": "POST", "path": path, "root_path": "",
             "headers": [(b"content-type", content_type.encode())], "query_string": b"", "scheme": "http",
             "server": ("bench.local", 80)}
    return Request(scope, receive)


def fragment_steps(app, fields: dict[str, str], repeat: int) -> tuple[list[list[object]], int, Callable[[], None]]:
    """POST /stages's steps, each timed alone; the fragment's size; and all the steps as one call."""
    body = urlencode(fields).encode()
    loop = asyncio.new_event_loop()

    def parse() -> None:
        request = _request(app, "/stages", body, "application/x-www-form-urlencoded")
        loop.run_until_complete(request.form(max_fields=settings.max_form_fields))

    sc, view = read_form(fields)
    ctx = page_context(sc, view)
    ctx["error_slots"] = ERROR_SLOTS
    template = templates.get_template("partials/stages_response.html")
    request = _request(app, "/stages")
    html = template.render({**ctx, "request": request}).encode()
    first, stack = sc.compute()

    def whole() -> None:
        parse()
        s, v = read_form(fields)
        c = page_context(s, v)
        c["error_slots"] = ERROR_SLOTS
        gzip.compress(template.render({**c, "request": request}).encode(), GZIP_LEVEL)

    steps = [
        ("read the posted form (Starlette + python-multipart)", parse),
        ("read_form: the form → Scenario", lambda: read_form(fields)),
        ("Scenario.compute: the NumPy pipeline", sc.compute),
        ("heatmaps: PanelBuilder + heatmap_table for the stages in view",
         lambda: stage_views(PanelBuilder(sc, first, view, stack), view)),
        ("page_context (pipeline + heatmaps + inspector + lists)", lambda: page_context(sc, view)),
        ("templates: stages_response.html rendered", lambda: template.render({**ctx, "request": request})),
        (f"gzip level {GZIP_LEVEL} of the fragment", lambda: gzip.compress(html, GZIP_LEVEL)),
        ("gzip level 6 (for comparison)", lambda: gzip.compress(html, 6)),
        ("gzip level 1 (for comparison)", lambda: gzip.compress(html, 1)),
        ("all the steps above at level 9, in a row", whole),
    ]
    return [[name, f"{best_ms(fn, repeat):.2f}"] for name, fn in steps], len(html), whole


def api_steps(body: dict, repeat: int) -> tuple[list[list[object]], int, int]:
    """POST /api/attention's steps, each timed alone; the response's size and count of numbers."""
    raw = json.dumps(body).encode()
    req = AttentionRequest.model_validate_json(raw)
    options = dict(num_heads=req.num_heads, d_k=req.d_k, d_v=req.d_v, seed=req.seed, scale=req.scale,
                   weights=req.weights.model_dump(exclude_none=True) if req.weights else None)
    run = run_attention(req.x, **options)
    doc = run_to_json(run, req.tokens)
    text = json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()
    numbers = text.count(b",") + 1  # nearly every value is a number
    steps = [
        ("validate the request (pydantic)", lambda: AttentionRequest.model_validate_json(raw)),
        ("run_attention: the NumPy pipeline", lambda: run_attention(req.x, **options)),
        ("run_to_json: arrays → lists (ndarray.tolist)", lambda: run_to_json(run, req.tokens)),
        ("json.dumps of the lists", lambda: json.dumps(doc, separators=(",", ":"), allow_nan=False)),
        ("the whole route function", lambda: attention_route(req)),
        (f"gzip level {GZIP_LEVEL} of the body", lambda: gzip.compress(text, GZIP_LEVEL)),
        ("gzip level 6 (for comparison)", lambda: gzip.compress(text, 6)),
        ("gzip level 1 (for comparison)", lambda: gzip.compress(text, 1)),
    ]
    return [[name, f"{best_ms(fn, repeat):.2f}"] for name, fn in steps], len(text), numbers


def profile_top(fn: Callable[[], object], repeat: int, top: int) -> str:
    """cProfile's heaviest functions by own time over ``repeat`` calls (times are the profiler's)."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repeat):
        fn()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("tottime").print_stats(top)
    lines = out.getvalue().splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")), 0)
    return "\n".join(lines[start:])


async def _fields(case: Case, stage: str, show_all: bool) -> dict[str, str]:
    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://bench.local") as client:
        fields = await page_state(client, case)
        check = await client.post("/stages", data=edited(fields, 1, stage=stage, show_all=show_all), headers=HTMX)
        if check.status_code != 200:
            raise RuntimeError(f"{case.label}: /stages answered {check.status_code}")
    return edited(fields, 1, stage=stage, show_all=show_all)


def report(case: Case, stage: str, show_all: bool, repeat: int, top: int, api: bool) -> str:
    app = create_app()
    fields = asyncio.run(_fields(case, stage, show_all))
    what = "all stages" if show_all else f"{stage} in view"
    rows, html_bytes, whole = fragment_steps(app, fields, repeat)
    parts = [f"### {case.label}: the edit's fragment ({what}), {html_bytes / 1024:.0f} KB of HTML",
             table(["step", "ms (median)"], rows)]
    parts.append("```\n" + profile_top(whole, repeat, top) + "\n```")
    if api:
        rows, json_bytes, numbers = api_steps(api_body(fields), repeat)
        parts += [f"### {case.label}: the JSON API, {json_bytes / 1024:.0f} KB of JSON, about {numbers} numbers "
                  f"({json_bytes / numbers:.1f} bytes each)", table(["step", "ms (median)"], rows)]
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Where an edit's time goes, step by step.")
    parser.add_argument("--case", help="T,d_model,heads (default: the cases that miss their goals)")
    parser.add_argument("--stage", default=EDIT_STAGE)
    parser.add_argument("--all", action="store_true", help="show all stages")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    if args.case:
        t, d, h = (int(v) for v in args.case.split(","))
        plans = [(Case(t, d, h), args.stage, args.all, True)]
    else:
        plans = [(DEFAULT_CASE, EDIT_STAGE, False, True), (GOAL_CASE, EDIT_STAGE, False, True),
                 (GOAL_CASE, EDIT_STAGE, True, False), (Case(64, 64, 1), "qkv", False, False)]
    for case, stage, show_all, api in plans:
        print(report(case, stage, show_all, args.repeat, args.top, api), end="\n\n", flush=True)


if __name__ == "__main__":
    main()
