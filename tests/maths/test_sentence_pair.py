"""Two sentences' attention compared head by head, and heads switched off, against loops written here."""

from __future__ import annotations

import numpy as np
import pytest

from app.maths.bert import run_model, tokenize
from app.maths.model_files import load_model_files
from app.maths.sentence_pair import attention_shifts, first_position, moved_grid, switch_off


def random_attention(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    e = rng.random(shape)
    return e / e.sum(axis=-1, keepdims=True)


def test_shifts_match_a_loop_over_keys() -> None:
    rng = np.random.default_rng(7)
    a, b = random_attention(rng, (3, 4, 5, 5)), random_attention(rng, (3, 4, 5, 5))
    shifts = attention_shifts(a, b, query=2)
    assert len(shifts) == 12
    assert [s.moved for s in shifts] == sorted((s.moved for s in shifts), reverse=True)
    for s in shifts:
        row_a, row_b = a[s.layer, s.head, 2], b[s.layer, s.head, 2]
        assert s.moved == pytest.approx(0.5 * sum(abs(x - y) for x, y in zip(row_a, row_b, strict=True)))
        diffs = [y - x for x, y in zip(row_a, row_b, strict=True)]
        assert s.lost == diffs.index(min(diffs)) and s.gained == diffs.index(max(diffs))
    grid = moved_grid(a, b, 2)
    assert grid[shifts[0].layer, shifts[0].head] == pytest.approx(shifts[0].moved)


def test_the_same_sentence_moves_nothing_and_different_lengths_cannot_be_aligned() -> None:
    rng = np.random.default_rng(1)
    a = random_attention(rng, (2, 2, 4, 4))
    assert all(s.moved == 0.0 for s in attention_shifts(a, a, 0))
    with pytest.raises(ValueError, match="cannot be aligned"):
        attention_shifts(a, random_attention(rng, (2, 2, 5, 5)), 0)


def test_first_position() -> None:
    assert first_position(("[CLS]", "it", "is", "it"), "it") == 1
    assert first_position(("[CLS]", "[SEP]"), "it") is None


def test_switching_off_gives_the_embeddings_cosine_with_those_heads_zeroed() -> None:
    model = load_model_files()
    one, two = tokenize(model, "A dog runs in the park."), tokenize(model, "A puppy plays outside.")
    off = frozenset({(0, 3), (5, 11)})
    result = switch_off(model, one, two, off)
    e1, e2 = run_model(model, one).embedding, run_model(model, two).embedding
    assert result.before == pytest.approx(float(np.dot(e1, e2)), abs=1e-6)  # unit vectors
    f1, f2 = run_model(model, one, off).embedding, run_model(model, two, off).embedding
    assert result.after == pytest.approx(float(np.dot(f1, f2)), abs=1e-6)
    assert result.after != pytest.approx(result.before, abs=1e-5)
    assert switch_off(model, one, two, frozenset()).after == result.before
