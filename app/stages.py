"""The numbered stages the page steps through, with their formulas and explanations.

The words are the seed articles' own: seed 000 (query: what am I looking for? key: what do I
offer? value: what do I carry?), seed 002 and seed 003. The numbers here match the numbered steps
in app.pipeline.run_attention.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Stage:
    key: str
    number: int
    short: str  # the step button's label
    title: str
    formula: str
    explanation: str
    per_head: bool  # shown for the selected head


STAGES: tuple[Stage, ...] = (
    Stage(
        "x", 0, "X", "Input embeddings X",
        "X ∈ ℝ^(T×d_model)",
        "X is the input: one row per token, with its embedding vector. On their own, embeddings are "
        "fixed: the same word gets the same row whatever surrounds it.",
        False,
    ),
    Stage(
        "qkv", 1, "Q, K, V", "Queries, keys and values",
        "Q = X·W_Q,  K = X·W_K,  V = X·W_V",
        "Three separate linear projections of X. Q: what am I looking for? K: what do I offer to "
        "match against? V: what content do I actually carry?",
        True,
    ),
    Stage(
        "scores", 2, "Scores", "Scores Q·Kᵀ",
        "Scores_ij = Σ_k Q_ik · K_jk",
        "Every token's query is compared with every token's key at once: entry (i, j) measures how "
        "relevant token j is to token i. This is what makes attention parallel, not sequential.",
        True,
    ),
    Stage(
        "scaled", 3, "Scaled", "Scaled scores ÷ √d_k",
        "Scaled = Q·Kᵀ / √d_k",
        "With q and k entries of variance 1, a dot product has variance d_k. Dividing by √d_k brings "
        "it back to 1, so softmax does not saturate into near-zero gradients.",
        True,
    ),
    Stage(
        "mask", 4, "Mask", "Mask: hide keys",
        "Masked_ij = −∞ where key j is hidden from query i, else Scaled_ij",
        "A mask hides some keys from some queries before the softmax: a causal mask hides later "
        "tokens (a decoder must not peek at the future), padding hides filler tokens. exp(−∞) = 0, "
        "so a hidden key gets a weight of exactly 0.",
        True,
    ),
    Stage(
        "softmax", 5, "Softmax", "Softmax: attention weights A",
        "A_ij = exp(Masked_ij) / Σ_j' exp(Masked_ij')",
        "Softmax is applied row by row: each row becomes a probability distribution over the tokens, "
        "all weights positive and summing to 1. These are the attention weights.",
        True,
    ),
    Stage(
        "output", 6, "Output", "Output A·V",
        "Output_i = Σ_j A_ij · V_j",
        "Each token's output is a weighted average of all value vectors, weighted by how much it "
        "attends to each position: its embedding, now enriched with context.",
        True,
    ),
    Stage(
        "multihead", 7, "Heads · W_O", "Concatenate heads, project with W_O",
        "MultiHead(X) = Concat(head_1, …, head_h)·W_O",
        "Each head finds its own pattern of relevance in a smaller subspace. Their outputs are "
        "concatenated in order and projected back to d_model by W_O.",
        False,
    ),
)
STAGE_KEYS = tuple(s.key for s in STAGES)
BY_KEY = {s.key: s for s in STAGES}


def stage_or_first(key: str) -> Stage:
    return BY_KEY.get(key, STAGES[0])


def neighbours(key: str) -> tuple[Stage | None, Stage | None]:
    i = STAGE_KEYS.index(stage_or_first(key).key)
    prev = STAGES[i - 1] if i > 0 else None
    nxt = STAGES[i + 1] if i + 1 < len(STAGES) else None
    return prev, nxt
