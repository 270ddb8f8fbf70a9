"""The map's SVG drawing: one link per stage in each drawing, htmx with a permalink fallback, the
current stage marked, accessible names, escaping, and the sizes of both drawings."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from app.lesson.stages import visible_stages
from app.view.map_drawing import _label, draw_map, label_width, split_label
from app.view.pipeline_map import PipelineMap, compact
from tests.view.test_pipeline_map import map_of, preset

SVG = "{http://www.w3.org/2000/svg}"
POST = "/stages"



def svgs(m: PipelineMap, current: str = "x", hrefs: dict[str, str] | None = None) -> dict[str, ET.Element]:
    """Both drawings, parsed: an ill-formed one fails here."""
    drawn = draw_map(m, current=current, hrefs=hrefs or {}, post=POST)
    return {"wide": ET.fromstring(str(drawn.wide)), "compact": ET.fromstring(str(drawn.compact))}


def links(svg: ET.Element) -> list[ET.Element]:
    return list(svg.iter(f"{SVG}a"))



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


def test_a_subscript_is_only_the_letters_after_its_underscore() -> None:
    """÷√d_k·τ: k is lowered, τ stays on the line (and is counted at full size)."""
    assert split_label("÷√d_k·τ") == ("÷√d", "k", "·τ")
    assert split_label("W_Q") == ("W", "Q", "")
    assert split_label("softmax") == ("softmax", "", "")
    text, lowered = _label("÷√d_k·τ")
    assert text == '÷√d<tspan class="sub" dy="3">k</tspan><tspan dy="-3">·τ</tspan>' and lowered == 0
    assert _label("W_Q") == ('W<tspan class="sub" dy="3">Q</tspan>', 3)
    assert label_width("÷√d_k·τ") > label_width("÷√d_k")
