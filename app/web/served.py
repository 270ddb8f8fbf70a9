"""A real model's answer through its service (app.serving): the question's key, the answer kept or made once, and
while it is made, the page that says where the question stands.

A page, an embed or an API request names its question by what changes the computation and how the answer is
written (the query, htmx or not, the language, the root path, the encoding the browser takes): the same key is the
same bytes. A kept answer is sent at once. Otherwise the request joins the question's job (app.serving.flight):
an API request waits for it (or is told 503 with Retry-After when the queue is full); a page waits
``first_screen_seconds`` at most, then answers with where it stands (``waiting``), and that answer asks again by
itself until the real one is ready.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from fastapi import Request
from fastapi.responses import Response

from app.i18n import gettext as _
from app.i18n import language
from app.serving.flight import Job, QueueFull, wait_for
from app.serving.models import Answer, ModelService
from app.web.class_hooks import CLIENT_COOKIE, CLIENT_RE, app_root, client_address
from app.web.compression import preferred_encoding
from app.web.page_work import PageRequest, Rendered
from app.web.respond import encoded, render

WAIT_HEADER = "Attention-Wait"  # "page": a waiting page asks whether its whole page is ready
POLL_SECONDS = 1.5  # a waiting page's question waits this long for its answer before it is told where it stands
POLL_MS = 300  # and asks again this soon after
RELOAD_SECONDS = 2  # without JavaScript, the waiting page reloads itself this often
RETRY_AFTER = "5"


def client_of(request: Request) -> str:
    """Whose turn a question takes in the queue: the browser's id from its cookie, else its address."""
    found = request.cookies.get(CLIENT_COOKIE, "")
    return found if CLIENT_RE.match(found) else client_address(request)


def answer_of(rendered: Rendered) -> Answer:
    body = rendered.body.encode() if isinstance(rendered.body, str) else rendered.body
    return Answer(rendered.status, body, rendered.media_type, tuple((rendered.headers or {}).items()))


def response_of(answer: Answer, origin: str) -> Response:
    """The answer, saying where it came from (``Server-Timing``, as browsers' developer tools show it): "kept"
    by this server, "computed" now, or "shared" by another server through Redis."""
    return Response(answer.body, answer.status, {**dict(answer.headers), "Server-Timing": f'model;desc="{origin}"'},
                    answer.media_type)


def written_as(request: Request, page: PageRequest) -> tuple:
    """How an answer is written, beyond the question: htmx or a whole page, the language, the root path, the
    encoding the browser takes. Not the server's port: servers behind one balancer share their answers (the port
    is read only by a class's panel, never on these pages)."""
    return page.htmx, page.value_edit, language(), app_root(request), preferred_encoding(page.accept_encoding)


@dataclass(frozen=True)
class Waiting:
    """What the waiting page shows: where the question stands, and how it asks again."""

    slot: str  # the workspace's id it stands in for
    poll_url: str
    whole_page: bool  # without htmx: when ready, the page reloads
    ahead: int
    done: int
    steps: int
    model: str
    started: bool = False
    poll_ms: int = POLL_MS
    reload_seconds: int = RELOAD_SECONDS


def waiting_of(service: ModelService, job: Job, slot: str, poll_url: str, whole_page: bool, model: str) -> Waiting:
    steps = job.steps if job.started else 0
    return Waiting(slot, poll_url, whole_page, service.flight.ahead(job), job.progress if steps else 0, steps, model,
                   job.started)


async def served_page(request: Request, page: PageRequest, service: ModelService, question: tuple,
                      make: Callable[[], Rendered], wait_page: Callable[[PageRequest, Waiting], Rendered],
                      slot: str, model: str) -> Response:
    """A real model's page or fragment for ``question``: kept, or made once by the service's job; while it is made,
    ``wait_page`` (a whole page, or for htmx the slot alone) says where it stands. A waiting page that asks again
    (``Attention-Wait: page``) is told to reload once its whole page is ready."""
    polling = request.headers.get(WAIT_HEADER) == "page"
    asked = PageRequest(False, page.urls, page.port, page.accept_encoding) if polling else page
    key = (question, written_as(request, asked))
    answer, origin = await kept_or_shared(service, key)
    if answer is None:
        try:
            job = service.ask(key, client_of(request), lambda: answer_of(encoded(asked.accept_encoding, make)))
        except QueueFull:
            return busy(request, page)
        answer = await wait_for(job, POLL_SECONDS if page.htmx and _is_poll(request, slot) or polling
                                else service.first_screen_seconds)
        if answer is None:
            poll_url = str(request.url.path) + (f"?{request.url.query}" if request.url.query else "")
            waiting = waiting_of(service, job, slot, poll_url, not page.htmx or polling, model)
            if page.htmx or polling:  # the waiting block alone, a millisecond's work
                rendered = render(page, "partials/waiting.html", {"waiting": waiting}, headers={
                    "HX-Retarget": f"#{slot}", "HX-Reswap": "outerHTML", "Cache-Control": "no-store"})
            else:  # a whole page, some milliseconds: in a thread (with the request's language), so that a hall's
                rendered = await asyncio.to_thread(wait_page, page, waiting)  # first screens never queue /healthz
            return Response(rendered.body, rendered.status, dict(rendered.headers or {}), rendered.media_type)
        origin = job.origin
    if polling:  # the whole page is ready now: reload it (it is kept, so it comes at once)
        return Response(status_code=200, headers={"HX-Refresh": "true", "Cache-Control": "no-store"})
    return response_of(answer, origin)


async def kept_or_shared(service: ModelService, key: tuple) -> tuple[Answer | None, str]:
    """The answer kept by this server, or made by another and kept in Redis, with where it came from."""
    answer = service.kept(key)
    if answer is not None:
        return answer, "kept"
    return await service.shared_answer(key), "shared"


def _is_poll(request: Request, slot: str) -> bool:
    """An htmx request from the waiting slot itself (it asks again): it waits longer before it is told again."""
    return request.headers.get("HX-Target") == slot and request.headers.get("HX-Trigger") == slot


async def served_api(request: Request, service: ModelService, question: tuple, make: Callable[[], Answer]) -> Response:
    """A real model's API answer for ``question``: kept, or made once by the service's job, however long it waits;
    503 with Retry-After when the queue is full."""
    answer, origin = await kept_or_shared(service, question)
    if answer is None:
        try:
            job = service.ask(question, client_of(request), make)
        except QueueFull:
            return Response('{"detail": "the server is busy: try again in a moment"}', 503,
                            {"Retry-After": RETRY_AFTER}, "application/json")
        answer, origin = await wait_for(job, None), job.origin
        assert answer is not None
    return response_of(answer, origin)


def busy(request: Request, page: PageRequest) -> Response:
    """Every place in the model's queue is taken: a short page (or for htmx, the message) with Retry-After."""
    message = _("So many questions are waiting for the model that yours cannot join them: try again in a moment.")
    rendered = render(page, "busy.html", {"title": _("The server is busy"), "message": message}, status=503,
                      headers={"Retry-After": RETRY_AFTER})
    return Response(rendered.body, rendered.status, dict(rendered.headers or {}), rendered.media_type)

