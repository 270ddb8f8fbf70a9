"""The page's exact state as a Jupyter notebook that rebuilds every stage with plain NumPy and checks itself.

One markdown cell per stage (the page's own title, formula and explanation), then a short code cell in paper
notation; the state as literals a student can edit; the server's numbers stored bit for bit in the notebook,
and a last cell that compares them with ``np.testing.assert_allclose``. Written with ``nbformat`` and
validated against its schema. The notebook needs only NumPy (matplotlib, when present, draws one heatmap).
"""

from __future__ import annotations

import nbformat
import numpy as np
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from app.i18n import gettext as _
from app.lesson.presets import PRESETS
from app.lesson.stages import Options, Stage, describe
from app.maths.records import AttentionRun, TransformerRun
from app.state.learning import learning_loss_and_gradients
from app.state.scenario import Scenario, View
from app.view.notebook.backward import backward_expected, backward_lines, loss_state
from app.view.notebook.forward import (
    Setting,
    attention_lines,
    block_lines,
    later_blocks_code,
    positions_code,
    setting,
    setup_code,
    state_code,
)
from app.view.notebook.literals import packed, shape_text
from app.view.panels import page_stages, stage_options

CHECK_RTOL = 1e-12
CHECK_ATOL = 1e-12  # entries near 0: a different order of the same sums leaves ~1e-16 there, not a relative error
KERNEL = {"name": "python3", "display_name": "Python 3", "language": "python"}


def stage_markdown(stage: Stage, options: Options) -> str:
    title, formula, explanation = describe(stage, options)
    return f"### {stage.number}. {_(title)}\n\n$$\n{formula}\n$$\n\n{_(explanation)}"


def _heads(run: AttentionRun, name: str) -> np.ndarray:
    return np.stack([getattr(h, name) for h in run.heads])  # (h, …)


def forward_expected(s: Setting, run: AttentionRun, stack: TransformerRun | None) -> dict[str, np.ndarray]:
    """The server's numbers for the forward cells, by the notebook's names."""
    out = {"X": stack.blocks[0].x if stack is not None else run.x}
    if stack is not None and s.norm == "pre":
        out["X_heads"] = run.x
    if s.cross:
        out["C"] = run.context
    out.update(Q=_heads(run, "q"), K=_heads(run, "k"), V=_heads(run, "v"))
    if s.rope:
        out.update(Q_rot=_heads(run, "q_rot"), K_rot=_heads(run, "k_rot"))
    if s.score == "general":
        out["QW_a"] = _heads(run, "q_w")
    if s.score == "additive":
        out.update(QW_1=_heads(run, "q_1"), KW_2=_heads(run, "k_2"))
    out.update(scores=_heads(run, "scores"), scaled=_heads(run, "scaled"), masked=_heads(run, "masked"),
               A=_heads(run, "softmax"), head_out=_heads(run, "output"))
    if s.attention == "linear":
        lin = [h.linear for h in run.heads]
        out.update(softmax_out=_heads(run, "softmax_output"), phi_Q=np.stack([x.phi_q for x in lin]),
                   phi_K=np.stack([x.phi_k for x in lin]), kv=np.stack([x.kv for x in lin]),
                   z=np.stack([x.z for x in lin]), A_linear=np.stack([x.weights for x in lin]))
    out.update(concat=run.concat, output=run.output)
    if stack is not None:
        b = stack.blocks[0]
        if s.norm == "post":
            out["residual_1"] = b.residual1
        out.update(H_1=b.h, F_hidden=b.ffn_hidden, F_act=b.ffn_act, F_out=b.ffn_out, out=b.output)
        if s.norm == "post":
            out["residual_2"] = b.residual2
        if len(stack.blocks) > 1:
            out["final"] = stack.output
    return out


def expected_cell(expected: dict[str, np.ndarray]) -> str:
    lines = ["import base64", "", "", "def unpack(text, shape):",
             '    """float64 numbers stored bit for bit."""',
             '    return np.frombuffer(base64.b64decode(text), dtype="<f8").reshape(shape)', "", "",
             "server = {  # what the page computed, name by name"]
    for name, a in expected.items():
        a = np.asarray(a, dtype=np.float64)
        lines.append(f'    "{name}": unpack("{packed(a)}", {shape_text(a.shape)}),')
    lines.append("}")
    return "\n".join(lines)


CHECK_CODE = f"""for name, value in server.items():
    np.testing.assert_allclose(globals()[name], value, rtol={CHECK_RTOL!r}, atol={CHECK_ATOL!r}, err_msg=name)
print(f"All {{len(server)}} matrices agree with the page's, to 12 significant digits.")"""

HEATMAP_CODE = """try:
    import matplotlib.pyplot as plt
except ImportError:
    print("matplotlib is not installed: no picture (pip install matplotlib to draw it).")
else:
    fig, ax = plt.subplots(figsize=(1 + 0.6 * S, 1 + 0.6 * T))
    ax.imshow(A[0], cmap="Blues", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(S), KEY_LABELS, rotation=45)
    ax.set_yticks(range(T), tokens)
    for q in range(T):
        for k in range(S):
            ax.text(k, q, f"{A[0][q, k]:.2f}", ha="center", va="center", fontsize=8)
    ax.set_title("A: head 1's attention weights (rows: queries, columns: keys)")
    plt.show()"""


def attention_notebook(sc: Scenario, view: View) -> NotebookNode:
    """The notebook of the page's state: every stage the page shows, and its own check."""
    first, stack = sc.compute()
    run = first  # block 1 is rebuilt stage by stage; later blocks by a function of the same steps
    learning = view.learning if stack is None else None
    # Linear attention's backward pass runs through φ and its normaliser: the page shows it, the notebook stops
    # at the forward pass (and says so below).
    linear_goal = learning is not None and run.attention == "linear"
    learning = None if linear_goal else learning
    goal = learning.goal if learning is not None else ""
    s = setting(run, stack, sc.norm, sc.activation)
    options = stage_options(sc, run, stack, goal)
    x_input = stack.x_input if stack is not None else (run.x_input if run.x_input is not None else run.x)
    context_input = None if sc.context_x is None or not sc.cross else np.asarray(sc.context_x, dtype=np.float64)

    preset = PRESETS.get(sc.preset)
    title = _(preset.title) if preset is not None else _("your own scenario")
    intro = ("# " + _("Attention, step by step: {title}").format(title=title) + "\n\n"
             + _("Every number of the page, rebuilt with plain NumPy: the state as it was on the screen, then one "
                 "cell per stage. Run the cells from the top (*Run All*); change any number of the state and run "
                 "again to see what follows from it. The last cell checks the notebook's numbers against the "
                 "page's.") + "\n\n"
             + _("Notation as in *Attention Is All You Need*: $T = {t}$ tokens, $d_{{model}} = {d_model}$, "
                 "$h = {h}$ heads of $d_k = {d_k}$, $d_v = {d_v}$. Arrays hold every head at once: "
                 "`W_Q` is $(h, d_{{model}}, d_k)$, so `Q = X @ W_Q` is $(h, T, d_k)$.").format(
                 t=len(sc.tokens), d_model=sc.d_model, h=run.num_heads, d_k=run.d_k, d_v=run.d_v))
    cells = [new_markdown_cell(intro), new_code_cell(setup_code(s)),
             new_markdown_cell("## " + _("The state") + "\n\n" + _("Tokens, embeddings, every weight and the "
                                                                     "options, exactly as the page had them."))]
    state = state_code(s, sc.tokens, sc.key_tokens, run, stack, x_input, context_input)
    if learning is not None:
        state += "\n\n" + loss_state(goal, learning.target, learning.rows, learning.head if goal == "attention"
                                     else view.head)
    cells.append(new_code_cell(state))

    code = {"x": [positions_code(s, run)], **attention_lines(s, run)}
    if stack is not None:
        code.update(block_lines(s))
    expected = forward_expected(s, run, stack)
    if learning is not None:
        code.update(backward_lines(s, goal))
        head = learning.head if goal == "attention" else view.head
        loss, grads = learning_loss_and_gradients(run, learning)
        expected.update(backward_expected(s, goal, head, loss, grads))
    for stage in page_stages(sc, view):
        if stage.key in code:
            cells += [new_markdown_cell(stage_markdown(stage, options)), new_code_cell("\n".join(code[stage.key]))]
    if linear_goal:
        cells.append(new_markdown_cell(_("The Learn panel's backward pass through linear attention (through "
                                         "$\\varphi$ and its normaliser) is on the page; this notebook rebuilds the "
                                         "forward pass.")))
    if stack is not None and len(stack.blocks) > 1:
        cells += [new_markdown_cell("### " + _("Blocks 2 to {n}").format(n=len(stack.blocks)) + "\n\n"
                                    + _("Each block's output is the next block's input; every block has weights "
                                        "of its own.")),
                  new_code_cell(later_blocks_code(s, run, stack))]
    cells += [new_markdown_cell("## " + _("A picture (optional)") + "\n\n"
                                + _("With matplotlib installed, head 1's weights as a heatmap.")),
              new_code_cell(f"KEY_LABELS = {list(sc.key_tokens)!r}\n" + HEATMAP_CODE),
              new_markdown_cell("## " + _("Check against the page") + "\n\n"
                                + _("The page's numbers, stored bit for bit, then compared with every matrix above "
                                    "(relative tolerance {tolerance}). Change a number in the state and this check "
                                    "fails: the page computed something else.").format(tolerance=f"{CHECK_RTOL:g}")),
              new_code_cell(expected_cell(expected), metadata={"jupyter": {"source_hidden": True}}),
              new_code_cell(CHECK_CODE)]
    nb = new_notebook(cells=cells, metadata={"kernelspec": KERNEL, "language_info": {"name": "python"}})
    nbformat.validate(nb)
    return nb


def notebook_text(sc: Scenario, view: View) -> str:
    """The notebook as the .ipynb file's text."""
    return nbformat.writes(attention_notebook(sc, view))
