"""Cell references of a run: forward cells always, backward ones only with a goal's gradients."""

from __future__ import annotations

import math

import numpy as np

from app.state.cells import matrix_of, parse_cell
from app.state.learning import learning_loss_and_gradients, preset_learning
from app.state.scenario import from_preset


def test_a_forward_cell_is_found_in_its_head_and_checked_by_hand() -> None:
    sc, _ = from_preset("three-token")
    run = sc.run()
    ref = parse_cell("softmax.0.1.2", run)
    assert ref is not None and (ref.matrix, ref.head, ref.row, ref.col) == ("softmax", 0, 1, 2)
    w = sc.weights()
    scores = (sc.x @ w["w_q"][0]) @ (sc.x @ w["w_k"][0]).T / math.sqrt(sc.d_k)  # (T, T)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(matrix_of(ref, run), weights, atol=1e-12)


def test_a_cell_outside_the_run_names_nothing() -> None:
    sc, _ = from_preset("three-token")
    run = sc.run()
    assert parse_cell("softmax.0.3.0", run) is None  # three tokens: rows 0–2
    assert parse_cell("softmax.5.0.0", run) is None  # one head
    assert parse_cell("nonsense", run) is None


def test_a_gradient_cell_needs_the_goals_gradients() -> None:
    sc, _ = from_preset("learn-bank")
    run = sc.run()
    _, grads = learning_loss_and_gradients(run, preset_learning(sc))
    assert parse_cell("g_softmax.0.0.0", run) is None  # no goal, no gradient
    ref = parse_cell("g_softmax.0.0.0", run, grads=grads)
    assert ref is not None
    np.testing.assert_array_equal(matrix_of(ref, run, grads=grads), grads.heads[0].softmax)
