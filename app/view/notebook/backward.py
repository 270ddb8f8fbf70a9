"""The backward pass of one head as notebook code, once the Learn panel has a loss: from the loss to
∂L/∂A, through the softmax, to ∂L/∂Q, ∂L/∂K, ∂L/∂V and the weights' gradients.

The steps are app.maths.backward's, written for one head ``i`` in paper notation (row vectors, Q = X·W_Q).
"""

from __future__ import annotations

import numpy as np

from app.maths.backward import Gradients
from app.view.notebook.forward import Setting
from app.view.notebook.literals import array_literal, shape_text


def loss_state(goal: str, target: np.ndarray, rows: tuple[int, ...], head: int) -> str:
    """The loss's target, as the state cell's last lines."""
    what = "a target for head i's weights, each row a distribution" if goal == "attention" else "the output's target"
    lines = [f"i = {head}  # the head whose backward pass is shown (head {head + 1} on the page)",
             f"target = {array_literal(target)}  # {shape_text(target.shape)} {what}"]
    if goal == "attention":
        kept = list(rows) if rows else "list(range(T))"
        lines.append(f"rows = {kept}  # the query rows the loss counts")
    return "\n".join(lines)


def backward_lines(s: Setting, goal: str) -> dict[str, list[str]]:
    """The code of each backward stage, by stage key."""
    q_s, k_s = ("Q_rot", "K_rot") if s.rope else ("Q", "K")
    if goal == "attention":
        grad_a = [
            "A_i = A[i]  # (T, S)",
            "log_A = masked[i] - masked[i].max(axis=1, keepdims=True)",
            "log_A = log_A - np.log(np.exp(log_A).sum(axis=1, keepdims=True))  # log-softmax: finite where A is 0",
            "used = np.zeros_like(target, dtype=bool)",
            "used[rows] = target[rows] > 0",
            "loss = -np.sum(target[used] * log_A[used]) / len(rows)  # cross-entropy over the counted rows",
            "dL_dA = np.zeros_like(A_i)",
            "dL_dA[used] = -target[used] / (len(rows) * np.maximum(A_i[used], np.finfo(float).tiny))",
            "dL_dhead = np.zeros_like(head_out[i])  # the loss is on A itself: nothing comes from the output",
        ]
    else:
        grad_a = [
            "A_i = A[i]  # (T, S)",
            "loss = np.mean((output - target) ** 2)  # squared error of the output",
            "dL_doutput = 2.0 * (output - target) / output.size  # (T, d_model)",
            "dL_dconcat = dL_doutput @ W_O.T  # (T, h·d_v)",
            "dL_dhead = dL_dconcat[:, i * d_v : (i + 1) * d_v]  # (T, d_v) head i's slice of the concatenation",
            "dL_dA = dL_dhead @ V[i].T  # (T, S)",
        ]
    if s.masked:
        grad_a.append("dL_dA = np.where(mask, 0.0, dL_dA)  # a hidden key's weight is the constant 0")
    grad_scores = ["dL_dscaled = A_i * (dL_dA - (A_i * dL_dA).sum(axis=1, keepdims=True))  # the softmax's Jacobian"]
    if s.masked:
        grad_scores.append("dL_dscaled = np.where(mask, 0.0, dL_dscaled)")
    divisor = "(np.sqrt(d_k) * tau)" if s.scales else "tau"
    grad_scores.append(f"dL_dscores = dL_dscaled / {divisor}  # (T, S)")
    rot = "_rot" if s.rope else ""
    if s.score == "dot":
        grad_q = [f"dL_dQ{rot} = dL_dscores @ {k_s}[i]  # (T, d_k)"]
        grad_k = [f"dL_dK{rot} = dL_dscores.T @ {q_s}[i]  # (S, d_k)"]
    elif s.score == "general":
        grad_q = [f"dL_dQW_a = dL_dscores @ {k_s}[i]  # (T, d_k)", f"dL_dQ{rot} = dL_dQW_a @ W_a[i].T  # (T, d_k)"]
        grad_k = [f"dL_dK{rot} = dL_dscores.T @ QW_a[i]  # (S, d_k)"]
    else:
        grad_q = ["dL_dpre = (1.0 - H[i] ** 2) * v_a[i] * dL_dscores[:, :, None]  # (T, S, d_a) through tanh",
                  f"dL_dQ{rot} = dL_dpre.sum(axis=1) @ W_1[i].T  # (T, d_k)"]
        grad_k = [f"dL_dK{rot} = dL_dpre.sum(axis=0) @ W_2[i].T  # (S, d_k)"]
    if s.rope:  # the gradient of a rotation is the inverse rotation: negate the odd member of each pair
        grad_q += ["flip = np.ones(d_k)", "flip[1 : 2 * (d_k // 2) : 2] = -1.0",
                   "dL_dQ = rope(dL_dQ_rot * flip) * flip  # (T, d_k) the rotation undone"]
        grad_k += ["dL_dK = rope(dL_dK_rot * flip) * flip  # (S, d_k)"]
    grad_v = ["dL_dV = A_i.T @ dL_dhead  # (S, d_v)"]
    src = "C" if s.cross else "X"
    grad_w = ["dL_dW_Q = X.T @ dL_dQ  # (d_model, d_k)", f"dL_dW_K = {src}.T @ dL_dK", f"dL_dW_V = {src}.T @ dL_dV"]
    if goal == "output":
        grad_w.append("dL_dW_O = concat.T @ dL_doutput  # (h·d_v, d_model)")
    if s.score == "general":
        grad_w.append(f"dL_dW_a = {q_s}[i].T @ dL_dQW_a  # (d_k, d_k)")
    if s.score == "additive":
        grad_w += [f"dL_dW_1 = {q_s}[i].T @ dL_dpre.sum(axis=1)  # (d_k, d_a)",
                   f"dL_dW_2 = {k_s}[i].T @ dL_dpre.sum(axis=0)",
                   'dL_dv_a = np.einsum("ts,tsa->a", dL_dscores, H[i])  # (d_a,)']
    return {"grad_a": grad_a, "grad_scores": grad_scores, "grad_q": grad_q, "grad_k": grad_k, "grad_v": grad_v,
            "grad_w": grad_w}


def backward_expected(s: Setting, goal: str, head: int, loss: float, grads: Gradients) -> dict[str, np.ndarray]:
    """The server's numbers for the backward cells, by the notebook's names."""
    g, w = grads.heads[head], grads.weights
    out = {"loss": np.asarray(loss), "dL_dA": g.softmax, "dL_dscaled": g.scaled, "dL_dscores": g.scores,
           "dL_dQ": g.q, "dL_dK": g.k, "dL_dV": g.v,
           "dL_dW_Q": w.w_q[head], "dL_dW_K": w.w_k[head], "dL_dW_V": w.w_v[head]}
    if goal == "output":
        out["dL_dW_O"] = w.w_o
    if s.score == "general":
        out["dL_dW_a"] = w.w_a[head]
    if s.score == "additive":
        out.update(dL_dW_1=w.w_1[head], dL_dW_2=w.w_2[head], dL_dv_a=w.v_a[head])
    return out
