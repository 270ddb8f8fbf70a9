"""Attention weights as lines between tokens (BertViz's "head view", seed 000's figure).

One server-drawn ``<svg>``: the query tokens in a column on the left, the key tokens (the source
sentence in cross-attention) on the right, and per head one line from each query to each key.

    stroke-width   = 6 · w               (viewBox units; a masked key, w = 0, has a zero-width line)
    stroke-opacity = 0.25 + 0.75 · w

Both are monotone in the weight w, which every line also carries as ``data-w``. One colour per
head (Okabe–Ito, colour-blind safe), set by the classes ``h0`` … ``h7`` in static/lines.css: no
style attributes and no <style>, so the page's strict CSP holds.

Interaction is CSS only (static/lines.css): every token is a focusable ``<g>`` holding its own
lines and its weights (printed beside the other column's labels, shown while the token is hovered
or focused). A key's lines are a second, hidden copy grouped under the key, so no rule names an
index. Above ``ALL_LINES_UP_TO`` lines (h·T·S) only the weights of at least ``THRESHOLD`` are
drawn, and the figure says so.

Built in one pass with str.join: this is on the per-edit path. Pure NumPy, stdlib and markupsafe.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from markupsafe import Markup, escape

from app.i18n import N_, count, local_number, ngettext, weight
from app.i18n import gettext as _
from app.view.map_drawing import text_width

SVG_NS = "http://www.w3.org/2000/svg"
WIDTH_PER_WEIGHT = 6.0  # stroke-width = 6·w
OPACITY_FLOOR = 0.25  # stroke-opacity = 0.25 + 0.75·w
ALL_LINES_UP_TO = 2048  # h·T·S up to 16 tokens × 8 heads: every pair has its line
THRESHOLD = 0.05  # beyond that, only weights ≥ 0.05: at most 20 lines per query and head
LABEL_CHARS = 12  # longer tokens are cut with "…" (the full text is in the token's accessible name)

# Okabe & Ito's palette, ordered so that the bank presets' who, when and where heads get seed 000's
# purple, green and orange; yellow, the faintest on white, comes last.
HEAD_COLOURS = (N_("reddish purple"), N_("bluish green"), N_("orange"), N_("blue"), N_("vermillion"), N_("sky blue"),
                N_("black"), N_("yellow"))

# Geometry, in viewBox units.
ROW = 24  # one token per row
TOP = 30  # room for the column headings
CHAR_W = 7.9  # a label character at 14 px
LABEL_FONT_PX = 14.0
NUM_W = 28  # one weight column per head: "0.59" at 10.5 px
GAP = 6
SPAN = 190  # horizontal length of a query's lines, at least
DRAWN_SCALE = 1.1  # CSS pixels per viewBox unit where the page has room (it shrinks to fit a phone)


@dataclass(frozen=True)
class HeadKey:
    """One head's control: its index, its name ("head 3: where") and its colour class."""

    index: int
    label: str
    colour: str  # the Okabe–Ito name, said in the description

    @property
    def css(self) -> str:
        return f"h{self.index}"


@dataclass(frozen=True)
class LinesFigure:
    svg: Markup
    heads: tuple[HeadKey, ...]
    note: str  # what the figure leaves out, if anything ("" when every pair is drawn)
    lines: int  # lines drawn, all heads (each pair once: the key view's copies are not counted)
    pairs: int  # h·T·S
    drawn: tuple[int, int] = (0, 0)  # its width and height on the page, px (a placeholder's size before it comes)


def line_width(w: float) -> float:
    """The stated mapping, rounded as drawn."""
    return round(WIDTH_PER_WEIGHT * w, 2)


def line_opacity(w: float) -> float:
    return round(OPACITY_FLOOR + (1.0 - OPACITY_FLOOR) * w, 2)


def _num(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".")


def _heading_width(text: str) -> float:
    """A column heading's width in viewBox units (11 px letters spaced .04 em, static/lines.css): a wide CJK
    character is a full em, another letter about 0.62 em, so that "requêtes" or "Schlüssel" is never cut."""
    return sum((11.0 if ord(c) >= 0x2E80 else 6.9) + 0.44 for c in text)


def _short(token: str) -> str:
    return token if len(token) <= LABEL_CHARS else token[: LABEL_CHARS - 1] + "…"


def _label_w(token: str) -> float:
    """A label's width at 14 px: CHAR_W a character, or more where its letters are wide ("▁margem": an m is an
    em; a label drawn wider than its column was cut at the figure's edge)."""
    short = _short(token)
    return max(CHAR_W * len(short), text_width(short, LABEL_FONT_PX))


def attention_lines(
    weights: np.ndarray,
    queries: Sequence[str],
    keys: Sequence[str],
    head_labels: Sequence[str],
    *,
    fig_id: str,
    focus: int | None = None,
    cross: bool = False,
    hidden: np.ndarray | None = None,
) -> LinesFigure:
    """The figure for weights of shape (h, T, S): ``weights[h][i][j]`` is how much query i attends
    to key j in head h. ``focus`` is a query drawn strong (and its weights printed) until the
    student hovers or focuses another token. ``fig_id`` keeps ids unique when a page shows the
    figure twice. ``hidden`` (T, S), True where the mask hides key j from query i: no line, and "−∞"
    printed in place of the weight, as in the softmax's input."""
    a = np.asarray(weights, dtype=np.float64)  # (h, T, S)
    h_count, t, s = a.shape
    if len(queries) != t or len(keys) != s or len(head_labels) != h_count:
        raise ValueError(f"weights {a.shape} do not fit {len(queries)} queries, {len(keys)} keys, "
                         f"{len(head_labels)} heads")
    heads = tuple(HeadKey(h, head_labels[h], _(HEAD_COLOURS[h % len(HEAD_COLOURS)])) for h in range(h_count))
    threshold = 0.0 if a.size <= ALL_LINES_UP_TO else THRESHOLD

    # 1) Layout: query labels | lines | key labels | a key's weights (a query in use). A key in use
    #    prints its weights just right of the query labels, and its own lines start after them.
    # At least the width of the column's heading, "queries" in the reader's language (right-aligned).
    queries_heading, keys_heading = _("queries"), _("keys (source)") if cross else _("keys")
    q_w = max(52.0, _heading_width(queries_heading) + 4, max((_label_w(q) for q in queries), default=0) + 8)
    k_w = max(40.0, max((_label_w(k) for k in keys), default=0) + 8)
    # The keys' heading may run over the weights' columns after them, never past the figure's edge.
    k_w = max(k_w, _heading_width(keys_heading) + 4 - h_count * NUM_W)
    num_zone = h_count * NUM_W  # one column of printed weights per head
    span = max(SPAN, num_zone + 110)
    x0 = q_w + GAP  # a query's lines start
    x1 = x0 + span  # every line ends
    k_span = span - num_zone - 4  # a key's lines, after the query-side weights
    k_num_x = x1 + GAP + k_w + 4
    width = round(k_num_x + num_zone + 2)
    height = TOP + max(t, s) * ROW + 6
    head_gap = min(3.0, 12.0 / h_count)
    offsets = [(h - (h_count - 1) / 2) * head_gap for h in range(h_count)]
    y = [TOP + ROW // 2 + i * ROW for i in range(max(t, s))]  # a row's centre

    # 2) Every drawn pair once, in (head, query, key) order: its line under the query, a copy under
    #    the key (no data-w: the query's line carries it), and its weight printed for each.
    q_lines: list[list[list[str]]] = [[[] for _ in range(t)] for _ in range(h_count)]  # [h][i]
    q_nums: list[list[list[str]]] = [[[] for _ in range(t)] for _ in range(h_count)]
    k_lines: list[list[list[str]]] = [[[] for _ in range(s)] for _ in range(h_count)]  # [h][j]
    k_nums: list[list[list[str]]] = [[[] for _ in range(s)] for _ in range(h_count)]
    hide = np.zeros((t, s), dtype=bool) if hidden is None else np.asarray(hidden, dtype=bool)  # (T, S)
    for i, j in zip(*np.nonzero(hide), strict=True):  # a hidden pair: its printed "−∞", never a line
        for h in range(h_count):
            q_nums[h][i].append(f'<text y="{y[j]}" class="mk">−∞</text>')
            k_nums[h][j].append(f'<text y="{y[i]}" class="mk">−∞</text>')
    hs, is_, js = np.nonzero((a >= threshold) & ~hide[None])
    ws = a[hs, is_, js]
    for h, i, j, w in zip(hs.tolist(), is_.tolist(), js.tolist(), ws.tolist(), strict=True):
        stroke = f'stroke-width="{line_width(w):g}" stroke-opacity="{line_opacity(w):g}"/>'
        q_lines[h][i].append(f'<line x2="{span}" y2="{(j - i) * ROW}" data-w="{w:.4f}" {stroke}')
        k_lines[h][j].append(f'<line x2="-{k_span}" y2="{(i - j) * ROW}" {stroke}')
        text = local_number(f"{w:.2f}")
        q_nums[h][i].append(f'<text y="{y[j]}">{text}</text>')
        k_nums[h][j].append(f'<text y="{y[i]}">{text}</text>')

    # 3) Accessible names: each token's largest weight per head.
    best_key = a.argmax(axis=2).tolist()  # (h, T)
    best_query = a.argmax(axis=1).tolist()  # (h, S)
    top_key = a.max(axis=2).tolist()
    top_query = a.max(axis=1).tolist()

    def hidden_from(i: int) -> str:
        keys_hidden = np.flatnonzero(hide[i]).tolist()
        return _("; masked keys {keys}").format(keys=", ".join(str(j + 1) for j in keys_hidden)) if keys_hidden else ""

    empty = _("(empty)")
    query_name = _("query {n} {token}: largest weight per head: {heads}")
    key_name = _("key {n} {token}: largest weight per head: {heads}")

    def q_name(i: int) -> str:
        per_head = "; ".join(f"{heads[h].label} → {keys[best_key[h][i]] or empty} {weight(top_key[h][i], 2)}"
                             for h in range(h_count))
        return str(escape(query_name.format(n=i + 1, token=queries[i], heads=per_head) + hidden_from(i)))

    def k_name(j: int) -> str:
        per_head = "; ".join(f"{heads[h].label} ← {queries[best_query[h][j]] or empty} {weight(top_query[h][j], 2)}"
                             for h in range(h_count))
        return str(escape(key_name.format(n=j + 1, token=keys[j], heads=per_head)))

    def groups(lines: list[list[list[str]]], nums: list[list[list[str]]], n: int, line_x: float,
               num_x: float, y_n: int) -> list[str]:
        """Token n's lines and printed weights, one group per head (a head with nothing drawn has none)."""
        out = []
        for h in range(h_count):
            if lines[h][n]:
                out.append(f'<g class="e h{h}" transform="translate({_num(line_x)} {_num(y_n + offsets[h])})">')
                out.extend(lines[h][n])
                out.append("</g>")
        for h in range(h_count):
            if nums[h][n]:
                out.append(f'<g class="wt h{h}" transform="translate({_num(num_x + h * NUM_W)} 4)">')
                out.extend(nums[h][n])
                out.append("</g>")
        return out

    # 4) The SVG, one list of strings joined once.
    fid = escape(fig_id)
    drawn = len(ws)
    note = (_("Only weights of at least {threshold} are drawn ({drawn} of {total} lines): with more than "
              "{most} lines, the faint ones would hide the others.").format(
                threshold=weight(THRESHOLD, 2), drawn=count(drawn), total=count(a.size), most=count(ALL_LINES_UP_TO))
            if threshold else "")
    colours = ", ".join(f"{k.label}: {k.colour}" for k in heads)
    desc = " ".join(part for part in (
        _("Each line joins a query token (left) to a source-sentence key token (right); its width is 6 × the "
          "attention weight and its opacity 0.25 + 0.75 × the weight.") if cross else
        _("Each line joins a query token (left) to a key token (right); its width is 6 × the attention weight "
          "and its opacity 0.25 + 0.75 × the weight."),
        _("A key the mask hides from a query has no line; its score there is −∞ and its weight 0.")
        if hide.any() else "",
        _("Colours: {colours}. Hover, tap or focus a token to see only its lines, with their weights printed beside "
          "the other column.").format(colours=colours),
        note,
        _("The same weights are in the table Attention weights A of this stage, one head at a time."),
        _("The lines of {token} are drawn first.").format(token=queries[focus]) if focus is not None else "",
    ) if part)
    title = ngettext("Attention weights as lines, {n} head", "Attention weights as lines, {n} heads",
                     h_count).format(n=h_count)
    parts = [
        f'<svg xmlns="{SVG_NS}" viewBox="0 0 {width} {height}" width="{round(width * DRAWN_SCALE)}" '
        f'height="{round(height * DRAWN_SCALE)}" '
        f'class="lines-svg{" has-focus" if focus is not None else ""}" role="group" '
        f'aria-labelledby="{fid}-t" aria-describedby="{fid}-d">'
        f'<title id="{fid}-t">{escape(title)}</title>'
        f'<desc id="{fid}-d">{escape(desc)}</desc>'
        f'<text class="colh" x="{_num(q_w - 2)}" y="{TOP - 12}" text-anchor="end">{escape(queries_heading)}</text>'
        f'<text class="colh" x="{_num(x1 + GAP + 2)}" y="{TOP - 12}">{escape(keys_heading)}</text>',
        '<g class="qs">',
    ]
    for i in range(t):
        parts.append(
            f'<g class="tok q{" focus" if i == focus else ""}" tabindex="0" role="img" aria-label="{q_name(i)}">'
            f'<rect class="hit" x="0" y="{y[i] - ROW // 2 + 1}" width="{_num(q_w)}" height="{ROW - 2}"/>'
            f'<text class="lab" x="{_num(q_w - 4)}" y="{y[i] + 4.5}" text-anchor="end">'
            f'{escape(_short(queries[i]))}</text>'
        )
        parts.extend(groups(q_lines, q_nums, i, x0, k_num_x, y[i]))
        parts.append("</g>")
    parts.append('</g><g class="ks">')
    for j in range(s):
        parts.append(
            f'<g class="tok k" tabindex="0" role="img" aria-label="{k_name(j)}">'
            f'<rect class="hit" x="{_num(x1 + GAP)}" y="{y[j] - ROW // 2 + 1}" width="{_num(k_w)}" height="{ROW - 2}"/>'
            f'<text class="lab" x="{_num(x1 + GAP + 4)}" y="{y[j] + 4.5}">{escape(_short(keys[j]))}</text>'
        )
        parts.extend(groups(k_lines, k_nums, j, x1, x0 + 2, y[j]))
        parts.append("</g>")
    parts.append("</g></svg>")
    return LinesFigure(Markup("".join(parts)), heads, note, drawn, a.size,
                       (round(width * DRAWN_SCALE), round(height * DRAWN_SCALE)))
