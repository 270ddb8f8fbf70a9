"""What heads do: every head of a real model measured over a fixed set of sentences, and the heads
that show a behaviour most (Clark et al., 2019, "What does BERT look at?", measured the same way).

For a behaviour b, each query row i of a sentence has a target set G_b(i) of keys, and a head's score is
the weight it puts there, averaged over every row of every sentence that has one:

    score_b(layer, head) = mean over rows (s, i) of  Σ_{j ∈ G_b(i)} A_s[layer, head, i, j]

    previous      G(i) = {i − 1}               rows i ≥ 1
    next          G(i) = {i + 1}               rows i ≤ T − 2
    cls           G(i) = {0}  ([CLS])          every row
    sep           G(i) = {T − 1}  ([SEP])      every row
    punctuation   G(i) = the punctuation tokens  every row of a sentence that has one
    antecedent    G(p) = {a}                   the pronoun's row only, a its noun

The baseline is the same mean for a head that spreads its weight evenly (|G(i)| / T): a score far
above it is the head's doing, not the sentence length's. A head *shows* a behaviour when its score
reaches the behaviour's threshold. Pure NumPy over app.maths.bert's runs.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from app.maths.bert import SPECIAL_TOKENS, ModelRun

# A head shows a behaviour when on average this share of its attention goes there. Half of it for a
# position every row has; a pronoun has one noun among T ≈ 15 tokens (uniform: 0.07), so a third is
# five times an even spread.
THRESHOLDS = {"previous": 0.5, "next": 0.5, "cls": 0.5, "sep": 0.5, "punctuation": 0.5, "antecedent": 0.3}
TOP_HEADS = 3  # heads listed per behaviour


def is_punctuation(token: str) -> bool:
    """A WordPiece token made only of punctuation characters (Unicode category P*): , . ' ; ? …"""
    return token not in SPECIAL_TOKENS and bool(token) and all(
        unicodedata.category(c).startswith("P") for c in token)


Rows = list[tuple[int, list[int]]]  # [(i, G(i))]: a query row and its target keys


def _punctuation_rows(tokens: Sequence[str]) -> Rows:
    marks = [j for j, tok in enumerate(tokens) if is_punctuation(tok)]
    return [(i, marks) for i in range(len(tokens))] if marks else []


# Each behaviour's rows and targets in one sentence (its tokens; its (pronoun, noun) positions or None).
_ROWS: dict[str, Callable[[Sequence[str], tuple[int, int] | None], Rows]] = {
    "previous": lambda tokens, _: [(i, [i - 1]) for i in range(1, len(tokens))],
    "next": lambda tokens, _: [(i, [i + 1]) for i in range(len(tokens) - 1)],
    "cls": lambda tokens, _: [(i, [0]) for i in range(len(tokens))],
    "sep": lambda tokens, _: [(i, [len(tokens) - 1]) for i in range(len(tokens))],
    "punctuation": lambda tokens, _: _punctuation_rows(tokens),
    "antecedent": lambda _, pronoun: [(pronoun[0], [pronoun[1]])] if pronoun is not None else [],
}
BEHAVIOURS = tuple(_ROWS)


def targets(behaviour: str, tokens: Sequence[str], pronoun: tuple[int, int] | None = None) -> Rows:
    """The rows a behaviour is measured on in one sentence, each with its target keys: [(i, G(i))]."""
    return _ROWS[behaviour](tokens, pronoun)


@dataclass(frozen=True)
class Measurement:
    behaviour: str
    scores: np.ndarray  # (N, h): each head's mean weight on the behaviour's targets
    baseline: float  # the same mean for an even spread of weight
    rows: int  # (sentence, query) rows averaged


def measure(behaviour: str, runs: Sequence[ModelRun],
            pronouns: Sequence[tuple[int, int] | None]) -> Measurement:
    """score_b(layer, head) for every head at once, over every run."""
    total, baseline, rows = None, 0.0, 0
    for run, pronoun in zip(runs, pronouns, strict=True):
        found = targets(behaviour, run.tokens, pronoun)
        if not found:
            continue
        t = len(run.tokens)
        mask = np.zeros((len(found), t), dtype=run.attention.dtype)  # (R, T): 1 on each row's targets
        for r, (_, keys) in enumerate(found):
            mask[r, keys] = 1.0
        picked = run.attention[:, :, [i for i, _ in found], :]  # (N, h, R, T)
        weight = (picked * mask).sum(axis=(-1, -2), dtype=np.float64)  # (N, h)
        total = weight if total is None else total + weight
        baseline += float(mask.sum()) / t
        rows += len(found)
    if total is None:
        raise ValueError(f"no sentence has a row to measure {behaviour!r} on")
    return Measurement(behaviour=behaviour, scores=total / rows, baseline=baseline / rows, rows=rows)


@dataclass(frozen=True)
class HeadScore:
    layer: int  # counted from 0
    head: int  # counted from 0
    score: float


@dataclass(frozen=True)
class CatalogueEntry:
    """One behaviour: the heads that show it most, best first, and how many reach the threshold."""

    behaviour: str
    threshold: float
    baseline: float
    rows: int
    heads: tuple[HeadScore, ...]  # the TOP_HEADS highest scores, best first
    showing: int  # heads whose score reaches the threshold

    @property
    def best(self) -> HeadScore:
        return self.heads[0]


def catalogue_entry(m: Measurement, threshold: float, top: int = TOP_HEADS) -> CatalogueEntry:
    flat = m.scores.ravel()  # (N·h,)
    order = np.argsort(-flat, kind="stable")[:top]  # the highest first; ties: the lower layer, head
    heads = tuple(HeadScore(int(k // m.scores.shape[1]), int(k % m.scores.shape[1]), float(flat[k])) for k in order)
    return CatalogueEntry(behaviour=m.behaviour, threshold=threshold, baseline=m.baseline, rows=m.rows, heads=heads,
                          showing=int((m.scores >= threshold).sum()))


def head_catalogue(runs: Sequence[ModelRun],
                   pronouns: Sequence[tuple[int, int] | None]) -> tuple[CatalogueEntry, ...]:
    """Every behaviour's entry, in BEHAVIOURS' order, measured over ``runs``."""
    return tuple(catalogue_entry(measure(b, runs, pronouns), THRESHOLDS[b]) for b in BEHAVIOURS)
