"""Everything the "Your sentence" templates get (model_context): the model view's 72 maps, the chosen head
enlarged, its step-through on the real numbers (X, Q, K, V, scores, scaled, softmax, A·V, the lines view
and the cell inspector's arithmetic), the two sentences compared, and heads switched off. Every label
counts from 1; every number comes from app.maths."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from markupsafe import Markup
from nbformat import NotebookNode

from app.i18n import cosine, decimal, percent, signed, weight
from app.i18n import gettext as _
from app.maths.arithmetic import CellRef, explain
from app.maths.attribution import attention_rollout
from app.maths.bert import ModelRun, layer_attention_run
from app.maths.model_files import ModelFiles
from app.maths.sentence_pair import HeadShift, attention_shifts, first_position, moved_grid, switch_off
from app.serving.real_models import sentence_model
from app.state.model_state import DEFAULT_QUERY_WORD, HEADS, INSPECTABLE, LAYERS, ModelPage, ModelRead, model_query
from app.view.attention_lines import attention_lines
from app.view.head_cards import catalogue_context
from app.view.heatmap import constant_value, heatmap_table, legend
from app.view.labels import head_name, numbered, token_labels
from app.view.model_maps import condensed_svg, head_svg, thumbnail
from app.view.notebook.model import model_notebook
from app.view.panels import Panel
from app.view.worked import worked

DECIMALS = 3
TOP_SHIFTS = 8  # heads listed under the comparison


@dataclass(frozen=True)
class Thumb:
    layer: int
    head: int
    src: str  # a PNG data URI
    query: str  # the permalink's query string that steps through this head
    selected: bool
    off: bool

    @property
    def name(self) -> str:
        return head_name(self.layer, self.head)


def head_panel(m: np.ndarray, title: str, label: str, rows: list[str], cols: list[str], kind: str = "signed",
           ref: str = "", selected: tuple[int, int] | None = None, decimals: int = 2) -> Panel:
    title = _(title)  # an English title of app.view.labels or of the callers' N_
    table, top = heatmap_table(m, row_labels=rows, col_labels=cols, kind=kind, decimals=decimals, ref=ref,
                               caption=title, selected=selected)
    scale = legend(kind, top, decimals, constant_value(m, decimals))
    return Panel(title, f"{m.shape[0]}×{m.shape[1]}", table, scale, kind, "", Markup(label))


def default_query(tokens: tuple[str, ...]) -> int:
    """The first "it" when there is one, else the first token after [CLS]."""
    found = first_position(tokens, DEFAULT_QUERY_WORD)
    return found if found is not None else min(1, len(tokens) - 1)


def model_view(run: ModelRun, page: ModelPage, layer: int, head: int) -> dict:
    """The 72 maps, row by row, and the chosen head enlarged."""
    off = page.heads_off
    thumbs = [[Thumb(la, h, thumbnail(run.attention[la, h]), model_query(page, layer=la, head=h, cell=None),
                     (la, h) == (layer, head), (la, h) in off) for h in range(run.heads)] for la in range(run.layers)]
    weights = run.attention[layer, head]  # (T, T)
    rows = token_labels(run.tokens)
    title = _("Layer {layer}, head {head}: attention weights, queries down, keys across").format(
        layer=layer + 1, head=head + 1)
    return {"thumbs": thumbs, "enlarged": head_svg(weights, run.tokens, title), "enlarged_title": title,
            "enlarged_panel": head_panel(weights, title, "", rows, rows, kind="weights")}


def steps(model: ModelFiles, run: ModelRun, page: ModelPage, layer: int, head: int, query: int) -> dict:
    """One head's step-through: every stage's heatmap, the lines view and the inspected cell's arithmetic."""
    att = layer_attention_run(model, run, layer)
    h = att.heads[head]
    rows, dims = token_labels(run.tokens), numbered("", att.d_k)
    sel = page.cell

    def at(matrix: str) -> tuple[int, int] | None:
        return (sel.row, sel.col) if sel is not None and sel.matrix == matrix else None

    x_svg, x_top = condensed_svg(att.x, run.tokens, _("X, the input of layer {layer}: {shape}").format(
        layer=layer + 1, shape=f"{len(rows)}×{att.d_model}"))
    panels = {
        "q": head_panel(h.q, "Q", "Q = X W_Q + b_Q", rows, dims),
        "k": head_panel(h.k, "K", "K = X W_K + b_K", rows, dims),
        "v": head_panel(h.v, "V", "V = X W_V + b_V", rows, dims),
        "scores": head_panel(h.scores, "Scores Q·Kᵀ", "", rows, rows, ref="scores", selected=at("scores")),
        "scaled": head_panel(h.scaled, "Scaled Q·Kᵀ/√d_k", "", rows, rows, ref="scaled", selected=at("scaled")),
        "softmax": head_panel(h.softmax, "Attention weights A", "", rows, rows, kind="weights", ref="softmax",
                          selected=at("softmax")),
        "output": head_panel(h.output, "Output A·V", "", rows, dims, ref="output", selected=at("output")),
    }
    explanation = None
    if sel is not None:
        explanation = explain(att, CellRef(sel.matrix, head, sel.row, sel.col), list(run.tokens),
                              numbered("x", att.d_model))
    lines = attention_lines(h.softmax[None], run.tokens, run.tokens, [_("head {n}").format(n=head + 1)],
                            fig_id="model-lines", focus=query)
    x_row = None
    if page.x_row is not None:
        x_row = {"index": page.x_row, "token": run.tokens[page.x_row],
                 "numbers": [decimal(v, 3) for v in att.x[page.x_row].tolist()]}
    return {"x_svg": x_svg, "x_top": decimal(x_top, 2), "x_legend": legend("signed", x_top, 2), "panels": panels,
            "d_k": att.d_k, "d_model": att.d_model, "sqrt_d_k": decimal(att.scale_factor, 3), "lines": lines,
            "explanation": explanation,
            "worked": None if explanation is None else worked(explanation, DECIMALS), "x_row": x_row,
            "inspectable": INSPECTABLE}


def _shift_line(s: HeadShift, first: tuple[str, ...], second: tuple[str, ...], query: str, page: ModelPage) -> dict:
    """"L4 H2: it → 3 animal 0.41 → 0.12; → 1 [CLS] 0.20 → 0.49" as its parts, with a link that steps through it."""
    return {"link": model_query(page, layer=s.layer, head=s.head, cell=None), "name": head_name(s.layer, s.head),
            "moved": weight(s.moved, 2), "query": query, "layer": s.layer, "head": s.head,
            "lost": f"{s.lost + 1} {first[s.lost]}", "lost_before": weight(s.before[s.lost], 2),
            "lost_after": weight(s.after[s.lost], 2), "gained": f"{s.gained + 1} {second[s.gained]}",
            "gained_before": weight(s.before[s.gained], 2), "gained_after": weight(s.after[s.gained], 2)}


def compare(one: ModelRun, two: ModelRun, page: ModelPage, query: int, layer: int, head: int) -> dict:
    """The query's attention in the two sentences: per head, how much moved, and the heads that moved most;
    or, when the WordPiece sequences differ in length, the chosen head's two rows side by side."""
    token = one.tokens[query]
    if len(one.tokens) != len(two.tokens):
        other = first_position(two.tokens, token)
        rows = [{"sentence": 1, "query": query, "pairs": list(zip(token_labels(one.tokens),
                                                                  [weight(w, 2) for w in one.attention[layer, head,
                                                                                                      query]],
                                                                  strict=True))}]
        if other is not None:
            rows.append({"sentence": 2, "query": other,
                         "pairs": list(zip(token_labels(two.tokens),
                                           [weight(w, 2) for w in two.attention[layer, head, other]], strict=True))})
        return {"aligned": False, "token": token, "lengths": (len(one.tokens), len(two.tokens)), "rows": rows,
                "head": head_name(layer, head), "missing": other is None}
    shifts = attention_shifts(one.attention, two.attention, query)
    grid = moved_grid(one.attention, two.attention, query)
    table, top = heatmap_table(grid, row_labels=[_("L{layer}").format(layer=la + 1) for la in range(LAYERS)],
                               col_labels=[_("H{head}").format(head=h + 1) for h in range(HEADS)], kind="weights",
                               decimals=2, ref="moved",
                               caption=_("Share of {token}'s attention that moved, per head").format(token=token),
                               corner=_("layer"))
    return {"aligned": True, "token": token, "query": query,
            "top": [_shift_line(s, one.tokens, two.tokens, token, page) for s in shifts[:TOP_SHIFTS]],
            "grid": table, "grid_legend": legend("weights", top, 2),
            "differs": [i for i, (a, b) in enumerate(zip(one.tokens, two.tokens, strict=True)) if a != b]}


def shown_head(page: ModelPage, one: ModelRun, two: ModelRun, query: int) -> tuple[int, int]:
    """The head the page steps through: the one asked for, else the one that moves the compared token most
    between the two sentences (when they align), else layer 1's head 1; from 0."""
    if page.layer is not None and page.head is not None:
        return page.layer, page.head
    if len(one.tokens) == len(two.tokens):
        best = attention_shifts(one.attention, two.attention, query)[0]
        return best.layer, best.head
    return 0, 0


def model_notebook_for(model: ModelFiles, read: ModelRead) -> NotebookNode:
    """The notebook of the head the page steps through, on the first sentence."""
    page = read.page
    one, two = sentence_model().run(read.first), sentence_model().run(read.second)
    query = page.query if page.query is not None else default_query(one.tokens)
    layer, head = shown_head(page, one, two, query)
    return model_notebook(model, read.first.text, one, layer, head)


def model_context(model: ModelFiles, read: ModelRead) -> dict:
    """The whole page's context for a state read by app.state.model_state.read_model_page."""
    page = read.page
    one, two = sentence_model().run(read.first), sentence_model().run(read.second)
    query = page.query if page.query is not None else default_query(one.tokens)
    layer, head = shown_head(page, one, two, query)
    off = page.heads_off
    switched = switch_off(model, read.first, read.second, off, (one, two))
    return {
        "page": page, "one": one, "two": two, "layer": layer, "head": head, "query": query,
        "query_string": model_query(page), "head_name": head_name(layer, head),
        "layers": LAYERS, "heads": HEADS, "rows": token_labels(one.tokens),
        "view": model_view(one, page, layer, head),
        "steps": steps(model, one, page, layer, head, query),
        "compare": compare(one, two, page, query, layer, head),
        "switched": {"off": off, "before": cosine(switched.before), "after": cosine(switched.after),
                     "change": signed(cosine(switched.after - switched.before)),
                     "count": len(off)},
        "catalogue": catalogue_context(),
        "rollout": rollout_figure(one, query),
    }


def rollout_figure(run: ModelRun, query: int) -> dict:
    """The attention rollout of the first sentence (Abnar & Zuidema, 2020; app.maths.attribution): every token's
    row as a map, and as lines from the query token (any token on hover), beside [CLS]'s mean share of a row."""
    rolled = attention_rollout(run.attention)  # (T, T)
    tokens = list(run.tokens)
    return {"cls": percent(float(rolled[:, 0].mean()), 0), "query_token": tokens[query],
            "lines": attention_lines(rolled[None], tokens, tokens, [_("rollout")], fig_id="model-rollout-lines",
                                     focus=query),
            "map": head_svg(rolled, tokens, _("Attention rollout: every token's row"))}
