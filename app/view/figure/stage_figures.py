"""Which figure of the page a request names, drawn as a file: ``figure`` is a heatmap's matrix (its panel's ref
without the head, as the export names it: ``softmax``, ``scaled``, ``masked``, ``kT``, ``w_q``, ``final``,
``ln1``, ``g_softmax`` …), or one of the drawings:

- ``lines``            the stage's attention lines (the softmax and output stages)
- ``map``              the pipeline map, the stage in view filled
- ``loss``             the Learn panel's loss curve (with a goal)
- ``learn_lines``      the Learn panel's lines; ``companion_lines`` its other sentence's (a goal over two)
- ``why_scale_loss``, ``why_scale_grad``  why ÷√d_k's two charts (its preset's Learn panel)

A heatmap is looked for in the stage ``stage`` names (``view.stage``) first, then in the page's other stages,
with the head and block in view. A name the page does not show, or a matrix a quiz hides, is a FormError
naming ``figure``; a stage the page has not, ``stage``; a head past the scenario's, ``head``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from app.i18n import gettext as _
from app.lesson.stages import Stage
from app.state.form import FormError
from app.state.learning import learning_loss_and_gradients
from app.state.quiz import hidden_cells
from app.state.quiz import owner as cell_owner
from app.state.scenario import Scenario, View
from app.view.context import learn_context
from app.view.diff import goal_gradients
from app.view.figure.drawings import chart_svg, lines_svg, map_svg
from app.view.figure.heatmap import MatrixFigure, heatmap_svg
from app.view.map_drawing import draw_map
from app.view.panels import Panel, PanelBuilder, page_stages
from app.view.pipeline_map import pipeline_map
from app.view.stage_panels import stage_view

DRAWINGS = ("lines", "map", "loss", "learn_lines", "companion_lines", "why_scale_loss", "why_scale_grad")
MAX_FIGURE = 40
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


@dataclass(frozen=True)
class SavedFigure:
    svg: str  # the standalone document
    stem: str  # its file name without the extension: "attention-softmax-head1"


class _Collector(PanelBuilder):
    """A PanelBuilder that keeps each heatmap's numbers and words by matrix name, instead of its table."""

    def __init__(self, sc: Scenario, view: View) -> None:
        first, stack = sc.compute()
        run = first if stack is None else stack.blocks[view.block].attention
        super().__init__(sc, run, view, stack, goal_gradients(run, stack, view))
        self.found: dict[str, tuple[MatrixFigure, bool]] = {}

    def _panel(self, m: np.ndarray, title: str, ref: str, rows: list[str], cols: list[str],
               kind: str = "signed", inspect: str = "", corner: str = "", label: str = "", suffix: str = "",
               decimals: int | None = None) -> Panel:
        name = ref.partition(".")[0]
        hidden = name in self.hiding and bool(hidden_cells(
            name, m, cell_owner(name, self.view.head, self.view.block), self.view.revealed).any())
        fig = MatrixFigure(m, list(rows), list(cols), kind, self.view.decimals if decimals is None else decimals,
                           _(title) + suffix, _(corner) if corner else "")
        self.found.setdefault(name, (fig, hidden))
        return Panel(title, f"{m.shape[0]}×{m.shape[1]}", fig.title, None, kind, ref)  # type: ignore[arg-type]

    def lines(self, stage: Stage) -> None:
        return None  # matrices only


def _stage(sc: Scenario, view: View) -> tuple[Stage, tuple[Stage, ...]]:
    stages = page_stages(sc, view)
    found = next((s for s in stages if s.key == view.stage), None)
    if found is None:
        raise FormError("stage", f"stage: this page has no stage “{view.stage}”; its stages are "
                                 f"{', '.join(s.key for s in stages)}")
    return found, stages


def page_figure(sc: Scenario, view: View, figure: str, asked_head: int | None = None) -> SavedFigure:
    """The figure ``figure`` of the page in state (sc, view), as a file."""
    stage, stages = _stage(sc, view)
    if asked_head is not None and not 0 <= asked_head < sc.num_heads:
        raise FormError("head", f"head: this scenario has heads 0 to {sc.num_heads - 1} (counted from 0, as the "
                                "page's form counts them)")
    if not figure or len(figure) > MAX_FIGURE or not _NAME.fullmatch(figure):
        raise FormError("figure", "figure: name a figure of the stage, e.g. softmax, lines or map")
    head = f"head{view.head + 1}"
    if figure in DRAWINGS:
        return SavedFigure(_drawing(sc, view, stage, figure), _stem(stage.key, figure, head))
    finder = _Collector(sc, view)
    for s in (stage, *(s for s in stages if s is not stage)):
        stage_view(finder, s)
        if figure in finder.found:
            fig, hidden = finder.found[figure]
            if hidden:
                raise FormError("figure", "figure: the quiz hides this matrix's values until they are revealed")
            return SavedFigure(heatmap_svg(fig), _stem(s.key, figure, head))
    shown = ", ".join(dict.fromkeys([*_names(sc, view, stage), "lines", "map"]))
    raise FormError("figure", f"figure: no figure “{figure}” on this page; stage {stage.key} shows {shown}")


def _names(sc: Scenario, view: View, stage: Stage) -> list[str]:
    finder = _Collector(sc, view)
    stage_view(finder, stage)
    return list(finder.found)


def _stem(stage: str, figure: str, head: str) -> str:
    """"attention-softmax-head1", "attention-scaled-input-head2", "attention-map-softmax"."""
    if figure in ("map", "loss", "why_scale_loss", "why_scale_grad", "learn_lines", "companion_lines"):
        return f"attention-{figure.replace('_', '-')}" + (f"-{stage}" if figure == "map" else "")
    name = figure.replace("_", "-") if figure == stage else f"{stage}-{figure.replace('_', '-')}"
    return f"attention-{name}-{head}"


def _drawing(sc: Scenario, view: View, stage: Stage, figure: str) -> str:
    first, stack = sc.compute()
    run = first if stack is None else stack.blocks[view.block].attention
    if figure == "map":
        drawn = draw_map(pipeline_map(sc, run, stack, view), current=stage.key, hrefs={}, post="")
        return map_svg(drawn.wide, _("The pipeline, at stage {n}: {stage}").format(n=stage.number,
                                                                                   stage=_(stage.short)))
    if figure == "lines":
        builder = PanelBuilder(sc, run, view, stack, goal_gradients(run, stack, view))
        sv = stage_view(builder, stage)
        if sv.lines is None:
            raise FormError("figure", "figure: this stage draws no lines (the softmax and output stages do, "
                                      "once the quiz reveals the weights)")
        return lines_svg(sv.lines, _("Who attends to whom"))
    if view.learning is None or stack is not None:
        raise FormError("figure", f"figure: {figure} is the Learn panel's: choose a goal first")
    loss, grads = learning_loss_and_gradients(run, view.learning)
    from_run = learn_context(sc, run, view, loss, grads)
    if figure == "loss":
        return chart_svg(from_run["curve"], _("Loss during training"))
    if figure == "learn_lines" and from_run.get("lines") is not None:
        return lines_svg(from_run["lines"], _("Who attends to whom, now"))
    if figure == "companion_lines" and from_run.get("companion"):
        return lines_svg(from_run["companion"]["lines"], _("The goal's other sentence"))
    why = from_run.get("why_scale")
    if figure.startswith("why_scale") and why is not None:
        chart = why["charts"][0 if figure == "why_scale_loss" else 1]
        return chart_svg(chart, _("Why ÷√dₖ: the loss") if figure == "why_scale_loss" else _("Why ÷√dₖ: ‖∂L/∂Scores‖"))
    raise FormError("figure", f"figure: the Learn panel shows no {figure} for this goal")

