"""app.maths.masks: the causal, local and strided patterns against plain loops, and what a mask does to a run:
exact zeros where hidden, a per-head loop agreeing, a query that sees no key an error."""

from __future__ import annotations

import numpy as np
import pytest

from app.maths.attention import run_attention
from app.maths.masks import causal_mask, local_mask, strided_mask
from tests.maths.test_attention import reference_attention

RNG = np.random.default_rng(7)


def test_causal_mask_shape() -> None:
    assert causal_mask(2, 3).tolist() == [[False, True, True], [False, False, True]]


def test_causal_weights_above_diagonal_are_exactly_zero() -> None:
    run = run_attention(RNG.normal(size=(5, 4)), num_heads=2, mask="causal")
    for head in run.heads:
        assert np.all(head.softmax[np.triu_indices(5, k=1)] == 0.0)
        assert np.allclose(head.softmax.sum(axis=1), 1.0)
        assert head.softmax[0, 0] == 1.0  # the first token sees only itself


def test_masked_run_matches_a_per_head_loop() -> None:
    x = RNG.normal(size=(4, 6))
    mask = np.array([[0, 1, 0, 0], [1, 0, 0, 1], [0, 0, 0, 0], [1, 1, 1, 0]], dtype=bool)
    run = run_attention(x, num_heads=3, d_k=2, d_v=3, mask=mask, temperature=0.7)
    w = {n: getattr(run.weights, n) for n in ("w_q", "w_k", "w_v", "w_o")}
    assert np.allclose(run.output, reference_attention(x, x, w, mask, True, 0.7))


def test_full_row_mask_is_an_error_not_nan() -> None:
    with pytest.raises(ValueError, match="row 1"):
        run_attention(np.ones((2, 2)), mask=np.array([[False, True], [True, True]]))


# --- sparse masks ---------------------------------------------------------------------------------


def test_local_window_hides_keys_further_than_the_window() -> None:
    m = local_mask(5, 5, 1)
    for i in range(5):
        for j in range(5):
            assert m[i, j] == (abs(i - j) > 1)


def test_strided_pattern_is_neighbourhood_or_every_stride_th_token() -> None:
    m = strided_mask(9, 9, 3)
    for i in range(9):
        for j in range(9):
            assert m[i, j] == (not (abs(i - j) < 3 or (i - j) % 3 == 0))
    assert m.sum(axis=1).min() > 0  # every query hides something at T = 9, stride 3


@pytest.mark.parametrize(("mode", "window"), [("local", 1), ("strided", 2), ("strided", None)])
def test_sparse_masks_give_exact_zeros_where_hidden(mode: str, window: int | None) -> None:
    run = run_attention(RNG.normal(size=(7, 4)), mask=mode, window=window)
    assert run.mask_mode == mode
    assert run.window == (window or 3)  # strided default: ⌈√7⌉ = 3
    for head in run.heads:
        assert np.all(head.softmax[run.mask] == 0.0)
        np.testing.assert_allclose(head.softmax.sum(axis=1), 1.0)
