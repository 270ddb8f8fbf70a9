"""The page. One form holds the whole state; htmx posts it and swaps in what changed. Every control sends
the whole form, so the newest request carries every change: static/app.js swaps in no answer older than a
newer request that redraws as much (a slow edit's answer arriving after a step's).

- GET  /          the page for a preset (``?preset=pool``) or for a full state in the query string
- POST /          a structural change (tokens, sizes, head, new weights): the whole workspace for
                  htmx, or the whole page for a browser without JavaScript
- POST /stages    a value edit, a step, or an inspected cell: only the stages and the inspector; for an
                  edit of the editor's numbers alone (header Attention-Edit: value), only the stage body
Every response varies on HX-Request and Attention-Edit, since the same URL answers with a fragment or a page.
"""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.classroom.lesson import Lesson, finish
from app.config import settings
from app.i18n import gettext as _
from app.lesson.presets import DEFAULT_PRESET, PRESETS
from app.state.form import FormError
from app.state.page import apply_action, link_fields, preset_page
from app.state.permalink import state_query
from app.state.reading import read_page
from app.state.scenario import VIEW_FIELDS, Scenario, View, from_preset
from app.view.context import page_context
from app.view.editor import editor_grids
from app.web import class_hooks
from app.web.page_work import INLINE_OPERATIONS, PageRequest, Rendered, page_operations
from app.web.respond import (
    ERROR_SLOTS,
    PageWork,
    compile_templates,
    error_page,
    link_to,
    page_request,
    posted_fields,
    render,
    respond,
    run_heavy,
    run_page,
    workspace_context,
)

router = APIRouter()


def warm() -> None:
    """A heavy-lane process that runs it has imported this module, and so the whole page; its templates are
    compiled too, before its first page needs them."""
    compile_templates()


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def index(request: Request, preset: str = DEFAULT_PRESET) -> Response:
    params = request.query_params
    if "shape" not in params and not any(key in params for key in VIEW_FIELDS):  # a preset as it opens
        key = preset if preset in PRESETS else DEFAULT_PRESET
        page = page_request(request)
        if page_operations(*preset_page(key)) <= INLINE_OPERATIONS:
            return respond(_preset(page, key))
        return respond(await run_heavy(request, page, {}, _preset, page, key))
    # A full state (a shared link), or a preset with the view settings the link gives.
    return respond(await run_page(request, _index, link_fields(params), errors_inline=True))


def _preset(page: PageRequest, key: str) -> Rendered:
    sc, view = preset_page(key)
    return render(page, "index.html", _linked(page.urls, sc, view))


def _index(page: PageRequest, fields: dict[str, str], lesson: Lesson | None = None,
           read: tuple[Scenario, View] | None = None) -> Rendered:
    """A shared link's page: its state, or the default preset's with the message when it is not one."""
    try:
        sc, view = read or read_page(fields)
    except FormError as e:
        sc, view = from_preset(DEFAULT_PRESET)
        return render(page, "index.html", workspace_context(sc, view, e), status=422)
    return render(page, "index.html", _linked(page.urls, sc, view))


def _linked(urls: SimpleNamespace, sc: Scenario, view: View) -> dict:
    ctx = workspace_context(sc, view)
    link_to(urls, ctx, sc, view)
    return ctx


@router.post("/", response_class=HTMLResponse, include_in_schema=False)
async def update(request: Request) -> Response:
    return await _handle(request, _update)


async def _handle(request: Request, work: PageWork) -> Response:
    """A post of the page's form: read it, do ``work`` (on the loop or in the heavy lane), and on a
    teacher's page in a live class, show the result to the class (app.web.classroom)."""
    fields = await posted_fields(request)
    lesson = await class_hooks.page_lesson(request, fields)
    if lesson is not None:
        fields = class_hooks.class_fields(fields)
    rendered = await run_page(request, work, fields, lesson)
    if rendered.shown is not None:
        request.state.shown = rendered.shown
    response = respond(rendered)
    return await class_hooks.teacher_edit(request, lesson, fields) or response

def _update(page: PageRequest, fields: dict[str, str], lesson: Lesson | None = None,
            read: tuple[Scenario, View] | None = None) -> Rendered:
    template = "partials/workspace.html" if page.htmx else "index.html"
    try:
        sc, view = read or read_page(fields)
        sc, view = apply_action(sc, view, fields.get("action", ""))
        if not page.htmx and fields.get("action"):  # without JavaScript: an edit keeps the inputs open
            view = replace(view, panels=view.panels | {"inputs"})
        ctx = workspace_context(sc, view)
        ctx["classroom"] = finish(lesson, sc, view)
    except FormError as e:
        return error_page(page, fields, e, lesson)
    url = link_to(page.urls, ctx, sc, view)
    return render(page, template, ctx, headers=_address(url, lesson), shown=(sc, view))


def _address(url: str | None, lesson: Lesson | None, header: str = "HX-Push-Url") -> dict[str, str] | None:
    """The address bar follows the state, except in a class, where it keeps the class's link (a
    reload brings back the class)."""
    return {header: url} if url and lesson is None else None


@router.post("/stages", response_class=HTMLResponse, include_in_schema=False)
async def stages(request: Request) -> Response:
    return await _handle(request, _stages)


def _stages(page: PageRequest, fields: dict[str, str], lesson: Lesson | None = None,
            read: tuple[Scenario, View] | None = None) -> Rendered:
    try:
        sc, view = read or read_page(fields)
        if fields.get("action") == "pin":  # pinning changes no number: the stages are enough
            sc, view = apply_action(sc, view, "pin")
        value_edit = page.value_edit and not fields.get("action") and "goto" not in fields
        ctx = page_context(sc, view, shell=not value_edit)
        ctx["classroom"] = finish(lesson, sc, view)
    except FormError as e:
        return error_page(page, fields, e, lesson)
    ctx["error_slots"] = ERROR_SLOTS
    url = link_to(page.urls, ctx, sc, view)
    if not page.htmx:
        ctx["grids"] = editor_grids(sc, view, ctx["first_run"], ctx["stack"])
        return render(page, "index.html", ctx, shown=(sc, view))
    # A step is a place to come back to (history); a value edit only updates the address.
    header = "HX-Push-Url" if "goto" in fields else "HX-Replace-Url"
    if value_edit:
        # Only numbers changed: the map, the stepper, the view options and the closed panels stay as they are.
        swap = {"HX-Retarget": "#stage-body", "HX-Reswap": "outerHTML"}
        return render(page, "partials/values_response.html", ctx,
                      headers={**swap, **(_address(url, lesson, header) or {})}, shown=(sc, view))
    return render(page, "partials/stages_response.html", ctx, headers=_address(url, lesson, header),
                   shown=(sc, view))



# --- a scenario as a file, for states too large for a link ---------------------------------------

SCENARIO_FORMAT = "attention-scenario/1"


@router.post("/scenario", include_in_schema=False)
async def download_scenario(request: Request) -> Response:
    """The posted state as a JSON file ("Download scenario"): the permalink's fields, in order."""
    fields = await posted_fields(request)
    return respond(await run_page(request, _download, fields))


def _download(page: PageRequest, fields: dict[str, str], lesson: Lesson | None = None,
              read: tuple[Scenario, View] | None = None) -> Rendered:
    try:
        sc, view = read or read_page(fields)
    except FormError as e:
        return error_page(page, fields, e)
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
        raise FormError("scenario", _("scenario: this file is not a scenario saved by this page")) from None
    return read_page(fields)


def _opened(page: PageRequest, raw: bytes, read: tuple[Scenario, View] | FormError | None = None) -> Rendered:
    try:
        if isinstance(read, FormError):
            raise read
        sc, view = read or _read_file(raw)
        sc.compute()
    except FormError as e:
        sc, view = from_preset(DEFAULT_PRESET)
        return render(page, "index.html", workspace_context(sc, view, e), status=422)
    return render(page, "index.html", _linked(page.urls, sc, view), shown=(sc, view))
