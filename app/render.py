"""From a run to what the templates show: heatmap panels per stage, editor grids, the inspector.

No numbers are computed here: every value comes from the pipeline's record (app.pipeline) or the
inspector's arithmetic (app.arithmetic). This module only chooses labels, formats and layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from markupsafe import Markup

from app.arithmetic import INSPECTABLE, CellRef, Explanation, explain, parse_ref
from app.heatmap import LegendStop, heatmap_table, legend
from app.pipeline import AttentionRun, causal_mask
from app.presets import PRESETS
from app.scenario import Scenario, View, format_input
from app.stages import STAGES, Stage, neighbours, stage_or_first


@dataclass(frozen=True)
class Panel:
    title: str
    shape: str
    table: Markup
    legend: list[LegendStop]
    kind: str


@dataclass(frozen=True)
class StageView:
    stage: Stage
    panels: dict[str, Panel]


@dataclass(frozen=True)
class EditorGrid:
    """A matrix of number inputs: field names, values and accessible labels, row by row."""

    key: str
    title: str
    shape: str
    col_labels: list[str]
    rows: list[tuple[str, list[tuple[str, str, str]]]]  # (row label, [(name, value, aria label)])


def token_labels(tokens: tuple[str, ...]) -> list[str]:
    return [f"{i} {t}" for i, t in enumerate(tokens)]


def dim_labels(sc: Scenario) -> list[str]:
    p = PRESETS.get(sc.preset)
    if p is not None and len(p.dim_names) == sc.d_model:
        return list(p.dim_names)
    return [f"x{j + 1}" for j in range(sc.d_model)]


class PanelBuilder:
    """Builds the heatmaps of one run, each at most once per request."""

    def __init__(self, sc: Scenario, run: AttentionRun, view: View) -> None:
        self.sc, self.run, self.view = sc, run, view
        self.rows = token_labels(sc.tokens)
        self.keys = token_labels(sc.key_tokens)  # the source sentence's tokens in cross-attention
        self.dims = dim_labels(sc)
        self.selected = parse_ref(view.inspect, run)

    def _panel(self, m: np.ndarray, title: str, ref: str, rows: list[str], cols: list[str],
               kind: str = "signed", inspect: str = "", corner: str = "") -> Panel:
        sel = None
        if inspect and self.selected and self.selected.matrix == inspect:
            if self.selected.head == self.view.head or inspect == "final":
                sel = (self.selected.row, self.selected.col)
        table, top = heatmap_table(
            m, row_labels=rows, col_labels=cols, kind=kind, decimals=self.view.decimals,
            ref=ref, caption=title, corner=corner, inspectable=bool(inspect), selected=sel,
        )
        shape = f"{m.shape[0]}×{m.shape[1]}"
        return Panel(title, shape, table, legend(kind, top, self.view.decimals), kind)

    def head_matrix(self, name: str) -> Panel:
        h = self.view.head
        head = self.run.heads[h]
        m = getattr(head, name)
        hn = f" (head {h + 1})" if self.run.num_heads > 1 else ""
        ref = f"{name}.{h}"
        d_cols = lambda p, n: [f"{p}{j + 1}" for j in range(n)]  # noqa: E731
        scaled_title = "Scaled Q·Kᵀ/√d_k" if self.run.scale else "Scaled (÷√d_k off)"
        if self.run.temperature != 1.0:
            scaled_title += f" ÷ τ={self.run.temperature:g}"
        if head.bias is not None:
            scaled_title += " + ALiBi bias"
        spec = {
            "q": ("Q", self.rows, d_cols("q", m.shape[1]), "signed"),
            "k": ("K", self.keys, d_cols("k", m.shape[1]), "signed"),
            "v": ("V", self.keys, d_cols("v", m.shape[1]), "signed"),
            "q_rot": ("Q rotated (RoPE)", self.rows, d_cols("q", m.shape[1]), "signed"),
            "k_rot": ("K rotated (RoPE)", self.keys, d_cols("k", m.shape[1]), "signed"),
            "bias": ("ALiBi bias −m·|i−j|", self.rows, self.keys, "signed"),
            "scores": ("Scores Q·Kᵀ", self.rows, self.keys, "signed"),
            "scaled": (scaled_title, self.rows, self.keys, "signed"),
            "softmax": ("Attention weights A", self.rows, self.keys, "weights"),
            "output": ("Output A·V", self.rows, d_cols("v", m.shape[1]), "signed"),
        }[name]
        corner = "query ↓ key →" if spec[2] is self.keys else ""
        inspect = name if name in INSPECTABLE else ""
        return self._panel(m, spec[0] + hn, ref, spec[1], spec[2], spec[3], inspect=inspect, corner=corner)

    def weight(self, name: str) -> Panel:
        h = self.view.head
        m = getattr(self.run.weights, name)[h]
        letter = name[2].upper()
        cols = [f"{letter.lower()}{j + 1}" for j in range(m.shape[1])]
        hn = f" (head {h + 1})" if self.run.num_heads > 1 else ""
        return self._panel(m, f"W_{letter}{hn}", f"{name}.{h}", self.dims, cols)

    def stage(self, stage: Stage) -> StageView:
        run = self.run
        p: dict[str, Panel] = {}
        if stage.key == "x":
            if run.pe is not None:
                p["x_input"] = self._panel(run.x_input, "Embeddings", "x_input", self.rows, self.dims)
                p["pe"] = self._panel(run.pe, f"PE ({run.positional_encoding})", "pe", self.rows, self.dims)
                p["x"] = self._panel(run.x, "X = embeddings + PE", "x", self.rows, self.dims)
            else:
                p["x"] = self._panel(run.x, "X", "x", self.rows, self.dims)
            if run.context is not None:
                p["context"] = self._panel(run.context, "Source sentence C (keys and values)", "context",
                                           self.keys, self.dims)
        elif stage.key == "qkv":
            for name in ("q", "k", "v"):
                p[f"w_{name}"] = self.weight(f"w_{name}")
                p[name] = self.head_matrix(name)
        elif stage.key == "scores":
            names = ("q_rot", "k_rot", "scores") if run.heads[0].q_rot is not None else ("q", "k", "scores")
            p["q"], p["k"], p["scores"] = (self.head_matrix(n) for n in names)
        elif stage.key == "scaled":
            p["scores"], p["scaled"] = self.head_matrix("scores"), self.head_matrix("scaled")
            if run.heads[0].bias is not None:
                p["bias"] = self.head_matrix("bias")
        elif stage.key == "mask":
            p["scaled"] = self.head_matrix("scaled")
        elif stage.key == "softmax":
            p["scaled"], p["softmax"] = self.head_matrix("scaled"), self.head_matrix("softmax")
        elif stage.key == "output":
            p["softmax"], p["v"], p["output"] = (self.head_matrix(n) for n in ("softmax", "v", "output"))
        elif stage.key == "multihead":
            d_v = run.d_v
            concat_cols = [f"h{h + 1}·v{j + 1}" for h in range(run.num_heads) for j in range(d_v)]
            p["concat"] = self._panel(run.concat, "Concat(head₁ … head_h)", "concat", self.rows, concat_cols)
            p["w_o"] = self._panel(run.weights.w_o, "W_O", "w_o", concat_cols, self.dims)
            p["final"] = self._panel(run.output, "MultiHead(X) = Concat·W_O", "final", self.rows, self.dims,
                                     inspect="final")
        return StageView(stage, p)


def stage_views(builder: PanelBuilder, view: View) -> list[StageView]:
    if view.show_all:
        return [builder.stage(s) for s in STAGES]
    return [builder.stage(stage_or_first(view.stage))]


def inspector(builder: PanelBuilder) -> Explanation | None:
    ref: CellRef | None = builder.selected
    if ref is None:
        return None
    return explain(builder.run, ref, list(builder.sc.tokens), builder.dims, list(builder.sc.key_tokens))


def editor_grids(sc: Scenario, view: View, run: AttentionRun) -> dict:
    """X (and the source sentence, and the learned position table), and the selected head's
    W_Q, W_K, W_V and its rows of W_O, as grids of inputs. The weights are the run's, so they
    are not rebuilt from the base and the edits a second time per request."""
    w = {name: getattr(run.weights, name) for name in ("w_q", "w_k", "w_v", "w_o")}
    h = view.head
    hn = f" (head {h + 1})" if sc.num_heads > 1 else ""
    dims = dim_labels(sc)

    def grid(key: str, title: str, m: np.ndarray, row_labels: list[str], col_labels: list[str],
             aria: str) -> EditorGrid:
        body = [
            (rl, [(f"{key}-{i}-{j}", format_input(v), f"{aria} row {rl}, column {col_labels[j]}")
                  for j, v in enumerate(row)])
            for i, (rl, row) in enumerate(zip(row_labels, m.tolist(), strict=True))
        ]
        return EditorGrid(key, title, f"{m.shape[0]}×{m.shape[1]}", col_labels, body)

    d_v = sc.d_v
    o_rows = [f"h{h + 1}·v{j + 1}" for j in range(d_v)]
    grids = {
        "x": grid("x", "X (target sentence)" if sc.cross else "X", sc.x, token_labels(sc.tokens), dims, "X"),
        "c": None,
        "pos": None,
        "weights": [
            grid("w_q", f"W_Q{hn}", w["w_q"][h], dims, [f"q{j + 1}" for j in range(sc.d_k)], f"W_Q{hn}"),
            grid("w_k", f"W_K{hn}", w["w_k"][h], dims, [f"k{j + 1}" for j in range(sc.d_k)], f"W_K{hn}"),
            grid("w_v", f"W_V{hn}", w["w_v"][h], dims, [f"v{j + 1}" for j in range(d_v)], f"W_V{hn}"),
            grid("w_o", f"W_O rows of head {h + 1}", w["w_o"][h * d_v:(h + 1) * d_v], o_rows, dims, "W_O"),
        ],
    }
    if sc.cross and sc.context_x is not None:
        grids["c"] = grid("c", "C (source sentence)", sc.context_x, token_labels(sc.context_tokens), dims, "C")
    if sc.position_table is not None:
        positions = [f"pos {i}" for i in range(sc.position_table.shape[0])]
        grids["pos"] = grid("pos", "P (learned position table)", sc.position_table, positions, dims, "P")
    return grids


@dataclass(frozen=True)
class MaskCell:
    name: str
    hidden: bool
    reason: str  # "causal", "padding", "" (hidden by hand or visible)
    text: str


def mask_grid(sc: Scenario, run: AttentionRun, view: View) -> list[tuple[str, list[MaskCell]]]:
    """The mask stage's checkboxes: one per (query, key), labelled with the scaled score."""
    t, s = len(sc.tokens), len(sc.key_tokens)
    causal = causal_mask(t, s) if sc.mask_mode == "causal" else np.zeros((t, s), dtype=bool)
    scaled = run.heads[view.head].scaled
    fmt = f"{{:.{view.decimals}f}}".format
    rows = []
    for i, label in enumerate(token_labels(sc.tokens)):
        cells = []
        for j in range(s):
            reason = "causal" if causal[i, j] else ("padding" if j in sc.padding else "")
            hidden = bool(reason) or (i, j) in sc.blocked
            cells.append(MaskCell(f"block-{i}-{j}", hidden, reason, fmt(scaled[i, j] + 0.0)))
        rows.append((label, cells))
    return rows


def page_context(sc: Scenario, view: View) -> dict:
    """Everything the workspace templates need for one scenario."""
    run = sc.run()
    builder = PanelBuilder(sc, run, view)
    current = stage_or_first(view.stage)
    prev, nxt = neighbours(current.key)
    ctx_views = stage_views(builder, view)
    return {
        "sc": sc,
        "view": view,
        "run": run,
        "preset": PRESETS.get(sc.preset),
        "presets": PRESETS,
        "stages": STAGES,
        "current": current,
        "prev": prev,
        "next": nxt,
        "stage_views": ctx_views,
        "explanation": inspector(builder),
        "dims": builder.dims,
        "token_rows": builder.rows,
        "key_rows": builder.keys,
        "mask_rows": mask_grid(sc, run, view) if any(v.stage.key == "mask" for v in ctx_views) else [],
    }
