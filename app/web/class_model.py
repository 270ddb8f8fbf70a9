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
/class/{code}/teach) brings the class back to a toy scenario.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from types import SimpleNamespace
from urllib.parse import parse_qsl

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.classroom.lesson import Lesson, check_state, model_room_state, rendered, shown_model
from app.classroom.store import Room
from app.lesson.presets import PRESETS
from app.maths.bert import bert_operations
from app.maths.model_files import load_model_files
from app.state.form import FormError
from app.state.model_state import ModelRead, model_query, read_model_page
from app.view.model_view import model_context
from app.web.class_access import OpenRoom, TeacherOf, not_teacher, notice, notice_failed, too_many
from app.web.class_hooks import STUDENT_COOKIE, app_root, conf, lesson_for, rooms
from app.web.model_pages import MODEL_ERROR_SLOTS, model_error
from app.web.page_work import PageRequest, Rendered
from app.web.respond import page_request, posted_fields, render, respond

router = APIRouter()

MODEL_OPERATIONS = 4 * bert_operations(64)  # as GET /model: two sentences, intact and with heads switched off


def read_model(pairs: Iterable[tuple[str, str]]) -> ModelRead:
    """The model page's state read by its own reader (FormError naming a bad field)."""
    return read_model_page(load_model_files(), pairs)


def class_lesson(lesson: Lesson) -> Lesson:
    """The class panel of a model page: a student's page fetches the model's results when the teacher changes."""
    lesson.model = True
    lesson.urls = SimpleNamespace(**{**vars(lesson.urls), "workspace": lesson.urls.workspace + "?page=model"})
    return lesson


def class_model_work(page: PageRequest, read: ModelRead, lesson: Lesson, model_url: str, template: str,
               headers: dict[str, str] | None = None) -> Rendered:
    """The model page (or ``template``, a part of it) in a class: the teacher's publishes by posts, a
    student's explores by the model page's usual GETs."""
    ctx = model_context(load_model_files(), read)
    ctx.update(model_url=model_url, error=None, error_slots=MODEL_ERROR_SLOTS, classroom=lesson, presets=PRESETS,
               typed={"text": read.page.text, "text2": read.page.text2},
               model_verb="post" if lesson.teacher else "get")
    return render(page, template, ctx, headers={"Cache-Control": "no-store", **(headers or {})})


def html_of(done: Rendered) -> str:
    return done.body if isinstance(done.body, str) else done.body.decode()


async def model_page_html(request: Request, room: Room, query: str) -> str:
    """A following student's page while the room shows the model: rendered once per change per worker."""
    lesson = class_lesson(await lesson_for(request, room, "student", quiz=False))
    read = read_model(parse_qsl(query, keep_blank_values=True))  # checked before it was stored
    page = page_request(request)
    url = request.url_for("class_model", code=room.code).path

    def work() -> str:
        return html_of(class_model_work(page, read, lesson, url, "model.html"))

    return await rendered((room.code, room.version, room.state, "model-page", app_root(request)), work)


async def model_workspace(request: Request, room: Room) -> Response:
    """The model's results for a following student (the sentences' boxes out of band): rendered once per change."""
    query = shown_model(room.state) or ""
    lesson = class_lesson(await lesson_for(request, room, "student", quiz=False))
    read = read_model(parse_qsl(query, keep_blank_values=True))
    page = page_request(request)
    url = request.url_for("class_model", code=room.code).path

    def work() -> str:
        return html_of(class_model_work(page, read, lesson, url, "model/class_fragment.html"))

    html = await rendered((room.code, room.version, room.state, "model-workspace", app_root(request)), work)
    # The address goes back to the class's own: a reload follows the teacher again.
    return HTMLResponse(html, headers={"Cache-Control": "no-store", "Vary": "HX-Request",
                                       "HX-Replace-Url": request.url_for("class_page", code=room.code).path})


def other_page(request: Request, code: str) -> Response:
    """The class moved between the toy scenarios and the real model: the student's whole page is reloaded."""
    return Response(status_code=204, headers={"HX-Redirect": request.url_for("class_page", code=code).path,
                                              "Cache-Control": "no-store"})


@router.post("/class/{code}/model", name="class_model_show", include_in_schema=False)
async def class_model_show(request: Request, teacher: TeacherOf) -> Response:
    """The teacher shows the model page's state to the class (only the teacher's key changes a room)."""
    if teacher is None:
        return not_teacher(request)
    posted = await posted_fields(request)
    pairs = list(posted.items()) if posted else list(request.query_params.multi_items())
    page = page_request(request)
    url = request.url_for("class_model", code=teacher.code).path
    try:
        read = read_model(pairs)
        query = model_query(read.page)
        check_state(query, conf(request).class_max_state_bytes)
    except FormError as error:  # StateTooLarge too: nothing reaches the room
        return respond(model_error(page, pairs, error, url))
    store = rooms(request)
    room = await store.get(teacher.code)
    if room is None:
        return notice(request, 403, "This class has ended", "Start a new class from the page.")
    # The predictions stay about the scenario the class left: the room's fingerprint is kept.
    deadline = time.time() + conf(request).class_write_seconds
    version = await store.teach(teacher.code, teacher.key, model_room_state(query), room.fingerprint,
                                deadline=deadline)
    if version is None:
        return not_teacher(request)
    if not page.htmx:
        return RedirectResponse(url, status_code=303)
    room = await store.get(teacher.code) or room
    lesson = class_lesson(await lesson_for(request, room, "teacher", key=teacher.key, quiz=False))
    rendered_page = await request.app.state.lanes.run(
        MODEL_OPERATIONS,
        lambda: class_model_work(page, read, lesson, url, "model/fragment.html", {"HX-Push-Url": url}))
    return respond(rendered_page)


@router.get("/class/{code}/model", name="class_model", response_class=HTMLResponse, include_in_schema=False)
async def class_model(request: Request, room: OpenRoom, teacher: TeacherOf) -> Response:
    """The teacher's model page (the room's state), or a student's own sentence on it."""
    if room == 429:
        return too_many(request)
    if not isinstance(room, Room):
        return await notice_failed(request, request.path_params.get("code", "")[:20])
    query = shown_model(room.state)
    page = page_request(request)
    url = request.url_for("class_model", code=room.code).path
    if teacher is not None:
        if query is None:  # the class shows a toy scenario: the teacher's page for it
            return RedirectResponse(request.url_for("teach_page", code=room.code).path, status_code=303)
        lesson = class_lesson(await lesson_for(request, room, "teacher", key=teacher.key, quiz=False))
        pairs = parse_qsl(query, keep_blank_values=True)
    else:
        student = request.cookies.get(STUDENT_COOKIE, "")
        pairs = list(request.query_params.multi_items())
        if not pairs or not student or not await rooms(request).is_student(room.code, student):
            return RedirectResponse(request.url_for("class_page", code=room.code).path, status_code=303)
        lesson = class_lesson(await lesson_for(request, room, "student", following=False, quiz=False))
    try:
        read = read_model(pairs)
    except FormError as error:
        return respond(model_error(page, pairs, error, url))
    template, headers = "model.html", {}
    if page.htmx:  # a student's own sentence: their address keeps it, inside the class
        template = "model/fragment.html"
        typing = request.headers.get("HX-Trigger-Name") in ("text", "text2")
        headers = {"HX-Replace-Url" if typing else "HX-Push-Url": f"{url}?{model_query(read.page)}"}
    return respond(await request.app.state.lanes.run(
        MODEL_OPERATIONS, lambda: class_model_work(page, read, lesson, url, template, headers)))

