"""What the page's routes (app.web.pages, app.web.classroom) answer with: the templates, the posted form
read once, the page's links, a workspace's context, a bad field's message, and the heavy lane's answer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qsl

import nbformat
from babel.messages.extract import extract_javascript
from fastapi import HTTPException, Request
from fastapi.responses import Response
from fastapi.templating import Jinja2Templates
from jinja2 import pass_context
from jinja2.utils import htmlsafe_json_dumps
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool

from app.classroom.lesson import Lesson, finish
from app.config import settings
from app.i18n import (
    DEFAULT,
    HTML_LANG,
    LANGUAGE_NAMES,
    LANGUAGES,
    angle,
    cosine,
    count,
    decimal,
    decimal_sign,
    frequency,
    gettext,
    language,
    local_decimals,
    logit,
    ngettext,
    percent,
    pgettext,
    probability,
    score,
    speaking,
    temperature,
    weight,
)
from app.lesson.articles import source_line
from app.maths.registry import REGISTRY
from app.state.form import DECIMALS, EDITABLE, FormError
from app.state.grids import expand_grids
from app.state.page import lenient_read
from app.state.permalink import MAX_URL_CHARS, fits_in_url, stage_permalinks
from app.state.pin import PINNED_FIELDS, check_pin_size
from app.state.reading import read_page
from app.state.scenario import Scenario, View, encode_edits
from app.view.charts.learn import short_number
from app.view.context import page_context
from app.view.editor import editor_grids
from app.view.map_drawing import draw_map
from app.view.reads_english import splits
from app.view.typeset import (
    equations,
    formula_text,
    fraction_math,
    label_text,
    lead_sentence,
    number_math,
    prose,
    tex,
    title_text,
    vector_math,
)
from app.web.compression import MINIMUM_SIZE, compress, preferred_encoding
from app.web.lanes import LaneBusy, LaneTimeout
from app.web.page_work import INLINE_OPERATIONS, PageRequest, Rendered, is_large_form, page_operations

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "templates"
STATIC_DIR = Path(__file__).resolve().parents[2] / "static"


@cache
def _script_message_ids() -> tuple[str, ...]:
    """Every t("…") message of the page's own scripts (static/*.js), read once with Babel's extractor, the
    same that writes them into the catalogue."""
    found: set[str] = set()
    for path in sorted(STATIC_DIR.glob("*.js")):
        with path.open("rb") as f:
            for _line, _func, message, _comments in extract_javascript(f, {"t": None}, [], {}):
                if isinstance(message, str):
                    found.add(message)
    return tuple(sorted(found))


@cache
def script_messages(lang: str) -> Markup:
    """The scripts' messages in ``lang`` as the JSON static/i18n.js reads (empty in English: t() returns its
    English text), escaped for a <script type="application/json"> element."""
    if lang == DEFAULT:
        return Markup("{}")
    with speaking(lang):
        pairs = {m: gettext(m) for m in _script_message_ids() if gettext(m) != m}
    return htmlsafe_json_dumps(pairs, dumps=json.dumps, ensure_ascii=False)
templates = Jinja2Templates(directory=TEMPLATES_DIR)
templates.env.auto_reload = False  # compiled once: no stat of every template file on every render
# Every template kept in a plain dict: Jinja's default LRU cache takes a lock and walks its queue on each
# {% include %} (tens of microseconds with this many templates, nine times an edit).
templates.env.cache = {}
# Every sentence is a message of the request's language (app.i18n): _("…"), ngettext, {% trans %}…{% endtrans %}.
templates.env.add_extension("jinja2.ext.i18n")
templates.env.policies["ext.i18n.trimmed"] = True  # a block's line breaks and indentation are not the message's
templates.env.install_gettext_callables(gettext, ngettext, newstyle=False, pgettext=pgettext)
templates.env.globals.update(settings=settings, equations=equations, decimals_choices=DECIMALS, draw_map=draw_map,
                             tex=tex, prose=prose, lead_sentence=lead_sentence,
                             number_math=number_math, vector_math=vector_math, fraction_math=fraction_math,
                             formula_text=formula_text, label_text=label_text, title_text=title_text,
                             weight_tex={"w_q": "W_Q", "w_k": "W_K", "w_v": "W_V", "w_o": "W_O"},
                             short_number=short_number, max_url_chars=MAX_URL_CHARS,
                             models=REGISTRY,  # the real models' names and sizes
                             **{key: spec.config for key, spec in REGISTRY.items()},
                             languages=LANGUAGES, language_names=LANGUAGE_NAMES, language=language, html_lang=HTML_LANG,
                             decimal_sign=decimal_sign,
                             script_messages=lambda: script_messages(language()),
                             reads_english=lambda model: splits(model, language()), source_line=source_line)
templates.env.filters["edits"] = encode_edits


def per_request(write: Callable[..., str]) -> Callable[..., str]:
    """A filter that writes in the request's language, never folded into a template when it is compiled: Jinja
    evaluates a filter of a constant (``{{ 1 | decimal(3) }}``) once, at compile time, unless it takes the context."""
    @pass_context
    def written(_context: object, value: object, *args: object, **kwargs: object) -> str:
        return write(value, *args, **kwargs)
    return written


# Each writes in the reader's language. {% filter prose %}text with $maths${% endfilter %}: LaTeX as template text,
# free of string escapes. {{ head.score | num }}: a number the view wrote in English (0.25, 1,234) as the reader's
# language writes it. {{ b.probability | percent }}, {{ b.logit | logit }}, {{ v | decimal(2) }}: a number (a
# float, not text) of each kind, written by app.i18n.
templates.env.filters.update({name: per_request(write) for name, write in {
    "tex": tex, "prose": prose, "num": lambda text: local_decimals(str(text)),
    "decimal": decimal, "percent": percent, "count": count, "weight": weight, "probability": probability,
    "logit": logit, "score": score, "cosine": cosine, "angle": angle, "frequency": frequency,
    "temperature": temperature}.items()})


def compile_templates() -> int:
    """Compile every template now (a server's start, in a thread): Jinja compiles one on its first use, and a page
    rendered on the event loop then held it for a tenth of a second (a hall's /healthz waited behind it)."""
    names = templates.env.list_templates(filter_func=lambda name: not name.startswith("."))
    for name in names:
        templates.get_template(name)
    return len(names)


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
    page posts each grid as one field (app.state.grids), without it one field per cell."""
    if request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        body = (await request.body()).decode("utf-8", errors="replace")

        def parse() -> list[tuple[str, str]]:
            return parse_qsl(body, keep_blank_values=True, max_num_fields=settings.max_form_fields)

        large = len(body) > LARGE_FORM_BYTES or body.count("&") >= LARGE_FORM_FIELDS
        try:  # a large form is parsed in a thread, off the event loop
            pairs = await run_in_threadpool(parse) if large else parse()
        except ValueError:
            raise HTTPException(400, gettext("more than {most} form fields").format(
                most=settings.max_form_fields)) from None
        return dict(pairs)
    form = await request.form(max_fields=settings.max_form_fields)
    return {k: v for k, v in form.items() if isinstance(v, str)}

def _is_htmx(request: Request) -> bool:
    return request.headers.get("HX-Request") == "true"


# The page's script sends this header with an edit of the editor's number inputs alone (static/app.js):
# such an edit is answered with the stage body, not the whole stages section (app.web.pages).
VALUE_EDIT_HEADER = "Attention-Edit"
VARY = f"HX-Request, {VALUE_EDIT_HEADER}"  # the same URL answers with a page, the stages or the stage body


def page_request(request: Request) -> PageRequest:
    htmx = _is_htmx(request)
    return PageRequest(htmx=htmx, urls=page_urls(request), port=request.url.port,
                       accept_encoding=request.headers.get("accept-encoding", ""),
                       value_edit=htmx and request.headers.get(VALUE_EDIT_HEADER) == "value")


# The routes the templates link to: resolved once per root path, not once per link per render.
LINKED_ROUTES = ("index", "update", "stages", "export", "notebook", "download_scenario", "open_scenario",
                 "swagger_ui_html", "start_class", "join_class", "patching_page",
                 *(spec.route for spec in REGISTRY.values()))


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


def render(page: PageRequest, template: str, context: dict, status: int = 200,
           headers: Mapping[str, str] | None = None, shown: tuple[Scenario, View] | None = None) -> Rendered:
    context.setdefault("urls", page.urls)
    context.setdefault("port", page.port)
    html = templates.get_template(template).render(context)
    return Rendered(status, html, "text/html", {**(headers or {}), "Vary": VARY}, shown)


def field_error(error: FormError, where: str = "query", status: int = 422,
                headers: Mapping[str, str] | None = None) -> Rendered:
    """A bad field as JSON in the shape of the app's validation errors (app.main.validation_error): for a
    download (an export, a notebook), which has no page to show the message beside its field."""
    detail = [{"loc": [where, error.field], "field": error.field, "msg": error.message, "type": "value_error"}]
    return Rendered(status, json.dumps({"detail": detail}), "application/json",
                    {"X-Content-Type-Options": "nosniff", **(headers or {})})


def notebook_download(read: Callable[[], object], notebook: Callable[[object], object], filename: str) -> Rendered:
    """A page's head as a .ipynb download: ``read()`` the page's state (a FormError is the 422 naming the field),
    then ``notebook(state)``, written by nbformat."""
    try:
        state = read()
    except FormError as error:
        return field_error(error)
    return Rendered(200, nbformat.writes(notebook(state)), "application/x-ipynb+json", {
        "Content-Disposition": f'attachment; filename="{filename}"', "X-Content-Type-Options": "nosniff"})


def respond(rendered: Rendered) -> Response:
    return Response(rendered.body, rendered.status, dict(rendered.headers or {}), rendered.media_type)


def page_response(request: Request, template: str, context: dict, status: int = 200,
                  headers: dict[str, str] | None = None) -> Response:
    return respond(render(page_request(request), template, context, status, headers))


def link(request: Request, ctx: dict, sc: Scenario, view: View) -> str | None:
    return link_to(page_urls(request), ctx, sc, view)


def link_to(urls: SimpleNamespace, ctx: dict, sc: Scenario, view: View) -> str | None:
    """Put the state's permalink in the context, and the map's link to each stage; return the
    permalink when it fits in a URL. A state too large for a link gets no links at all."""
    links = stage_permalinks(urls.index, sc, view, (s.key for s in ctx["stages"]))
    url = links[view.stage]
    ctx["permalink"] = url if fits_in_url(url) else None
    ctx["stage_links"] = links if all(fits_in_url(u) for u in links.values()) else {}
    return ctx["permalink"]


def workspace_context(sc: Scenario, view: View, error: FormError | None = None) -> dict:
    ctx = page_context(sc, view)
    ctx["grids"] = editor_grids(sc, view, ctx["first_run"], ctx["stack"])
    ctx["error"] = error
    ctx["error_slot"] = error_slot(error.field) if error else ""
    ctx["error_slots"] = ERROR_SLOTS
    return ctx


PageWork = Callable[[PageRequest, dict[str, str], Lesson | None, tuple[Scenario, View] | None], Rendered]


async def run_page(request: Request, work: PageWork, fields: dict[str, str],
                   lesson: Lesson | None = None, *, errors_inline: bool = False) -> Rendered:
    """``work`` on the event loop when the page is light, else in a worker process of the heavy lane
    (app.web.lanes): decided from the form and the scenario's sizes before any work starts (app.web.page_work).
    A bad form's message is light for htmx (and for ``errors_inline`` work); without JavaScript the page
    comes back whole, with the student's values set aside one by one, which is heavy."""
    page = page_request(request)
    refused = await refused_pin(fields)
    if refused is not None:  # a bomb, refused before any other work
        if page.htmx:
            return error_page(page, fields, refused, lesson)
        fields = {name: value for name, value in fields.items() if name not in PINNED_FIELDS}
        if not is_large_form(fields):
            return error_page(page, fields, refused, lesson)
        return await run_heavy(request, page, fields, error_page, page, fields, refused, lesson)
    if not is_large_form(fields):
        try:
            read = read_page(fields)
        except FormError as e:
            if page.htmx:
                return error_page(page, fields, e, lesson)
            if errors_inline:
                return work(page, fields, lesson, None)
        else:
            if page_operations(*read, fields.get("action", "")) <= INLINE_OPERATIONS:
                return work(page, fields, lesson, read)
    return await run_heavy(request, page, fields, work, page, fields, lesson, None)


INLINE_PIN_CHECK_CHARS = 2048  # a pin this short inflates to at most 2 MB: checked on the event loop
# Longer pins are checked on one thread of their own: zlib lets go of the GIL, so the event loop goes on, and one
# thread bounds what bombs can take (a core at most, and one thread's memory: on the pool's threads each kept its
# own malloc arena, and the worker grew by 250 MB under four clients posting bombs).
_PIN_CHECKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pin-check")


async def refused_pin(fields: Mapping[str, str]) -> FormError | None:
    """The error of a pinned state that cannot be one (app.state.pin.check_pin_size), found before any other work
    and never queued behind the heavy lane's pages: a long pin is inflated on the pin checker's thread, a short
    one here. None when every pinned state is within its bounds."""
    for name in PINNED_FIELDS:
        text = fields.get(name, "")
        try:
            if len(text) > INLINE_PIN_CHECK_CHARS:
                await asyncio.get_running_loop().run_in_executor(_PIN_CHECKER, check_pin_size, text, name)
            elif text:
                check_pin_size(text, name)
        except FormError as e:
            return e
    return None


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
        return error_page(page, fields, error, status=503, headers={"Retry-After": "5"})
    return render(page, "busy.html", {"title": gettext("The server is busy"), "message": error.message}, status=503,
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
        return gettext("The server is busy with other large pages: try again in a moment.")
    return gettext("This page needs more than {seconds} s of work: make it smaller (fewer tokens, heads or "
                   "blocks).").format(seconds=f"{request.app.state.lanes.heavy_seconds:g}")


def error_response(request: Request, fields: dict[str, str], error: FormError,
                   lesson: Lesson | None = None) -> Response:
    return respond(error_page(page_request(request), fields, error, lesson))


def error_page(page: PageRequest, fields: dict[str, str], error: FormError, lesson: Lesson | None = None,
               status: int = 422, headers: Mapping[str, str] | None = None) -> Rendered:
    """422 with the message for the field. htmx keeps the last good stages on screen (the
    response swaps only the error slots, out of band); without JavaScript the page comes back
    with what the student typed still in the inputs and the message beside them."""
    if page.htmx:
        ctx = {"error": error, "error_slot": error_slot(error.field), "error_slots": ERROR_SLOTS}
        return render(page, "partials/errors.html", ctx, status=status,
                      headers={**(headers or {}), "HX-Reswap": "none"})
    fields = expand_grids(fields)  # one field per cell: each typed value goes back into its own input
    sc, view = lenient_read(fields)
    ctx = workspace_context(sc, view, error)
    ctx["classroom"] = finish(lesson, sc, view)
    ctx["typed"] = fields
    ctx["stale"] = True
    return render(page, "index.html", ctx, status=status, headers=headers)

