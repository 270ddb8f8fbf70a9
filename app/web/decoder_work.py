"""The "Next word" page's work, apart from its routes (app.web.decoder_pages): a query string read into the page,
its parts for htmx, the 422 of a bad field beside it, "Write N tokens" written on first, and the page asked of the
language model's service. The page's routes, the class's (app.web.class_decoder) and the embed's import it; it
imports no router."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Request
from fastapi.responses import Response

from app.i18n import gettext as _
from app.maths.llama import DecoderContinuation
from app.maths.sampling import generate
from app.serving.real_models import language_model
from app.state.decoder_state import DEFAULT_DECODER_TEXT, read_decoder_page
from app.state.form import FormError
from app.view.decoder_view import candidates_context, decoder_context
from app.view.notebook.decoder import decoder_notebook_for
from app.view.pieces import token_text
from app.web.page_work import PageRequest, Rendered
from app.web.respond import notebook_download, page_request, render, respond
from app.web.served import Waiting, served_page

ERROR_SLOTS = ("text", "view")


# The part of the page an htmx request asks for, by the element it swaps (HX-Target): the candidates alone (the
# sampler's controls), the next word and the text written on, everything below it, one head's step-through. Any
# other target, and every request without htmx, gets the whole workspace or page.
TARGET_PARTS = {"candidates": "candidates", "next-row": "next", "decoder-rest": "rest", "steps": "head"}


PART_TEMPLATES = {"next": "decoder/next_part.html", "rest": "decoder/rest.html", "head": "decoder/head_part.html"}


PART_SLOTS = {"next": "next-row", "rest": "decoder-rest", "head": "steps"}  # a part's question waits in its place


def error_slot(field: str) -> str:
    return "text" if field == "text" else "view"


def decoder_error(page: PageRequest, pairs: list[tuple[str, str]], error: FormError, url: str) -> Rendered:
    ctx = {"error": error, "error_slot": error_slot(error.field), "error_slots": ERROR_SLOTS, "decoder_url": url}
    if page.htmx:
        return render(page, "decoder/errors.html", ctx, status=422, headers={"HX-Reswap": "none"})
    ctx["typed"] = dict(pairs).get("text", DEFAULT_DECODER_TEXT)
    return render(page, "decoder.html", ctx, status=422)


def generated_pairs(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``generate=N`` asks for N more tokens: the query with the text written on (greedy at τ = 0 … here the
    page's temperature and cut-offs, seeded by the text's length so that the same link gives the same text)."""
    given = dict(pairs)
    raw = given.get("generate", "")
    if not raw:
        return pairs
    model = language_model().files()
    read = read_decoder_page(model, [(k, v) for k, v in pairs if k != "generate"])
    if not raw.isdigit() or not 1 <= int(raw) <= 32:
        raise FormError("generate", _("generate must be a whole number from 1 to 32"))
    p = read.page
    greedy = given.get("sample") != "on"
    steps = generate(DecoderContinuation(model, read.ids, p.heads_off), int(raw), 0.0 if greedy else p.temperature,
                     p.top_k, p.top_p, seed=len(read.ids), min_p=p.min_p)
    text = p.text + "".join(token_text(model.vocabulary[s.id]) for s in steps)
    return [(k, v) for k, v in pairs if k not in ("text", "generate", "sample", "matrix", "row", "col")] + [
        ("text", text)]


def decoder_work(page: PageRequest, pairs: list[tuple[str, str]], url: str, part: str = "page",
                 waiting: Waiting | None = None) -> Rendered:
    """The page, its workspace fragment, or its candidates alone, for one query string; a bad field's 422; or
    (``part`` "waiting") the page around ``waiting``, the question's place in the queue."""
    if waiting is not None:
        return render(page, "decoder.html", {"decoder_url": url, "error": None, "error_slots": ERROR_SLOTS,
                                             "typed": dict(pairs).get("text", DEFAULT_DECODER_TEXT),
                                             "waiting": waiting}, headers={"Cache-Control": "no-store"})
    model = language_model().files()
    try:
        pairs = generated_pairs(pairs)
        read = read_decoder_page(model, pairs)
    except FormError as error:
        return decoder_error(page, pairs, error, url)
    if part == "candidates":
        ctx = candidates_context(model, read)
        ctx.update(decoder_url=url, candidates_oob=True)  # the controls stay; what they change is swapped
        return render(page, "decoder/candidates.html", ctx, headers={"HX-Replace-Url": f"{url}?{ctx['query_string']}"})
    ctx = decoder_context(model, read, part if page.htmx and part in PART_TEMPLATES else "page")
    ctx.update(decoder_url=url, error=None, error_slots=ERROR_SLOTS, typed=read.page.text)
    if not page.htmx:
        return render(page, "decoder.html", ctx)
    pushed = {} if part == "rest" else {"HX-Push-Url": f"{url}?{ctx['query_string']}"}  # "rest" follows "next"
    return render(page, PART_TEMPLATES.get(part, "decoder/fragment.html"), ctx, headers=pushed)


DecoderWork = Callable[..., Rendered]  # page, pairs, its url, part[, waiting]: decoder_work, or an embed's


async def decoder_answer(request: Request, url: str, work: DecoderWork) -> Response:
    """A view of the language model at ``url`` (the page, or its embed): "loading" (503) until the model is read,
    then ``work`` for the query through the model's service (kept, or made once however many ask; while it waits,
    where it stands); the candidates alone when the sampler asks for them."""
    page = page_request(request)
    service = language_model()
    if not service.ready():
        return respond(render(page, "decoder/loading.html", {"decoder_url": url}, status=503,
                              headers={"Retry-After": "5", "Refresh": "5"}))
    pairs = list(request.query_params.multi_items())
    part = TARGET_PARTS.get(request.headers.get("HX-Target", ""), "page")

    def waiting_page(asked: PageRequest, waiting: Waiting) -> Rendered:
        return work(asked, pairs, url, "waiting", waiting)

    return await served_page(request, page, service, (url, part, tuple(sorted(pairs))),
                             lambda: work(page, pairs, url, part), waiting_page, PART_SLOTS.get(part, "decoder-work"),
                             "SmolLM2-135M")


def decoder_notebook_work(pairs: list[tuple[str, str]]) -> Rendered:
    """The notebook of the head the page steps through, or the 422 naming the field that stops it."""
    model = language_model().files()
    return notebook_download(lambda: read_decoder_page(model, pairs), lambda read: decoder_notebook_for(model, read),
                             "attention-decoder.ipynb")
