"""The seed articles' numbers the presets are built from: their sentences, their embeddings and the weights
they design, and the sentences the training goals start from, with embeddings drawn from a seed."""

from __future__ import annotations

import math

import numpy as np

from app.i18n import N_


def identity(n: int) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(float(i == j) for j in range(n)) for i in range(n))


# Seed 000's demo size: T = 5 tokens, d = 3.
DEFAULT_TOKENS = ("the", "cat", "sat", "on", "mat")
DEFAULT_X = ((0.2, 0.1, -0.3), (0.9, -0.4, 0.5), (-0.2, 0.8, 0.1), (0.1, 0.3, -0.7), (0.6, -0.1, 0.8))

# Seed 001: "pool beats badminton", attention(A, A, A) with identity projections and no scaling.
POOL_A = ((0.5, 0.1, 0.1, 0.2), (0.1, 0.5, 0.2, 0.1), (0.5, 0.1, 0.2, 0.1))

# Seed 003's three-token worked example: X = I₃ so that Q = W_Q, K = W_K and V = W_V are the
# article's matrices; d_k = 2. W_O copies the head's two columns into the first two of d_model = 3.
S003_Q = ((1.0, 0.0), (0.0, 1.0), (1.0, 1.0))
S003_K = ((1.0, 1.0), (0.0, 1.0), (1.0, 0.0))
S003_V = ((1.0, 0.0), (0.0, 1.0), (0.0, 0.0))

# Sixteen tokens for the sparse patterns: with T = 16 a stride of √T = 4 is visibly sparse.
SPARSE_TOKENS = ("the", "quick", "brown", "fox", "jumps", "over", "the", "lazy",
                  "dog", "while", "the", "old", "cat", "sleeps", "on", "mats")
SPARSE_X = tuple(tuple(round(math.sin(1.7 * i + 0.9 * j), 2) for j in range(4)) for i in range(16))

# Seed 000's homonym "bank", with its three heads: who, when and where. Every dimension has a name
# and every weight is 0, 1 or 4, so each head's W_Q and W_K read as "who asks for what":
#   who   (d_k columns: person, action): verbs and places ask for a person; a person asks for an action.
#   when  (columns: action, time):      people and places ask for a verb's action and time (is lying, needed).
#   where (columns: outdoors, money):   a place asks "outdoors or money?"; keys offer those two.
# W_V = W_K: each head carries the dimensions it matched on, and W_O writes them back where they came
# from, so bank's output takes on outdoors by the river and money next to money.
BANK_DIMS = (N_("person"), N_("action"), N_("time"), N_("outdoors"), N_("money"), N_("place"))
BANK_HEADS = (N_("who"), N_("when"), N_("where"))
BANK = (0.0, 0.0, 0.0, 0.3, 0.3, 1.0)  # a place, halfway between outdoors and money
THE = (0.0, 0.0, 0.0, 0.0, 0.0, 0.1)
BANK_W_K = (
    # rows: person, action, time, outdoors, money, place → (who: person, action)
    ((1.0, 0.0), (0.0, 1.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0)),
    # → (when: action, time)
    ((0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0)),
    # → (where: outdoors, money)
    ((0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (0.0, 0.0)),
)
BANK_WEIGHTS = {
    "w_q": (  # rows: person, action, time, outdoors, money, place
        # who: a person asks for an action; an action or a place asks for a person.
        ((0.0, 4.0), (4.0, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (4.0, 0.0)),
        # when: a person or a place asks for an action and a time.
        ((4.0, 4.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (4.0, 4.0)),
        # where: a place asks for outdoors and for money.
        ((0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (4.0, 4.0)),
    ),
    "w_k": BANK_W_K,
    "w_v": BANK_W_K,
    # concat = (who: person, action | when: action, time | where: outdoors, money) → d_model
    "w_o": (
        (1.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        (0.0, 1.0, 0.0, 0.0, 0.0, 0.0),
        (0.0, 1.0, 0.0, 0.0, 0.0, 0.0),
        (0.0, 0.0, 1.0, 0.0, 0.0, 0.0),
        (0.0, 0.0, 0.0, 1.0, 0.0, 0.0),
        (0.0, 0.0, 0.0, 0.0, 1.0, 0.0),
    ),
}

# Seed 003's alignment table: translating "The cat sat on the mat" into French, each French word
# attends most to its English counterpart. One dimension per meaning, and an early/late dimension
# that tells the two articles apart; queries are 4× their embedding, keys and values the embedding.
ALIGN_DIMS = (N_("article"), N_("cat"), N_("sit"), N_("on"), N_("mat"), N_("early/late"))
EN = ("The", "cat", "sat", "on", "the", "mat")
EN_X = (
    (1.0, 0.0, 0.0, 0.0, 0.0, 0.5),
    (0.0, 1.0, 0.0, 0.0, 0.0, 0.5),
    (0.0, 0.0, 1.0, 0.0, 0.0, 0.5),
    (0.0, 0.0, 0.0, 1.0, 0.0, -0.5),
    (1.0, 0.0, 0.0, 0.0, 0.0, -0.5),
    (0.0, 0.0, 0.0, 0.0, 1.0, -0.5),
)
FR = ("Le", "chat", "assis", "sur", "le", "tapis")
# Seed 003's French sentence as the source for the presets on "the cat sat on mat": ticking
# cross-attention there gives S = 6 source tokens against T = 5 queries.
DEFAULT_SOURCE = FR
ALIGN_WEIGHTS = {
    "w_q": (tuple(tuple(4.0 * v for v in row) for row in identity(6)),),
    "w_k": (identity(6),),
    "w_v": (identity(6),),
    "w_o": identity(6),
}

# Seed 003: without positions, "dog bites man" and "man bites dog" are the same set of tokens.
DOG = (0.9, 0.1, -0.3, 0.4)
BITES = (-0.2, 0.8, 0.5, -0.1)
MAN = (0.3, -0.4, 0.7, 0.6)


# --- training goals: the Learn panel trains them (app.lesson.goals, app.state.learning) ----------------------------
# Each starts from weights drawn from its seed (no designed weights): the point is to watch them learned.

PREVIOUS_TOKEN_SEED = 5
PREVIOUS_TOKENS = ("the", "cat", "sat", "on", "the", "mat")


def previous_token_x() -> tuple[tuple[float, ...], ...]:
    """Seed 003's sentence, d_model = 8; the repeated "the" has one embedding, drawn like the weights."""
    words = sorted(set(PREVIOUS_TOKENS), key=PREVIOUS_TOKENS.index)
    rng = np.random.default_rng(PREVIOUS_TOKEN_SEED)
    embedding = np.round(rng.normal(0.0, 0.5, (len(words), 8)), 2)  # (words, d_model)
    return tuple(tuple(embedding[words.index(w)].tolist()) for w in PREVIOUS_TOKENS)


# A draw in which every row of the unscaled softmax starts saturated (largest weight >= 0.947), with scores of
# standard deviation 7.9, as seed 003 says (about 8). In most draws of six tokens some rows start softer, and a row
# that is not saturated passes more gradient than the scaled run's (which carries the factor 1/8): the comparison
# then mixes the two effects (docs/using.md).
WHY_SCALE_SEED = 4349
WHY_SCALE_TOKENS = ("the", "cat", "sat", "on", "the", "mat")
WHY_SCALE_D_MODEL = 16  # what matters is d_k: small embeddings keep the page light
WHY_SCALE_D_K = 64  # one head with queries and keys of 64: seed 003's "with d_k = 64, the standard deviation is 8"
WHY_SCALE_D_V = 16


def why_scale_x() -> tuple[tuple[float, ...], ...]:
    """X ~ N(0, 1), rounded to two decimals (a page input shows it exactly): (T, d_model)."""
    x = np.random.default_rng(WHY_SCALE_SEED).normal(0.0, 1.0, (len(WHY_SCALE_TOKENS), WHY_SCALE_D_MODEL))
    return tuple(tuple(row) for row in np.round(x, 2).tolist())
