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

from app.config import settings
from app.lesson.presets import DEFAULT_PRESET, PRESETS
from app.state.form import DECIMALS, EDITABLE, FormError, expand_grids, is_index, visible
from app.state.learning import STEP_ACTIONS, fit, preset_learning, read_learning, reset, train_page
from app.state.permalink import fits_in_url, stage_permalinks, state_query
from app.state.pin import decode_pin, encode_pin
from app.state.scenario import (
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
from app.view.charts.learn import short_number
from app.view.context import page_context
from app.view.editor import editor_grids
from app.view.map_drawing import draw_map
from app.view.typeset import equations, formula_text, fraction_math, label_text, number_math, prose, tex, vector_math
from app.web import classroom
from app.web.compression import MINIMUM_SIZE, compress, preferred_encoding
from app.web.lanes import LaneBusy, LaneTimeout
from app.web.page_work import INLINE_OPERATIONS, PageRequest, Rendered, is_large_form, page_operations

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "templates"
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
                  "inspect_col", "guess_row", "guess_col", "pin", "busy"):
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
    page posts each grid as one field (app.state.form), without it one field per cell."""
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


def warm() -> None:
    """Nothing: a heavy-lane process that runs it has imported this module, and so the whole page."""


def _is_htmx(request: Request) -> bool:
    return request.headers.get("HX-Request") == "true"


def page_request(request: Request) -> PageRequest:
    return PageRequest(htmx=_is_htmx(request), urls=page_urls(request), port=request.url.port,
                       accept_encoding=request.headers.get("accept-encoding", ""))


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


def _render(page: PageRequest, template: str, context: dict, status: int = 200,
            headers: Mapping[str, str] | None = None, shown: tuple[Scenario, View] | None = None) -> Rendered:
    context.setdefault("urls", page.urls)
    context.setdefault("port", page.port)
    html = templates.get_template(template).render(context)
    return Rendered(status, html, "text/html", {**(headers or {}), "Vary": "HX-Request"}, shown)


def respond(rendered: Rendered) -> Response:
    return Response(rendered.body, rendered.status, dict(rendered.headers or {}), rendered.media_type)


def _respond(request: Request, template: str, context: dict, status: int = 200,
             headers: dict[str, str] | None = None) -> Response:
    return respond(_render(page_request(request), template, context, status, headers))


def _link(request: Request, ctx: dict, sc: Scenario, view: View) -> str | None:
    return _link_to(page_urls(request), ctx, sc, view)


def _link_to(urls: SimpleNamespace, ctx: dict, sc: Scenario, view: View) -> str | None:
    """Put the state's permalink in the context, and the map's link to each stage; return the
    permalink when it fits in a URL. A state too large for a link gets no links at all."""
    links = stage_permalinks(urls.index, sc, view, (s.key for s in ctx["stages"]))
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
async def index(request: Request, preset: str = DEFAULT_PRESET) -> Response:
    params = request.query_params
    if "shape" in params:  # a full state, e.g. a shared link
        fields = dict(params)
    else:  # a preset, with any view settings the link gives (?preset=bank-river&stage=softmax)
        key = preset if preset in PRESETS else DEFAULT_PRESET
        sc, view = preset_page(key)
        given = {key: params[key] for key in VIEW_FIELDS if key in params}
        if not given:
            page = page_request(request)
            if page_operations(sc, view) <= INLINE_OPERATIONS:
                return respond(_preset(page, key))
            return respond(await run_heavy(request, page, {}, _preset, page, key))
        fields = {**dict(state_query(sc, view)), **given}
    return respond(await run_page(request, _index, fields, errors_inline=True))


def _preset(page: PageRequest, key: str) -> Rendered:
    sc, view = preset_page(key)
    return _render(page, "index.html", _linked(page.urls, sc, view))


def _index(page: PageRequest, fields: dict[str, str], lesson: classroom.Lesson | None = None,
           read: tuple[Scenario, View] | None = None) -> Rendered:
    """A shared link's page: its state, or the default preset's with the message when it is not one."""
    try:
        sc, view = read or read_page(fields)
    except FormError as e:
        sc, view = from_preset(DEFAULT_PRESET)
        return _render(page, "index.html", _workspace_context(sc, view, e), status=422)
    return _render(page, "index.html", _linked(page.urls, sc, view))


def _linked(urls: SimpleNamespace, sc: Scenario, view: View) -> dict:
    ctx = _workspace_context(sc, view)
    _link_to(urls, ctx, sc, view)
    return ctx


@router.post("/", response_class=HTMLResponse, include_in_schema=False)
async def update(request: Request) -> Response:
    return await _handle(request, _update)


PageWork = Callable[[PageRequest, dict[str, str], "classroom.Lesson | None", "tuple[Scenario, View] | None"],
                    Rendered]


async def _handle(request: Request, work: PageWork) -> Response:
    """A post of the page's form: read it, do ``work`` (on the loop or in the heavy lane), and on a
    teacher's page in a live class, show the result to the class (app.web.classroom)."""
    fields = await posted_fields(request)
    lesson = await classroom.page_lesson(request, fields)
    if lesson is not None:
        fields = classroom.class_fields(fields)
    rendered = await run_page(request, work, fields, lesson)
    if rendered.shown is not None:
        request.state.shown = rendered.shown
    response = respond(rendered)
    return await classroom.teacher_edit(request, lesson, fields) or response


async def run_page(request: Request, work: PageWork, fields: dict[str, str],
                   lesson: classroom.Lesson | None = None, *, errors_inline: bool = False) -> Rendered:
    """``work`` on the event loop when the page is light, else in a worker process of the heavy lane
    (app.web.lanes): decided from the form and the scenario's sizes before any work starts (app.web.page_work).
    A bad form's message is light for htmx (and for ``errors_inline`` work); without JavaScript the page
    comes back whole, with the student's values set aside one by one, which is heavy."""
    page = page_request(request)
    if not is_large_form(fields):
        try:
            read = read_page(fields)
        except FormError as e:
            if page.htmx:
                return _error(page, fields, e, lesson)
            if errors_inline:
                return work(page, fields, lesson, None)
        else:
            if page_operations(*read, fields.get("action", "")) <= INLINE_OPERATIONS:
                return work(page, fields, lesson, read)
    return await run_heavy(request, page, fields, work, page, fields, lesson, None)


async def run_heavy(request: Request, page: PageRequest, fields: dict[str, str], work: Callable[..., Rendered],
                    *args: object) -> Rendered:
    """``work(*args)`` in the heavy lane (app.web.lanes); when the lane is full or the work runs out of time,
    a 503 that keeps what the student has: for htmx the message beside the last good page, without
    JavaScript a short page that sends them back to their form."""
    try:
        return await request.app.state.lanes.in_process(encoded, page.accept_encoding, work, *args)
    except (LaneBusy, LaneTimeout) as e:
        error = FormError("busy", busy_message(request, e))  # shown beside the stage, where the student looks
    if page.htmx:
        return _error(page, fields, error, status=503, headers={"Retry-After": "5"})
    return _render(page, "busy.html", {"title": "The server is busy", "message": error.message}, status=503,
                   headers={"Retry-After": "5"})


def encoded(accept_encoding: str, work: Callable[..., Rendered], *args: object) -> Rendered:
    """``work(*args)``, its body compressed as the client prefers: in the heavy lane's process, so that
    megabytes of HTML are not compressed on the event loop (the middleware leaves an encoded body as it is)."""
    rendered = work(*args)
    body = rendered.body.encode() if isinstance(rendered.body, str) else rendered.body
    encoding = preferred_encoding(accept_encoding) if len(body) >= MINIMUM_SIZE else None
    if encoding is None:
        return rendered
    headers = dict(rendered.headers or {})
    vary = ", ".join(filter(None, (headers.get("Vary"), "Accept-Encoding")))
    headers.update({"Content-Encoding": encoding, "Vary": vary})
    return replace(rendered, body=compress(body, encoding), headers=headers)


def busy_message(request: Request, e: LaneBusy | LaneTimeout) -> str:
    if isinstance(e, LaneBusy):
        return "The server is busy with other large pages: try again in a moment."
    return (f"This page needs more than {request.app.state.lanes.heavy_seconds:g} s of work: make it smaller "
            "(fewer tokens, heads or blocks).")


def _update(page: PageRequest, fields: dict[str, str], lesson: classroom.Lesson | None = None,
            read: tuple[Scenario, View] | None = None) -> Rendered:
    template = "partials/workspace.html" if page.htmx else "index.html"
    try:
        sc, view = read or read_page(fields)
        sc, view = apply_action(sc, view, fields.get("action", ""))
        if not page.htmx and fields.get("action"):  # without JavaScript: an edit keeps the inputs open
            view = replace(view, panels=view.panels | {"inputs"})
        ctx = _workspace_context(sc, view)
        ctx["classroom"] = classroom.finish(lesson, sc, view)
    except FormError as e:
        return _error(page, fields, e, lesson)
    url = _link_to(page.urls, ctx, sc, view)
    return _render(page, template, ctx, headers=_address(url, lesson), shown=(sc, view))


def _address(url: str | None, lesson: classroom.Lesson | None, header: str = "HX-Push-Url") -> dict[str, str] | None:
    """The address bar follows the state, except in a class, where it keeps the class's link (a
    reload brings back the class)."""
    return {header: url} if url and lesson is None else None


@router.post("/stages", response_class=HTMLResponse, include_in_schema=False)
async def stages(request: Request) -> Response:
    return await _handle(request, _stages)


def _stages(page: PageRequest, fields: dict[str, str], lesson: classroom.Lesson | None = None,
            read: tuple[Scenario, View] | None = None) -> Rendered:
    try:
        sc, view = read or read_page(fields)
        if fields.get("action") == "pin":  # pinning changes no number: the stages are enough
            sc, view = apply_action(sc, view, "pin")
        ctx = page_context(sc, view)
        ctx["classroom"] = classroom.finish(lesson, sc, view)
    except FormError as e:
        return _error(page, fields, e, lesson)
    ctx["error_slots"] = ERROR_SLOTS
    url = _link_to(page.urls, ctx, sc, view)
    if not page.htmx:
        ctx["grids"] = editor_grids(sc, view, ctx["first_run"], ctx["stack"])
        return _render(page, "index.html", ctx, shown=(sc, view))
    # A step is a place to come back to (history); a value edit only updates the address.
    header = "HX-Push-Url" if "goto" in fields else "HX-Replace-Url"
    return _render(page, "partials/stages_response.html", ctx, headers=_address(url, lesson, header),
                   shown=(sc, view))


def _error_response(request: Request, fields: dict[str, str], error: FormError,
                    lesson: classroom.Lesson | None = None) -> Response:
    return respond(_error(page_request(request), fields, error, lesson))


def _error(page: PageRequest, fields: dict[str, str], error: FormError, lesson: classroom.Lesson | None = None,
           status: int = 422, headers: Mapping[str, str] | None = None) -> Rendered:
    """422 with the message for the field. htmx keeps the last good stages on screen (the
    response swaps only the error slots, out of band); without JavaScript the page comes back
    with what the student typed still in the inputs and the message beside them."""
    if page.htmx:
        ctx = {"error": error, "error_slot": error_slot(error.field), "error_slots": ERROR_SLOTS}
        return _render(page, "partials/errors.html", ctx, status=status, headers={**(headers or {}),
                                                                                  "HX-Reswap": "none"})
    fields = expand_grids(fields)  # one field per cell: each typed value goes back into its own input
    sc, view = _lenient_read(fields)
    ctx = _workspace_context(sc, view, error)
    ctx["classroom"] = classroom.finish(lesson, sc, view)
    ctx["typed"] = fields
    ctx["stale"] = True
    return _render(page, "index.html", ctx, status=status, headers=headers)


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
                patched[e.field] = visible(patched[e.field])[: settings.max_token_chars]
            else:
                patched.pop(e.field, None)
    return preset_page(fields.get("preset") if fields.get("preset") in PRESETS else DEFAULT_PRESET)


# --- a scenario as a file, for states too large for a link ---------------------------------------

SCENARIO_FORMAT = "attention-scenario/1"


@router.post("/scenario", include_in_schema=False)
async def download_scenario(request: Request) -> Response:
    """The posted state as a JSON file ("Download scenario"): the permalink's fields, in order."""
    fields = await posted_fields(request)
    return respond(await run_page(request, _download, fields))


def _download(page: PageRequest, fields: dict[str, str], lesson: classroom.Lesson | None = None,
              read: tuple[Scenario, View] | None = None) -> Rendered:
    try:
        sc, view = read or read_page(fields)
    except FormError as e:
        return _error(page, fields, e)
    body = json.dumps({"format": SCENARIO_FORMAT, "fields": state_query(sc, view)}, ensure_ascii=False)
    return Rendered(200, body, "application/json",
                    {"Content-Disposition": 'attachment; filename="attention-scenario.json"'})


INLINE_FILE_BYTES = 64 * 1024  # a scenario file this large is read in the heavy lane


@router.post("/scenario/open", response_class=HTMLResponse, include_in_schema=False)
async def open_scenario(request: Request) -> Response:
    """"Open scenario": the page for a file that "Download scenario" wrote."""
    form = await request.form(max_fields=settings.max_form_fields)
    upload = form.get("scenario")
    raw = await upload.read(settings.max_body_bytes + 1) if hasattr(upload, "read") else b""
    page = page_request(request)
    if len(raw) <= INLINE_FILE_BYTES:
        try:
            read = _read_file(raw)
        except FormError as e:
            return respond(_opened(page, raw, e))
        if page_operations(*read) <= INLINE_OPERATIONS:
            return respond(_opened(page, raw, read))
    return respond(await run_heavy(request, page, {}, _opened, page, raw, None))


def _read_file(raw: bytes) -> tuple[Scenario, View]:
    """The state a scenario file holds, or a FormError naming ``scenario`` (or the bad field in it)."""
    try:
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("format") != SCENARIO_FORMAT:
            raise ValueError
        fields = {str(k): str(v) for k, v in data["fields"]}
    except (ValueError, KeyError, TypeError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise FormError("scenario", "scenario: this file is not a scenario saved by this page") from None
    return read_page(fields)


def _opened(page: PageRequest, raw: bytes, read: tuple[Scenario, View] | FormError | None = None) -> Rendered:
    try:
        if isinstance(read, FormError):
            raise read
        sc, view = read or _read_file(raw)
        sc.compute()
    except FormError as e:
        sc, view = from_preset(DEFAULT_PRESET)
        return _render(page, "index.html", _workspace_context(sc, view, e), status=422)
    return _render(page, "index.html", _linked(page.urls, sc, view), shown=(sc, view))
