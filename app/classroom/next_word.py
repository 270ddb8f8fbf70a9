"""The class predicts the language model's next word ("Next word" in a live class): the page's state as the room
keeps it with the class's question (the students guess first, the teacher reveals), a student's guess read and
normalised, and the class's guesses counted beside the model's candidates.

A guess is about one text: its ref is the text's hash, so the guesses are kept per room and per text; the
teacher's next text starts with none, and coming back to a text finds its guesses again. Asked "which word" instead
(app.classroom.which_word), the class taps the token of the text it thinks made the model say its answer, kept
under a ref of its own for the same text.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode

from app.classroom.lesson import DECODER_STATE, real_page
from app.classroom.which_word import ClassWhich
from app.i18n import gettext as _
from app.maths.decoder_files import DecoderFiles
from app.state.decoder_state import DEFAULT_DECODER_TEXT
from app.state.form import FormError
from app.state.tokens import hidden_character
from app.view.decoder_view import Bar
from app.view.pieces import token_text

MAX_GUESS = 40  # characters: a word or two
ASK, REVEALED, WHICH = "ask", "revealed", "which"  # the question's fields, kept after the page's own in the state
FLAGS = (ASK, REVEALED, WHICH)


@dataclass(frozen=True)
class NextWord:
    """The "Next word" page as a room shows it: the page's own query string, and the class's question."""

    query: str  # the page's state (app.state.decoder_state.decoder_query)
    ask: bool = False  # the students guess before they see the model's candidates
    revealed: bool = False  # the teacher has shown everyone the class's guesses and the model's candidates
    which: bool = False  # asked, the students tap the word that made the answer instead of guessing the next

    def pairs(self) -> list[tuple[str, str]]:
        return parse_qsl(self.query, keep_blank_values=True)

    @property
    def text(self) -> str:
        return dict(self.pairs()).get("text", DEFAULT_DECODER_TEXT)

    @property
    def ref(self) -> str:
        """What the class's guesses are about: this text."""
        return guess_ref(self.text)

    @property
    def word_ref(self) -> str:
        """What the class's taps are about: this text (apart from its guesses)."""
        return word_ref(self.text)

    @property
    def asks_which(self) -> bool:
        """The class is asked which word of the text made the model say its answer (instead of its next word)."""
        return self.ask and self.which

    @property
    def answers_ref(self) -> str:
        """Where the class's answers to the question asked are kept: its taps, or its guesses."""
        return self.word_ref if self.asks_which else self.ref

    def state(self) -> str:
        """The room's state: the page's query string, then the question's fields that are on."""
        on = ((ASK, self.ask), (REVEALED, self.revealed), (WHICH, self.which))
        flags = urlencode([(name, "1") for name, is_on in on if is_on])
        return DECODER_STATE + "&".join(part for part in (self.query, flags) if part)


def next_word(state: str) -> NextWord | None:
    """The room's "Next word" page and question, or None while it shows another page."""
    found = real_page(state)
    if found is None or found[0] != "decoder":
        return None
    pairs = parse_qsl(found[1], keep_blank_values=True)
    flags = {k: v for k, v in pairs if k in FLAGS}
    own = [(k, v) for k, v in pairs if k not in FLAGS]
    return NextWord(urlencode(own), flags.get(ASK) == "1", flags.get(REVEALED) == "1", flags.get(WHICH) == "1")


def guess_ref(text: str) -> str:
    """A text's guesses' ref: short, with no space (the store keeps "<ref> <student>"), the same on every worker."""
    return "next." + hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest()[:16]


def word_ref(text: str) -> str:
    """A text's taps' ref (which word made the answer), as short and as stable as its guesses' and apart from them."""
    return "word." + hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest()[:16]


def read_guess(raw: str) -> str:
    """A student's guess, trimmed: not empty, at most MAX_GUESS characters, nothing hidden in it (a control
    character, an invisible one). FormError naming the field ``guess`` says why not."""
    word = raw.strip()
    if not word:
        raise FormError("guess", _("guess: type the word you expect next."))
    if len(word) > MAX_GUESS:
        raise FormError("guess", _("guess: at most {most} characters, a word or two; this one has {n}.").format(
            most=MAX_GUESS, n=len(word)))
    hidden = hidden_character(word)
    if hidden is not None:
        raise FormError("guess", _("guess: remove {hidden}.").format(hidden=hidden))
    return word


def normal(word: str) -> str:
    """Two guesses are the same answer when they are once trimmed and case-folded: " Paris" is "paris"."""
    return word.strip().casefold()


@dataclass(frozen=True)
class Tally:
    """One answer of the class: as most of those who gave it spelled it, how many did, and the model's candidate
    with the same text (its place from 1), if it is among the candidates shown."""

    word: str
    count: int
    share: str  # the bar's length out of 100: this count over the largest
    candidate: Bar | None = None
    rank: int = 0


def tally(guesses: Iterable[str], model: DecoderFiles, bars: Sequence[Bar]) -> list[Tally]:
    """The class's guesses counted by ``normal`` form, most common first (then in alphabetical order), each
    matched with the candidate whose decoded text, stripped of its leading space, is the same answer."""
    spellings: dict[str, Counter[str]] = {}
    for guess in guesses:
        spellings.setdefault(normal(guess), Counter())[guess.strip()] += 1
    candidates: dict[str, tuple[int, str, Bar]] = {}
    for rank, bar in enumerate(bars, 1):
        text = token_text(model.vocabulary[bar.id]).removeprefix(" ")
        candidates.setdefault(normal(text), (rank, text.strip(), bar))
    counts = {answer: sum(spelled.values()) for answer, spelled in spellings.items()}
    most = max(counts.values(), default=1)
    found = []
    for answer in sorted(counts, key=lambda a: (-counts[a], a)):
        rank, text, bar = candidates.get(answer, (0, "", None))
        # As most spelled it; between as many, as the model does ("Paris", not "PARIS"), then in a fixed order.
        word = min(spellings[answer].items(), key=lambda kv: (-kv[1], kv[0] != text, kv[0]))[0]
        found.append(Tally(word, counts[answer], f"{100 * counts[answer] / most:.1f}", bar, rank))
    return found


@dataclass(frozen=True)
class ClassGuesses:
    """The class's question as one page shows it: the teacher's page always sees the model's candidates and the
    guesses (or taps) as they come; while the class is asked first, a following student's sees the guess form and
    the candidates only after the reveal; asked "which word", the candidates and a button per token of the text,
    and what explains the answer (Why this word?, which words made it, the rollout) only after the reveal; when it
    is not asked, the candidates at once and no guess form; a student exploring on their own sees their own
    candidates."""

    question: NextWord
    teacher: bool
    following: bool = True
    students: int = 0
    tally: list[Tally] = field(default_factory=list)
    which: ClassWhich | None = None  # asked "which word": the class's taps beside gradient × input, where shown

    @property
    def count(self) -> int:
        return sum(t.count for t in self.tally)

    @property
    def asked(self) -> bool:
        """A following student's page while the class is asked and nothing is revealed yet."""
        q = self.question
        return not self.teacher and self.following and q.ask and not q.revealed

    @property
    def show_candidates(self) -> bool:
        q = self.question
        return self.teacher or not self.following or not q.ask or q.revealed or q.which

    @property
    def show_form(self) -> bool:
        """The guess box: only while the class is asked first, never beside the model's candidates (a guess with
        the answer under it is no guess)."""
        return self.asked and not self.question.which

    @property
    def show_taps(self) -> bool:
        """A button per token of the text, while the class is asked which word made the answer."""
        return self.asked and self.question.which

    @property
    def show_reasons(self) -> bool:
        """What explains the answer (Why this word?, which words made it, the rollout): never beside the buttons
        that ask which word made it."""
        return self.show_candidates and not self.show_taps

    @property
    def show_tally(self) -> bool:
        return self.teacher or (self.following and self.question.revealed)

    @property
    def matched(self) -> int:
        """How many students' guesses are among the model's candidates shown."""
        return sum(t.count for t in self.tally if t.candidate is not None)
