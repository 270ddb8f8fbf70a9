"""Two sentences through the pretrained model: which heads move a token's attention from one key to
another, and how switching heads off changes the sentences' cosine similarity.

For one query token i and one head, with a = its attention row in the first sentence and b in the
second (the same positions, so both sentences have T WordPiece tokens):

    moved  = ½ · Σ_j |a_j − b_j|          the share of i's attention that changed keys (0 … 1)
    lost   = argmin_j (b_j − a_j)          the key that lost the most weight
    gained = argmax_j (b_j − a_j)          the key that gained the most
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.maths.bert import ModelRun, cosine, run_model
from app.maths.model_files import ModelFiles
from app.maths.real_model import Tokenized


@dataclass(frozen=True)
class HeadShift:
    """One head's change of a query's attention row between two sentences (layer, head counted from 0)."""

    layer: int
    head: int
    moved: float  # ½·Σ|a − b|
    lost: int  # key position
    gained: int  # key position
    before: np.ndarray  # (T,) the row in the first sentence
    after: np.ndarray  # (T,) the row in the second


def attention_shifts(first: np.ndarray, second: np.ndarray, query: int) -> list[HeadShift]:
    """Every head's shift of ``query``'s row, the largest first; the two (N, h, T, T) arrays must have one T."""
    if first.shape != second.shape:
        raise ValueError(f"attention of shapes {first.shape} and {second.shape} cannot be aligned")
    a = first[:, :, query, :].astype(np.float64)  # (N, h, T)
    b = second[:, :, query, :].astype(np.float64)  # (N, h, T)
    change = b - a  # (N, h, T)
    moved = 0.5 * np.abs(change).sum(axis=-1)  # (N, h)
    lost = change.argmin(axis=-1)  # (N, h)
    gained = change.argmax(axis=-1)  # (N, h)
    shifts = [HeadShift(la, h, float(moved[la, h]), int(lost[la, h]), int(gained[la, h]), a[la, h], b[la, h])
              for la in range(a.shape[0]) for h in range(a.shape[1])]
    return sorted(shifts, key=lambda s: (-s.moved, s.layer, s.head))


def moved_grid(first: np.ndarray, second: np.ndarray, query: int) -> np.ndarray:
    """(N, h): ½·Σ_j |a_j − b_j| for every head, in place."""
    grid = np.zeros(first.shape[:2])
    for s in attention_shifts(first, second, query):
        grid[s.layer, s.head] = s.moved
    return grid


def first_position(tokens: tuple[str, ...], word: str) -> int | None:
    """The first position holding ``word`` (a WordPiece token), or None."""
    return tokens.index(word) if word in tokens else None


@dataclass(frozen=True)
class SwitchedOff:
    """The two sentences' embeddings' cosine similarity with every head, and with some heads off."""

    heads_off: frozenset[tuple[int, int]]
    before: float
    after: float


def switch_off(model: ModelFiles, first: Tokenized, second: Tokenized,
               heads_off: frozenset[tuple[int, int]], intact: tuple[ModelRun, ModelRun] | None = None) -> SwitchedOff:
    """cos(e₁, e₂) of the sentence embeddings, intact and with ``heads_off`` zeroed in both sentences
    (``intact``: the two sentences' runs with every head, when already computed)."""
    one, two = intact or (run_model(model, first), run_model(model, second))
    before = cosine(one.embedding, two.embedding)
    if not heads_off:
        return SwitchedOff(heads_off, before, before)
    after = cosine(run_model(model, first, heads_off).embedding, run_model(model, second, heads_off).embedding)
    return SwitchedOff(heads_off, before, after)
