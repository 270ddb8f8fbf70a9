"""app.lesson.seed_numbers: the seeded starting sentences are drawn as their docstrings say, and the designed
weights read as their comments say."""

from __future__ import annotations

import numpy as np

from app.lesson.seed_numbers import (
    ALIGN_WEIGHTS,
    BANK_WEIGHTS,
    PREVIOUS_TOKENS,
    WHY_SCALE_D_MODEL,
    WHY_SCALE_TOKENS,
    identity,
    previous_token_x,
    why_scale_x,
)


def test_previous_token_sentence_gives_the_repeated_word_one_embedding() -> None:
    x = np.array(previous_token_x())  # (T, d_model)
    assert x.shape == (len(PREVIOUS_TOKENS), 8)
    assert PREVIOUS_TOKENS[0] == PREVIOUS_TOKENS[4] == "the"
    np.testing.assert_array_equal(x[0], x[4])
    assert len({tuple(row) for row in x.tolist()}) == len(set(PREVIOUS_TOKENS))
    np.testing.assert_array_equal(x, np.round(x, 2))
    assert previous_token_x() == previous_token_x()  # drawn from its seed, the same every time


def test_why_scale_x_is_a_standard_normal_draw_to_two_decimals() -> None:
    x = np.array(why_scale_x())  # (T, d_model)
    assert x.shape == (len(WHY_SCALE_TOKENS), WHY_SCALE_D_MODEL)
    np.testing.assert_array_equal(x, np.round(x, 2))
    assert 0.5 < x.std() < 1.5
    assert why_scale_x() == why_scale_x()


def test_alignment_queries_are_four_times_the_embedding_and_bank_values_are_its_keys() -> None:
    np.testing.assert_array_equal(np.array(ALIGN_WEIGHTS["w_q"][0]), 4.0 * np.eye(6))
    assert ALIGN_WEIGHTS["w_k"] == ALIGN_WEIGHTS["w_v"] == (identity(6),)
    assert BANK_WEIGHTS["w_v"] == BANK_WEIGHTS["w_k"]
    assert np.array(BANK_WEIGHTS["w_q"]).shape == (3, 6, 2)  # (h, d_model, d_k)
