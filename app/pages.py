"""The page. One form holds the whole state; htmx posts it and swaps in what changed.

- GET  /          the page for a preset (``?preset=pool``) or for a full state in the query string
- POST /          a structural change (tokens, sizes, head, new weights): the whole workspace for
                  htmx, or the whole page for a browser without JavaScript
- POST /stages    a value edit, a step, or an inspected cell: only the stages and the inspector
Every response varies on HX-Request, since the same URL answers with a fragment or a page.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qsl

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.templating import Jinja2Templates
from starlette.concurrency import run_in_threadpool

from app import classroom
from app.config import settings
from app.form import DECIMALS, EDITABLE, FormError, count_values, expand_grids, is_index
from app.learn_charts import short_number
from app.learning import STEP_ACTIONS, fit, preset_learning, read_learning, reset, train_page
from app.maths import equations, formula_text, fraction_math, label_text, number_math, prose, tex, vector_math
from app.permalink import fits_in_url, stage_permalinks, state_query
from app.pin import decode_pin, encode_pin
from app.pipeline_map import draw_map
from app.presets import DEFAULT_PRESET, PRESETS
from app.render import editor_grids, page_context
from app.scenario import (
    VIEW_FIELDS,
    Scenario,
    View,
    add_token,
    encode_edits,
    from_preset,
    new_weights,
    read_form,
    remove_token,
)

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"
templates = Jinja2Templates(directory=TEMPLATES_DIR)
templates.env.auto_reload = False  # compiled once: no stat of every template file on every render
# Every template kept in a plain dict: Jinja's default LRU cache takes a lock and walks its queue on each
# {% include %} (tens of microseconds with this many templates, nine times an edit).
templates.env.cache = {}
templates.env.globals.update(settings=settings, equations=equations, decimals_choices=DECIMALS, draw_map=draw_map,
                             tex=tex, prose=prose,
                             number_math=number_math, vector_math=vector_math, fraction_math=fraction_math,
                             formula_text=formula_text, label_text=label_text,
                             weight_tex={"w_q": "W_Q", "w_k": "W_K", "w_v": "W_V", "w_o": "W_O"},
                             short_number=short_number)
templates.env.filters["edits"] = encode_edits
# {% filter prose %}text with $maths${% endfilter %}: LaTeX as template text, free of string escapes.
templates.env.filters.update(tex=tex, prose=prose)

router = APIRouter()

# Which error slot on the page shows a field's message.
ERROR_SLOTS = ("tokens", "x", "weights", "sizes", "view", "learn")


def error_slot(field: str) -> str:
    prefix = field.split("-")[0]
    if prefix.startswith("learn") or prefix == "target":
        return "learn"
    if prefix == "token":
        return "tokens"
    if prefix == "x":
        return "x"
    if prefix in EDITABLE or prefix == "edits":
        return "weights"
    if prefix in ("decimals", "stage", "head", "temperature", "blocked", "mask", "block", "window", "inspect_row",
                  "inspect_col", "guess_row", "guess_col", "pin"):
        return "view"
    if prefix in ("c", "ctoken", "pos"):
        return "x"
    return "sizes"


# parse_qsl takes about 0.7 µs a field and 4 ns a byte: a form past either bound (about 1.5 ms of
# parsing) is parsed in a thread. The default preset's form has 84 fields (1 KB); a d_model 64 page has
# 20,572 without JavaScript (290 KB, ~15 ms) and 97 with it, each grid one field (110 KB, 0.4 ms).
LARGE_FORM_FIELDS = 2000
LARGE_FORM_BYTES = 384 * 1024


async def posted_fields(request: Request) -> dict[str, str]:
    """The posted form's text fields, read whole up to the largest valid form. Every edit posts
    the page's urlencoded form, so that is parsed by the standard library's parse_qsl (a third of
    the time of the multipart parser); a file upload goes through Starlette's. With JavaScript the
    page posts each grid as one field (app.form), without it one field per cell."""
    if request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        body = (await request.body()).decode("utf-8", errors="replace")

        def parse() -> list[tuple[str, str]]:
            return parse_qsl(body, keep_blank_values=True, max_num_fields=settings.max_form_fields)

        large = len(body) > LARGE_FORM_BYTES or body.count("&") >= LARGE_FORM_FIELDS
        try:  # a large form is parsed in a thread, off the event loop
            pairs = await run_in_threadpool(parse) if large else parse()
        except ValueError:
            raise HTTPException(400, f"more than {settings.max_form_fields} form fields") from None
        return dict(pairs)
    form = await request.form(max_fields=settings.max_form_fields)
    return {k: v for k, v in form.items() if isinstance(v, str)}


def _is_htmx(request: Request) -> bool:
    return request.headers.get("HX-Request") == "true"


# The routes the templates link to: resolved once per root path, not once per link per render.
LINKED_ROUTES = ("index", "update", "stages", "export", "download_scenario", "open_scenario", "swagger_ui_html",
                 "start_class", "join_class")


_ROUTE_PATHS: dict[tuple[int, str], SimpleNamespace] = {}


def page_urls(request: Request) -> SimpleNamespace:
    """Every path the page's links, forms and htmx requests use, under the request's root path
    (``urls.stages``, ``urls.static ~ 'app.css'``)."""
    key = (id(request.app.router), request.scope.get("root_path", ""))
    paths = _ROUTE_PATHS.get(key)
    if paths is None:
        paths = SimpleNamespace(**{name: request.url_for(name).path for name in LINKED_ROUTES},
                                static=request.url_for("static", path="").path)  # static ends with "/"
        if len(_ROUTE_PATHS) < 64:  # a few apps (tests) and root paths at most
            _ROUTE_PATHS[key] = paths
    return paths


def _respond(request: Request, template: str, context: dict, status: int = 200,
             headers: dict[str, str] | None = None) -> HTMLResponse:
    context.setdefault("urls", page_urls(request))
    response = templates.TemplateResponse(request, template, context, status_code=status, headers=headers)
    response.headers["Vary"] = "HX-Request"
    return response


def _link(request: Request, ctx: dict, sc: Scenario, view: View) -> str | None:
    """Put the state's permalink in the context, and the map's link to each stage; return the
    permalink when it fits in a URL. A state too large for a link gets no links at all."""
    links = stage_permalinks(page_urls(request).index, sc, view, (s.key for s in ctx["stages"]))
    url = links[view.stage]
    ctx["permalink"] = url if fits_in_url(url) else None
    ctx["stage_links"] = links if all(fits_in_url(u) for u in links.values()) else {}
    return ctx["permalink"]


def _workspace_context(sc: Scenario, view: View, error: FormError | None = None) -> dict:
    ctx = page_context(sc, view)
    ctx["grids"] = editor_grids(sc, view, ctx["first_run"], ctx["stack"])
    ctx["error"] = error
    ctx["error_slot"] = error_slot(error.field) if error else ""
    ctx["error_slots"] = ERROR_SLOTS
    return ctx


def apply_action(sc: Scenario, view: View, action: str) -> tuple[Scenario, View]:
    """The buttons: pin the state or go back to the pin, add or remove a token, new random weights,
    and the Learn panel's training steps and reset."""
    if action == "pin":
        return sc, replace(view, pin=encode_pin(sc))
    if action == "restore_pin" and view.pin:
        sc = decode_pin(view.pin)
        return sc, replace(view, learning=fit(view.learning, sc))
    if view.learning is not None and action in STEP_ACTIONS:
        sc, learning = train_page(sc, view.learning, STEP_ACTIONS[action])
        return sc, replace(view, learning=learning)
    if view.learning is not None and action == "learn_reset" and view.learning.before:
        sc, learning = reset(view.learning)
        return sc, replace(view, learning=learning)
    sc = _structural(sc, action)
    return sc, replace(view, learning=fit(view.learning, sc))


def _structural(sc: Scenario, action: str) -> Scenario:
    if action in ("add_token", "add_ctoken"):
        return add_token(sc, source=action == "add_ctoken")
    for prefix, source in (("remove_token-", False), ("remove_ctoken-", True)):
        if action.startswith(prefix):
            index = action.removeprefix(prefix)
            return remove_token(sc, int(index) if is_index(index) else -1, source=source)
    if action == "new_weights":
        return new_weights(sc)
    return sc


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def index(request: Request, preset: str = DEFAULT_PRESET) -> HTMLResponse:
    params = request.query_params
    try:
        if "shape" in params:  # a full state, e.g. a shared link
            sc, view = read_page(params)
        else:  # a preset, with any view settings the link gives (?preset=bank-river&stage=softmax)
            sc, view = preset_page(preset if preset in PRESETS else DEFAULT_PRESET)
            given = {key: params[key] for key in VIEW_FIELDS if key in params}
            if given:
                sc, view = read_page({**dict(state_query(sc, view)), **given})
    except FormError as e:
        sc, view = from_preset(DEFAULT_PRESET)
        return _respond(request, "index.html", _workspace_context(sc, view, e), status=422)
    ctx = _workspace_context(sc, view)
    _link(request, ctx, sc, view)
    return _respond(request, "index.html", ctx)


@router.post("/", response_class=HTMLResponse, include_in_schema=False)
async def update(request: Request) -> Response:
    return await _handle(request, _update)


async def _handle(request: Request, work: Callable[[Request, dict[str, str], classroom.Lesson | None], Response]
                  ) -> Response:
    """A post of the page's form: read it, do ``work`` (on the loop or in a thread), and on a teacher's
    page in a live class, show the result to the class (app.classroom)."""
    fields = await posted_fields(request)
    lesson = await classroom.page_lesson(request, fields)
    if lesson is not None:
        fields = classroom.class_fields(fields)
    response = await _off_loop(fields, lambda: work(request, fields, lesson))
    return await classroom.teacher_edit(request, lesson, fields) or response


def _update(request: Request, fields: dict[str, str], lesson: classroom.Lesson | None = None) -> Response:
    template = "partials/workspace.html" if _is_htmx(request) else "index.html"
    try:
        sc, view = read_page(fields)
        sc, view = apply_action(sc, view, fields.get("action", ""))
        if not _is_htmx(request) and fields.get("action"):  # without JavaScript: an edit keeps the inputs open
            view = replace(view, panels=view.panels | {"inputs"})
        ctx = _workspace_context(sc, view)
        ctx["classroom"] = classroom.finish(lesson, sc, view)
    except FormError as e:
        return _error_response(request, fields, e, lesson)
    request.state.shown = (sc, view)
    url = _link(request, ctx, sc, view)
    return _respond(request, template, ctx, headers=_address(url, lesson))


def _address(url: str | None, lesson: classroom.Lesson | None, header: str = "HX-Push-Url") -> dict[str, str] | None:
    """The address bar follows the state, except in a class, where it keeps the class's link (a
    reload brings back the class)."""
    return {header: url} if url and lesson is None else None


# A form of at most this many values (the default preset posts 84, a 16-token d_model 16 page about 1,000)
# is answered on the event loop: its whole render takes about a millisecond, less than the hop to a
# worker thread costs. A larger one is computed in a thread, so it never holds up the small ones. A
# joined grid counts each of its cells: the work follows the sizes, not how the form spells them.
INLINE_VALUES = 400


async def _off_loop(fields: Mapping[str, str], work: Callable[[], Response]) -> Response:
    """``work()`` on the event loop for a small form, in the thread pool for a large one."""
    if count_values(fields) <= INLINE_VALUES:
        return work()
    return await run_in_threadpool(work)


@router.post("/stages", response_class=HTMLResponse, include_in_schema=False)
async def stages(request: Request) -> Response:
    return await _handle(request, _stages)


def _stages(request: Request, fields: dict[str, str], lesson: classroom.Lesson | None = None) -> Response:
    try:
        sc, view = read_page(fields)
        if fields.get("action") == "pin":  # pinning changes no number: the stages are enough
            sc, view = apply_action(sc, view, "pin")
        ctx = page_context(sc, view)
        ctx["classroom"] = classroom.finish(lesson, sc, view)
    except FormError as e:
        return _error_response(request, fields, e, lesson)
    request.state.shown = (sc, view)
    ctx["error_slots"] = ERROR_SLOTS
    url = _link(request, ctx, sc, view)
    if not _is_htmx(request):
        ctx["grids"] = editor_grids(sc, view, ctx["first_run"], ctx["stack"])
        return _respond(request, "index.html", ctx)
    # A step is a place to come back to (history); a value edit only updates the address.
    header = "HX-Push-Url" if "goto" in fields else "HX-Replace-Url"
    return _respond(request, "partials/stages_response.html", ctx, headers=_address(url, lesson, header))


def _error_response(request: Request, fields: dict[str, str], error: FormError,
                    lesson: classroom.Lesson | None = None) -> Response:
    """422 with the message for the field. htmx keeps the last good stages on screen (the
    response swaps only the error slots, out of band); without JavaScript the page comes back
    with what the student typed still in the inputs and the message beside them."""
    if _is_htmx(request):
        ctx = {"error": error, "error_slot": error_slot(error.field), "error_slots": ERROR_SLOTS}
        return _respond(request, "partials/errors.html", ctx, status=422, headers={"HX-Reswap": "none"})
    fields = expand_grids(fields)  # one field per cell: each typed value goes back into its own input
    sc, view = _lenient_read(fields)
    ctx = _workspace_context(sc, view, error)
    ctx["classroom"] = classroom.finish(lesson, sc, view)
    ctx["typed"] = fields
    ctx["stale"] = True
    return _respond(request, "index.html", ctx, status=422)


def read_page(fields: Mapping[str, str]) -> tuple[Scenario, View]:
    """read_form, the pinned state checked too (a bad pin is a FormError naming ``pin``), and the
    Learn panel's goal and training."""
    sc, view = read_form(fields)
    if view.pin:
        decode_pin(view.pin)
    return sc, replace(view, learning=read_learning(fields, sc))


def preset_page(key: str) -> tuple[Scenario, View]:
    """A preset's scenario and view, with its training goal in the Learn panel when it has one."""
    sc, view = from_preset(key)
    return sc, replace(view, learning=preset_learning(sc))


def _lenient_read(fields: dict[str, str]) -> tuple[Scenario, View]:
    """The student's scenario with each bad field set aside (a number cell read as 0, anything
    else as its default), so a page without JavaScript comes back with every token, size and value
    the student had; the bad text itself stays in its input, marked, beside the message. A bad
    cell is set aside in its own field, so the grids are read one field per cell here."""
    patched = expand_grids(fields)
    patched.pop("action", None)
    set_aside: set[str] = set()
    for _ in range(50):
        try:
            sc, view = read_page(patched)
            sc.run()
            return sc, view
        except FormError as e:
            if e.field in set_aside or e.field == "shape":
                break  # setting it aside did not help: the preset's page instead
            set_aside.add(e.field)
            if e.field == "mask":  # a query with no key: drop the hand-hidden cells
                patched = {k: v for k, v in patched.items() if not k.startswith("block-")}
                patched["blocked"] = ""
                patched["mask"] = "none"
            elif "-" in e.field and not e.field.startswith(("token-", "ctoken-")):
                patched[e.field] = "0"  # a grid cell, bad or missing
            elif e.field in patched and e.field.startswith(("token-", "ctoken-")):
                patched[e.field] = patched[e.field][: settings.max_token_chars]
            else:
                patched.pop(e.field, None)
    return preset_page(fields.get("preset") if fields.get("preset") in PRESETS else DEFAULT_PRESET)


# --- a scenario as a file, for states too large for a link ---------------------------------------

SCENARIO_FORMAT = "attention-scenario/1"


@router.post("/scenario", include_in_schema=False)
async def download_scenario(request: Request) -> Response:
    """The posted state as a JSON file ("Download scenario"): the permalink's fields, in order."""
    fields = await posted_fields(request)
    try:
        sc, view = read_page(fields)
    except FormError as e:
        return _error_response(request, fields, e)
    body = json.dumps({"format": SCENARIO_FORMAT, "fields": state_query(sc, view)}, ensure_ascii=False)
    return Response(body, media_type="application/json",
                    headers={"Content-Disposition": 'attachment; filename="attention-scenario.json"'})


@router.post("/scenario/open", response_class=HTMLResponse, include_in_schema=False)
async def open_scenario(request: Request) -> Response:
    """"Open scenario": the page for a file that "Download scenario" wrote."""
    form = await request.form(max_fields=settings.max_form_fields)
    upload = form.get("scenario")
    raw = await upload.read(settings.max_body_bytes + 1) if hasattr(upload, "read") else b""
    try:
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("format") != SCENARIO_FORMAT:
            raise ValueError
        fields = {str(k): str(v) for k, v in data["fields"]}
        sc, view = read_page(fields)
        sc.compute()
    except FormError as e:
        sc, view = from_preset(DEFAULT_PRESET)
        return _respond(request, "index.html", _workspace_context(sc, view, e), status=422)
    except (ValueError, KeyError, TypeError, RecursionError):  # UnicodeDecodeError is a ValueError
        sc, view = from_preset(DEFAULT_PRESET)
        error = FormError("scenario", "scenario: this file is not a scenario saved by this page")
        return _respond(request, "index.html", _workspace_context(sc, view, error), status=422)
    ctx = _workspace_context(sc, view)
    _link(request, ctx, sc, view)
    return _respond(request, "index.html", ctx)
