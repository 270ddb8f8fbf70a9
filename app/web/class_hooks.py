"""The class as the page's routes see it: who a request is (its browser, its address, the teacher's key
in a cookie), the store and settings of its app, a page's lesson, and the hooks that app.web.pages
calls on every post of the form (``page_lesson``, ``class_fields``, ``teacher_edit``)."""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Mapping
from types import SimpleNamespace

from fastapi import Request
from fastapi.responses import Response

from app.classroom.lesson import Lesson, StateTooLarge, check_state, fingerprint, qr_for, room_state
from app.classroom.store import Room, Rooms, normal_code
from app.config import Settings, settings
from app.state.form import ON
from app.web.respond import error_response

STUDENT_COOKIE = "attention_student"  # a student's anonymous id, for the class's path only
TEACHER_COOKIE = "attention_teacher_"  # + the code: the teacher's key, for the app's paths (its edits post to /)
CLIENT_COOKIE = "attention_client"  # a browser's random id: its share of failed codes and predictions
KEEPALIVE_SECONDS = 15.0  # a comment line on an idle stream, so proxies keep it open
RETRY_MS = 2000  # how soon a browser reconnects a dropped stream
REF_RE = re.compile(r"^[a-z_0-9]{1,20}\.\d{1,3}\.\d{1,4}\.\d{1,4}$")
CLIENT_RE = re.compile(r"^[A-Za-z0-9_-]{16,32}$")


def rooms(request: Request) -> Rooms:
    return request.app.state.rooms


def conf(request: Request) -> Settings:
    """The app's settings (a test's app may have its own bounds)."""
    return getattr(request.app.state, "config", settings)


def client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def client_id(request: Request, *, new: bool = False) -> str:
    """The browser's id from its cookie ("" without one, or with a forged one); with ``new``, one
    made for this browser (its response sets the cookie)."""
    found = request.cookies.get(CLIENT_COOKIE, "")
    if CLIENT_RE.match(found):
        return found
    made = getattr(request.state, "new_client", "")
    if new and not made:
        made = request.state.new_client = secrets.token_urlsafe(16)
    return made



def app_root(request: Request) -> str:
    return request.scope.get("root_path", "") or "/"


def set_client(request: Request, response: Response) -> None:
    """Give a browser its id once (a student who mistyped a code keeps their own count of tries)."""
    if not CLIENT_RE.match(request.cookies.get(CLIENT_COOKIE, "")):
        response.set_cookie(CLIENT_COOKIE, client_id(request, new=True), max_age=conf(request).class_idle_minutes * 60,
                            path=app_root(request), httponly=True, samesite="lax", secure=request.url.scheme == "https")


def teacher_key(request: Request, code: str) -> str:
    return request.cookies.get(TEACHER_COOKIE + code, "") if code else ""



def class_urls(request: Request, code: str) -> SimpleNamespace:
    def path(name: str) -> str:
        return request.url_for(name, code=code).path

    events = path("class_events")
    return SimpleNamespace(page=path("class_page"), teach=path("teach_page"), events=events,
                           following=f"{events}?workspace=",  # a toy scenario's following student's stream
                           workspace=path("class_workspace"), predict=path("class_predict"),
                           results=path("class_results"), mine=path("class_mine"), teacher_link=path("teacher_link"),
                           model=path("class_model"), decoder=path("class_decoder"), question=path("class_question"),
                           translate=path("class_translate"),
                           guess=path("class_guess"), guesses=path("class_guesses"),
                           figure=request.url_for("class_figure", code=code, fmt="svg").path.removesuffix(".svg"))


async def lesson_for(request: Request, room: Room, role: str, *, key: str = "", following: bool = True,
                     quiz: bool = True) -> Lesson:
    """A page's class context, with the room's predictions when a quiz is on (``finish`` picks the
    ones on screen)."""
    lesson = Lesson(room.code, role, class_urls(request, room.code), key=key, following=following,
                    students=room.students, fingerprint=room.fingerprint, version=room.version)
    if quiz:
        lesson.predictions = await rooms(request).predictions(room.code)
    if role == "teacher":
        lesson.join_url = str(request.url_for("class_page", code=room.code))
        lesson.qr = qr_for(lesson.join_url)
    return lesson



# --- the hooks in the page's routes --------------------------------------------------------------


async def page_lesson(request: Request, fields: Mapping[str, str]) -> Lesson | None:
    """For a post from a page in a class (``class_code``): the teacher's lesson when the teacher's
    cookie holds the key, a student's otherwise; None outside a class. Nothing here changes the room."""
    code = normal_code(fields.get("class_code", ""))
    if not code:
        return None
    request.state.class_deadline = time.time() + conf(request).class_write_seconds  # a late change is dropped
    store = rooms(request)
    room = await store.get(code)
    if room is None:
        return None
    key = teacher_key(request, code)
    quiz = fields.get("quiz", "").lower() in ON  # without a quiz on the page, no prediction is shown
    if key and await store.is_teacher(code, key):
        return await lesson_for(request, room, "teacher", key=key, quiz=quiz)
    return await lesson_for(request, room, "student", following=fields.get("class_follow") == "1", quiz=quiz)


def class_fields(fields: Mapping[str, str]) -> dict[str, str]:
    """The teacher's *Reveal to the class* adds its cell to the revealed ones."""
    ref = fields.get("class_reveal", "")
    if not ref or not REF_RE.match(ref):
        return dict(fields)
    revealed = fields.get("revealed", "")
    return {**fields, "revealed": f"{revealed} {ref}".strip()}


async def teacher_edit(request: Request, lesson: Lesson | None, fields: dict[str, str]) -> Response | None:
    """After a good edit on the teacher's page (app.web.pages keeps its state in ``request.state.shown``):
    the room shows it, and its students are told. A state over its byte budget is not kept: the 422
    naming its largest field replaces the page's answer. A change that cannot reach the store before
    the request's deadline raises StoreUnavailable (503), and is never applied later."""

    done = getattr(request.state, "shown", None)
    if lesson is None or not lesson.teacher or done is None:
        return None
    state = room_state(*done)
    try:
        check_state(state, conf(request).class_max_state_bytes)
    except StateTooLarge as e:
        return error_response(request, fields, e, lesson)
    deadline = getattr(request.state, "class_deadline", 0.0)
    await rooms(request).teach(lesson.code, lesson.key, state, fingerprint(state), deadline=deadline)
    return None
