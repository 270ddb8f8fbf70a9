"""The catalogue's sentences: each marked pronoun and noun is one of the sentence's WordPiece tokens exactly
once, a mark that is not is refused, and every sentence fits the API's token limit."""

from __future__ import annotations

import pytest

from app.config import settings
from app.lesson.model_sentences import BEHAVIOUR_TEXTS, MODEL_SENTENCES, ModelSentence
from app.maths.bert import tokenize
from app.maths.head_catalogue import BEHAVIOURS
from app.maths.model_files import load_model_files


def test_every_mark_is_found_once_and_every_sentence_fits() -> None:
    model = load_model_files()
    marked = 0
    for s in MODEL_SENTENCES:
        tokens = tokenize(model, s.text).tokens
        assert len(tokens) <= settings.model_max_tokens
        found = s.positions(tokens)
        if found is not None:
            marked += 1
            assert (tokens[found[0]], tokens[found[1]]) == (s.pronoun, s.antecedent)
    assert marked >= 8 and len(MODEL_SENTENCES) - marked >= 5


def test_a_mark_that_is_not_one_token_is_refused() -> None:
    with pytest.raises(ValueError, match="'the' is 2 of its tokens"):
        ModelSentence("the cat saw the dog", "the", "cat").positions(["[CLS]", "the", "cat", "saw", "the", "[SEP]"])
    with pytest.raises(ValueError, match="'it' is 0"):
        ModelSentence("a cat", "it", "cat").positions(["[CLS]", "a", "cat", "[SEP]"])


def test_every_behaviour_has_its_words() -> None:
    assert set(BEHAVIOUR_TEXTS) == set(BEHAVIOURS)
