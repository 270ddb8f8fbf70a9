"""The stepper's map as SVG: :func:`draw_map` draws a :class:`~app.view.pipeline_map.PipelineMap`
twice, each in one pass: in one row (``wide``), and as one-line chips wrapped into rows a phone's
width (``compact``, without the weights, which are not stages); static/map.css shows the one that
fits. Each stage's nodes sit inside one ``<a>``: its href is the stage's permalink (works without
JavaScript) and its hx-post steps there through the stages endpoint with the form's unsaved edits
(htmx). A drawing is kept for the next request with the same shapes and stage in view; only its
hrefs (permalinks, which hold every value) are new. A value edit leaves the map on the page and the
page's script sets each href (``data-stage``) from the new permalink.

Pure Python: no web framework. Colours and the focus ring come from classes in static/map.css,
so the page's strict CSP holds (no style attribute, no <style>). Every text is escaped here.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from unicodedata import east_asian_width

from markupsafe import Markup, escape

from app.i18n import gettext as _
from app.i18n import language
from app.view.pipeline_map import Column, Node, PipelineMap, StageLink, compact

SVG_NS = "http://www.w3.org/2000/svg"

# Sizes in SVG units (px at 1:1).
LABEL_PX, SHAPE_PX = 12.0, 10.0  # a node's name and its shape
BOX_H, LINE_H, STACK_GAP = 36, 20, 4  # a two-line node; a one-line node; between stacked nodes
PAD_X, SHAPE_GAP = 6, 4  # inside a box; between a one-line node's name and its shape
ARROW, MARGIN = 15, 10  # between columns; around the drawing
SPAN_H = 15  # a bracket and its text above the one-row map; the compact map's caption
ROW_GAP, BYPASS = 18, 9  # between wrapped rows; room below the nodes for V's path to A·V
WIDE_ZOOM = 1.15  # the one-row map is drawn a little larger than 1:1 where there is room
COMPACT_WIDTH = 350  # the compact map's widest row: a phone's column at 1:1
# static/map.css switches to the compact map below 85 % of each bucket's widest one-row map.
FIT_BUCKETS = ((800, "fit-s"), (1000, "fit-m"), (1200, "fit-l"), (math.inf, "fit-xl"))

# DejaVu Sans advance widths in em (the widest of the page's fonts): enough to size a box.
_EM = {
    **dict.fromkeys("iljI.,:;'·|!", 0.3), **dict.fromkeys("frt()[] ", 0.38), "s": 0.52, "c": 0.55,
    **dict.fromkeys("0123456789√", 0.64), **dict.fromkeys("mwMW", 0.98),
    **dict.fromkeys("×÷+=→±&", 0.84), **dict.fromkeys("ᵀ₁₂", 0.42),
}


def text_width(text: str, px: float) -> float:
    """About how wide ``text`` is at ``px``: other uppercase letters count 0.72 em, a wide character (Chinese,
    full-width punctuation) a whole em, the rest 0.62 em."""
    return px * sum(_EM.get(ch, 0.72 if ch.isupper() else 1.0 if east_asian_width(ch) in "WF" else 0.62)
                    for ch in text)


def split_label(label: str) -> tuple[str, str, str]:
    """A label's text before its subscript, the subscript (the letters and digits after "_") and what
    follows it on the line: "÷√d_k·τ" is ("÷√d", "k", "·τ"), so τ is not lowered with the k."""
    main, _sep, after = label.partition("_")
    sub = re.match(r"[A-Za-z0-9]*", after).group(0)
    return main, sub, after[len(sub):]


def label_width(label: str, px: float = LABEL_PX) -> float:
    """A label's width in bold (about 12 % wider), its subscript at three quarters of the size."""
    main, sub, rest = split_label(label)
    return 1.12 * (text_width(main, px) + text_width(sub, 0.75 * px) + text_width(rest, px))



def _n(v: float) -> str:
    return f"{v:.1f}".removesuffix(".0")


@dataclass(frozen=True)
class _Box:
    x: float
    y: float
    w: float
    h: float

    @property
    def mid(self) -> float:
        return self.y + self.h / 2


@dataclass(frozen=True)
class _Row:
    top: float  # of its nodes
    height: float
    bottom_room: float  # below the nodes: room for V's path


def _one_line_width(node: Node) -> float:
    return label_width(node.label) + SHAPE_GAP + text_width(node.shape, SHAPE_PX)


def _column_size(col: Column, one_line: bool) -> tuple[float, float]:
    if len(col.nodes) == 1 and not one_line:
        node = col.nodes[0]
        return max(label_width(node.label), text_width(node.shape, SHAPE_PX)) + 2 * PAD_X, BOX_H
    height = len(col.nodes) * LINE_H + (len(col.nodes) - 1) * STACK_GAP
    return max(_one_line_width(n) for n in col.nodes) + 2 * PAD_X, height


@dataclass(frozen=True)
class _Placed:
    boxes: list[list[_Box]]  # per column, per node
    rows: list[_Row]
    row_of: list[int]  # per column
    width: float
    height: float
    one_line: bool


def _place(m: PipelineMap, max_width: float, one_line: bool) -> _Placed:
    """Columns left to right, wrapped into rows no wider than ``max_width``."""
    sizes = [_column_size(c, one_line) for c in m.columns]
    start = MARGIN + ARROW  # room on the left for an arrow coming round from the row above
    rows: list[list[int]] = [[]]
    x = start
    for i, (w, _height) in enumerate(sizes):
        if rows[-1] and x + w > max_width - MARGIN:
            rows.append([])
            x = start
        rows[-1].append(i)
        x += w + ARROW
    if len(rows) == 1:
        start = MARGIN
    row_of = [r for r, row in enumerate(rows) for _ in row]
    boxes: list[list[_Box]] = [[] for _ in m.columns]
    placed_rows: list[_Row] = []
    # Brackets over the one row; on the compact map their words make one caption.
    levels = 1 if one_line and m.spans else (1 + max((s.level for s in m.spans), default=-1))
    top, width = MARGIN / 2 + levels * SPAN_H, 0.0
    for r, row in enumerate(rows):
        height = max(sizes[i][1] for i in row)
        bypass = m.bypass is not None and row_of[m.bypass[0]] == row_of[m.bypass[2]] == r
        placed_rows.append(_Row(top, height, BYPASS if bypass else 0))
        x = start
        for i in row:
            w, h = sizes[i]
            y = top + (height - h) / 2
            node_h = LINE_H if one_line or len(m.columns[i].nodes) > 1 else BOX_H
            boxes[i] = [_Box(x, y + k * (LINE_H + STACK_GAP), w, node_h) for k in range(len(m.columns[i].nodes))]
            x += w + ARROW
        width = max(width, x - ARROW + MARGIN)
        top += height + placed_rows[-1].bottom_room + ROW_GAP
    return _Placed(boxes, placed_rows, row_of, width, top - ROW_GAP + MARGIN / 2, one_line)


def _arrows(m: PipelineMap, p: _Placed, marker: str) -> list[str]:
    out = []
    for i in range(1, len(m.columns)):
        before, here = p.boxes[i - 1], p.boxes[i]
        pairs = m.columns[i].arrows or (
            [(0, k) for k in range(len(here))] if len(before) == 1 else [(k, 0) for k in range(len(before))]
        )
        for a, b in pairs:
            src, dst = before[a], here[b]
            x1, y1, x2, y2 = src.x + src.w, src.mid, dst.x - 2, dst.mid
            if p.row_of[i - 1] == p.row_of[i]:
                bend = (x2 - x1) / 2
                d = f"M{_n(x1)} {_n(y1)}C{_n(x1 + bend)} {_n(y1)} {_n(x2 - bend)} {_n(y2)} {_n(x2)} {_n(y2)}"
            else:  # down from the end of the row, back to the left, into the next row
                row = p.rows[p.row_of[i - 1]]
                turn = row.top + row.height + row.bottom_room + ROW_GAP / 2
                d = f"M{_n(x1)} {_n(y1)}H{_n(x1 + 6)}V{_n(turn)}H{_n(MARGIN)}V{_n(y2)}H{_n(x2)}"
            out.append(f'<path d="{d}" class="arrow" marker-end="url(#{marker})"/>')
    if m.bypass is not None and p.row_of[m.bypass[0]] == p.row_of[m.bypass[2]]:
        col, node, to = m.bypass
        src, dst, row = p.boxes[col][node], p.boxes[to][0], p.rows[p.row_of[col]]
        low = row.top + row.height + row.bottom_room - 3
        out.append(f'<path d="M{_n(src.x + src.w)} {_n(src.mid)}H{_n(src.x + src.w + 6)}V{_n(low)}'
                   f'H{_n(dst.x + dst.w / 2)}V{_n(dst.y + dst.h + 2)}" class="arrow bypass" '
                   f'marker-end="url(#{marker})"/>')
    return out


def _spans(m: PipelineMap, p: _Placed) -> list[str]:
    """A bracket with its words over each span of the one-row map; a caption on the compact one."""
    if p.one_line:
        words = " · ".join(span.label for span in m.spans)
        return [f'<text x="{MARGIN}" y="{_n(MARGIN / 2 + SPAN_H - 4)}" class="span-label">{escape(words)}</text>'] \
            if words else []
    out = []
    for span in m.spans:
        x1, x2 = p.boxes[span.first][0].x, p.boxes[span.last][0].x + p.boxes[span.last][0].w
        y = p.rows[0].top - span.level * SPAN_H - 4
        out.append(f'<path d="M{_n(x1)} {_n(y + 3)}V{_n(y)}H{_n(x2)}V{_n(y + 3)}" class="span"/>')
        out.append(f'<text x="{_n((x1 + x2) / 2)}" y="{_n(y - 3)}" class="span-label" '
                   f'text-anchor="middle">{escape(span.label)}</text>')
    return out


def _label(label: str) -> tuple[str, int]:
    """The label's text, its subscript lowered (and what follows raised back); and how far the baseline
    is left lowered."""
    main, sub, rest = split_label(label)
    if not sub:
        return str(escape(label)), 0
    lowered = f'{escape(main)}<tspan class="sub" dy="3">{escape(sub)}</tspan>'
    return (f'{lowered}<tspan dy="-3">{escape(rest)}</tspan>', 0) if rest else (lowered, 3)


def _node(node: Node, box: _Box, one_line: bool) -> str:
    """A box with the node's name and shape: side by side on one line, or the shape below."""
    label, lowered = _label(node.label)
    x = _n(box.x + box.w / 2)
    if one_line:
        shape = f'<tspan class="shape" dx="{SHAPE_GAP}" dy="{-lowered}">{escape(node.shape)}</tspan>'
        text = f'<text x="{x}" y="{_n(box.mid + 4)}" class="label" text-anchor="middle">{label}{shape}</text>'
    else:
        text = (f'<text x="{x}" y="{_n(box.y + 15)}" class="label" text-anchor="middle">{label}</text>'
                f'<text x="{x}" y="{_n(box.y + 29)}" class="shape" text-anchor="middle">{escape(node.shape)}</text>')
    return (f'<g class="node{" off" if node.off else ""}"><rect x="{_n(box.x)}" y="{_n(box.y)}" width="{_n(box.w)}" '
            f'height="{_n(box.h)}" rx="4" class="box"/>{text}</g>')


@dataclass(frozen=True)
class _Href:
    """Where a stage's href goes: the drawing is kept with these slots, the hrefs change with every edit."""

    key: str


def _link(link: StageLink, drawn: str, boxes: list[list[_Box]], rows: list[int], ident: str, current: str,
          post: str) -> list[str | _Href]:
    """A stage's nodes as one link. Behind them, one rectangle per row round all of them: the link's
    focus ring, and what a click between two of its nodes lands on."""
    ring = []
    for r in dict.fromkeys(rows):
        cols = [b for b, row in zip(boxes, rows, strict=True) if row == r]
        x1, x2 = cols[0][0].x - 3, cols[-1][0].x + cols[-1][0].w + 3
        y1, y2 = min(b[0].y for b in cols) - 3, max(b[-1].y + b[-1].h for b in cols) + 3
        ring.append(f'<rect x="{_n(x1)}" y="{_n(y1)}" width="{_n(x2 - x1)}" height="{_n(y2 - y1)}" rx="6" '
                    'class="ring"/>')
    state = ' class="stage-node current" aria-current="step"' if link.key == current else ' class="stage-node"'
    return [
        f'<a id="{ident}-{escape(link.key)}" data-stage="{escape(link.key)}" href="', _Href(link.key),
        f'" hx-post="{escape(post)}" '
        f'hx-vals="{escape(json.dumps({"goto": link.key}))}" hx-target="#stages" hx-swap="outerHTML"{state} '
        f'aria-label="{escape(link.accessible_name)}">{"".join(ring)}{drawn}</a>',
    ]


@lru_cache(maxsize=256)
def _drawing(m: PipelineMap, layout: str, current: str, post: str,
             lang: str) -> tuple[tuple[str, ...], tuple[str, ...], float]:
    """One drawing of the map, cut where each stage's href goes: (pieces, the stage of each cut, the
    width in SVG units). An edit changes the hrefs, not the drawing: it is drawn once per shape of the
    pipeline, stage in view, root path and language (``lang``, the request's: its words)."""
    one_line = layout == "compact"
    if one_line:
        m = compact(m)
    p = _place(m, COMPACT_WIDTH if one_line else math.inf, one_line)
    zoom = 1 if one_line else WIDE_ZOOM
    ident = f"map-{layout}"
    order = " → ".join(c.merged().label for c in m.columns)
    in_view = m.link(current)
    title = (_("The pipeline as configured: {order}; in view: {stage}").format(order=order,
                                                                              stage=in_view.accessible_name)
             if in_view else _("The pipeline as configured: {order}").format(order=order))
    parts: list[str | _Href] = [
        f'<svg xmlns="{SVG_NS}" viewBox="0 0 {_n(p.width)} {_n(p.height)}" width="{_n(p.width * zoom)}" '
        f'height="{_n(p.height * zoom)}" class="map map-{layout}" role="group" aria-labelledby="{ident}-title">',
        f'<title id="{ident}-title">{escape(title)}</title>',
        f'<defs><marker id="{ident}-arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" '
        'orient="auto"><path d="M0 0L8 4L0 8z" class="arrowhead"/></marker></defs>',
        *_spans(m, p),
        *_arrows(m, p, f"{ident}-arrow"),
    ]
    i = 0
    while i < len(m.columns):  # one <a> per stage, round its consecutive columns
        stage, j = m.columns[i].stage, i + 1
        while j < len(m.columns) and stage is not None and m.columns[j].stage == stage:
            j += 1
        drawn = "".join(_node(node, box, p.one_line or len(col.nodes) > 1)
                        for col, col_boxes in zip(m.columns[i:j], p.boxes[i:j], strict=True)
                        for node, box in zip(col.nodes, col_boxes, strict=True))
        if stage is None:
            parts.append(f'<g class="plain">{drawn}</g>')
        else:
            parts += _link(m.link(stage), drawn, p.boxes[i:j], p.row_of[i:j], ident, current, post)
        i = j
    parts.append("</svg>")
    pieces, keys, run = [], [], []
    for part in parts:
        if isinstance(part, _Href):
            pieces.append("".join(run))
            keys.append(part.key)
            run = []
        else:
            run.append(part)
    pieces.append("".join(run))
    return tuple(pieces), tuple(keys), p.width


def _fill(pieces: tuple[str, ...], keys: tuple[str, ...], hrefs: dict[str, str]) -> Markup:
    # Without a permalink (a state too large for a link) the href leads to the map's step buttons.
    out = [pieces[0]]
    for key, piece in zip(keys, pieces[1:], strict=True):
        out += (escape(hrefs.get(key, "#map-steps")), piece)
    return Markup("".join(out))


@dataclass(frozen=True)
class DrawnMap:
    wide: Markup  # one row
    compact: Markup  # chips in rows, for a narrow screen
    fit: str  # how wide the one-row map is: the class static/map.css reads to choose


def draw_map(m: PipelineMap, *, current: str, hrefs: dict[str, str], post: str) -> DrawnMap:
    """Both drawings of the map. ``current`` is the stage in view ("" for none, as when every stage
    is shown); ``hrefs`` each stage's link (its permalink); ``post`` the stages endpoint."""
    *wide, width = _drawing(m, "wide", current, post, language())
    *small, _width = _drawing(m, "compact", current, post, language())
    return DrawnMap(_fill(*wide, hrefs), _fill(*small, hrefs),
                    next(cls for limit, cls in FIT_BUCKETS if width <= limit))
