"""The "Your sentence" page's state: read once from the query string, counted from 1, and back into a link."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest

from app.maths.model_files import load_model_files
from app.state.form import FormError
from app.state.model_state import HEADS, LAYERS, Cell, ModelPage, model_query, read_model_page


def test_the_models_sizes_are_the_files() -> None:
    config = load_model_files().config
    assert (LAYERS, HEADS) == (config.layers, config.heads)


def test_defaults_and_a_round_trip_through_the_permalink() -> None:
    model = load_model_files()
    read = read_model_page(model, [])
    assert read.page == ModelPage() and read.first.tokens[10] == "it"
    page = ModelPage(text="Hello there.", text2="Bye now.", layer=2, head=11, query=1,
                     off=frozenset({(0, 0), (5, 11)}), off_layers=frozenset({3}), cell=Cell("output", 2, 31),
                     x_row=0)
    query = model_query(page)
    assert "layer=3&head=12" in query and "off=1.1&off=6.12" in query and "off_layer=4" in query
    assert read_model_page(model, parse_qsl(query)).page == page


def test_a_layer_ticked_whole_switches_off_its_heads() -> None:
    page = ModelPage(off=frozenset({(0, 1)}), off_layers=frozenset({2}))
    assert page.heads_off == frozenset({(0, 1)} | {(2, h) for h in range(HEADS)})


@pytest.mark.parametrize(("pairs", "field"), [
    ([("text", "")], "text"), ([("text2", "a\x00b")], "text2"), ([("layer", "1")], "head"),
    ([("layer", "1"), ("head", "+1")], "head"), ([("off", "1.x")], "off"), ([("q", "0")], "q"),
])
def test_a_bad_field_is_named(pairs: list[tuple[str, str]], field: str) -> None:
    with pytest.raises(FormError) as e:
        read_model_page(load_model_files(), pairs)
    assert e.value.field == field


def test_a_new_sentence_drops_the_positions_that_counted_the_old_one() -> None:
    model = load_model_files()
    old = [("q", "11"), ("matrix", "softmax"), ("row", "11"), ("col", "14"), ("x_row", "16")]
    shown = ("shown_text", "A much longer sentence than that.")
    page = read_model_page(model, [("text", "Short one."), shown, *old]).page
    assert (page.query, page.cell, page.x_row) == (None, None, None)
    with pytest.raises(FormError) as e:  # the same sentence: a position out of range is the student's to fix
        read_model_page(model, [("text", "Short one."), ("shown_text", "Short one."), *old])
    assert e.value.field == "q"
