"""GET and POST /figure.svg|.png, and the real models' /model/figure.* and /decoder/figure.*: the files, their names,
a bad field's 422, and a PNG read back pixel by pixel against the page's colours."""

from __future__ import annotations

import struct
import xml.etree.ElementTree as ET
import zlib
from urllib.parse import urlencode

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.serving.real_models import language_model
from app.state.page import preset_page
from app.state.permalink import state_query
from app.view.decoder_view import decoder_catalogue_view
from app.view.figure.document import bucket_fill
from app.view.heatmap import bucket_classes
from app.web.figures import MAX_PNG_PIXELS, png_of, png_zoom

NS = "{http://www.w3.org/2000/svg}"
SOFTMAX = "/figure.{}?preset=bank-river&stage=softmax&figure=softmax"


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app())


def png_pixels(data: bytes) -> np.ndarray:
    """An 8-bit RGB or RGBA PNG's pixels, (H, W, channels): its IDAT inflated and each row unfiltered (PNG §9)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat, header = 8, b"", b""
    while at < len(data):
        (length,), kind = struct.unpack(">I", data[at:at + 4]), data[at + 4:at + 8]
        body = data[at + 8:at + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        at += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6)
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    out = np.zeros((height, stride), dtype=np.int32)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(height):
        kind, row = raw[y * (stride + 1)], np.frombuffer(raw, np.uint8, stride, y * (stride + 1) + 1).astype(np.int32)
        cur = row.copy()
        if kind == 2:
            cur = (row + prev) % 256
        elif kind in (1, 3, 4):
            for x in range(stride):
                a = cur[x - channels] if x >= channels else 0
                b, c = prev[x], (prev[x - channels] if x >= channels else 0)
                if kind == 1:
                    pred = a
                elif kind == 3:
                    pred = (a + b) // 2
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[x] = (row[x] + pred) % 256
        out[y], prev = cur, cur
    return out.reshape(height, width, channels)


def test_svg_of_a_heatmap(client: TestClient) -> None:
    r = client.get(SOFTMAX.format("svg"))
    assert r.status_code == 200
    assert r.headers["content-type"] == "image/svg+xml"
    assert r.headers["content-disposition"] == 'attachment; filename="attention-softmax-head1.svg"'
    assert r.headers["x-content-type-options"] == "nosniff"
    root = ET.fromstring(r.content)
    assert root.get("viewBox").startswith("0 0 ")


def test_png_is_twice_the_svg_and_its_cells_are_the_pages_colours(client: TestClient) -> None:
    svg = ET.fromstring(client.get(SOFTMAX.format("svg")).content)
    r = client.get(SOFTMAX.format("png"))
    assert r.status_code == 200
    assert r.headers["content-type"] == "image/png"
    assert r.headers["content-disposition"] == 'attachment; filename="attention-softmax-head1.png"'
    pixels = png_pixels(r.content)
    _, _, w, h = (float(v) for v in svg.get("viewBox").split())
    assert abs(pixels.shape[1] - 2 * w) <= 1 and abs(pixels.shape[0] - 2 * h) <= 1
    assert pixels.shape[2] == 3 or (pixels[..., 3] == 255).all()  # a white ground, nothing transparent
    assert tuple(pixels[1, 1, :3]) == (255, 255, 255)
    sc, view = preset_page("bank-river")
    weights = sc.compute()[0].heads[0].softmax  # (T, T)
    buckets, _ = bucket_classes(weights, "weights", view.decimals)
    cells = [c for c in svg.iter(f"{NS}rect") if c.get("stroke") == "#ffffff"]
    assert len(cells) == weights.size
    for k in (0, 2, weights.shape[1] * 2, weights.size - 1):  # a few cells, dark and light
        i, j = divmod(k, weights.shape[1])
        x, y = float(cells[k].get("x")) + 4, float(cells[k].get("y")) + 4  # inside, clear of its number
        expected = bucket_fill(str(buckets[i, j]))
        assert "#{:02x}{:02x}{:02x}".format(*tuple(pixels[round(2 * y), round(2 * x), :3])) == expected


def test_lines_map_and_the_learn_chart(client: TestClient) -> None:
    for query, name in (("preset=bank-river&stage=softmax&figure=lines", "attention-softmax-lines-head1.svg"),
                        ("preset=bank-river&stage=scores&figure=map", "attention-map-scores.svg"),
                        ("preset=learn-bank&figure=loss", "attention-loss.svg")):
        r = client.get(f"/figure.svg?{query}")
        assert r.status_code == 200, r.text
        assert r.headers["content-disposition"] == f'attachment; filename="{name}"'
        ET.fromstring(r.content)


@pytest.mark.parametrize(("query", "field"), [
    ("preset=bank-river&stage=nowhere&figure=softmax", "stage"),
    ("preset=bank-river&stage=softmax&head=5&figure=softmax", "head"),
    ("preset=bank-river&stage=softmax&figure=nothing", "figure"),
    ("preset=bank-river&stage=softmax", "figure"),
])
def test_a_bad_field_is_a_422_naming_it(client: TestClient, query: str, field: str) -> None:
    for ext in ("svg", "png"):
        r = client.get(f"/figure.{ext}?{query}")
        assert r.status_code == 422
        detail = r.json()["detail"][0]
        assert (detail["field"], detail["loc"]) == (field, ["query", field])


def test_the_pages_form_posted_with_the_figure_in_the_action(client: TestClient) -> None:
    sc, view = preset_page("bank-river")
    form = dict(state_query(sc, view))
    form["head"] = "2"
    r = client.post("/figure.svg?figure=scaled&stage=softmax", content=urlencode(form),
                    headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 200, r.text
    assert r.headers["content-disposition"] == 'attachment; filename="attention-softmax-scaled-head3.svg"'
    r = client.post("/figure.png?figure=nothing", content=urlencode(form),
                    headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "figure"]


def test_a_character_xml_refuses_is_drawn_as_a_replacement_and_a_huge_png_is_drawn_smaller(
        client: TestClient) -> None:
    """U+FFFE in a token: every file still parses (it is drawn as U+FFFD). A figure whose PNG would pass
    MAX_PNG_PIXELS at 2× is drawn at the density that fits."""
    query = {**dict(state_query(*preset_page("default"))), "token-0": "a\ufffeb", "stage": "softmax"}
    for figure in ("softmax", "lines"):
        r = client.get("/figure.svg", params={**query, "figure": figure})
        assert r.status_code == 200, r.text
        words = {"".join(t.itertext()) for t in ET.fromstring(r.content).iter(f"{NS}text")}
        assert any("a\ufffdb" in w for w in words), words
        assert client.get("/figure.png", params={**query, "figure": figure}).status_code == 200
    huge = '<svg xmlns="http://www.w3.org/2000/svg" width="8000" height="1600" viewBox="0 0 8000 1600"/>'
    assert png_zoom(huge) < 2 and abs(png_zoom(huge) ** 2 * 8000 * 1600 - MAX_PNG_PIXELS) < 1
    png = png_of(huge)
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width * height <= 1.01 * MAX_PNG_PIXELS


def test_the_real_models_head_maps(client: TestClient) -> None:
    r = client.get("/model/figure.svg?text=The+cat+sat.&layer=2&head=3&figure=head")
    assert r.status_code == 200, r.text
    assert r.headers["content-disposition"] == 'attachment; filename="model-layer2-head3.svg"'
    words = {"".join(t.itertext()) for t in ET.fromstring(r.content).iter(f"{NS}text")}
    assert {"1 [CLS]", "2 the", "3 cat"} <= words
    r = client.get("/model/figure.png?text=The+cat+sat.&figure=heads")
    assert r.status_code == 200
    assert r.content[:8] == b"\x89PNG\r\n\x1a\n"
    r = client.get("/model/figure.svg?text=The+cat+sat.&figure=candidates")
    assert r.status_code == 422
    assert r.json()["detail"][0]["field"] == "figure"


def test_the_language_models_candidates(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(language_model(), "ready", lambda: False)  # the model still being read at start
    loading = client.get("/decoder/figure.svg?text=The+capital+of+France+is&figure=candidates")
    assert loading.status_code == 503 and loading.headers["retry-after"] == "5"
    monkeypatch.undo()
    decoder_catalogue_view()  # the model read and its heads measured, as the app's start does
    r = client.get("/decoder/figure.svg?text=The+capital+of+France+is&figure=candidates")
    assert r.status_code == 200, r.text
    assert r.headers["content-disposition"] == 'attachment; filename="decoder-candidates.svg"'
    words = ["".join(t.itertext()) for t in ET.fromstring(r.content).iter(f"{NS}text")]
    assert any(w.endswith("%") for w in words) and "␣Paris" in words
