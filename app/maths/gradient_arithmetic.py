"""The arithmetic behind one cell of a gradient, with the run's actual numbers, for the cell inspector.

The backward pass (app.maths.backward) goes from the loss to the weights; each gradient cell here is rebuilt
from the gradient of the stage after it and the forward's values, by the chain rule, term by term:

    ∂L/∂MultiHead_ij = 2·(MultiHead_ij − target_ij) / (T·d_model)             (mean squared error)
    ∂L/∂Output_ij    = Σ_c ∂L/∂MultiHead_ic · (W_O)_{h·d_v+j, c}                (one head's rows of W_O)
    ∂L/∂A_ij         = Σ_d ∂L/∂Output_id · V_jd   (− t_ij / (T·A_ij) for the attention loss on A)
    ∂L/∂Scaled_ij    = A_ij · (∂L/∂A_ij − Σ_k A_ik · ∂L/∂A_ik)                  (the softmax backward)
    ∂L/∂Scores_ij    = ∂L/∂Scaled_ij / (√d_k·τ)
    ∂L/∂Q_id = Σ_j ∂L/∂Scores_ij · K_jd,   ∂L/∂K_jd = Σ_i ∂L/∂Scores_ij · Q_id,
    ∂L/∂V_jd = Σ_i A_ij · ∂L/∂Output_id
    ∂L/∂(W_Q)_ab = Σ_i X_ia · ∂L/∂Q_ib   (C for W_K and W_V in cross-attention)
    ∂L/∂(W_O)_rc = Σ_i Concat_ir · ∂L/∂MultiHead_ic

A hidden key's weight is the constant exp(−∞) = 0, so its ∂L/∂A, ∂L/∂Scaled and ∂L/∂Scores are 0.
RoPE adds a rotation back (∂L/∂Q = Rᵀ·∂L/∂Q̃); the general and additive scores an extra product.
Pure NumPy, like app.maths.arithmetic: a test checks that the written-out terms add up to app.maths.backward's numbers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import numpy as np

from app.i18n import N_
from app.maths.arithmetic import CellRef, Term, divisor_text
from app.maths.backward import Gradients
from app.maths.gradient_records import (
    GradientDivision,
    GradientExplanation,
    GradientNote,
    GradientSum,
    HiddenKey,
    Indexed,
    LossGradient,
    LossTerm,
    RopeGradient,
    SoftmaxBackward,
    SoftmaxBackwardEntry,
)
from app.maths.phrases import Phrase
from app.maths.positions import rope_theta, rotates
from app.maths.records import AttentionRun

GRADIENT_CELLS = ("g_final", "g_output", "g_softmax", "g_scaled", "g_scores", "g_q", "g_k", "g_v",
                  "g_w_q", "g_w_k", "g_w_v", "g_w_o")
# Their owner is the run, not a head: the reference's second number is always 0.
RUN_GRADIENTS = ("g_final", "g_w_o")
HEAD_GRADIENTS = ("g_output", "g_softmax", "g_scaled", "g_scores", "g_q", "g_k", "g_v")
GRADIENT_REF_RE = re.compile(rf"({'|'.join(GRADIENT_CELLS)})\.([0-9]+)\.([0-9]+)\.([0-9]+)")  # ASCII digits only
HIDDEN_KEY = "hidden key: a constant, gradient 0"


def gradient_matrix(grads: Gradients, matrix: str, owner: int) -> np.ndarray:
    """The whole gradient a reference points into; ValueError when the run has no such gradient
    (linear attention has no ∂L/∂A, ∂L/∂Scaled, ∂L/∂Scores) or no such head."""
    if matrix not in GRADIENT_CELLS:
        raise ValueError(f"{matrix!r} is not a gradient: one of {', '.join(GRADIENT_CELLS)}")
    if matrix in RUN_GRADIENTS:
        if owner != 0:
            raise ValueError(f"{matrix} belongs to the whole run: its owner is 0, not {owner}")
        return grads.output if matrix == "g_final" else grads.weights.w_o  # (T, d_model), (h·d_v, d_model)
    if not 0 <= owner < len(grads.heads):
        raise ValueError(f"head {owner} does not exist: the run has heads 0 to {len(grads.heads) - 1}")
    if matrix in HEAD_GRADIENTS:
        value = getattr(grads.heads[owner], matrix.removeprefix("g_"))
        if value is None:
            raise ValueError(f"{matrix} does not exist in this run: linear attention has no softmax weights")
        return value
    return getattr(grads.weights, matrix.removeprefix("g_"))[owner]  # (d_model, d_k) or (d_model, d_v)


def parse_gradient_ref(text: str, grads: Gradients) -> CellRef | None:
    """A reference "<matrix>.<owner>.<row>.<col>" (0-based) that names a real gradient cell, or None."""
    m = GRADIENT_REF_RE.fullmatch(text or "")  # fullmatch: "$" alone would let a trailing newline through
    if not m:
        return None
    ref = CellRef(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)))
    try:
        rows, cols = gradient_matrix(grads, ref.matrix, ref.head).shape
    except ValueError:
        return None
    return ref if ref.row < rows and ref.col < cols else None


def _terms(left: np.ndarray, right: np.ndarray, labels: list[str]) -> tuple[tuple[Term, ...], float]:
    products = left * right  # (n,)
    terms = tuple(Term(float(a), float(b), float(p), lab)
                  for a, b, p, lab in zip(left.tolist(), right.tolist(), products.tolist(), labels, strict=True))
    return terms, float(products.sum())


def _sum(ref: CellRef, title: str, of: Indexed, index: str, left: Indexed, right: Indexed,
         left_values: np.ndarray, right_values: np.ndarray, labels: list[str], *,
         direct: LossTerm | None = None, note: str = "") -> GradientSum:
    terms, total = _terms(left_values, right_values, labels)
    return GradientSum(ref, title, of, index, left, right, terms,
                       total + (0.0 if direct is None else direct.value), direct, note)


def _attention_target(run: AttentionRun, loss_spec: Mapping, head: int) -> np.ndarray | None:
    """t (T, S) when the loss is the attention loss on this head, else None."""
    if loss_spec.get("kind") != "attention" or int(loss_spec["head"]) != head:
        return None
    return np.asarray(loss_spec["target"], dtype=np.float64)  # (T, S)


def _loss_term(target: np.ndarray | None, a: np.ndarray, i: int, j: int) -> LossTerm | None:
    """−t_ij/(T·A_ij), dividing by the smallest positive float where A_ij underflowed, as app.maths.backward does."""
    if target is None:
        return None
    t, w, count = float(target[i, j]), float(a[i, j]), a.shape[0]
    value = -t / (count * max(w, float(np.finfo(np.float64).tiny))) if t > 0 else 0.0
    return LossTerm(t, w, count, value)


def _hidden(run: AttentionRun, i: int, j: int) -> bool:
    return run.mask is not None and bool(run.mask[i, j])


def _score_gradient(run: AttentionRun, grads: Gradients, ref: CellRef, title: str, which: str, row: int, col: int,
                    tokens: list[str], keys: list[str]) -> GradientSum:
    """∂L/∂Q̃_{row,col} (which = "q") or ∂L/∂K̃_{row,col} ("k"): the gradient on what the score compared,
    before any rotation back. Q̃, K̃ are Q, K themselves without RoPE."""
    h = ref.head
    head, g = run.heads[h], grads.heads[h]
    rope = head.q_rot is not None
    q_s = head.q if head.q_rot is None else head.q_rot  # (T, d_k)
    k_s = head.k if head.k_rot is None else head.k_rot  # (S, d_k)
    qn, kn = ("Q_rot", "K_rot") if rope else ("Q", "K")
    q_tex, k_tex = (r"\tilde{Q}", r"\tilde{K}") if rope else ("Q", "K")
    of = Indexed(f"∂{qn if which == 'q' else kn}", str(row + 1), str(col + 1))
    d_scores = g.scores  # (T, S)
    dims = [f"k{e + 1}" for e in range(run.d_k)]
    if run.score == "dot":
        if which == "q":  # ∂L/∂Q̃_id = Σ_j ∂L/∂Scores_ij · K̃_jd
            return _sum(ref, title, of, "j", Indexed("∂Scores", str(row + 1), "j"), Indexed(kn, "j", str(col + 1)),
                        d_scores[row], k_s[:, col], keys)
        # ∂L/∂K̃_jd = Σ_i ∂L/∂Scores_ij · Q̃_id
        return _sum(ref, title, of, "i", Indexed("∂Scores", "i", str(row + 1)), Indexed(qn, "i", str(col + 1)),
                    d_scores[:, row], q_s[:, col], tokens)
    if run.score == "general":
        w_a = run.weights.w_a[h]  # (d_k, d_k)
        qw = f"{qn}W_a"
        if which == "q":  # scores = (Q̃·W_a)·K̃ᵀ: ∂L/∂Q̃_id = Σ_e ∂L/∂(Q̃W_a)_ie · (W_a)_de
            d_q_w = d_scores @ k_s  # (T, d_k) ∂L/∂(Q̃·W_a) = ∂L/∂Scores·K̃
            note = Phrase(N_(r"$\partial L / \partial ({q} W_a) = \partial L / \partial \text{{Scores}} \cdot {k}$, "
                             r"as $\partial L / \partial Q$ would be for the dot score."), q=q_tex, k=k_tex)
            return _sum(ref, title, of, "e", Indexed(f"∂{qw}", str(row + 1), "e"), Indexed("W_a", str(col + 1), "e"),
                        d_q_w[row], w_a[col], dims, note=note)
        # ∂L/∂K̃_jd = Σ_i ∂L/∂Scores_ij · (Q̃W_a)_id
        return _sum(ref, title, of, "i", Indexed("∂Scores", "i", str(row + 1)), Indexed(qw, "i", str(col + 1)),
                    d_scores[:, row], head.q_w[:, col], tokens)
    # additive: scores_ij = Σ_a (v_a)_a·tanh((Q̃W₁)_ia + (K̃W₂)_ja)
    hidden = np.tanh(head.q_1[:, None, :] + head.k_2[None, :, :])  # (T, S, d_a)
    d_pre = d_scores[..., None] * run.weights.v_a[h] * (1.0 - hidden**2)  # (T, S, d_a)
    units = [f"a{a + 1}" for a in range(run.d_a)]
    if which == "q":  # ∂L/∂Q̃_id = Σ_a ∂L/∂(Q̃W₁)_ia · (W₁)_da
        note = Phrase(N_(r"$\partial L / \partial ({q} W_1)_{{i,a}} = \sum_j \partial L / \partial "
                         r"\text{{Scores}}_{{i,j}} \, (v_a)_a \, (1 - \tanh^2(\ldots))$, as $\tanh' = 1 - \tanh^2$."),
                      q=q_tex)
        return _sum(ref, title, of, "a", Indexed(f"∂{qn}W_1", str(row + 1), "a"), Indexed("W_1", str(col + 1), "a"),
                    d_pre[row].sum(axis=0), run.weights.w_1[h][col], units, note=note)
    note = Phrase(N_(r"$\partial L / \partial ({k} W_2)_{{j,a}} = \sum_i \partial L / \partial \text{{Scores}}_{{i,j}}"
                     r" \, (v_a)_a \, (1 - \tanh^2(\ldots))$, as $\tanh' = 1 - \tanh^2$."), k=k_tex)
    return _sum(ref, title, of, "a", Indexed(f"∂{kn}W_2", str(row + 1), "a"), Indexed("W_2", str(col + 1), "a"),
                d_pre[:, row].sum(axis=0), run.weights.w_2[h][col], units, note=note)


def _query_or_key_gradient(run: AttentionRun, grads: Gradients, ref: CellRef, title: str,
                           tokens: list[str], keys: list[str]) -> GradientExplanation:
    which = ref.matrix.removeprefix("g_")  # "q" or "k"
    i, d = ref.row, ref.col
    if run.attention == "linear":
        value = float(getattr(grads.heads[ref.head], which)[i, d])
        name = "Q" if which == "q" else "K"
        reason = N_(r"Linear attention: ${name}$ reaches the output only through "
                    r"$\varphi({name}) = \text{{elu}}({name}) + 1$, the summary $\varphi(K)^\top V$ and the "
                    r"normaliser $z$, so $\partial L / \partial {name} = \varphi'({name}) \odot \partial L / "
                    r"\partial \varphi({name})$, then RoPE's rotation back: not one sum of products."
                    ) if rotates(run.positional_encoding) else N_(
                    r"Linear attention: ${name}$ reaches the output only through "
                    r"$\varphi({name}) = \text{{elu}}({name}) + 1$, the summary $\varphi(K)^\top V$ and the "
                    r"normaliser $z$, so $\partial L / \partial {name} = \varphi'({name}) \odot \partial L / "
                    r"\partial \varphi({name})$: not one sum of products.")
        return GradientNote(ref, title, Phrase(reason, name=name), value)
    if not rotates(run.positional_encoding):
        return _score_gradient(run, grads, ref, title, which, i, d, tokens, keys)
    d_k = run.d_k
    pair = d // 2
    if 2 * pair + 1 >= d_k:  # an odd last dimension: RoPE leaves it as it is
        inner = _score_gradient(run, grads, ref, title, which, i, d, tokens, keys)
        return RopeGradient(ref, title, (inner,), True, i, pair, 0.0, 0.0, d_k, inner.total)
    even = _score_gradient(run, grads, ref, title, which, i, 2 * pair, tokens, keys)
    odd = _score_gradient(run, grads, ref, title, which, i, 2 * pair + 1, tokens, keys)
    theta = float(rope_theta(d_k, pair))
    angle = i * theta
    cos, sin = math.cos(angle), math.sin(angle)
    first = d % 2 == 0
    # Rᵀ: the rotation by −α
    result = even.total * cos + odd.total * sin if first else -even.total * sin + odd.total * cos
    return RopeGradient(ref, title, (even, odd), first, i, pair, theta, angle, d_k, result)


def explain_gradient(run: AttentionRun, grads: Gradients, loss_spec: Mapping, ref: CellRef, tokens: list[str],
                     key_tokens: list[str] | None, dims: list[str]) -> GradientExplanation:
    """The explanation of one gradient cell; ``ref`` comes from parse_gradient_ref, so it is in range.

    ``grads`` is loss_and_gradients(run, loss_spec)'s; ``key_tokens`` name the keys (the source sentence
    in cross-attention; ``tokens`` when None); ``dims`` name the d_model columns.
    """
    keys = tokens if key_tokens is None else key_tokens
    i, j, h = ref.row, ref.col, ref.head
    d_v = run.d_v

    def of_head(title: str) -> str:  # a title naming its head when the run has several (English, a Phrase)
        return Phrase(N_("{title} (head {n})"), title=title, n=h + 1) if run.num_heads > 1 else title

    if ref.matrix == "g_final":
        title = Phrase(N_("{name}, row {row} ({token}), column {col} ({dim})"), name="∂L/∂MultiHead", row=i + 1,
                       token=tokens[i], col=j + 1, dim=dims[j])
        count = run.output.size
        if loss_spec.get("kind") == "mse":
            output, target = float(run.output[i, j]), float(np.asarray(loss_spec["target"], dtype=np.float64)[i, j])
            return LossGradient(ref, title, "mse", output, target, count, 2.0 * (output - target) / count)
        return LossGradient(ref, title, "attention", None, None, count, 0.0, int(loss_spec["head"]))

    if ref.matrix == "g_w_o":
        owner, v_col = divmod(i, d_v)
        title = Phrase(N_("∂L/∂W_O, row {row} (head {head}, v{v}), column {col} ({dim})"), row=i + 1, head=owner + 1,
                       v=v_col + 1, col=j + 1, dim=dims[j])
        return _sum(ref, title, Indexed("∂W_O", str(i + 1), str(j + 1)), "i", Indexed("Concat", "i", str(i + 1)),
                    Indexed("∂MultiHead", "i", str(j + 1)), run.concat[:, i], grads.output[:, j], tokens)

    if ref.matrix in ("g_w_q", "g_w_k", "g_w_v"):
        name = ref.matrix.removeprefix("g_w_")  # q, k, v
        big = name.upper()
        source, src = (run.x, "X") if name == "q" or run.context is None else (run.context, "C")
        row_tokens = tokens if name == "q" else keys
        letter = "i" if name == "q" else "j"
        title = of_head(Phrase(N_("{name}, row {row} ({token}), column {col} ({dim})"), name=f"∂L/∂W_{big}",
                               row=i + 1, token=dims[i], col=j + 1, dim=f"{name}{j + 1}"))
        rope = name != "v" and rotates(run.positional_encoding)
        note = Phrase(N_(r"$\partial L / \partial {name}$ is on ${name}$ as projected, before RoPE turned it: the "
                         "rotated gradient turned back."), name=big) if rope else ""
        return _sum(ref, title, Indexed(f"∂W_{big}", str(i + 1), str(j + 1)), letter,
                    Indexed(src, letter, str(i + 1)), Indexed(f"∂{big}", letter, str(j + 1)),
                    source[:, i], getattr(grads.heads[h], name)[:, j], row_tokens, note=note)

    head, g = run.heads[h], grads.heads[h]
    if ref.matrix == "g_output":
        title = of_head(Phrase(N_("∂L/∂Output of query {query} ({token}), column {col} (v{col})"), query=i + 1,
                               token=tokens[i], col=j + 1))
        r = h * d_v + j  # this head's column j is row r of W_O
        return _sum(ref, title, Indexed("∂Output", str(i + 1), str(j + 1)), "c",
                    Indexed("∂MultiHead", str(i + 1), "c"), Indexed("W_O", str(r + 1), "c"),
                    grads.output[i], run.weights.w_o[r], dims)

    if ref.matrix == "g_v":
        title = of_head(Phrase(N_("∂L/∂V, key {key} ({key_token}), column {col} (v{col})"), key=i + 1,
                               key_token=keys[i], col=j + 1))
        linear = head.linear is not None
        a = head.linear.weights if linear else head.softmax  # (T, S)
        note = Phrase(N_(r"$A^{{\text{{lin}}}}_{{i,j}} = \varphi(q_i) \cdot \varphi(k_j) / z_i$: the weights linear "
                         "attention implies.")) if linear else ""
        return _sum(ref, title, Indexed("∂V", str(i + 1), str(j + 1)), "i", Indexed("A_lin" if linear else "A", "i",
                    str(i + 1)), Indexed("∂Output", "i", str(j + 1)), a[:, i], g.output[:, j], tokens, note=note)

    if ref.matrix in ("g_q", "g_k"):
        if ref.matrix == "g_q":
            title = Phrase(N_("∂L/∂Q, query {query} ({token}), column {col} (q{col})"), query=i + 1, token=tokens[i],
                           col=j + 1)
        else:
            title = Phrase(N_("∂L/∂K, key {key} ({key_token}), column {col} (k{col})"), key=i + 1, key_token=keys[i],
                           col=j + 1)
        title = of_head(title)
        return _query_or_key_gradient(run, grads, ref, title, tokens, keys)

    # g_softmax, g_scaled, g_scores: softmax attention only (parse_gradient_ref refuses them otherwise)
    name = {"g_softmax": "A", "g_scaled": "Scaled", "g_scores": "Scores"}[ref.matrix]
    title = of_head(Phrase(N_("{name} of query {query} ({token}) for key {key} ({key_token})"), name=f"∂L/∂{name}",
                           query=i + 1, token=tokens[i], key=j + 1, key_token=keys[j]))
    if _hidden(run, i, j):
        return HiddenKey(ref, title, f"{HIDDEN_KEY[0].upper()}{HIDDEN_KEY[1:]}. Key {j + 1} ({keys[j]}) is hidden "
                         f"from query {i + 1} ({tokens[i]}), so its weight is exp(−∞) = 0 whatever the score: "
                         "nothing before the mask can change it.", tokens[i], keys[j])
    a = head.softmax  # (T, S)
    if ref.matrix == "g_softmax":
        direct = _loss_term(_attention_target(run, loss_spec, h), a, i, j)
        return _sum(ref, title, Indexed("∂A", str(i + 1), str(j + 1)), "d", Indexed("∂Output", str(i + 1), "d"),
                    Indexed("V", str(j + 1), "d"), g.output[i], head.v[j], [f"v{e + 1}" for e in range(d_v)],
                    direct=direct)
    if ref.matrix == "g_scaled":
        d_a = g.softmax  # (T, S)
        products = a[i] * d_a[i]  # (S,)
        row_sum = float(products.sum())
        hidden = run.mask[i] if run.mask is not None else np.zeros(a.shape[1], dtype=bool)
        entries = tuple(
            SoftmaxBackwardEntry(tok, float(w), float(dw), float(p), k == j, bool(hid))
            for k, (tok, w, dw, p, hid) in enumerate(zip(keys, a[i].tolist(), d_a[i].tolist(), products.tolist(),
                                                         hidden.tolist(), strict=True))
        )
        target = _attention_target(run, loss_spec, h)
        weight, grad = float(a[i, j]), float(d_a[i, j])
        return SoftmaxBackward(ref, title, entries, row_sum, weight, grad, weight * (grad - row_sum),
                               None if target is None else float(target[i, j]), a.shape[0])
    # g_scores
    return GradientDivision(ref, title, float(g.scaled[i, j]), run.scale_factor, divisor_text(run),
                            float(g.scaled[i, j]) / run.scale_factor, head.bias is not None)
