"""A class's lesson, apart from the web: what a room shows (its state read and run once per change),
the class's predictions of hidden cells, and the context the class panel gets."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import TypeVar
from urllib.parse import parse_qsl, urlencode

import numpy as np
import segno
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool

from app.classroom.store import Room, spoken_code
from app.config import settings
from app.i18n import gettext as _
from app.i18n import language
from app.serving.byte_cache import ByteCache, deep_size
from app.state.cells import matrix_of, parse_cell
from app.state.form import FormError, read_fields
from app.state.learning import learning_loss_and_gradients
from app.state.numbers import read_number
from app.state.permalink import state_query
from app.state.quiz import cell_label, hidden_cells, owner, stage_results
from app.state.reading import read_page
from app.state.scenario import VIEW_FIELDS, Scenario, View
from app.view.charts.predictions import predictions_svg

T = TypeVar("T")


async def heavy(work: Callable[[], T]) -> T:
    """A room's run or render, once per change per worker: off the event loop."""
    return await run_in_threadpool(work)


# --- what a room shows --------------------------------------------------------------------------


# Drawers a reader opens and closes for themselves (the inputs, the learning target): each page keeps its own.
OWN_DRAWERS = frozenset({"inputs", "target"})


def room_state(sc: Scenario, view: View) -> str:
    """The teacher's state as the room keeps it: the permalink's fields. Students get the same view
    but not presenter mode (a phone is not a projector), nor the teacher's last checked guess, nor the
    teacher's open drawers (a phone's stage would move down by the drawer's height)."""
    view = replace(view, present=False, guess="", guess_ref="", panels=view.panels - OWN_DRAWERS)
    return urlencode(state_query(sc, view))


# A room showing a real model's page keeps that page's query string after the page's prefix: a toy state is
# urlencoded, so its text never holds a bare ":" and the kinds cannot be confused.
MODEL_STATE = "model:"  # "Your sentence" (GET /model)
DECODER_STATE = "decoder:"  # "Next word" (GET /decoder)
TRANSLATE_STATE = "translate:"  # "Translate" (GET /translate)
REAL_PAGES = {"model": MODEL_STATE, "decoder": DECODER_STATE, "translate": TRANSLATE_STATE}


def real_page(state: str) -> tuple[str, str] | None:
    """(the page, its query string) when the room shows a real model's page ("model", "decoder" or "translate"),
    else None (a toy scenario)."""
    for page, prefix in REAL_PAGES.items():
        if state.startswith(prefix):
            return page, state.removeprefix(prefix)
    return None


def model_room_state(query: str) -> str:
    """The room's state for the model page's state (its query string, app.state.model_state.model_query)."""
    return MODEL_STATE + query


def shown_model(state: str) -> str | None:
    """The model page's query string when the room shows the real model, else None."""
    found = real_page(state)
    return found[1] if found is not None and found[0] == "model" else None


def shown_real(state: str, page: str) -> str | None:
    """The query string of the real model's ``page`` when the room shows it, else None."""
    found = real_page(state)
    return found[1] if found is not None and found[0] == page else None


class StateTooLarge(FormError):
    """A room's state over its byte budget: its largest field named (a pinned or hidden state, typically)."""


def check_state(state: str, budget: int) -> None:
    """Refuse a state over ``budget`` bytes before it is stored or sent to anyone."""
    if len(state) <= budget:
        return
    real = real_page(state)
    fields = parse_qsl(state if real is None else real[1], keep_blank_values=True)
    name, value = max(fields, key=lambda kv: len(kv[1]), default=("state", ""))
    raise StateTooLarge(name, _("{field}: the class's state would be {size} bytes, over its {budget}; this field "
                                "alone is {field_size}. Reload the preset or make it smaller.").format(
                                    field=name, size=f"{len(state):,}", budget=f"{budget:,}",
                                    field_size=f"{len(value):,}"))


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
                grads = learning_loss_and_gradients(run, self.view.learning)[1]
            self._run = (run, stack, grads)
        return self._run


# By room, version and state: a code given again after its room expired starts at version 1 again.
# Bounded by bytes (settings.class_cache_bytes, class_render_cache_bytes): a run can be 35 MB.
_shown: ByteCache[Shown] = ByteCache(settings.class_cache_bytes)
_rendered: ByteCache[str] = ByteCache(settings.class_render_cache_bytes)
_rendering: dict[tuple, asyncio.Future[str]] = {}  # renders under way: the same key waits


def _read_room(state: str) -> Shown:
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
            label = cell_label(name, cell.row, cell.col)
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
    page: str = ""  # a real model's page ("model", "decoder", "translate"), or "" for a toy scenario

    @property
    def spoken(self) -> str:
        return spoken_code(self.code)

    @property
    def teacher(self) -> bool:
        return self.role == "teacher"




def qr_svg(url: str) -> Markup:
    """The join link as a QR code (segno), an inline SVG with a title; no style attribute."""
    qr = segno.make(url, error="m")
    svg = qr.svg_inline(scale=4, border=2, dark="#111", light="#fff", title=_("QR code of the join link"),
                        svgclass="class-qr", lineclass=None, omitsize=True)
    return Markup(svg.replace("<svg ", '<svg role="img" ', 1))


def qr_for(url: str) -> Markup:
    return _qr_for(url, language())


@functools.lru_cache(maxsize=64)
def _qr_for(url: str, lang: str) -> Markup:  # the language in the key: the QR code's title is in it
    return qr_svg(url)


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




def prediction(sh: Shown, fields: Mapping[str, str]) -> tuple[str, float, str]:
    """The cell and value a student predicts, checked against the room's quiz: a result of the stage
    in view that is still hidden, and a finite number in the page's bounds."""

    view = sh.view
    if not view.quiz:
        raise FormError("guess", _("The teacher's page has no quiz on now: nothing to predict."))
    typed = {k: fields.get(k, "") for k in ("guess_matrix", "guess_row", "guess_col", "guess")}
    f = read_fields({**sh.pairs, **typed, "action": "guess"})
    matrix, row, col = f.cell_ref("guess")
    names = stage_results(view.stage, sh.run()[1], view.block)
    if matrix not in names:
        raise FormError("guess_matrix", _("guess_matrix: choose one of the matrices this stage computes."))
    ref = f"{matrix}.{owner(matrix, view.head, view.block)}.{row}.{col}"
    run, stack, grads = sh.run()
    cell = parse_cell(ref, run, stack, grads)
    if cell is None:
        raise FormError("guess_row", _("guess_row: that row and column are outside the matrix."))
    m = matrix_of(cell, run, stack, grads)
    if not hidden_cells(matrix, m, owner(matrix, view.head, view.block), view.revealed)[row, col]:
        raise FormError("guess", _("The teacher has revealed this cell: choose one still hidden (?)."))
    try:
        value = read_number(f.guess)
    except ValueError:
        raise FormError("guess", _("guess: type your prediction as a number, such as 0.25.")) from None
    if not np.isfinite(value) or abs(value) > settings.max_abs_value:
        raise FormError("guess", _("guess: a number between −{limit} and {limit}.").format(
            limit=f"{settings.max_abs_value:g}"))
    return ref, value, cell_label(matrix, row, col)
