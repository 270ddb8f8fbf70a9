"""The stage table: one function per stage template, forward and backward; a stage that does not
apply to a run shows no panels."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from app.lesson.stages import visible_stages
from app.state.learning import learning_loss_and_gradients, preset_learning
from app.state.scenario import from_preset
from app.view.panels import PanelBuilder
from app.view.stage_panels import STAGE_PANELS, stage_view

STAGE_TEMPLATES = Path(__file__).resolve().parents[2] / "templates" / "stages"


def test_one_function_per_stage_template() -> None:
    assert set(STAGE_PANELS) == {p.stem for p in STAGE_TEMPLATES.glob("*.html")}
    assert {s.key for s in visible_stages(2)} | {s.key for s in visible_stages(0, True)} == set(STAGE_PANELS)


def test_without_a_goal_or_blocks_their_stages_show_nothing() -> None:
    sc, view = from_preset("three-token")
    builder = PanelBuilder(sc, sc.run(), view)
    by_key = {s.key: s for s in visible_stages(2) + visible_stages(0, True)}
    for key in ("addnorm1", "ffn", "addnorm2", "grad_a", "grad_w"):
        assert stage_view(builder, by_key[key]).panels == {}


def test_with_a_goal_each_backward_stage_shows_the_gradient_it_computes() -> None:
    sc, view = from_preset("learn-bank")
    learning = preset_learning(sc)
    run = sc.run()
    grads = learning_loss_and_gradients(run, learning)[1]
    builder = PanelBuilder(sc, run, replace(view, learning=learning), grads=grads)
    computed = {"grad_a": "g_softmax", "grad_scores": "g_scores", "grad_q": "g_q", "grad_k": "g_k",
                "grad_v": "g_v", "grad_w": "g_w_o"}
    for stage in visible_stages(0, True):
        if stage.backward:
            panels = stage_view(builder, stage).panels
            assert computed[stage.key] in panels and panels[computed[stage.key]].shape.count("×") == 1
