"""The pipeline map: its nodes follow the configuration, its shapes are the run's, it marks the
stage in view, and each drawing has exactly one link per stage, escaped, well-formed SVG."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest

from app.lesson.stages import visible_stages
from app.maths.positions import POSITIONAL_ENCODINGS
from app.state.scenario import Scenario, View, add_token, from_preset, remove_token, resize, with_position_table
from app.view.map_drawing import draw_map
from app.view.pipeline_map import PipelineMap, compact, pipeline_map

SVG = "{http://www.w3.org/2000/svg}"
POST = "/stages"


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


def svgs(m: PipelineMap, current: str = "x", hrefs: dict[str, str] | None = None) -> dict[str, ET.Element]:
    """Both drawings, parsed: an ill-formed one fails here."""
    drawn = draw_map(m, current=current, hrefs=hrefs or {}, post=POST)
    return {"wide": ET.fromstring(str(drawn.wide)), "compact": ET.fromstring(str(drawn.compact))}


def links(svg: ET.Element) -> list[ET.Element]:
    return list(svg.iter(f"{SVG}a"))


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


# --- the drawing ---------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["default", "block", "translate", "bank-river", "sparse"])
def test_every_stage_has_exactly_one_link_in_each_drawing(key: str) -> None:
    sc = preset(key)
    stages = visible_stages(sc.blocks)
    for layout, svg in svgs(map_of(sc)).items():
        ids = [a.get("id") for a in links(svg)]
        assert ids == [f"map-{layout}-{s.key}" for s in stages], layout  # once each, in stage order


def test_links_step_with_htmx_and_fall_back_to_their_permalink() -> None:
    hrefs = {s.key: f"/?stage={s.key}&decimals=3" for s in visible_stages(0)}
    for svg in svgs(map_of(preset("default")), hrefs=hrefs).values():
        for a in links(svg):
            key = a.get("id").rsplit("-", 1)[1]
            assert a.get("href") == hrefs[key]
            assert a.get("hx-post") == POST
            assert json.loads(a.get("hx-vals")) == {"goto": key}
            assert (a.get("hx-target"), a.get("hx-swap")) == ("#stages", "outerHTML")


def test_without_permalinks_the_links_lead_to_the_step_buttons() -> None:
    for svg in svgs(map_of(preset("default"))).values():
        assert {a.get("href") for a in links(svg)} == {"#map-steps"}


def test_the_current_stage_is_marked_and_named() -> None:
    for svg in svgs(map_of(preset("bank-river")), current="softmax").values():
        current = [a for a in links(svg) if a.get("aria-current") == "step"]
        assert [a.get("aria-label") for a in current] == ["Stage 5: Softmax, 7×7"]
        assert "current" in current[0].get("class").split()
        assert "in view: Stage 5: Softmax, 7×7" in svg.find(f"{SVG}title").text
    for svg in svgs(map_of(preset("bank-river")), current="").values():  # every stage shown: none is current
        assert not [a for a in links(svg) if a.get("aria-current")]


def test_accessible_names_give_each_stage_its_number_name_and_shape() -> None:
    names = [a.get("aria-label") for a in links(svgs(map_of(preset("block")))["wide"])]
    assert names == [
        "Stage 0: X, 5×3", "Stage 1: Q, K, V, 5×3 each", "Stage 2: Scores, 5×5", "Stage 3: Scaled, 5×5",
        "Stage 4: Mask, no mask, 5×5", "Stage 5: Softmax, 5×5", "Stage 6: Output, 5×3", "Stage 7: Heads · Wᴼ, 5×3",
        "Stage 8: Add & Norm, 5×3", "Stage 9: FFN, 5×12→5×3", "Stage 10: Add & Norm, 5×3",
    ]


def test_weights_are_plain_labels_and_the_compact_map_leaves_them_out() -> None:
    m = map_of(preset("default"))
    drawn = svgs(m)
    [plain] = [g for g in drawn["wide"].iter(f"{SVG}g") if g.get("class") == "plain"]
    assert "".join(plain.itertext()).startswith("WQ3×3")
    assert not [g for g in drawn["compact"].iter(f"{SVG}g") if g.get("class") == "plain"]
    small = compact(m)
    assert all(len(c.nodes) == 1 and c.stage for c in small.columns)
    assert small.columns[1].nodes[0].label == "Q, K, V"


def test_the_drawing_escapes_and_holds_no_token_text() -> None:
    sc = preset("default", tokens=("<b>bank</b>", "x&y", '"q"', "a", "b"))
    hrefs = {"x": '/?token-0=<b>&stage="x"'}
    drawn = draw_map(map_of(sc), current="x", hrefs=hrefs, post=POST)
    for svg in (str(drawn.wide), str(drawn.compact)):
        assert "bank" not in svg and "x&y" not in svg
        assert 'href="/?token-0=&lt;b&gt;&amp;stage=&#34;x&#34;"' in svg
        ET.fromstring(svg)  # still well-formed


def test_a_long_pipeline_is_drawn_wider_and_switches_sooner() -> None:
    assert draw_map(map_of(preset("default")), current="x", hrefs={}, post=POST).fit == "fit-s"
    long = preset("block", positional_encoding="rope", norm="pre", mask_mode="causal")
    assert draw_map(map_of(long), current="x", hrefs={}, post=POST).fit in ("fit-m", "fit-l")


def test_the_wide_map_stays_low_and_the_compact_one_narrow() -> None:
    for key in ("default", "block", "translate", "bank-river"):
        svg = svgs(map_of(preset(key)))
        assert float(svg["wide"].get("height")) <= 140, key  # px on a laptop, before any scaling down
        assert float(svg["compact"].get("width")) <= 360, key
