"""GET /model: "Your sentence" — the pretrained model (all-MiniLM-L6-v2) on a sentence the student types.

One GET form holds the page's whole state, so every view is a permalink and the page works without
JavaScript; htmx gets the same form back as a fragment (#model-work) and swaps it in place. A bad field is
a 422 with its message beside it: for htmx only the message (out of band, the last good result stays);
without JavaScript the page again, with what the student typed still in the boxes.
The model runs through its service (app.web.served): once per question however many ask, in a worker thread.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.maths.bert import bert_operations
from app.serving.real_models import sentence_model
from app.state.form import FormError
from app.state.model_state import DEFAULT_TEXT, DEFAULT_TEXT2, read_model_page
from app.view.model_view import model_context, model_notebook_for
from app.web.page_work import PageRequest, Rendered
from app.web.respond import encoded, notebook_download, page_request, render, respond
from app.web.served import Waiting, served_page

router = APIRouter()

# Which slot beside the form shows a field's message.
MODEL_ERROR_SLOTS = ("text", "text2", "view")
# A head's selection asks for its step-through (htmx's target #steps: part "head"), whose loader then asks for the
# rest that names the head (target #enlarged: part "named"); a part's question waits in its own place.
PARTS = {"steps": "head", "enlarged": "named"}
PART_SLOTS = {"head": "steps", "named": "enlarged"}


def model_error_slot(field: str) -> str:
    return field if field in ("text", "text2") else "view"


def model_work(page: PageRequest, pairs: list[tuple[str, str]], model_url: str, typing: bool = False,
               waiting: Waiting | None = None, part: str = "page") -> Rendered:
    """The page or its fragment for one query string; a bad field's 422; or the page around ``waiting``, the
    question's place in the queue. ``typing``: the request comes from a sentence being typed, which replaces the
    address rather than adding a step to the browser's history. ``part`` "head": a head's selection, which gets
    its step-through and what names the head (model/head_part.html) rather than the whole workspace."""
    if waiting is not None:
        given = dict(pairs)
        return render(page, "model.html", {
            "model_url": model_url, "error": None, "error_slots": MODEL_ERROR_SLOTS, "waiting": waiting,
            "typed": {"text": given.get("text", DEFAULT_TEXT), "text2": given.get("text2", DEFAULT_TEXT2)}},
            headers={"Cache-Control": "no-store"})
    model = sentence_model().files()
    try:
        read = read_model_page(model, pairs)
    except FormError as error:
        return model_error(page, pairs, error, model_url)
    ctx = model_context(model, read)
    ctx.update(model_url=model_url, error=None, error_slots=MODEL_ERROR_SLOTS,
               typed={"text": read.page.text, "text2": read.page.text2})
    if page.htmx and part == "named":  # the rest of a head's selection: the address is the head's already
        return render(page, "model/named_part.html", ctx)
    if page.htmx:  # the address bar gets the clean permalink, not the form's every field
        history = "HX-Replace-Url" if typing else "HX-Push-Url"
        template = "model/head_part.html" if part == "head" else "model/fragment.html"
        return render(page, template, ctx, headers={history: f"{model_url}?{ctx['query_string']}"})
    return render(page, "model.html", ctx)


def model_error(page: PageRequest, pairs: list[tuple[str, str]], error: FormError, model_url: str) -> Rendered:
    """422: htmx swaps only the message into its slot (HX-Reswap: none keeps the last good result);
    without JavaScript the page comes back with the typed sentences in their boxes and the message."""
    ctx = {"error": error, "error_slot": model_error_slot(error.field), "error_slots": MODEL_ERROR_SLOTS,
           "model_url": model_url}
    if page.htmx:
        return render(page, "model/errors.html", ctx, status=422, headers={"HX-Reswap": "none"})
    given = dict(pairs)
    ctx["typed"] = {"text": given.get("text", DEFAULT_TEXT), "text2": given.get("text2", DEFAULT_TEXT2)}
    return render(page, "model.html", ctx, status=422)


def notebook_work(pairs: list[tuple[str, str]]) -> Rendered:
    """The notebook of the head the page steps through, or the 422 naming the field that stops it."""
    model = sentence_model().files()
    return notebook_download(lambda: read_model_page(model, pairs), lambda read: model_notebook_for(model, read),
                             "attention-model.ipynb")


@router.get("/model/notebook", include_in_schema=False, name="model_notebook")
async def model_notebook(request: Request) -> Response:
    """The model page's head as a Jupyter notebook, for the page's own query string."""
    page = page_request(request)
    pairs = list(request.query_params.multi_items())
    rendered = await request.app.state.lanes.run(
        2 * bert_operations(64), lambda: encoded(page.accept_encoding, notebook_work, pairs))
    return respond(rendered)


@router.get("/model", response_class=HTMLResponse, include_in_schema=False, name="model_page")
async def model_page(request: Request) -> Response:
    """The page for ``?text=…&text2=…&layer=…&head=…&q=…&off=5.3&off_layer=2&matrix=…&row=…&col=…``
    (every index counted from 1)."""
    page = page_request(request)
    pairs = list(request.query_params.multi_items())
    model_url = request.url_for("model_page").path
    typing = request.headers.get("HX-Trigger-Name") in ("text", "text2")
    part = PARTS.get(request.headers.get("HX-Target", ""), "page")  # a head selected: its step-through, then the rest
    return await served_page(request, page, sentence_model(), (model_url, typing, part, tuple(sorted(pairs))),
                             lambda: model_work(page, pairs, model_url, typing, part=part),
                             lambda asked, waiting: model_work(asked, pairs, model_url, typing, waiting),
                             PART_SLOTS.get(part, "model-work"), "all-MiniLM-L6-v2")
