"""The Learn panel: its state in the form, training through the page, reset, and the goal presets.

The page's training is checked against app.lesson.goals' (which tests/lesson/test_goals.py checks against finite
differences and the seeds' targets): the same goal from the same start must give the same losses.
"""

from __future__ import annotations

import re
from dataclasses import replace
from html import unescape

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.lesson.goals import GOALS, SEED_003_ALIGNMENT, train_goal, why_scale
from app.lesson.presets import PRESETS
from app.state.form import FormError
from app.state.learning import MAX_CURVE, Learning, default_target, fit, preset_learning, train_page
from app.state.page import preset_page, reset
from app.state.permalink import state_query
from app.state.reading import read_learning, read_page
from app.state.scenario import add_token, from_preset
from tests.conftest import form_fields

HTMX = {"HX-Request": "true"}
GOAL_PRESETS = {"learn-translate": "translate", "learn-bank": "bank", "learn-previous-token": "previous-token"}


def page_form(client: TestClient, preset: str) -> dict[str, str]:
    r = client.get("/", params={"preset": preset})
    assert r.status_code == 200
    return form_fields(r.text)


def hidden(html: str, name: str) -> str:
    m = re.search(rf'<input type="hidden" name="{name}" value="([^"]*)"', html)
    assert m, f"no hidden {name}"
    return unescape(m.group(1))


# --- the state in the form --------------------------------------------------------------------------

def test_no_goal_no_learning() -> None:
    sc, _ = from_preset("default")
    assert read_learning({}, sc) is None
    assert read_learning({"learn_goal": ""}, sc) is None


def test_default_targets() -> None:
    sc, _ = from_preset("default")
    target = default_target(sc, "attention")
    assert np.array_equal(target, np.eye(5))  # each query on its own position
    np.testing.assert_array_equal(default_target(sc, "output"), sc.x)
    causal, _ = from_preset("learn-previous-token")
    target = default_target(causal, "attention")
    assert np.allclose(target.sum(axis=1), 1) and not np.any(target[np.triu_indices(6, 1)])


def test_default_target_respects_a_mask_and_cross_attention() -> None:
    sc, _ = from_preset("translate")
    assert default_target(sc, "attention").shape == (6, 6)
    sc, _ = from_preset("sparse")
    target = default_target(sc, "attention")
    assert not np.any(target[sc.mask_array()]) and np.allclose(target.sum(axis=1), 1)


@pytest.mark.parametrize("preset", [*GOAL_PRESETS, "why-scale"])
def test_the_permalink_carries_the_learning(preset: str) -> None:
    sc, view = preset_page(preset)
    assert view.learning is not None
    trained, learning = train_page(sc, view.learning, 3)
    view = view.__class__(**{**view.__dict__, "learning": learning})
    again_sc, again = read_page(dict(state_query(trained, view)))
    back = again.learning
    assert back.goal == learning.goal and back.head == learning.head and back.rows == learning.rows
    assert back.train == learning.train and back.optimizer == learning.optimizer
    assert back.learning_rate == learning.learning_rate and back.before == learning.before
    assert back.companion == learning.companion
    np.testing.assert_allclose(back.target, learning.target, rtol=1e-11)
    np.testing.assert_allclose(back.losses, learning.losses, rtol=1e-5)  # six significant digits
    np.testing.assert_allclose(again_sc.weights()["w_q"], trained.weights()["w_q"], atol=1e-6)


def test_a_typed_target_row_is_divided_by_its_sum() -> None:
    sc, _ = from_preset("default")
    form = {"learn_goal": "attention", "learn_shape": "attention,5,5",
            **{f"target-{i}-{j}": "0" for i in range(5) for j in range(5)}}
    for i in range(5):
        form[f"target-{i}-{i}"] = "1"
    form.update({"target-0-0": "1", "target-0-1": "2", "target-0-2": "1"})
    learning = read_learning(form, sc)
    np.testing.assert_allclose(learning.target[0], [0.25, 0.5, 0.25, 0, 0])


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"target-1-2": "-0.5"}, "target-1-2", "negative"),
    ({"target-2-2": "0"}, "target-2-0", "at least one key"),
    ({"target-3-3": "abc"}, "target-3-3", "not a number"),
    ({"learn_rate": "0"}, "learn_rate", "learning rate"),
    ({"learn_rate": "11"}, "learn_rate", "learning rate"),
    ({"learn_rate": "nan"}, "learn_rate", "learning rate"),
    ({"learn_rate": "1_0"}, "learn_rate", "learning rate"),
    ({"learn_rate": "\u0661"}, "learn_rate", "learning rate"),
    ({"learn_losses": "1.0 2_0"}, "learn_losses", "cannot be read"),
    ({"learn_optimizer": "rmsprop"}, "learn_optimizer", "adam, sgd"),
    ({"learn_goal": "entropy"}, "learn_goal", "attention, output"),
    ({"learn_head": "3"}, "learn_head", "from 0 to 0"),
    ({"learn_shown": "1"}, "learn_w_q", "tick at least one weight"),
    ({"learn_losses": "1.0 zebra"}, "learn_losses", "cannot be read"),
])
def test_bad_learning_fields_name_the_field(change: dict, field: str, words: str) -> None:
    sc, _ = from_preset("default")
    form = {"learn_goal": "attention", "learn_shape": "attention,5,5",
            **{f"target-{i}-{j}": str(float(i == j)) for i in range(5) for j in range(5)}}
    if "learn_shown" in change:  # the panel on screen with every checkbox unticked
        form.update({f"learn_row-{i}": "on" for i in range(5)})
    with pytest.raises(FormError) as e:
        read_learning({**form, **change}, sc)
    assert e.value.field == field
    assert words in e.value.message


def test_weight_on_a_hidden_key_is_refused() -> None:
    sc, _ = from_preset("learn-previous-token")
    form = {"learn_goal": "attention", "learn_shape": "attention,6,6",
            **{f"target-{i}-{j}": str(float(i == j)) for i in range(6) for j in range(6)}}
    form["target-0-3"] = "0.5"
    with pytest.raises(FormError) as e:
        read_learning(form, sc)
    assert e.value.field == "target-0-3" and "hidden" in e.value.message


def test_blocks_have_no_learning() -> None:
    sc, _ = from_preset("block")
    assert read_learning({"learn_goal": "attention"}, sc) is None


# --- training through the page ----------------------------------------------------------------------

@pytest.mark.parametrize(("preset", "goal"), GOAL_PRESETS.items())
def test_the_page_trains_as_app_goals_does(preset: str, goal: str) -> None:
    """The page's 1 + 10 + 100 steps from a goal preset: the losses app.lesson.goals.train_goal gives for 111 steps
    with SGD (Adam's moments restart with each press, so SGD is the like-for-like comparison)."""
    sc, view = preset_page(preset)
    learning = view.learning.__class__(**{**view.learning.__dict__, "optimizer": "sgd"})
    for steps in (1, 10, 100):
        sc, learning = train_page(sc, learning, steps)
    assert len(learning.losses) == 112 and learning.steps_taken == 111
    g = GOALS[goal]
    sgd = g.__class__(**{**g.__dict__, "optimizer": "sgd"})
    reference = train_goal(sgd, 111)
    np.testing.assert_allclose(learning.losses, reference.losses, rtol=1e-9, atol=1e-12)


def test_translate_learns_the_alignment_table() -> None:
    """Seed 003's table: after 100 Adam steps each French word's largest weight is on its counterpart
    (le on the second "the"), and the loss is within 1 % of the table's own entropy, its floor."""
    sc, view = preset_page("learn-translate")
    sc, learning = train_page(sc, view.learning, 100)
    weights = sc.run().heads[0].softmax
    assert list(weights.argmax(axis=1)) == [0, 1, 2, 3, 4, 5]
    table = np.array(SEED_003_ALIGNMENT) / np.array(SEED_003_ALIGNMENT).sum(axis=1, keepdims=True)
    entropy = -np.sum(table * np.log(table)) / 6
    assert learning.losses[-1] == pytest.approx(entropy, rel=0.01)
    assert learning.losses[-1] < learning.losses[0] / 2


def test_bank_learns_both_sentences() -> None:
    from app.state.learning import companion_run

    sc, view = preset_page("learn-bank")
    sc, learning = train_page(sc, view.learning, 100)
    run = sc.run()
    assert run.heads[0].softmax[6].argmax() == sc.tokens.index("river")
    other = companion_run(sc, run, learning)
    assert other.heads[0].softmax[7].argmax() == 4  # "money" in "Ryan needed to transfer money to the bank"
    assert learning.losses[-1] < 0.01


def test_previous_token_is_learned() -> None:
    sc, view = preset_page("learn-previous-token")
    sc, learning = train_page(sc, view.learning, 100)
    a = sc.run().heads[0].softmax
    assert list(a.argmax(axis=1)) == [0, 0, 1, 2, 3, 4]
    assert learning.losses[-1] < 0.01


def test_why_scale_page_is_the_scaled_run() -> None:
    sc, view = preset_page("why-scale")
    sc, learning = train_page(sc, view.learning, 10)
    np.testing.assert_allclose(learning.losses, why_scale(10)["scaled"]["losses"], rtol=1e-9)


def test_why_scale_page_unticked_is_the_unscaled_run() -> None:
    """The panel's note: untick “divide by √d_k” and train again, and the page is the run without ÷√d_k."""
    sc, view = preset_page("why-scale")
    sc, learning = train_page(replace(sc, scale=False), view.learning, 10)
    np.testing.assert_allclose(learning.losses, why_scale(10)["unscaled"]["losses"], rtol=1e-9)


def test_reset_restores_the_weights_before_training() -> None:
    sc, view = preset_page("learn-translate")
    trained, learning = train_page(sc, view.learning, 10)
    trained, learning = train_page(trained, learning, 10)
    assert learning.steps_taken == 20
    back, cleared = reset(learning)
    assert back.edits == sc.edits and cleared.losses == () and cleared.before == ""
    np.testing.assert_array_equal(back.run().heads[0].softmax, sc.run().heads[0].softmax)


def test_the_curve_keeps_the_latest_values() -> None:
    sc, _ = from_preset("default")
    learning = Learning(goal="output", head=0, target=sc.x, optimizer="sgd", learning_rate=0.01,
                        losses=tuple(np.linspace(2, 1, MAX_CURVE - 5)))
    _, after = train_page(sc, learning, 10)
    assert len(after.losses) == MAX_CURVE and after.first_step == 5 and after.steps_taken == MAX_CURVE - 6 + 10


def test_divergence_is_a_learning_rate_error() -> None:
    sc, _ = from_preset("default")
    learning = Learning(goal="output", head=0, target=sc.x * 1000, optimizer="sgd", learning_rate=10,
                        train=("w_q", "w_k", "w_v", "w_o"))
    with pytest.raises(FormError) as e:
        train_page(sc, learning, 100)
    assert e.value.field == "learn_rate"


def test_a_new_token_restarts_the_goal() -> None:
    sc, view = preset_page("learn-translate")
    trained, learning = train_page(sc, view.learning, 3)
    longer = add_token(trained)
    fitted = fit(learning, longer)
    assert fitted.target.shape == (7, 6) and fitted.losses == () and fitted.goal == "attention"
    assert fit(learning, trained) is learning


def test_goal_presets_open_with_their_goal() -> None:
    for preset, goal in GOAL_PRESETS.items():
        sc, _ = from_preset(preset)
        learning = preset_learning(sc)
        np.testing.assert_array_equal(learning.target, GOALS[goal].scenarios[0].loss["target"])
    assert preset_learning(from_preset("default")[0]) is None


# --- through HTTP ----------------------------------------------------------------------------------

def test_a_step_button_trains_and_the_curve_grows(client: TestClient) -> None:
    form = page_form(client, "learn-translate")
    assert form["learn_goal"] == "attention" and form["learn_losses"] == ""
    r = client.post("/", data={**form, "action": "learn_10"}, headers=HTMX)
    assert r.status_code == 200
    losses = [float(v) for v in hidden(r.text, "learn_losses").split()]
    assert len(losses) == 11 and losses[-1] < losses[0]
    assert hidden(r.text, "edits") != form["edits"]  # the trained weights are the scenario's edits
    assert hidden(r.text, "learn_before")
    assert "learn_losses=" in r.headers["HX-Push-Url"]
    again = form_fields(r.text)
    r2 = client.post("/", data={**again, "action": "learn_1"}, headers=HTMX)
    assert len(hidden(r2.text, "learn_losses").split()) == 12
    r3 = client.post("/", data={**form_fields(r2.text), "action": "learn_reset"}, headers=HTMX)
    assert hidden(r3.text, "learn_losses") == "" and hidden(r3.text, "edits") == form["edits"]


def test_the_step_buttons_work_without_javascript(client: TestClient) -> None:
    form = page_form(client, "learn-previous-token")
    r = client.post("/", data={**form, "action": "learn_100"})
    assert r.status_code == 200 and r.text.lower().startswith("<!doctype html>")
    assert len(hidden(r.text, "learn_losses").split()) == 101


def test_a_bad_learning_rate_keeps_the_page(client: TestClient) -> None:
    form = page_form(client, "learn-translate")
    r = client.post("/", data={**form, "learn_rate": "-1", "action": "learn_10"}, headers=HTMX)
    assert r.status_code == 422 and r.headers["HX-Reswap"] == "none"
    m = re.search(r'<div id="err-learn"[^>]*data-field="learn_rate"[^>]*>([^<]*)</div>', r.text)
    assert m and "learning rate" in m.group(1)


def test_backward_stages_follow_the_goal(client: TestClient) -> None:
    form = page_form(client, "learn-translate")
    for key in ("grad_a", "grad_scores", "grad_q", "grad_k", "grad_v", "grad_w"):
        r = client.post("/stages", data={**form, "goto": key}, headers=HTMX)
        assert r.status_code == 200 and f'id="stage-{key}"' in r.text
    r = client.get("/", params={"preset": "default", "stage": "grad_a"})
    assert 'id="stage-grad_a"' not in r.text  # no goal: no backward stages


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_takes_either_goal_through_every_backward_stage(client: TestClient, preset: str) -> None:
    """Any preset, either goal: every backward stage answers and ten steps train (blocks: no goal, a note)."""
    form = {k: v for k, v in page_form(client, preset).items() if not k.startswith(("learn", "target"))}
    for goal in ("attention", "output"):
        r = client.post("/stages", data={**form, "learn_goal": goal, "goto": "grad_a"}, headers=HTMX)
        assert r.status_code == 200
        state = {**form, **{k: v for k, v in form_fields(r.text).items() if k.startswith(("learn", "target"))}}
        for key in ("grad_scores", "grad_q", "grad_k", "grad_v", "grad_w"):
            assert client.post("/stages", data={**state, "goto": key}, headers=HTMX).status_code == 200
        r = client.post("/", data={**state, "action": "learn_10"}, headers=HTMX)
        assert r.status_code == 200
        if PRESETS[preset].blocks:  # no goal; the panel, opened, says why
            assert 'name="learn_losses"' not in r.text
            r = client.post("/stages", data={**state, "panels": "learn"}, headers=HTMX)
            assert "Gradients cover attention without transformer blocks" in r.text
        else:
            assert len(hidden(r.text, "learn_losses").split()) == 11


def test_linear_attention_takes_the_output_goal() -> None:
    sc, _ = from_preset("linear")
    learning = read_learning({"learn_goal": "attention"}, sc)
    assert learning.goal == "output" and learning.target.shape == (5, 3)
