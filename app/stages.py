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
    block_only: bool = False  # shown only when the run has transformer blocks


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
    Stage(
        "addnorm1", 8, "Add & Norm", "Add & Norm: residual connection, then LayerNorm",
        "H = LayerNorm(X + MultiHead(X))",
        "A residual connection adds the block's input back to the attention output, then layer "
        "normalisation gives each token's vector mean 0 and variance 1 (times a learned gain γ, plus "
        "a bias β). It keeps activations at a stable scale, and the residual lets gradients flow "
        "straight through a deep stack.",
        False, True,
    ),
    Stage(
        "ffn", 9, "FFN", "Position-wise feed-forward network",
        "FFN(H) = act(H·W₁ + b₁)·W₂ + b₂",
        "Two linear layers with a ReLU or GELU between them, applied to each position independently: "
        "attention mixes information across tokens, the FFN transforms each token on its own. Its "
        "hidden size d_ff is usually 4·d_model.",
        False, True,
    ),
    Stage(
        "addnorm2", 10, "Add & Norm", "Add & Norm: the block's output",
        "Out = LayerNorm(H + FFN(H))",
        "Another residual connection and layer norm after the FFN. The output has the input's shape, "
        "T×d_model, so blocks stack: this output is the next block's input.",
        False, True,
    ),
)
# Where the text depends on the run's options: (stage, option) → (title, formula, explanation).
VARIANTS: dict[tuple[str, str], tuple[str, str, str]] = {
    ("scores", "general"): (
        "Scores: general qᵀ·W_a·k (Luong)",
        "Scores_ij = (Q·W_a)_i · K_j = Σ_a Σ_b Q_ia · W_a[a][b] · K_jb",
        "Luong's \"general\" score puts a learned d_k×d_k matrix between each query and key, so the model "
        "learns which query features should match which key features. With W_a = I it is the plain dot "
        "product.",
    ),
    ("scores", "additive"): (
        "Scores: additive v_aᵀ·tanh(W₁q + W₂k) (Bahdanau)",
        "Scores_ij = Σ_a v_a[a] · tanh((Q·W₁)_ia + (K·W₂)_ja)",
        "Bahdanau's original attention (2014) scored each query–key pair with a small neural network: "
        "one hidden layer with tanh, then a dot product with v_a. Luong (2015) simplified this to a plain "
        "dot product. tanh keeps every score within ±Σ|v_a|, so it is not divided by √d_k.",
    ),
    ("scaled", "additive"): (
        "Scaled scores (additive: ÷τ only)",
        "Scaled = Scores / τ",
        "Additive scores are bounded by tanh, so they are not divided by √d_k; only the temperature "
        "τ applies.",
    ),
    ("output", "linear"): (
        "Output: linear attention",
        "Output_i = φ(q_i)ᵀ·(φ(K)ᵀ·V) / φ(q_i)ᵀ·Σ_j φ(k_j),  φ(x) = elu(x) + 1",
        "Linear attention replaces exp(q·k) by φ(q)·φ(k). The product can then be regrouped: φ(K)ᵀ·V is "
        "a d_k×d_v summary built once, and each query reads it, so the cost grows as T·d² instead of "
        "T²·d. The weights it implies are smoother than softmax's; the difference is shown below.",
    ),
    ("addnorm1", "pre"): (
        "Add (pre-norm): residual around normalised attention",
        "H = X + MultiHead(LayerNorm(X))",
        "Pre-norm, as in GPT-2 and most recent models: LayerNorm comes first, inside the branch, and the "
        "residual adds the untouched input. The heads above saw LayerNorm₁(X); this stage adds their "
        "output back to X.",
    ),
    ("ffn", "pre"): (
        "Position-wise feed-forward network (on LayerNorm₂(H))",
        "FFN(LayerNorm(H)) = act(LN(H)·W₁ + b₁)·W₂ + b₂",
        "Pre-norm: the FFN reads LayerNorm₂(H), and the residual adds its output to H itself.",
    ),
    ("addnorm2", "pre"): (
        "Add (pre-norm): the block's output",
        "Out = H + FFN(LayerNorm(H))",
        "The output is H plus the FFN's output, with no normalisation after it: the residual stream "
        "passes through the block untouched. It is the next block's input.",
    ),
}
STAGE_KEYS = tuple(s.key for s in STAGES)
BY_KEY = {s.key: s for s in STAGES}


def visible_stages(blocks: int) -> tuple[Stage, ...]:
    """The stages of this run: the block's sub-steps only when there are blocks."""
    return STAGES if blocks else tuple(s for s in STAGES if not s.block_only)


def stage_or_first(key: str, stages: tuple[Stage, ...] = STAGES) -> Stage:
    stage = BY_KEY.get(key, stages[0])
    return stage if stage in stages else stages[0]


def neighbours(key: str, stages: tuple[Stage, ...] = STAGES) -> tuple[Stage | None, Stage | None]:
    keys = [s.key for s in stages]
    i = keys.index(stage_or_first(key, stages).key)
    prev = stages[i - 1] if i > 0 else None
    nxt = stages[i + 1] if i + 1 < len(stages) else None
    return prev, nxt


def describe(
    stage: Stage, *, score: str = "dot", attention: str = "softmax", norm: str = "post"
) -> tuple[str, str, str]:
    """The stage's title, formula and explanation for these options."""
    for option in (score, attention, norm):
        if (stage.key, option) in VARIANTS:
            return VARIANTS[(stage.key, option)]
    return stage.title, stage.formula, stage.explanation
