"""Starting scenarios, each taken from one of the lesson's seed articles.

Where a seed gives numbers, the preset holds exactly those numbers, and tests/lesson/test_presets.py checks
that the pipeline reproduces the seed's results from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from app.i18n import N_
from app.lesson.articles import cite
from app.lesson.seed_numbers import (
    ALIGN_DIMS,
    ALIGN_WEIGHTS,
    BANK,
    BANK_DIMS,
    BANK_HEADS,
    BANK_WEIGHTS,
    BITES,
    DEFAULT_SOURCE,
    DEFAULT_TOKENS,
    DEFAULT_X,
    DOG,
    EN,
    EN_X,
    FR,
    MAN,
    POOL_A,
    PREVIOUS_TOKEN_SEED,
    PREVIOUS_TOKENS,
    S003_K,
    S003_Q,
    S003_V,
    SPARSE_TOKENS,
    SPARSE_X,
    THE,
    WHY_SCALE_D_K,
    WHY_SCALE_D_V,
    WHY_SCALE_SEED,
    WHY_SCALE_TOKENS,
    identity,
    previous_token_x,
    why_scale_x,
)


@dataclass(frozen=True)
class Preset:
    key: str
    title: str
    source: str  # which seed it comes from
    summary: str  # one or two sentences shown above the stages
    tokens: tuple[str, ...]
    x: tuple[tuple[float, ...], ...]  # (T, d_model)
    num_heads: int = 1
    d_k: int | None = None
    d_v: int | None = None
    scale: bool = True
    seed: int = 0
    decimals: int = 3
    dim_names: tuple[str, ...] = ()  # column headers for X, when the dimensions mean something
    head_names: tuple[str, ...] = ()  # one per head, when each head has a designed job ("who", …)
    weights: dict[str, tuple] = field(default_factory=dict)  # given projections; the rest are seeded
    mask: str = "none"
    positional_encoding: str = "none"
    context_tokens: tuple[str, ...] = ()  # a source sentence: cross-attention
    context_x: tuple[tuple[float, ...], ...] = ()
    # The source sentence ticking cross-attention starts from (its embedding C drawn from the seed),
    # for a preset without context_tokens; none: "src 1" … "src T".
    source_tokens: tuple[str, ...] = ()
    stage: str = "x"  # the stage the preset opens on
    window: int | None = None  # local / strided masks: the window or stride
    score: str = "dot"
    attention: str = "softmax"
    blocks: int = 0  # transformer blocks around attention
    d_ff: int = 0  # 0: 4·d_model
    focus: str = ""  # a token whose attention lines are drawn first (article 1's figure shows bank's)
    goal: str = ""  # a training goal (app.lesson.goals.GOALS, or "why-scale"): the page opens its Learn panel

    @property
    def d_model(self) -> int:
        return len(self.x[0])

    def weight_arrays(self) -> dict[str, np.ndarray]:
        return {name: np.array(value, dtype=np.float64) for name, value in self.weights.items()}


# Both bank sentences: the same three heads (who, when, where) and weights, seed 000's attention lines.
_BANK_SETUP = dict(num_heads=3, d_k=2, dim_names=BANK_DIMS, head_names=BANK_HEADS, weights=BANK_WEIGHTS,
                   stage="softmax", focus="bank")

PRESETS: dict[str, Preset] = {
    p.key: p
    for p in (
        Preset(
            key="default",
            title=N_("Five tokens, d = 3"),
            source=cite(1, what=N_("the demo size, $T = 5$ tokens and $d = 3$ dimensions")),
            summary=N_(
                "Five tokens with three-dimensional embeddings and random projections from seed 0. "
                "Edit any number and watch every later stage follow."
            ),
            tokens=DEFAULT_TOKENS,
            x=DEFAULT_X,
            source_tokens=DEFAULT_SOURCE,
        ),
        Preset(
            key="pool",
            title=N_("pool beats badminton"),
            source=cite(2, what=N_("self-attention as attention(A, A, A)")),
            summary=N_(
                r"No learned weights yet: $W_Q = W_K = W_V = W_O = I$ and no scaling, so the scores are "
                r"$A A^{\top}$. pool is more similar to badminton (0.30) than to beats (0.14), so badminton "
                "adds more to pool's output."
            ),
            tokens=("pool", "beats", "badminton"),
            x=POOL_A,
            scale=False,
            decimals=2,
            dim_names=(N_("sports"), N_("dim 2"), N_("dim 3"), N_("dim 4")),
            weights={
                "w_q": (identity(4),),
                "w_k": (identity(4),),
                "w_v": (identity(4),),
                "w_o": identity(4),
            },
        ),
        Preset(
            key="three-token",
            title=N_("Three-token worked example"),
            source=cite(4, what=N_("worked example, $d_k = 2$")),
            summary=N_(
                "$X$ is the identity, so $Q$, $K$ and $V$ are exactly the article's matrices. Token 3's query "
                "[1, 1] matches key 1 [1, 1] best, so it puts the most weight (0.503) on key 1."
            ),
            tokens=("token 1", "token 2", "token 3"),
            x=identity(3),
            d_k=2,
            weights={
                "w_q": (S003_Q,),
                "w_k": (S003_K,),
                "w_v": (S003_V,),
                "w_o": ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0)),
            },
        ),
        Preset(
            key="bank-river",
            title=N_("bank ①: by the river"),
            source=cite(1, what=N_("the homonym bank, first sentence, with the who, when and where heads")),
            summary=N_(
                "Three heads, each looking for one relationship. The lines below the weights are article "
                "1's figure: bank attends to Sherry in head 1 (who), to 'lying' in head 2 (when), and "
                "to 'river' in head 3 (where), so bank's final output leans to outdoors, not money. "
                "Compare with bank ②."
            ),
            tokens=("Sherry", "is", "lying", "on", "the", "river", "bank"),
            x=(
                (1.0, 0.0, 0.0, 0.0, 0.0, 0.0),
                (0.0, 0.2, 1.0, 0.0, 0.0, 0.0),
                (0.0, 1.0, 0.5, 0.2, 0.0, 0.0),
                (0.0, 0.0, 0.0, 0.2, 0.0, 0.5),
                THE,
                (0.0, 0.0, 0.0, 1.0, 0.0, 0.5),
                BANK,
            ),
            **_BANK_SETUP,
        ),
        Preset(
            key="bank-money",
            title=N_("bank ②: money"),
            source=cite(1, what=N_("the homonym bank, second sentence, with the who, when and where heads")),
            summary=N_(
                "The same bank embedding and the same weights as bank ①, in another sentence. In the "
                "lines below the weights, head 3 (where) now sends bank to 'money' (and some to "
                "'transfer'), head 1 (who) finds Ryan and head 2 (when) 'needed', and bank's final "
                "output leans to money."
            ),
            tokens=("Ryan", "needed", "to", "transfer", "money", "to", "the", "bank"),
            x=(
                (1.0, 0.0, 0.0, 0.0, 0.0, 0.0),
                (0.0, 0.5, 1.0, 0.0, 0.0, 0.0),
                (0.0, 0.0, 0.0, 0.0, 0.0, 0.2),
                (0.0, 1.0, 0.0, 0.0, 0.5, 0.0),
                (0.0, 0.0, 0.0, 0.0, 1.0, 0.0),
                (0.0, 0.0, 0.0, 0.0, 0.0, 0.2),
                THE,
                BANK,
            ),
            **_BANK_SETUP,
        ),
        Preset(
            key="translate",
            title=N_("Cross-attention: The cat sat on the mat → Le chat assis sur le tapis"),
            source=cite(4, what=N_("the alignment table of a translation")),
            summary=N_(
                "Queries come from the French sentence, keys and values from the English one, so the "
                "weights form a 6×6 alignment table: each French word attends most to its English "
                "counterpart, le to the second 'the', not the first."
            ),
            tokens=FR,
            x=EN_X,  # the French words carry their English counterparts' meanings
            context_tokens=EN,
            context_x=EN_X,
            dim_names=ALIGN_DIMS,
            weights=ALIGN_WEIGHTS,
            stage="softmax",
            decimals=2,
        ),
        Preset(
            key="dog-bites-man",
            title=N_("dog bites man (positions)"),
            source=cite(4, what=N_("why attention needs positional encodings")),
            summary=N_(
                "With no positional encoding, the outputs of 'dog bites man' are exactly those of "
                "'man bites dog' with the rows swapped: attention sees a set. Switch positions to "
                "sinusoidal and compare the two presets' outputs again."
            ),
            tokens=("dog", "bites", "man"),
            x=(DOG, BITES, MAN),
            stage="multihead",
        ),
        Preset(
            key="man-bites-dog",
            title=N_("man bites dog (positions)"),
            source=cite(4, what=N_("why attention needs positional encodings")),
            summary=N_(
                "The same three embeddings in the other order. Without positions, each token's output "
                "row equals its row in 'dog bites man'; with sinusoidal PE, they differ."
            ),
            tokens=("man", "bites", "dog"),
            x=(MAN, BITES, DOG),
            stage="multihead",
        ),
        Preset(
            key="causal",
            title=N_("Causal mask: a decoder cannot peek"),
            source=cite(2, 4, 5, what=N_("masked attention")),
            summary=N_(
                r"GPT-style decoders hide every later token: query $i$ sees keys $1, \ldots, i$ only. The weights "
                "above the diagonal are exactly 0. Tick cells in the Mask stage to hide more."
            ),
            tokens=DEFAULT_TOKENS,
            x=DEFAULT_X,
            source_tokens=DEFAULT_SOURCE,
            mask="causal",
            stage="mask",
        ),
        Preset(
            key="positions",
            title=N_("Sinusoidal positional encoding, 4 dimensions"),
            source=cite(4, what=N_("worked example of the PE matrix")),
            summary=N_(
                r"Zero embeddings, so $X$ is exactly the PE matrix of article 4: $\sin(pos)$, $\cos(pos)$, "
                r"$\sin(pos/100)$, $\cos(pos/100)$ for the three tokens. The formula counts positions from 0: "
                r"token 1 has $pos = 0$, token 3 has $pos = 2$."
            ),
            tokens=("first", "second", "third"),
            x=((0.0, 0.0, 0.0, 0.0),) * 3,
            positional_encoding="sinusoidal",
        ),
        Preset(
            key="additive",
            title=N_("Older score functions: Bahdanau (additive) and Luong (general)"),
            source=cite(4, what=N_("from Bahdanau's small network to the dot product")),
            summary=N_(
                r"Article 4's three tokens, scored by Bahdanau's small network $v_a \cdot \tanh(q_i W_1 + k_j W_2)$ "
                "instead of a dot product. Select a score to see each tanh; switch the score to "
                "general (Luong) or dot in Mechanisms to compare."
            ),
            tokens=("token 1", "token 2", "token 3"),
            x=identity(3),
            d_k=2,
            weights={"w_q": (S003_Q,), "w_k": (S003_K,), "w_v": (S003_V,),
                     "w_o": ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0))},
            score="additive",
            stage="scores",
        ),
        Preset(
            key="sparse",
            title=N_("Sparse attention: a strided pattern on 16 tokens"),
            source=cite(4, what=N_(r"the variants table (sparse attention, $O(n\sqrt{n})$)")),
            summary=N_(
                r"With a stride of $4 = \sqrt{16}$, each query sees its 3 neighbours on each side and every "
                r"4th token: about $2\sqrt{T}$ keys instead of $T$. Switch the mask to a local window to compare, "
                "and open the Cost panel to see what it saves as $T$ grows."
            ),
            tokens=SPARSE_TOKENS,
            x=SPARSE_X,
            mask="strided",
            window=4,
            stage="mask",
        ),
        Preset(
            key="linear",
            title=N_("Linear attention (φ = elu + 1) against softmax"),
            source=cite(4, what=N_("the variants table (linear attention, $O(n d^2)$)")),
            summary=N_(
                r"Each head's output comes from $\varphi(Q) \big(\varphi(K)^{\top} V\big)$, a $d_k \times d_v$ summary "
                r"built once, instead of a $T \times T$ weight matrix. The Output stage shows the result, "
                "softmax's, and their difference; the Softmax stage shows the weights linear attention implies."
            ),
            tokens=DEFAULT_TOKENS,
            x=DEFAULT_X,
            source_tokens=DEFAULT_SOURCE,
            attention="linear",
            stage="output",
        ),
        Preset(
            key="block",
            title=N_("Transformer blocks: Add & Norm, FFN, Add & Norm, stacked twice"),
            source=cite(3, 4, what=N_("the transformer block")),
            summary=N_(
                r"Multi-head attention, then $\text{LayerNorm}(X + \text{MultiHead}(X))$, a position-wise FFN with "
                r"$d_{\text{ff}} = 12$, and $\text{LayerNorm}(H + \text{FFN}(H))$: steps 8–10. The second block "
                "takes the first one's output; choose it with “show block”. Try pre-norm in Transformer block."
            ),
            tokens=DEFAULT_TOKENS,
            x=DEFAULT_X,
            source_tokens=DEFAULT_SOURCE,
            blocks=2,
            stage="addnorm1",
        ),
    )
}


_translate = PRESETS["translate"]
_bank = PRESETS["bank-river"]
PRESETS.update({p.key: p for p in (
    Preset(
        key="learn-translate",
        title=N_("Learn: the alignment table of a translation"),
        source=cite(4, what=N_("the alignment table, learned")),
        summary=N_(
            r"Random $W_Q$ and $W_K$ (seed 3), and a goal: article 4's alignment table, Le → The 0.70 … "
            "tapis → mat 0.75. Press “100 steps” in the Learn panel and watch the lines find each French "
            "word's English counterpart; the backward stages after Heads show the gradients that move them."
        ),
        tokens=_translate.tokens, x=_translate.x, context_tokens=_translate.context_tokens,
        context_x=_translate.context_x, dim_names=_translate.dim_names, seed=3, stage="softmax", decimals=2,
        goal="translate",
    ),
    Preset(
        key="learn-bank",
        title=N_("Learn: a where head for bank"),
        source=cite(1, what=N_("the homonym bank, learned")),
        summary=N_(
            "One head with random weights, trained on both bank sentences at once: bank should attend to "
            "river in ① (on screen) and to money in ②. Train it in the Learn panel; the panel draws ②'s "
            "lines as the same weights see them."
        ),
        tokens=_bank.tokens, x=_bank.x, d_k=2, dim_names=_bank.dim_names, stage="softmax", focus="bank",
        goal="bank",
    ),
    Preset(
        key="learn-previous-token",
        title=N_("Learn: a previous-token head (causal mask, RoPE)"),
        source=cite(2, 4, 5, what=N_("masked attention and positions, learned")),
        summary=N_(
            "Every token should attend to the one before it. The causal mask hides the future and RoPE "
            "lets the scores depend on the offset between positions, so one head can learn it from "
            "random weights (seed 5)."
        ),
        tokens=PREVIOUS_TOKENS, x=previous_token_x(), seed=PREVIOUS_TOKEN_SEED, mask="causal",
        positional_encoding="rope", stage="softmax", goal="previous-token",
    ),
    Preset(
        key="why-scale",
        title=N_("Learn: why divide by √dₖ"),
        source=cite(4, 5, what=N_(r"large scores saturate the softmax, and learning stalls")),
        summary=N_(
            r"$d_k = 64$: scores of standard deviation 8 without $\div \sqrt{d_k}$. The Learn panel shows the "
            r"same start and goal trained twice, with and without $\div \sqrt{d_k}$: without it the softmax "
            r"starts nearly one-hot, little gradient $\partial L / \partial \text{Scores}$ gets through, and "
            r"its loss barely moves."
        ),
        tokens=WHY_SCALE_TOKENS, x=why_scale_x(), d_k=WHY_SCALE_D_K, d_v=WHY_SCALE_D_V, seed=WHY_SCALE_SEED,
        stage="softmax", decimals=2,
        goal="why-scale",
    ),
)})
DEFAULT_PRESET = "default"
