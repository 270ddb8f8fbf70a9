"""app.lesson.goals: each training goal reaches its target from its seeded start, the targets are valid, the
row-restricted loss against finite differences, the joint training loop against app.maths.backward.train,
and why ÷√d_k: the unscaled softmax starts saturated, little gradient gets through and its loss barely moves.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.lesson.goals import (
    GOALS,
    SEED_003_ALIGNMENT,
    goal_loss_and_gradients,
    previous_token_scenario,
    rows_attention_loss,
    train_goal,
    train_scenarios,
    why_scale,
)
from app.maths.attention import run_attention
from app.maths.backward import attention_loss, check_attention_target, train


def _target_entropy(target: np.ndarray) -> float:
    """The cross-entropy's floor: −(1/T)·Σ t·log t, reached when A = t."""
    t = target[target > 0]
    return -float(np.sum(t * np.log(t))) / target.shape[0]


@pytest.mark.parametrize("key", list(GOALS))
def test_goal_targets_are_valid(key: str) -> None:
    goal = GOALS[key]
    for scenario in goal.scenarios:
        run = run_attention(scenario.x, **scenario.run_kwargs)
        target = np.asarray(scenario.loss["target"])
        check_attention_target(target, run.heads[0].softmax.shape, run.mask)  # raises if invalid
        assert np.all(np.abs(target.sum(axis=1) - 1.0) < 1e-12)
        if run.mask is not None:
            assert np.all(target[run.mask] == 0.0)
        assert len(scenario.tokens) == scenario.x.shape[0]


def test_translate_target_is_seed_003_table() -> None:
    target = np.asarray(GOALS["translate"].scenarios[0].loss["target"])
    np.testing.assert_allclose(target, np.array(SEED_003_ALIGNMENT), atol=1e-12)
    assert list(target.argmax(axis=1)) == [0, 1, 2, 3, 4, 5]  # le → the second "the", not the first


def test_translate_reaches_the_alignment_table() -> None:
    """Adam, lr 0.1, 100 steps: the loss falls from 1.931 to 0.952, against the table's own entropy 0.948
    (the floor, where A equals the table); every French word's largest weight is on its counterpart."""
    goal = GOALS["translate"]
    result = train_goal(goal)
    target = np.asarray(goal.scenarios[0].loss["target"])
    a = result.run.heads[0].softmax  # (6, 6)
    assert len(result.losses) == goal.steps + 1
    assert result.losses[0] > 1.9
    assert result.losses[-1] < _target_entropy(target) + 0.01
    assert list(a.argmax(axis=1)) == [0, 1, 2, 3, 4, 5]
    assert np.abs(a - target).max() < 0.05


def test_bank_attends_to_river_then_money() -> None:
    """Adam, lr 0.1, 100 steps on the sum of both sentences' losses: 4.114 → about 1e-4; one head sends
    bank to river in ① and to money in ②, each with weight above 0.99."""
    goal = GOALS["bank"]
    result = train_goal(goal)
    assert result.losses[0] > 4.0 and result.losses[-1] < 1e-3
    np.testing.assert_array_equal(result.runs[0].weights.w_q, result.runs[1].weights.w_q)  # one shared head
    for run, scenario, place in zip(result.runs, goal.scenarios, ("river", "money"), strict=True):
        bank = scenario.tokens.index("bank")
        row = run.heads[0].softmax[bank]
        assert scenario.tokens[int(row.argmax())] == place
        assert row.max() > 0.99


def test_previous_token_head() -> None:
    """Adam, lr 0.1, 100 steps with RoPE and a causal mask: 1.114 → below 1e-3; each row's argmax is i − 1."""
    result = train_goal(GOALS["previous-token"])
    a = result.run.heads[0].softmax  # (6, 6)
    assert result.losses[-1] < 1e-3
    assert list(a.argmax(axis=1)) == [0, 0, 1, 2, 3, 4]
    assert np.all(a[np.triu_indices(6, k=1)] == 0.0)  # the causal mask hides every later key


def test_previous_token_is_impossible_without_positions() -> None:
    """Without positions, the two "the" keys have equal scores for every query: mat, whose previous token
    is the second "the", can give it at most half its weight, so the loss stalls at ln 2 / 6 = 0.1155."""
    goal = GOALS["previous-token"]
    scenario = previous_token_scenario("none")
    result = train(scenario.x, scenario.run_kwargs, scenario.loss, steps=goal.steps, optimizer=goal.optimizer,
                   learning_rate=goal.learning_rate, train=goal.train)
    a = result.run.heads[0].softmax
    assert a[5, 4] <= 0.5 + 1e-9
    assert abs(a[5, 0] - a[5, 4]) < 1e-9
    assert result.losses[-1] >= math.log(2) / 6 - 1e-9


def test_rows_loss_counts_only_its_rows() -> None:
    scenario = GOALS["bank"].scenarios[0]
    run = run_attention(scenario.x, **scenario.run_kwargs)
    target = np.asarray(scenario.loss["target"])
    t = target.shape[0]
    full, d_full = attention_loss(run, 0, target)
    loss_all, d_all = rows_attention_loss(run, 0, target, tuple(range(t)))
    assert loss_all == pytest.approx(full, rel=1e-12)
    np.testing.assert_allclose(d_all, d_full, rtol=1e-12)
    bank = scenario.loss["rows"][0]
    loss, d_a = rows_attention_loss(run, 0, target, (bank,))
    assert loss == pytest.approx(-math.log(run.heads[0].softmax[bank, scenario.tokens.index("river")]))
    assert np.all(np.delete(d_a, bank, axis=0) == 0.0)


def test_rows_loss_gradient_against_finite_differences() -> None:
    scenario = GOALS["bank"].scenarios[1]
    run = run_attention(scenario.x, **scenario.run_kwargs)
    _, grads = goal_loss_and_gradients(run, scenario.loss)
    weights = {"w_q": run.weights.w_q, "w_k": run.weights.w_k}
    eps = 1e-6
    for name in ("w_q", "w_k"):
        for index in [(0, 5, 0), (0, 3, 1), (0, 4, 0)]:
            plus, minus = (w.copy() for w in (weights[name], weights[name]))
            plus[index] += eps
            minus[index] -= eps
            losses = [goal_loss_and_gradients(run_attention(scenario.x, **{**scenario.run_kwargs,
                                                                          "weights": {**weights, name: w}}),
                                              scenario.loss)[0] for w in (plus, minus)]
            numeric = (losses[0] - losses[1]) / (2 * eps)
            assert getattr(grads.weights, name)[index] == pytest.approx(numeric, rel=1e-5, abs=1e-8)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_joint_training_of_one_scenario_is_backward_train(optimizer: str) -> None:
    scenario = GOALS["translate"].scenarios[0]
    ours = train_scenarios((scenario,), steps=5, optimizer=optimizer, learning_rate=0.1)
    theirs = train(scenario.x, scenario.run_kwargs, scenario.loss, steps=5, optimizer=optimizer,
                   learning_rate=0.1, train=("w_q", "w_k"))
    np.testing.assert_allclose(ours.losses, theirs.losses, rtol=1e-12)
    np.testing.assert_allclose(ours.weights.w_q, theirs.weights.w_q, rtol=1e-12)


def test_why_scale_saturated_softmax_stalls() -> None:
    """d_k = 64 (d_model = 16), SGD η = 0.1, 200 steps, the same start (seed 4349) and goal (MSE to each
    token's previous value). Measured: scores of standard deviation 7.93; unscaled rows' largest weights
    0.947, 0.993, 1.000, 1.000, 1.000, 1.000 (scaled: 0.414 … 0.764, mean 0.554); ‖∂L/∂Scores‖ at the start
    0.00091 unscaled against 0.0098 scaled, below it at every step and never above its start; loss
    0.4643 → 0.4639 unscaled, 0.422 → 0.048 scaled, falling at every step in both.
    """
    result = why_scale(200)
    scaled, unscaled = result["scaled"], result["unscaled"]
    assert len(scaled["losses"]) == len(unscaled["losses"]) == len(unscaled["max_weights"]) == 201
    assert scaled["scores_std_start"] == unscaled["scores_std_start"]  # the same start
    assert 7 < unscaled["softmax_input_std_start"] < 9  # seed 003: about √64 = 8
    assert scaled["softmax_input_std_start"] == pytest.approx(unscaled["softmax_input_std_start"] / 8, rel=1e-12)
    # Every unscaled row starts nearly one-hot; no scaled one does.
    assert min(unscaled["max_weight_start"]) > 0.94 and np.mean(unscaled["max_weight_start"]) > 0.98
    assert max(scaled["max_weight_start"]) < 0.8 and np.mean(scaled["max_weight_start"]) < 0.6
    # So the unscaled gradient is smaller, even though the scaled one carries 1/√d_k = 1/8, at every step.
    g_s, g_u = np.array(scaled["grad_scores_norm"]), np.array(unscaled["grad_scores_norm"])
    assert g_u[0] < 0.1 * g_s[0] and np.all(g_u < g_s) and g_u.max() == g_u[0]
    # And with the same η the unscaled loss barely moves while the scaled one falls by 89 %; no jumps.
    assert abs(unscaled["losses"][-1] - unscaled["losses"][0]) < 0.001 * unscaled["losses"][0]
    assert scaled["losses"][-1] < 0.12 * scaled["losses"][0]
    assert np.all(np.diff(scaled["losses"]) <= 0) and np.all(np.diff(unscaled["losses"]) <= 0)


def test_why_scale_jumps_at_a_larger_learning_rate() -> None:
    """Why η = 0.1 (0.2 would do too): at 0.3 the unscaled run's 64-times-larger steps on the softmax's input
    overshoot, and its loss goes up at some steps (the scaled one still falls at every step)."""
    result = why_scale(200, learning_rate=0.3)
    assert np.any(np.diff(result["unscaled"]["losses"]) > 1e-6)
    assert np.all(np.diff(result["scaled"]["losses"]) <= 0)
