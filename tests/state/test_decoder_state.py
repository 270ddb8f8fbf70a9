"""The "Next word" page's state: read from its query string once, every bad field a FormError naming it, and
written back into a permalink that reads back to the same state."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest

from app.maths.decoder_files import load_decoder_files
from app.state.decoder_state import DecoderPage, decoder_query, read_decoder_page
from app.state.form import FormError


@pytest.fixture(scope="module")
def model():
    return load_decoder_files()


def read(model, query: str) -> DecoderPage:
    return read_decoder_page(model, parse_qsl(query, keep_blank_values=True)).page


def test_a_permalink_reads_back_to_the_same_state(model) -> None:
    page = read(model, "text=The+cat&layer=17&head=1&temperature=0.7&top_k=40&top_p=0.9&matrix=softmax&row=2&col=1"
                       "&lens=all&off=19.7&off=2.3&off_layer=5")
    assert (page.layer, page.head, page.temperature, page.top_k, page.top_p) == (16, 0, 0.7, 40, 0.9)
    assert page.cell is not None and (page.cell.matrix, page.cell.row, page.cell.col) == ("softmax", 1, 0)
    assert page.lens_all and page.off == {(18, 6), (1, 2)} and page.off_layers == {4}
    assert len(page.heads_off) == 2 + 9 and (4, 8) in page.heads_off
    assert read(model, decoder_query(page)) == page


@pytest.mark.parametrize(("query", "field"), [
    ("text=", "text"),
    ("text=a%00b", "text"),
    ("text=hi&layer=31&head=1", "layer"),
    ("text=hi&layer=1&head=10", "head"),
    ("text=hi&temperature=0", "temperature"),
    ("text=hi&temperature=nan", "temperature"),
    ("text=hi&temperature=6", "temperature"),
    ("text=hi&top_k=0", "top_k"),
    ("text=hi&top_p=1.5", "top_p"),
    ("text=hi&matrix=weights&row=1&col=1", "matrix"),
    ("text=hi&matrix=softmax&row=2&col=1", "row"),
    ("text=hi&off=31.1", "off"),
    ("text=hi&off=5", "off"),
    ("text=hi&off_layer=0", "off_layer"),
])
def test_a_bad_field_is_named(model, query: str, field: str) -> None:
    with pytest.raises(FormError) as e:
        read(model, query)
    assert e.value.field == field


def test_a_decimal_comma_is_read_as_a_point(model) -> None:
    assert read(model, "text=hi&temperature=0,5").temperature == 0.5
    assert read(model, "text=hi&top_p=0,25").top_p == 0.25
