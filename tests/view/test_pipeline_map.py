"""The pipeline map: its nodes follow the configuration, its shapes are the run's, it marks the
stage in view, and each drawing has exactly one link per stage, escaped, well-formed SVG."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.maths.positions import POSITIONAL_ENCODINGS
from app.state.scenario import Scenario, View, add_token, from_preset, remove_token, resize, with_position_table
from app.view.pipeline_map import PipelineMap, pipeline_map

SVG = "{http://www.w3.org/2000/svg}"


def map_of(sc: Scenario, view: View | None = None) -> PipelineMap:
    view = view or View()
    run, stack = sc.compute()
    if stack is not None:
        run = stack.blocks[view.block].attention  # the block in view, as page_context does
    return pipeline_map(sc, run, stack, view)


def preset(key: str, **changes) -> Scenario:
    sc, _ = from_preset(key)
    return with_position_table(replace(sc, **changes))


def labels(m: PipelineMap) -> list[str]:
    return [n.label for c in m.columns for n in c.nodes]


def shapes(m: PipelineMap) -> dict[str, str]:
    """Each node's shape by its label (the last one where a label repeats)."""
    return {n.label: n.shape for c in m.columns for n in c.nodes}


def stage_nodes(m: PipelineMap, key: str) -> list[str]:
    return [n.label for c in m.columns if c.stage == key for n in c.nodes]


# --- the nodes follow the configuration --------------------------------------------------------


@pytest.mark.parametrize("encoding", POSITIONAL_ENCODINGS)
def test_a_pe_node_only_when_positions_are_added_to_x(encoding: str) -> None:
    m = map_of(preset("default", positional_encoding=encoding))
    assert ("+PE" in labels(m)) == (encoding in ("sinusoidal", "learned"))
    assert ("RoPE(Q)" in labels(m)) == ("RoPE(K)" in labels(m)) == (encoding == "rope")
    assert ("+ALiBi" in labels(m)) == (encoding == "alibi")


def test_positions_belong_to_the_stage_that_shows_them() -> None:
    assert stage_nodes(map_of(preset("positions")), "x") == ["X", "+PE"]
    rope = map_of(preset("default", positional_encoding="rope"))
    assert stage_nodes(rope, "scores") == ["RoPE(Q)", "RoPE(K)", "Q·Kᵀ"]
    assert stage_nodes(map_of(preset("default", positional_encoding="alibi")), "scaled") == ["÷√d_k", "+ALiBi"]


def test_a_pe_node_with_blocks_too() -> None:
    """With blocks, positions are added once before the first block: the stack holds them."""
    m = map_of(preset("block", positional_encoding="sinusoidal"))
    assert stage_nodes(m, "x") == ["X", "+PE"]


@pytest.mark.parametrize(("changes", "label", "off"), [
    ({}, "no mask", True),
    ({"mask_mode": "causal"}, "mask: causal", False),
    ({"mask_mode": "local", "window": 1}, "mask: ±1", False),
    ({"mask_mode": "strided", "window": 2}, "mask: stride 2", False),
    ({"blocked": frozenset({(0, 1)})}, "mask: cells", False),
    ({"mask_mode": "causal", "padding": frozenset({1})}, "mask: causal + cells", False),
])
def test_the_mask_is_always_a_node_and_says_which(changes: dict, label: str, off: bool) -> None:
    m = map_of(preset("default", **changes))
    [node] = [n for c in m.columns if c.stage == "mask" for n in c.nodes]
    assert (node.label, node.off) == (label, off)


def test_the_score_and_the_divisor_follow_the_options() -> None:
    assert stage_nodes(map_of(preset("additive")), "scores") == ["additive"]
    assert stage_nodes(map_of(preset("additive")), "scaled") == ["÷1"]  # tanh-bounded: no √d_k
    assert stage_nodes(map_of(preset("default", score="general", temperature=2.0)), "scores") == ["Q·W_a·Kᵀ"]
    assert stage_nodes(map_of(preset("default", temperature=2.0)), "scaled") == ["÷√d_k·τ"]
    assert stage_nodes(map_of(preset("pool", temperature=0.5)), "scaled") == ["÷τ"]  # pool does not scale
    assert stage_nodes(map_of(preset("linear")), "softmax") == ["linear φ"]


def test_cross_attention_feeds_keys_and_values_from_the_source() -> None:
    m = map_of(preset("translate"))
    inputs, weights = m.columns[0], m.columns[1]
    assert [n.label for n in inputs.nodes] == ["X", "C"]
    assert [n.label for n in weights.nodes] == ["W_Q", "W_K", "W_V"]
    assert weights.arrows == ((0, 0), (1, 1), (1, 2))  # X → W_Q; C → W_K, W_V
    assert map_of(preset("default")).columns[1].arrows is None  # self-attention: X feeds all three


def test_blocks_add_their_stages_and_a_bracket() -> None:
    m = map_of(preset("block"), View(block=1))
    assert labels(m)[-3:] == ["Add & Norm", "FFN", "Add & Norm"]
    assert [s.label for s in m.spans] == ["block 2 of 2"]
    assert [c.stage for c in m.columns[m.spans[0].first:]][0] is None  # from W_Q, W_K, W_V on
    assert map_of(preset("default")).spans == ()
    pre = map_of(preset("block", norm="pre"))
    assert stage_nodes(pre, "x") == ["X", "LayerNorm₁"]
    assert labels(pre)[-3:] == ["Add", "FFN", "Add"]
    assert [s.label for s in map_of(preset("block", blocks=1)).spans] == ["transformer block"]


def test_several_heads_get_a_bracket_naming_the_head_in_view() -> None:
    m = map_of(preset("bank-river"), View(head=2))
    [span] = m.spans
    assert span.label == "3 heads · head 3 shown"
    assert m.columns[span.first].stage is None and m.columns[span.last].stage == "output"  # W … A·V


# --- shapes, computed here from the sizes --------------------------------------------------------


def test_shapes_of_the_default_preset() -> None:
    sc = preset("default")
    t, d, dk = len(sc.tokens), sc.d_model, sc.d_k  # 5, 3, 3
    got = shapes(map_of(sc))
    assert got["X"] == f"{t}×{d}" == "5×3"
    assert got["W_Q"] == f"{d}×{dk}"
    assert got["Q"] == got["K"] == got["V"] == f"{t}×{dk}"
    assert got["Q·Kᵀ"] == got["÷√d_k"] == got["no mask"] == got["softmax"] == f"{t}×{t}"
    assert got["A·V"] == f"{t}×{sc.d_v}"
    assert got["concat"] == f"{t}×{sc.num_heads * sc.d_v}"
    assert got["·W_O"] == f"{t}×{d}"


def test_shapes_after_a_resize_with_several_heads() -> None:
    sc = resize(preset("default"), d_model=4, num_heads=2, d_k=3, d_v=5)
    got = shapes(map_of(sc))
    assert (got["X"], got["W_Q"], got["W_V"], got["Q"], got["V"]) == ("5×4", "4×3", "4×5", "5×3", "5×5")
    assert (got["concat"], got["·W_O"]) == ("5×10", "5×4")  # T × h·d_v, then back to d_model


def test_shapes_in_cross_attention_with_a_shorter_source() -> None:
    sc = remove_token(preset("translate"), 0, source=True)
    t, s, d, dk = len(sc.tokens), len(sc.context_tokens), sc.d_model, sc.d_k
    assert (t, s) == (6, 5)
    got = shapes(map_of(sc))
    assert (got["X"], got["C"]) == (f"{t}×{d}", f"{s}×{d}")
    assert (got["Q"], got["K"], got["V"]) == (f"{t}×{dk}", f"{s}×{dk}", f"{s}×{sc.d_v}")
    assert got["Q·Kᵀ"] == got["softmax"] == f"{t}×{s}" == "6×5"


def test_shapes_of_a_block_with_its_ffn() -> None:
    sc = add_token(preset("block", d_ff=7))
    t, d = len(sc.tokens), sc.d_model
    got = shapes(map_of(sc))
    assert got["FFN"] == f"{t}×7→{t}×{d}" == "6×7→6×3"
    assert got["Add & Norm"] == f"{t}×{d}"

