"""Teach a live class: the teacher's page drives a room, the students' pages follow it.

- POST /class                   start a class from the page's state: 303 to the teacher's link
- GET  /class/{code}/teach      the teacher's page (``?key=`` moves the key into a cookie): every edit
                                there changes the room
- POST /class/{code}/teach      the teacher's menu: the class moves to a preset
- POST /class/{code}/teacher-link  the teacher link with its key, shown when the teacher asks for it
- GET  /class?code=…            the join form's answer: 303 to the class's page
- GET  /class/{code}            a student's page, showing what the teacher shows
- GET  /class/{code}/events     server-sent events: "state" when the teacher changes something (carrying a
                                following student's workspace, or the class's page when it moved to another
                                kind: app.web.class_stream), "predictions" when a student predicts
- GET  /class/{code}/workspace  the room's workspace for a following student (rendered once per change), for
                                a browser that cannot inflate an event's
- POST /class/{code}/predict    a student's prediction of a hidden quiz cell
- POST /class/{code}/results    the teacher's live view of the class's predictions
- GET  /class/{code}/figure.svg|.png?cell=…  Save figure: the histogram of one cell's predictions (the teacher's)

The real models in a class are app.web.class_model's ("Your sentence", GET and POST /class/{code}/model) and
app.web.class_decoder's ("Next word", /class/{code}/decoder); while the room shows one, a student's page and the
workspace here are that page's (app.web.class_pages).

The teacher's own edits go through the page's usual routes (app.web.pages), which call ``teacher_edit``
after a good edit: the state is kept in the room and its streams told. Only the teacher key changes
a room, and it is read from an HttpOnly cookie, never from the page; students are anonymous ids in a
cookie scoped to the class's path.

Fair shares: a browser is known by a random id in a cookie (``attention_client``) and by its address;
codes naming no class are limited per browser and (a class's worth higher) per address, on every
class route; seats, rooms and event streams per address are bounded by the store (app.classroom.store).
"""

from __future__ import annotations

import time
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markupsafe import Markup

from app.classroom.lesson import (
    check_state,
    fingerprint,
    finish,
    heavy,
    on_stage,
    prediction,
    real_page,
    rendered,
    room_state,
    shown,
)
from app.classroom.store import Room, Rooms, RoomsFull, ShareUsed, normal_code
from app.i18n import gettext as _
from app.i18n import language
from app.lesson.presets import PRESETS
from app.state.form import FormError
from app.state.page import preset_page
from app.state.quiz import check
from app.state.reading import read_page
from app.web.class_access import (
    OpenRoom,
    TeacherOf,
    count_failure,
    failed_join,
    feedback,
    not_teacher,
    notice,
    notice_failed,
    too_many,
    too_many_failures,
)
from app.web.class_hooks import (
    STUDENT_COOKIE,
    TEACHER_COOKIE,
    app_root,
    client_address,
    client_id,
    conf,
    lesson_for,
    rooms,
    set_client,
    teacher_key,
)
from app.web.class_pages import following_of
from app.web.class_real import other_page, teacher_url
from app.web.class_stream import event_stream
from app.web.respond import error_response, link, page_response, page_urls, posted_fields, templates, workspace_context

router = APIRouter()
Store = Annotated[Rooms, Depends(rooms)]  # the app's rooms (app.classroom.store)



# --- the routes ----------------------------------------------------------------------------------


@router.post("/class", name="start_class", include_in_schema=False)
async def start_class(request: Request, store: Store) -> Response:
    """Start a class showing the posted state; the teacher's link holds the key."""
    fields = await posted_fields(request)
    try:
        sc, view = read_page(fields)
        state = room_state(sc, view)
        check_state(state, conf(request).class_max_state_bytes)
    except FormError as e:
        return error_response(request, fields, e)
    try:
        code, key = await store.create(state, fingerprint(state), owner=client_address(request))
    except ShareUsed as e:
        return notice(request, 429, _("No more classes from this network"), _(
            "{problem}: they close after {minutes} minutes unused.").format(
                problem=e, minutes=conf(request).class_idle_minutes))
    except RoomsFull as e:
        return notice(request, 503, _("No room for another class"), _("{problem}: try again later.").format(problem=e))
    url = f"{request.url_for('teach_page', code=code).path}?{urlencode({'key': key})}"
    if request.headers.get("HX-Request") == "true":
        return Response(status_code=204, headers={"HX-Redirect": url})
    return RedirectResponse(url, status_code=303)


@router.get("/class", name="join_class", include_in_schema=False)
async def join_class(request: Request, store: Store, code: str = "") -> Response:
    if await too_many_failures(request):
        return too_many(request)
    normal = normal_code(code)
    if not normal or await store.get(normal) is None:
        return await failed_join(request, code[:20])
    return RedirectResponse(request.url_for("class_page", code=normal).path, status_code=303)


@router.get("/class/{code}/teach", name="teach_page", response_class=HTMLResponse, include_in_schema=False)
async def teach_page(request: Request, store: Store, code: str, key: str = "") -> Response:
    """The teacher's page: the room's state. The teacher link's key moves into an HttpOnly cookie at
    once, so the address a projector shows holds no secret, and a reload keeps the class. A GET
    never changes the room (the preset menu posts)."""
    normal = normal_code(code)
    given = key
    key = key or teacher_key(request, normal)
    if not normal or not await store.is_teacher(normal, key):
        if await too_many_failures(request) or not await count_failure(request):
            return too_many(request)
        return not_teacher(request)
    if given:
        response: Response = RedirectResponse(request.url_for("teach_page", code=normal).path, status_code=303)
        response.set_cookie(TEACHER_COOKIE + normal, key, max_age=conf(request).class_idle_minutes * 60,
                            path=app_root(request), httponly=True, samesite="lax", secure=request.url.scheme == "https")
        return response
    room = await store.get(normal)
    if room is None:
        return notice(request, 403, _("This class has ended"), _("Start a new class from the page."))
    if real_page(room.state) is not None:  # the class is on a real model: the teacher's page for it
        return RedirectResponse(teacher_url(request, room), status_code=303)
    sh = await shown(room)
    lesson = await lesson_for(request, room, "teacher", key=key)

    def render() -> HTMLResponse:
        ctx = workspace_context(sh.sc, sh.view)
        ctx["classroom"] = finish(lesson, sh.sc, sh.view, sh)
        return page_response(request, "index.html", ctx, headers={"Cache-Control": "no-store"})

    return await heavy(render)


@router.post("/class/{code}/teach", name="teach_preset", include_in_schema=False)
async def teach_preset(request: Request, store: Store, teacher: TeacherOf) -> Response:
    """The teacher's menu: the class moves to a preset, then back to the teacher's page."""
    if teacher is None:
        return not_teacher(request)
    normal, key = teacher.code, teacher.key
    preset = (await posted_fields(request)).get("preset", "")
    if preset not in PRESETS:
        return notice(request, 422, _("No such scenario"), _("preset: choose one of the menu's scenarios."),
                      back=request.url_for("teach_page", code=normal).path)
    sc, view = preset_page(preset)
    state = room_state(sc, view)
    deadline = time.time() + conf(request).class_write_seconds
    await store.teach(normal, key, state, fingerprint(state), deadline=deadline)
    url = request.url_for("teach_page", code=normal).path
    if request.headers.get("HX-Request") == "true":
        return Response(status_code=204, headers={"HX-Redirect": url})
    return RedirectResponse(url, status_code=303)


@router.post("/class/{code}/teacher-link", name="teacher_link", response_class=HTMLResponse,
             include_in_schema=False)
async def teacher_link(request: Request, teacher: TeacherOf) -> Response:
    """The teacher link, with the key, shown only when the teacher asks for it (to teach from
    another device): never in the page itself, where a projector or a screenshot would show it."""
    if teacher is None:
        return not_teacher(request)
    normal, key = teacher.code, teacher.key
    url = f"{request.url_for('teach_page', code=normal)}?{urlencode({'key': key})}"
    headers = {"Cache-Control": "no-store"}
    if request.headers.get("HX-Request") == "true":
        return page_response(request, "partials/class_teacher_link.html", {"teacher_url": url}, headers=headers)
    response = notice(request, 200, _("Teacher link"),
                      _("To teach this class from another device, open this link there. It holds the class's key: "
                        "do not project or share it."),
                      back=request.url_for("teach_page", code=normal).path, extra=Markup(
                          '<p><input type="text" readonly value="{url}" aria-label="{label}" class="teacher-url">'
                          "</p>").format(url=url, label=_("Teacher link")))
    response.headers.update(headers)
    return response


async def _student(request: Request, store: Rooms, code: str) -> tuple[str, Response | None]:
    """The student's id from the class's cookie, or a new one; or the page that says why not."""
    student = request.cookies.get(STUDENT_COOKIE, "")
    if student and await store.is_student(code, student):
        return student, None
    try:
        new = await store.join(code, client_address(request))
    except ShareUsed as e:
        return "", notice(request, 429, _("No more seats from this network"),
                          _("{problem}. Ask the teacher to start another class for the others.").format(problem=e))
    except RoomsFull as e:
        return "", notice(request, 503, _("This class is full"),
                          _("{problem}. Ask the teacher to start another.").format(problem=e))
    if new is None:
        return "", await failed_join(request, code)
    return new, None


@router.get("/class/{code}", name="class_page", response_class=HTMLResponse, include_in_schema=False)
async def class_page(request: Request, store: Store, code: str, room: OpenRoom) -> Response:
    """A student's page: what the teacher shows now, following each change (with JavaScript), or
    brought up to date by *Sync with the teacher* (without). Rendered once per change per worker."""
    if room == 429:
        return too_many(request)
    if not isinstance(room, Room):
        return await notice_failed(request, code[:20])
    student, refused = await _student(request, store, room.code)
    if refused is not None:
        return refused
    response = HTMLResponse(await following_page(request, room),
                            headers={"Cache-Control": "no-store", "Vary": "HX-Request"})
    _set_student(request, response, room.code, student)
    set_client(request, response)
    return response


async def following_page(request: Request, room: Room) -> str:
    """A following student's whole page, of the kind the room shows (a toy scenario, a real model's): rendered once
    per change per worker. The event stream carries it to a page left on another kind (app.web.class_stream)."""
    real = real_page(room.state)
    return await (_toy_page(request, room) if real is None else following_of(real[0])[0](request, room))


async def _toy_page(request: Request, room: Room) -> str:
    lesson = await lesson_for(request, room, "student")
    sh = await shown(room)

    def render() -> str:
        ctx = workspace_context(sh.sc, sh.view)
        ctx["classroom"] = finish(lesson, sh.sc, sh.view, sh)
        return page_response(request, "index.html", ctx).body.decode()

    return await rendered((room.code, room.version, room.state, "page", app_root(request), language()), render)


def _set_student(request: Request, response: Response, code: str, student: str) -> None:
    response.set_cookie(STUDENT_COOKIE, student, max_age=conf(request).class_idle_minutes * 60,
                        path=request.url_for("class_page", code=code).path, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")


@router.get("/class/{code}/events", name="class_events", include_in_schema=False)
async def class_events(request: Request, store: Store, room: OpenRoom) -> Response:
    """The room's events as server-sent events (app.web.class_stream): a following student's carry the room's
    workspace, or its page for a page of another kind. Bounded per worker and per address."""
    if not isinstance(room, Room):
        text = "too many codes without a class: wait a minute" if room == 429 else "no class with this code"
        return Response(text, status_code=room, media_type="text/plain",
                        headers={"Retry-After": "60"} if room == 429 else None)
    fanout, address = store.fanout, client_address(request)
    if fanout.open >= fanout.max_streams or fanout.by_address[address] >= fanout.per_address:
        share = fanout.by_address[address] >= fanout.per_address
        text = (f"this address has {fanout.per_address} event streams open on this worker" if share
                else f"this worker has its {fanout.max_streams} event streams open")
        return Response(text, status_code=429 if share else 503, media_type="text/plain",
                        headers={"Retry-After": "10"})
    return event_stream(request, store, room, following_workspace, following_page)


@router.get("/class/{code}/workspace", name="class_workspace", response_class=HTMLResponse, include_in_schema=False)
async def class_workspace(request: Request, room: OpenRoom) -> Response:
    """What a following student swaps in after a "state" event: rendered once per change per worker."""
    if room == 429:
        return too_many(request)
    if not isinstance(room, Room):
        return notice(request, 404, _("This class has ended"), _("The teacher's room is closed."))
    real = real_page(room.state)
    if (real[0] if real else "") != request.query_params.get("page", ""):  # the class moved to another page
        return other_page(request, room.code)
    return await following_workspace(request, room)


async def following_workspace(request: Request, room: Room) -> Response:
    """The room's workspace for a following student, of the page it shows (the toy scenario's or a real model's):
    rendered once per change per worker. The event stream (app.web.class_stream) carries it too."""
    real = real_page(room.state)
    if real is not None:
        return await following_of(real[0])[1](request, room)
    urls = page_urls(request)
    sh = await shown(room)
    lesson = await lesson_for(request, room, "student")

    def render() -> str:
        ctx = workspace_context(sh.sc, sh.view)
        link(request, ctx, sh.sc, sh.view)
        ctx["classroom"] = finish(lesson, sh.sc, sh.view, sh)
        ctx["urls"] = urls
        return templates.get_template("partials/workspace.html").render({**ctx, "request": request})

    html = await rendered((room.code, room.version, room.state, "workspace", urls.index, language()), render)
    return HTMLResponse(html, headers={"Cache-Control": "no-store", "Vary": "HX-Request"})


@router.post("/class/{code}/predict", name="class_predict", response_class=HTMLResponse, include_in_schema=False)
async def class_predict(request: Request, store: Store, room: OpenRoom) -> Response:
    """A student's prediction of a hidden cell of the teacher's quiz: one per student per cell,
    changeable until the teacher reveals it. Limited per student and per browser (a browser that
    joins again keeps its count)."""
    if room == 429:
        return feedback(request, 429, _("Too many codes without a class this minute: wait a minute."))
    if not isinstance(room, Room):
        return feedback(request, 404, _("This class has ended."), back="")
    normal = room.code
    student = request.cookies.get(STUDENT_COOKIE, "")
    if not student or not await store.is_student(normal, student):
        return feedback(request, 403, _("Open the class's page again to join it, then send your prediction."))
    limit = conf(request).class_predictions_per_minute
    who = client_id(request) or student
    if not await store.allow(f"predict:{normal}:{who}", limit):
        return feedback(request, 429, _("More than {limit} predictions this minute: wait a moment, then send it "
                                        "again.").format(limit=limit))
    if real_page(room.state) is not None:
        return feedback(request, 422, _("The teacher is showing a real model: there is no cell to predict now."))
    fields = await posted_fields(request)
    sh = await shown(room)
    try:
        ref, value, label = prediction(sh, fields)
    except FormError as e:
        return feedback(request, 422, e.message)
    count = await store.predict(normal, student, ref, value)
    return feedback(request, 200, _("Sent: your prediction {guess} for {label}. The class has sent {count} so far; "
                                    "you can change yours until the teacher reveals the answer.").format(
                                        guess=fields.get("guess", "").strip(), label=label, count=count), sent=True)


@router.post("/class/{code}/results", name="class_results", response_class=HTMLResponse, include_in_schema=False)
async def class_results(request: Request, store: Store, teacher: TeacherOf) -> Response:
    """The teacher's live view of the predictions (the teacher's cookie): how many answered, a
    histogram per predicted cell against its value, and *Reveal to the class*."""
    if teacher is None:
        return Response(_("not this class's teacher"), status_code=403, media_type="text/plain")
    room = await store.get(teacher.code)
    if room is None:
        return Response(_("this class has ended"), status_code=404, media_type="text/plain")
    if real_page(room.state) is not None:  # a page left open on a scenario: no predictions on a real model
        return Response(status_code=204)
    sh = await shown(room)
    lesson = finish(await lesson_for(request, room, "teacher", key=teacher.key), sh.sc, sh.view, sh)
    return page_response(request, "partials/class_results.html", {"classroom": lesson, "view": sh.view})


@router.get("/class/{code}/mine", name="class_mine", response_class=HTMLResponse, include_in_schema=False)
async def class_mine(request: Request, store: Store, room: OpenRoom) -> Response:
    """After a reveal, how close this student's own predictions of the revealed cells were (the
    class's page is shared; this part is each student's, fetched by their page)."""
    if room == 429:
        return too_many(request)
    if not isinstance(room, Room):
        return Response(_("no class with this code"), status_code=404, media_type="text/plain")
    student = request.cookies.get(STUDENT_COOKIE, "")
    verdicts, view = [], None
    if student and real_page(room.state) is None and await store.is_student(room.code, student):
        sh = await shown(room)
        view = sh.view
        mine = await store.mine(room.code, student)
        run, stack, grads = sh.run()
        for ref in on_stage(sh, mine, teacher=False) if view.quiz else ():
            found = check(repr(mine[ref]), ref, run, stack, view.decimals, grads)
            if found is not None:
                verdicts.append(found)
    return page_response(request, "partials/class_mine.html", {"feedback": verdicts, "view": view},
                         headers={"Cache-Control": "no-store"})


@router.get("/readyz", name="readyz", include_in_schema=False)
async def readyz(store: Store) -> Response:
    """Whether this worker can serve a class: its store answers (Redis within its timeout). /healthz
    stays the cheap liveness check, answered without the store."""
    problem = await store.ready()
    if problem:
        return Response(f"not ready: {problem}", status_code=503, media_type="text/plain",
                        headers={"Retry-After": "5", "Cache-Control": "no-store"})
    return Response("ready", media_type="text/plain", headers={"Cache-Control": "no-store"})
