"""The class guesses where the translator looks ("Translate" in a live class, *Ask the class first*): the page's
state as the room keeps it with the class's question (which written piece is asked about; the students tap first,
the teacher reveals), a student's tap read, and the class's taps counted beside the alignment head's row.

A tap is about one written piece of one translation: its ref is the hash of the text, the direction and the
piece's place, so the taps are kept per room and per question; the teacher's next text or piece starts with none.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode

from app.classroom.lesson import TRANSLATE_STATE, real_page
from app.i18n import gettext as _
from app.state.form import FormError
from app.state.translate_state import DEFAULT_DIRECTION, DEFAULT_TEXT

ASK, REVEALED, WORD = "ask", "revealed", "word"  # the question's fields, kept after the page's own in the room's state


@dataclass(frozen=True)
class TapQuestion:
    """The "Translate" page as a room shows it: the page's own query string, and the class's question."""

    query: str  # the page's state (app.state.translate_state.translate_query)
    ask: bool = False  # the students tap before they see where the model looked
    revealed: bool = False  # the teacher has shown everyone the class's taps and the model's row
    word: int | None = None  # the written piece asked about, from 0 (None: the page's default, default_word)

    def pairs(self) -> list[tuple[str, str]]:
        return parse_qsl(self.query, keep_blank_values=True)

    @property
    def text(self) -> str:
        return dict(self.pairs()).get("text", DEFAULT_TEXT)

    @property
    def direction(self) -> str:
        return dict(self.pairs()).get("direction") or DEFAULT_DIRECTION

    def asked(self, pieces: int) -> int:
        """The written piece asked about, from 0, for a translation of ``pieces`` pieces."""
        if self.word is not None and 0 <= self.word < pieces:
            return self.word
        return default_word(pieces)

    def ref(self, pieces: int) -> str:
        """What the class's taps are about: this text, direction and written piece (no space: the store keeps
        "<ref> <student>")."""
        key = f"{self.direction}\n{self.asked(pieces)}\n{self.text}"
        return "tap." + hashlib.sha256(key.encode("utf-8", errors="replace")).hexdigest()[:16]

    def state(self) -> str:
        """The room's state: the page's query string, then the question's fields that are set."""
        flags = [(name, "1") for name, on in ((ASK, self.ask), (REVEALED, self.revealed)) if on]
        if self.word is not None:
            flags.append((WORD, str(self.word + 1)))
        return TRANSLATE_STATE + "&".join(part for part in (self.query, urlencode(flags)) if part)


def default_word(pieces: int) -> int:
    """The second written piece (the first is often an article), or the first of a translation of one."""
    return 1 if pieces > 1 else 0


def tap_question(state: str) -> TapQuestion | None:
    """The room's "Translate" page and question, or None while it shows another page."""
    found = real_page(state)
    if found is None or found[0] != "translate":
        return None
    pairs = parse_qsl(found[1], keep_blank_values=True)
    flags = {k: v for k, v in pairs if k in (ASK, REVEALED, WORD)}
    own = [(k, v) for k, v in pairs if k not in (ASK, REVEALED, WORD)]
    word = flags.get(WORD, "")
    return TapQuestion(urlencode(own), flags.get(ASK) == "1", flags.get(REVEALED) == "1",
                       int(word) - 1 if word.isdigit() and int(word) > 0 else None)


def read_word(raw: str, pieces: int) -> int:
    """The written piece the teacher asks about, counted from 1 in the form; from 0 here. FormError naming
    ``word`` says why not."""
    if not raw.strip().isdigit() or not 1 <= int(raw) <= pieces:
        raise FormError("word", _("word: choose one of the {n} written pieces").format(n=pieces))
    return int(raw) - 1


def read_tap(raw: str, pieces: int) -> int:
    """A student's tap: one of the source's ``pieces``, counted from 1 in the form; from 0 here. FormError naming
    ``tap`` says why not."""
    if not raw.strip().isdigit() or not 1 <= int(raw) <= pieces:
        raise FormError("tap", _("tap: choose one of the {n} pieces of the text").format(n=pieces))
    return int(raw) - 1


@dataclass(frozen=True)
class TapCount:
    """One source piece: how many students tapped it, its bar's length out of 100, and the alignment head's weight
    on it for the word asked about."""

    index: int  # from 0
    piece: str
    count: int
    share: str
    weight: float


def count_taps(taps: Iterable[str], source: tuple[str, ...], row: Iterable[float]) -> list[TapCount]:
    """The class's taps counted per source piece, in the source's order, beside the head's ``row``."""
    counted = Counter(int(t) for t in taps if t.isdigit() and int(t) < len(source))
    most = max(counted.values(), default=1)
    return [TapCount(j, piece, counted[j], f"{100 * counted[j] / most:.1f}", float(w))
            for j, (piece, w) in enumerate(zip(source, row, strict=True))]


@dataclass(frozen=True)
class ClassTaps:
    """The class's question as one page shows it: the teacher's page always sees where the model looked and the
    taps as they come; while the class is asked first, a following student's page sees the tap buttons and where
    the model looked only after the reveal; a student translating their own text sees their own page."""

    question: TapQuestion
    teacher: bool
    following: bool = True
    word: int = 0  # the written piece asked about, from 0
    ref: str = ""
    counts: list[TapCount] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(c.count for c in self.counts)

    @property
    def hide_answer(self) -> bool:
        """Where the model looked (the lines, the steps' column, the alignment, the maps) hidden: a tap with the
        answer beside it is no guess."""
        q = self.question
        return not self.teacher and self.following and q.ask and not q.revealed

    @property
    def show_counts(self) -> bool:
        return self.question.ask and (self.teacher or (self.following and self.question.revealed))
