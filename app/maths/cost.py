"""What attention costs: multiply-adds per stage, parameters, and how both grow with T.

Seed 004: attention with learned projections costs O(N_k·N_q·d_k + N_k·N_q·d_v + N_k·d_k·d + N_q·d_k·d +
N_k·d_v·d), i.e. O(N²d + Nd²) in self-attention, "practically O(N²d)" once N ≫ d; its learnable
parameters (3d² when every projection is d×d) do not depend on the sequence length. Seed 003's table
puts linear attention at O(n·d²).

Two counts per stage, kept apart:

* ``macs``: multiply-adds in matrix products. An (m×n)·(n×p) product is m·n·p MACs.
* ``elementwise``: every other scalar operation: each exp, tanh, division, addition outside a
  product, LayerNorm step or activation counts 1. Softmax is S exps, S − 1 additions and S
  divisions per row; the max shift that keeps exp from overflowing is not counted.

Sizes follow "Attention Is All You Need": T queries, S keys (S = T in self-attention), d_model, h
heads of d_k (queries, keys) and d_v (values). Pure Python: counts are exact integers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from app.i18n import N_

SCORES = ("dot", "general", "additive")
ATTENTIONS = ("softmax", "linear")


@dataclass(frozen=True)
class StageCost:
    """One stage of one layer: its MACs and elementwise operations, with the formula for each."""

    name: str  # English (marked N_): the page says it in the reader's language, the API as it is
    macs_formula: str  # "" when the stage has no matrix product
    macs: int
    elementwise_formula: str  # "" when the stage is only matrix products
    elementwise: int
    grows: str  # "T·S" (T² in self-attention), or "T", "S", "T + S" (linear)

    @property
    def quadratic(self) -> bool:
        return self.grows == "T·S"


@dataclass(frozen=True)
class ParamCount:
    name: str
    shape: str
    formula: str
    count: int


@dataclass(frozen=True)
class Cost:
    t: int
    s: int
    d_model: int
    num_heads: int
    d_k: int
    d_v: int
    score: str
    d_a: int | None  # additive score only
    attention: str
    d_ff: int
    blocks: int
    stages: tuple[StageCost, ...]  # one layer: the attention, or one whole block
    params: tuple[ParamCount, ...]  # one layer

    @property
    def layers(self) -> int:
        """Attention alone counts once; otherwise each block has its own weights and work."""
        return max(self.blocks, 1)

    @property
    def macs_per_layer(self) -> int:
        return sum(st.macs for st in self.stages)

    @property
    def elementwise_per_layer(self) -> int:
        return sum(st.elementwise for st in self.stages)

    @property
    def params_per_layer(self) -> int:
        return sum(p.count for p in self.params)

    @property
    def quadratic_macs(self) -> int:
        """MACs of the stages ∝ T·S, all layers."""
        return self.layers * sum(st.macs for st in self.stages if st.quadratic)

    @property
    def linear_macs(self) -> int:
        """MACs of the stages ∝ T or S, all layers."""
        return self.layers * sum(st.macs for st in self.stages if not st.quadratic)

    @property
    def total_macs(self) -> int:
        return self.layers * self.macs_per_layer

    @property
    def total_elementwise(self) -> int:
        return self.layers * self.elementwise_per_layer

    @property
    def total_params(self) -> int:
        return self.layers * self.params_per_layer


@dataclass(frozen=True)
class CostGrowth:
    """Self-attention (S = T) MACs for each T in ``ts``, all layers."""

    ts: tuple[int, ...]
    quadratic: tuple[int, ...]  # softmax attention, stages ∝ T²: scores, A·V (and the score function's pair terms)
    linear: tuple[int, ...]  # softmax attention, stages ∝ T: projections, W_O, FFN
    total: tuple[int, ...]  # quadratic + linear
    linear_attention: tuple[int, ...]  # the same layer with linear attention, all ∝ T
    crossover: int | None  # smallest T with quadratic ≥ linear (see crossover)


def _check(
    t: int, s: int, d_model: int, num_heads: int, d_k: int, d_v: int, score: str, d_a: int | None,
    attention: str, d_ff: int, blocks: int,
) -> None:
    for name, value in (("T", t), ("S", s), ("d_model", d_model), ("h", num_heads), ("d_k", d_k), ("d_v", d_v)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1")
    if score not in SCORES:
        raise ValueError(f"score must be one of {', '.join(SCORES)}")
    if attention not in ATTENTIONS:
        raise ValueError(f"attention must be one of {', '.join(ATTENTIONS)}")
    if d_a is not None and d_a < 1:
        raise ValueError("d_a must be at least 1")
    if blocks < 0 or d_ff < 0:
        raise ValueError("blocks and d_ff must not be negative")
    if blocks >= 1 and d_ff < 1:
        raise ValueError("a transformer block needs d_ff ≥ 1 (its feed-forward hidden size)")


def _softmax_stages(
    t: int, s: int, h: int, d_k: int, d_v: int, score: str, d_a: int, scale: bool,
) -> list[StageCost]:
    """2) scores, 3) scaling (dot and general scores; never additive), 4) softmax, 5) A·V."""
    rows: list[StageCost] = []
    if score == "dot":
        rows.append(StageCost(N_("Scores Q·Kᵀ"), "h·T·S·d_k", h * t * s * d_k, "", 0, "T·S"))
    elif score == "general":
        rows.append(StageCost(N_("General: Q·W"), "h·T·d_k²", h * t * d_k * d_k, "", 0, "T"))
        rows.append(StageCost(N_("Scores (Q·W)·Kᵀ"), "h·T·S·d_k", h * t * s * d_k, "", 0, "T·S"))
    else:
        rows.append(StageCost(N_("Additive: W₁·q"), "h·T·d_k·d_a", h * t * d_k * d_a, "", 0, "T"))
        rows.append(StageCost(N_("Additive: W₂·k"), "h·S·d_k·d_a", h * s * d_k * d_a, "", 0, "S"))
        # For every (query, key) pair: add the two d_a vectors, tanh, then a dot product with v.
        rows.append(StageCost(
            N_("Scores v_a·tanh(q_i·W₁ + k_j·W₂)"), "h·T·S·d_a", h * t * s * d_a, "2·h·T·S·d_a", 2 * h * t * s * d_a,
            "T·S",
        ))
    if scale and score != "additive":
        rows.append(StageCost(N_("Scaling ÷ √d_k"), "", 0, "h·T·S", h * t * s, "T·S"))
    rows.append(StageCost(N_("Softmax (exp, sum, divide)"), "", 0, "h·T·(3·S − 1)", h * t * (3 * s - 1), "T·S"))
    rows.append(StageCost("A·V", "h·T·S·d_v", h * t * s * d_v, "", 0, "T·S"))
    return rows


def _linear_stages(t: int, s: int, h: int, d_k: int, d_v: int) -> list[StageCost]:
    """φ(x) = elu(x) + 1;  outᵢ = φ(qᵢ)ᵀ(Σⱼ φ(kⱼ)·vⱼᵀ) / φ(qᵢ)ᵀ(Σⱼ φ(kⱼ)): no T×S matrix at all."""
    return [
        StageCost("φ(Q), φ(K) = elu + 1", "", 0, "2·h·(T + S)·d_k", 2 * h * (t + s) * d_k, "T + S"),
        StageCost("φ(K)ᵀ·V", "h·S·d_k·d_v", h * s * d_k * d_v, "", 0, "S"),
        StageCost(N_("Normaliser Σⱼ φ(kⱼ)"), "", 0, "h·(S − 1)·d_k", h * (s - 1) * d_k, "S"),
        StageCost(N_("Numerators φ(Q)·(φ(K)ᵀ·V)"), "h·T·d_k·d_v", h * t * d_k * d_v, "", 0, "T"),
        StageCost(N_("Denominators φ(Q)·Σφ(k)"), "h·T·d_k", h * t * d_k, "", 0, "T"),
        StageCost(N_("Divide"), "", 0, "h·T·d_v", h * t * d_v, "T"),
    ]


def _block_stages(t: int, d_model: int, d_ff: int) -> tuple[StageCost, list[StageCost], StageCost]:
    """Add & Norm (before and after the FFN) and the two FFN layers.

    Add & Norm per token: d_model residual additions, then LayerNorm: mean (d_model − 1 additions,
    1 division), centring (d_model), variance (d_model squares, d_model − 1 additions, 1 division),
    + ε and √ (2), normalising (d_model divisions), γ·x̂ + β (2·d_model): 8·d_model + 2 in all.
    """

    def add_norm(n: int) -> StageCost:
        name = N_("Add & Norm 1") if n == 1 else N_("Add & Norm 2")
        return StageCost(name, "", 0, "T·(8·d_model + 2)", t * (8 * d_model + 2), "T")

    ffn = [
        StageCost(N_("FFN: X·W₁ + b₁, activation"), "T·d_model·d_ff", t * d_model * d_ff, "2·T·d_ff", 2 * t * d_ff,
                  "T"),
        StageCost("FFN: ·W₂ + b₂", "T·d_ff·d_model", t * d_ff * d_model, "T·d_model", t * d_model, "T"),
    ]
    return add_norm(1), ffn, add_norm(2)


def _params(
    d_model: int, h: int, d_k: int, d_v: int, score: str, d_a: int, attention: str, d_ff: int, blocks: int,
) -> tuple[ParamCount, ...]:
    rows = [
        ParamCount("W_Q", "h × d_model × d_k", "h·d_model·d_k", h * d_model * d_k),
        ParamCount("W_K", "h × d_model × d_k", "h·d_model·d_k", h * d_model * d_k),
        ParamCount("W_V", "h × d_model × d_v", "h·d_model·d_v", h * d_model * d_v),
        ParamCount("W_O", "h·d_v × d_model", "h·d_v·d_model", h * d_v * d_model),
    ]
    if attention == "softmax" and score == "general":
        rows.append(ParamCount(N_("W (general score)"), "h × d_k × d_k", "h·d_k²", h * d_k * d_k))
    elif attention == "softmax" and score == "additive":
        rows.append(ParamCount(N_("W₁ (additive score)"), "h × d_k × d_a", "h·d_k·d_a", h * d_k * d_a))
        rows.append(ParamCount(N_("W₂ (additive score)"), "h × d_k × d_a", "h·d_k·d_a", h * d_k * d_a))
        rows.append(ParamCount(N_("v (additive score)"), "h × d_a", "h·d_a", h * d_a))
    if blocks >= 1:
        rows += [
            ParamCount("LayerNorm 1 γ, β", "2 × d_model", "2·d_model", 2 * d_model),
            ParamCount("FFN W₁", "d_model × d_ff", "d_model·d_ff", d_model * d_ff),
            ParamCount("FFN b₁", "d_ff", "d_ff", d_ff),
            ParamCount("FFN W₂", "d_ff × d_model", "d_ff·d_model", d_ff * d_model),
            ParamCount("FFN b₂", "d_model", "d_model", d_model),
            ParamCount("LayerNorm 2 γ, β", "2 × d_model", "2·d_model", 2 * d_model),
        ]
    return tuple(rows)


@lru_cache(maxsize=1024)  # a frozen record of a few sizes: every request of the same sizes asks for it again
def attention_cost(
    *,
    t: int,
    s: int,
    d_model: int,
    num_heads: int,
    d_k: int,
    d_v: int,
    score: str = "dot",
    d_a: int | None = None,
    attention: str = "softmax",
    d_ff: int = 0,
    blocks: int = 0,
    scale: bool = True,
) -> Cost:
    """MACs and elementwise operations per stage, and parameters, of one attention layer or block.

    score: "dot" (q_i·k_j), "general" (Luong q_i·W_a·k_jᵀ, computed as (Q·W_a)·Kᵀ), or "additive" (Bahdanau
    v_a·tanh(q_i·W₁ + k_j·W₂), d_a defaults to d_k); ``scale`` divides dot and general scores by √d_k (as the
    pipeline does; additive scores are never scaled). attention: "softmax", or "linear" (φ(x) = elu(x) + 1,
    which replaces the score function, its scaling and the softmax). blocks ≥ 1 adds, per block, two
    Add & Norm and the FFN act(X·W₁ + b₁)·W₂ + b₂ of hidden size d_ff (ReLU or GELU: one operation each).
    """
    _check(t, s, d_model, num_heads, d_k, d_v, score, d_a, attention, d_ff, blocks)
    h = num_heads
    a = d_k if d_a is None else d_a
    # 1) Projections: queries from the T query tokens, keys and values from the S source tokens.
    stages = [
        StageCost(N_("Q projection X·W_Q"), "h·T·d_model·d_k", h * t * d_model * d_k, "", 0, "T"),
        StageCost(N_("K projection C·W_K"), "h·S·d_model·d_k", h * s * d_model * d_k, "", 0, "S"),
        StageCost(N_("V projection C·W_V"), "h·S·d_model·d_v", h * s * d_model * d_v, "", 0, "S"),
    ]
    # 2)–5) The scores, softmax and weighted sum, or their linear-attention replacement.
    if attention == "softmax":
        stages += _softmax_stages(t, s, h, d_k, d_v, score, a, scale)
    else:
        stages += _linear_stages(t, s, h, d_k, d_v)
    # 6) Concatenate the heads and project back to d_model.
    stages.append(StageCost("Concat·W_O", "T·h·d_v·d_model", t * h * d_v * d_model, "", 0, "T"))
    if blocks >= 1:
        norm1, ffn, norm2 = _block_stages(t, d_model, d_ff)
        stages += [norm1, *ffn, norm2]
    return Cost(
        t=t, s=s, d_model=d_model, num_heads=h, d_k=d_k, d_v=d_v, score=score,
        d_a=a if score == "additive" else None, attention=attention, d_ff=d_ff, blocks=blocks,
        stages=tuple(stages), params=_params(d_model, h, d_k, d_v, score, a, attention, d_ff, blocks),
    )


def crossover(
    *, d_model: int, num_heads: int, d_k: int, d_v: int, score: str = "dot", d_a: int | None = None,
    d_ff: int = 0, blocks: int = 0,
) -> int:
    """The smallest T at which softmax self-attention's T² MACs reach its T MACs (seed 004: N²d vs Nd²).

    With S = T every stage is exactly a·T² or b·T, so the costs at T = 1 give a and b, and
    a·T² ≥ b·T ⇔ T ≥ b / a. For the dot score without blocks that is T = 2·d_model.
    """
    one = attention_cost(
        t=1, s=1, d_model=d_model, num_heads=num_heads, d_k=d_k, d_v=d_v, score=score, d_a=d_a,
        d_ff=d_ff, blocks=blocks,
    )
    a, b = one.quadratic_macs, one.linear_macs
    return max(1, -(-b // a))  # ⌈b / a⌉ in integers


def cost_growth(
    *, d_model: int, num_heads: int, d_k: int, d_v: int, score: str = "dot", d_a: int | None = None,
    d_ff: int = 0, blocks: int = 0, ts: Iterable[int],
) -> CostGrowth:
    """Self-attention MACs against T: softmax attention split into its T² and T parts, and linear attention."""
    sizes = {"d_model": d_model, "num_heads": num_heads, "d_k": d_k, "d_v": d_v, "d_ff": d_ff, "blocks": blocks}
    ts = tuple(sorted(set(ts)))
    soft = [attention_cost(t=t, s=t, score=score, d_a=d_a, **sizes) for t in ts]
    lin = [attention_cost(t=t, s=t, attention="linear", **sizes) for t in ts]
    return CostGrowth(
        ts=ts,
        quadratic=tuple(c.quadratic_macs for c in soft),
        linear=tuple(c.linear_macs for c in soft),
        total=tuple(c.total_macs for c in soft),
        linear_attention=tuple(c.total_macs for c in lin),
        crossover=crossover(score=score, d_a=d_a, **sizes),
    )

