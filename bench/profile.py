"""Where an edit's time goes: each step of POST /stages and POST /api/attention timed on its own,
the named functions and templates under cProfile, and what leaner JSON would weigh.

The steps are the handlers' own calls made directly in this thread (the app's sync routes run in a
thread pool, where a profiler in the main thread would not see them): reading the form, the
pipeline, building the heatmaps, rendering the templates, compression as the app does it (and others).
The form is posted as the page's script posts it, each grid as one field; reading the same form one
field per cell, as a browser without JavaScript posts it, is timed beside it.

    python -m bench.profile                          # the cases that miss their goals
    python -m bench.profile --case 64,64,8 --stage qkv --top 25
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import dataclasses
import gzip
import io
import json
import pstats
import statistics
import time
from collections.abc import Callable
from urllib.parse import urlencode

import httpx
import numpy as np
from fastapi import FastAPI
from starlette.requests import Request

from app.main import create_app
from app.maths.attention import run_attention
from app.maths.records import AttentionRun
from app.state.reading import read_form
from app.view.context import page_context
from app.view.panels import PanelBuilder
from app.view.stage_panels import stage_views
from app.web import pages
from app.web.api_answers import attention_body, run_document
from app.web.compression import BROTLI_QUALITY, GZIP_LEVEL, ZSTD_LEVEL, compress
from app.web.json_encoding import dumps
from app.web.page_work import PageRequest, Rendered
from app.web.respond import posted_fields, templates
from app.web.schemas import AttentionRequest
from bench.cases import DEFAULT_CASE, EDIT_STAGE, HTMX, VALUE_EDIT, Case, api_body, edited, page_state
from bench.report import GOAL_CASE, table
from bench.timing import send_raw
from tests.conftest import join_grids

COMPARED_LEVELS = (6, 9)  # gzip levels timed beside the app's own (Starlette's default is 9)
TARGET_S = 1.0  # each step is repeated for about this long (at least 3 times)

# (what, file, function) as cProfile names them once directories are stripped.
NAMED = (
    ("posted_fields: the posted form read", "respond.py", "posted_fields"),
    ("  Starlette's form parser (python-multipart)", "formparsers.py", "parse"),
    ("read_form", "reading.py", "read_form"),
    ("  read_matrix: a grid's cells in one call", "grids.py", "read_matrix"),
    ("  Scenario.weights: edits applied one by one", "scenario.py", "weights"),
    ("  seeded_weights: drawn again for each Scenario", "attention.py", "seeded_weights"),
    ("Scenario.compute: the NumPy pipeline", "scenario.py", "compute"),
    ("page_context", "context.py", "page_context"),
    ("  heatmap_table", "heatmap.py", "heatmap_table"),
    ("  mask_grid: a MaskCell per (query, key)", "editor.py", "mask_grid"),
    ("  inspector", "context.py", "inspector"),
    ("Template.render", "environment.py", "render"),
    ("  url_for in templates", "templating.py", "url_for"),
    ("  os.stat: Jinja's auto_reload checks", "~", "<built-in method posix.stat>"),
    ("  markupsafe.escape", "__init__.py", "escape"),
    ("zstd compression", "~", "<method 'compress' of 'zstd.ZstdCompressor' objects>"),
)


def compression_steps(data: bytes, what: str) -> list[tuple[str, Callable[[], bytes]]]:
    """``data`` compressed as the app does for each encoding, then gzip at other levels for comparison."""
    steps = [(f"zstd of {what} at the app's level {ZSTD_LEVEL}", lambda: compress(data, "zstd")),
             (f"Brotli of {what} at the app's quality {BROTLI_QUALITY}", lambda: compress(data, "br")),
             (f"gzip of {what} at the app's level {GZIP_LEVEL}", lambda: compress(data, "gzip"))]
    return steps + [(f"gzip level {other} (for comparison)", lambda n=other: gzip.compress(data, n))
                    for other in COMPARED_LEVELS if other != GZIP_LEVEL]


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def repeats_for(fn: Callable[[], object]) -> int:
    """How many calls make about TARGET_S seconds (3 … 500)."""
    start = time.perf_counter()
    fn()
    return int(min(500, max(3, TARGET_S / max(time.perf_counter() - start, 1e-6))))


def _request(app: FastAPI, path: str, body: bytes = b"", content_type: str = "") -> Request:
    """A Request the templates can resolve url_for against, with ``body`` to read."""
    sent = False

    async def receive() -> dict:
        nonlocal sent
        first, sent = not sent, True
        return {"type": "http.request", "body": body if first else b"", "more_body": False}

    scope = {"type": "http", "app": app, "router": app.router, "method": "POST", "path": path, "root_path": "",
             "headers": [(b"content-type", content_type.encode())], "query_string": b"", "scheme": "http",
             "server": ("bench.local", 80)}
    return Request(scope, receive)


def _steps_table(steps: list[tuple[str, Callable[[], object]]], repeat: int) -> str:
    rows = []
    for name, fn in steps:
        out = fn()
        size = f"{len(out) / 1024:.1f}" if isinstance(out, bytes | str) else ""
        rows.append([name, f"{median_ms(fn, repeat):.2f}", size])
    return table(["step", "ms (median)", "KB out"], rows)


async def _rendered(client: httpx.AsyncClient, fields: dict[str, str]) -> tuple[str, dict]:
    """The template and context the /stages handler renders for ``fields``, caught on their way to
    ``render``, so the render can be timed alone with exactly the handler's context."""
    caught: list[tuple[str, dict]] = []
    original = pages.render

    def spy(page: PageRequest, name: str, context: dict, *args: object, **kwargs: object) -> Rendered:
        rendered = original(page, name, context, *args, **kwargs)
        caught.append((name, context))  # the handler's dict, with the page's urls added by render
        return rendered

    pages.render = spy
    try:
        response = await client.post("/stages", data=fields, headers={**HTMX, **VALUE_EDIT})
    finally:
        pages.render = original
    if response.status_code != 200 or not caught:
        raise RuntimeError(f"/stages answered {response.status_code} ({len(caught)} renders caught)")
    return caught[-1]


def fragment_steps(app: FastAPI, cells: dict[str, str]) -> tuple[str, int, Callable[[], bytes]]:
    """POST /stages's steps for the form ``cells`` (one field per cell) as the page's script posts
    it (a value edit), each timed alone; the fragment's size; and the whole request as one call (through the ASGI
    stack in this thread: /stages is an async route, run on this loop)."""
    fields = join_grids(cells)
    body = urlencode(fields).encode()
    cells_body = urlencode(cells).encode()
    loop = asyncio.new_event_loop()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench.local")
    request = client.build_request("POST", "/stages", content=body,
                                   headers={**HTMX, **VALUE_EDIT, "Content-Type": "application/x-www-form-urlencoded"})

    def parse(raw: bytes = body) -> None:
        loop.run_until_complete(posted_fields(_request(app, "/stages", raw, "application/x-www-form-urlencoded")))

    def whole() -> bytes:
        return loop.run_until_complete(send_raw(client, request))[2]  # as sent: compressed

    name, ctx = loop.run_until_complete(_rendered(client, fields))
    template = templates.get_template(name)
    html = template.render(ctx).encode()
    sc, view = read_form(fields)
    first, stack = sc.compute()
    steps = [
        (f"read the posted form (posted_fields): {len(fields)} fields, {len(body) / 1024:.0f} KB", parse),
        ("read_form: the form → Scenario", lambda: read_form(fields)),
        (f"  (no JavaScript: posted_fields, one field per cell: {len(cells)} fields, {len(cells_body) / 1024:.0f} KB)",
         lambda: parse(cells_body)),
        ("  (no JavaScript: read_form of it)", lambda: read_form(cells)),
        ("Scenario.compute: the NumPy pipeline", sc.compute),
        ("heatmaps: PanelBuilder + heatmap_table for the stages in view",
         lambda: stage_views(PanelBuilder(sc, first, view, stack), view)),
        ("page_context for a value edit (pipeline + heatmaps + inspector + lists)",
         lambda: page_context(sc, view, shell=False)),
        (f"templates: {name} rendered", lambda: template.render(ctx)),
        *compression_steps(html, "the fragment"),
        ("the whole request through the app (ASGI, middleware included)", whole),
    ]
    return _steps_table(steps, repeats_for(whole)), len(html), whole


def rounded(obj: object, decimals: int) -> object:
    """A copy of a pipeline record with every float array rounded (what a leaner response would send)."""
    if isinstance(obj, np.ndarray):
        return np.round(obj, decimals) if obj.dtype.kind == "f" else obj
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(obj, **{f.name: rounded(getattr(obj, f.name), decimals)
                                           for f in dataclasses.fields(obj) if f.init})
    if isinstance(obj, tuple | list):
        return type(obj)(rounded(v, decimals) for v in obj)
    return obj


def api_steps(body: dict) -> tuple[str, str]:
    """POST /api/attention's steps, each timed alone; and what rounding the numbers would save."""
    raw = json.dumps(body).encode()
    req = AttentionRequest.model_validate_json(raw)
    options = dict(num_heads=req.num_heads, d_k=req.d_k, d_v=req.d_v, seed=req.seed, scale=req.scale,
                   weights=req.weights.model_dump(exclude_none=True) if req.weights else None)
    run = run_attention(req.x, **options)
    doc = run_document(run, req.tokens)
    text = dumps(doc)
    steps = [
        ("validate the request (pydantic)", lambda: AttentionRequest.model_validate_json(raw)),
        ("run_attention: the NumPy pipeline", lambda: run_attention(req.x, **options)),
        ("run_document: the arrays named", lambda: run_document(run, req.tokens)),
        ("numpy_json.dumps: JSON from the arrays (orjson)", lambda: dumps(doc)),
        ("(before: ndarray.tolist + json.dumps)", lambda: json.dumps(_as_lists(doc), separators=(",", ":"))),
        ("the route's work: attention_body, encoded", lambda: dumps(attention_body(req))),
        *compression_steps(text, "the body"),
    ]
    repeat = repeats_for(lambda: gzip.compress(text, max(COMPARED_LEVELS)))
    return _steps_table(steps, repeat), _json_variants(run, req.tokens, repeat)


def _as_lists(doc: object) -> object:
    """A response document with its arrays as nested lists (None where masked), as json.dumps needs."""
    if isinstance(doc, dict):
        return {k: _as_lists(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_as_lists(v) for v in doc]
    if isinstance(doc, np.ma.MaskedArray):
        return np.where(doc.mask, None, doc.data).tolist()
    return doc.tolist() if isinstance(doc, np.ndarray) else doc


def _json_variants(run: AttentionRun, tokens: list[str], repeat: int) -> str:
    """The response as it is and with its numbers rounded: size and serialisation time."""
    rows = []
    for label, decimals in (("as now (shortest repr of each float64)", None), ("np.round(…, 6) first", 6),
                            ("np.round(…, 4) first", 4)):
        source = run if decimals is None else rounded(run, decimals)

        def serialise(r: AttentionRun = source) -> bytes:
            return dumps(run_document(r, tokens))

        text = serialise()
        numbers = text.count(b",") + 1
        rows.append([label, f"{len(text) / 1024:.0f}", f"{len(text) / numbers:.1f}",
                     f"{len(gzip.compress(text, 6)) / 1024:.0f}", f"{len(gzip.compress(text, 1)) / 1024:.0f}",
                     f"{median_ms(serialise, repeat):.1f}"])
    return table(["numbers", "KB", "bytes a number", "KB gzip 6", "KB gzip 1", "encoding ms"], rows)


def profile_whole(fn: Callable[[], object], repeat: int, top: int) -> tuple[str, str]:
    """Named functions and templates per request, and cProfile's heaviest functions by own time.
    Times are under the profiler, which inflates the cost of many small calls."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repeat):
        fn()
    profiler.disable()
    stats = pstats.Stats(profiler, stream=io.StringIO()).strip_dirs()
    entries = stats.stats  # (file, line, function) → (primitive calls, calls, own time, cumulative, callers)
    rows = []
    for what, file, func in NAMED:
        found = [v for (f, _, fn_name), v in entries.items() if f == file and fn_name == func]
        if found:
            calls, cum = sum(v[1] for v in found), sum(v[3] for v in found)
            rows.append([what, f"{calls / repeat:.0f}", f"{cum / repeat * 1000:.2f}"])
    templates_rows = sorted(((f, v) for (f, _, fn_name), v in entries.items()
                             if f.endswith(".html") and fn_name == "root"), key=lambda fv: -fv[1][3])
    rows += [[f"template {f}", f"{v[1] / repeat:.0f}", f"{v[3] / repeat * 1000:.2f}"] for f, v in templates_rows]
    named = table(["function (under cProfile)", "calls a request", "ms a request, cumulative"], rows)
    out = io.StringIO()
    stats.stream = out
    stats.sort_stats("tottime").print_stats(top)
    lines = out.getvalue().splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")), 0)
    return named, "\n".join(lines[start:]).rstrip()


async def _fields(case: Case, stage: str, show_all: bool) -> dict[str, str]:
    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://bench.local") as client:
        fields = await page_state(client, case)
        check = await client.post("/stages", data=edited(fields, 1, stage=stage, show_all=show_all), headers=HTMX)
        if check.status_code != 200:
            raise RuntimeError(f"{case.label}: /stages answered {check.status_code}")
    return edited(fields, 1, stage=stage, show_all=show_all)


def report(case: Case, stage: str, show_all: bool, top: int, api: bool) -> str:
    app = create_app()
    fields = asyncio.run(_fields(case, stage, show_all))
    what = "all stages" if show_all else f"{stage} in view"
    steps, html_bytes, whole = fragment_steps(app, fields)
    named, heaviest = profile_whole(whole, max(3, repeats_for(whole) // 2), top)
    parts = [f"### {case.label}: the edit's fragment ({what}), {html_bytes / 1024:.0f} KB of HTML, "
             f"{len(join_grids(fields))} form fields as the page's script posts them ({len(fields)} without "
             "JavaScript)", steps, named, f"```\n{heaviest}\n```"]
    if api:
        steps, variants = api_steps(api_body(fields))
        parts += [f"### {case.label}: the JSON API", steps, variants]
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Where an edit's time goes, step by step.")
    parser.add_argument("--case", help="T,d_model,heads (default: the cases that miss their goals)")
    parser.add_argument("--stage", default=EDIT_STAGE)
    parser.add_argument("--all", action="store_true", help="show all stages")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    if args.case:
        t, d, h = (int(v) for v in args.case.split(","))
        plans = [(Case(t, d, h), args.stage, args.all, True)]
    else:
        plans = [(DEFAULT_CASE, EDIT_STAGE, False, True), (GOAL_CASE, EDIT_STAGE, False, True),
                 (GOAL_CASE, EDIT_STAGE, True, False), (Case(64, 64, 1), "qkv", False, False),
                 (GOAL_CASE, "mask", False, False)]
    for case, stage, show_all, api in plans:
        print(report(case, stage, show_all, args.top, api), end="\n\n", flush=True)


if __name__ == "__main__":
    main()
