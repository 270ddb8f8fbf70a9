"""The forward pass as notebook code: the state as literals, then one short cell per stage in paper notation.

Every head at once, as the paper writes it: ``W_Q`` is (h, d_model, d_k), so ``Q = X @ W_Q`` is (h, T, d_k).
The code is written for the run's own options (score function, mask, positions, linear attention,
transformer blocks) and nothing else, so a student reads only what their page computed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.maths.blocks import LAYER_NORM_EPS
from app.maths.positions import ENCODINGS, alibi_slopes, rotates
from app.maths.records import AttentionRun, TransformerRun
from app.maths.weights import BLOCK_WEIGHT_NAMES
from app.view.notebook.literals import array_literal, number, shape_text

# The pipeline's weight names → the notebook's (paper notation; the FFN's W₁, W₂ apart from Bahdanau's).
WEIGHT_VARS = {"w_q": "W_Q", "w_k": "W_K", "w_v": "W_V", "w_o": "W_O", "w_a": "W_a", "w_1": "W_1", "w_2": "W_2",
               "v_a": "v_a", "ffn_w1": "W_ffn1", "ffn_b1": "b_ffn1", "ffn_w2": "W_ffn2", "ffn_b2": "b_ffn2",
               "ln1_gamma": "gamma_1", "ln1_beta": "beta_1", "ln2_gamma": "gamma_2", "ln2_beta": "beta_2"}
ACTIVATION_CODE = {
    "relu": "np.maximum(F_hidden, 0.0)  # ReLU",
    "gelu": "0.5 * F_hidden * (1.0 + np.vectorize(math.erf)(F_hidden / math.sqrt(2.0)))  # GELU, exact",
    "gelu_tanh": "0.5 * F_hidden * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (F_hidden + 0.044715 * F_hidden**3)))",
}


@dataclass(frozen=True)
class Setting:
    """What of the run shapes the code."""

    score: str
    attention: str
    cross: bool
    masked: bool
    rope: bool
    alibi: bool
    pe: str  # "sinusoidal", "learned" or "" (none added to X)
    scales: bool
    temperature: float
    blocks: int
    norm: str
    activation: str

    @property
    def source(self) -> str:
        """Where keys and values come from."""
        return "C" if self.cross else "X_heads" if self.blocks and self.norm == "pre" else "X"


def setting(run: AttentionRun, stack: TransformerRun | None, norm: str, activation: str) -> Setting:
    pe = stack.positional_encoding if stack is not None else run.positional_encoding
    return Setting(
        score=run.score, attention=run.attention, cross=run.context is not None, masked=run.mask is not None,
        rope=rotates(pe), alibi=ENCODINGS[pe].biases_scores, pe=pe if ENCODINGS[pe].adds_to_x else "",
        scales=run.scales, temperature=run.temperature, blocks=0 if stack is None else len(stack.blocks),
        norm=norm, activation=activation,
    )


def _assign(name: str, a: np.ndarray, what: str) -> str:
    return f"{name} = {array_literal(a)}  # {shape_text(np.shape(a))} {what}"


def state_code(s: Setting, tokens: tuple[str, ...], key_tokens: tuple[str, ...], run: AttentionRun,
               stack: TransformerRun | None, x_input: np.ndarray, context_input: np.ndarray | None) -> str:
    """The page's state: tokens, embeddings, every weight and the options, as literals."""
    w = run.weights
    t, d_model = x_input.shape
    lines = [f"tokens = {list(tokens)!r}", f"T, d_model = {t}, {d_model}",
             f"h, d_k, d_v = {run.num_heads}, {run.d_k}, {run.d_v}  # heads, query/key size, value size",
             f"tau = {number(s.temperature)}  # the temperature", ""]
    lines.append(_assign("X_embed" if s.pe else "X", x_input, "one row per token"))
    if s.cross:
        lines += ["", f"source_tokens = {list(key_tokens)!r}", f"S = {len(key_tokens)}",
                  _assign("C_embed" if s.pe else "C", context_input, "the source sentence: keys and values")]
    else:
        lines.append("S = T  # self-attention: the keys are the tokens themselves")
    lines.append("")
    names = ["w_q", "w_k", "w_v", "w_o"] + {"general": ["w_a"], "additive": ["w_1", "w_2", "v_a"]}.get(s.score, [])
    for name in names:
        lines.append(_assign(WEIGHT_VARS[name], getattr(w, name), ""))
    if stack is not None:
        for name in BLOCK_WEIGHT_NAMES:
            lines.append(_assign(WEIGHT_VARS[name], getattr(stack.blocks[0].weights, name), "block 1"))
    if s.pe == "learned":
        lines.append(_assign("P", (stack.pe if stack is not None else run.pe), "the learned position table"))
    if run.mask is not None:
        lines += ["", _assign("mask", run.mask, "True: key j is hidden from query i")]
    return "\n".join(lines)


def setup_code(s: Setting) -> str:
    """The imports and the few functions the stages call."""
    lines = ["import math", "", "import numpy as np", "",
             "np.set_printoptions(precision=4, suppress=True, linewidth=120)", "", "", "def softmax_rows(z):",
             '    """exp of each entry over its row\'s sum; the row maximum is subtracted first (no overflow)."""',
             "    e = np.exp(z - z.max(axis=-1, keepdims=True))",
             "    return e / e.sum(axis=-1, keepdims=True)"]
    if s.rope:
        lines += ["", "", "def rope(x):",
                  '    """RoPE: rotate each pair (x_2i, x_2i+1) at position pos by pos·θ_i, θ_i = 10000^(−2i/d)."""',
                  "    t, d = x.shape[-2], x.shape[-1]", "    half = d // 2",
                  "    theta = np.power(10000.0, -2.0 * np.arange(half) / d)",
                  "    angle = np.arange(t)[:, None] * theta[None, :]", "    cos, sin = np.cos(angle), np.sin(angle)",
                  "    out = x.copy()", "    even, odd = x[..., 0 : 2 * half : 2], x[..., 1 : 2 * half : 2]",
                  "    out[..., 0 : 2 * half : 2] = even * cos - odd * sin",
                  "    out[..., 1 : 2 * half : 2] = even * sin + odd * cos", "    return out"]
    if s.blocks:
        lines += ["", "", f"def layer_norm(z, gamma, beta, eps={LAYER_NORM_EPS!r}):",
                  '    """Each row to mean 0 and variance 1 over its features, then the gain γ and bias β."""',
                  "    mean, var = z.mean(axis=-1), z.var(axis=-1)",
                  "    return gamma * ((z - mean[:, None]) / np.sqrt(var[:, None] + eps)) + beta"]
    if s.attention == "linear":
        lines += ["", "", "def phi(x):", '    """φ(x) = elu(x) + 1: always positive, like exp."""',
                  "    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))"]
    return "\n".join(lines)


def positions_code(s: Setting, run: AttentionRun) -> str:
    """Stage x: the positional encoding added to the embeddings (or nothing)."""
    if not s.pe:
        return "X  # the input: one row per token, as the state gives it"
    rows = "max(T, S)"
    lines = []
    if s.pe == "sinusoidal":
        lines += [f"pos = np.arange({rows})[:, None]",
                  "two_i = (np.arange(d_model) // 2 * 2)[None, :]",
                  "angle = pos / np.power(10000.0, two_i / d_model)",
                  "P = np.where(np.arange(d_model) % 2 == 0, np.sin(angle), np.cos(angle))  # sin, cos, sin, …"]
    lines.append("X = X_embed + P[:T]  # (T, d_model) the embeddings plus their positions")
    if s.cross:
        lines.append("C = C_embed + P[:S]  # (S, d_model)")
    return "\n".join(lines)


def attention_lines(s: Setting, run: AttentionRun) -> dict[str, list[str]]:
    """The code of each attention stage, by stage key, for every head at once."""
    src = s.source
    heads_in = "X_heads" if s.blocks and s.norm == "pre" else "X"
    qkv = []
    if s.blocks and s.norm == "pre":
        qkv.append("X_heads = layer_norm(X, gamma_1, beta_1)  # pre-norm: the heads see LayerNorm₁(X)")
    qkv += [f"Q = {heads_in} @ W_Q  # (h, T, d_k)", f"K = {src} @ W_K  # (h, S, d_k)",
            f"V = {src} @ W_V  # (h, S, d_v)"]
    q_s, k_s = "Q", "K"
    if s.rope:
        qkv.append("Q_rot, K_rot = rope(Q), rope(K)  # positions rotate queries and keys")
        q_s, k_s = "Q_rot", "K_rot"
    kt = f"{k_s}.transpose(0, 2, 1)"
    if s.score == "dot":
        scores = [f"scores = {q_s} @ {kt}  # (h, T, S)"]
    elif s.score == "general":
        scores = [f"QW_a = {q_s} @ W_a  # (h, T, d_k)", f"scores = QW_a @ {kt}  # (h, T, S)"]
    else:
        scores = [f"QW_1, KW_2 = {q_s} @ W_1, {k_s} @ W_2  # (h, T, d_a), (h, S, d_a)",
                  "H = np.tanh(QW_1[:, :, None, :] + KW_2[:, None, :, :])  # (h, T, S, d_a)",
                  'scores = np.einsum("htsa,ha->hts", H, v_a)  # (h, T, S)']
    divisor = "(np.sqrt(d_k) * tau)" if s.scales else "tau"
    scaled = [f"scaled = scores / {divisor}  # (h, T, S)"]
    if s.alibi:
        slopes = alibi_slopes(run.num_heads)
        scaled = [f"m = np.array([{', '.join(number(v) for v in slopes)}])  # ALiBi's slope per head",
                  "B = -m[:, None, None] * np.abs(np.arange(T)[:, None] - np.arange(S)[None, :])  # (h, T, S)",
                  f"scaled = scores / {divisor} + B  # (h, T, S)"]
    mask = ["masked = np.where(mask, -np.inf, scaled)  # (h, T, S) hidden keys at −∞" if s.masked
            else "masked = scaled  # no key is hidden"]
    softmax = ["A = softmax_rows(masked)  # (h, T, S) each row sums to 1"]
    output = ["head_out = A @ V  # (h, T, d_v)"]
    if s.attention == "linear":
        output = ["softmax_out = A @ V  # (h, T, d_v) kept to compare",
                  f"phi_Q, phi_K = phi({q_s}), phi({k_s})  # (h, T, d_k), (h, S, d_k)",
                  "kv = phi_K.transpose(0, 2, 1) @ V  # (h, d_k, d_v) the summary φ(K)ᵀV",
                  "kernel = phi_Q @ phi_K.transpose(0, 2, 1)  # (h, T, S) φ(q_i)·φ(k_j)"]
        if s.masked:
            output += ["kernel = np.where(mask, 0.0, kernel)  # a hidden key drops out of each sum",
                       "z = kernel.sum(axis=2)  # (h, T)", "head_out = kernel @ V / z[:, :, None]  # (h, T, d_v)"]
        else:
            output += ['z = np.einsum("htk,hk->ht", phi_Q, phi_K.sum(axis=1))  # (h, T) φ(q_i)·Σ_j φ(k_j)',
                       "head_out = phi_Q @ kv / z[:, :, None]  # (h, T, d_v)"]
        output.append("A_linear = kernel / z[:, :, None]  # (h, T, S) the weights it implies")
    multihead = ["concat = np.concatenate([head_out[i] for i in range(h)], axis=1)  # (T, h·d_v)",
                 "output = concat @ W_O  # (T, d_model)"]
    return {"qkv": qkv, "scores": scores, "scaled": scaled, "mask": mask, "softmax": softmax, "output": output,
            "multihead": multihead}


def block_lines(s: Setting) -> dict[str, list[str]]:
    """The block's sub-steps around attention (post- or pre-norm)."""
    if s.norm == "post":
        add1 = ["residual_1 = X + output  # (T, d_model)", "H_1 = layer_norm(residual_1, gamma_1, beta_1)"]
        ffn_in = "H_1"
        add2 = ["residual_2 = H_1 + F_out", "out = layer_norm(residual_2, gamma_2, beta_2)  # the block's output"]
    else:
        add1 = ["H_1 = X + output  # (T, d_model) the residual adds the untouched input"]
        ffn_in = "layer_norm(H_1, gamma_2, beta_2)"
        add2 = ["out = H_1 + F_out  # the block's output: no norm after it"]
    ffn = [f"F_hidden = {ffn_in} @ W_ffn1 + b_ffn1  # (T, d_ff)", f"F_act = {ACTIVATION_CODE[s.activation]}",
           "F_out = F_act @ W_ffn2 + b_ffn2  # (T, d_model)"]
    return {"addnorm1": add1, "ffn": ffn, "addnorm2": add2}


def later_blocks_code(s: Setting, run: AttentionRun, stack: TransformerRun) -> str:
    """Blocks 2 … N: the same steps as a function, each block with its own weights, from block 1's output."""
    steps = attention_lines(s, run)
    steps.update(block_lines(s))
    names = ["W_Q", "W_K", "W_V", "W_O"] + {"general": ["W_a"], "additive": ["W_1", "W_2", "v_a"]}.get(s.score, [])
    names += [WEIGHT_VARS[n] for n in BLOCK_WEIGHT_NAMES]
    body = [line for key in ("qkv", "scores", "scaled", "mask", "softmax", "output", "multihead",
                             "addnorm1", "ffn", "addnorm2") for line in steps[key]]
    lines = ["def block(X, " + ", ".join(names) + "):",
             '    """One transformer block: the cells above, one after another."""']
    lines += ["    " + line for line in body]
    lines += ["    return out", "", ""]
    weight_sources = {**{WEIGHT_VARS[n]: n for n in ("w_q", "w_k", "w_v", "w_o", "w_a", "w_1", "w_2", "v_a")}}
    block_outputs = ["block_outputs = [out]  # block 1's, from the cells above"]
    for b, block in enumerate(stack.blocks[1:], start=2):
        lines.append(f"# block {b}'s weights: drawn from its own seeded stream on the page")
        for var in names:
            source = block.attention.weights if var in weight_sources else block.weights
            attr = weight_sources.get(var) or next(n for n in BLOCK_WEIGHT_NAMES if WEIGHT_VARS[n] == var)
            lines.append(f"{var}_{b} = {array_literal(getattr(source, attr))}")
        lines.append("")
    for b in range(2, len(stack.blocks) + 1):
        args = ", ".join(f"{var}_{b}" for var in names)
        block_outputs.append(f"block_outputs.append(block(block_outputs[-1], {args}))")
    return "\n".join(lines + block_outputs + ["final = block_outputs[-1]  # (T, d_model) the stack's output"])
