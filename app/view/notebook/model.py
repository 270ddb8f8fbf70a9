"""The real model's head as a notebook: a sentence's tokens, one layer's input X, one head's slices of W_Q, W_K,
W_V and their biases, then Q, K, V, scores, ÷√d_k, softmax and A·V with plain NumPy, checked against the page.

Small enough to read: one head's weight slices (3 × 384 × 32 numbers), not the model. The model computes in
float32 and so does the notebook; the check allows float32's precision (a different order of the same sums
moves the last of its 7 digits).
"""

from __future__ import annotations

import nbformat
import numpy as np
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from app.i18n import N_
from app.i18n import gettext as _
from app.maths.bert import ModelRun, head_result
from app.maths.model_files import ModelFiles
from app.view.notebook.literals import array_literal, shape_text

MODEL_RTOL = 1e-5
MODEL_ATOL = 1e-6
KERNEL = {"name": "python3", "display_name": "Python 3", "language": "python"}


def _float32(name: str, a: np.ndarray, what: str) -> str:
    return f"{name} = {array_literal(np.asarray(a, dtype=np.float32))}  # {shape_text(np.shape(a))} {what}"


def model_notebook(model: ModelFiles, text: str, run: ModelRun, layer: int, head: int) -> NotebookNode:
    """Head ``head`` of layer ``layer`` (from 0) on the run of the sentence ``text``, stage by stage, with its
    own check."""
    lw = model.weights.layers[layer]
    h = head_result(model, run, layer, head)
    d_k = int(h.q.shape[1])
    x = run.hidden_states[layer]
    source = "the embeddings (word + position, normalised)" if layer == 0 else f"layer {layer}'s output"
    state = "\n".join([
        f"tokens = {list(run.tokens)!r}  # WordPiece, [CLS] first and [SEP] last",
        f"T, d_model, d_k = {len(run.tokens)}, {x.shape[1]}, {d_k}",
        "",
        _float32("X", x, f"the input of layer {layer + 1}: {source}"),
        "",
        _float32("W_Q", lw.w_q[head], f"head {head + 1}'s slice"), _float32("b_Q", lw.b_q[head], ""),
        _float32("W_K", lw.w_k[head], ""), _float32("b_K", lw.b_k[head], ""),
        _float32("W_V", lw.w_v[head], ""), _float32("b_V", lw.b_v[head], ""),
    ])
    stages = [
        (N_("Queries, keys and values"), r"Q = X W_Q + b_Q,\quad K = X W_K + b_K,\quad V = X W_V + b_V",
         N_("BERT's projections have biases; each head uses its own 32 columns of the 384."),
         "Q = X @ W_Q + b_Q  # (T, d_k)\nK = X @ W_K + b_K  # (T, d_k)\nV = X @ W_V + b_V  # (T, d_k)"),
        (N_("Scores"), r"\text{Scores} = Q K^{\top}", N_("Every query against every key."),
         "scores = Q @ K.T  # (T, T)"),
        (N_("Scaled"), r"\text{Scaled} = \frac{Q K^{\top}}{\sqrt{d_k}}", r"$\sqrt{32} \approx 5.66$.",
         "scaled = scores / math.sqrt(d_k)  # (T, T) a Python float keeps float32"),
        (N_("Softmax"), r"A_{ij} = \frac{\exp(\text{Scaled}_{ij})}{\sum_{j'} \exp(\text{Scaled}_{ij'})}",
         N_("Each row becomes weights that sum to 1: where this token looks."),
         "e = np.exp(scaled - scaled.max(axis=1, keepdims=True))\nA = e / e.sum(axis=1, keepdims=True)  # (T, T)"),
        (N_("Output"), r"\text{Output} = A V", N_("Each token's new vector: the values, weighted by A."),
         "output = A @ V  # (T, d_k)"),
    ]
    cells = [
        new_markdown_cell("# " + _("A real model: all-MiniLM-L6-v2, layer {layer}, head {head}").format(
                              layer=layer + 1, head=head + 1) + f"\n\n> {text}\n\n"
                          + _("The attention of one head of a pretrained BERT (6 layers × 12 heads, "
                              "$d_{model} = 384$), rebuilt with plain NumPy from the layer's input and the head's "
                              "slices of the weights, exactly as the page showed them. The last cell checks the "
                              "notebook's numbers against the page's.")),
        new_code_cell("import math\n\nimport numpy as np\n\nnp.set_printoptions(precision=4, suppress=True, "
                      "linewidth=120)"),
        new_markdown_cell("## " + _("The state")), new_code_cell(state),
    ]
    for number, (title, formula, words, code) in enumerate(stages, start=2):
        cells += [new_markdown_cell(f"### {number}. {_(title)}\n\n$$\n{formula}\n$$\n\n{_(words)}"),
                  new_code_cell(code)]
    expected = {"Q": h.q, "K": h.k, "V": h.v, "scores": h.scores, "scaled": h.scaled, "A": h.softmax,
                "output": h.output}
    return checked_notebook(cells, expected)


def checked_notebook(cells: list, expected: dict[str, np.ndarray]) -> NotebookNode:
    """``cells``, then the check: every matrix the page computed (float32), asserted equal to the notebook's own
    within float32's precision; a validated notebook."""
    check = ["server = {  # what the page computed (float32)"]
    check += [f"    {key!r}: {array_literal(np.asarray(v, dtype=np.float32))},"
              for key, v in expected.items()]
    check += ["}", "for name, value in server.items():",
              f"    np.testing.assert_allclose(globals()[name], value, rtol={MODEL_RTOL!r}, atol={MODEL_ATOL!r}, "
              "err_msg=name)",
              'print(f"All {len(server)} matrices agree with the page\'s, to float32 precision.")']
    cells = [*cells, new_markdown_cell("## " + _("Check against the page")), new_code_cell("\n".join(check))]
    nb = new_notebook(cells=cells, metadata={"kernelspec": KERNEL, "language_info": {"name": "python"}})
    nbformat.validate(nb)
    return nb
