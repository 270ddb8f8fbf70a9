"""Choosing the next token from a model's scores, and writing text token by token: for any model that reads one
more token at a time (a :class:`Continuation`), not one architecture.

    p = softmax(logits / τ)                     τ < 1 sharpens, τ > 1 flattens; τ = 0 is greedy (the argmax)
    top-k: only the k most likely tokens;  top-p: only the fewest most likely whose probabilities reach p

as transformers' warpers make it, in their order. The language model (app.maths.llama.DecoderContinuation, over
its KV cache) is the one real model that samples; the translator writes greedily over its shortlist
(app.maths.marian), its step's candidates read with :func:`top_candidates`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from app.maths.attention import softmax_rows


def temperature_softmax(logits: np.ndarray, temperature: float) -> np.ndarray:
    """p = softmax(logits / τ), in float64: τ < 1 sharpens, τ > 1 flattens. The largest logit is taken away
    before dividing, so that a τ as small as a double allows (5e-324) gives the argmax, never inf − inf."""
    z = np.asarray(logits, dtype=np.float64)
    with np.errstate(over="ignore"):  # (z − max)/τ is −inf for a tiny τ: exp gives 0, as it should
        return softmax_rows((z - z.max(axis=-1, keepdims=True)) / temperature)


def top_candidates(probabilities: np.ndarray, top: int) -> np.ndarray:
    """The ``top`` token ids by probability, the most likely first (ties: the lower id first)."""
    top = min(top, probabilities.shape[-1])
    part = np.argpartition(-probabilities, top - 1)[:top]  # (top,) unordered
    return part[np.lexsort((part, -probabilities[part]))]


def sampling_distribution(logits: np.ndarray, temperature: float, top_k: int | None = None,
                          top_p: float | None = None, min_p: float | None = None) -> np.ndarray:
    """What a sampler draws from, as transformers' warpers make it, in their order: softmax(logits / τ), then
    only the top_k most likely tokens, then only the fewest most likely whose probabilities, renormalised over
    those top_k, reach top_p, then only those at least min_p times as likely as the most likely (min-p, Nguyen
    et al., 2024); renormalised. The most likely token always stays."""
    p = temperature_softmax(logits, temperature)  # (vocab,)
    order = np.argsort(-p, kind="stable")  # (vocab,) the most likely first
    keep = np.zeros(p.shape, dtype=bool)
    n = len(p) if top_k is None else max(1, min(top_k, len(p)))
    if top_p is not None:
        top = p[order[:n]] / p[order[:n]].sum()  # (n,) renormalised over the top_k, as transformers' top-p sees them
        before = np.cumsum(top) - top  # the probability of the tokens ahead of each
        n = max(1, int(np.count_nonzero(before < top_p)))
    keep[order[:n]] = True
    if min_p is not None:
        keep &= p >= min_p * p[order[0]]  # a ratio of two probabilities: the same before or after renormalising
    kept = np.where(keep, p, 0.0)
    return kept / kept.sum()


class Continuation(Protocol):
    """A model part-way through a text: the next token's scores, and one more token read."""

    eos_id: int  # the token after which the model has finished

    def logits(self) -> np.ndarray:
        """(vocab,) the next token's scores after every token read so far."""
        ...

    def read(self, token: int) -> None:
        """One more token, read after the others (one token's forward pass)."""
        ...


@dataclass(frozen=True)
class GeneratedStep:
    id: int
    probability: float  # under softmax(logits / τ) (τ = 1 when greedy)
    logits: np.ndarray = field(repr=False)  # (vocab,) the scores it was chosen from


def generate(model: Continuation, max_new_tokens: int, temperature: float = 0.0, top_k: int | None = None,
             top_p: float | None = None, seed: int = 0, min_p: float | None = None) -> list[GeneratedStep]:
    """Write up to ``max_new_tokens`` tokens after what ``model`` has read. τ = 0 is greedy (the most likely
    token, as transformers' generate(do_sample=False)); otherwise each token is drawn from
    :func:`sampling_distribution` with NumPy's generator seeded by ``seed``. Stops after the end token."""
    rng = np.random.default_rng(seed)
    steps: list[GeneratedStep] = []
    for _ in range(max_new_tokens):
        logits = model.logits()  # (vocab,)
        if temperature == 0:
            token = int(np.argmax(logits))
            probability = float(temperature_softmax(logits, 1.0)[token])
        else:
            p = sampling_distribution(logits, temperature, top_k, top_p, min_p)
            token = int(rng.choice(len(p), p=p))
            probability = float(temperature_softmax(logits, temperature)[token])
        steps.append(GeneratedStep(id=token, probability=probability, logits=logits))
        if token == model.eos_id or len(steps) == max_new_tokens:
            break
        model.read(token)
    return steps


DRAWS = 20  # the page's "Draw 20 times"


def draw(p: np.ndarray, n: int = DRAWS, seed: int = 0) -> np.ndarray:
    """n tokens drawn independently from the distribution p (vocab,) with NumPy's generator seeded by ``seed``:
    (n,) ids, the same for the same seed. The first is the token :func:`generate` writes first with that seed."""
    return np.random.default_rng(seed).choice(len(p), size=n, p=p)
