"""The language model's head as a notebook: a text's tokens, one layer's input x, the RMSNorm gain, one query
head's W_Q and the key/value head it shares (W_K, W_V), then RMSNorm, Q, K, V, RoPE, scores, ÷√d_k, the causal
mask, softmax and A·V with plain NumPy in float32, checked against the page's numbers.

The weights are written as the model's file keeps them, 4 bits each (llama.cpp's Q4_1): down each column,
every block of 32 rows shares a step d and a minimum m (float16), and each weight is q·d + m with q a whole
number from 0 to 15. That gives back the page's float32 weights bit for bit, in a third of the text: the three
576 × 64 slices take 0.46 MB so, 1.43 MB as float32 literals. A short text's notebook is then 0.6 MB; the rest
grows with the text (its rows of x, and of every matrix checked): 3.4 MB for 122 tokens.

The notebook computes as the page does, so on the page's machine it agrees to the last bit; RoPE's angles are
float64 there too (NumPy's default for Python numbers), as app.maths.positions.rope_rotate computes them.
Elsewhere a BLAS adds the same products in another order, and the check allows for it (CHECK_RTOL, CHECK_ATOL).
"""

from __future__ import annotations

import nbformat
import numpy as np
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from app.i18n import N_
from app.i18n import gettext as _
from app.maths.decoder_files import DecoderConfig, DecoderFiles
from app.maths.llama import DecoderRun, head_at
from app.serving.real_models import language_model
from app.state.decoder_state import DecoderRead
from app.view.decoder_view import default_head
from app.view.notebook.literals import array_literal, shape_text
from app.view.pieces import readable

BLOCK = 32  # Q4_1: the rows of a column that share one step and one minimum
LEVELS = 15  # the largest whole number a 4-bit weight holds
CHECK_RTOL = 1e-5
# × each matrix's largest |entry|, for every matrix but x̂ (computed number by number: rtol alone). An entry near 0
# of Q, the scores or A·V is a sum of 576, 64 or T products far larger than itself, so another order of the same
# sums moves it by float32 steps of the matrix's scale, not of its own size. Summed in other orders (in float64,
# by NumPy's own loop, in two halves, backwards), every head of every layer on texts of 5, 92 and 122 tokens
# needed at most 0.85e-5 of the scale beyond the rtol (A·V, the longest text); RoPE's angles in float32 instead
# of float64 would need 0.38e-5. 3e-5 leaves a margin of 3.5.
CHECK_ATOL = 3e-5
KERNEL = {"name": "python3", "display_name": "Python 3", "language": "python"}


def q4_1_blocks(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A (d_model, d_k) float32 weight as Q4_1 blocks down its columns: whole numbers q (d_model, d_k), steps d
    and minima m (d_model/32, d_k), with q·d + m = w in float32, bit for bit. The minimum is q = 0's weight and
    the step float16((max − min)/15), as llama.cpp quantises; a ValueError when w is not such blocks."""
    n, cols = w.shape
    blocks = w.reshape(n // BLOCK, BLOCK, cols)  # (B, 32, d_k)
    m = blocks.min(axis=1)  # (B, d_k)
    d = ((blocks.max(axis=1) - m) / np.float32(LEVELS)).astype(np.float16).astype(np.float32)  # (B, d_k)
    safe = np.where(d > 0, d, np.float32(1.0))[:, None, :]  # a constant block: every q is 0
    q = np.rint((blocks.astype(np.float64) - m[:, None, :]) / safe).clip(0, LEVELS).astype(np.float32)  # (B, 32, d_k)
    if not np.array_equal(q * d[:, None, :] + m[:, None, :], blocks) or not np.array_equal(
            m.astype(np.float16).astype(np.float32), m):
        raise ValueError("the weight is not made of Q4_1 blocks of 32 rows")
    return q.reshape(n, cols), d, m


def integer_literal(q: np.ndarray) -> str:
    """Whole numbers held in float32 (a float32 times a float32 stays float32), one row per line."""
    rows = ["    [" + ", ".join(str(int(v)) for v in row) + "]," for row in q]
    return "np.array([\n" + "\n".join(rows) + "\n], dtype=np.float32)"


def _float32(name: str, a: np.ndarray, what: str) -> str:
    return f"{name} = {array_literal(np.asarray(a, dtype=np.float32))}  # {shape_text(np.shape(a))} {what}"


def weight_code(name: str, w: np.ndarray, what: str) -> str:
    """The cell that writes one weight as its 4-bit blocks and builds it back."""
    q, d, m = q4_1_blocks(w)
    return "\n".join([
        f"# {what}", f"q_{name} = {integer_literal(q)}  # {shape_text(q.shape)} whole numbers 0 … {LEVELS}", "",
        _float32(f"d_{name}", d, "each block's step (a float16)"),
        _float32(f"m_{name}", m, "each block's minimum (a float16)"), "",
        f"W_{name} = from_4_bits(q_{name}, d_{name}, m_{name})  # {shape_text(w.shape)} float32",
    ])


FROM_4_BITS = f'''def from_4_bits(q, d, m):
    """W = q·d + m: rows {BLOCK}b … {BLOCK}b + {BLOCK - 1} of a column share the step d[b] and the minimum m[b]."""
    return q * np.repeat(d, {BLOCK}, axis=0) + np.repeat(m, {BLOCK}, axis=0)  # (d_model, d_k) float32'''

ROPE = """theta = base ** (-np.arange(0, d_k, 2) / d_k)  # (d_k/2,) θ_i = base^(−2i/d_k), i = 0 … d_k/2 − 1
angle = np.arange(T)[:, None] * theta  # (T, d_k/2) m·θ_i, in float64 as the page computes it
cos, sin = np.cos(angle), np.sin(angle)  # (T, d_k/2)


def rope(M):
    \"\"\"Turn the pair (M[m, 2i], M[m, 2i+1]) of row m by the angle m·θ_i.\"\"\"
    out = np.empty_like(M)  # (T, d_k) float32: the turned numbers are stored in float32
    even, odd = M[:, 0::2], M[:, 1::2]  # (T, d_k/2) each
    out[:, 0::2] = even * cos - odd * sin
    out[:, 1::2] = even * sin + odd * cos
    return out


Q_rot = rope(Q)  # (T, d_k)
K_rot = rope(K)  # (T, d_k)"""


def steps(cfg: DecoderConfig) -> list[tuple[str, str, str, list[str]]]:
    """(title, formula, words, code cells): the page's seven stages, numbered as it numbers them."""
    base, d_k = f"{cfg.rope_base:g}", cfg.d_k
    return [
        (N_("The heads' input"), r"\hat{x} = \frac{x}{\sqrt{\operatorname{mean}(x^2) + \epsilon}} \odot g",
         N_("Each row of $x$ divided by its root mean square, then multiplied by the learned gain $g$: no mean "
            "taken away, no bias."),
         ["x_hat = x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + eps) * g  # (T, d_model)"]),
        (N_("Queries and keys, turned by position (RoPE)"),
         rf"Q = \hat{{x}} W_Q,\quad K = \hat{{x}} W_K,\quad \theta_i = {base}^{{-2i/{d_k}}}",
         N_("No bias. Then RoPE turns each pair $(q_{2i}, q_{2i+1})$ of the token at position $m$ by the angle "
            "$m\\,\\theta_i$, and the keys the same way: a query and a key then score by how far apart they are, "
            "not where they are. Position 0 is not turned."),
         ["Q = x_hat @ W_Q  # (T, d_k)\nK = x_hat @ W_K  # (T, d_k)", ROPE]),
        (N_("Values"), r"V = \hat{x} W_V", N_("Not turned: positions enter through the scores alone."),
         ["V = x_hat @ W_V  # (T, d_k)"]),
        (N_("Scores and scaled"),
         r"\text{Scores} = \text{RoPE}(Q)\,\text{RoPE}(K)^{\top},\quad \text{Scaled} = "
         r"\frac{\text{Scores}}{\sqrt{d_k}}",
         f"$\\sqrt{{{d_k}}} = {d_k ** 0.5:g}$.",
         ["scores = Q_rot @ K_rot.T  # (T, T)\nscaled = scores / d_k**0.5  # (T, T) a Python float keeps float32"]),
        (N_("The causal mask"), r"\text{Masked}_{ij} = -\infty \text{ for } j > i",
         N_("A token may not look at a later one: every key after the query is hidden."),
         ["mask = np.triu(np.ones((T, T), dtype=bool), k=1)  # (T, T) True above the diagonal\n"
          "masked = np.where(mask, -np.inf, scaled)  # (T, T)"]),
        (N_("Attention weights"),
         r"A_{ij} = \frac{\exp(\text{Masked}_{ij})}{\sum_{j'} \exp(\text{Masked}_{ij'})}",
         N_("Each row becomes weights that sum to 1 (exp(−∞) = 0): where this token looks."),
         ["e = np.exp(masked - masked.max(axis=1, keepdims=True))  # (T, T)\n"
          "A = e / e.sum(axis=1, keepdims=True)  # (T, T)"]),
        (N_("Output"), r"\text{Output} = A V", N_("Each token's new vector: the values, weighted by A."),
         ["output = A @ V  # (T, d_k)"]),
    ]


def _quoted(text: str) -> str:
    return "\n".join("> " + line for line in (text.splitlines() or [""]))


def decoder_notebook(model: DecoderFiles, text: str, run: DecoderRun, layer: int, head: int) -> NotebookNode:
    """Query head ``head`` of layer ``layer`` (from 0) on the run of the text ``text``, stage by stage, with its
    own check."""
    cfg, lw = model.config, model.weights.layers[layer]
    g = cfg.kv_head(head)
    h = head_at(model, run, layer)
    x = run.hidden_states[layer]  # (T, d_model)
    sharing = ", ".join(str(i + 1) for i in range(cfg.heads) if cfg.kv_head(i) == g)
    source = "the token embeddings" if layer == 0 else f"layer {layer}'s output"  # the code's comments: English
    words_source = _("the token embeddings") if layer == 0 else _("layer {n}'s output").format(n=layer)
    tokens = "\n".join([
        f"tokens = {list(run.tokens)!r}  # byte-level BPE pieces as the model writes them: Ġ is a space",
        f"ids = {[int(i) for i in run.ids]!r}",
        f"# read as: {' '.join(readable(p) for p in run.tokens)}",
        "",
        f"T, d_model, d_k = {len(run.tokens)}, {cfg.d_model}, {cfg.d_k}",
        f"eps = np.float32({str(np.float32(cfg.eps))})  # RMSNorm's ε",
        f"base = {cfg.rope_base!r}  # RoPE's base",
    ])
    state = "\n".join([_float32("x", x, f"the input of layer {layer + 1}: {source}"), "",
                       _float32("g", lw.attn_norm, "RMSNorm's gain before attention")])
    cells = [
        new_markdown_cell(
            "# " + _("A language model: {model}, layer {layer}, head {head}").format(
                model=model.name.split("/")[-1], layer=layer + 1, head=head + 1) + f"\n\n{_quoted(text)}\n\n"
            + _("The attention of one head of a pretrained Llama decoder ({layers} layers × {heads} query heads "
                "sharing {kv_heads} key/value heads, $d_{{model}} = {d_model}$, $d_k = {d_k}$), rebuilt with plain "
                "NumPy in float32 from the layer's input and the head's weights, exactly as the page showed them. "
                "The last cell checks the notebook's numbers against the page's.").format(
                layers=cfg.layers, heads=cfg.heads, kv_heads=cfg.kv_heads, d_model=cfg.d_model, d_k=cfg.d_k)),
        new_code_cell("import numpy as np\n\nnp.set_printoptions(precision=4, suppress=True, linewidth=120)"),
        new_markdown_cell("## " + _("The tokens") + "\n\n"
                          + _("The text as the model reads it: its pieces and their ids, no token added before them.")),
        new_code_cell(tokens),
        new_markdown_cell("## " + _("The layer's input") + "\n\n"
                          + _("$x$, {source}, one row per token; and $g$, the gain of the RMSNorm that comes before "
                              "attention.").format(source=words_source)),
        new_code_cell(state),
        new_markdown_cell(
            "## " + _("The head's weights") + "\n\n"
            + _("Query head {head} has its own $W_Q$. Its keys and values come from key/value head {group} of "
                "{kv_heads}, which query heads {sharing} share (grouped-query attention): one $W_K$ and one $W_V$ "
                "for all {size}.").format(head=head + 1, group=g + 1, kv_heads=cfg.kv_heads, sharing=sharing,
                                          size=cfg.group) + "\n\n"
            + _("The model's file keeps each weight in 4 bits: down each column, every block of {block} rows has a "
                "step $d$ and a minimum $m$, and each weight is $q \\cdot d + m$ with $q$ a whole number from 0 to "
                "{levels}. These are those numbers; the page computes with the same float32 weights.").format(
                block=BLOCK, levels=LEVELS)),
        new_code_cell(FROM_4_BITS),
        new_code_cell(weight_code("Q", lw.w_q[head], f"query head {head + 1}'s W_Q")),
        new_code_cell(weight_code("K", lw.w_k[g], f"key/value head {g + 1}'s W_K, shared by query heads {sharing}")),
        new_code_cell(weight_code("V", lw.w_v[g], f"key/value head {g + 1}'s W_V, shared by query heads {sharing}")),
    ]
    for number, (title, formula, words, code) in enumerate(steps(cfg), start=1):
        cells.append(new_markdown_cell(f"### {number}. {_(title)}\n\n$$\n{formula}\n$$\n\n{_(words)}"))
        cells += [new_code_cell(c) for c in code]
    expected = {"x_hat": h.x, "Q": h.q_pre[head], "K": h.k_pre[g], "Q_rot": h.q[head], "K_rot": h.k[g],
                "V": h.v[g], "scores": h.scores[head], "scaled": h.scaled[head], "masked": h.masked[head],
                "A": h.weights[head], "output": h.output[head]}
    check = ["page = {  # what the page computed (float32)"]
    check += [f"    {key!r}: {array_literal(np.asarray(v, dtype=np.float32))}," for key, v in expected.items()]
    check += ["}", "for name, value in page.items():",
              "    # x̂ is computed number by number; every other matrix is made of sums, whose rounding follows the",
              "    # size of the numbers summed: a few float32 steps of the matrix's largest entry",
              f"    atol = 0.0 if name == 'x_hat' else {CHECK_ATOL!r} * np.abs(value[np.isfinite(value)]).max()",
              f"    np.testing.assert_allclose(globals()[name], value, rtol={CHECK_RTOL!r}, atol=atol, err_msg=name)",
              'print(f"All {len(page)} matrices agree with the page\'s, to float32 precision.")']
    cells += [
        new_markdown_cell(
            "## " + _("Check against the page") + "\n\n"
            + _("The page's numbers, then each matrix above compared with them: within {rtol} of each number, or "
                "for a matrix made of sums, {atol} of its largest number. On another machine NumPy may add the "
                "same products in another order, which moves the last of float32's 7 digits; a sum near 0 of far "
                "larger numbers moves by steps of their size, not its own. Change a number above and this check "
                "fails: the page computed something else.").format(rtol=f"{CHECK_RTOL:g}", atol=f"{CHECK_ATOL:g}")),
        new_code_cell("\n".join(check))]
    nb = new_notebook(cells=cells, metadata={"kernelspec": KERNEL, "language_info": {"name": "python"}})
    nbformat.validate(nb)
    return nb


def decoder_notebook_for(model: DecoderFiles, read: DecoderRead) -> NotebookNode:
    """The notebook of the head the page steps through, on the page's text."""
    layer, head = default_head(read.page)
    return decoder_notebook(model, read.page.text, language_model().run(read.page.text), layer, head)
