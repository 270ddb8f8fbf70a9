"""Teach a live class: the teacher's page drives a room, the students' pages follow it.

- POST /class                   start a class from the page's state: 303 to the teacher's link
- GET  /class/{code}/teach      the teacher's page (``?key=``): every edit there changes the room
- GET  /class?code=…            the join form's answer: 303 to the class's page
- GET  /class/{code}            a student's page, showing what the teacher shows
- GET  /class/{code}/events     server-sent events: "state" when the teacher changes something,
                                "predictions" when a student predicts
- GET  /class/{code}/workspace  the room's workspace for a following student (rendered once per change)
- POST /class/{code}/predict    a student's prediction of a hidden quiz cell
- POST /class/{code}/results    the teacher's live view of the class's predictions

The teacher's own edits go through the page's usual routes (app.pages), which call ``teacher_edit``
after a good edit: the state is kept in the room and its streams told. Only the teacher key changes
a room; students are anonymous ids in a cookie scoped to the class's path.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import re
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from urllib.parse import parse_qsl, urlencode

import numpy as np
import segno
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from markupsafe import Markup

from app.class_charts import predictions_svg
from app.config import Settings, settings
from app.form import ON, FormError
from app.learning import loss_and_gradients
from app.permalink import state_query
from app.presets import PRESETS
from app.quiz import LABELS, hidden_cells, owner, stage_results
from app.rooms import Room, Rooms, RoomsFull, normal_code, spoken_code
from app.scenario import VIEW_FIELDS, Scenario, View

router = APIRouter()

STUDENT_COOKIE = "attention_student"  # a student's anonymous id, for the class's path only
TEACHER_COOKIE = "attention_teacher"  # the teacher's key, for the class's path only
KEEPALIVE_SECONDS = 15.0  # a comment line on an idle stream, so proxies keep it open
RETRY_MS = 2000  # how soon a browser reconnects a dropped stream
REF_RE = re.compile(r"^[a-z_0-9]{1,20}\.\d{1,3}\.\d{1,4}\.\d{1,4}$")
CACHED_ROOMS = 256  # parsed room states and rendered workspaces kept per worker


def rooms(request: Request) -> Rooms:
    return request.app.state.rooms


def conf(request: Request) -> Settings:
    """The app's settings (a test's app may have its own bounds)."""
    return getattr(request.app.state, "config", settings)


def client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


# --- what a room shows --------------------------------------------------------------------------


def room_state(sc: Scenario, view: View) -> str:
    """The teacher's state as the room keeps it: the permalink's fields. Students get the same view
    but not presenter mode (a phone is not a projector), nor the teacher's last checked guess."""
    view = replace(view, present=False, guess="", guess_ref="")
    return urlencode(state_query(sc, view))


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
_shown: dict[tuple[str, int, str], Shown] = {}
_rendered: dict[tuple[str, int, str, str], str] = {}
_rendering: dict[tuple[str, int, str, str], asyncio.Future[str]] = {}  # renders under way: the same key waits


def _remember(cache: dict, key: tuple, value: object) -> None:
    if len(cache) >= CACHED_ROOMS:
        cache.pop(next(iter(cache)))
    cache[key] = value


def shown(room: Room) -> Shown:
    from app.pages import read_page

    key = (room.code, room.version, room.state)
    found = _shown.get(key)
    if found is None:
        pairs = dict(parse_qsl(room.state, keep_blank_values=True))
        sc, view = read_page(pairs)
        found = Shown(sc, view, pairs)
        _remember(_shown, key, found)
    return found


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
    from app.render import PanelBuilder

    view = sh.view
    if not view.quiz or not predictions:
        return []
    run, stack, grads = sh.run()
    builder = PanelBuilder(sh.sc, run, view, stack, grads)
    found = []
    for ref in on_stage(sh, predictions, teacher=teacher):
        cell = builder.parse(ref)
        if cell is not None:
            m = builder.cell_matrix(cell)
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
    teacher_url: str = ""  # the teacher link, with the key: to teach from another device
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
                           results=path("class_results"), mine=path("class_mine"))


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
    """For a post from a page in a class (``class_code``): the teacher's lesson when the key is right,
    a student's otherwise; None outside a class. Nothing here changes the room."""
    code = normal_code(fields.get("class_code", ""))
    if not code:
        return None
    store = rooms(request)
    room = await store.get(code)
    if room is None:
        return None
    key = fields.get("class_key", "")
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


async def teacher_edit(request: Request, lesson: Lesson | None) -> None:
    """After a good edit on the teacher's page (app.pages keeps its state in ``request.state.shown``):
    the room shows it, and its students are told."""
    done = getattr(request.state, "shown", None)
    if lesson is None or not lesson.teacher or done is None:
        return
    state = room_state(*done)
    await rooms(request).teach(lesson.code, lesson.key, state, fingerprint(state))


# --- the routes ----------------------------------------------------------------------------------


def _page(request: Request, template: str, ctx: dict, status: int = 200, headers: dict | None = None) -> HTMLResponse:
    from app.pages import _respond

    return _respond(request, template, ctx, status=status, headers=headers)


def _notice(request: Request, status: int, title: str, message: str, code: str = "") -> HTMLResponse:
    """A short page (or, for htmx, the message alone) for a class that cannot be shown."""
    headers = {"Retry-After": "60"} if status in (429, 503) else None
    return _page(request, "class_notice.html", {"title": title, "message": message, "code": code},
                 status=status, headers=headers)


async def _too_many_failures(request: Request) -> bool:
    """An address that named too many codes without a room this minute gets 429, even for a right one."""
    limit = conf(request).class_joins_per_minute
    return not await rooms(request).allow(f"join-fail:{client_address(request)}", limit, peek=True)


async def _failed_join(request: Request, code: str) -> HTMLResponse:
    store = rooms(request)
    if not await store.allow(f"join-fail:{client_address(request)}", conf(request).class_joins_per_minute):
        return _too_many(request)
    return _notice(request, 404, "No class with this code",
                   "Check the code on the teacher's screen and type it again (letters and digits, as KQ7-M4P).",
                   code)


def _too_many(request: Request) -> HTMLResponse:
    return _notice(request, 429, "Too many tries",
                   f"More than {conf(request).class_joins_per_minute} codes without a class this minute: "
                   "wait a minute, then type the code again.")


@router.post("/class", name="start_class", include_in_schema=False)
async def start_class(request: Request) -> Response:
    """Start a class showing the posted state; the teacher's link holds the key."""
    from app.pages import _error_response, posted_fields, read_page

    fields = await posted_fields(request)
    store = rooms(request)
    if not await store.allow(f"start:{client_address(request)}", conf(request).class_joins_per_minute):
        return _too_many(request)
    try:
        sc, view = read_page(fields)
    except FormError as e:
        return _error_response(request, fields, e)
    state = room_state(sc, view)
    try:
        code, key = await store.create(state, fingerprint(state))
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


@router.get("/class/{code}/teach", name="teach_page", response_class=HTMLResponse, include_in_schema=False)
async def teach_page(request: Request, code: str, key: str = "", preset: str = "") -> Response:
    """The teacher's page: the room's state, or a preset chosen from the menu (which the room then
    shows). The teacher link's key moves into a cookie for the class's path at once, so the address
    a projector shows holds no secret, and a reload keeps the class."""
    from app.pages import _workspace_context, preset_page

    store = rooms(request)
    normal = normal_code(code)
    given = key
    key = key or request.cookies.get(TEACHER_COOKIE, "")
    if not normal or not await store.is_teacher(normal, key):
        return _notice(request, 403, "This teacher link does not open a class",
                       "The class has ended (rooms close after "
                       f"{conf(request).class_idle_minutes} minutes unused), or the link is not whole. Start a new "
                       "class from the page.")
    if given:
        url = request.url_for("teach_page", code=normal).path + (f"?{urlencode({'preset': preset})}" if preset else "")
        response: Response = RedirectResponse(url, status_code=303)
        response.set_cookie(TEACHER_COOKIE, key, max_age=conf(request).class_idle_minutes * 60,
                            path=request.url_for("class_page", code=normal).path, httponly=True, samesite="lax",
                            secure=request.url.scheme == "https")
        return response
    if preset in PRESETS:  # then back to the plain address: a reload must not load the preset again
        sc, view = preset_page(preset)
        state = room_state(sc, view)
        await store.teach(normal, key, state, fingerprint(state))
        return RedirectResponse(request.url_for("teach_page", code=normal).path, status_code=303)
    room = await store.get(normal)
    if room is None:
        return _notice(request, 403, "This class has ended", "Start a new class from the page.")
    sh = shown(room)
    ctx = _workspace_context(sh.sc, sh.view)
    lesson = finish(await lesson_for(request, room, "teacher", key=key), sh.sc, sh.view, sh)
    lesson.teacher_url = f"{request.url_for('teach_page', code=normal)}?{urlencode({'key': key})}"
    ctx["classroom"] = lesson
    return _page(request, "index.html", ctx, headers={"Cache-Control": "no-store"})


async def _student(request: Request, code: str) -> tuple[str, Response | None]:
    """The student's id from the class's cookie, or a new one; or the page that says why not."""
    store = rooms(request)
    student = request.cookies.get(STUDENT_COOKIE, "")
    if student and await store.is_student(code, student):
        return student, None
    try:
        new = await store.join(code)
    except RoomsFull as e:
        return "", _notice(request, 503, "This class is full", f"{e}. Ask the teacher to start another.")
    if new is None:
        return "", await _failed_join(request, code)
    return new, None


@router.get("/class/{code}", name="class_page", response_class=HTMLResponse, include_in_schema=False)
async def class_page(request: Request, code: str) -> Response:
    """A student's page: what the teacher shows now, following each change (with JavaScript), or
    brought up to date by *Sync with the teacher* (without)."""
    from app.pages import _workspace_context

    if await _too_many_failures(request):
        return _too_many(request)
    store = rooms(request)
    normal = normal_code(code)
    room = await store.get(normal) if normal else None
    if room is None:
        return await _failed_join(request, code[:20])
    student, refused = await _student(request, normal)
    if refused is not None:
        return refused
    sh = shown(room)
    ctx = _workspace_context(sh.sc, sh.view)
    ctx["classroom"] = finish(await lesson_for(request, room, "student"), sh.sc, sh.view, sh)
    response = _page(request, "index.html", ctx, headers={"Cache-Control": "no-store"})
    _set_student(request, response, normal, student)
    return response


def _set_student(request: Request, response: Response, code: str, student: str) -> None:
    response.set_cookie(STUDENT_COOKIE, student, max_age=conf(request).class_idle_minutes * 60,
                        path=request.url_for("class_page", code=code).path, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")


@router.get("/class/{code}/events", name="class_events", include_in_schema=False)
async def class_events(request: Request, code: str) -> Response:
    """The room's events as server-sent events. The first tells the current version at once; a
    comment every KEEPALIVE_SECONDS keeps proxies from closing the stream, and a room that has gone
    says "closed" and ends it."""
    store = rooms(request)
    normal = normal_code(code)
    if not normal or await store.get(normal) is None:
        return Response("no class with this code", status_code=404, media_type="text/plain")
    if store.fanout.open >= store.fanout.max_streams:
        return Response(f"this worker has its {store.fanout.max_streams} event streams open", status_code=503,
                        media_type="text/plain", headers={"Retry-After": "10"})

    async def events() -> AsyncIterator[bytes]:
        # The stream is registered here, in the body, so it is always let go when the body ends:
        # at a disconnect Starlette cancels this generator inside the ``async with``.
        try:
            async with store.listen(normal) as queue:
                room = await store.get(normal)
                if room is None:
                    yield b"event: closed\ndata: 0\n\n"
                    return
                yield f"retry: {RETRY_MS}\nevent: state\ndata: {room.version}\n\n".encode()
                while True:
                    try:
                        event = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
                    except TimeoutError:
                        if await store.get(normal) is None:
                            yield b"event: closed\ndata: 0\n\n"
                            return
                        yield b": keep-alive\n\n"
                        continue
                    yield f"event: {event.kind}\ndata: {event.version} {event.count}\n\n".encode()
        except RoomsFull:  # another stream took the last place since the check above
            yield b"event: closed\ndata: 0\n\n"

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


@router.get("/class/{code}/workspace", name="class_workspace", response_class=HTMLResponse, include_in_schema=False)
async def class_workspace(request: Request, code: str) -> Response:
    """What a following student swaps in after a "state" event: rendered once per change per worker."""
    from app.pages import _link, _workspace_context, page_urls, templates

    store = rooms(request)
    normal = normal_code(code)
    room = await store.get(normal) if normal else None
    if room is None:
        return _notice(request, 404, "This class has ended", "The teacher's room is closed.")
    key = (normal, room.version, room.state, page_urls(request).index)
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
            sh = shown(room)
            ctx = _workspace_context(sh.sc, sh.view)
            _link(request, ctx, sh.sc, sh.view)
            ctx["classroom"] = finish(await lesson_for(request, room, "student"), sh.sc, sh.view, sh)
            ctx["urls"] = page_urls(request)
            html = templates.get_template("partials/workspace.html").render({**ctx, "request": request})
            _remember(_rendered, key, html)
            rendering.set_result(html)
        finally:
            rendering.cancel()  # when it failed: the waiting requests render it themselves
            if _rendering.get(key) is rendering:
                del _rendering[key]
    return HTMLResponse(html, headers={"Cache-Control": "no-store", "Vary": "HX-Request"})


@router.post("/class/{code}/predict", name="class_predict", response_class=HTMLResponse, include_in_schema=False)
async def class_predict(request: Request, code: str) -> Response:
    """A student's prediction of a hidden cell of the teacher's quiz: one per student per cell,
    changeable until the teacher reveals it."""
    from app.pages import posted_fields

    store = rooms(request)
    normal = normal_code(code)
    room = await store.get(normal) if normal else None
    if room is None:
        return _feedback(request, 404, "This class has ended.", back="")
    student = request.cookies.get(STUDENT_COOKIE, "")
    if not student or not await store.is_student(normal, student):
        return _feedback(request, 403, "Open the class's page again to join it, then send your prediction.")
    if not await store.allow(f"predict:{normal}:{student}", conf(request).class_predictions_per_minute):
        return _feedback(request, 429, f"More than {conf(request).class_predictions_per_minute} predictions this "
                                       "minute: wait a moment, then send it again.")
    fields = await posted_fields(request)
    sh = shown(room)
    try:
        ref, value, label = prediction(sh, fields)
    except FormError as e:
        return _feedback(request, 422, e.message)
    count = await store.predict(normal, student, ref, value)
    return _feedback(request, 200, f"Sent: your prediction {fields.get('guess', '').strip()} for {label}. "
                                   f"The class has sent {count} so far; you can change yours until the teacher "
                                   "reveals the answer.", sent=True)


def _feedback(request: Request, status: int, message: str, sent: bool = False, back: str | None = None) -> HTMLResponse:
    from app.pages import _respond

    if request.headers.get("HX-Request") != "true":  # without JavaScript: a page, with the way back to the class
        code = normal_code(request.path_params.get("code", ""))
        back = back if back is not None else (class_urls(request, code).page if code else "")
        return _respond(request, "class_notice.html", {"title": "Your prediction" if sent else "Not sent",
                                                       "message": message, "back": back}, status=status)
    return _respond(request, "partials/class_feedback.html", {"message": message, "sent": sent}, status=status)


def prediction(sh: Shown, fields: Mapping[str, str]) -> tuple[str, float, str]:
    """The cell and value a student predicts, checked against the room's quiz: a result of the stage
    in view that is still hidden, and a finite number in the page's bounds."""
    from app.form import read_fields, read_number
    from app.render import PanelBuilder

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
    builder = PanelBuilder(sh.sc, run, view, stack, grads)
    cell = builder.parse(ref)
    if cell is None:
        raise FormError("guess_row", "guess_row: that row and column are outside the matrix.")
    m = builder.cell_matrix(cell)
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
    """The teacher's live view of the predictions (the key in the form): how many answered, a
    histogram per predicted cell against its value, and *Reveal to the class*."""
    from app.pages import _respond, posted_fields

    fields = await posted_fields(request)
    store = rooms(request)
    normal = normal_code(code)
    if not normal or not await store.is_teacher(normal, fields.get("class_key", "")):
        return Response("not this class's teacher", status_code=403, media_type="text/plain")
    room = await store.get(normal)
    if room is None:
        return Response("this class has ended", status_code=404, media_type="text/plain")
    sh = shown(room)
    lesson = finish(await lesson_for(request, room, "teacher", key=fields["class_key"]), sh.sc, sh.view, sh)
    return _respond(request, "partials/class_results.html", {"classroom": lesson, "view": sh.view})


@router.get("/class/{code}/mine", name="class_mine", response_class=HTMLResponse, include_in_schema=False)
async def class_mine(request: Request, code: str) -> Response:
    """After a reveal, how close this student's own predictions of the revealed cells were (the
    class's page is shared; this part is each student's, fetched by their page)."""
    from app.pages import _respond
    from app.quiz import check

    store = rooms(request)
    normal = normal_code(code)
    room = await store.get(normal) if normal else None
    student = request.cookies.get(STUDENT_COOKIE, "")
    feedback, view = [], None
    if room is not None and student and await store.is_student(normal, student):
        sh = shown(room)
        view = sh.view
        mine = await store.mine(normal, student)
        run, stack, grads = sh.run()
        for ref in on_stage(sh, mine, teacher=False) if view.quiz else ():
            found = check(repr(mine[ref]), ref, run, stack, view.decimals, grads)
            if found is not None:
                feedback.append(found)
    return _respond(request, "partials/class_mine.html", {"feedback": feedback, "view": view},
                    headers={"Cache-Control": "no-store"})
