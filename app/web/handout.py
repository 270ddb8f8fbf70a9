"""The printed handout: every forward stage of the page's state in order, each with its formula, its
explanation and its matrices, under the QR code of the state's link.

- GET  /handout   the state of a link's query, read exactly as GET / reads it (a preset, or a whole state)
- POST /handout   the page's form (the "Print handout" button of a state too large for a link)

The stages are the page's own partials (templates/stages/<key>.html) with the head in view, every block
in turn; static/handout.css lays them out one to a page, A4 or Letter.
"""

from __future__ import annotations

from dataclasses import replace

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from markupsafe import Markup

from app.i18n import gettext as _
from app.state.form import FormError
from app.state.page import link_fields
from app.state.permalink import fits_in_url, permalink
from app.state.reading import read_page
from app.state.scenario import Scenario, View
from app.view.context import describe_scenario, page_context
from app.view.qr import printed_qr
from app.web.page_work import INLINE_OPERATIONS, PageRequest, Rendered, is_large_form, page_operations
from app.web.respond import page_request, posted_fields, refused_pin, render, respond, run_heavy, templates

router = APIRouter()

# A link this long is printed on the handout's last page, not under its title.
SHORT_LINK_CHARS = 240


@router.get("/handout", response_class=HTMLResponse, include_in_schema=False)
async def handout(request: Request) -> Response:
    params, query = request.query_params, request.url.query
    # A preset's link (?preset=pool&stage=softmax) is the state's exact link already, and a short one.
    link = "" if "shape" in params else _index_url(request) + (f"?{query}" if query else "")
    return respond(await _answer(request, link_fields(params), link, query))


@router.post("/handout", response_class=HTMLResponse, include_in_schema=False)
async def handout_posted(request: Request) -> Response:
    return respond(await _answer(request, await posted_fields(request), "", ""))


async def _answer(request: Request, fields: dict[str, str], link: str, query: str) -> Rendered:
    """The handout on the event loop when it is light, else in the heavy lane (app.web.lanes), as the page.
    ``link`` is the state's link when the request's own is it, else "" (the permalink is written from the state)."""
    page = page_request(request)
    index_url = _index_url(request)
    refused = await refused_pin(fields)
    if refused is not None:  # a bomb, refused before any other work
        return _error(page, refused, query)
    if not is_large_form(fields):
        try:
            sc, view = read_page(fields)
        except FormError as e:
            return _error(page, e, query)
        if page_operations(sc, printed_view(view)) <= INLINE_OPERATIONS:
            return handout_page(index_url, link, query, page, fields, (sc, view))
    return await run_heavy(request, page, fields, handout_page, index_url, link, query, page, fields,
                           None)


def _index_url(request: Request) -> str:
    return str(request.url_for("index"))  # absolute: the QR code is read by another device


def printed_view(view: View) -> View:
    """What the handout shows of a view: every forward stage, nothing hidden, selected or compared."""
    return replace(view, show_all=True, quiz=False, present=False, inspect="", revealed=frozenset(), guess="",
                   guess_ref="", pin="", panels=frozenset(), learning=None)


def handout_page(index_url: str, link: str, query: str, page: PageRequest, fields: dict[str, str],
                 read: tuple[Scenario, View] | None = None) -> Rendered:
    """The handout of ``fields`` (or of the state ``read`` from them); a bad field is a 422 naming it. Its
    QR code holds ``link``, or when that is "" the state's permalink on the page at ``index_url``."""
    try:
        sc, view = read or read_page(fields)
        _first, stack = sc.compute()  # a mask that hides every key of a query is a FormError here too
    except FormError as e:
        return _error(page, e, query)
    shown = printed_view(view)
    blocks = len(stack.blocks) if stack is not None else 0
    parts = []
    for b in range(max(blocks, 1)):
        block = page_context(sc, replace(shown, block=b), shell=False)
        block["block_note"] = _("block {n} of {blocks}").format(n=b + 1, blocks=blocks) if blocks > 1 else ""
        block["urls"] = page.urls
        parts.append(Markup(templates.get_template("handout/stages.html").render(block)))
    link = link or permalink(index_url, sc, view)
    fits = fits_in_url(link)
    ctx = {"sc": sc, "parts": parts, "preset": sc.preset_obj, "facts": describe_scenario(sc),
           "edited": block["banner"] is not None and block["banner"]["edited"],
           "head": block["head_labels"][view.head] if sc.num_heads > 1 else "", "heads": sc.num_heads,
           "link": link if fits else None, "short_link": fits and len(link) <= SHORT_LINK_CHARS,
           "qr": printed_qr(link) if fits else None}
    return render(page, "handout.html", ctx)


def _error(page: PageRequest, error: FormError, query: str) -> Rendered:
    """The handout of a bad link: the field and its message, and the way back to the page to fix it."""
    back = page.urls.index + (f"?{query}" if query else "")
    return render(page, "handout.html", {"error": error, "back": back}, status=422)
