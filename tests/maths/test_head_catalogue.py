"""The head catalogue's claims are measured, not asserted: each listed head's score, the ranking, the count
of heads over the threshold and the even-spread baseline are recomputed here by plain loops over every run's
attention weights, with this file's own reading of each behaviour; and the page's sentences say the same."""

from __future__ import annotations

import string

import numpy as np
import pytest

from app.lesson.model_sentences import MODEL_SENTENCES
from app.maths.bert import ModelRun, run_model, tokenize
from app.maths.head_catalogue import BEHAVIOURS, THRESHOLDS, TOP_HEADS, head_catalogue, measure
from app.maths.model_files import load_model_files
from app.view.head_cards import catalogue_context

PUNCTUATION = set(string.punctuation)


@pytest.fixture(scope="module")
def runs() -> list[ModelRun]:
    model = load_model_files()
    return [run_model(model, tokenize(model, s.text)) for s in MODEL_SENTENCES]


@pytest.fixture(scope="module")
def pronouns(runs: list[ModelRun]) -> list[tuple[int, int] | None]:
    found = []
    for s, run in zip(MODEL_SENTENCES, runs, strict=True):
        found.append(None if s.pronoun is None else (run.tokens.index(s.pronoun), run.tokens.index(s.antecedent)))
    return found


def looked_at(behaviour: str, tokens: tuple[str, ...], i: int, pronoun: tuple[int, int] | None) -> list[int] | None:
    """This test's reading of a behaviour: the keys row i is scored on, or None if the row does not count."""
    t = len(tokens)
    if behaviour == "previous":
        return [i - 1] if i > 0 else None
    if behaviour == "next":
        return [i + 1] if i < t - 1 else None
    if behaviour == "cls":
        return [0]
    if behaviour == "sep":
        return [t - 1]
    if behaviour == "punctuation":
        marks = [j for j in range(1, t - 1) if set(tokens[j]) <= PUNCTUATION]
        return marks or None
    assert behaviour == "antecedent"
    return [pronoun[1]] if pronoun is not None and i == pronoun[0] else None


def recomputed(behaviour: str, runs: list[ModelRun], pronouns: list) -> tuple[dict[tuple[int, int], float], float]:
    """Every head's mean weight on the behaviour's keys, one row at a time, and the even spread's."""
    sums: dict[tuple[int, int], float] = {}
    even, rows = 0.0, 0
    for run, pronoun in zip(runs, pronouns, strict=True):
        att = run.attention.tolist()  # [layer][head][query][key]
        t = len(run.tokens)
        for i in range(t):
            keys = looked_at(behaviour, run.tokens, i, pronoun)
            if keys is None:
                continue
            rows += 1
            even += len(keys) / t
            for layer in range(len(att)):
                for head in range(len(att[layer])):
                    row = att[layer][head][i]
                    sums[layer, head] = sums.get((layer, head), 0.0) + sum(row[j] for j in keys)
    return {k: v / rows for k, v in sums.items()}, even / rows


@pytest.fixture(scope="module")
def measured(runs: list[ModelRun], pronouns: list) -> dict[str, tuple[dict[tuple[int, int], float], float]]:
    return {b: recomputed(b, runs, pronouns) for b in BEHAVIOURS}


def test_the_sentences_have_pronouns_and_punctuation(pronouns: list, runs: list[ModelRun]) -> None:
    assert sum(p is not None for p in pronouns) >= 8
    for (p, a), s, run in ((p, s, r) for p, s, r in zip(pronouns, MODEL_SENTENCES, runs, strict=True) if p):
        assert run.tokens.count(s.pronoun) == 1 and run.tokens.count(s.antecedent) == 1 and a < p


def test_every_claimed_score_is_the_measurement(runs: list[ModelRun], pronouns: list, measured: dict) -> None:
    entries = head_catalogue(runs, pronouns)
    assert [e.behaviour for e in entries] == list(BEHAVIOURS)
    for entry in entries:
        scores, even = measured[entry.behaviour]
        assert len(entry.heads) == TOP_HEADS
        for h in entry.heads:
            assert h.score == pytest.approx(scores[h.layer, h.head], abs=1e-6), (entry.behaviour, h)
        ranked = sorted(scores.values(), reverse=True)
        assert [h.score for h in entry.heads] == pytest.approx(ranked[:TOP_HEADS], abs=1e-6)  # none higher left out
        assert entry.threshold == THRESHOLDS[entry.behaviour]
        assert entry.showing == sum(v >= entry.threshold for v in scores.values())
        assert entry.baseline == pytest.approx(even, abs=1e-9)


def test_the_page_claims_what_was_measured(measured: dict) -> None:
    view = catalogue_context()
    for entry in view.entries:
        scores, even = measured[entry.key]
        (layer, head), score = max(scores.items(), key=lambda kv: kv[1])
        assert entry.claim.startswith(f"L{layer + 1} H{head + 1}: "), entry.claim  # counted from 1
        assert f" {score:.2f} of " in entry.claim
        assert entry.baseline == f"{even:.2f}"
        assert entry.heads[0].name == f"L{layer + 1} H{head + 1}"


def test_the_recognisable_heads_stand_far_above_an_even_spread(measured: dict) -> None:
    def best(behaviour: str) -> tuple[tuple[int, int], float, float]:
        scores, even = measured[behaviour]
        key = max(scores, key=scores.get)
        return key, scores[key], even

    previous, previous_score, even = best("previous")
    assert previous_score >= 0.9 and previous_score > 10 * even  # about 1/15 if it spread its weight
    nxt, next_score, even = best("next")
    assert next_score >= 0.5 > 5 * even and nxt != previous
    _, cls_score, even = best("cls")
    assert cls_score > 10 * even
    _, antecedent, even = best("antecedent")
    assert antecedent > 5 * even


def test_a_head_that_looks_back_scores_one_and_an_even_one_its_baseline() -> None:
    t = 6
    back = np.eye(t, k=-1)  # (T, T): every row on the token before it
    back[0, 0] = 1.0
    even = np.full((t, t), 1.0 / t)
    attention = np.stack([np.stack([back, even])])  # (1, 2, T, T): one layer, two heads
    tokens = ("[CLS]", "a", ",", "b", ".", "[SEP]")
    run = ModelRun(tokens=tokens, ids=np.arange(t), hidden_states=np.zeros((2, t, 4)), attention=attention,
                   embedding=np.zeros(4))
    m = measure("previous", [run], [None])
    assert m.scores[0].tolist() == pytest.approx([1.0, 1.0 / t]) and m.baseline == pytest.approx(1.0 / t)
    assert m.rows == t - 1
    punct = measure("punctuation", [run], [None])
    assert punct.scores[0, 1] == pytest.approx(2.0 / t) == punct.baseline  # "," and "." of six tokens
    assert measure("antecedent", [run, run], [(3, 1), None]).scores[0, 0] == pytest.approx(0.0)  # b → a: 0 here
    with pytest.raises(ValueError, match="no sentence"):
        measure("antecedent", [run], [None])
