"""What a student has in front of them on "Next word" (GET /decoder): the text, the head stepped through, the
temperature and the sampler's cut-offs, the inspected cell, read from the query string once and written back
into a permalink. Layers, heads, rows and columns count from 1 in the query string, as the page counts them;
from 0 here."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from urllib.parse import urlencode

import numpy as np

from app.config import settings
from app.i18n import gettext as _
from app.maths.decoder_files import DecoderFiles
from app.maths.llama import tokenize
from app.maths.registry import DECODER
from app.maths.sampling import temperature_softmax, top_candidates
from app.state.form import FormError
from app.state.model_state import INSPECTABLE, Cell, check_sentence, head_ref, whole_field

DEFAULT_DECODER_TEXT = "The capital of France is"
CANDIDATES = 10  # bars shown for the next word
MAX_TEMPERATURE = 5.0
GENERATE_CHOICES = (1, 4, 8, 16)


def read_decoder_tokens(model: DecoderFiles, text: str) -> tuple[tuple[str, ...], np.ndarray]:
    """The text's tokens, or a ValueError with their count and the limit."""
    read = tokenize(model, text)
    tokens, ids = read.tokens, read.ids
    limit = settings.decoder_max_tokens
    if len(ids) > limit:
        raise ValueError(_("the text is {n} tokens; the limit is {limit}").format(n=len(ids), limit=limit))
    if not len(ids):
        raise ValueError(_("enter a text: it has no tokens"))
    return tokens, ids


def candidates_of(model: DecoderFiles, logits: np.ndarray, temperature: float, top: int) -> list[dict]:
    """The ``top`` most likely next tokens under softmax(logits/τ): id, piece, logit and probability."""
    p = temperature_softmax(logits, temperature)  # (vocab,)
    return [{"id": int(i), "token": model.vocabulary[i], "logit": float(logits[i]), "probability": float(p[i])}
            for i in top_candidates(p, top)]


def read_next_token(model: DecoderFiles, value: int | str) -> int:
    """A next token a student names: its id, its piece as the vocabulary spells it ("ĠParis"), or a text that
    is one token (" Paris", with its leading space). A ValueError says why another is not."""
    vocab = len(model.vocabulary)
    if isinstance(value, int):
        if not 0 <= value < vocab:
            raise ValueError(_("a token id is a whole number from 0 to {last}").format(last=vocab - 1))
        return value
    piece = model.tokenizer.token_to_id(value)
    if piece is not None:
        return int(piece)
    ids = tokenize(model, value).ids
    if len(ids) != 1:
        raise ValueError(_("“{text}” is {n} tokens: name one token (a leading space belongs to the word)").format(
            text=value, n=len(ids)))
    return int(ids[0])


# "Which words made it?" on the page, by the query's saliency=: gradient × input, or integrated gradients with
# the API's default steps and baseline (app.maths.saliency).
SALIENCY_METHODS = {"gradient": "gradient_x_input", "integrated": "integrated_gradients"}
MAX_DRAW_SEED = 999_999  # "Draw 20 times" again and again: a new seed each time


@dataclass(frozen=True)
class DecoderPage:
    """The page's state; every index from 0. ``layer``/``head`` None: the page chooses."""

    text: str = DEFAULT_DECODER_TEXT
    layer: int | None = None
    head: int | None = None
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None  # keep only tokens at least min_p times as likely as the likeliest
    cell: Cell | None = None
    lens_all: bool = False  # the logit lens at every position, not only the last
    off: frozenset[tuple[int, int]] = frozenset()  # heads ticked one by one
    off_layers: frozenset[int] = frozenset()  # layers ticked whole
    why: int | None = None  # the next token "Why this word" explains (a token id); None: the most likely
    against: int | None = None  # and the token it is read against ("why this and not that"), if any
    draw: int | None = None  # "Draw 20 times": the draws' seed (from 1); None: not drawn
    saliency: str | None = None  # "Which words made it?": one of SALIENCY_METHODS; None: not computed

    @property
    def heads_off(self) -> frozenset[tuple[int, int]]:
        """Every head switched off: those ticked, and every head of a layer ticked."""
        return self.off | frozenset((la, h) for la in self.off_layers for h in range(DECODER.heads))


@dataclass(frozen=True)
class DecoderRead:
    page: DecoderPage
    tokens: tuple[str, ...]
    ids: np.ndarray


def _counted(given: dict[str, str], name: str, lo: int, hi: int) -> int | None:
    """A count from 1 in [lo, hi] (app.state.model_state.whole_field's rule and words), from 0; None if empty."""
    raw = given.get(name, "").strip()
    return None if not raw else whole_field(name, raw, lo, hi)


def _number(pairs: dict[str, str], name: str, lo: float, hi: float, *, above: bool) -> float | None:
    raw = pairs.get(name, "").strip().replace("−", "-").replace(",", ".")
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not ((lo < value) if above else (lo <= value)) or value > hi:
        message = (_("{field} must be a number above {lo} and at most {hi}") if above
                   else _("{field} must be a number from {lo} to {hi}"))
        raise FormError(name, message.format(field=name, lo=f"{lo:g}", hi=f"{hi:g}"))
    return value


def token_field(model: DecoderFiles, given: dict[str, str], name: str) -> int | None:
    """A next token named in the query string: its id (digits), or its piece or one-token text."""
    raw = given.get(name, "")
    if not raw.strip():
        return None
    try:
        return read_next_token(model, int(raw) if raw.strip().isdigit() else raw)
    except ValueError as e:
        raise FormError(name, str(e)) from None


def read_decoder_page(model: DecoderFiles, pairs: Iterable[tuple[str, str]]) -> DecoderRead:
    """The page's state from its query string; FormError names the first bad field."""
    pairs = list(pairs)
    given = dict(pairs)
    off = frozenset(head_ref("off", v, DECODER.layers, DECODER.heads) for k, v in pairs if k == "off")
    off_layers = frozenset(whole_field("off_layer", v, 1, DECODER.layers) for k, v in pairs if k == "off_layer")
    text = given.get("text", DEFAULT_DECODER_TEXT)
    try:
        check_sentence(text)
        tokens, ids = read_decoder_tokens(model, text)
    except ValueError as e:
        raise FormError("text", str(e)) from None
    t = len(ids)
    layer = _counted(given, "layer", 1, DECODER.layers)
    head = _counted(given, "head", 1, DECODER.heads)
    temperature = _number(given, "temperature", 0.0, MAX_TEMPERATURE, above=True)
    top_k = _counted(given, "top_k", 1, DECODER.config.vocab)
    top_p = _number(given, "top_p", 0.0, 1.0, above=True)
    min_p = _number(given, "min_p", 0.0, 1.0, above=True)
    draw = _counted(given, "draw", 1, MAX_DRAW_SEED)
    saliency = given.get("saliency", "").strip() or None
    if saliency is not None and saliency not in SALIENCY_METHODS:
        raise FormError("saliency", _("{field} must be one of {options}").format(
            field="saliency", options=", ".join(SALIENCY_METHODS)))
    cell = None
    matrix = given.get("matrix", "").strip()
    if matrix:
        if matrix not in INSPECTABLE:
            raise FormError("matrix", _("{field} must be one of {options}").format(field="matrix",
                                                                                     options=", ".join(INSPECTABLE)))
        row = _counted(given, "row", 1, t)
        col = _counted(given, "col", 1, DECODER.d_k if matrix == "output" else t)
        if row is None or col is None:
            raise FormError("row" if row is None else "col", _("give the cell's row and column"))
        cell = Cell(matrix, row, col)
    why, against = (token_field(model, given, name) for name in ("why", "against"))
    if against is not None and against == why:
        raise FormError("against", _("the contrast must be another token than the target"))
    page = DecoderPage(
        text=text, layer=layer, head=head, temperature=1.0 if temperature is None else temperature,
        top_k=None if top_k is None else top_k + 1, top_p=top_p, min_p=min_p, cell=cell,
        lens_all=given.get("lens") == "all", off=off, off_layers=off_layers, why=why, against=against,
        draw=None if draw is None else draw + 1, saliency=saliency)
    return DecoderRead(page=page, tokens=tokens, ids=ids)


def decoder_query(page: DecoderPage, **changes: object) -> str:
    """The page's permalink query (indices from 1), with ``changes`` applied to the state first."""
    page = replace(page, **changes) if changes else page
    fields: list[tuple[str, str]] = [("text", page.text)]
    if page.layer is not None and page.head is not None:
        fields += [("layer", str(page.layer + 1)), ("head", str(page.head + 1))]
    if page.temperature != 1.0:
        fields.append(("temperature", f"{page.temperature:g}"))
    if page.top_k is not None:
        fields.append(("top_k", str(page.top_k)))
    if page.top_p is not None:
        fields.append(("top_p", f"{page.top_p:g}"))
    if page.min_p is not None:
        fields.append(("min_p", f"{page.min_p:g}"))
    if page.draw is not None:
        fields.append(("draw", str(page.draw)))
    if page.saliency is not None:
        fields.append(("saliency", page.saliency))
    if page.cell is not None:
        fields += [("matrix", page.cell.matrix), ("row", str(page.cell.row + 1)), ("col", str(page.cell.col + 1))]
    if page.lens_all:
        fields.append(("lens", "all"))
    fields += [("off", f"{la + 1}.{h + 1}") for la, h in sorted(page.off)]
    fields += [("off_layer", str(la + 1)) for la in sorted(page.off_layers)]
    fields += [(name, str(token)) for name, token in (("why", page.why), ("against", page.against))
               if token is not None]
    return urlencode(fields)
