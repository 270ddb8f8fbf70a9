"""A real model's page in a live class, whichever the model ("Your sentence", app.web.class_model; "Next word",
app.web.class_decoder): what both do the same way.

The teacher's posts change the room and keep its fingerprint (the predictions stay about the scenario the class
left); a GET never changes a class: the teacher's page shows the room's state, a student's own state (from the
address) is never stored. A following student's page and workspace are rendered once per change per worker, and
a page left on another kind of page than the room's is sent back to the class's page.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import SimpleNamespace
from urllib.parse import parse_qsl

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.classroom.lesson import Lesson, real_page, rendered
from app.classroom.store import Room
from app.config import settings
from app.i18n import gettext as _
from app.i18n import language
from app.web.class_access import Teacher, not_teacher, notice, notice_failed, too_many
from app.web.class_hooks import STUDENT_COOKIE, app_root, client_id, conf, lesson_for, rooms
from app.web.page_work import PageRequest, Rendered
from app.web.respond import page_request

Pairs = list[tuple[str, str]]


def real_lesson(lesson: Lesson, page: str, **urls: str) -> Lesson:
    """The class panel of a real model's page (``page``: "model", "decoder"): a student's page fetches that page's
    workspace when the teacher changes something; ``urls`` replace the panel's others (the class's results)."""
    lesson.page = page
    lesson.urls = SimpleNamespace(**{**vars(lesson.urls), "workspace": f"{lesson.urls.workspace}?page={page}",
                                     "following": f"{lesson.urls.events}?workspace={page}", **urls})
    return lesson


def html_of(done: Rendered) -> str:
    return done.body if isinstance(done.body, str) else done.body.decode()


def teacher_url(request: Request, room: Room) -> str:
    """The teacher's page for what the room shows: the toy scenario's, or a real model's."""
    shown = real_page(room.state)
    return request.url_for("teach_page" if shown is None else f"class_{shown[0]}", code=room.code).path


def other_page(request: Request, code: str) -> Response:
    """The class moved to another kind of page (a toy scenario, a real model): the student's whole page is
    reloaded."""
    return Response(status_code=204, headers={"HX-Redirect": request.url_for("class_page", code=code).path,
                                              "Cache-Control": "no-store"})


async def following_html(request: Request, room: Room, page: str, part: str,
                         work: Callable[[PageRequest, Lesson], Rendered], *key: object, **urls: str) -> str:
    """A following student's ``part`` ("page", "workspace") of a real model's ``page``, for the room as it is:
    ``work`` runs once per change per worker (``key``: what else it shows, beyond the room's state; ``urls``: as
    ``real_lesson``'s)."""
    lesson = await lesson_for(request, room, "student", quiz=False)
    lesson = real_lesson(lesson, page, **{name: getattr(lesson.urls, url) for name, url in urls.items()})
    asked = page_request(request)
    # Once per language too: the page is rendered in the reader's.
    return await rendered((room.code, room.version, room.state, f"{page}-{part}", app_root(request), language(), *key),
                          lambda: html_of(work(asked, lesson)))


def workspace_response(request: Request, room: Room, html: str) -> HTMLResponse:
    """A following student's workspace. Its address goes back to the class's own: a reload follows the teacher."""
    return HTMLResponse(html, headers={"Cache-Control": "no-store", "Vary": "HX-Request",
                                       "HX-Replace-Url": request.url_for("class_page", code=room.code).path})


async def posted_state(request: Request) -> Pairs:
    """What the teacher shows: the page's posted form, every value of a repeated field kept (the heads switched
    off), or with nothing posted the address's query (a link's)."""
    form = await request.form(max_fields=settings.max_form_fields)
    posted = [(name, value) for name, value in form.multi_items() if isinstance(value, str)]
    return posted or list(request.query_params.multi_items())


async def publish(request: Request, teacher: Teacher, room: Room, state: str) -> Response | None:
    """Keep ``state`` (checked, within its budget) in the teacher's room, its fingerprint kept; None once done,
    else the answer that says why not. A change that cannot reach the store in time is dropped (503)."""
    deadline = time.time() + conf(request).class_write_seconds
    version = await rooms(request).teach(teacher.code, teacher.key, state, room.fingerprint, deadline=deadline)
    return not_teacher(request) if version is None else None


async def teachers_room(request: Request, teacher: Teacher | None) -> Room | Response:
    """The room of the teacher who posts, or the answer for anyone else (and for a class that has ended)."""
    if teacher is None:
        return not_teacher(request)
    room = await rooms(request).get(teacher.code)
    if room is None:
        return notice(request, 403, _("This class has ended"), _("Start a new class from the page."))
    return room


async def panel_room(request: Request, teacher: Teacher | None) -> Room | Response:
    """For the teacher's live panel of the class's answers (polled): the room, else a plain-text 403 or 404."""
    if teacher is None:
        return Response(_("not this class's teacher"), status_code=403, media_type="text/plain")
    room = await rooms(request).get(teacher.code)
    if room is None:
        return Response(_("this class has ended"), status_code=404, media_type="text/plain")
    return room


async def reader(request: Request, room: Room | int, teacher: Teacher | None, page: str) -> Response | tuple[
        Room, Lesson, Pairs]:
    """Who opens a real model's page at its class address, and the state it shows: the teacher's page shows the
    room's (whatever the address holds), a student's page their own (the address's query, never stored). Else
    where to go: the teacher to the page the room shows, anyone without a state of their own to the class's page."""
    if room == 429:
        return too_many(request)
    if not isinstance(room, Room):
        return await notice_failed(request, request.path_params.get("code", "")[:20])
    shown = real_page(room.state)
    if teacher is not None:
        if shown is None or shown[0] != page:  # the class shows another page: the teacher's page for it
            return RedirectResponse(teacher_url(request, room), status_code=303)
        lesson = real_lesson(await lesson_for(request, room, "teacher", key=teacher.key, quiz=False), page)
        return room, lesson, parse_qsl(shown[1], keep_blank_values=True)
    student = request.cookies.get(STUDENT_COOKIE, "")
    pairs = list(request.query_params.multi_items())
    if not pairs or not student or not await rooms(request).is_student(room.code, student):
        return RedirectResponse(request.url_for("class_page", code=room.code).path, status_code=303)
    lesson = real_lesson(await lesson_for(request, room, "student", following=False, quiz=False), page)
    return room, lesson, pairs


def pushed_url(page: PageRequest, request: Request, url: str, query: str, typed: tuple[str, ...]) -> dict[str, str]:
    """A student's own state, answered to htmx: their address keeps it, inside the class (while they type, one
    history entry)."""
    if not page.htmx:
        return {}
    typing = request.headers.get("HX-Trigger-Name") in typed
    return {"HX-Replace-Url" if typing else "HX-Push-Url": f"{url}?{query}"}


async def student_sending(request: Request, room: Room | int, answer: Callable[..., Response], join_again: str,
                          too_many_this_minute: str) -> tuple[Room, str] | Response:
    """The room and the joined student who sends it a guess or a tap, within their share of the minute; else
    ``answer``'s reply that says why not: a code naming no class, an ended class, a browser not in the class
    (``join_again``), or too many this minute (``too_many_this_minute``, its ``{limit}`` filled in)."""
    if room == 429:
        return answer(429, _("Too many codes without a class this minute: wait a minute."))
    if not isinstance(room, Room):
        return answer(404, _("This class has ended."), back="")
    store = rooms(request)
    student = request.cookies.get(STUDENT_COOKIE, "")
    if not student or not await store.is_student(room.code, student):
        return answer(403, join_again)
    limit = conf(request).class_predictions_per_minute
    if not await store.allow(f"predict:{room.code}:{client_id(request) or student}", limit):
        return answer(429, too_many_this_minute.format(limit=limit))
    return room, student
