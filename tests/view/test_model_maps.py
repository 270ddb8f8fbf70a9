"""The model page's drawings: PNGs that decode back to their colours, the enlarged head's labels and cells,
and X condensed."""

from __future__ import annotations

import base64
import re
import struct
import zlib

import numpy as np

from app.view.model_maps import (
    CELLS_WITH_NUMBERS,
    SEQUENTIAL,
    condensed_svg,
    head_svg,
    png,
    thumbnail,
    weight_colours,
)


def decode_png(data: bytes) -> np.ndarray:
    """An 8-bit truecolour or indexed-colour PNG with filter 0 on every row, decoded here by the spec (§11, §9):
    an indexed pixel is looked up in the PLTE chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, size, kind_of_colour, palette = 8, b"", None, None, None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        assert struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0] == zlib.crc32(kind + body)
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
            assert body[8] == 8 and body[9] in (2, 3)
            kind_of_colour = body[9]
        elif kind == b"PLTE":
            palette = np.frombuffer(body, dtype=np.uint8).reshape(-1, 3)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    w, h = size
    per_pixel = 3 if kind_of_colour == 2 else 1
    rows = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, 1 + per_pixel * w)
    assert (rows[:, 0] == 0).all()
    if kind_of_colour == 3:
        assert palette is not None and rows[:, 1:].max() < len(palette)
        return palette[rows[:, 1:]]
    return rows[:, 1:].reshape(h, w, 3)


def test_a_png_decodes_to_its_pixels() -> None:
    rgb = np.random.default_rng(3).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    np.testing.assert_array_equal(decode_png(png(rgb)), rgb)


def test_weights_run_from_the_scales_first_colour_to_its_last() -> None:
    ends = weight_colours(np.array([0.0, 1.0]))
    assert [f"#{r:02x}{g:02x}{b:02x}" for r, g, b in ends.tolist()] == [SEQUENTIAL[0], SEQUENTIAL[-1]]
    weights = np.array([[1.0, 0.0], [0.25, 0.75]])
    uri = thumbnail(weights)
    pixels = decode_png(base64.b64decode(uri.removeprefix("data:image/png;base64,")))
    np.testing.assert_array_equal(pixels, weight_colours(weights))


def test_a_thumbnail_of_fewer_levels_takes_the_middle_colour_of_each_band() -> None:
    """64 levels: a weight in [k/64, (k + 1)/64) is drawn in the colour of (k + ½)/64; 1.0 in the last band."""
    weights = np.array([[0.0, 0.004], [0.5, 1.0]])
    pixels = decode_png(base64.b64decode(thumbnail(weights, levels=64).removeprefix("data:image/png;base64,")))
    expected = weight_colours(np.array([[0.5, 0.5], [32.5, 63.5]]) / 64)
    np.testing.assert_array_equal(pixels, expected)


def test_the_enlarged_head_names_its_tokens_and_prints_its_weights() -> None:
    tokens = ("[CLS]", "it", "<b>", "[SEP]")
    w = np.full((4, 4), 0.25)
    svg = str(head_svg(w, tokens, "L1 H1"))
    assert svg.count('class="row-lab"') == 4 and svg.count('class="col-lab"') == 4
    assert "3 &lt;b&gt;" in svg and "<b>" not in svg
    assert svg.count("<rect") == 16 and svg.count(">.25</text>") == 16
    assert "query 2 it → key 3 &lt;b&gt;: 0.250" in svg


def test_a_long_sentences_head_is_one_image() -> None:
    t = CELLS_WITH_NUMBERS + 1
    svg = str(head_svg(np.full((t, t), 1.0 / t), tuple(f"w{i}" for i in range(t)), "L1 H1"))
    assert "<rect" not in svg and svg.count("<image") == 1 and svg.count('class="row-lab"') == t


def test_x_is_condensed_with_its_scale_at_the_99th_percentile() -> None:
    x = np.random.default_rng(0).normal(size=(3, 384))
    svg, top = condensed_svg(x, ("a", "b", "c"), "X")
    assert top == np.percentile(np.abs(x), 99)
    assert len(re.findall(r"<image ", str(svg))) == 1 and '>384</text>' in str(svg)
