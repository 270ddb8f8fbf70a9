"""GET /translate: "Translate" — a real translator (Bergamot's English ↔ Portuguese Marian students) on a text
the student types: where each word of the translation looks in the source (seed 003's cross-attention on real
numbers).

One GET form holds the page's whole state, so every view is a permalink and the page works without JavaScript;
htmx gets the workspace back as a fragment (#translate-work) and swaps it in place. A bad field is a 422 with its
message beside it: for htmx only the message (out of band, the last good result stays); without JavaScript the
page again, with what the student typed still in the box. The model runs through its service (app.web.served):
once per question however many ask, in a worker thread.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from nbformat import NotebookNode

from app.serving.real_models import translator
from app.state.form import FormError
from app.state.translate_state import (
    DEFAULT_TEXT,
    OTHER_BANK,
    TranslatePage,
    read_translate_page,
)
from app.view.notebook.translator import translator_notebook
from app.view.qr import printed_qr
from app.view.translate_view import failed, translated, typed
from app.web.page_work import PageRequest, Rendered
from app.web.respond import encoded, field_error, notebook_download, page_request, render, respond
from app.web.served import Waiting, served_page

router = APIRouter()

ERROR_SLOTS = ("text", "view")
NOTEBOOK_OPERATIONS = 40_000_000  # a translation of 128 pieces (its multiply-adds), for the heavy lane


def translate_work(page: PageRequest, pairs: list[tuple[str, str]], url: str,
                   waiting: Waiting | None = None) -> Rendered:
    """The page or its fragment for one query string; a bad field's 422; or the page around ``waiting``."""
    base = {"translate_url": url, "error": None, "error_slots": ERROR_SLOTS, "other_bank": OTHER_BANK,
            "default_text": DEFAULT_TEXT}
    if waiting is not None:
        return render(page, "translate.html", base | {"waiting": waiting, "typed": typed(pairs)},
                      headers={"Cache-Control": "no-store"})
    try:
        ctx = base | translated(pairs)
    except FormError as error:
        ctx = base | failed(error)
        if page.htmx:
            return render(page, "translate/errors.html", ctx, status=422, headers={"HX-Reswap": "none"})
        return render(page, "translate.html", ctx | {"typed": typed(pairs)}, status=422)
    if page.htmx:  # the address bar gets the clean permalink
        return render(page, "translate/fragment.html", ctx, headers={"HX-Push-Url": f"{url}?{ctx['query_string']}"})
    return render(page, "translate.html", ctx)


def notebook_work(pairs: list[tuple[str, str]]) -> Rendered:
    """The notebook of the cross-attention head the page steps through, or the 422 naming the field that stops it."""
    service = translator()

    def notebook(page: TranslatePage) -> NotebookNode:
        run = service.run(page.direction, page.text)
        return translator_notebook(service.files()[page.direction], run, page.text, page.layer, page.head)

    return notebook_download(lambda: read_translate_page(service.files(), pairs), notebook,
                             "attention-translator.ipynb")


@router.get("/translate/notebook", include_in_schema=False, name="translate_notebook")
async def translate_notebook(request: Request) -> Response:
    """The translate page's cross-attention head as a Jupyter notebook, for the page's own query string."""
    page = page_request(request)
    pairs = list(request.query_params.multi_items())
    rendered = await request.app.state.lanes.run(
        NOTEBOOK_OPERATIONS, lambda: encoded(page.accept_encoding, notebook_work, pairs))
    return respond(rendered)


def handout_work(page: PageRequest, pairs: list[tuple[str, str]], link_base: str) -> Rendered:
    """The printed handout of the page's state, under the QR code of its link; a bad field is a 422 naming it."""
    try:
        ctx = translated(pairs)
    except FormError as error:
        return field_error(error)
    link = f"{link_base}?{ctx['query_string']}"
    return render(page, "translate/handout.html", ctx | {"link": link, "qr": printed_qr(link)})


@router.get("/translate/handout", response_class=HTMLResponse, include_in_schema=False, name="translate_handout")
async def translate_handout(request: Request) -> Response:
    """The translate page's state printed: its translation, lines, steps, alignment and head, one to a page."""
    page = page_request(request)
    pairs = list(request.query_params.multi_items())
    link_base = str(request.url_for("translate_page"))  # absolute: the QR code is read by another device
    rendered = await request.app.state.lanes.run(
        NOTEBOOK_OPERATIONS, lambda: encoded(page.accept_encoding, handout_work, page, pairs, link_base))
    return respond(rendered)


@router.get("/translate", response_class=HTMLResponse, include_in_schema=False, name="translate_page")
async def translate_page(request: Request) -> Response:
    """The page for ``?text=…&direction=en-pt|pt-en&layer=…&head=…`` (the cross-attention head, from 1)."""
    page = page_request(request)
    pairs = list(request.query_params.multi_items())
    url = request.url_for("translate_page").path
    return await served_page(request, page, translator(), (url, tuple(sorted(pairs))),
                             lambda: translate_work(page, pairs, url),
                             lambda asked, waiting: translate_work(asked, pairs, url, waiting),
                             "translate-work", "Bergamot en↔pt")
