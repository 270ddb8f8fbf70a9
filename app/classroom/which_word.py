"""The class says which word of the text made the language model say its answer ("Next word" in a live class, asked
"which word"): the class's taps counted per token of the text beside gradient × input's signed share of
log p(answer) (app.maths.saliency), the answer being the model's likeliest next token, and whether the token the
class tapped most is the one gradient × input ranks first.

A tap is a token's place in the text, kept as the store keeps a guess, under the text's own ref
(app.classroom.next_word.NextWord.word_ref), so the taps are kept per room and per text. A student's tap is read
as the translator's is (app.classroom.taps.read_tap).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from app.serving.real_models import language_model
from app.state.decoder_state import DecoderRead
from app.view.heatmap import bucket_classes
from app.view.pieces import readable
from app.view.why_view import share

METHOD = "gradient_x_input"  # one gradient at the text: the same answer as the page's "Gradient × input"


@dataclass(frozen=True)
class WhichCount:
    """One token of the text: how many students tapped it, its bar's length out of 100, and gradient × input's
    signed share of log p(answer) on it, written and coloured."""

    index: int  # from 0
    token: str  # as the page writes it ("␣" for a space)
    count: int
    bar: str  # this count over the largest, out of 100
    signed: float
    share: str  # written with its sign: +0.88, −0.11
    cls: str  # its colour on the diverging scale (towards the answer, or against it)
    first: bool  # the largest share towards the answer: the token gradient × input ranks first


def count_which(taps: Iterable[str], tokens: Sequence[str], signed: np.ndarray) -> list[WhichCount]:
    """The class's taps (token places from 0, as text) counted per token, in the text's order, beside ``signed``
    (T,), each token's share."""
    counted = Counter(int(t) for t in taps if t.isdigit() and int(t) < len(tokens))
    most = max(counted.values(), default=1)
    classes, _top = bucket_classes(np.asarray(signed, dtype=np.float64), "signed")
    first = int(np.argmax(signed))
    return [WhichCount(j, readable(piece), counted[j], f"{100 * counted[j] / most:.1f}", float(a), share(float(a)),
                       str(classes[j]), j == first)
            for j, (piece, a) in enumerate(zip(tokens, signed, strict=True))]


@dataclass(frozen=True)
class ClassWhich:
    """The class's taps on one text beside gradient × input, and what the page says of them."""

    answer: str  # the model's likeliest next token, as the page writes it
    counts: list[WhichCount] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(c.count for c in self.counts)

    @property
    def first(self) -> WhichCount:
        """The token gradient × input ranks first."""
        return next(c for c in self.counts if c.first)

    @property
    def most_tapped(self) -> list[WhichCount]:
        """The tokens the class tapped most (several when tied; none before any tap)."""
        most = max((c.count for c in self.counts), default=0)
        return [c for c in self.counts if most and c.count == most]

    @property
    def agrees(self) -> bool:
        """The token gradient × input ranks first is the class's most tapped (or one of them, when tied)."""
        return self.first in self.most_tapped


def class_which(read: DecoderRead, taps: Iterable[str]) -> ClassWhich:
    """The class's taps counted beside gradient × input's share of log p(the likeliest next token) for each token
    of ``read``'s text, with its heads switched off: the model's service keeps the text's logits and its saliency,
    so a panel polled as taps come computes them once."""
    service = language_model()
    page = read.page
    target = int(np.argmax(service.logits(page.text, page.heads_off)))  # (vocab,) → the answer
    s = service.saliency(page.text, read.ids, page.heads_off, target, None, METHOD)
    return ClassWhich(readable(service.files().vocabulary[target]), count_which(taps, s.tokens, s.signed))
