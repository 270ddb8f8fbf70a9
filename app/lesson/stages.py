"""The numbered stages the page steps through, with their formulas and explanations.

The words are the seed articles' own: seed 000 (query: what am I looking for? key: what do I
offer? value: what do I carry?), seed 002 and seed 003. The numbers here match the numbered steps
in app.maths.attention.run_attention.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.i18n import N_


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
    backward: bool = False  # the backward pass: shown only with a goal in the Learn panel


STAGES: tuple[Stage, ...] = (
    Stage(
        "x", 0, "X", N_("Input embeddings $X$"),
        r"X \in \mathbb{R}^{T \times d_{\text{model}}}",
        N_("$X$ is the input: one row per token, with its embedding vector. On their own, embeddings are "
        "fixed: the same word gets the same row whatever surrounds it."),
        False,
    ),
    Stage(
        "qkv", 1, "Q, K, V", N_("Queries, keys and values"),
        r"Q = X W_Q,\quad K = X W_K,\quad V = X W_V",
        N_("Three separate linear projections of $X$. $Q$: what am I looking for? $K$: what do I offer to "
        "match against? $V$: what content do I actually carry?"),
        True,
    ),
    Stage(
        "scores", 2, N_("Scores"), N_(r"Scores $Q K^{\top}$"),
        r"\text{Scores} = Q K^{\top},\qquad \text{Scores}_{ij} = \sum_{k=1}^{d_k} Q_{ik}\, K_{jk}",
        N_("Every token's query is compared with every token's key at once: entry $(i, j)$ measures how "
        "relevant token $j$ is to token $i$. This is what makes attention parallel, not sequential."),
        True,
    ),
    Stage(
        "scaled", 3, N_("Scaled"), N_(r"Scaled scores $\div \sqrt{d_k}$"),
        r"\text{Scaled} = \frac{Q K^{\top}}{\sqrt{d_k}}",
        N_(r"With $q$ and $k$ entries of variance 1, a dot product has variance $d_k$. Dividing by $\sqrt{d_k}$ brings "
        "it back to 1, so softmax does not saturate into near-zero gradients."),
        True,
    ),
    Stage(
        "mask", 4, N_("Mask"), N_("Mask: hide keys"),
        r"\text{Masked}_{ij} = \begin{cases} {-\infty} & \text{if key } j \text{ is hidden from } i \\ "
        r"\text{Scaled}_{ij} & \text{otherwise} \end{cases}",
        N_("A mask hides some keys from some queries before the softmax: a causal mask hides later "
        r"tokens (a decoder must not peek at the future), padding hides filler tokens. $\exp(-\infty) = 0$, "
        "so a hidden key gets a weight of exactly 0."),
        True,
    ),
    Stage(
        "softmax", 5, N_("Softmax"), N_("Softmax: attention weights $A$"),
        r"A_{ij} = \frac{\exp(\text{Masked}_{ij})}{\sum_{j\prime} \exp(\text{Masked}_{ij\prime})}",
        N_("Softmax is applied row by row: each row becomes a probability distribution over the tokens, "
        "all weights positive and summing to 1. These are the attention weights."),
        True,
    ),
    Stage(
        "output", 6, N_("Output"), N_(r"Output $A V$"),
        r"\text{Output} = A V,\qquad \text{Output}_i = \sum_{j} A_{ij}\, V_j",
        N_("Each token's output is a weighted average of all value vectors, weighted by how much it "
        "attends to each position: its embedding, now enriched with context."),
        True,
    ),
    Stage(
        "multihead", 7, N_("Heads · Wᴼ"), N_(r"Concatenate heads, project with $W_O$"),
        r"\text{MultiHead}(X) = \text{Concat}(\text{head}_1, \ldots, \text{head}_h)\, W_O",
        N_("Each head finds its own pattern of relevance in a smaller subspace. Their outputs are "
        r"concatenated in order and projected back to $d_{\text{model}}$ by $W_O$."),
        False,
    ),
    Stage(
        "addnorm1", 8, N_("Add & Norm"), N_("Add & Norm: residual connection, then LayerNorm"),
        r"H = \text{LayerNorm}\big(X + \text{MultiHead}(X)\big)",
        N_("A residual connection adds the block's input back to the attention output, then layer "
        "normalisation gives each token's vector mean 0 and variance 1 (times a learned gain γ, plus "
        "a bias β). It keeps activations at a stable scale, and the residual lets gradients flow "
        "straight through a deep stack."),
        False, True,
    ),
    Stage(
        "ffn", 9, "FFN", N_("Position-wise feed-forward network"),
        r"\text{FFN}(H) = \text{act}(H W_1 + b_1)\, W_2 + b_2",
        N_("Two linear layers with a ReLU or a GELU between them, applied to each position independently: "
        "attention mixes information across tokens, the FFN transforms each token on its own. Its "
        r"hidden size $d_{\text{ff}}$ is usually $4\, d_{\text{model}}$."),
        False, True,
    ),
    Stage(
        "addnorm2", 10, N_("Add & Norm"), N_("Add & Norm: the block's output"),
        r"\text{Out} = \text{LayerNorm}\big(H + \text{FFN}(H)\big)",
        N_("Another residual connection and layer norm after the FFN. The output has the input's shape, "
        r"$T \times d_{\text{model}}$, so blocks stack: this output is the next block's input."),
        False, True,
    ),
)
# The backward pass (app.maths.backward), after the forward stages when the Learn panel has a goal: each stage
# takes the gradient of the one after it in the forward pass. Written for the dot score; _formula adjusts.
BACKWARD_STAGES: tuple[Stage, ...] = (
    Stage(
        "grad_a", 8, "∂L/∂A", N_(r"Backward: the loss, and $\partial L / \partial A$"),
        r"\frac{\partial L}{\partial A} = \frac{\partial L}{\partial \text{Output}}\, V^{\top},\qquad "
        r"\frac{\partial L}{\partial \text{Output}} = \frac{\partial L}{\partial \text{MultiHead}}\, W_O^{\top}",
        N_(r"The loss $L$ says how far the run is from the goal. Its gradient $\partial L / \partial A_{ij}$ says how "
        r"the loss changes when weight $A_{ij}$ grows: negative where the weight should grow, positive where it "
        r"should shrink."),
        True, backward=True,
    ),
    Stage(
        "grad_scores", 9, "∂L/∂Scores", N_(r"Backward through softmax: $\partial L / \partial \text{Scores}$"),
        r"\frac{\partial L}{\partial \text{Scaled}_{ij}} = A_{ij} \Big( \frac{\partial L}{\partial A_{ij}} - "
        r"\sum_{k} A_{ik} \frac{\partial L}{\partial A_{ik}} \Big),\qquad "
        r"\frac{\partial L}{\partial \text{Scores}} = \frac{1}{\sqrt{d_k}}\, \frac{\partial L}{\partial \text{Scaled}}",
        N_(r"Raising one score takes weight from the others, so the softmax subtracts the row's weighted average "
        r"of $\partial L / \partial A$. Where a row is nearly one-hot, $A_{ij}(\ldots)$ is nearly 0 and the "
        r"gradient fades: the saturation $\div \sqrt{d_k}$ prevents (a hidden key's gradient is exactly 0)."),
        True, backward=True,
    ),
    Stage(
        "grad_q", 10, "∂L/∂Q", N_(r"Backward: $\partial L / \partial Q$"),
        r"\frac{\partial L}{\partial Q} = \frac{\partial L}{\partial \text{Scores}}\, K,\qquad "
        r"\frac{\partial L}{\partial Q_{id}} = \sum_{j} \frac{\partial L}{\partial \text{Scores}_{ij}}\, K_{jd}",
        N_(r"Each query is pulled towards the keys whose scores should grow and pushed away from those whose "
        r"scores should shrink. A step against this gradient is what teaches a query what to look for."),
        True, backward=True,
    ),
    Stage(
        "grad_k", 11, "∂L/∂K", N_(r"Backward: $\partial L / \partial K$"),
        r"\frac{\partial L}{\partial K} = \Big(\frac{\partial L}{\partial \text{Scores}}\Big)^{\top} Q,\qquad "
        r"\frac{\partial L}{\partial K_{jd}} = \sum_{i} \frac{\partial L}{\partial \text{Scores}_{ij}}\, Q_{id}",
        N_(r"Each key is pulled towards the queries that should attend to it more, summed over every query: "
        r"a key learns what it offers from everyone who looks at it."),
        True, backward=True,
    ),
    Stage(
        "grad_v", 12, "∂L/∂V", N_(r"Backward: $\partial L / \partial V$"),
        r"\frac{\partial L}{\partial V} = A^{\top} \frac{\partial L}{\partial \text{Output}},\qquad "
        r"\frac{\partial L}{\partial V_{jd}} = \sum_{i} A_{ij}\, \frac{\partial L}{\partial \text{Output}_{id}}",
        N_(r"A value row receives the output gradients of the queries that read it, each weighted by how much "
        r"that query attends to it. With a goal on the weights alone, nothing flows here: the values do not "
        r"change the weights."),
        True, backward=True,
    ),
    Stage(
        "grad_w", 13, "∂L/∂W", N_(r"Backward: the weights' gradients, $\partial L / \partial W$"),
        r"\frac{\partial L}{\partial W_Q} = X^{\top} \frac{\partial L}{\partial Q},\qquad "
        r"\frac{\partial L}{\partial W_K} = X^{\top} \frac{\partial L}{\partial K},\qquad "
        r"\frac{\partial L}{\partial W_V} = X^{\top} \frac{\partial L}{\partial V},\qquad "
        r"\frac{\partial L}{\partial W_O} = \text{Concat}^{\top} \frac{\partial L}{\partial \text{MultiHead}}",
        N_(r"The projections are the learned parameters: every token's gradient adds into them. A step of gradient "
        r"descent moves each weight against its gradient, $W \leftarrow W - \eta\, \partial L / \partial W$, "
        r"which is what the Learn panel's buttons do."),
        False, backward=True,
    ),
)
BACKWARD_KEYS = tuple(s.key for s in BACKWARD_STAGES)

# Where the text depends on the run's options: (stage, option) → (title, formula, explanation).
# Titles and explanations are prose with inline maths between $…$; formulas are LaTeX.
VARIANTS: dict[tuple[str, str], tuple[str, str, str]] = {
    ("scores", "general"): (
        N_(r"Scores: general $q_i W_a\, k_j^{\top}$ (Luong)"),
        r"\text{Scores}_{ij} = (Q W_a)_i \cdot K_j = \sum_{a} \sum_{b} Q_{ia}\, (W_a)_{ab}\, K_{jb}",
        N_(r"Luong's “general” score puts a learned $d_k \times d_k$ matrix between each query and key, so the "
        r"model learns which query features should match which key features. With $W_a = I$ it is the plain "
        r"dot product."),
    ),
    ("scores", "additive"): (
        N_(r"Scores: additive $v_a \cdot \tanh(q_i W_1 + k_j W_2)$ (Bahdanau)"),
        r"\text{Scores}_{ij} = \sum_{a} (v_a)_a \tanh\big((Q W_1)_{ia} + (K W_2)_{ja}\big)",
        N_(r"Bahdanau's original attention (2014) scored each query–key pair with a small neural network: "
        r"one hidden layer with tanh, then a dot product with $v_a$. Luong (2015) simplified this to a plain "
        r"dot product. tanh keeps every score within $\pm \sum_a |(v_a)_a|$, so it is not divided by "
        r"$\sqrt{d_k}$."),
    ),
    ("scaled", "additive"): (
        N_(r"Scaled scores (additive: $\div\, \tau$ only)"),
        r"\text{Scaled} = \frac{\text{Scores}}{\tau}",
        N_(r"Additive scores are bounded by tanh, so they are not divided by $\sqrt{d_k}$; only the "
        r"temperature $\tau$ applies."),
    ),
    ("output", "linear"): (
        N_("Output: linear attention"),
        r"\text{Output}_i = \frac{\varphi(q_i)^{\top} \big(\varphi(K)^{\top} V\big)}"
        r"{\varphi(q_i)^{\top} \sum_{j} \varphi(k_j)},\qquad \varphi(x) = \text{elu}(x) + 1",
        N_(r"Linear attention replaces $\exp(q \cdot k)$ by $\varphi(q) \cdot \varphi(k)$. The product can then be "
        r"regrouped: $\varphi(K)^{\top} V$ is a $d_k \times d_v$ summary built once, and each query reads it, "
        r"so the cost grows as $T d^2$ instead of $T^2 d$. The weights it implies are smoother than "
        r"softmax's; the difference is shown below."),
    ),
    ("addnorm1", "pre"): (
        N_("Add (pre-norm): residual around normalised attention"),
        r"H = X + \text{MultiHead}\big(\text{LayerNorm}(X)\big)",
        N_(r"Pre-norm, as in GPT-2 and most recent models: LayerNorm comes first, inside the branch, and the "
        r"residual adds the untouched input. The heads above saw $\text{LayerNorm}_1(X)$; this stage adds "
        r"their output back to $X$."),
    ),
    ("ffn", "pre"): (
        N_(r"Position-wise feed-forward network (on $\text{LayerNorm}_2(H)$)"),
        r"\text{FFN}\big(\text{LayerNorm}(H)\big) = \text{act}\big(\text{LN}(H)\, W_1 + b_1\big)\, W_2 + b_2",
        N_(r"Pre-norm: the FFN reads $\text{LayerNorm}_2(H)$, and the residual adds its output to $H$ itself."),
    ),
    ("addnorm2", "pre"): (
        N_("Add (pre-norm): the block's output"),
        r"\text{Out} = H + \text{FFN}\big(\text{LayerNorm}(H)\big)",
        N_("The output is H plus the FFN's output, with no normalisation after it: the residual stream "
        "passes through the block untouched. It is the next block's input."),
    ),
}
STAGE_KEYS = tuple(s.key for s in STAGES)
BY_KEY = {s.key: s for s in STAGES + BACKWARD_STAGES}


def visible_stages(blocks: int, backward: bool = False) -> tuple[Stage, ...]:
    """The stages of this run: the block's sub-steps only when there are blocks; the backward pass
    after the forward one when a goal is set (gradients cover attention without blocks)."""
    if blocks:
        return STAGES
    forward = tuple(s for s in STAGES if not s.block_only)
    return forward + BACKWARD_STAGES if backward else forward


def stage_or_first(key: str, stages: tuple[Stage, ...] = STAGES) -> Stage:
    stage = BY_KEY.get(key, stages[0])
    return stage if stage in stages else stages[0]


def neighbours(key: str, stages: tuple[Stage, ...] = STAGES) -> tuple[Stage | None, Stage | None]:
    keys = [s.key for s in stages]
    i = keys.index(stage_or_first(key, stages).key)
    prev = stages[i - 1] if i > 0 else None
    nxt = stages[i + 1] if i + 1 < len(stages) else None
    return prev, nxt


BLOCK_MARK = "@"  # a stepper's goto value "x@1": stage x of block index 1 (the form's block field counts from 0)


def step_targets(key: str, stages: tuple[Stage, ...], block: int = 0, blocks: int = 0) -> tuple[str, str]:
    """The stepper's Prev and Next as goto values ("" where there is none). With several blocks the
    steps go on across them: Next after block b's last stage is block b + 1's first, Prev back."""
    prev, nxt = neighbours(key, stages)
    to_prev = prev.key if prev else (f"{stages[-1].key}{BLOCK_MARK}{block - 1}" if block > 0 else "")
    to_next = nxt.key if nxt else (f"{stages[0].key}{BLOCK_MARK}{block + 1}" if block + 1 < blocks else "")
    return to_prev, to_next


def read_goto(goto: str) -> tuple[str, int | None]:
    """A goto value's stage and, when it names one, its block index: "x@1" → ("x", 1), "qkv" → ("qkv", None)."""
    key, mark, block = goto.partition(BLOCK_MARK)
    return key, int(block) if mark and block.isdigit() else None


# The FFN's activations (app.maths.blocks.ACTIVATIONS): the name in a matrix's title, its LaTeX, and in words.
ACTIVATION_NAMES = {"relu": "ReLU", "gelu": "GELU", "gelu_tanh": "GELU_tanh"}
ACTIVATION_TEX = {"relu": r"\text{ReLU}", "gelu": r"\text{GELU}", "gelu_tanh": r"\text{GELU}_{\tanh}"}
ACTIVATION_WORDS = {"relu": "ReLU", "gelu": N_("GELU (exact)"), "gelu_tanh": N_("GELU (tanh approximation)")}


@dataclass(frozen=True)
class Options:
    """What of the run changes a stage's words: the mechanisms in use."""

    score: str = "dot"
    attention: str = "softmax"
    norm: str = "post"
    cross: bool = False  # keys and values from a source sentence C
    masked: bool = False  # some key is hidden from some query
    scale: bool = True  # ÷√d_k (the additive score is never scaled)
    temperature: bool = False  # τ ≠ 1
    alibi: bool = False
    rope: bool = False
    added_pe: bool = False  # sinusoidal or learned: X = E + P
    activation: str = "relu"
    loss: str = ""  # the Learn panel's goal: "attention" (cross-entropy of A) or "output" (squared error)


DL = r"\frac{\partial L}{\partial %s}"


def _backward_formula(key: str, formula: str, o: Options) -> str:
    """A backward stage's formula for the loss and the mechanisms in use."""
    if key == "grad_a" and o.loss == "attention":
        return (r"L = -\frac{1}{T} \sum_{i} \sum_{j} t_{ij} \log A_{ij},\qquad "
                + DL % "A_{ij}" + r" = -\frac{t_{ij}}{T\, A_{ij}}")
    if key == "grad_a":
        return (r"L = \frac{1}{T\, d_{\text{model}}} \sum_{i,c} (\text{MultiHead}_{ic} - \text{Target}_{ic})^2,\qquad "
                + formula)
    if key == "grad_scores":
        below = ([r"\sqrt{d_k}"] if o.scale and o.score != "additive" else []) + ([r"\tau"] if o.temperature else [])
        factor = r"\frac{1}{" + r"\,".join(below) + r"}\, " if below else ""
        head = formula.partition(r",\qquad ")[0]
        return head + r",\qquad " + DL % r"\text{Scores}" + " = " + factor + DL % r"\text{Scaled}"
    if key == "grad_q" and o.attention == "linear":
        return DL % "Q" + r" = \varphi'(Q) \odot " + DL % r"\varphi(Q)"
    if key == "grad_k" and o.attention == "linear":
        return DL % "K" + r" = \varphi'(K) \odot " + DL % r"\varphi(K)"
    if key == "grad_q" and o.score == "general":
        return DL % "Q" + " = " + DL % r"\text{Scores}" + r"\, K\, W_a^{\top}"
    if key == "grad_k" and o.score == "general":
        return DL % "K" + r" = \Big(" + DL % r"\text{Scores}" + r"\Big)^{\top} (Q W_a)"
    if key in ("grad_q", "grad_k") and o.score == "additive":
        m, w = ("Q", "W_1") if key == "grad_q" else ("K", "W_2")
        return (DL % m + " = " + DL % f"({m} {w})" + rf"\, {w}^{{\top}},\qquad "
                + DL % f"({m} {w})_{{{'i' if m == 'Q' else 'j'}a}}" + r" = \sum_{" + ("j" if m == "Q" else "i")
                + r"} " + DL % r"\text{Scores}_{ij}" + r"\, (v_a)_a \big(1 - \tanh^2(\ldots)\big)")
    if key in ("grad_q", "grad_k") and o.rope:
        m = "Q" if key == "grad_q" else "K"
        rotated = (DL % r"\text{Scores}" + r"\, \tilde{K}") if m == "Q" else (
            r"\Big(" + DL % r"\text{Scores}" + r"\Big)^{\top} \tilde{Q}")
        return DL % m + r" = R^{\top} \Big(" + rotated + r"\Big)\quad \text{(RoPE's rotation, undone)}"
    if key == "grad_w" and o.cross:
        for m in ("K", "V"):  # keys and values come from the source sentence C
            grad = DL % m
            formula = formula.replace(rf"X^{{\top}} {grad}", rf"C^{{\top}} {grad}")
    return formula


def _formula(stage: Stage, formula: str, o: Options) -> str:
    """The stage's formula as the run computes it: C for keys and values in cross-attention, the
    mask only when one is on, ÷√d_k and τ as set, ALiBi's bias and RoPE's rotation where on."""
    key = stage.key
    if stage.backward:
        return _backward_formula(key, formula, o)
    if key == "x":
        x = r"X = E + P \in \mathbb{R}^{T \times d_{\text{model}}}" if o.added_pe else formula
        return x + (r",\qquad C \in \mathbb{R}^{S \times d_{\text{model}}}" if o.cross else "")
    if key == "qkv" and o.cross:
        return r"Q = X W_Q,\quad K = C W_K,\quad V = C W_V"
    if key == "scores" and o.score == "dot" and o.rope:
        return (r"\text{Scores} = \text{RoPE}(Q)\, \text{RoPE}(K)^{\top},\qquad "
                r"\text{Scores}_{ij} = \sum_{k=1}^{d_k} \tilde{Q}_{ik}\, \tilde{K}_{jk}")
    if key == "scaled" and o.score != "additive":
        top = r"Q K^{\top}" if o.score == "dot" else r"\text{Scores}"
        below = [r"\sqrt{d_k}"] if o.scale else []
        if o.temperature:
            below.append(r"\tau")
        scaled = r"\frac{" + top + "}{" + r"\,".join(below) + "}" if below else top
        bias = r" + B,\qquad B_{ij} = -m\, |i - j|" if o.alibi else ""
        return rf"\text{{Scaled}} = {scaled}{bias}"
    if key == "scaled" and o.alibi:
        return formula + r" + B,\qquad B_{ij} = -m\, |i - j|"
    if key == "softmax" and not o.masked:
        return r"A_{ij} = \frac{\exp(\text{Scaled}_{ij})}{\sum_{j\prime} \exp(\text{Scaled}_{ij\prime})}"
    if key == "output" and o.attention == "linear" and o.masked:  # each query's sums skip its hidden keys
        return (r"\text{Output}_i = \frac{\sum_{j \text{ seen by } i} \varphi(q_i)^{\top} \varphi(k_j)\, v_j}"
                r"{\sum_{j \text{ seen by } i} \varphi(q_i)^{\top} \varphi(k_j)},\qquad \varphi(x) = \text{elu}(x) + 1")
    if key == "multihead" and o.cross:
        return r"\text{MultiHead}(X, C) = \text{Concat}(\text{head}_1, \ldots, \text{head}_h)\, W_O"
    if key == "ffn":  # the activation's own formula is in the stage's note
        return formula.replace(r"\text{act}", ACTIVATION_TEX[o.activation])
    return formula


def describe(stage: Stage, options: Options | None = None) -> tuple[str, str, str]:
    """The stage's title (prose with $…$ maths), formula (LaTeX) and explanation (prose) for these
    options."""
    o = options or Options()
    for option in (o.score, o.attention, o.norm):
        if (stage.key, option) in VARIANTS:
            title, formula, explanation = VARIANTS[(stage.key, option)]
            return title, _formula(stage, formula, o), explanation
    return stage.title, _formula(stage, stage.formula, o), stage.explanation
