"""The translator's cross-attention head as a notebook: the text's pieces and the translation's, the decoder's
states Y (a row per written piece) and the encoder's output H (a row per source piece), one head's 8-bit slices of
W_Q, W_K, W_V with their multipliers and biases, then Q, K, V, scores, × 1/√d_k, softmax and A·V with plain NumPy,
checked against the page.

Small enough to read: one head's slices (3 × 256 × 32 eight-bit numbers), not the model. The model computes in
float32 from its 8-bit weights divided by their multipliers, and so does the notebook; the check allows float32's
precision (a different order of the same sums moves the last of its 7 digits).
"""

from __future__ import annotations

import numpy as np
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_markdown_cell

from app.i18n import N_
from app.i18n import gettext as _
from app.maths.marian import Translation, cross_head
from app.maths.marian_files import TranslatorFiles
from app.view.notebook.literals import array_literal, shape_text
from app.view.notebook.model import checked_notebook


def _float32(name: str, a: np.ndarray, what: str) -> str:
    return f"{name} = {array_literal(np.asarray(a, dtype=np.float32))}  # {shape_text(np.shape(a))} {what}"


def _int8(name: str, a: np.ndarray) -> str:
    rows = ",\n".join("    [" + ", ".join(str(int(v)) for v in row) + "]" for row in a)
    return f"{name} = np.array([\n{rows},\n], dtype=np.int8)  # {shape_text(a.shape)}"


def translator_notebook(files: TranslatorFiles, run: Translation, text: str, layer: int, head: int) -> NotebookNode:
    """Cross-attention head ``head`` of decoder layer ``layer`` (from 0) on the translation of ``text``, stage by
    stage, with its own check."""
    d_k = files.config.d_k
    columns = slice(head * d_k, (head + 1) * d_k)
    prefix = f"decoder_l{layer + 1}_context"
    h = cross_head(files, run, layer, head)
    parts = [
        f"source = {list(run.source)!r}  # SentencePiece: ▁ starts a word, </s> ends the text",
        f"target = {list(run.target)!r}  # the translation's pieces",
        f"S, T, d_model, d_k = {len(run.source)}, {len(run.target)}, {files.config.d_model}, {d_k}",
        "",
        _float32("Y", run.decoder_queries[layer], f"the decoder's state at each written piece, layer {layer + 1}"),
        "",
        _float32("H", run.encoder_output, "the encoder's output: a row per source piece"),
    ]
    for letter in "QKV":
        values, multiplier = files.int8[f"{prefix}_W{letter.lower()}"]
        parts += ["", _int8(f"q_{letter}", values[:, columns]),
                  f"m_{letter} = np.float32({multiplier!s})  # W_{letter} = q_{letter} / m_{letter}",
                  _float32(f"b_{letter}", files.weights[f"{prefix}_b{letter.lower()}"][columns], "")]
    weights = "\n".join(f"W_{c} = q_{c}.astype(np.float32) / m_{c}  # (d_model, d_k): the 8-bit values, de-quantised"
                        for c in "QKV")
    stages = [
        (N_("Queries from the decoder, keys and values from the encoder"),
         r"Q = Y W_Q + b_Q,\quad K = H W_K + b_K,\quad V = H W_V + b_V",
         N_("The model ships its weights as 8-bit integers with one multiplier per matrix; each head uses its own "
            "32 columns of the 256."),
         weights + "\nQ = Y @ W_Q + b_Q  # (T, d_k)\nK = H @ W_K + b_K  # (S, d_k)\nV = H @ W_V + b_V  # (S, d_k)"),
        (N_("Scores"), r"\text{Scores} = Q K^{\top}",
         N_("Every written piece's query against every source piece's key."),
         "scores = Q @ K.T  # (T, S)"),
        (N_("Scaled"), r"\text{Scaled} = Q K^{\top} \cdot \frac{1}{\sqrt{d_k}}",
         N_("Marian multiplies by 1/√32 rather than dividing by √32: the last bit of a float can differ."),
         "scaled = scores * np.float32(1 / np.sqrt(d_k))  # (T, S)"),
        (N_("Softmax"), r"A_{ij} = \frac{\exp(\text{Scaled}_{ij})}{\sum_{j'} \exp(\text{Scaled}_{ij'})}",
         N_("Each row becomes weights that sum to 1: where this written piece looked in the text."),
         "e = np.exp(scaled - scaled.max(axis=1, keepdims=True))\nA = e / e.sum(axis=1, keepdims=True)  # (T, S)"),
        (N_("Output"), r"\text{Output} = A V",
         N_("What each written piece read in the text: the values, weighted by A."),
         "output = A @ V  # (T, d_k)"),
    ]
    cells = [
        new_markdown_cell("# " + _("A real translator: cross-attention layer {layer}, head {head}").format(
                              layer=layer + 1, head=head + 1) + f"\n\n> {text}\n>\n> {run.text}\n\n"
                          + _("One cross-attention head of Bergamot's English ↔ Portuguese Marian transformer, "
                              "rebuilt with plain NumPy from the decoder's states, the encoder's output and the "
                              "head's 8-bit slices of the weights, exactly as the page showed them. The last cell "
                              "checks the notebook's numbers against the page's.")),
        new_code_cell("import numpy as np\n\nnp.set_printoptions(precision=4, suppress=True, linewidth=120)"),
        new_markdown_cell("## " + _("The state")), new_code_cell("\n".join(parts)),
    ]
    for number, (title, formula, words, code) in enumerate(stages, start=2):
        cells += [new_markdown_cell(f"### {number}. {_(title)}\n\n$$\n{formula}\n$$\n\n{_(words)}"),
                  new_code_cell(code)]
    expected = {"Q": h.q, "K": h.k, "V": h.v, "scores": h.scores, "scaled": h.scaled, "A": h.softmax,
                "output": h.output}
    return checked_notebook(cells, expected)
