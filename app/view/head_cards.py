"""What heads do, for the page: the catalogue of app.maths.head_catalogue over the lesson's fixed
sentences (app.lesson.model_sentences), each behaviour with its best heads' numbers and a figure.

Measured once per process (one forward pass per sentence, about 0.3 s) and kept: the sentences and the weights
never change; its words are written once per language the page is read in. The figure is the best head's
attention map on the example sentence, a server-drawn SVG whose cells take app.view.heatmap's weight buckets
(CSS classes s0–s8, no style attribute); the numbers it shows are written beside it, so colour is never their
only carrier.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from markupsafe import Markup, escape

from app.i18n import LANGUAGES, language, ngettext, score
from app.i18n import gettext as _
from app.lesson.model_sentences import BEHAVIOUR_TEXTS, EXAMPLE_SENTENCE, MODEL_SENTENCES
from app.maths.bert import ModelRun
from app.maths.head_catalogue import CatalogueEntry, HeadScore
from app.serving.real_models import sentence_model
from app.view.heatmap import bucket_classes
from app.view.labels import head_name

CELL = 12  # px per attention weight
LABEL_W = 78  # px for a token's label beside or above the map
LABEL_CHARS = 11  # a longer token is cut with "…" in the figure (its full text is in the numbers)


def head_title(h: HeadScore) -> str:
    """As the page counts: layers and heads from 1, named as every page names a head."""
    return head_name(h.layer, h.head)


@dataclass(frozen=True)
class HeadLine:
    name: str  # "L1 H3"
    score: str  # "0.87"
    shows: bool  # reaches the threshold


@dataclass(frozen=True)
class RowPeak:
    query: str  # the token, counted from 1: "3 animal"
    key: str
    weight: str


@dataclass(frozen=True)
class EntryView:
    key: str
    title: str
    explanation: str
    claim: str  # "L1 H3: previous token, 1.00 of each token's attention on average."
    shown: bool  # some head reaches the threshold; if not, the claim names the closest head
    verdict: str  # how many heads reach the threshold, or that none does
    threshold: str
    baseline: str
    heads: tuple[HeadLine, ...]
    figure: Markup
    figure_caption: str
    peaks: tuple[RowPeak, ...]  # the figure's strongest weight in each row


@dataclass(frozen=True)
class CatalogueView:
    entries: tuple[EntryView, ...]
    sentences: tuple[str, ...]
    pronoun_sentences: int
    example: str
    layers: int
    heads: int
    seconds: float  # to compute it, once per process


def short_token(token: str) -> str:
    return token if len(token) <= LABEL_CHARS else token[: LABEL_CHARS - 1] + "…"


def attention_svg(weights: np.ndarray, tokens: tuple[str, ...], *, title: str, desc: str,
                  mark: tuple[int, int] | None = None) -> Markup:
    """A (T, T) attention map: queries down the left, keys along the top; a darker cell, a larger weight.
    ``mark`` (query, key) outlines the one cell a measurement reads, such as a pronoun's noun."""
    t = len(tokens)
    classes, _top = bucket_classes(weights, "weights")
    size = LABEL_W + t * CELL
    parts = [f'<svg class="attention-map" xmlns="http://www.w3.org/2000/svg" role="img" width="{size}" '
             f'height="{size}" viewBox="0 0 {size} {size}"><title>{escape(title)}</title><desc>{escape(desc)}</desc>']
    labels = [escape(short_token(tok)) for tok in tokens]
    for j, label in enumerate(labels):  # keys, written upwards above their columns
        x = LABEL_W + j * CELL + CELL - 3
        parts.append(f'<text class="key" x="{x}" y="{LABEL_W - 4}" transform="rotate(-90 {x} {LABEL_W - 4})">'
                     f"{label}</text>")
    cells: dict[str, list[str]] = {}  # one path per weight bucket: a square per cell
    for i, label in enumerate(labels):
        y = LABEL_W + i * CELL
        parts.append(f'<text class="query" x="{LABEL_W - 4}" y="{y + CELL - 3}" text-anchor="end">{label}</text>')
        for j, c in enumerate(classes[i].tolist()):
            cells.setdefault(c, []).append(f"M{LABEL_W + j * CELL} {y}h{CELL}v{CELL}h-{CELL}z")
    parts.extend(f'<path class="{c}" d="{"".join(d)}"/>' for c, d in sorted(cells.items()))
    if mark is not None:
        parts.append(f'<rect class="mark" x="{LABEL_W + mark[1] * CELL}" y="{LABEL_W + mark[0] * CELL}" '
                     f'width="{CELL}" height="{CELL}"/>')
    parts.append("</svg>")
    return Markup("".join(parts))


def row_peaks(weights: np.ndarray, tokens: tuple[str, ...]) -> tuple[RowPeak, ...]:
    strongest = weights.argmax(axis=1)  # (T,)
    return tuple(RowPeak(f"{i + 1} {tokens[i]}", f"{j + 1} {tokens[j]}", score(float(weights[i, j])))
                 for i, j in enumerate(strongest.tolist()))


def entry_view(entry: CatalogueEntry, example: ModelRun, sentence: str,
               pronoun: tuple[int, int] | None = None) -> EntryView:
    """One behaviour for the page; ``pronoun`` (its position, its noun's) is outlined in the pronoun's figure."""
    text = BEHAVIOUR_TEXTS[entry.behaviour]
    best = entry.best
    threshold = score(entry.threshold)
    if entry.showing:
        verdict = ngettext("{n} of the model's {total} heads reaches the threshold of {threshold}.",
                           "{n} of the model's {total} heads reach the threshold of {threshold}.",
                           entry.showing).format(n=entry.showing, total=example.layers * example.heads,
                                                 threshold=threshold)
    else:
        verdict = _("No head reaches the threshold of {threshold}: this model shows this behaviour only weakly, "
                    "and the strongest heads are listed all the same.").format(threshold=threshold)
    weights = example.attention[best.layer, best.head]  # (T, T)
    caption = _("{head} on “{sentence}”").format(head=head_title(best), sentence=sentence)
    mark = pronoun if entry.behaviour == "antecedent" else None
    if mark is not None:
        caption = _("{head} on “{sentence}”, the cell from “{query}” to “{key}” outlined").format(
            head=head_title(best), sentence=sentence, query=example.tokens[mark[0]], key=example.tokens[mark[1]])
    desc = _("Rows are queries, columns keys, darker is more weight. Each row's strongest key: {peaks}").format(
        peaks="; ".join(f"{p.query} → {p.key} {p.weight}" for p in row_peaks(weights, example.tokens)))
    return EntryView(
        key=entry.behaviour, title=_(text.title), explanation=_(text.explanation),
        claim=_("{head}: {behaviour}, {score} of {whose} attention on average.").format(
            head=head_title(best), behaviour=_(text.short), score=score(best.score), whose=_(text.whose)),
        shown=entry.showing > 0,
        verdict=verdict, threshold=threshold, baseline=score(entry.baseline),
        heads=tuple(HeadLine(head_title(h), score(h.score), h.score >= entry.threshold) for h in entry.heads),
        figure=attention_svg(weights, example.tokens, title=caption, desc=desc, mark=mark), figure_caption=caption,
        peaks=row_peaks(weights, example.tokens))


def catalogue_context() -> CatalogueView:
    """What templates/model/catalogue.html reads (as ``catalogue``): measured once per process, written once
    per language."""
    return _catalogue_view(language())


@lru_cache(maxsize=len(LANGUAGES))
def _catalogue_view(lang: str) -> CatalogueView:
    """The catalogue in ``lang``, the request's language (gettext reads it from the request's context)."""
    measured = sentence_model().catalogue()
    entries, example, pronouns, seconds = measured.entries, measured.example, measured.pronouns, measured.seconds
    sentence = MODEL_SENTENCES[EXAMPLE_SENTENCE].text
    return CatalogueView(
        entries=tuple(entry_view(e, example, sentence, pronouns[EXAMPLE_SENTENCE]) for e in entries),
        sentences=tuple(s.text for s in MODEL_SENTENCES), pronoun_sentences=sum(p is not None for p in pronouns),
        example=sentence,
        layers=example.layers, heads=example.heads, seconds=seconds)
