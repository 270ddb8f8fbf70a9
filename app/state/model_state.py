"""What a student has in front of them on "Your sentence" (GET /model): two sentences, the head being
stepped through, the query token compared, the heads switched off and the inspected cell, read from the
query string once, and written back into a permalink. Layers, heads, tokens, rows and columns are
counted from 1 in the query string, as the page counts them; from 0 here."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from urllib.parse import urlencode

from app.config import settings
from app.i18n import N_
from app.i18n import gettext as _
from app.maths.bert import tokenize
from app.maths.model_files import ModelFiles
from app.maths.real_model import Tokenized
from app.maths.registry import ENCODER
from app.state.form import FormError
from app.state.tokens import hidden_character

DEFAULT_TEXT = "The animal didn't cross the street because it was too tired."
DEFAULT_TEXT2 = "The animal didn't cross the street because it was too wide."
DEFAULT_QUERY_WORD = "it"  # the query compared by default, when the first sentence holds it
LAYERS, HEADS = ENCODER.layers, ENCODER.heads  # the model's sizes (app.maths.registry)
ALLOWED_CONTROLS = "\n\t"
TOKEN_POSITIONS = ("q", "matrix", "row", "col", "x_row")  # fields that count the first sentence's tokens
# Shown as _(label) where the page shows them.
INSPECTABLE = {"scores": N_("scores Q·Kᵀ"), "scaled": N_("scaled ÷√d_k"), "softmax": N_("weights A"),
               "output": N_("output A·V")}


def check_sentence(text: str) -> str:
    """A sentence the model may read: not empty, at most model_max_chars characters, no control
    characters but newlines and tabs (the tokens' rule, app.state.tokens). ValueError says why."""
    if not text.strip():
        raise ValueError(_("enter a sentence: the text is empty"))
    if len(text) > settings.model_max_chars:
        raise ValueError(_("a text has at most {most} characters; this one has {n}").format(
            most=settings.model_max_chars, n=len(text)))
    hidden = hidden_character(text.translate({ord(c): " " for c in ALLOWED_CONTROLS}))
    if hidden is not None:
        raise ValueError(_("remove {hidden} from the text").format(hidden=hidden))
    return text


def typed_sentences(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The two sentences as typed (the defaults where none came), to keep in the form when a page cannot show
    their result: a bad field's answer, or the place in the queue."""
    given = dict(pairs)
    return {"text": given.get("text", DEFAULT_TEXT), "text2": given.get("text2", DEFAULT_TEXT2)}


def read_wordpieces(model: ModelFiles, text: str) -> Tokenized:
    """The sentence's WordPiece tokens, or a ValueError with their count and the limit."""
    tokens = tokenize(model, text)
    limit = settings.model_max_tokens
    if len(tokens.ids) > limit:
        raise ValueError(_("the text is {n} WordPiece tokens with [CLS] and [SEP]; the limit is {limit}").format(
            n=len(tokens.ids), limit=limit))
    return tokens


@dataclass(frozen=True)
class Cell:
    """An inspected cell of the head's step-through: a matrix of INSPECTABLE, its row and column."""

    matrix: str
    row: int
    col: int


@dataclass(frozen=True)
class ModelPage:
    """The page's state; every index from 0. ``layer``/``head`` and ``query`` None: the page chooses."""

    text: str = DEFAULT_TEXT
    text2: str = DEFAULT_TEXT2
    layer: int | None = None
    head: int | None = None
    query: int | None = None  # a position of the first sentence's tokens
    off: frozenset[tuple[int, int]] = frozenset()  # heads ticked one by one
    off_layers: frozenset[int] = frozenset()  # layers ticked whole
    cell: Cell | None = None
    x_row: int | None = None  # the token whose 384 numbers of X are shown

    @property
    def heads_off(self) -> frozenset[tuple[int, int]]:
        """Every head switched off: those ticked, and every head of a layer ticked."""
        return self.off | frozenset((la, h) for la in self.off_layers for h in range(HEADS))


@dataclass(frozen=True)
class ModelRead:
    """The page read: its state, and the two sentences' tokens."""

    page: ModelPage
    first: Tokenized
    second: Tokenized


def whole_field(name: str, text: str, low: int, high: int) -> int:
    """A count from 1 in [low, high], returned from 0."""
    if not text.strip().isdigit() or not text.strip().isascii():
        raise FormError(name, _("{field}: enter a whole number from {lo} to {hi}").format(field=name, lo=low, hi=high))
    value = int(text)
    if not low <= value <= high:
        raise FormError(name, _("{field}: {value} is outside {lo}–{hi}").format(field=name, value=value, lo=low,
                                                                                  hi=high))
    return value - 1


def head_ref(name: str, text: str, layers: int = LAYERS, heads: int = HEADS) -> tuple[int, int]:
    """"5.3" → layer 5, head 3, from 0 (a model of ``layers`` × ``heads``)."""
    layer, dot, head = text.partition(".")
    if not dot:
        raise FormError(name, _("{field}: write a head as layer.head, such as 5.3").format(field=name))
    return whole_field(name, layer, 1, layers), whole_field(name, head, 1, heads)


def read_model_page(model: ModelFiles, pairs: Iterable[tuple[str, str]]) -> ModelRead:
    """The query string read once. A bad field raises FormError naming it (the sentences' first)."""
    given: dict[str, str] = {}
    off, off_layers = set(), set()
    for key, value in pairs:
        if key == "off":
            off.add(head_ref("off", value))
        elif key == "off_layer":
            off_layers.add(whole_field("off_layer", value, 1, LAYERS))
        elif key in ("text", "text2", "layer", "head", "q", "matrix", "row", "col", "x_row", "shown_text"):
            given[key] = value
    if "shown_text" in given and given["shown_text"] != given.get("text", DEFAULT_TEXT):
        for key in TOKEN_POSITIONS:  # they point into the sentence the page showed, not the one typed since
            given.pop(key, None)
    tokens = {}
    for name, default in (("text", DEFAULT_TEXT), ("text2", DEFAULT_TEXT2)):
        text = given.get(name, default)
        try:
            tokens[name] = read_wordpieces(model, check_sentence(text))
        except ValueError as e:
            message = _("first sentence: {problem}") if name == "text" else _("second sentence: {problem}")
            raise FormError(name, message.format(problem=e)) from None
    t = len(tokens["text"].ids)
    layer = whole_field("layer", given["layer"], 1, LAYERS) if given.get("layer") else None
    head = whole_field("head", given["head"], 1, HEADS) if given.get("head") else None
    if (layer is None) != (head is None):
        missing = "head" if head is None else "layer"
        raise FormError(missing, _("{field}: choose a layer and a head together").format(field=missing))
    query = whole_field("q", given["q"], 1, t) if given.get("q") else None
    cell = None
    if given.get("matrix"):
        matrix = given["matrix"]
        if matrix not in INSPECTABLE:
            raise FormError("matrix", _("{field}: choose one of {options}").format(field="matrix",
                                                                                    options=", ".join(INSPECTABLE)))
        cols = t if matrix != "output" else model.config.d_k
        cell = Cell(matrix, whole_field("row", given.get("row", "1"), 1, t),
                    whole_field("col", given.get("col", "1"), 1, cols))
    x_row = whole_field("x_row", given["x_row"], 1, t) if given.get("x_row") else None
    page = ModelPage(text=tokens["text"].text, text2=tokens["text2"].text, layer=layer, head=head, query=query,
                     off=frozenset(off), off_layers=frozenset(off_layers), cell=cell, x_row=x_row)
    return ModelRead(page, tokens["text"], tokens["text2"])


def model_query(page: ModelPage, **changes: object) -> str:
    """The page's state as a query string (counted from 1; defaults left out), with ``changes``."""
    page = replace(page, **changes) if changes else page
    pairs: list[tuple[str, str | int]] = [("text", page.text)]
    if page.text2 != DEFAULT_TEXT2:
        pairs.append(("text2", page.text2))
    if page.layer is not None and page.head is not None:
        pairs += [("layer", page.layer + 1), ("head", page.head + 1)]
    if page.query is not None:
        pairs.append(("q", page.query + 1))
    pairs += [("off_layer", la + 1) for la in sorted(page.off_layers)]
    pairs += [("off", f"{la + 1}.{h + 1}") for la, h in sorted(page.off)]
    if page.cell is not None:
        pairs += [("matrix", page.cell.matrix), ("row", page.cell.row + 1), ("col", page.cell.col + 1)]
    if page.x_row is not None:
        pairs.append(("x_row", page.x_row + 1))
    return urlencode(pairs)
