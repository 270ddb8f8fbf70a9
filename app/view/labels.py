"""The words around the heatmaps: titles as plain text and as typeset maths, and the labels of rows,
columns and heads (counted from 1, as the page counts them)."""

from __future__ import annotations

from app.i18n import N_
from app.i18n import gettext as _
from app.lesson.presets import PRESETS
from app.state.scenario import Scenario

# A gradient's matrix: its name in a plain title (∂L/∂A) and in LaTeX.
GRADIENT_TITLES = {"final": "MultiHead", "output": "Output", "softmax": "A", "scaled": "Scaled", "scores": "Scores",
                   "q": "Q", "k": "K", "v": "V", "w_q": "W_Q", "w_k": "W_K", "w_v": "W_V", "w_o": "W_O"}
GRADIENT_TEX = {"final": r"\text{MultiHead}", "output": r"\text{Output}", "softmax": "A", "scaled": r"\text{Scaled}",
                "scores": r"\text{Scores}", "q": "Q", "k": "K", "v": "V", "w_q": "W_Q", "w_k": "W_K", "w_v": "W_V",
                "w_o": "W_O"}

# Heatmap titles (plain text: table captions, exports) and the same as prose with typeset maths.
TITLE_TEX: dict[str, str] = {
    "Q": "$Q$", "K": "$K$", "V": "$V$", "Kᵀ": r"$K^{\top}$",
    "Q = X·W_Q": "$Q = X W_Q$", "K = C·W_K": "$K = C W_K$", "V = C·W_V": "$V = C W_V$",
    "W_Q": "$W_Q$", "W_K": "$W_K$", "W_V": "$W_V$", "W_O": "$W_O$", "W_a": "$W_a$", "W₁": "$W_1$",
    "W₂": "$W_2$", "v_a": "$v_a$",
    N_("Q rotated (RoPE)"): N_(r"$\tilde{Q}$: $Q$ rotated (RoPE)"),
    N_("K rotated (RoPE)"): N_(r"$\tilde{K}$: $K$ rotated (RoPE)"),
    N_("ALiBi bias −m·|i−j|"): N_(r"ALiBi bias $-m\, |i - j|$"),
    "Q·W_a": "$Q W_a$", "Q·W₁": "$Q W_1$", "K·W₂": "$K W_2$",
    N_("Scores Q·Kᵀ"): N_(r"Scores $Q K^{\top}$"), N_("Scores (Q·W_a)·Kᵀ"): N_(r"Scores $(Q W_a) K^{\top}$"),
    N_("Scores v_a·tanh(q_i·W₁ + k_j·W₂)"): N_(r"Scores $v_a \cdot \tanh(q_i W_1 + k_j W_2)$"),
    N_("Scaled Q·Kᵀ/√d_k"): N_(r"Scaled $Q K^{\top} / \sqrt{d_k}$"),
    N_("Scaled (additive: not ÷√d_k)"): N_(r"Scaled (additive: not $\div \sqrt{d_k}$)"),
    N_("Scaled (÷√d_k off)"): N_(r"Scaled ($\div \sqrt{d_k}$ off)"),
    N_("Attention weights A"): N_("Attention weights $A$"),
    N_("Attention weights A (softmax)"): N_("Attention weights $A$ (softmax)"),
    "φ(Q) = elu(Q) + 1": r"$\varphi(Q) = \text{elu}(Q) + 1$", "φ(K) = elu(K) + 1": r"$\varphi(K) = \text{elu}(K) + 1$",
    N_("φ(K)ᵀ·V (built once)"): N_(r"$\varphi(K)^{\top} V$ (built once)"),
    N_("Output A·V"): N_("Output $A V$"), N_("Softmax attention's output A·V"): N_("Softmax attention's output $A V$"),
    "Concat(head₁ … head_h)": r"$\text{Concat}(\text{head}_1, \ldots, \text{head}_h)$",
    "MultiHead(X) = Concat·W_O": r"$\text{MultiHead}(X) = \text{Concat}\, W_O$",
    N_("X = embeddings + PE"): "$X = E + P$", N_("Embeddings"): N_("Embeddings $E$"),
    N_("LayerNorm₁(X): what the heads see"): N_(r"$\text{LayerNorm}_1(X)$: what the heads see"),
    "MultiHead(LN₁(X))": r"$\text{MultiHead}(\text{LN}_1(X))$", "MultiHead(X)": r"$\text{MultiHead}(X)$",
    "X + MultiHead": r"$X + \text{MultiHead}$", "X + MultiHead = H": r"$X + \text{MultiHead} = H$",
    "H = LayerNorm₁(X + MultiHead)": r"$H = \text{LayerNorm}_1(X + \text{MultiHead})$",
    "LayerNorm₂(H)": r"$\text{LayerNorm}_2(H)$", "H": "$H$", "X": "$X$", "FFN": r"$\text{FFN}$",
    "H·W₁ + b₁": "$H W_1 + b_1$", "FFN = act·W₂ + b₂": r"$\text{FFN} = \text{act}\, W_2 + b_2$",
    "ReLU(H·W₁ + b₁)": r"$\text{ReLU}(H W_1 + b_1)$", "GELU(H·W₁ + b₁)": r"$\text{GELU}(H W_1 + b_1)$",
    "GELU_tanh(H·W₁ + b₁)": r"$\text{GELU}_{\tanh}(H W_1 + b_1)$",
    "H + FFN": r"$H + \text{FFN}$",
    N_("Source sentence C (keys and values)"): N_("Source sentence $C$ (keys and values)"),
    N_("LayerNorm₁ row statistics"): N_(r"$\text{LayerNorm}_1$ row statistics"),
    N_("LayerNorm₂ row statistics"): N_(r"$\text{LayerNorm}_2$ row statistics"),
}


def token_labels(tokens: tuple[str, ...]) -> list[str]:
    """"1 the", "2 cat", …: the page counts rows, columns and heads from 1."""
    return [f"{i + 1} {t}" for i, t in enumerate(tokens)]


def head_name(layer: int, head: int) -> str:
    """"L5 H3": a real model's head, layer and head counted from 1; the one name every page and figure gives it."""
    return _("L{layer} H{head}").format(layer=layer + 1, head=head + 1)


def numbered(prefix: str, n: int) -> list[str]:
    """q1, q2, …: the labels of rows or columns that are not tokens."""
    return [f"{prefix}{j + 1}" for j in range(n)]


def head_label(sc: Scenario, h: int) -> str:
    """"head 3", or "head 3: where" when the preset names its heads."""
    p = PRESETS.get(sc.preset)
    names = p.head_names if p is not None and len(p.head_names) == sc.num_heads else ()
    if names:
        return _("head {n}: {name}").format(n=h + 1, name=_(names[h]))
    return _("head {n}").format(n=h + 1)


def dim_labels(sc: Scenario) -> list[str]:
    """The embedding dimensions' names: the preset's when it names them, else x1, x2, …"""
    p = PRESETS.get(sc.preset)
    if p is not None and len(p.dim_names) == sc.d_model:
        return [_(name) for name in p.dim_names]
    return [f"x{j + 1}" for j in range(sc.d_model)]

