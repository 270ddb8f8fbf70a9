"""The page's SVG drawings as files: the attention lines, the pipeline map, the training charts, the real models'
head maps (one enlarged, and all at once) and the language model's candidates. Each drawer's own SVG is kept
and its classes written out by the rules below, which restate the page's stylesheet for these classes
(static/lines.css, map.css, learn.css, model.css, decoder.css: a test compares the colours); a caption, and what
the page says beside the drawing in HTML (the heads' colours, a note), are drawn around it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup

from app.i18n import gettext as _
from app.view.attention_lines import LinesFigure
from app.view.figure.document import (
    ACCENT,
    INK,
    MARGIN,
    MUTED,
    NOTE_PX,
    REMOVE,
    WHITE,
    Rule,
    caption,
    caption_width,
    document,
    inline,
    nested,
    num,
    rule,
    text,
)
from app.view.map_drawing import text_width

# static/lines.css: per head, its lines' colour (--c) and its printed weights' darker shade (--t).
HEAD_INKS = (("#cc79a7", "#a1457a"), ("#009e73", "#00704f"), ("#e69f00", "#8a5c00"), ("#0072b2", "#0072b2"),
             ("#d55e00", "#a64a00"), ("#56b4e9", "#1d6a99"), ("#000000", "#000000"), ("#f0e442", "#6b6200"))

LINES_RULES: tuple[Rule, ...] = (
    rule("hit", display=REMOVE),
    rule("ks e", display=REMOVE),  # a key's copy of its lines: shown on the page only while the key is in use
    rule("wt", display=REMOVE, font_size="10.5"),
    rule("has-focus tok.focus wt", display="inline"),  # a preset's focus token: its weights printed
    rule("lab", font_size="14", fill=INK),
    rule("has-focus tok.focus lab", font_weight="bold"),
    rule("colh", font_size="11", fill=MUTED, letter_spacing="0.44"),
    rule("e", fill="none"),
    rule("has-focus qs tok.!focus e", opacity="0.12"),
    *(rule(f"e.h{h}", stroke=c) for h, (c, _) in enumerate(HEAD_INKS)),
    *(rule(f"wt.h{h}", fill=t) for h, (_, t) in enumerate(HEAD_INKS)),
    rule("wt mk", fill="#767676"),
)

MAP_BORDER, MAP_SPAN = "#8a8aa0", "#a9a9bb"
MAP_RULES: tuple[Rule, ...] = (
    rule("ring", display=REMOVE),
    rule("box", fill=WHITE, stroke=MAP_BORDER, stroke_width="1"),
    rule("label", font_size="12", font_weight="600", fill=INK),
    rule("label sub", font_size="9"),
    rule("shape", font_size="10", font_weight="400", fill=MUTED),
    rule("arrow", fill="none", stroke=MAP_BORDER, stroke_width="1.2"),
    rule("arrow.bypass", stroke_dasharray="4 3"),
    rule("arrowhead", fill=MAP_BORDER),
    rule("span", fill="none", stroke=MAP_SPAN),
    rule("span-label", font_size="10", fill=MUTED),
    rule("plain box", fill="none", stroke="none"),
    rule("plain label", font_weight="500", fill=MUTED),
    rule("stage-node box", stroke=ACCENT),
    rule("off box", stroke=MAP_BORDER, stroke_dasharray="3 2"),
    rule("off label", font_weight="500", fill=MUTED),
    rule("current box", fill=ACCENT, stroke=ACCENT, stroke_dasharray="none"),
    rule("current label", fill=WHITE),
    rule("current shape", fill=WHITE),
)

SCALED, UNSCALED, UNSCALED_TEXT = "#542788", "#b35806", "#7f3b08"
CHART_RULES: tuple[Rule, ...] = (  # static/learn.css
    rule("chart", fill=INK),  # the chart's own texts
    rule("learn-chart tick", font_size="11", fill=MUTED),
    rule("learn-chart axis-label", font_size="11", fill=MUTED),
    rule("learn-chart grid", stroke="#e3e3ea", stroke_width="1"),
    rule("learn-chart grid.zero", stroke=MAP_BORDER),
    rule("learn-chart axis", stroke=MAP_BORDER, stroke_width="1"),
    rule("learn-chart series", fill="none", stroke_width="2", stroke_linejoin="round", stroke_linecap="round"),
    rule("learn-chart series.loss", stroke=ACCENT),
    rule("learn-chart series.scaled", stroke=SCALED),
    rule("learn-chart series.unscaled", stroke=UNSCALED, stroke_dasharray="6 4"),
    rule("learn-chart end-dot", stroke=WHITE, stroke_width="1.5"),
    rule("learn-chart end-dot.loss", fill=ACCENT),
    rule("learn-chart end-dot.scaled", fill=SCALED),
    rule("learn-chart end-dot.unscaled", fill=UNSCALED),
    rule("learn-chart series-label", font_size="11", font_weight="600"),
    rule("learn-chart end-label", font_size="11"),
    rule("learn-chart end-label.loss", font_weight="600", fill=ACCENT),
    rule("learn-chart series-label.scaled", fill=SCALED),
    rule("learn-chart end-label.scaled", fill=SCALED),
    rule("learn-chart series-label.unscaled", fill=UNSCALED_TEXT),
    rule("learn-chart end-label.unscaled", fill=UNSCALED_TEXT),
    rule("learn-chart var", font_style="italic"),
    rule("learn-chart sub", baseline_shift="sub", font_size="75%"),
    # Why ÷√d_k's charts are drawn larger on the page: 13-unit text.
    rule("why-scale-chart tick", font_size="13"),
    rule("why-scale-chart axis-label", font_size="13"),
    rule("why-scale-chart series-label", font_size="13"),
    rule("why-scale-chart end-label", font_size="13"),
    rule("why-scale-chart sub", font_size="92%"),
)

PREDICTION_RULES: tuple[Rule, ...] = (  # static/class.css, a live class's histogram of predictions
    rule("bar", fill="#73649e"),
    rule("count", font_size="11", fill=INK),
    rule("tick-label", font_size="11", fill=INK),
    rule("axis-label", font_size="11", fill=INK),
    rule("axis", stroke="#5a5a66", stroke_width="1"),
    rule("tick", stroke="#5a5a66", stroke_width="1"),
    rule("truth", stroke="#b35806", stroke_width="2.5", stroke_dasharray="5 3"),
    rule("truth-label", font_size="12", font_weight="700", fill="#7f3b08"),
)

HEAD_RULES: tuple[Rule, ...] = (  # static/model.css, the enlarged head
    rule("row-lab", font_size="11", fill=INK),
    rule("col-lab", font_size="11", fill=INK),
    rule("num", font_size="7.5", fill=INK),
    rule("num.dark", fill=WHITE),
)


Band = Callable[[float], tuple[list[str], float]]  # lines drawn from a baseline: their parts and width


def framed(drawing: Markup | str, rules: Sequence[Rule], title: str, *, detail: str = "",
           above: Band | None = None, above_h: float = 0.0, below: Band | None = None, below_h: float = 0.0,
           desc: str = "") -> str:
    """A drawer's SVG, its classes written out, under a caption, as a standalone document; ``above`` is drawn
    in a band ``above_h`` high under the caption, ``below`` under the drawing."""
    head, y = caption(title, detail)
    root = inline(str(drawing), rules)
    body, w, h = nested(root, MARGIN, y + above_h)
    top_parts, top_w = above(y) if above else ([], 0.0)
    low_parts, low_w = below(y + above_h + h + 4) if below else ([], 0.0)
    width = max(MARGIN + w + MARGIN, MARGIN + top_w + MARGIN, MARGIN + low_w + MARGIN, caption_width(title, detail))
    height = y + above_h + h + (below_h + 4 if below else 0) + MARGIN
    return document(width, height, [head, *top_parts, body, *low_parts], title, desc)


def lines_svg(fig: LinesFigure, title: str) -> str:
    """The attention lines: the page's drawing at rest (a preset's focus token in front), the heads' colours
    under the caption, and the figure's note under the drawing."""

    def head_key(y: float) -> tuple[list[str], float]:
        parts, x = [], MARGIN
        for k in fig.heads:
            colour = HEAD_INKS[k.index % len(HEAD_INKS)][0]
            parts.append(f'<rect x="{num(x)}" y="{num(y + 4)}" width="22" height="5" rx="2" fill="{colour}"/>')
            parts.append(text(x + 28, y + 11, k.label, size=NOTE_PX, fill=INK))
            x += 28 + text_width(k.label, NOTE_PX) + 16
        return parts, x - MARGIN

    def note(y: float) -> tuple[list[str], float]:
        return [text(MARGIN, y + 10, fig.note, size=NOTE_PX - 1, fill=MUTED)], text_width(fig.note, NOTE_PX - 1)

    desc = _("Each line joins a query token (left) to a key token (right), one colour per head; its width is "
             "6 × the attention weight and its opacity 0.25 + 0.75 × the weight.")
    several = len(fig.heads) > 1
    return framed(fig.svg, LINES_RULES, title, above=head_key if several else None, above_h=22 if several else 0,
                  below=note if fig.note else None, below_h=16, desc=desc)


def map_svg(drawing: Markup, title: str) -> str:
    """The pipeline map, the stage in view filled."""
    return framed(drawing, MAP_RULES, title, desc=_("The computation as configured, one box per matrix, "
                                                    "the stage in view filled."))


def chart_svg(chart: Markup, title: str) -> str:
    """A training chart (the loss curve, why ÷√d_k's two), a little below its caption: its axis' label is on top."""
    return framed(chart, CHART_RULES, title, above_h=8)


def predictions_figure(chart: Markup, title: str) -> str:
    """A live class's predictions of one cell: the histogram the teacher sees, the cell's value marked."""
    return framed(chart, PREDICTION_RULES, title, above_h=8,
                  desc=_("How many students predicted each range of values; the dashed line is the cell's value."))


def head_svg_figure(drawing: Markup, title: str) -> str:
    """One head enlarged: its tokens on both axes, a number in every cell (up to 24 tokens)."""
    return framed(drawing, HEAD_RULES, title, detail=_("attention weights: queries down, keys across"),
                  desc=_("Queries down, keys across; a darker cell, a larger weight."))


@dataclass(frozen=True)
class HeadMap:
    """One head's small map in the all-heads grid."""

    src: str  # a PNG data URI, one pixel per query–key pair
    selected: bool
    off: bool


THUMB, THUMB_GAP, GROUP_GAP = 40.0, 4.0, 12.0


def head_grid_svg(rows: Sequence[Sequence[Sequence[HeadMap]]], group_names: Sequence[str], title: str,
                  detail: str) -> str:
    """Every head at once: a row per layer (L1 …), its heads in groups (one group, or those sharing keys and
    values), each head's map an image (pixels kept sharp), the selected head outlined, a head switched off
    faded; the column names over the groups."""
    line, y = caption(title, detail)
    body = [line]
    left = MARGIN + 30
    top = y + 18
    heads_per_group = [len(g) for g in rows[0]] if rows else []
    group_w = [n * THUMB + (n - 1) * THUMB_GAP for n in heads_per_group]
    gap = THUMB_GAP if all(n == 1 for n in heads_per_group) else GROUP_GAP  # a head per column: no groups
    xs = [left + sum(group_w[:g]) + g * gap for g in range(len(group_w))]
    for g, name in enumerate(group_names):
        body.append(text(xs[g] + group_w[g] / 2, top - 6, name, size=11, fill=MUTED, anchor="middle"))
    for la, groups in enumerate(rows):
        row_y = top + la * (THUMB + THUMB_GAP)
        body.append(text(left - 6, row_y + THUMB / 2 + 4, _("L{layer}").format(layer=la + 1), size=11, fill=MUTED,
                         anchor="end"))
        for g, group in enumerate(groups):
            for k, head in enumerate(group):
                x = xs[g] + k * (THUMB + THUMB_GAP)
                faded = ' opacity="0.45"' if head.off else ""
                body.append(f'<rect x="{num(x - 0.5)}" y="{num(row_y - 0.5)}" width="{num(THUMB + 1)}" '
                            f'height="{num(THUMB + 1)}" fill="{WHITE}" stroke="#d5d5de"/>'
                            f'<image href="{head.src}" x="{num(x)}" y="{num(row_y)}" width="{num(THUMB)}" '
                            f'height="{num(THUMB)}" preserveAspectRatio="none" image-rendering="optimizeSpeed"'
                            f'{faded}/>')
                if head.selected:
                    body.append(f'<rect x="{num(x - 2.5)}" y="{num(row_y - 2.5)}" width="{num(THUMB + 5)}" '
                                f'height="{num(THUMB + 5)}" fill="none" stroke="{ACCENT}" stroke-width="3"/>')
    width = max((xs[-1] + group_w[-1] if xs else left) + MARGIN, caption_width(title, detail))
    height = top + len(rows) * (THUMB + THUMB_GAP) + MARGIN
    desc = _("Each small map is one head: a row per query token, a column per key token, darker is more "
             "attention. The selected head is outlined; a head switched off is faded.")
    return document(width, height, body, title, desc)


@dataclass(frozen=True)
class CandidateBar:
    token: str
    percent: str  # "41.2%", "41,2 %": as the reader's language writes it
    width: float  # out of 100
    kept: bool  # a sampler may draw it (inside top-k and top-p)
    was: str = ""  # its percent with every head on, when some are off


BAR_ROW, BAR_LEN, CUT = 22.0, 260.0, "#b8bcc4"


PROMPT_CHARS, PROMPT_LINES = 64, 4  # the text a figure's candidates follow: wrapped, and cut with "…" past 4 lines


def prompt_lines(prompt: str) -> list[str]:
    """A caption's sentence about the text, in lines of at most PROMPT_CHARS characters (a new line shown as ↵)."""
    lines = textwrap.wrap(prompt.replace("\n", " ↵ "), PROMPT_CHARS) or [""]
    if len(lines) > PROMPT_LINES:
        lines = lines[:PROMPT_LINES]
        lines[-1] = lines[-1][: PROMPT_CHARS - 1] + "…"
    return lines


def candidates_svg(bars: Sequence[CandidateBar], title: str, detail: str, prompt: str = "") -> str:
    """The next token's candidates: a bar per token, as long as its probability, the percent after it; under the
    caption, ``prompt``, the sentence naming the text they follow."""
    line, y = caption(title, detail)
    body = [line]
    said = prompt_lines(prompt) if prompt else []
    for i, words in enumerate(said):
        body.append(text(MARGIN, y + 10 + i * 16, words, size=NOTE_PX, fill=INK))
    y += 16 * len(said) + (4 if said else 0)
    token_w = max((text_width(b.token, 13) for b in bars), default=40) + 12
    left = MARGIN + token_w
    for i, b in enumerate(bars):
        row_y = y + 4 + i * BAR_ROW
        ink = MUTED if not b.kept else INK
        cut = ' text-decoration="line-through"' if not b.kept else ""
        body.append(text(left - 8, row_y + 14, b.token, size=13, fill=ink, anchor="end", extra=cut))
        body.append(f'<rect x="{num(left)}" y="{num(row_y + 3)}" width="{num(BAR_LEN)}" height="15" rx="2" '
                    f'fill="#eef0f3"/><rect x="{num(left)}" y="{num(row_y + 3)}" '
                    f'width="{num(BAR_LEN * b.width / 100)}" height="15" rx="2" fill="{ACCENT if b.kept else CUT}"/>')
        body.append(text(left + BAR_LEN + 8, row_y + 14, b.percent, size=13, fill=ink, extra=cut))
        if b.was:
            body.append(text(left + BAR_LEN + 70, row_y + 14, _("was {percent}").format(percent=b.was), size=12,
                             fill="#8a5300"))
    width = max(left + BAR_LEN + (140 if any(b.was for b in bars) else 70) + MARGIN, caption_width(title, detail),
                *(2 * MARGIN + text_width(words, NOTE_PX) for words in said))
    height = y + 4 + len(bars) * BAR_ROW + MARGIN
    return document(width, height, body, title, _("Each bar is a token's probability to come next."))
