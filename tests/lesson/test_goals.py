"""app.lesson.goals: each training goal reaches its target from its seeded start, the targets are valid, the
row-restricted loss against finite differences, the joint training loop against app.maths.backward.train,
and why ÷√d_k: the unscaled softmax saturates, its gradient vanishes and its loss stalls.
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
    """d_k = 64 (d_model = 16), SGD lr 0.3, 200 steps, the same start (seed 2) and goal (MSE to each
    token's previous value).

    Scaled: 0.824 → 0.256 at step 10 → 0.0019. Unscaled: 0.872 → 0.711 by step 10, then it stays between
    0.67 and 0.72 up to step 200 (ends at 0.711): its ‖∂L/∂scores‖ falls from 0.105 to 0.00053 at step
    10 (197×), with a median of 2e-5 over steps 10–200. At the start the unscaled run's norm is larger
    (0.105 against 0.016): three of its rows are saturated (largest weights 0.975, 0.971, 0.906), but its
    other rows carry more than the scaled run's, which includes the factor 1/√64.
    """
    result = why_scale(200)
    scaled, unscaled = result["scaled"], result["unscaled"]
    assert len(scaled["losses"]) == len(unscaled["losses"]) == 201
    # The start: scores of standard deviation about 8 saturate some unscaled rows; the most saturated
    # passes over ten times less gradient than any row of the scaled run (measured: 23×).
    saturated = [i for i, w in enumerate(unscaled["max_weight_start"]) if w > 0.9]
    assert len(saturated) >= 2
    most = int(np.argmax(unscaled["max_weight_start"]))
    assert unscaled["grad_scores_rows_start"][most] < 0.1 * min(scaled["grad_scores_rows_start"])
    assert max(scaled["max_weight_start"]) < 0.5
    # Along training: the unscaled gradient collapses within 10 steps (measured 197× smaller than at its
    # start) while its loss is still high, and stays there.
    assert unscaled["grad_scores_norm"][10] < 0.01 * unscaled["grad_scores_norm"][0]
    assert np.median(unscaled["grad_scores_norm"][10:]) < 1e-3 * unscaled["grad_scores_norm"][0]
    assert min(unscaled["losses"][10:]) > 0.6
    # After 200 steps the scaled run's loss has fallen by more than 99 %, the unscaled one's by less than 60 %.
    assert scaled["losses"][200] < 0.01 * scaled["losses"][0]
    assert unscaled["losses"][200] > 0.4 * unscaled["losses"][0]
