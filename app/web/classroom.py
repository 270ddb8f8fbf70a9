"""Teach a live class: the teacher's page drives a room, the students' pages follow it.

- POST /class                   start a class from the page's state: 303 to the teacher's link
- GET  /class/{code}/teach      the teacher's page (``?key=`` moves the key into a cookie): every edit
                                there changes the room
- POST /class/{code}/teach      the teacher's menu: the class moves to a preset
- POST /class/{code}/teacher-link  the teacher link with its key, shown when the teacher asks for it
- GET  /class?code=…            the join form's answer: 303 to the class's page
- GET  /class/{code}            a student's page, showing what the teacher shows
- GET  /class/{code}/events     server-sent events: "state" when the teacher changes something,
                                "predictions" when a student predicts
- GET  /class/{code}/workspace  the room's workspace for a following student (rendered once per change)
- POST /class/{code}/predict    a student's prediction of a hidden quiz cell
- POST /class/{code}/results    the teacher's live view of the class's predictions

The teacher's own edits go through the page's usual routes (app.web.pages), which call ``teacher_edit``
after a good edit: the state is kept in the room and its streams told. Only the teacher key changes
a room, and it is read from an HttpOnly cookie, never from the page; students are anonymous ids in a
cookie scoped to the class's path.

Fair shares: a browser is known by a random id in a cookie (``attention_client``) and by its address;
codes naming no class are limited per browser and (a class's worth higher) per address, on every
class route; seats, rooms and event streams per address are bounded by the store (app.classroom.rooms).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import re
import secrets
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import TypeVar
from urllib.parse import parse_qsl, urlencode

import numpy as np
import segno
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool

from app.classroom.byte_cache import ByteCache, deep_size
from app.classroom.rooms import Room, Rooms, RoomsFull, ShareUsed, normal_code, spoken_code
from app.config import Settings, settings
from app.lesson.presets import PRESETS
from app.state.cells import matrix_of, parse_cell
from app.state.form import ON, FormError
from app.state.learning import loss_and_gradients
from app.state.permalink import state_query
from app.state.quiz import LABELS, hidden_cells, owner, stage_results
from app.state.scenario import VIEW_FIELDS, Scenario, View
from app.view.charts.predictions import predictions_svg

router = APIRouter()
T = TypeVar("T")

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


def _root(request: Request) -> str:
    return request.scope.get("root_path", "") or "/"


def _set_client(request: Request, response: Response) -> None:
    """Give a browser its id once (a student who mistyped a code keeps their own count of tries)."""
    if not CLIENT_RE.match(request.cookies.get(CLIENT_COOKIE, "")):
        response.set_cookie(CLIENT_COOKIE, client_id(request, new=True), max_age=conf(request).class_idle_minutes * 60,
                            path=_root(request), httponly=True, samesite="lax", secure=request.url.scheme == "https")


def teacher_key(request: Request, code: str) -> str:
    return request.cookies.get(TEACHER_COOKIE + code, "") if code else ""


async def heavy(work: Callable[[], T]) -> T:
    """A room's run or render, once per change per worker: off the event loop."""
    return await run_in_threadpool(work)


# --- what a room shows --------------------------------------------------------------------------


def room_state(sc: Scenario, view: View) -> str:
    """The teacher's state as the room keeps it: the permalink's fields. Students get the same view
    but not presenter mode (a phone is not a projector), nor the teacher's last checked guess."""
    view = replace(view, present=False, guess="", guess_ref="")
    return urlencode(state_query(sc, view))


class StateTooLarge(FormError):
    """A room's state over its byte budget: its largest field named (a pinned or hidden state, typically)."""


def check_state(state: str, budget: int) -> None:
    """Refuse a state over ``budget`` bytes before it is stored or sent to anyone."""
    if len(state) <= budget:
        return
    name, value = max(parse_qsl(state, keep_blank_values=True), key=lambda kv: len(kv[1]), default=("state", ""))
    raise StateTooLarge(name, f"{name}: the class's state would be {len(state):,} bytes, over its {budget:,}; "
                              f"this field alone is {len(value):,}. Reload the preset or make it smaller.")


def fingerprint(state: str) -> str:
    """Which scenario predictions are about: the state without its view fields."""
    kept = [(k, v) for k, v in parse_qsl(state, keep_blank_values=True) if k not in VIEW_FIELDS]
    return hashlib.sha256(urlencode(kept).encode()).hexdigest()[:32]


@dataclass
class Shown:
    """A room's state, read once per change and kept: the scenario, the view and their run."""

    sc: Scenario
    view: View
    pairs: dict[str, str]
    _run: tuple | None = None

    def run(self) -> tuple:
        """(run in view, stack, gradients or None)."""
        if self._run is None:
            first, stack = self.sc.compute()
            run = first if stack is None else stack.blocks[self.view.block].attention
            grads = None
            if self.view.learning is not None and stack is None:
                grads = loss_and_gradients(run, self.view.learning)[1]
            self._run = (run, stack, grads)
        return self._run


# By room, version and state: a code given again after its room expired starts at version 1 again.
# Bounded by bytes (settings.class_cache_bytes, class_render_cache_bytes): a run can be 35 MB.
_shown: ByteCache[Shown] = ByteCache(settings.class_cache_bytes)
_rendered: ByteCache[str] = ByteCache(settings.class_render_cache_bytes)
_rendering: dict[tuple, asyncio.Future[str]] = {}  # renders under way: the same key waits


def _read_room(state: str) -> Shown:
    from app.web.pages import read_page

    pairs = dict(parse_qsl(state, keep_blank_values=True))
    sc, view = read_page(pairs)
    found = Shown(sc, view, pairs)
    found.run()
    return found


async def shown(room: Room) -> Shown:
    """The room's state read and run, once per change per worker (off the event loop)."""
    key = (room.code, room.version, room.state)
    found = _shown.get(key)
    if found is None:
        found = await heavy(functools.partial(_read_room, room.state))
        _shown.put(key, found, deep_size(found))
    return found


async def rendered(key: tuple, render: Callable[[], str]) -> str:
    """``render()`` once per key per worker, however many ask at once; kept within the byte budget."""
    html = _rendered.get(key)
    pending = _rendering.get(key)
    if html is None and pending is not None:  # the class's other requests for this change wait for its one render
        try:
            html = await asyncio.shield(pending)
        except asyncio.CancelledError:
            if not pending.cancelled():
                raise  # this request itself was cancelled, not the render it waited for
    if html is None:
        _rendering[key] = rendering = asyncio.get_running_loop().create_future()
        try:
            html = await heavy(render)
            _rendered.put(key, html, sys.getsizeof(html))
            rendering.set_result(html)
        finally:
            rendering.cancel()  # when it failed: the waiting requests render it themselves
            if _rendering.get(key) is rendering:
                del _rendering[key]
    return html


# --- the class's predictions ---------------------------------------------------------------------


@dataclass
class Question:
    """One predicted cell: its label, the class's predictions and, for the teacher or once revealed, its value."""

    ref: str
    label: str
    values: list[float]
    truth: float
    revealed: bool
    chart: Markup = Markup("")


def on_stage(sh: Shown, refs: Iterable[str], *, teacher: bool) -> list[str]:
    """The cell refs among ``refs`` that the stage in view computes, in the quiz's order: all of them
    for the teacher, the revealed ones for students."""
    view = sh.view
    refs = set(refs)
    found = []
    for name in stage_results(view.stage, sh.run()[1], view.block):
        prefix = f"{name}.{owner(name, view.head, view.block)}."
        found += sorted(r for r in refs if r.startswith(prefix) and (teacher or r in view.revealed))
    return found


def questions(sh: Shown, predictions: Mapping[str, list[float]], *, teacher: bool) -> list[Question]:
    """The predicted cells of the stage in view: all of them for the teacher, the revealed ones for
    students (each with its histogram)."""
    view = sh.view
    if not view.quiz or not predictions:
        return []
    run, stack, grads = sh.run()
    found = []
    for ref in on_stage(sh, predictions, teacher=teacher):
        cell = parse_cell(ref, run, stack, grads)
        if cell is not None:
            m = matrix_of(cell, run, stack, grads)
            name = cell.matrix
            revealed = ref in view.revealed
            label = f"{LABELS.get(name, name)} row {cell.row + 1}, column {cell.col + 1}"
            q = Question(ref, label, predictions[ref], float(m[cell.row, cell.col]), revealed)
            q.chart = predictions_svg(q.values, q.truth, label=label, chart_id="hist-" + ref.replace(".", "-"))
            found.append(q)
    return found


# --- the context the templates get ---------------------------------------------------------------


@dataclass
class Lesson:
    """A page in a class: the teacher's (``key``) or a student's, and what the class panel shows."""

    code: str
    role: str  # "teacher" or "student"
    urls: SimpleNamespace
    key: str = ""
    following: bool = True  # a student's page shows the teacher's state
    students: int = 0
    version: int = 0  # the room's, when this page was drawn
    answered: int = 0
    questions: list[Question] = field(default_factory=list)
    predictions: dict[str, list[float]] = field(default_factory=dict)  # the room's, by cell ref
    fingerprint: str = ""  # the scenario they are about
    join_url: str = ""
    qr: Markup = Markup("")
    message: str = ""  # a student's last prediction, acknowledged

    @property
    def spoken(self) -> str:
        return spoken_code(self.code)

    @property
    def teacher(self) -> bool:
        return self.role == "teacher"


def class_urls(request: Request, code: str) -> SimpleNamespace:
    def path(name: str) -> str:
        return request.url_for(name, code=code).path

    return SimpleNamespace(page=path("class_page"), teach=path("teach_page"), events=path("class_events"),
                           workspace=path("class_workspace"), predict=path("class_predict"),
                           results=path("class_results"), mine=path("class_mine"), teacher_link=path("teacher_link"))


def qr_svg(url: str) -> Markup:
    """The join link as a QR code (segno), an inline SVG with a title; no style attribute."""
    qr = segno.make(url, error="m")
    svg = qr.svg_inline(scale=4, border=2, dark="#111", light="#fff", title="QR code of the join link",
                        svgclass="class-qr", lineclass=None, omitsize=True)
    return Markup(svg.replace("<svg ", '<svg role="img" ', 1))


@functools.lru_cache(maxsize=64)
def qr_for(url: str) -> Markup:
    return qr_svg(url)


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


def finish(lesson: Lesson | None, sc: Scenario, view: View, sh: Shown | None = None) -> Lesson | None:
    """The predictions of the stage now on screen: for the teacher every predicted cell, for students
    the revealed ones. Another scenario than the room's has none yet."""
    if lesson is None:
        return None
    if not (view.quiz and lesson.predictions):  # most edits: nothing to look up
        lesson.questions, lesson.answered = [], 0
        return lesson
    if sh is None:
        state = room_state(sc, view)
        same = fingerprint(state) == lesson.fingerprint
        sh = Shown(sc, view, {})
    else:
        same = True
    lesson.questions = questions(sh, lesson.predictions if same else {}, teacher=lesson.teacher)
    lesson.answered = sum(len(q.values) for q in lesson.questions)
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
    from app.web.pages import _error_response

    done = getattr(request.state, "shown", None)
    if lesson is None or not lesson.teacher or done is None:
        return None
    state = room_state(*done)
    try:
        check_state(state, conf(request).class_max_state_bytes)
    except StateTooLarge as e:
        return _error_response(request, fields, e, lesson)
    deadline = getattr(request.state, "class_deadline", 0.0)
    await rooms(request).teach(lesson.code, lesson.key, state, fingerprint(state), deadline=deadline)
    return None


# --- the routes ----------------------------------------------------------------------------------


def _page(request: Request, template: str, ctx: dict, status: int = 200, headers: dict | None = None) -> HTMLResponse:
    from app.web.pages import _respond

    return _respond(request, template, ctx, status=status, headers=headers)


def _notice(request: Request, status: int, title: str, message: str, code: str = "", back: str = "",
            extra: Markup | None = None) -> HTMLResponse:
    """A short page (or, for htmx, the message alone) for a class that cannot be shown."""
    headers = {"Retry-After": "60"} if status in (429, 503) else None
    return _page(request, "class_notice.html", {"title": title, "message": message, "code": code, "back": back,
                                                "extra": extra or ""}, status=status, headers=headers)


# --- codes naming no class: counted per browser and per address, on every class route ------------


def _failure_buckets(request: Request) -> list[tuple[str, int]]:
    c = conf(request)
    found = [(f"fail-address:{client_address(request)}", c.class_failures_per_address)]
    if client_id(request):
        found.append((f"fail-client:{client_id(request)}", c.class_failures_per_client))
    return found


async def _too_many_failures(request: Request) -> bool:
    """A browser or an address that named too many codes without a class this minute gets 429, even
    for a right one: a guess that hits cannot be told from one that misses."""
    store = rooms(request)
    for bucket, limit in _failure_buckets(request):
        if not await store.allow(bucket, limit, peek=True):
            return True
    return False


async def _count_failure(request: Request) -> bool:
    """Count a code naming no class (a browser without an id gets one); False when that was one too many."""
    client_id(request, new=True)
    store = rooms(request)
    allowed = True
    for bucket, limit in _failure_buckets(request):
        allowed = await store.allow(bucket, limit) and allowed
    return allowed


async def _failed_join(request: Request, code: str) -> HTMLResponse:
    """A code naming no class: counted, then 404 (or 429 when that was one too many)."""
    if not await _count_failure(request):
        response = _too_many(request)
        _set_client(request, response)
        return response
    return await _notice_failed(request, code)


def _too_many(request: Request) -> HTMLResponse:
    c = conf(request)
    return _notice(request, 429, "Too many tries",
                   f"More than {c.class_failures_per_client} codes without a class this minute from this browser "
                   f"(or {c.class_failures_per_address} from this network): wait a minute, then type the code again.")


async def _open_room(request: Request, code: str) -> Room | int:
    """The room a class route names, or why not: 429 over the failures' limit, 404 for no room (a
    failure counted). A student or the teacher of the room, known by their cookie, is never refused."""
    store = rooms(request)
    normal = normal_code(code)
    room = await store.get(normal) if normal else None
    if room is not None:
        student = request.cookies.get(STUDENT_COOKIE, "")
        if student and await store.is_student(normal, student):
            return room
        key = teacher_key(request, normal)
        if key and await store.is_teacher(normal, key):
            return room
    if await _too_many_failures(request):
        return 429
    if room is None:
        return 404 if await _count_failure(request) else 429
    return room


@router.post("/class", name="start_class", include_in_schema=False)
async def start_class(request: Request) -> Response:
    """Start a class showing the posted state; the teacher's link holds the key."""
    from app.web.pages import _error_response, posted_fields, read_page

    fields = await posted_fields(request)
    store = rooms(request)
    try:
        sc, view = read_page(fields)
        state = room_state(sc, view)
        check_state(state, conf(request).class_max_state_bytes)
    except FormError as e:
        return _error_response(request, fields, e)
    try:
        code, key = await store.create(state, fingerprint(state), owner=client_address(request))
    except ShareUsed as e:
        return _notice(request, 429, "No more classes from this network", f"{e}: they close after "
                       f"{conf(request).class_idle_minutes} minutes unused.")
    except RoomsFull as e:
        return _notice(request, 503, "No room for another class", f"{e}: try again later.")
    url = f"{request.url_for('teach_page', code=code).path}?{urlencode({'key': key})}"
    if request.headers.get("HX-Request") == "true":
        return Response(status_code=204, headers={"HX-Redirect": url})
    return RedirectResponse(url, status_code=303)


@router.get("/class", name="join_class", include_in_schema=False)
async def join_class(request: Request, code: str = "") -> Response:
    if await _too_many_failures(request):
        return _too_many(request)
    normal = normal_code(code)
    if not normal or await rooms(request).get(normal) is None:
        return await _failed_join(request, code[:20])
    return RedirectResponse(request.url_for("class_page", code=normal).path, status_code=303)


def _not_teacher(request: Request) -> HTMLResponse:
    return _notice(request, 403, "This teacher link does not open a class",
                   f"The class has ended (rooms close after {conf(request).class_idle_minutes} minutes unused), or "
                   "the link is not whole. Start a new class from the page.")


@router.get("/class/{code}/teach", name="teach_page", response_class=HTMLResponse, include_in_schema=False)
async def teach_page(request: Request, code: str, key: str = "") -> Response:
    """The teacher's page: the room's state. The teacher link's key moves into an HttpOnly cookie at
    once, so the address a projector shows holds no secret, and a reload keeps the class. A GET
    never changes the room (the preset menu posts)."""
    from app.web.pages import _workspace_context

    store = rooms(request)
    normal = normal_code(code)
    given = key
    key = key or teacher_key(request, normal)
    if not normal or not await store.is_teacher(normal, key):
        if await _too_many_failures(request) or not await _count_failure(request):
            return _too_many(request)
        return _not_teacher(request)
    if given:
        response: Response = RedirectResponse(request.url_for("teach_page", code=normal).path, status_code=303)
        response.set_cookie(TEACHER_COOKIE + normal, key, max_age=conf(request).class_idle_minutes * 60,
                            path=_root(request), httponly=True, samesite="lax", secure=request.url.scheme == "https")
        return response
    room = await store.get(normal)
    if room is None:
        return _notice(request, 403, "This class has ended", "Start a new class from the page.")
    sh = await shown(room)
    lesson = await lesson_for(request, room, "teacher", key=key)

    def render() -> HTMLResponse:
        ctx = _workspace_context(sh.sc, sh.view)
        ctx["classroom"] = finish(lesson, sh.sc, sh.view, sh)
        return _page(request, "index.html", ctx, headers={"Cache-Control": "no-store"})

    return await heavy(render)


@router.post("/class/{code}/teach", name="teach_preset", include_in_schema=False)
async def teach_preset(request: Request, code: str) -> Response:
    """The teacher's menu: the class moves to a preset, then back to the teacher's page."""
    from app.web.pages import posted_fields, preset_page

    store = rooms(request)
    normal = normal_code(code)
    key = teacher_key(request, normal)
    if not normal or not await store.is_teacher(normal, key):
        return _not_teacher(request)
    preset = (await posted_fields(request)).get("preset", "")
    if preset not in PRESETS:
        return _notice(request, 422, "No such scenario", "preset: choose one of the menu's scenarios.",
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
async def teacher_link(request: Request, code: str) -> Response:
    """The teacher link, with the key, shown only when the teacher asks for it (to teach from
    another device): never in the page itself, where a projector or a screenshot would show it."""
    from app.web.pages import _respond

    normal = normal_code(code)
    key = teacher_key(request, normal)
    if not normal or not await rooms(request).is_teacher(normal, key):
        return _not_teacher(request)
    url = f"{request.url_for('teach_page', code=normal)}?{urlencode({'key': key})}"
    headers = {"Cache-Control": "no-store"}
    if request.headers.get("HX-Request") == "true":
        return _respond(request, "partials/class_teacher_link.html", {"teacher_url": url}, headers=headers)
    response = _notice(request, 200, "Teacher link", "To teach this class from another device, open this link there. "
                       "It holds the class's key: do not project or share it.",
                       back=request.url_for("teach_page", code=normal).path, extra=Markup(
                           '<p><input type="text" readonly value="{}" aria-label="Teacher link" class="teacher-url">'
                           "</p>").format(url))
    response.headers.update(headers)
    return response


async def _student(request: Request, code: str) -> tuple[str, Response | None]:
    """The student's id from the class's cookie, or a new one; or the page that says why not."""
    store = rooms(request)
    student = request.cookies.get(STUDENT_COOKIE, "")
    if student and await store.is_student(code, student):
        return student, None
    try:
        new = await store.join(code, client_address(request))
    except ShareUsed as e:
        return "", _notice(request, 429, "No more seats from this network",
                           f"{e}. Ask the teacher to start another class for the others.")
    except RoomsFull as e:
        return "", _notice(request, 503, "This class is full", f"{e}. Ask the teacher to start another.")
    if new is None:
        return "", await _failed_join(request, code)
    return new, None


@router.get("/class/{code}", name="class_page", response_class=HTMLResponse, include_in_schema=False)
async def class_page(request: Request, code: str) -> Response:
    """A student's page: what the teacher shows now, following each change (with JavaScript), or
    brought up to date by *Sync with the teacher* (without). Rendered once per change per worker."""
    from app.web.pages import _workspace_context

    room = await _open_room(request, code)
    if room == 429:
        return _too_many(request)
    if not isinstance(room, Room):
        return await _notice_failed(request, code[:20])
    student, refused = await _student(request, room.code)
    if refused is not None:
        return refused
    lesson = await lesson_for(request, room, "student")
    sh = await shown(room)

    def render() -> str:
        ctx = _workspace_context(sh.sc, sh.view)
        ctx["classroom"] = finish(lesson, sh.sc, sh.view, sh)
        return _page(request, "index.html", ctx).body.decode()

    html = await rendered((room.code, room.version, room.state, "page", _root(request)), render)
    response = HTMLResponse(html, headers={"Cache-Control": "no-store", "Vary": "HX-Request"})
    _set_student(request, response, room.code, student)
    _set_client(request, response)
    return response


async def _notice_failed(request: Request, code: str) -> HTMLResponse:
    """The 404 for a code naming no class (the failure already counted)."""
    response = _notice(request, 404, "No class with this code",
                       "Check the code on the teacher's screen and type it again (letters and digits, as KQ7-M4P).",
                       code)
    _set_client(request, response)
    return response


def _set_student(request: Request, response: Response, code: str, student: str) -> None:
    response.set_cookie(STUDENT_COOKIE, student, max_age=conf(request).class_idle_minutes * 60,
                        path=request.url_for("class_page", code=code).path, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")


@router.get("/class/{code}/events", name="class_events", include_in_schema=False)
async def class_events(request: Request, code: str) -> Response:
    """The room's events as server-sent events. The first tells the current version at once (with
    its ``id:``, so a reconnected stream starts from the room as it is); a comment every
    KEEPALIVE_SECONDS keeps proxies from closing the stream, and a room that has gone says "closed"
    and ends it. A store that stops answering says "unreachable" and ends it too."""
    store = rooms(request)
    room = await _open_room(request, code)
    if not isinstance(room, Room):
        text = "too many codes without a class: wait a minute" if room == 429 else "no class with this code"
        return Response(text, status_code=room, media_type="text/plain",
                        headers={"Retry-After": "60"} if room == 429 else None)
    normal, address = room.code, client_address(request)
    fanout = store.fanout
    if fanout.open >= fanout.max_streams or fanout.by_address[address] >= fanout.per_address:
        share = fanout.by_address[address] >= fanout.per_address
        text = (f"this address has {fanout.per_address} event streams open on this worker" if share
                else f"this worker has its {fanout.max_streams} event streams open")
        return Response(text, status_code=429 if share else 503, media_type="text/plain",
                        headers={"Retry-After": "10"})

    async def events() -> AsyncIterator[bytes]:
        # The stream is registered here, in the body, so it is always let go when the body ends:
        # at a disconnect Starlette cancels this generator inside the ``async with``.
        try:
            async with store.listen(normal, address) as queue:
                room = await store.get(normal)
                if room is None:
                    yield b"event: closed\ndata: 0\n\n"
                    return
                yield f"retry: {RETRY_MS}\nid: {room.version}\nevent: state\ndata: {room.version}\n\n".encode()
                while True:
                    try:
                        event = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
                    except TimeoutError:
                        if await store.get(normal) is None:
                            yield b"event: closed\ndata: 0\n\n"
                            return
                        yield b": keep-alive\n\n"
                        continue
                    if event.kind == "state":
                        yield f"id: {event.version}\n".encode()
                    yield f"event: {event.kind}\ndata: {event.version} {event.count}\n\n".encode()
        except RoomsFull:  # another stream took the last place since the check above
            yield b"event: closed\ndata: 0\n\n"
        except store.errors:  # the store stopped answering: the page says so, and tries again later
            yield b"event: unreachable\ndata: 0\n\n"

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


@router.get("/class/{code}/workspace", name="class_workspace", response_class=HTMLResponse, include_in_schema=False)
async def class_workspace(request: Request, code: str) -> Response:
    """What a following student swaps in after a "state" event: rendered once per change per worker."""
    from app.web.pages import _link, _workspace_context, page_urls, templates

    room = await _open_room(request, code)
    if room == 429:
        return _too_many(request)
    if not isinstance(room, Room):
        return _notice(request, 404, "This class has ended", "The teacher's room is closed.")
    urls = page_urls(request)
    sh = await shown(room)
    lesson = await lesson_for(request, room, "student")

    def render() -> str:
        ctx = _workspace_context(sh.sc, sh.view)
        _link(request, ctx, sh.sc, sh.view)
        ctx["classroom"] = finish(lesson, sh.sc, sh.view, sh)
        ctx["urls"] = urls
        return templates.get_template("partials/workspace.html").render({**ctx, "request": request})

    html = await rendered((room.code, room.version, room.state, "workspace", urls.index), render)
    return HTMLResponse(html, headers={"Cache-Control": "no-store", "Vary": "HX-Request"})


@router.post("/class/{code}/predict", name="class_predict", response_class=HTMLResponse, include_in_schema=False)
async def class_predict(request: Request, code: str) -> Response:
    """A student's prediction of a hidden cell of the teacher's quiz: one per student per cell,
    changeable until the teacher reveals it. Limited per student and per browser (a browser that
    joins again keeps its count)."""
    from app.web.pages import posted_fields

    store = rooms(request)
    room = await _open_room(request, code)
    if room == 429:
        return _feedback(request, 429, "Too many codes without a class this minute: wait a minute.")
    if not isinstance(room, Room):
        return _feedback(request, 404, "This class has ended.", back="")
    normal = room.code
    student = request.cookies.get(STUDENT_COOKIE, "")
    if not student or not await store.is_student(normal, student):
        return _feedback(request, 403, "Open the class's page again to join it, then send your prediction.")
    limit = conf(request).class_predictions_per_minute
    who = client_id(request) or student
    if not await store.allow(f"predict:{normal}:{who}", limit):
        return _feedback(request, 429, f"More than {limit} predictions this minute: wait a moment, then send it again.")
    fields = await posted_fields(request)
    sh = await shown(room)
    try:
        ref, value, label = prediction(sh, fields)
    except FormError as e:
        return _feedback(request, 422, e.message)
    count = await store.predict(normal, student, ref, value)
    return _feedback(request, 200, f"Sent: your prediction {fields.get('guess', '').strip()} for {label}. "
                                   f"The class has sent {count} so far; you can change yours until the teacher "
                                   "reveals the answer.", sent=True)


def _feedback(request: Request, status: int, message: str, sent: bool = False, back: str | None = None) -> HTMLResponse:
    from app.web.pages import _respond

    if request.headers.get("HX-Request") != "true":  # without JavaScript: a page, with the way back to the class
        code = normal_code(request.path_params.get("code", ""))
        back = back if back is not None else (class_urls(request, code).page if code else "")
        return _respond(request, "class_notice.html", {"title": "Your prediction" if sent else "Not sent",
                                                       "message": message, "back": back}, status=status)
    return _respond(request, "partials/class_feedback.html", {"message": message, "sent": sent}, status=status)


def prediction(sh: Shown, fields: Mapping[str, str]) -> tuple[str, float, str]:
    """The cell and value a student predicts, checked against the room's quiz: a result of the stage
    in view that is still hidden, and a finite number in the page's bounds."""
    from app.state.form import read_fields, read_number

    view = sh.view
    if not view.quiz:
        raise FormError("guess", "The teacher's page has no quiz on now: nothing to predict.")
    typed = {k: fields.get(k, "") for k in ("guess_matrix", "guess_row", "guess_col", "guess")}
    f = read_fields({**sh.pairs, **typed, "action": "guess"})
    matrix, row, col = f.cell_ref("guess")
    names = stage_results(view.stage, sh.run()[1], view.block)
    if matrix not in names:
        raise FormError("guess_matrix", "guess_matrix: choose one of the matrices this stage computes.")
    ref = f"{matrix}.{owner(matrix, view.head, view.block)}.{row}.{col}"
    run, stack, grads = sh.run()
    cell = parse_cell(ref, run, stack, grads)
    if cell is None:
        raise FormError("guess_row", "guess_row: that row and column are outside the matrix.")
    m = matrix_of(cell, run, stack, grads)
    if not hidden_cells(matrix, m, owner(matrix, view.head, view.block), view.revealed)[row, col]:
        raise FormError("guess", "The teacher has revealed this cell: choose one still hidden (?).")
    try:
        value = read_number(f.guess)
    except ValueError:
        raise FormError("guess", "guess: type your prediction as a number, such as 0.25.") from None
    if not np.isfinite(value) or abs(value) > settings.max_abs_value:
        raise FormError("guess", f"guess: a number between −{settings.max_abs_value:g} and {settings.max_abs_value:g}.")
    return ref, value, f"{LABELS.get(matrix, matrix)} row {row + 1}, column {col + 1}"


@router.post("/class/{code}/results", name="class_results", response_class=HTMLResponse, include_in_schema=False)
async def class_results(request: Request, code: str) -> Response:
    """The teacher's live view of the predictions (the teacher's cookie): how many answered, a
    histogram per predicted cell against its value, and *Reveal to the class*."""
    from app.web.pages import _respond

    store = rooms(request)
    normal = normal_code(code)
    key = teacher_key(request, normal)
    if not normal or not await store.is_teacher(normal, key):
        return Response("not this class's teacher", status_code=403, media_type="text/plain")
    room = await store.get(normal)
    if room is None:
        return Response("this class has ended", status_code=404, media_type="text/plain")
    sh = await shown(room)
    lesson = finish(await lesson_for(request, room, "teacher", key=key), sh.sc, sh.view, sh)
    return _respond(request, "partials/class_results.html", {"classroom": lesson, "view": sh.view})


@router.get("/class/{code}/mine", name="class_mine", response_class=HTMLResponse, include_in_schema=False)
async def class_mine(request: Request, code: str) -> Response:
    """After a reveal, how close this student's own predictions of the revealed cells were (the
    class's page is shared; this part is each student's, fetched by their page)."""
    from app.state.quiz import check
    from app.web.pages import _respond

    store = rooms(request)
    room = await _open_room(request, code)
    if room == 429:
        return _too_many(request)
    if not isinstance(room, Room):
        return Response("no class with this code", status_code=404, media_type="text/plain")
    student = request.cookies.get(STUDENT_COOKIE, "")
    feedback, view = [], None
    if student and await store.is_student(room.code, student):
        sh = await shown(room)
        view = sh.view
        mine = await store.mine(room.code, student)
        run, stack, grads = sh.run()
        for ref in on_stage(sh, mine, teacher=False) if view.quiz else ():
            found = check(repr(mine[ref]), ref, run, stack, view.decimals, grads)
            if found is not None:
                feedback.append(found)
    return _respond(request, "partials/class_mine.html", {"feedback": feedback, "view": view},
                    headers={"Cache-Control": "no-store"})


@router.get("/readyz", name="readyz", include_in_schema=False)
async def readyz(request: Request) -> Response:
    """Whether this worker can serve a class: its store answers (Redis within its timeout). /healthz
    stays the cheap liveness check, answered without the store."""
    problem = await rooms(request).ready()
    if problem:
        return Response(f"not ready: {problem}", status_code=503, media_type="text/plain",
                        headers={"Retry-After": "5", "Cache-Control": "no-store"})
    return Response("ready", media_type="text/plain", headers={"Cache-Control": "no-store"})
