"""GET /decoder, "Next word": a language model (SmolLM2-135M-Instruct) on a text the student types.

One GET form holds the page's whole state, so every view is a permalink and the page works without
JavaScript: the candidates are links that append their token, Generate writes on and answers with the longer
text's page. htmx asks for the part that changes (TARGET_PARTS): a new text, a token written on or heads switched
off get the next word first (#next-row), which asks at once for the rest (#decoder-rest); a head's selection gets its
step-through (#steps); the temperature slider and the cut-offs get only the candidates (#candidates), recomputed
from the text's kept logits; a class's page gets the whole workspace (#decoder-work). Each part is a question of its
own for the service, kept apart. A bad field is a 422
with its message beside it; the last good result stays. While the model is still being read at start, the
page says so and asks to be reloaded. The work runs through the language model's service (app.web.served): one
computation per question however many ask, kept; a question that waits answers at once with its place in the queue.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.maths.llama import decoder_operations
from app.web.decoder_work import (
    decoder_answer,
    decoder_notebook_work,
    decoder_work,
)
from app.web.respond import encoded, page_request, respond

router = APIRouter()


@router.get("/decoder", response_class=HTMLResponse, include_in_schema=False, name="decoder_page")
async def decoder_page(request: Request) -> Response:
    """The page for ``?text=…&layer=…&head=…&temperature=…&top_k=…&top_p=…&matrix=…&row=…&col=…&lens=all``
    (indices from 1); ``generate=N`` writes N tokens on first."""
    return await decoder_answer(request, request.url_for("decoder_page").path, decoder_work)


@router.get("/decoder/notebook", include_in_schema=False, name="decoder_notebook")
async def decoder_notebook(request: Request) -> Response:
    """The "Next word" page's head as a Jupyter notebook, for the page's own query string."""
    page = page_request(request)
    pairs = list(request.query_params.multi_items())
    operations = 2 * decoder_operations(128)  # a forward pass, and about as long again to write the numbers out
    rendered = await request.app.state.lanes.run(
        operations, lambda: encoded(page.accept_encoding, decoder_notebook_work, pairs))
    return respond(rendered)
