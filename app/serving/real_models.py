"""The real models' services, one of each per process: the language model (SmolLM2-135M-Instruct, "Next word"),
the sentence encoder (all-MiniLM-L6-v2, "Your sentence") and the translator (Bergamot's English ↔ Portuguese
Marian students, seed 003's encoder–decoder). Each reads its files through app.maths, measures its heads over the
lesson's fixed texts (the translator: translates the seeds' two banks), and keeps its runs by the question that made
them (app.serving.models)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from app.lesson.decoder_texts import DECODER_TEXTS
from app.lesson.model_sentences import EXAMPLE_SENTENCE, MODEL_SENTENCES
from app.maths.bert import ModelRun, run_model, tokenize
from app.maths.decoder_files import DecoderFiles
from app.maths.decoder_habits import (
    DecoderHabits,
    HabitEffects,
    decoder_catalogue,
    decoder_habits,
    habit_effects,
)
from app.maths.head_catalogue import CatalogueEntry, head_catalogue
from app.maths.llama import DecoderRun, run_decoder
from app.maths.marian import Translation, translate
from app.maths.marian_files import DIRECTIONS, TranslatorFiles, load_translator_files
from app.maths.model_files import ModelFiles
from app.maths.patching import Patching, activation_patching
from app.maths.real_model import Tokenized
from app.maths.registry import DECODER, ENCODER, TRANSLATOR
from app.maths.saliency import (
    DEFAULT_BASELINE,
    DEFAULT_STEPS,
    Saliency,
    gradient_x_input,
    integrated_gradients,
)
from app.serving.byte_cache import ByteCache
from app.serving.models import ModelService

LOGITS_BYTES = 8 * 1024 * 1024  # the next-token logits of the last texts (196 KB each), kept apart from their runs
NO_HEADS = frozenset[tuple[int, int]]()


@dataclass(frozen=True)
class DecoderCatalogue:
    """The language model's catalogue as measured at start: each behaviour's strongest heads by where they look,
    and the runs it was measured on (what switching the heads off does is measured on them when first asked)."""

    entries: tuple[CatalogueEntry, ...]
    habits: DecoderHabits


def measure_decoder(files: DecoderFiles) -> DecoderCatalogue:
    """Where the language model's heads look, over the lesson's fixed texts (about 1 s of forward passes)."""
    habits = decoder_habits(files, DECODER_TEXTS)
    return DecoderCatalogue(entries=decoder_catalogue(habits, top=3), habits=habits)


class LanguageModel(ModelService[DecoderFiles]):
    """SmolLM2-135M-Instruct: its runs by text and heads switched off, and their next-token logits."""

    def __init__(self) -> None:
        super().__init__(DECODER.name, DECODER.read, measure_decoder)
        self._logits: ByteCache[np.ndarray] = ByteCache(LOGITS_BYTES)
        self._logits_lock = threading.Lock()
        self._effects: tuple[HabitEffects, ...] | None = None
        self._effects_lock = threading.Lock()

    def run(self, text: str, heads_off: frozenset[tuple[int, int]] = NO_HEADS) -> DecoderRun:
        """The text's run, with those heads off: kept, or computed once however many ask."""
        run = self.record(("run", text, heads_off),
                          lambda progress: run_decoder(self.files(), text, heads_off, progress))
        with self._logits_lock:
            self._logits.put((text, heads_off), run.logits, run.logits.nbytes)
        return run

    def logits(self, text: str, heads_off: frozenset[tuple[int, int]] = NO_HEADS) -> np.ndarray:
        """The text's next-token logits: kept from its run (the temperature slider and the cut-offs recompute the
        candidates from them without a forward pass), or computed."""
        with self._logits_lock:
            kept = self._logits.get((text, heads_off))
        return kept if kept is not None else self.run(text, heads_off).logits

    def patching(self, clean: str, corrupted: str, clean_ids: np.ndarray, corrupted_ids: np.ndarray,
                 target: int | None = None, contrast: int | None = None) -> Patching:
        """Activation patching of the corrupted text by the clean one: kept, or computed once however many ask,
        its layers told as the waiting page's progress."""
        return self.record(("patching", clean, corrupted, target, contrast),
                           lambda progress: activation_patching(self.files(), clean_ids, corrupted_ids, target,
                                                                contrast, progress=progress))

    def saliency(self, text: str, ids: np.ndarray, heads_off: frozenset[tuple[int, int]], target: int,
                 contrast: int | None, method: str, steps: int = DEFAULT_STEPS,
                 baseline: str | int = DEFAULT_BASELINE) -> Saliency:
        """Which input tokens the answer rests on (gradient × input, or integrated gradients along ``steps``
        points from ``baseline``): kept, or computed once however many ask, the path's steps told as progress."""
        files = self.files()
        if method == "gradient_x_input":
            return self.record(("saliency", text, heads_off, target, contrast, method),
                               lambda progress: gradient_x_input(files, ids, target, contrast, heads_off))
        return self.record(("saliency", text, heads_off, target, contrast, method, steps, baseline),
                           lambda progress: integrated_gradients(files, ids, target, contrast, steps, baseline,
                                                                 heads_off, progress))

    def catalogue(self) -> tuple[CatalogueEntry, ...]:
        return self.measured().entries

    def effects(self) -> tuple[HabitEffects, ...]:
        """What switching off each behaviour's listed heads does, in the catalogue's order: measured once per
        process when first asked (about 3 s: 92 runs from the first layer switched off), not at start, where a
        server being stopped would have to wait for it."""
        with self._effects_lock:
            if self._effects is None:
                measured = self.measured()
                self._effects = habit_effects(self.files(), measured.habits, measured.entries)
            return self._effects

    def measured(self) -> DecoderCatalogue:
        return super().catalogue()  # type: ignore[return-value]


@dataclass(frozen=True)
class EncoderCatalogue:
    """The encoder's catalogue as measured: its entries, the example sentence's run, each sentence's pronoun
    positions, and the seconds it took."""

    entries: tuple[CatalogueEntry, ...]
    example: ModelRun
    pronouns: list
    seconds: float


def measure_encoder(files: ModelFiles) -> EncoderCatalogue:
    """What the sentence encoder's heads do, over the lesson's fixed sentences (one pass each, about 0.3 s)."""
    start = time.perf_counter()
    runs = [run_model(files, tokenize(files, s.text)) for s in MODEL_SENTENCES]
    pronouns = [s.positions(r.tokens) for s, r in zip(MODEL_SENTENCES, runs, strict=True)]
    return EncoderCatalogue(tuple(head_catalogue(runs, pronouns)), runs[EXAMPLE_SENTENCE], pronouns,
                            time.perf_counter() - start)


class SentenceModel(ModelService[ModelFiles]):
    """all-MiniLM-L6-v2: its runs by sentence and heads switched off."""

    def __init__(self) -> None:
        super().__init__(ENCODER.name, ENCODER.read, measure_encoder)

    def run(self, tokenized: Tokenized, heads_off: frozenset[tuple[int, int]] = NO_HEADS) -> ModelRun:
        return self.record(("run", tokenized.text, tokenized.ids.tobytes(), heads_off),
                           lambda progress: run_model(self.files(), tokenized, heads_off, progress))

    def catalogue(self) -> EncoderCatalogue:
        return super().catalogue()  # type: ignore[return-value]


BANKS = ("The bank of the river was muddy.", "I deposited money at the bank.")  # seed 000's bank, two senses


def read_translators() -> dict[str, TranslatorFiles]:
    """Both directions' files (about 70 MB of float32 weights each, a third of a second to read)."""
    return {direction: load_translator_files(direction) for direction in DIRECTIONS}


def measure_translator(files: dict[str, TranslatorFiles]) -> tuple[Translation, ...]:
    """The page's first examples, translated once at start: the seeds' two banks into Portuguese."""
    return tuple(translate(files["en-pt"], text) for text in BANKS)


class TranslatorModel(ModelService[dict[str, TranslatorFiles]]):
    """The translator, both directions: its translations by direction and text."""

    def __init__(self) -> None:
        super().__init__(TRANSLATOR.name, read_translators, measure_translator)

    def run(self, direction: str, text: str) -> Translation:
        return self.record(("translate", direction, text), lambda progress: translate(self.files()[direction], text))


_MAKING = threading.Lock()
_services: dict[str, ModelService] = {}


def language_model() -> LanguageModel:
    """This process's language model service."""
    with _MAKING:
        if DECODER.key not in _services:
            _services[DECODER.key] = LanguageModel()
        return _services[DECODER.key]  # type: ignore[return-value]


def sentence_model() -> SentenceModel:
    """This process's sentence encoder service."""
    with _MAKING:
        if ENCODER.key not in _services:
            _services[ENCODER.key] = SentenceModel()
        return _services[ENCODER.key]  # type: ignore[return-value]


def translator() -> TranslatorModel:
    """This process's translator service."""
    with _MAKING:
        if TRANSLATOR.key not in _services:
            _services[TRANSLATOR.key] = TranslatorModel()
        return _services[TRANSLATOR.key]  # type: ignore[return-value]


def model_services() -> tuple[ModelService, ...]:
    return language_model(), sentence_model(), translator()

