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
from app.web.model_work import (
    PART_SLOTS,
    PARTS,
    model_work,
    notebook_work,
)
from app.web.respond import encoded, page_request, respond
from app.web.served import served_page

router = APIRouter()


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
