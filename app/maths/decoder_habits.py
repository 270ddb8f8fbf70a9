"""What the decoder's heads do: every head of SmolLM2 (app.maths.llama) measured over fixed texts and over
repeated random tokens, and the heads that show a behaviour most; the decoder's side of app.maths.head_catalogue.

For a behaviour b, a run's attention A (N, h, T, T) is read at a list of (query i, key j) pairs P_b, and a
head's score is the mean weight there over every pair of every run:

    score_b(layer, head) = mean over (run, (i, j) ∈ P_b) of  A[layer, head, i, j]        ∈ [0, 1]

    previous    P = {(i, i − 1) : 1 ≤ i ≤ T − 1}                  on each text
    sink        P = {(i, 0) : 1 ≤ i ≤ T − 1}                      on each text
    induction   P = {(R + j, j + 1) : 0 ≤ j ≤ R − 2}              on s = [r₀ … r_{R−1}, r₀ … r_{R−1}]

The texts are read with no start token (the tokenizer adds no BOS), so the sink's key 0 is the text's own
first word, not a special token. Induction (Olsson et al., 2022, "In-context learning and induction heads"):
r₀ … r_{R−1} are R distinct token ids drawn at random from the ordinary vocabulary, read twice with no text
around them. The query at position R + j holds r_j again; its earlier copy sat at position j, and the token
that followed it there, r_{j+1}, sits at key j + 1: the key an induction head looks at to predict that
r_{j+1} comes next. j stops at R − 2 so that every target lies inside the first copy.

The baseline is the same mean for a head that spreads its weight evenly over the keys it may see (a causal
query i sees i + 1 keys): mean of 1 / (i + 1). Pure NumPy over app.maths.llama's forward pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.maths.decoder_files import DecoderFiles
from app.maths.head_catalogue import CatalogueEntry, HeadScore, Measurement, catalogue_entry
from app.maths.llama import KVCache, decoder_layer, extend, final_logits, run_decoder, tokenize
from app.maths.real_model import heads_in

BEHAVIOURS = ("previous", "sink", "induction")
# A head shows a behaviour when on average this share of its attention goes there: half of it for the token
# before or the first token, which every row has; the induction target is one key among 20 to 40, so a third
# is ten times an even spread.
THRESHOLDS = {"previous": 0.5, "sink": 0.5, "induction": 0.3}
TOP_HEADS = 3  # heads listed per behaviour
REPEAT_LENGTH = 20  # R: random tokens per copy, so a repeated sequence is 2R = 40 tokens
REPEAT_SEEDS = (0, 1, 2)  # one random sequence per seed
# Ids below this are SmolLM2's control tokens (0–16: <|endoftext|>, <|im_start|>, …) and its single bytes (17–251);
# from here on every id is a merged piece such as "Ġthe" (tests/maths checks it on the vocabulary).
FIRST_ORDINARY_ID = 252

Pairs = list[tuple[int, int]]  # [(query i, key j)]: where one run's attention is read


def previous_pairs(t: int) -> Pairs:
    """(i, i − 1) for every query 1 ≤ i ≤ T − 1: the token just before."""
    return [(i, i - 1) for i in range(1, t)]


def sink_pairs(t: int) -> Pairs:
    """(i, 0) for every query 1 ≤ i ≤ T − 1: the first token (row 0 can only look at itself, so it is left out)."""
    return [(i, 0) for i in range(1, t)]


def induction_pairs(r: int) -> Pairs:
    """(R + j, j + 1) for 0 ≤ j ≤ R − 2, on a sequence of R tokens read twice: from the j-th token's second
    copy to the token that followed its first copy."""
    return [(r + j, j + 1) for j in range(r - 1)]


def mean_weight(attention: np.ndarray, pairs: Pairs) -> np.ndarray:
    """mean over (i, j) ∈ P of A[:, :, i, j], every head at once: (N, h) from (N, h, T, T)."""
    queries, keys = zip(*pairs, strict=True)
    picked = attention[:, :, list(queries), list(keys)]  # (N, h, |P|)
    return picked.mean(axis=-1, dtype=np.float64)  # (N, h)


def even_weight(pairs: Pairs) -> float:
    """The mean weight at the pairs for a head that spreads query i's weight evenly over its i + 1 keys."""
    return float(np.mean([1.0 / (i + 1) for i, _ in pairs]))


def repeated_tokens(vocab: int, length: int, seed: int, first: int = FIRST_ORDINARY_ID) -> np.ndarray:
    """[r₀ … r_{R−1}, r₀ … r_{R−1}], (2R,): R distinct ids drawn from first … vocab − 1 with ``seed``, twice.
    Distinct, so that each token of the second copy has exactly one earlier copy and one induction target."""
    rng = np.random.default_rng(seed)
    r = rng.choice(np.arange(first, vocab), size=length, replace=False)  # (R,)
    return np.concatenate([r, r]).astype(np.int64)  # (2R,)


def repeated_attention(model: DecoderFiles, ids: np.ndarray) -> np.ndarray:
    """Every head's attention on token ids read as they are (no text, no tokenizer): (N, h, T, T)."""
    _, heads, _ = extend(model, np.asarray(ids, dtype=np.int64), KVCache())
    return np.stack([layer.weights for layer in heads])  # (N, h, T, T)


def measure(behaviour: str, attentions: Sequence[np.ndarray], pairs: Sequence[Pairs]) -> Measurement:
    """score_b(layer, head) over several runs: each run's weights at its pairs, pooled (a run with more pairs
    counts for more), and the even spread's baseline pooled the same way."""
    if len(attentions) != len(pairs) or not any(pairs):
        raise ValueError(f"no run has a pair to measure {behaviour!r} on")
    total, baseline, rows = None, 0.0, 0
    for attention, found in zip(attentions, pairs, strict=True):
        if not found:
            continue
        weight = mean_weight(attention, found) * len(found)  # (N, h): the sum over this run's pairs
        total = weight if total is None else total + weight
        baseline += even_weight(found) * len(found)
        rows += len(found)
    return Measurement(behaviour=behaviour, scores=total / rows, baseline=baseline / rows, rows=rows)


@dataclass(frozen=True)
class DecoderHabits:
    """Every head's score for each behaviour, and what it was measured on."""

    previous: Measurement  # scores (N, h)
    sink: Measurement  # scores (N, h)
    induction: Measurement  # scores (N, h)
    texts: tuple[str, ...]
    tokens: tuple[tuple[str, ...], ...]  # each text's tokens, as the model read them
    repeated: tuple[np.ndarray, ...]  # each random sequence read twice, (2R,)

    def measurement(self, behaviour: str) -> Measurement:
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {behaviour!r}: one of {', '.join(BEHAVIOURS)}")
        return getattr(self, behaviour)


def decoder_habits(model: DecoderFiles, texts: Sequence[str], length: int = REPEAT_LENGTH,
                   seeds: Sequence[int] = REPEAT_SEEDS) -> DecoderHabits:
    """Measure every head of the decoder: previous token and sink on ``texts``, induction on one sequence of
    ``length`` random tokens read twice per seed. One forward pass per text and per seed (about 0.1 s each)."""
    if length < 2:
        raise ValueError("a repeated sequence needs at least 2 tokens per copy")
    # 1) The texts: previous token and sink.
    runs = [run_decoder(model, text) for text in texts]
    text_attention = [run.attention for run in runs]  # each (N, h, T, T)
    lengths = [len(run.tokens) for run in runs]
    # 2) The random tokens read twice: induction.
    repeated = tuple(repeated_tokens(model.config.vocab, length, seed) for seed in seeds)
    repeat_attention = [repeated_attention(model, ids) for ids in repeated]  # each (N, h, 2R, 2R)
    return DecoderHabits(
        previous=measure("previous", text_attention, [previous_pairs(t) for t in lengths]),
        sink=measure("sink", text_attention, [sink_pairs(t) for t in lengths]),
        induction=measure("induction", repeat_attention, [induction_pairs(length)] * len(repeated)),
        texts=tuple(texts), tokens=tuple(run.tokens for run in runs), repeated=repeated)


def top_heads(habits: DecoderHabits, behaviour: str, k: int = TOP_HEADS) -> tuple[HeadScore, ...]:
    """The ``k`` heads with the highest scores for a behaviour, best first (ties: the lower layer, head)."""
    return catalogue_entry(habits.measurement(behaviour), THRESHOLDS[behaviour], k).heads


def decoder_catalogue(habits: DecoderHabits, top: int = TOP_HEADS) -> tuple[CatalogueEntry, ...]:
    """Every behaviour's entry, in BEHAVIOURS' order, as app.maths.head_catalogue makes the encoder's."""
    return tuple(catalogue_entry(habits.measurement(b), THRESHOLDS[b], top) for b in BEHAVIOURS)


# What a head does, measured by its effect ---------------------------------------------------------------------
#
# A head's attention score says where it looks, not what it does for the answer. Its effect is measured the way
# the page's "switch off" does it: the head's attention weights set to 0, the same texts read again, and the
# change in the log-probability the model gives the right next token, pooled over every position it is measured
# at (ΔF < 0: the model does worse without the head; ΔF > 0: better — other heads can take over, or the head
# worked against the answer; McGrath et al., 2023, "The Hydra Effect"):
#
#     ΔF(S) = mean over (text, position i) of  log p_S(x_{i+1} | x_≤i) − log p(x_{i+1} | x_≤i)      S: heads off
#
#     previous, sink   every position i ≤ T − 2 of each fixed text                  (the text's own next token)
#     induction        the second copy's positions R + j, 0 ≤ j ≤ R − 2            (the next token r_{j+1} of a
#                      repeated random sequence, which only copying the first copy can predict)
#
# Layers before the first head switched off are unchanged, so each run starts from the intact run's input to
# that layer.


@dataclass(frozen=True)
class HeadEffect:
    layer: int  # counted from 0
    head: int  # counted from 0
    change: float  # ΔF({head}): the mean change in log p(right next token), switched off alone


@dataclass(frozen=True)
class HabitEffects:
    """What switching off a behaviour's listed heads does to the right next token, on the behaviour's texts."""

    behaviour: str
    heads: tuple[HeadEffect, ...]  # in the catalogue's order (strongest attention score first)
    together: float  # ΔF of every listed head switched off at once (the page's "switch off" shortcut)
    log_p: float  # mean log p(right next token) with every head on
    positions: int  # (text, position) pairs pooled


def _right_tokens(ids: np.ndarray, behaviour: str, length: int) -> tuple[np.ndarray, np.ndarray]:
    """The positions a behaviour's effect is read at, and the right next token at each: (P,), (P,)."""
    if behaviour == "induction":
        positions = np.arange(length, 2 * length - 1)  # R + j, 0 ≤ j ≤ R − 2
    else:
        positions = np.arange(len(ids) - 1)
    return positions, ids[positions + 1]


def _log_p(model: DecoderFiles, hidden: np.ndarray, positions: np.ndarray, right: np.ndarray) -> np.ndarray:
    """log p(right token) at each position, from the last layer's output (T, d_model): (P,), float64."""
    logits = final_logits(model, hidden[positions])  # (P, vocab), float32: no float64 copy of P × 49,152
    top = logits.max(axis=-1, keepdims=True)  # (P, 1)
    log_z = top[:, 0].astype(np.float64) + np.log(np.exp(logits - top).sum(axis=-1, dtype=np.float64))  # (P,)
    return logits[np.arange(len(right)), right].astype(np.float64) - log_z


def _log_p_off(model: DecoderFiles, hidden_in: np.ndarray, off: frozenset[tuple[int, int]],
               positions: np.ndarray, right: np.ndarray) -> np.ndarray:
    """log p(right token) with the heads ``off`` switched off, from the intact run's layer inputs (N + 1, T, d)."""
    first = min(layer for layer, _ in off)
    x = hidden_in[first]  # (T, d_model): nothing before the first head switched off changes
    for layer in range(first, model.config.layers):
        x, _ = decoder_layer(model, layer, x, KVCache(), heads_in(off, layer))
    return _log_p(model, x, positions, right)


def habit_effects(model: DecoderFiles, habits: DecoderHabits,
                  entries: Sequence[CatalogueEntry]) -> tuple[HabitEffects, ...]:
    """ΔF of each entry's listed heads alone and all together, on the texts its behaviour was measured on."""
    text_ids = [tokenize(model, text).ids for text in habits.texts]
    length = len(habits.repeated[0]) // 2 if habits.repeated else 0
    out = []
    for entry in entries:
        seqs = habits.repeated if entry.behaviour == "induction" else text_ids
        listed = [(h.layer, h.head) for h in entry.heads]
        sets = [frozenset({head}) for head in listed] + [frozenset(listed)]  # each alone, then all together
        base, changes = [], [[] for _ in sets]
        for ids in seqs:
            hidden, _, _ = extend(model, np.asarray(ids, dtype=np.int64), KVCache())  # (N + 1, T, d_model)
            positions, right = _right_tokens(np.asarray(ids), entry.behaviour, length)
            on = _log_p(model, hidden[-1], positions, right)  # (P,)
            base.append(on)
            for k, off in enumerate(sets):
                changes[k].append(_log_p_off(model, hidden, off, positions, right) - on)
        pooled = [float(np.concatenate(c).mean()) for c in changes]
        out.append(HabitEffects(
            behaviour=entry.behaviour,
            heads=tuple(HeadEffect(h.layer, h.head, pooled[k]) for k, h in enumerate(entry.heads)),
            together=pooled[-1], log_p=float(np.concatenate(base).mean()),
            positions=int(sum(len(b) for b in base))))
    return tuple(out)
