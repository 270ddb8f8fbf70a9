"""GET /translate/figure.svg|.png: the translator's lines and its 2 × 8 maps as files, the head the page shows,
the PNG drawn by resvg; a bad field is a 422 naming it."""

from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient

QUERY = "text=The+bank+of+the+river+was+muddy.&direction=en-pt"


@pytest.mark.parametrize(("figure", "stem"), [("lines", "translate-lines-layer2-head1"), ("heads", "translate-heads")])
def test_each_figure_as_svg_and_png(client: TestClient, figure: str, stem: str) -> None:
    svg = client.get(f"/translate/figure.svg?{QUERY}&figure={figure}")
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    assert svg.headers["content-disposition"] == f'attachment; filename="{stem}.svg"'
    assert "A margem do rio estava enlameado." in svg.text
    png = client.get(f"/translate/figure.png?{QUERY}&figure={figure}")
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")


def test_the_lines_are_the_selected_head_s(client: TestClient) -> None:
    svg = client.get(f"/translate/figure.svg?{QUERY}&layer=1&head=5&figure=lines")
    assert svg.headers["content-disposition"] == 'attachment; filename="translate-lines-layer1-head5.svg"'
    assert "(L1 H5)" in svg.text
    assert len(re.findall(r"<line\b|<path\b", svg.text)) > 10


def test_the_page_offers_both(client: TestClient) -> None:
    page = client.get(f"/translate?{QUERY}").text
    for figure in ("lines", "heads"):
        assert f'href="/translate/figure.svg?{QUERY.replace("&", "&amp;")}&amp;figure={figure}" download' in page


@pytest.mark.parametrize(("query", "field"), [("figure=map", "figure"), ("figure=lines&layer=5&head=1", "layer"),
                                              ("figure=lines&direction=de-en", "direction")])
def test_a_bad_field_is_a_422_naming_it(client: TestClient, query: str, field: str) -> None:
    r = client.get(f"/translate/figure.svg?text=Hello.&{query}")
    assert r.status_code == 422 and json.loads(r.text)["detail"][0]["field"] == field
