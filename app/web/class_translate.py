"""Show the translator ("Translate") in a live class: the teacher's translate page changes the room, the students'
pages follow its text, direction and head, and a student may translate a text of their own; asked first, the class
taps the source piece a written piece looks at, and the teacher reveals.

- POST /class/{code}/translate  the teacher shows the translator: the state posted (the page's form) or, with
                                nothing posted, the address's query (a head's link). Read by the page's own reader:
                                a bad field is a 422 naming it, and nothing is stored. Then the teacher's page
                                (303), or for htmx the page's results.
- GET  /class/{code}/translate  the teacher's page, showing the room's state (a GET never changes a class); a
                                student's own text (``?text=…``), never stored.
- POST /class/{code}/translate/question  the teacher's question: ``ask`` ("Ask the class first": the students'
                                pages hide where the model looked and ask them to tap the source piece they think
                                the written piece ``word`` looks at), ``reveal`` (the class's taps beside the
                                alignment head's row, to everyone).
- POST /class/{code}/translate/tap  a student's tap (``tap``, a source piece from 1; ``about``, the question it
                                answers). Limited as the predictions of a cell are.
- POST /class/{code}/translate/taps  the teacher's live view of the taps, counted beside the head's row.

A student's page at /class/{code} is the translate page while the room shows it (``translate_page_html``), and
the class's workspace is then the page's results (``translate_workspace``). The room keeps the page's query string
behind a prefix (app.classroom.lesson.TRANSLATE_STATE). What this page does as "Your sentence" does in a class is
app.web.class_real's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from functools import partial

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.classroom.lesson import Lesson, check_state
from app.classroom.store import Room
from app.classroom.taps import ClassTaps, TapQuestion, count_taps, read_tap, read_word, tap_question
from app.i18n import N_
from app.i18n import gettext as _
from app.lesson.presets import PRESETS
from app.maths.marian import Translation
from app.serving.real_models import translator
from app.state.form import ON, FormError
from app.state.translate_state import DEFAULT_TEXT, OTHER_BANK, TranslatePage, read_translate_page, translate_query
from app.view.translate_view import failed, translate_context, typed
from app.web.class_access import OpenRoom, TeacherOf, feedback
from app.web.class_hooks import conf, lesson_for, rooms
from app.web.class_pages import enter_following
from app.web.class_real import (
    following_html,
    panel_room,
    posted_state,
    publish,
    pushed_url,
    reader,
    real_lesson,
    student_sending,
    teacher_url,
    teachers_room,
    workspace_response,
)
from app.web.page_work import PageRequest, Rendered
from app.web.respond import page_request, posted_fields, render, respond

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


def class_taps(run: Translation, question: TapQuestion, lesson: Lesson, taps: list[str]) -> ClassTaps:
    """The class's question as ``lesson``'s page shows it, the taps counted beside the alignment head's row."""
    word = question.asked(len(run.target))
    row = run.alignment[word] if len(run.target) else [0.0] * len(run.source)
    return ClassTaps(question, lesson.teacher, lesson.following, word, question.ref(len(run.target)),
                     count_taps(taps, run.source, row))


def class_translate_work(page: PageRequest, read: TranslatePage, lesson: Lesson, url: str, template: str,
                         question: TapQuestion | None = None, taps: list[str] | None = None,
                         headers: dict[str, str] | None = None) -> Rendered:
    """The translate page (or ``template``, a part of it) in a class: the teacher's publishes by posts, a
    student's explores by the page's usual GETs; with the class's question as this page shows it."""
    service = translator()
    run = service.run(read.direction, read.text)
    ctx = base_context(url, lesson) | translate_context(service.files()[read.direction], run, read)
    ctx["typed"] = {"text": read.text, "direction": read.direction}
    if question is not None and run.target:
        ctx["taps"] = class_taps(run, question, lesson, taps or [])
    return render(page, template, ctx, headers={"Cache-Control": "no-store", **(headers or {})})


async def class_words(request: Request, room: Room, question: TapQuestion, *, shown: bool) -> list[str]:
    """The class's taps on the room's question, when the page shows them (else none: nothing to read)."""
    if not shown or not question.ask:
        return []
    run = translator().run(question.direction, question.text)
    return await rooms(request).guesses(room.code, question.ref(len(run.target)))


def class_translate_error(page: PageRequest, pairs: list[tuple[str, str]], error: FormError, url: str,
                          lesson: Lesson | None) -> Rendered:
    """422: htmx swaps only the message into its slot (the last good result stays); without JavaScript the page
    comes back with the typed text in its box and the message."""
    ctx = base_context(url, lesson) | failed(error)
    if page.htmx:
        return render(page, "translate/errors.html", ctx, status=422, headers={"HX-Reswap": "none"})
    ctx["typed"] = typed(pairs)
    return render(page, "translate.html", ctx, status=422)


async def following(request: Request, room: Room, part: str, template: str) -> str:
    """A following student's page or workspace while the room shows the translator: rendered once per change per
    worker (and, once revealed, per set of taps)."""
    question = tap_question(room.state) or TapQuestion("")
    read = read_translate(question.pairs())  # checked before it was stored
    taps = await class_words(request, room, question, shown=question.revealed)
    url = request.url_for("class_translate", code=room.code).path
    return await following_html(request, room, "translate", part, lambda page, lesson: class_translate_work(
        page, read, lesson, url, template, question, taps), tuple(sorted(taps)))


async def translate_page_html(request: Request, room: Room) -> str:
    """A following student's page while the room shows the translator."""
    return await following(request, room, "page", "translate.html")


async def translate_workspace(request: Request, room: Room) -> Response:
    """The translator's results for a following student (the text's box out of band)."""
    return workspace_response(request, room, await following(request, room, "workspace",
                                                             "translate/class_fragment.html"))


@router.post("/class/{code}/translate", name="class_translate_show", include_in_schema=False)
async def class_translate_show(request: Request, teacher: TeacherOf) -> Response:
    """The teacher shows the translate page's state to the class (only the teacher's key changes a room)."""
    room = await teachers_room(request, teacher)
    if not isinstance(room, Room):
        return room
    pairs = await posted_state(request)
    page = page_request(request)
    url = request.url_for("class_translate", code=room.code).path
    before = tap_question(room.state)
    given = dict(pairs)
    try:
        read = read_translate(pairs)
        same = before is not None and (before.text, before.direction) == (read.text, read.direction)
        ask = given["ask"] in ON if "ask" in given else before is not None and before.ask
        question = TapQuestion(translate_query(read), ask=ask, revealed=same and before.revealed,
                               word=before.word if same else None)
        check_state(question.state(), conf(request).class_max_state_bytes)
    except FormError as error:  # StateTooLarge too: nothing reaches the room
        return respond(class_translate_error(page, pairs, error, url, None))
    refused = await publish(request, teacher, room, question.state())
    if refused is not None:
        return refused
    if not page.htmx:
        return RedirectResponse(url, status_code=303)
    lesson = real_lesson(await lesson_for(request, room, "teacher", key=teacher.key, quiz=False), "translate")
    taps = await class_words(request, room, question, shown=True)
    rendered_page = await request.app.state.lanes.run(TRANSLATE_OPERATIONS, lambda: class_translate_work(
        page, read, lesson, url, "translate/fragment.html", question, taps, {"HX-Push-Url": url}))
    return respond(rendered_page)


@router.get("/class/{code}/translate", name="class_translate", response_class=HTMLResponse, include_in_schema=False)
async def class_translate(request: Request, room: OpenRoom, teacher: TeacherOf) -> Response:
    """The teacher's translate page (the room's state), or a student's own text on it."""
    found = await reader(request, room, teacher, "translate")
    if isinstance(found, Response):
        return found
    shown, lesson, pairs = found
    question = tap_question(shown.state) or TapQuestion("")
    if lesson.teacher:
        pairs = question.pairs()  # the page's own fields, without the question's
    page = page_request(request)
    url = request.url_for("class_translate", code=shown.code).path
    try:
        read = read_translate(pairs)
    except FormError as error:
        return respond(class_translate_error(page, pairs, error, url, lesson))
    taps = await class_words(request, shown, question, shown=lesson.teacher)
    template = "translate/fragment.html" if page.htmx else "translate.html"
    headers = {} if lesson.teacher else pushed_url(page, request, url, translate_query(read), ("text",))
    return respond(await request.app.state.lanes.run(TRANSLATE_OPERATIONS, lambda: class_translate_work(
        page, read, lesson, url, template, question if lesson.teacher else None, taps, headers)))


async def taps_panel(request: Request, room: Room, teacher_key: str, question: TapQuestion) -> Response:
    """The teacher's view of the class's question and its taps, counted beside the alignment head's row."""
    lesson = real_lesson(await lesson_for(request, room, "teacher", key=teacher_key, quiz=False), "translate")
    taps = await class_words(request, room, question, shown=True)
    page = page_request(request)
    url = request.url_for("class_translate", code=room.code).path

    def work() -> Rendered:
        read = read_translate(question.pairs())
        return class_translate_work(page, read, lesson, url, "translate/class_taps.html", question, taps)

    return respond(await request.app.state.lanes.run(TRANSLATE_OPERATIONS, work))


@router.post("/class/{code}/translate/question", name="class_translate_question", include_in_schema=False)
async def class_translate_question(request: Request, teacher: TeacherOf) -> Response:
    """The teacher asks the class first (or no longer) about a written piece, or reveals the answer: the room
    changes, the students' pages follow. Then the teacher's page (303), or for htmx the class's taps."""
    room = await teachers_room(request, teacher)
    if not isinstance(room, Room):
        return room
    question = tap_question(room.state)
    if question is None:  # a page left open on the translator while the class moved on
        return RedirectResponse(teacher_url(request, room), status_code=303)
    fields = await posted_fields(request)
    pieces = len(translator().run(question.direction, question.text).target)
    word = question.word
    if fields.get("word"):
        try:
            word = read_word(fields["word"], pieces)
        except FormError as error:
            return Response(error.message, status_code=422, media_type="text/plain")
    moved = replace(question, word=word).asked(pieces) != question.asked(pieces)  # the default piece named is none
    question = replace(question, ask=fields["ask"] in ON if "ask" in fields else question.ask, word=word,
                       revealed=not moved and (question.revealed or fields.get("reveal", "") in ON))
    refused = await publish(request, teacher, room, question.state())
    if refused is not None:
        return refused
    if request.headers.get("HX-Request") != "true":
        return RedirectResponse(request.url_for("class_translate", code=room.code).path, status_code=303)
    return await taps_panel(request, room, teacher.key, question)


@router.post("/class/{code}/translate/taps", name="class_translate_taps", response_class=HTMLResponse,
             include_in_schema=False)
async def class_translate_taps(request: Request, teacher: TeacherOf) -> Response:
    """The teacher's live view of the class's taps (the teacher's cookie), refreshed as they come."""
    room = await panel_room(request, teacher)
    if isinstance(room, Response):
        return room
    question = tap_question(room.state)
    if question is None:
        return Response(status_code=204)
    return await taps_panel(request, room, teacher.key, question)


@router.post("/class/{code}/translate/tap", name="class_translate_tap", response_class=HTMLResponse,
             include_in_schema=False)
async def class_translate_tap(request: Request, room: OpenRoom) -> Response:
    """A student's tap: the source piece they think the asked written piece looks at, one per student per
    question, changeable until the teacher reveals it. Limited per student and per browser, as predictions are."""

    answer = partial(feedback, request, slot="tap-feedback", title=N_("Your answer"))
    sending = await student_sending(
        request, room, answer, _("Open the class's page again to join it, then send your answer."),
        _("More than {limit} answers this minute: wait a moment, then send it again."))
    if isinstance(sending, Response):
        return sending
    room, student = sending
    question = tap_question(room.state)
    if question is None or not question.ask:
        return answer(422, _("The teacher is not asking the class about the translator now."))
    if question.revealed:
        return answer(422, _("The teacher has revealed where the model looked: wait for the next question."))
    run = translator().run(question.direction, question.text)
    fields = await posted_fields(request)
    if fields.get("about", "") != question.ref(len(run.target)):
        return answer(422, _("The teacher has changed the question since: read it again, then send your answer."))
    try:
        tap = read_tap(fields.get("tap", ""), len(run.source))
    except FormError as e:
        return answer(422, e.message, field=e.field)
    count = await rooms(request).guess(room.code, student, question.ref(len(run.target)), str(tap))
    return answer(200, _("Sent: “{piece}”. The class has sent {count} so far; you can change yours until the "
                         "teacher reveals where the model looked.").format(piece=run.source[tap], count=count),
                  sent=True)


enter_following("translate", translate_page_html, translate_workspace)  # served by app.web.classroom
