"""Show the translator ("Translate") in a live class: the teacher's translate page changes the room, the students'
pages follow its text, direction and head, and a student may translate a text of their own.

- POST /class/{code}/translate  the teacher shows the translator: the state posted (the page's form) or, with
                                nothing posted, the address's query (a head's link). Read by the page's own reader:
                                a bad field is a 422 naming it, and nothing is stored. Then the teacher's page
                                (303), or for htmx the page's results.
- GET  /class/{code}/translate  the teacher's page, showing the room's state (a GET never changes a class); a
                                student's own text (``?text=…``), never stored.

A student's page at /class/{code} is the translate page while the room shows it (``translate_page_html``), and
the class's workspace is then the page's results (``translate_workspace``). The room keeps the page's query string
behind a prefix (app.classroom.lesson.TRANSLATE_STATE). What this page does as "Your sentence" does in a class is
app.web.class_real's.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import parse_qsl

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.classroom.lesson import TRANSLATE_STATE, Lesson, check_state, shown_real
from app.classroom.store import Room
from app.lesson.presets import PRESETS
from app.serving.real_models import translator
from app.state.form import FormError
from app.state.translate_state import DEFAULT_TEXT, OTHER_BANK, TranslatePage, read_translate_page, translate_query
from app.view.translate_view import translate_context
from app.web.class_access import OpenRoom, TeacherOf
from app.web.class_hooks import conf, lesson_for
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
from app.web.page_work import PageRequest, Rendered
from app.web.respond import page_request, render, respond

router = APIRouter()

ERROR_SLOTS = ("text", "view")
TRANSLATE_OPERATIONS = 40_000_000  # a translation of 128 pieces and its page: the heavy lane's


def read_translate(pairs: Iterable[tuple[str, str]]) -> TranslatePage:
    """The translate page's state read by its own reader (FormError naming a bad field)."""
    return read_translate_page(translator().files(), pairs)


def base_context(url: str, lesson: Lesson | None) -> dict:
    return {"translate_url": url, "error": None, "error_slots": ERROR_SLOTS, "other_bank": OTHER_BANK,
            "default_text": DEFAULT_TEXT, "classroom": lesson, "presets": PRESETS,
            "translate_verb": "post" if lesson is not None and lesson.teacher else "get"}


def class_translate_work(page: PageRequest, read: TranslatePage, lesson: Lesson, url: str, template: str,
                         headers: dict[str, str] | None = None) -> Rendered:
    """The translate page (or ``template``, a part of it) in a class: the teacher's publishes by posts, a
    student's explores by the page's usual GETs."""
    service = translator()
    run = service.run(read.direction, read.text)
    ctx = base_context(url, lesson) | translate_context(service.files()[read.direction], run, read)
    ctx["typed"] = {"text": read.text, "direction": read.direction}
    return render(page, template, ctx, headers={"Cache-Control": "no-store", **(headers or {})})


def class_translate_error(page: PageRequest, pairs: list[tuple[str, str]], error: FormError, url: str,
                          lesson: Lesson | None) -> Rendered:
    """422: htmx swaps only the message into its slot (the last good result stays); without JavaScript the page
    comes back with the typed text in its box and the message."""
    ctx = base_context(url, lesson) | {"error": error, "error_slot": error.field if error.field == "text" else "view"}
    if page.htmx:
        return render(page, "translate/errors.html", ctx, status=422, headers={"HX-Reswap": "none"})
    given = dict(pairs)
    ctx["typed"] = {"text": given.get("text", DEFAULT_TEXT), "direction": given.get("direction") or "en-pt"}
    return render(page, "translate.html", ctx, status=422)


def shown_pairs(room: Room) -> list[tuple[str, str]]:
    return parse_qsl(shown_real(room.state, "translate") or "", keep_blank_values=True)


async def translate_page_html(request: Request, room: Room) -> str:
    """A following student's page while the room shows the translator: rendered once per change per worker."""
    read = read_translate(shown_pairs(room))  # checked before it was stored
    url = request.url_for("class_translate", code=room.code).path
    return await following_html(request, room, "translate", "page",
                                lambda page, lesson: class_translate_work(page, read, lesson, url, "translate.html"))


async def translate_workspace(request: Request, room: Room) -> Response:
    """The translator's results for a following student (the text's box out of band): rendered once per change."""
    read = read_translate(shown_pairs(room))
    url = request.url_for("class_translate", code=room.code).path
    html = await following_html(request, room, "translate", "workspace", lambda page, lesson: class_translate_work(
        page, read, lesson, url, "translate/class_fragment.html"))
    return workspace_response(request, room, html)


@router.post("/class/{code}/translate", name="class_translate_show", include_in_schema=False)
async def class_translate_show(request: Request, teacher: TeacherOf) -> Response:
    """The teacher shows the translate page's state to the class (only the teacher's key changes a room)."""
    room = await teachers_room(request, teacher)
    if not isinstance(room, Room):
        return room
    pairs = await posted_state(request)
    page = page_request(request)
    url = request.url_for("class_translate", code=room.code).path
    try:
        read = read_translate(pairs)
        state = TRANSLATE_STATE + translate_query(read)
        check_state(state, conf(request).class_max_state_bytes)
    except FormError as error:  # StateTooLarge too: nothing reaches the room
        return respond(class_translate_error(page, pairs, error, url, None))
    refused = await publish(request, teacher, room, state)
    if refused is not None:
        return refused
    if not page.htmx:
        return RedirectResponse(url, status_code=303)
    lesson = real_lesson(await lesson_for(request, room, "teacher", key=teacher.key, quiz=False), "translate")
    rendered_page = await request.app.state.lanes.run(
        TRANSLATE_OPERATIONS,
        lambda: class_translate_work(page, read, lesson, url, "translate/fragment.html", {"HX-Push-Url": url}))
    return respond(rendered_page)


@router.get("/class/{code}/translate", name="class_translate", response_class=HTMLResponse, include_in_schema=False)
async def class_translate(request: Request, room: OpenRoom, teacher: TeacherOf) -> Response:
    """The teacher's translate page (the room's state), or a student's own text on it."""
    found = await reader(request, room, teacher, "translate")
    if isinstance(found, Response):
        return found
    shown, lesson, pairs = found
    page = page_request(request)
    url = request.url_for("class_translate", code=shown.code).path
    try:
        read = read_translate(pairs)
    except FormError as error:
        return respond(class_translate_error(page, pairs, error, url, lesson))
    template = "translate/fragment.html" if page.htmx else "translate.html"
    headers = {} if lesson.teacher else pushed_url(page, request, url, translate_query(read), ("text",))
    return respond(await request.app.state.lanes.run(
        TRANSLATE_OPERATIONS, lambda: class_translate_work(page, read, lesson, url, template, headers)))
