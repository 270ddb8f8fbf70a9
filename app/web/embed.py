"""Views to embed in another site's page (a course in Moodle): one stage, the attention lines alone, or a real
model's head, without the page's header, footer, map or panels, still interactive, sized to their frame.

- GET  /embed?<a permalink's query>&stage=softmax   one stage of the toy pipeline; ``&figure=lines`` for the
                                                    attention lines alone
- POST /embed          a structural change posted from inside the frame (tokens, sizes, new weights): the
                       embed's whole workspace for htmx, the whole embed without JavaScript
- POST /embed/stages   a value edit, a step or an inspected cell: the embed's stages section
- GET  /embed/model?<the /model page's query>   the real model's head: its map and its step-through
- GET  /embed/decoder?<the /decoder page's query>  the language model: its next word's candidates, one head's map
                                                   and its step-through
- GET  /embed/translate?<the /translate page's query>  the translator: the translation and where each written piece
                                                       looked

A bad ``stage`` or ``figure`` is a 422 naming it, as the page's fields are. Which sites may frame these views is
app.web.security's (ATTENTION_EMBED_ORIGINS); nothing here reads a cookie.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.classroom.lesson import Lesson
from app.i18n import gettext as _
from app.lesson.presets import DEFAULT_PRESET
from app.serving.real_models import language_model, sentence_model, translator
from app.state.decoder_state import DEFAULT_DECODER_TEXT, read_decoder_page
from app.state.form import FormError
from app.state.grids import expand_grids
from app.state.model_state import read_model_page, typed_sentences
from app.state.page import apply_action, lenient_read, link_fields
from app.state.reading import read_page
from app.state.scenario import Scenario, View, from_preset
from app.view.decoder_view import candidates_context, decoder_context
from app.view.model_view import model_context
from app.view.panels import page_stages
from app.view.translate_view import failed, translated, typed
from app.web.decoder_work import ERROR_SLOTS as DECODER_ERROR_SLOTS
from app.web.decoder_work import decoder_answer, generated_pairs
from app.web.decoder_work import error_slot as decoder_error_slot
from app.web.page_work import PageRequest, Rendered
from app.web.respond import (
    error_page,
    link_to,
    page_request,
    posted_fields,
    render,
    respond,
    run_page,
    workspace_context,
)
from app.web.served import Waiting, served_page

router = APIRouter()

FIGURES = ("lines",)  # what ``figure`` may ask for: the attention lines alone
LINE_STAGES = ("softmax", "output")  # the stages that draw the lines; the first when ``figure=lines`` names none
MODEL_ERROR_SLOTS = ("text", "view")
TRANSLATE_SLOTS = ("text", "view")  # app.web.translate_pages's, beside the text and beside the view


def embed_urls(urls: SimpleNamespace) -> SimpleNamespace:
    """The page's paths, with the two its forms post to (``update``, ``stages``) turned to the embed's own:
    the editor and the stage templates, shared with the page, then post here and get the embed back."""
    embed = urls.index + "embed"  # the index is the root path with its slash
    return SimpleNamespace(**{**vars(urls), "update": embed, "stages": embed + "/stages", "embed": embed,
                              "embed_model": embed + "/model", "embed_decoder": embed + "/decoder",
                              "embed_translate": embed + "/translate"})


def embed_view(sc: Scenario, view: View, figure: str) -> View:
    """The view an embed shows: one stage, forward only (its form keeps no Learn panel, no presenter mode). A
    stage it cannot show, or a figure it does not know, is a FormError naming the field."""
    if figure not in ("", *FIGURES):
        raise FormError("figure", _("figure: no figure {figure} to embed; the one there is: lines").format(
            figure=repr(figure)))
    view = replace(view, show_all=False, present=False, learning=None)
    if figure == "lines" and view.stage not in LINE_STAGES:
        view = replace(view, stage=LINE_STAGES[0])
    keys = [s.key for s in page_stages(sc, view)]
    if view.stage not in keys:
        raise FormError("stage", _("stage: no stage {stage} in this scenario; one of: {stages}").format(
            stage=repr(view.stage), stages=", ".join(keys)))
    return view


def embed_context(page: PageRequest, sc: Scenario, view: View, figure: str, error: FormError | None = None) -> dict:
    ctx = workspace_context(sc, view, error)
    if error is not None and error.field == "figure":
        ctx["error_slot"] = "view"  # beside the stage, as a bad stage's message
    link_to(page.urls, ctx, sc, view)  # "Open the full page": the page's own permalink
    ctx.update(urls=embed_urls(page.urls), figure=figure, embedded=True)
    return ctx


def _read(fields: dict[str, str], read: tuple[Scenario, View] | None) -> tuple[Scenario, View, str]:
    sc, view = read or read_page(fields)
    figure = fields.get("figure", "")
    return sc, embed_view(sc, view, figure), figure


def _shown(page: PageRequest, fields: dict[str, str], lesson: Lesson | None = None,
           read: tuple[Scenario, View] | None = None) -> Rendered:
    """GET /embed: the view for a link's state; a bad field's message beside the default scenario's first stage
    (a bad stage or figure: beside this scenario's)."""
    try:
        sc, view, figure = _read(fields, read)
    except FormError as e:
        try:
            sc, view = read or read_page(fields)
            view = embed_view(sc, replace(view, stage="x"), "")
        except FormError:
            sc, view = from_preset(DEFAULT_PRESET)
        return render(page, "embed.html", embed_context(page, sc, view, "", e), status=422)
    return render(page, "embed.html", embed_context(page, sc, view, figure))


def _posted(page: PageRequest, fields: dict[str, str], lesson: Lesson | None = None,
            read: tuple[Scenario, View] | None = None, *, template: str) -> Rendered:
    try:
        sc, view, figure = _read(fields, read)
        sc, view = apply_action(sc, view, fields.get("action", ""))
        if not page.htmx and fields.get("action"):  # without JavaScript: an edit keeps the inputs open
            view = replace(view, panels=view.panels | {"inputs"})
        ctx = embed_context(page, sc, view, figure)
    except FormError as e:
        return _error(page, fields, e)
    return render(page, template if page.htmx else "embed.html", ctx)


def _update(page: PageRequest, fields: dict[str, str], lesson: Lesson | None = None,
            read: tuple[Scenario, View] | None = None) -> Rendered:
    return _posted(page, fields, lesson, read, template="embed/workspace.html")


def _stages(page: PageRequest, fields: dict[str, str], lesson: Lesson | None = None,
            read: tuple[Scenario, View] | None = None) -> Rendered:
    return _posted(page, fields, lesson, read, template="embed/stages.html")


def _error(page: PageRequest, fields: dict[str, str], error: FormError) -> Rendered:
    """422: for htmx the page's own answer (the message in its slot, out of band; the last good stage stays); without
    JavaScript the embed again, with what was typed in its inputs."""
    if page.htmx:
        return error_page(page, fields, error)
    fields = expand_grids(fields)
    sc, view = lenient_read(fields)
    try:
        view = embed_view(sc, view, fields.get("figure", ""))
        figure = fields.get("figure", "")
    except FormError:
        view, figure = embed_view(sc, replace(view, stage="x"), ""), ""
    ctx = embed_context(page, sc, view, figure, error)
    ctx.update(typed=fields, stale=True)
    return render(page, "embed.html", ctx, status=422)


@router.get("/embed", response_class=HTMLResponse, include_in_schema=False, name="embed")
async def embed(request: Request) -> Response:
    """One stage for a permalink's query (``?preset=pool&stage=softmax`` or a whole state), ``&figure=lines``
    for the lines alone."""
    params = request.query_params
    fields = link_fields(params)
    if "figure" in params:
        fields["figure"] = params["figure"]
    return respond(await run_page(request, _shown, fields, errors_inline=True))


@router.post("/embed", response_class=HTMLResponse, include_in_schema=False, name="embed_update")
async def embed_update(request: Request) -> Response:
    return respond(await run_page(request, _update, await posted_fields(request)))


@router.post("/embed/stages", response_class=HTMLResponse, include_in_schema=False, name="embed_stages")
async def embed_stages(request: Request) -> Response:
    return respond(await run_page(request, _stages, await posted_fields(request)))


# --- the real model's head ------------------------------------------------------------------------------


def model_work(page: PageRequest, pairs: list[tuple[str, str]], embed_url: str, model_url: str,
               waiting: Waiting | None = None) -> Rendered:
    """The model's embed (or, for htmx, its part that changes) for one query string; a bad field's 422; or the
    embed around ``waiting``, the question's place in the queue."""
    urls = embed_urls(page.urls)
    if waiting is not None:
        return render(page, "embed/model.html", {
            "model_url": embed_url, "error": None, "error_slots": MODEL_ERROR_SLOTS, "urls": urls, "waiting": waiting,
            "typed": typed_sentences(pairs)},
            headers={"Cache-Control": "no-store"})
    model = sentence_model().files()
    try:
        read = read_model_page(model, pairs)
    except FormError as error:
        ctx = {"error": error, "error_slot": error.field if error.field == "text" else "view",
               "error_slots": MODEL_ERROR_SLOTS, "model_url": embed_url, "urls": urls}
        if page.htmx:
            return render(page, "model/errors.html", ctx, status=422, headers={"HX-Reswap": "none"})
        ctx["typed"] = typed_sentences(pairs)
        return render(page, "embed/model.html", ctx, status=422)
    ctx = model_context(model, read)
    ctx.update(model_url=embed_url, page_url=model_url, error=None, error_slots=MODEL_ERROR_SLOTS, urls=urls,
               typed={"text": read.page.text, "text2": read.page.text2})
    return render(page, "embed/model_work.html" if page.htmx else "embed/model.html", ctx)


@router.get("/embed/model", response_class=HTMLResponse, include_in_schema=False, name="embed_model")
async def embed_model(request: Request) -> Response:
    """The real model's head for the /model page's query (``?text=…&layer=…&head=…``, counted from 1)."""
    page = page_request(request)
    pairs = list(request.query_params.multi_items())
    embed_url = request.url_for("embed_model").path
    model_url = request.url_for("model_page").path
    return await served_page(request, page, sentence_model(), (embed_url, tuple(sorted(pairs))),
                             lambda: model_work(page, pairs, embed_url, model_url),
                             lambda asked, waiting: model_work(asked, pairs, embed_url, model_url, waiting),
                             "model-work", "all-MiniLM-L6-v2")


# --- the language model ---------------------------------------------------------------------------------


def decoder_embed_work(page: PageRequest, pairs: list[tuple[str, str]], embed_url: str, decoder_url: str,
                       part: str, waiting: Waiting | None = None) -> Rendered:
    """The language model's embed (for htmx: its changing part, or the candidates alone) for one query string; a
    bad field's 422, its message beside the text; or the embed around ``waiting``, the question's place in the
    queue."""
    urls = embed_urls(page.urls)
    if waiting is not None:
        return render(page, "embed/decoder.html", {
            "decoder_url": embed_url, "error": None, "error_slots": DECODER_ERROR_SLOTS, "urls": urls,
            "waiting": waiting, "typed": dict(pairs).get("text", DEFAULT_DECODER_TEXT)},
            headers={"Cache-Control": "no-store"})
    model = language_model().files()
    try:
        pairs = generated_pairs(pairs)
        read = read_decoder_page(model, pairs)
    except FormError as error:
        ctx = {"error": error, "error_slot": decoder_error_slot(error.field), "error_slots": DECODER_ERROR_SLOTS,
               "decoder_url": embed_url, "urls": urls}
        if page.htmx:
            return render(page, "decoder/errors.html", ctx, status=422, headers={"HX-Reswap": "none"})
        ctx["typed"] = dict(pairs).get("text", DEFAULT_DECODER_TEXT)
        return render(page, "embed/decoder.html", ctx, status=422)
    if part == "candidates":
        ctx = candidates_context(model, read)
        ctx.update(decoder_url=embed_url, candidates_oob=True, urls=urls, embedded=True)
        return render(page, "decoder/candidates.html", ctx)
    ctx = decoder_context(model, read)
    ctx.update(decoder_url=embed_url, page_url=decoder_url, notebook_url=decoder_url + "/notebook", error=None,
               error_slots=DECODER_ERROR_SLOTS, typed=read.page.text, urls=urls, embedded=True)
    return render(page, "embed/decoder_work.html" if page.htmx else "embed/decoder.html", ctx)


@router.get("/embed/decoder", response_class=HTMLResponse, include_in_schema=False, name="embed_decoder")
async def embed_decoder(request: Request) -> Response:
    """The language model for the /decoder page's query (``?text=…&layer=…&head=…``, counted from 1): the next
    word's candidates, the head's map and its step-through."""
    decoder_url = request.url_for("decoder_page").path
    return await decoder_answer(request, request.url_for("embed_decoder").path,
                                lambda page, pairs, url, part, waiting=None: decoder_embed_work(
                                    page, pairs, url, decoder_url, part, waiting))


# --- the translator -------------------------------------------------------------------------------------


def translate_embed_work(page: PageRequest, pairs: list[tuple[str, str]], embed_url: str, translate_url: str,
                         waiting: Waiting | None = None) -> Rendered:
    """The translator's embed (for htmx: its workspace) for one query string: the translation and where each
    written piece looked; a bad field's 422, its message beside the text; or the embed around ``waiting``."""
    base = {"translate_url": embed_url, "page_url": translate_url, "error": None, "error_slots": TRANSLATE_SLOTS,
            "urls": embed_urls(page.urls), "typed": typed(pairs)}
    if waiting is not None:
        return render(page, "embed/translate.html", base | {"waiting": waiting}, headers={"Cache-Control": "no-store"})
    try:
        ctx = base | translated(pairs)
    except FormError as error:
        ctx = base | failed(error)
        if page.htmx:
            return render(page, "translate/errors.html", ctx, status=422, headers={"HX-Reswap": "none"})
        return render(page, "embed/translate.html", ctx, status=422)
    return render(page, "embed/translate_work.html" if page.htmx else "embed/translate.html", ctx)


@router.get("/embed/translate", response_class=HTMLResponse, include_in_schema=False, name="embed_translate")
async def embed_translate(request: Request) -> Response:
    """The translator for the /translate page's query (``?text=…&direction=…&layer=…&head=…``, counted from 1)."""
    page = page_request(request)
    pairs = list(request.query_params.multi_items())
    embed_url = request.url_for("embed_translate").path
    translate_url = request.url_for("translate_page").path
    return await served_page(request, page, translator(), (embed_url, tuple(sorted(pairs))),
                             lambda: translate_embed_work(page, pairs, embed_url, translate_url),
                             lambda asked, waiting: translate_embed_work(asked, pairs, embed_url, translate_url,
                                                                         waiting),
                             "translate-work", "Bergamot en↔pt")
