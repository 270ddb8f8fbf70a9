"""The grids of inputs a student edits: X, the source sentence, the positions, the head's weights,
the first block's FFN and LayerNorms, the mask's checkboxes and the Learn panel's target."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from markupsafe import Markup, escape

from app.i18n import gettext as _
from app.i18n import local_number
from app.maths.masks import build_mask
from app.maths.records import AttentionRun, TransformerRun
from app.maths.weights import WEIGHTS
from app.state.learning import Learning
from app.state.scenario import Scenario, View, format_input
from app.view.heatmap import display_numbers
from app.view.labels import dim_labels, head_label, numbered, token_labels
from app.view.typeset import prose


@dataclass(frozen=True)
class EditorGrid:
    """A matrix of number inputs: field names, values and accessible labels, row by row."""

    key: str
    title: str
    shape: str
    col_labels: list[str]
    rows: list[tuple[str, list[tuple[str, str, str]]]]  # (row label, [(name, value, aria label)])
    label: Markup = Markup("")  # the title with its maths typeset (the plain title when empty)


def grid(key: str, title: str, m: np.ndarray, row_labels: list[str], col_labels: list[str], aria: str,
         label: str = "") -> EditorGrid:
    """One matrix (a vector as one row) as inputs named ``<key>-<row>-<col>``; ``label`` the title as
    prose with $…$ maths."""
    if m.ndim == 1:
        m = m[None, :]
    cell_name = _("{matrix} row {row}, column {column}")
    body = [
        (rl, [(f"{key}-{i}-{j}", local_number(format_input(v)),
               cell_name.format(matrix=aria, row=rl, column=col_labels[j]))
              for j, v in enumerate(row)])
        for i, (rl, row) in enumerate(zip(row_labels, m.tolist(), strict=True))
    ]
    return EditorGrid(key, title, f"{m.shape[0]}×{m.shape[1]}", col_labels, body, prose(label or title))


def editor_grids(sc: Scenario, view: View, run: AttentionRun, stack: TransformerRun | None = None) -> dict:
    """X (and the source sentence, and the learned position table), the selected head's W_Q, W_K,
    W_V, its rows of W_O and its score weights, and the first block's FFN and LayerNorms, as grids
    of inputs. The weights are the run's (the first block's), so they are not rebuilt from the
    base and the edits a second time per request."""
    w = run.weights
    h = view.head
    hn = f" ({head_label(sc, h)})" if sc.num_heads > 1 else ""
    dims = dim_labels(sc)

    def weight(name: str, m: np.ndarray, rows: list[str], cols: list[str]) -> EditorGrid:
        """A weight's grid, titled by the weights registry (app.maths.weights), with the head for a per-head one."""
        suffix = hn if WEIGHTS[name].per_head else ""
        title = WEIGHTS[name].label + suffix
        return grid(name, title, m, rows, cols, title, f"${WEIGHTS[name].tex}${suffix}")

    d_v = sc.d_v
    q_cols, k_cols, a_cols = (numbered(prefix, sc.d_k) for prefix in "qka")
    o_rows = [f"h{h + 1}·v{j + 1}" for j in range(d_v)]
    grids = {
        "x": grid("x", _("X (target sentence: queries)") if sc.cross else "X", sc.x, token_labels(sc.tokens), dims,
                  "X", _("$X$ (target sentence: queries)") if sc.cross else "$X$"),
        "c": None,
        "pos": None,
        "weights": [
            weight("w_q", w.w_q[h], dims, q_cols),
            weight("w_k", w.w_k[h], dims, k_cols),
            weight("w_v", w.w_v[h], dims, numbered("v", d_v)),
            grid("w_o", _("W_O rows of head {n}").format(n=h + 1), w.w_o[h * d_v:(h + 1) * d_v], o_rows, dims, "W_O",
                 _("$W_O$ rows of head {n}").format(n=h + 1)),
        ],
        "score": [],
        "block": [],
    }
    if sc.score == "general":
        grids["score"] = [weight("w_a", w.w_a[h], q_cols, k_cols)]
    elif sc.score == "additive":
        grids["score"] = [
            weight("w_1", w.w_1[h], q_cols, a_cols),
            weight("w_2", w.w_2[h], k_cols, a_cols),
            weight("v_a", w.v_a[h], ["vₐ"], a_cols),
        ]
    if stack is not None:
        bw = stack.blocks[0].weights
        hidden = numbered("f", stack.blocks[0].d_ff)
        grids["block"] = [
            weight("ffn_w1", bw.ffn_w1, dims, hidden),
            weight("ffn_b1", bw.ffn_b1, ["b₁"], hidden),
            weight("ffn_w2", bw.ffn_w2, hidden, dims),
            weight("ffn_b2", bw.ffn_b2, ["b₂"], dims),
            weight("ln1_gamma", bw.ln1_gamma, ["γ₁"], dims),
            weight("ln1_beta", bw.ln1_beta, ["β₁"], dims),
            weight("ln2_gamma", bw.ln2_gamma, ["γ₂"], dims),
            weight("ln2_beta", bw.ln2_beta, ["β₂"], dims),
        ]
    if sc.cross and sc.context_x is not None:
        grids["c"] = grid("c", _("C (source sentence: keys and values)"), sc.context_x,
                          token_labels(sc.context_tokens), dims, "C", _("$C$ (source sentence: keys and values)"))
    if sc.position_table is not None:
        positions = [_("pos {n}").format(n=i + 1) for i in range(sc.position_table.shape[0])]
        grids["pos"] = grid("pos", _("P (learned position table)"), sc.position_table, positions, dims, "P",
                            _("$P$ (learned position table)"))
    return grids


def mask_grid(sc: Scenario, run: AttentionRun, view: View) -> Markup:
    """The mask stage's checkboxes as table rows: one per (query, key), labelled with the scaled
    score, or −∞ when hidden; a key hidden by the mask mode or as padding says why and cannot be
    unticked. Built in one pass, like a heatmap: at T = 64 that is 4,096 cells."""
    t, s = len(sc.tokens), len(sc.key_tokens)
    pattern = build_mask(sc.mask_mode, t, s, sc.window)
    pattern = np.zeros((t, s), dtype=bool) if pattern is None else pattern
    texts = display_numbers(run.heads[view.head].scaled, view.decimals)
    keys = [escape(_("key {n} ({token})").format(n=j + 1, token=token)) for j, token in enumerate(sc.key_tokens)]
    reasons = {"causal": _("causal"), "local": _("local"), "strided": _("strided"), "padding": _("padding")}
    hide = escape(_("hide {key} from {query}"))
    rows = []
    for i, label in enumerate(token_labels(sc.tokens)):
        lab = escape(label)
        query = escape(_("query {n} ({token})").format(n=i + 1, token=sc.tokens[i]))
        cells = []
        for j in range(s):
            reason = sc.mask_mode if pattern[i, j] else ("padding" if j in sc.padding else "")
            hidden = bool(reason) or (i, j) in sc.blocked
            state = (" checked" if hidden else "") + (" disabled" if reason else "")
            why = f'<span class="why">{escape(reasons.get(reason, reason))}</span>' if reason else ""
            cells.append(f'<td class="{"hidden" if hidden else "open"}"><label><input type="checkbox" '
                         f'name="block-{i}-{j}"{state} aria-label="{hide.format(key=keys[j], query=query)}"> '
                         f'{"−∞" if hidden else texts[i][j]}</label>{why}</td>')
        rows.append(f'<tr><th scope="row">{lab}</th>{"".join(cells)}</tr>')
    return Markup("".join(rows))



def target_grid(sc: Scenario, learning: Learning) -> EditorGrid:
    """The goal's target as a grid of inputs: T × S weights for a head, or T × d_model outputs."""
    labels = token_labels(sc.key_tokens) if learning.goal == "attention" else dim_labels(sc)
    return grid("target", _("Target"), learning.target, token_labels(sc.tokens), labels, _("target"))

