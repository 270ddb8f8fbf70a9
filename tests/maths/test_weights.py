"""app.maths.weights: the one table of weight shapes agrees with the weights the pipeline draws."""

from __future__ import annotations

import pytest

from app.maths.attention import seeded_weights
from app.maths.blocks import seeded_block_weights
from app.maths.weights import (
    ALL_WEIGHT_NAMES,
    BLOCK_WEIGHT_NAMES,
    WEIGHTS,
    Sizes,
    block_weight_shapes,
    weight_shapes,
)


def test_every_weight_is_in_the_table_once() -> None:
    assert tuple(WEIGHTS) == ALL_WEIGHT_NAMES + BLOCK_WEIGHT_NAMES


@pytest.mark.parametrize(("d_model", "h", "d_k", "d_v", "d_a"), [(4, 1, 4, 4, 4), (6, 3, 2, 5, 7)])
def test_attention_shapes_match_the_seeded_weights(d_model: int, h: int, d_k: int, d_v: int, d_a: int) -> None:
    w = seeded_weights(d_model, h, d_k, d_v, seed=1, d_a=d_a)
    assert weight_shapes(d_model, h, d_k, d_v, d_a) == {name: getattr(w, name).shape for name in ALL_WEIGHT_NAMES}


def test_block_shapes_match_the_seeded_block_weights() -> None:
    bw = seeded_block_weights(5, 9, seed=2)
    assert block_weight_shapes(5, 9) == {name: getattr(bw, name).shape for name in BLOCK_WEIGHT_NAMES}


def test_d_a_defaults_to_d_k_as_the_pipeline_draws_it() -> None:
    assert WEIGHTS["w_1"].shape(Sizes(d_model=6, h=2, d_k=3)) == (2, 3, 3)
    assert WEIGHTS["v_a"].shape(Sizes(d_model=6, h=2, d_k=3, d_a=5)) == (2, 5)


def test_grid_is_one_heads_matrix_and_a_vector_is_one_row() -> None:
    sizes = Sizes(d_model=6, h=2, d_k=3, d_v=4, d_ff=8)
    assert WEIGHTS["w_v"].grid(sizes) == (6, 4)
    assert WEIGHTS["v_a"].grid(sizes) == (1, 3)
    assert WEIGHTS["w_o"].grid(sizes) == (8, 6)
    assert WEIGHTS["ffn_b1"].grid(sizes) == (1, 8)
    assert [name for name, spec in WEIGHTS.items() if spec.per_head] == ["w_q", "w_k", "w_v", "w_a", "w_1", "w_2",
                                                                          "v_a"]
