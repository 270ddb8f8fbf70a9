"""GET /decoder/patching, "Patch activations": which of the language model's activations carry the difference
between a clean text and a corrupted one to its answer (app.maths.patching), for the texts a student types.

One GET form holds the page's state (a permalink; it works without JavaScript). The work is a question for the
language model's service like the "Next word" page's (app.web.served): computed once however many ask, kept, and
while it is computed the page shows the layers done as a progress bar. A bad field is a 422 naming it beside the
form; with htmx the last good result stays.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.serving.real_models import language_model
from app.state.form import FormError
from app.state.patching_state import DEFAULT_CLEAN, DEFAULT_CORRUPTED, read_patching_page
from app.view.patching_view import patched, patching_view
from app.web.page_work import PageRequest, Rendered
from app.web.respond import page_request, render, respond
from app.web.served import Waiting, served_page

router = APIRouter()

SLOT = "patching-work"
ERROR_SLOTS = ("clean", "corrupted", "tokens")


def typed(pairs: list[tuple[str, str]]) -> dict:
    given = dict(pairs)
    return {"clean": given.get("clean", DEFAULT_CLEAN), "corrupted": given.get("corrupted", DEFAULT_CORRUPTED),
            "target": given.get("target", ""), "contrast": given.get("contrast", "")}


def error_slot(field: str) -> str:
    return field if field in ("clean", "corrupted") else "tokens"


def patching_work(page: PageRequest, pairs: list[tuple[str, str]], url: str, waiting: Waiting | None = None
                  ) -> Rendered:
    """The page, or for htmx its results alone; a bad field's 422; or the page around ``waiting``."""
    ctx = {"patching_url": url, "error": None, "error_slots": ERROR_SLOTS, "typed": typed(pairs)}
    if waiting is not None:
        return render(page, "patching.html", ctx | {"waiting": waiting}, headers={"Cache-Control": "no-store"})
    given = dict(pairs)
    if "clean" in given and "corrupted" not in given:  # from "Next word": the text to change a word of, no run yet
        ctx["typed"]["corrupted"] = given["clean"]
        return render(page, "patching.html", ctx | {"change_a_word": True})
    model = language_model().files()
    try:
        read = read_patching_page(model, pairs)
    except FormError as error:
        ctx.update(error=error, error_slot=error_slot(error.field))
        if page.htmx:
            return render(page, "decoder/errors.html", ctx, status=422, headers={"HX-Reswap": "none"})
        return render(page, "patching.html", ctx, status=422)
    ctx["patching"] = patching_view(model, read, patched(read))
    if page.htmx:
        return render(page, "patching/work.html", ctx, headers={"HX-Push-Url": f"{url}?{ctx['patching']['query']}"})
    return render(page, "patching.html", ctx)


@router.get("/decoder/patching", response_class=HTMLResponse, include_in_schema=False, name="patching_page")
async def patching_page(request: Request) -> Response:
    """The page for ``?clean=…&corrupted=…&target=…&contrast=…``."""
    page = page_request(request)
    url = request.url_for("patching_page").path
    service = language_model()
    if not service.ready():
        return respond(render(page, "decoder/loading.html", {"decoder_url": url}, status=503,
                              headers={"Retry-After": "5", "Refresh": "5"}))
    pairs = list(request.query_params.multi_items())

    def waiting_page(asked: PageRequest, waiting: Waiting) -> Rendered:
        return patching_work(asked, pairs, url, waiting)

    return await served_page(request, page, service, (url, tuple(sorted(pairs))),
                             lambda: patching_work(page, pairs, url), waiting_page, SLOT, "SmolLM2-135M")
