"""app.maths.loss_floor against the cross-entropy itself: no weights go below the floor, the target reaches it,
and ∂L/∂A there has the stated size."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.lesson.goals import GOALS, SEED_003_ALIGNMENT, normalised_rows, train_goal
from app.maths.backward import attention_loss
from app.maths.loss_floor import attention_loss_floor, gradient_norm_at_floor


def cross_entropy(target: np.ndarray, weights: np.ndarray, rows: list[int]) -> float:
    """−(1/R)·Σ_i Σ_j t_ij·log A_ij by loops, the reference."""
    total = 0.0
    for i in rows:
        for t, a in zip(target[i].tolist(), weights[i].tolist(), strict=True):
            if t > 0:
                total -= t * math.log(a)
    return total / len(rows)


def test_the_floor_is_the_loss_at_the_target_and_no_weights_go_below() -> None:
    rng = np.random.default_rng(0)
    target = normalised_rows(rng.random((4, 5)) * (rng.random((4, 5)) > 0.3) + np.eye(4, 5))  # (4, 5) some zeros
    for rows in ([], [1, 3]):
        counted = rows or list(range(4))
        floor = attention_loss_floor(target, tuple(rows))
        assert floor == pytest.approx(cross_entropy(target, target, counted))
        for _ in range(50):
            a = rng.dirichlet(np.ones(5), size=4)  # (4, 5) random weights
            assert cross_entropy(target, a, counted) >= floor


def test_a_one_hot_target_has_floor_0() -> None:
    assert attention_loss_floor(np.eye(3)) == 0.0
    assert gradient_norm_at_floor(np.eye(3)) == pytest.approx(math.sqrt(3) / 3)


def test_learn_translate_reaches_its_floor_and_dl_da_stays_1() -> None:
    """Article 4's table: entropy 0.948; trained, the loss reaches it, ‖∂L/∂A‖ settles at √36 / 6 = 1 and
    ∂L/∂Scaled = (A − t)/T vanishes."""
    target = normalised_rows(SEED_003_ALIGNMENT)
    assert attention_loss_floor(target) == pytest.approx(0.94798, abs=1e-5)
    result = train_goal(GOALS["translate"], 300)
    loss, d_a = attention_loss(result.run, 0, target)
    assert loss == pytest.approx(attention_loss_floor(target), abs=1e-6)
    assert np.linalg.norm(d_a) == pytest.approx(gradient_norm_at_floor(target), abs=1e-4)
    assert gradient_norm_at_floor(target) == 1.0
    assert np.abs(result.run.heads[0].softmax - target).max() < 1e-4
