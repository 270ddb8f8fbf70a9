"""A stage against the pinned state: every matrix of the stage minus the same matrix when pinned.

The matrices are found by the page's own panels (app.view.stage_panels), kept instead of drawn, so
a difference is taken between exactly what the two pages show.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from markupsafe import Markup

from app.i18n import gettext as _
from app.i18n import ngettext
from app.lesson.stages import Stage
from app.maths.backward import Gradients
from app.maths.records import AttentionRun, TransformerRun
from app.state.learning import learning_loss_and_gradients
from app.state.scenario import Scenario, View
from app.view.attention_lines import LinesFigure
from app.view.labels import TITLE_TEX, head_label
from app.view.panels import DiffView, Panel, PanelBuilder, StageView
from app.view.stage_panels import stage_view


class MatrixCollector(PanelBuilder):
    """A PanelBuilder that keeps each panel's matrix, labels and title by ref instead of rendering it."""

    def __init__(self, sc: Scenario, run: AttentionRun, view: View, stack: TransformerRun | None = None,
                 grads: Gradients | None = None) -> None:
        super().__init__(sc, run, view, stack, grads)
        self.found: dict[str, tuple[np.ndarray, list[str], list[str], str]] = {}
        self.labels: dict[str, tuple[str, str]] = {}  # ref → (prose label, suffix)

    def _panel(self, m: np.ndarray, title: str, ref: str, rows: list[str], cols: list[str],
               kind: str = "signed", inspect: str = "", corner: str = "", label: str = "", suffix: str = "",
               decimals: int | None = None) -> Panel:
        self.labels.setdefault(ref, (label or TITLE_TEX.get(title, ""), suffix))
        title += suffix
        self.found.setdefault(ref, (m, list(rows), list(cols), title))
        return Panel(title, f"{m.shape[0]}×{m.shape[1]}", Markup(""), None, kind, ref)

    def lines(self, stage: Stage) -> LinesFigure | None:
        return None  # matrices only


def goal_gradients(run: AttentionRun, stack: TransformerRun | None, view: View) -> Gradients | None:
    """The gradients of the Learn panel's goal for this run, None without a goal (or with blocks)."""
    if view.learning is None or stack is not None:
        return None
    try:
        return learning_loss_and_gradients(run, view.learning)[1]
    except ValueError:  # the goal does not fit this run (a pinned state of other sizes)
        return None


def stage_diff(sc: Scenario, view: View, run: AttentionRun, stack: TransformerRun | None, pinned: Scenario,
               pinned_run: tuple[AttentionRun, TransformerRun | None], sv: StageView) -> DiffView:
    """Every matrix of the stage minus the same matrix in the pinned state (same head and block)."""
    now = MatrixCollector(sc, run, replace(view, quiz=False), stack, goal_gradients(run, stack, view))
    stage_view(now, sv.stage)
    p_first, p_stack = pinned_run
    notes: list[str] = []
    if view.head >= pinned.num_heads:
        return DiffView([], [], [ngettext("The pinned state has {n} head: nothing to compare with {head}.",
                                          "The pinned state has {n} heads: nothing to compare with {head}.",
                                          pinned.num_heads).format(n=pinned.num_heads, head=head_label(sc, view.head))])
    if p_stack is not None and view.block >= len(p_stack.blocks):
        return DiffView([], [], [ngettext("The pinned state has {n} block.", "The pinned state has {n} blocks.",
                                          len(p_stack.blocks)).format(n=len(p_stack.blocks))])
    p_run = p_first if p_stack is None else p_stack.blocks[view.block].attention
    then = MatrixCollector(pinned, p_run, replace(view, quiz=False), p_stack, goal_gradients(p_run, p_stack, view))
    stage_view(then, sv.stage)
    panels, unchanged = [], []
    draw = PanelBuilder(sc, run, replace(view, inspect="", quiz=False), stack, now.grads)
    for ref, (m, rows, cols, english) in now.found.items():
        label, suffix = now.labels[ref]
        title = _(english.removesuffix(suffix)) + suffix  # kept English for the exports, shown translated
        if ref.partition(".")[0] in sv.quiz:
            notes.append(_("{title}: hidden by the quiz.").format(title=title))
            continue
        if ref not in then.found:
            notes.append(_("{title}: not in the pinned state.").format(title=title))
            continue
        before = then.found[ref][0]
        if before.shape != m.shape:
            notes.append(_("{title}: {before} when pinned, {now} now.").format(
                title=title, before=f"{before.shape[0]}×{before.shape[1]}", now=f"{m.shape[0]}×{m.shape[1]}"))
            continue
        seen = np.isfinite(m) & np.isfinite(before)  # the masked scores: −∞ where a key is hidden
        if not seen.all() and not np.array_equal(np.isfinite(m), np.isfinite(before)):
            notes.append(_("{title}: the mask hides other keys than when pinned; the changes below are of the keys "
                           "both hide from no query.").format(title=title))
        delta = np.where(seen, m - np.where(seen, before, 0.0), 0.0)
        if not np.any(delta):
            unchanged.append(title)
            continue
        panel = draw._panel(delta, f"Δ {title.removesuffix(suffix)}", f"delta-{ref}", rows, cols,
                            label=f"Δ {_(label)}" if label else "", suffix=suffix)
        panels.append(replace(panel, ref=""))  # a difference is not exported
    return DiffView(panels, unchanged, notes)

