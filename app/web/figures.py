"""Save figure: any figure of the pages as an SVG document or a PNG, for a slide or a script.

- GET  /figure.svg, /figure.png        a permalink's query plus ``figure=`` (which figure, app.view.figure.
                                       stage_figures), and the page's own ``stage=`` and ``head=`` (from 0)
- POST /figure.svg, /figure.png        the page's form (its Save figure buttons; a state too large for a link),
                                       ``figure`` and ``stage`` in the action's query or the form
- GET  /model/figure.svg|.png          the "Your sentence" page's query plus ``figure=heads|head``
- GET  /decoder/figure.svg|.png        the "Next word" page's query plus ``figure=heads|head|candidates``
- GET  /translate/figure.svg|.png      the "Translate" page's query plus ``figure=lines|heads``

A bad field is a 422 naming it, in the shape of the API's errors. The SVG is the figure's document
(app.view.figure); the PNG is that document drawn by resvg at twice its size on white, with the fonts in
static/fonts and no system font, so a PNG is the same on every server. A large scenario's figure is drawn in the
heavy lane, as its page would be (app.web.page_work).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import resvg_py
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from app.classroom.lesson import finish, heavy, real_page, shown
from app.classroom.store import Rooms
from app.i18n import gettext as _
from app.maths.bert import bert_operations
from app.maths.llama import decoder_operations
from app.serving.real_models import language_model, sentence_model, translator
from app.state.decoder_state import read_decoder_page
from app.state.form import FormError
from app.state.model_state import read_model_page
from app.state.page import link_fields
from app.state.reading import read_page
from app.state.scenario import Scenario, View
from app.state.translate_state import read_translate_page
from app.view.figure.drawings import predictions_figure
from app.view.figure.model_figures import decoder_figure, model_figure
from app.view.figure.stage_figures import SavedFigure, page_figure
from app.view.figure.translator_figures import translator_figure
from app.web.class_access import TeacherOf
from app.web.class_hooks import lesson_for, rooms
from app.web.lanes import LaneBusy, LaneTimeout
from app.web.page_work import INLINE_OPERATIONS, Rendered, is_large_form, page_operations
from app.web.respond import busy_message, encoded, field_error, posted_fields, refused_pin, respond

router = APIRouter()

FONTS = Path(__file__).resolve().parents[2] / "static" / "fonts"
# DejaVu for Latin, Greek and maths; WenQuanYi Micro Hei (cut to the Chinese page's characters) for a Chinese figure.
FONT_FILES = [str(FONTS / name) for name in ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "WenQuanYiMicroHei-subset.ttf")]
PNG_ZOOM = 2  # pixels per SVG unit: sharp on a projector and on a high-density screen
MAX_PNG_PIXELS = 16_000_000  # past this (a 64-token FFN's 256 columns), a PNG is drawn at a lower density
_SIZE = re.compile(r'<svg [^>]*?width="([\d.]+)" height="([\d.]+)"')
MEDIA_TYPES = {"svg": "image/svg+xml", "png": "image/png"}
FIGURE_FIELDS = ("figure", "stage")  # the action's query names the figure over the form's own fields


def png_zoom(svg: str) -> float:
    """PNG_ZOOM, or less for a figure so large that its PNG would pass MAX_PNG_PIXELS."""
    size = _SIZE.search(svg)
    area = float(size[1]) * float(size[2]) if size else 0.0
    return PNG_ZOOM if area * PNG_ZOOM**2 <= MAX_PNG_PIXELS else math.sqrt(MAX_PNG_PIXELS / area)


def png_of(svg: str) -> bytes:
    """The SVG document drawn at PNG_ZOOM (at most MAX_PNG_PIXELS) on white, with the vendored fonts only."""
    return bytes(resvg_py.svg_to_bytes(svg_string=svg, zoom=png_zoom(svg), background="#ffffff",
                                       skip_system_fonts=True, font_files=FONT_FILES))


def _file(saved: SavedFigure, fmt: str) -> Rendered:
    body: str | bytes = saved.svg if fmt == "svg" else png_of(saved.svg)
    return Rendered(200, body, MEDIA_TYPES[fmt], {
        "Content-Disposition": f'attachment; filename="{saved.stem}.{fmt}"', "X-Content-Type-Options": "nosniff"})


def _asked_head(fields: dict[str, str]) -> int | None:
    raw = fields.get("head", "").strip()
    return int(raw) if raw.isdigit() else None  # anything else the page's reader names as a bad head


def figure_file(fields: dict[str, str], fmt: str, where: str, read: tuple[Scenario, View] | None = None) -> Rendered:
    """The toy page's figure as ``fmt``, or the 422 naming the field that stops it."""
    try:
        sc, view = read or read_page(fields)
        return _file(page_figure(sc, view, fields.get("figure", ""), _asked_head(fields)), fmt)
    except FormError as e:
        return field_error(e, where)


async def _page_answer(request: Request, fields: dict[str, str], fmt: str, where: str) -> Response:
    """An SVG on the event loop for a light scenario, in the heavy lane for a large one (as app.web.export); a PNG
    always in the heavy lane: drawing it takes longer than the run. A pinned state that cannot be one first."""
    refused = await refused_pin(fields)
    if refused is not None:
        return respond(field_error(refused, where))
    if fmt == "svg" and not is_large_form(fields):
        try:
            read = read_page(fields)
        except FormError as e:
            return respond(field_error(e, where))
        if page_operations(*read) <= INLINE_OPERATIONS:
            return respond(figure_file(fields, fmt, where, read))
    try:
        accept_encoding = request.headers.get("accept-encoding", "")
        return respond(await request.app.state.lanes.in_process(encoded, accept_encoding, figure_file, fields, fmt,
                                                                where, None))
    except (LaneBusy, LaneTimeout) as e:
        return respond(field_error(FormError("figure", busy_message(request, e)), where, 503, {"Retry-After": "5"}))


def _link(request: Request) -> dict[str, str]:
    params = request.query_params
    return {**link_fields(params), **{k: params[k] for k in FIGURE_FIELDS if k in params}}


async def _posted(request: Request) -> dict[str, str]:
    params = request.query_params
    return {**await posted_fields(request), **{k: params[k] for k in FIGURE_FIELDS if k in params}}


@router.get("/figure.svg", include_in_schema=False, name="figure_svg")
async def figure_svg(request: Request) -> Response:
    return await _page_answer(request, _link(request), "svg", "query")


@router.get("/figure.png", include_in_schema=False, name="figure_png")
async def figure_png(request: Request) -> Response:
    return await _page_answer(request, _link(request), "png", "query")


@router.post("/figure.svg", include_in_schema=False)
async def figure_svg_posted(request: Request) -> Response:
    return await _page_answer(request, await _posted(request), "svg", "body")


@router.post("/figure.png", include_in_schema=False)
async def figure_png_posted(request: Request) -> Response:
    return await _page_answer(request, await _posted(request), "png", "body")


# --- the real models' pages ------------------------------------------------------------------------------


def model_figure_file(pairs: list[tuple[str, str]], fmt: str) -> Rendered:
    model = sentence_model().files()
    try:
        return _file(model_figure(model, read_model_page(model, pairs), dict(pairs).get("figure", "")), fmt)
    except FormError as e:
        return field_error(e)


def translator_figure_file(pairs: list[tuple[str, str]], fmt: str) -> Rendered:
    service = translator()
    try:
        page = read_translate_page(service.files(), pairs)
        run = service.run(page.direction, page.text)
        return _file(translator_figure(service.files()[page.direction], run, page, dict(pairs).get("figure", "")), fmt)
    except FormError as e:
        return field_error(e)


def decoder_figure_file(pairs: list[tuple[str, str]], fmt: str) -> Rendered:
    model = language_model().files()
    try:
        return _file(decoder_figure(model, read_decoder_page(model, pairs), dict(pairs).get("figure", "")), fmt)
    except FormError as e:
        return field_error(e)


async def _model_answer(request: Request, work: Callable[[list[tuple[str, str]], str], Rendered], operations: int,
                        fmt: str) -> Response:
    pairs = [(k, v) for k, v in request.query_params.multi_items()]
    accept_encoding = request.headers.get("accept-encoding", "")
    return respond(await request.app.state.lanes.run(operations, lambda: encoded(accept_encoding, work, pairs, fmt)))


@router.get("/model/figure.svg", include_in_schema=False, name="model_figure_svg")
async def model_figure_svg(request: Request) -> Response:
    return await _model_answer(request, model_figure_file, 2 * bert_operations(64), "svg")


@router.get("/model/figure.png", include_in_schema=False, name="model_figure_png")
async def model_figure_png(request: Request) -> Response:
    return await _model_answer(request, model_figure_file, 2 * bert_operations(64), "png")


TRANSLATE_OPERATIONS = 40_000_000  # a translation of 128 pieces, and the figure's drawing


@router.get("/translate/figure.svg", include_in_schema=False, name="translate_figure_svg")
async def translate_figure_svg(request: Request) -> Response:
    return await _model_answer(request, translator_figure_file, TRANSLATE_OPERATIONS, "svg")


@router.get("/translate/figure.png", include_in_schema=False, name="translate_figure_png")
async def translate_figure_png(request: Request) -> Response:
    return await _model_answer(request, translator_figure_file, TRANSLATE_OPERATIONS, "png")


def _loading() -> Response:
    """While the language model is still being read at start: come back in a few seconds, as its page says."""
    return Response(_("The language model is still being read: try again in a few seconds."), status_code=503,
                    media_type="text/plain", headers={"Retry-After": "5"})


async def _decoder_answer(request: Request, fmt: str) -> Response:
    if not language_model().ready():
        return _loading()
    return await _model_answer(request, decoder_figure_file, decoder_operations(128), fmt)


@router.get("/decoder/figure.svg", include_in_schema=False, name="decoder_figure_svg")
async def decoder_figure_svg(request: Request) -> Response:
    return await _decoder_answer(request, "svg")


@router.get("/decoder/figure.png", include_in_schema=False, name="decoder_figure_png")
async def decoder_figure_png(request: Request) -> Response:
    return await _decoder_answer(request, "png")


# The teacher's figure of a live class: the class's predictions of one cell (app.web.classroom's results).
@router.get("/class/{code}/figure.{fmt}", name="class_figure", include_in_schema=False)
async def class_figure(request: Request, fmt: str, store: Annotated[Rooms, Depends(rooms)], teacher: TeacherOf,
                       cell: str = "") -> Response:
    """Save figure for the teacher: one predicted cell's histogram (``cell``, as the quiz names it: softmax.0.2.1),
    as the teacher's page draws it, in an SVG document or a PNG."""
    if fmt not in ("svg", "png"):
        return Response(_("no such figure format: svg or png"), status_code=404, media_type="text/plain")
    if teacher is None:
        return Response(_("not this class's teacher"), status_code=403, media_type="text/plain")
    room = await store.get(teacher.code)
    if room is None:
        return Response(_("this class has ended"), status_code=404, media_type="text/plain")
    sh = await shown(room) if real_page(room.state) is None else None
    lesson = None if sh is None else finish(await lesson_for(request, room, "teacher", key=teacher.key),
                                            sh.sc, sh.view, sh)
    question = next((q for q in (lesson.questions if lesson else ()) if q.ref == cell), None)
    if question is None:
        return JSONResponse({"detail": [{"loc": ["query", "cell"], "type": "value_error",
                                         "msg": f"cell: no predictions of {cell!r} on the class's stage"}]},
                            status_code=422)
    svg = predictions_figure(question.chart, _("The class's predictions: {label}").format(label=question.label))
    body: str | bytes = svg if fmt == "svg" else await heavy(lambda: png_of(svg))
    return Response(body, media_type="image/svg+xml" if fmt == "svg" else "image/png", headers={
        "Content-Disposition": f'attachment; filename="class-predictions-{cell.replace(".", "-")}.{fmt}"'})
