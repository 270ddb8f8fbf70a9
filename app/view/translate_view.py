"""Everything the "Translate" templates get (translate_context): the translation with the lines from each target
piece to the source pieces it looked at, the alignment as a heatmap, the 2 × 8 cross-attention maps and the 6 × 8
encoder maps, one cross-attention head stepped through on its real numbers (Q from the decoder's states, K and V
from the encoder's output), and the translation written step by step with each step's candidates. Every label
counts from 1; every number comes from app.maths."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.i18n import LANGUAGE_NAMES, decimal, percent
from app.maths.marian import Translation, cross_head
from app.maths.marian_files import DIRECTIONS, TranslatorFiles
from app.maths.registry import TRANSLATOR
from app.serving.real_models import translator
from app.state.form import FormError
from app.state.translate_state import (
    ALIGNMENT,
    DECODER_LAYERS,
    DEFAULT_DIRECTION,
    DEFAULT_TEXT,
    HEADS,
    TranslatePage,
    read_translate_page,
    translate_query,
)
from app.view.attention_lines import attention_lines
from app.view.labels import head_name, numbered, token_labels
from app.view.model_maps import thumbnail
from app.view.model_view import head_panel

ENCODER_LAYERS = TRANSLATOR.config.encoder_layers
# Each direction's source and target language, named (_() in the page): "en-pt" is English, then Portuguese.
LANGUAGES = {d: (LANGUAGE_NAMES[d[:2]], LANGUAGE_NAMES[d[3:]]) for d in DIRECTIONS}


@dataclass(frozen=True)
class Map:
    layer: int
    head: int
    src: str  # a PNG data URI, one pixel per (query, key)
    query: str  # the permalink that steps through it ("" for the encoder's: not stepped through here)
    selected: bool

    @property
    def name(self) -> str:
        return head_name(self.layer, self.head)


def written_steps(run: Translation) -> list[dict]:
    """The translation written piece by piece: what each step chose, how sure, the next best, and where the
    alignment head looked most when it chose (the last step, the end, has no row of its own)."""
    rows = []
    for i, step in enumerate(run.steps):
        looked = None
        if i < len(run.target):
            j = int(np.argmax(run.alignment[i]))
            looked = {"index": j + 1, "piece": run.source[j], "weight": decimal(float(run.alignment[i, j]), 2)}
        rows.append({"index": i + 1, "piece": step.token, "probability": percent(step.probability),
                     "end": step.id == 0, "looked": looked,
                     "candidates": [{"piece": t, "probability": percent(p)} for _id, t, p in step.candidates[1:]]})
    return rows


def translate_context(files: TranslatorFiles, run: Translation, page: TranslatePage) -> dict:
    """The whole page's context for one translation and one chosen cross-attention head."""
    layer, head = page.layer, page.head
    sources, targets = token_labels(run.source), token_labels(run.target)
    cross = [[Map(la, h, thumbnail(run.cross_attention[la, h]), translate_query(page, layer=la, head=h),
                  (la, h) == (layer, head)) for h in range(HEADS)] for la in range(DECODER_LAYERS)]
    encoder = [[Map(la, h, thumbnail(run.encoder_attention[la, h]), "", False) for h in range(HEADS)]
               for la in range(ENCODER_LAYERS)]
    name = head_name(layer, head)
    ctx: dict = {
        "page": page, "run": run, "query_string": translate_query(page), "layer": layer, "head": head,
        "head_name": name, "alignment_head": page.alignment_head, "alignment_name": head_name(*ALIGNMENT),
        "language_pair": LANGUAGES[run.direction], "cross_maps": cross, "encoder_maps": encoder,
        "sources": sources, "targets": targets, "written": written_steps(run),
        "shortlist": len(run.shortlist), "vocab": files.config.vocab, "d_k": files.config.d_k,
        "sqrt_d_k": decimal(float(np.sqrt(files.config.d_k)), 3),
    }
    if not run.target:  # nothing written (the model chose the end at once): no rows to show
        return ctx | {"steps": None, "lines": None, "alignment": None}
    h = cross_head(files, run, layer, head)
    dims = numbered("", files.config.d_k)
    ctx["alignment"] = head_panel(run.alignment, "Alignment", "", targets, sources, kind="weights",
                                  ref="alignment")
    ctx["lines"] = attention_lines(h.softmax[None], run.target, run.source, [name], fig_id="translate-lines",
                                   cross=True)
    ctx["steps"] = {
        "q": head_panel(h.q, "Q", "", targets, dims), "k": head_panel(h.k, "K", "", sources, dims),
        "v": head_panel(h.v, "V", "", sources, dims),
        "scores": head_panel(h.scores, "Scores Q·Kᵀ", "", targets, sources, ref="scores"),
        "scaled": head_panel(h.scaled, "Scaled Q·Kᵀ/√d_k", "", targets, sources, ref="scaled"),
        "softmax": head_panel(h.softmax, "Attention weights A", "", targets, sources, kind="weights",
                              ref="softmax"),
        "output": head_panel(h.output, "Output A·V", "", targets, dims, ref="output"),
    }
    return ctx


def typed(pairs: list[tuple[str, str]]) -> dict:
    """The text and direction as the student sent them, a bad one too: the boxes keep what was typed."""
    given = dict(pairs)
    return {"text": given.get("text", DEFAULT_TEXT), "direction": given.get("direction") or DEFAULT_DIRECTION}


def failed(error: FormError) -> dict:
    """A bad field's message and the slot beside which it shows: the text's, or the view's."""
    return {"error": error, "error_slot": error.field if error.field == "text" else "view"}


def translated(pairs: list[tuple[str, str]]) -> dict:
    """The page's context for a query string: read by the page's own reader (FormError naming a bad field),
    translated through the translator's service, with the text and direction it read."""
    service = translator()
    read = read_translate_page(service.files(), pairs)
    run = service.run(read.direction, read.text)
    return translate_context(service.files()[read.direction], run, read) | {
        "typed": {"text": read.text, "direction": read.direction}}
