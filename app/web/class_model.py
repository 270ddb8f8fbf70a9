"""Show the real model ("Your sentence") in a live class: the teacher's model page changes the room, the
students' pages follow it, and a student may explore a sentence of their own.

- POST /class/{code}/model  the teacher shows the model: the state posted (the model page's form) or, with
                            nothing posted, the address's query (a head's link). Read by the model page's own
                            reader: a bad field is a 422 naming it, and nothing is stored. Then the teacher's
                            page (303), or for htmx the page's results.
- GET  /class/{code}/model  the teacher's page, showing the room's model state (a GET never changes a class);
                            a student's own sentence (``?text=…``), never stored.

A student's page at /class/{code} is the model page while the room shows the model (``model_page_html``), and
the class's workspace is then the model page's results (``model_workspace``). The room keeps the model page's
query string behind a prefix (app.classroom.lesson.MODEL_STATE); the teacher's scenario menu (POST
/class/{code}/teach) brings the class back to a toy scenario. What this page does as "Next word" does in a class
is app.web.class_real's.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import parse_qsl

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.classroom.lesson import Lesson, check_state, model_room_state, shown_model
from app.classroom.store import Room
from app.lesson.presets import PRESETS
from app.maths.bert import bert_operations
from app.serving.real_models import sentence_model
from app.state.form import FormError
from app.state.model_state import ModelRead, model_query, read_model_page
from app.view.model_view import model_context
from app.web.class_access import OpenRoom, TeacherOf
from app.web.class_hooks import conf, lesson_for
from app.web.class_pages import enter_following
from app.web.class_real import (
    following_html,
    posted_state,
    publish,
    pushed_url,
    reader,
    real_lesson,
    teachers_room,
    workspace_response,
)
from app.web.model_work import MODEL_ERROR_SLOTS, model_error
from app.web.page_work import PageRequest, Rendered
from app.web.respond import page_request, render, respond

router = APIRouter()

MODEL_OPERATIONS = 4 * bert_operations(64)  # as GET /model: two sentences, intact and with heads switched off


def read_model(pairs: Iterable[tuple[str, str]]) -> ModelRead:
    """The model page's state read by its own reader (FormError naming a bad field)."""
    return read_model_page(sentence_model().files(), pairs)


def class_model_work(page: PageRequest, read: ModelRead, lesson: Lesson, model_url: str, template: str,
                     headers: dict[str, str] | None = None) -> Rendered:
    """The model page (or ``template``, a part of it) in a class: the teacher's publishes by posts, a
    student's explores by the model page's usual GETs."""
    ctx = model_context(sentence_model().files(), read)
    ctx.update(model_url=model_url, error=None, error_slots=MODEL_ERROR_SLOTS, classroom=lesson, presets=PRESETS,
               typed={"text": read.page.text, "text2": read.page.text2},
               model_verb="post" if lesson.teacher else "get")
    return render(page, template, ctx, headers={"Cache-Control": "no-store", **(headers or {})})


async def model_page_html(request: Request, room: Room) -> str:
    """A following student's page while the room shows the model: rendered once per change per worker."""
    read = read_model(parse_qsl(shown_model(room.state) or "", keep_blank_values=True))  # checked before it was stored
    url = request.url_for("class_model", code=room.code).path
    return await following_html(request, room, "model", "page",
                                lambda page, lesson: class_model_work(page, read, lesson, url, "model.html"))


async def model_workspace(request: Request, room: Room) -> Response:
    """The model's results for a following student (the sentences' boxes out of band): rendered once per change."""
    read = read_model(parse_qsl(shown_model(room.state) or "", keep_blank_values=True))
    url = request.url_for("class_model", code=room.code).path
    html = await following_html(request, room, "model", "workspace", lambda page, lesson: class_model_work(
        page, read, lesson, url, "model/class_fragment.html"))
    return workspace_response(request, room, html)


@router.post("/class/{code}/model", name="class_model_show", include_in_schema=False)
async def class_model_show(request: Request, teacher: TeacherOf) -> Response:
    """The teacher shows the model page's state to the class (only the teacher's key changes a room)."""
    room = await teachers_room(request, teacher)
    if not isinstance(room, Room):
        return room
    pairs = await posted_state(request)
    page = page_request(request)
    url = request.url_for("class_model", code=room.code).path
    try:
        read = read_model(pairs)
        state = model_room_state(model_query(read.page))
        check_state(state, conf(request).class_max_state_bytes)
    except FormError as error:  # StateTooLarge too: nothing reaches the room
        return respond(model_error(page, pairs, error, url))
    refused = await publish(request, teacher, room, state)
    if refused is not None:
        return refused
    if not page.htmx:
        return RedirectResponse(url, status_code=303)
    lesson = real_lesson(await lesson_for(request, room, "teacher", key=teacher.key, quiz=False), "model")
    rendered_page = await request.app.state.lanes.run(
        MODEL_OPERATIONS,
        lambda: class_model_work(page, read, lesson, url, "model/fragment.html", {"HX-Push-Url": url}))
    return respond(rendered_page)


@router.get("/class/{code}/model", name="class_model", response_class=HTMLResponse, include_in_schema=False)
async def class_model(request: Request, room: OpenRoom, teacher: TeacherOf) -> Response:
    """The teacher's model page (the room's state), or a student's own sentence on it."""
    found = await reader(request, room, teacher, "model")
    if isinstance(found, Response):
        return found
    shown, lesson, pairs = found
    page = page_request(request)
    url = request.url_for("class_model", code=shown.code).path
    try:
        read = read_model(pairs)
    except FormError as error:
        return respond(model_error(page, pairs, error, url))
    template = "model/fragment.html" if page.htmx else "model.html"
    headers = {} if lesson.teacher else pushed_url(page, request, url, model_query(read.page), ("text", "text2"))
    return respond(await request.app.state.lanes.run(
        MODEL_OPERATIONS, lambda: class_model_work(page, read, lesson, url, template, headers)))


enter_following("model", model_page_html, model_workspace)  # served by app.web.classroom
