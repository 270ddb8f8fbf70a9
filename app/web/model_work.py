"""The "Your sentence" page's work, apart from its routes (app.web.model_pages): a query string read into the page
or a part of it (a head's selection: its step-through, then what names the head), the 422 of a bad field beside it,
and the head's notebook. The page's routes and the class's (app.web.class_model) import it; it imports no
router."""

from __future__ import annotations

from app.serving.real_models import sentence_model
from app.state.form import FormError
from app.state.model_state import read_model_page, typed_sentences
from app.view.model_view import model_context, model_notebook_for
from app.web.page_work import PageRequest, Rendered
from app.web.respond import notebook_download, render
from app.web.served import Waiting

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
        return render(page, "model.html", {
            "model_url": model_url, "error": None, "error_slots": MODEL_ERROR_SLOTS, "waiting": waiting,
            "typed": typed_sentences(pairs)},
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
    ctx["typed"] = typed_sentences(pairs)
    return render(page, "model.html", ctx, status=422)


def notebook_work(pairs: list[tuple[str, str]]) -> Rendered:
    """The notebook of the head the page steps through, or the 422 naming the field that stops it."""
    model = sentence_model().files()
    return notebook_download(lambda: read_model_page(model, pairs), lambda read: model_notebook_for(model, read),
                             "attention-model.ipynb")
