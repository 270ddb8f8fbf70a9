"""Show the language model ("Next word") in a live class, and the class predicts its next word (or which word of
the text made it): the teacher's "Next word" page changes the room, the students' pages follow its text, head and
temperature, and a student may explore a text of their own.

- POST /class/{code}/decoder           the teacher shows the page's state: its form, or with nothing posted the
                                       address's query (a candidate's or a head's link), "Write N tokens" written
                                       on first; ``ask`` (the class panel's checkbox) asks the class first. Read by
                                       the page's own reader: a bad field is a 422 naming it, and nothing is
                                       stored. Then the teacher's page (303), or for htmx its results (the
                                       candidates alone for the temperature slider and the cut-offs).
- GET  /class/{code}/decoder           the teacher's page, showing the room's state (a GET never changes a class);
                                       a student's own text (``?text=…``), never stored.
- POST /class/{code}/decoder/question  the teacher's question: ``ask`` ("Ask the class first": the students' pages
                                       hide the model's candidates until the reveal), ``which`` (asked, the students
                                       tap the word of the text that made the model say its answer instead, and
                                       what explains the answer stays hidden until the reveal), ``reveal`` (the
                                       class's guesses and the model's candidates, or its taps beside gradient ×
                                       input, to everyone).
- POST /class/{code}/decoder/guess     a student's guess of the next word of the room's text (``guess``; ``about``,
                                       the text it is for). Limited as the predictions of a cell are.
- POST /class/{code}/decoder/tap       a student's tap: the token of the room's text that made the answer (``tap``,
                                       its place from 1; ``about``, the text it is for). Limited as guesses are.
- POST /class/{code}/decoder/guesses   the teacher's live view of the guesses, counted beside the candidates (or
                                       of the taps, counted beside gradient × input's shares).

A student's page at /class/{code} is this page while the room shows it (``decoder_page_html``), and the class's
workspace its results (``decoder_workspace``). The room keeps the page's query string behind a prefix, with the
question's fields (app.classroom.next_word); a new text starts the question afresh, unrevealed. What this page
does as "Your sentence" does in a class is app.web.class_real's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.classroom.lesson import Lesson, check_state
from app.classroom.next_word import ClassGuesses, NextWord, next_word, read_guess, tally
from app.classroom.store import Room
from app.classroom.taps import read_tap
from app.classroom.which_word import class_which
from app.i18n import N_
from app.i18n import gettext as _
from app.lesson.presets import PRESETS
from app.maths.llama import decoder_operations
from app.serving.real_models import language_model
from app.state.decoder_state import DecoderRead, decoder_query, read_decoder_page
from app.state.form import ON, FormError
from app.view.decoder_view import Bar, candidates_context, decoder_context
from app.view.pieces import readable
from app.web.class_access import OpenRoom, TeacherOf, feedback
from app.web.class_hooks import conf, lesson_for, rooms
from app.web.class_pages import enter_following
from app.web.class_real import (
    Pairs,
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
from app.web.decoder_work import ERROR_SLOTS, decoder_error, generated_pairs
from app.web.page_work import PageRequest, Rendered
from app.web.respond import page_request, posted_fields, render, respond

router = APIRouter()

DECODER_OPERATIONS = decoder_operations(128)  # as GET /decoder: a forward pass of the longest text
CANDIDATES_PART = "decoder/candidates.html"  # what the temperature slider and the cut-offs ask for


def read_decoder(pairs: Pairs) -> DecoderRead:
    """The page's state read by its own reader, "Write N tokens" written on first (FormError naming a bad field)."""
    return read_decoder_page(language_model().files(), generated_pairs(pairs))


def operations(pairs: Pairs) -> int:
    return decoder_operations(128, passes=2 if "generate" in dict(pairs) else 1)


CLASS_URLS = {"results": "guesses"}  # the class panel's results are the class's guesses


def decoder_lesson(lesson: Lesson) -> Lesson:
    """The class panel of "Next word": a student's page fetches its workspace; the teacher's its class's guesses."""
    return real_lesson(lesson, "decoder", **{name: getattr(lesson.urls, url) for name, url in CLASS_URLS.items()})


def class_decoder_work(page: PageRequest, read: DecoderRead, lesson: Lesson, url: str, template: str,
                       question: NextWord, words: list[str], headers: dict[str, str] | None = None) -> Rendered:
    """The page (or ``template``, a part of it) in a class: the teacher's publishes by posts, a student's explores
    by the page's usual GETs; with the class's question as this page shows it."""
    model = language_model().files()
    part = template == CANDIDATES_PART
    ctx = candidates_context(model, read) if part else decoder_context(model, read)
    guesses = class_guesses_of(question, lesson, words, read, ctx["bars"], counted=not part)
    ctx.update(decoder_url=url, error=None, error_slots=ERROR_SLOTS, typed=read.page.text, classroom=lesson,
               presets=PRESETS, decoder_verb="post" if lesson.teacher else "get", guesses=guesses,
               candidates_oob=part)
    return render(page, template, ctx, headers={"Cache-Control": "no-store", **(headers or {})})


def class_guesses_of(question: NextWord, lesson: Lesson, words: list[str], read: DecoderRead,
                     bars: Sequence[Bar], *, counted: bool = True) -> ClassGuesses:
    """The class's question as ``lesson``'s page shows it: the guesses tallied beside the candidates (``bars``), or
    asked "which word" and where the page shows them (``counted``), the taps beside gradient × input."""
    model = language_model().files()
    if not question.asks_which:
        return ClassGuesses(question, lesson.teacher, lesson.following, lesson.students, tally(words, model, bars))
    guesses = ClassGuesses(question, lesson.teacher, lesson.following, lesson.students)
    return replace(guesses, which=class_which(read, words)) if counted and guesses.show_tally else guesses


async def class_words(request: Request, room: Room, question: NextWord, *, shown: bool) -> list[str]:
    """The class's answers about the room's text (its guesses, or asked "which word" its taps), when the page shows
    them (else none: nothing to read)."""
    return await rooms(request).guesses(room.code, question.answers_ref) if shown else []


async def following(request: Request, room: Room, part: str, template: str) -> str:
    """A following student's page or workspace while the room shows "Next word": rendered once per change per
    worker (and, once revealed, per set of guesses)."""
    question = next_word(room.state) or NextWord("")
    words = await class_words(request, room, question, shown=question.revealed)
    url = request.url_for("class_decoder", code=room.code).path

    def work(page: PageRequest, lesson: Lesson) -> Rendered:
        read = read_decoder(question.pairs())  # checked before it was stored
        return class_decoder_work(page, read, lesson, url, template, question, words)

    return await following_html(request, room, "decoder", part, work, tuple(sorted(words)), **CLASS_URLS)


async def decoder_page_html(request: Request, room: Room) -> str:
    """A following student's page while the room shows "Next word"."""
    return await following(request, room, "page", "decoder.html")


async def decoder_workspace(request: Request, room: Room) -> Response:
    """The page's results for a following student (the text's box out of band)."""
    return workspace_response(request, room, await following(request, room, "workspace", "decoder/fragment.html"))


@router.post("/class/{code}/decoder", name="class_decoder_show", include_in_schema=False)
async def class_decoder_show(request: Request, teacher: TeacherOf) -> Response:
    """The teacher shows the page's state to the class (only the teacher's key changes a room)."""
    room = await teachers_room(request, teacher)
    if not isinstance(room, Room):
        return room
    pairs = await posted_state(request)
    page = page_request(request)
    url = request.url_for("class_decoder", code=room.code).path
    before = next_word(room.state)
    given = dict(pairs)
    try:
        read = await request.app.state.lanes.run(operations(pairs), lambda: read_decoder(pairs))
        same_text = before is not None and before.text == read.page.text
        ask = given["ask"] in ON if "ask" in given else before is not None and before.ask
        which = given["which"] in ON if "which" in given else before is not None and before.which
        same = same_text and before.which == which  # the same question: another asks afresh, unrevealed
        question = NextWord(decoder_query(read.page), ask=ask, revealed=same and before.revealed, which=which)
        check_state(question.state(), conf(request).class_max_state_bytes)
    except FormError as error:  # StateTooLarge too: nothing reaches the room
        return respond(decoder_error(page, pairs, error, url))
    refused = await publish(request, teacher, room, question.state())
    if refused is not None:
        return refused
    if not page.htmx:
        return RedirectResponse(url, status_code=303)
    lesson = decoder_lesson(await lesson_for(request, room, "teacher", key=teacher.key, quiz=False))
    words = await class_words(request, room, question, shown=True)
    part = request.headers.get("HX-Target") == "candidates"
    template, headers = (CANDIDATES_PART, {}) if part else ("decoder/fragment.html", {"HX-Push-Url": url})
    return respond(await request.app.state.lanes.run(DECODER_OPERATIONS, lambda: class_decoder_work(
        page, read, lesson, url, template, question, words, headers)))


@router.get("/class/{code}/decoder", name="class_decoder", response_class=HTMLResponse, include_in_schema=False)
async def class_decoder(request: Request, room: OpenRoom, teacher: TeacherOf) -> Response:
    """The teacher's page (the room's state), or a student's own text on it."""
    found = await reader(request, room, teacher, "decoder")
    if isinstance(found, Response):
        return found
    shown, lesson, pairs = found
    lesson = decoder_lesson(lesson)
    question = next_word(shown.state) or NextWord("")
    if lesson.teacher:
        pairs = question.pairs()  # the page's own fields, without the question's
    page = page_request(request)
    url = request.url_for("class_decoder", code=shown.code).path
    try:
        read = await request.app.state.lanes.run(operations(pairs), lambda: read_decoder(pairs))
    except FormError as error:
        return respond(decoder_error(page, pairs, error, url))
    words = await class_words(request, shown, question, shown=lesson.teacher)
    template = "decoder.html"
    if page.htmx:
        template = CANDIDATES_PART if request.headers.get("HX-Target") == "candidates" else "decoder/fragment.html"
    headers = {} if lesson.teacher else pushed_url(page, request, url, decoder_query(read.page),
                                                   ("temperature", "top_k", "top_p"))
    return respond(await request.app.state.lanes.run(DECODER_OPERATIONS, lambda: class_decoder_work(
        page, read, lesson, url, template, question, words, headers)))


async def guesses_panel(request: Request, room: Room, teacher_key: str, question: NextWord) -> Response:
    """The teacher's view of the class's guesses, counted beside the model's candidates (from the text's kept
    logits, or a forward pass when this worker has none)."""
    lesson = decoder_lesson(await lesson_for(request, room, "teacher", key=teacher_key, quiz=False))
    words = await class_words(request, room, question, shown=True)
    page = page_request(request)

    def work() -> Rendered:
        model = language_model().files()
        read = read_decoder_page(model, question.pairs())
        bars = candidates_context(model, read)["bars"]
        guesses = class_guesses_of(question, lesson, words, read, bars)
        return render(page, "decoder/class_guesses.html", {"guesses": guesses, "bars": bars, "classroom": lesson},
                      headers={"Cache-Control": "no-store"})

    return respond(await request.app.state.lanes.run(DECODER_OPERATIONS, work))


@router.post("/class/{code}/decoder/question", name="class_question", include_in_schema=False)
async def class_question(request: Request, teacher: TeacherOf) -> Response:
    """The teacher asks the class first (or no longer), the next word or which word made it (another question
    asks afresh, unrevealed), or reveals the answer: the room changes, the students' pages follow. Then the
    teacher's page (303), or for htmx the class's guesses (or taps)."""
    room = await teachers_room(request, teacher)
    if not isinstance(room, Room):
        return room
    question = next_word(room.state)
    if question is None:  # a page left open on "Next word" while the class moved on
        return RedirectResponse(teacher_url(request, room), status_code=303)
    fields = await posted_fields(request)
    which = fields["which"] in ON if "which" in fields else question.which
    question = replace(question, ask=fields["ask"] in ON if "ask" in fields else question.ask, which=which,
                       revealed=which == question.which and (question.revealed or fields.get("reveal", "") in ON))
    refused = await publish(request, teacher, room, question.state())
    if refused is not None:
        return refused
    if request.headers.get("HX-Request") != "true":
        return RedirectResponse(request.url_for("class_decoder", code=room.code).path, status_code=303)
    return await guesses_panel(request, room, teacher.key, question)


@router.post("/class/{code}/decoder/guesses", name="class_guesses", response_class=HTMLResponse,
             include_in_schema=False)
async def class_guesses(request: Request, teacher: TeacherOf) -> Response:
    """The teacher's live view of the class's guesses (the teacher's cookie), refreshed as they come."""
    room = await panel_room(request, teacher)
    if isinstance(room, Response):
        return room
    question = next_word(room.state)
    if question is None:  # a page left open on "Next word" while the class moved on
        return Response(status_code=204)
    return await guesses_panel(request, room, teacher.key, question)


@router.post("/class/{code}/decoder/guess", name="class_guess", response_class=HTMLResponse,
             include_in_schema=False)
async def class_guess(request: Request, room: OpenRoom) -> Response:
    """A student's guess of the next word of the teacher's text: one per student per text, changeable until the
    teacher reveals the answer. Limited per student and per browser, as the predictions of a cell are."""

    answer = partial(feedback, request, slot="guess-feedback", title=N_("Your guess"))
    sending = await student_sending(
        request, room, answer, _("Open the class's page again to join it, then send your guess."),
        _("More than {limit} guesses this minute: wait a moment, then send it again."))
    if isinstance(sending, Response):
        return sending
    room, student = sending
    question = next_word(room.state)
    if question is None:
        return answer(422, _("The teacher is not showing the language model: there is no next word to guess now."))
    if question.revealed:
        return answer(422, _("The teacher has revealed the model's answer for this text: wait for the next one."))
    fields = await posted_fields(request)
    if fields.get("about", question.ref) != question.ref:
        return answer(422, _("The teacher has changed the text since: read it again, then send your guess."))
    try:
        word = read_guess(fields.get("guess", ""))
    except FormError as e:
        return answer(422, e.message, field=e.field)
    count = await rooms(request).guess(room.code, student, question.ref, word)
    return answer(200, _("Sent: your guess “{word}”. The class has sent {count} so far; you can change yours until "
                         "the teacher reveals the model's answer.").format(word=word, count=count), sent=True)


@router.post("/class/{code}/decoder/tap", name="class_decoder_tap", response_class=HTMLResponse,
             include_in_schema=False)
async def class_decoder_tap(request: Request, room: OpenRoom) -> Response:
    """A student's tap: the token of the teacher's text they think made the model say its answer, one per student
    per text, changeable until the teacher reveals it. Limited per student and per browser, as guesses are."""

    answer = partial(feedback, request, slot="tap-feedback", title=N_("Your answer"))
    sending = await student_sending(
        request, room, answer, _("Open the class's page again to join it, then send your answer."),
        _("More than {limit} answers this minute: wait a moment, then send it again."))
    if isinstance(sending, Response):
        return sending
    room, student = sending
    question = next_word(room.state)
    if question is None:
        return answer(422, _("The teacher is not showing the language model: there is no text to tap now."))
    if not question.asks_which:
        return answer(422, _("The teacher is not asking which word made the model say its answer now."))
    if question.revealed:
        return answer(422, _("The teacher has revealed the model's answer for this text: wait for the next one."))
    fields = await posted_fields(request)
    if fields.get("about", "") != question.word_ref:
        return answer(422, _("The teacher has changed the text since: read it again, then send your answer."))
    tokens = read_decoder(question.pairs()).tokens  # checked before it was stored
    try:
        tap = read_tap(fields.get("tap", ""), len(tokens))
    except FormError as e:
        return answer(422, e.message, field=e.field)
    count = await rooms(request).guess(room.code, student, question.word_ref, str(tap))
    return answer(200, _("Sent: “{token}”. The class has sent {count} so far; you can change yours until the "
                         "teacher reveals what made the model say it.").format(token=readable(tokens[tap]),
                                                                                count=count), sent=True)


enter_following("decoder", decoder_page_html, decoder_workspace)  # served by app.web.classroom
