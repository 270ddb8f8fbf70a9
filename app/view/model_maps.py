"""The pretrained model's attention drawn small and large: a head's map as a tiny PNG (the model view's
72 at once), one head enlarged as SVG with its tokens on both axes and a number under every cell, and a
layer's input X (T × 384) condensed to one thin cell per column.

Colours: attention weights on the page's sequential scale (static/app.css's s0 … s8, YlGnBu, linear
from 0 to 1); X on its diverging scale (d−5 … d5), symmetric about 0. PNGs are built with zlib and
struct (no imaging library): a map is a few hundred bytes, so 72 of them fit in a page as data: URIs
(the page's CSP allows img-src data:). SVG fills are presentation attributes, not styles, so the CSP holds.
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Sequence

import numpy as np
from markupsafe import Markup, escape

from app.i18n import gettext as _
from app.i18n import local_number, weight

SEQUENTIAL = ("#ffffd9", "#edf8b1", "#c7e9b4", "#7fcdbb", "#41b6c4", "#1d91c0", "#225ea8", "#253494", "#081d58")
DIVERGING = ("#7f3b08", "#b35806", "#e08214", "#fdb863", "#fee0b6", "#f7f7f7", "#d8daeb", "#b2abd2", "#73649e",
             "#542788", "#2d004b")
X_PERCENTILE = 99.0  # X's colour saturates at this percentile of |x|: a few outlier dimensions would pale the rest


def _ramp(stops: Sequence[str], n: int = 256) -> np.ndarray:
    """(n, 3) uint8: the stops' colours linearly interpolated."""
    rgb = np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] for c in stops], dtype=np.float64)  # (S, 3)
    at = np.linspace(0, len(stops) - 1, n)  # (n,)
    lo = np.floor(at).astype(int).clip(0, len(stops) - 2)
    frac = (at - lo)[:, None]
    return np.rint(rgb[lo] * (1 - frac) + rgb[lo + 1] * frac).astype(np.uint8)


WEIGHT_RAMP = _ramp(SEQUENTIAL)  # (256, 3)
SIGNED_RAMP = _ramp(DIVERGING)  # (256, 3)


def weight_colours(m: np.ndarray) -> np.ndarray:
    """(…, 3) uint8 for weights in [0, 1]."""
    return WEIGHT_RAMP[np.rint(np.clip(m, 0.0, 1.0) * 255).astype(int)]


def signed_colours(m: np.ndarray, top: float) -> np.ndarray:
    """(…, 3) uint8 for values in [−top, top], 0 in the middle (beyond ±top: the end colours)."""
    scaled = np.clip(m / top, -1.0, 1.0) if top > 0 else np.zeros_like(m)
    return SIGNED_RAMP[np.rint((scaled + 1.0) * 127.5).astype(int)]


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(rgb: np.ndarray) -> bytes:
    """A truecolour PNG of an (H, W, 3) uint8 image (PNG spec §11: IHDR, IDAT, IEND; filter 0 per row)."""
    h, w, _ = rgb.shape
    raw = np.concatenate([np.zeros((h, 1), dtype=np.uint8), rgb.reshape(h, w * 3)], axis=1).tobytes()
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + _chunk(b"IDAT", zlib.compress(raw, 9)) + _chunk(b"IEND", b""))


def indexed_png(indices: np.ndarray, palette: np.ndarray) -> bytes:
    """An indexed-colour PNG (colour type 3) of an (H, W) uint8 image whose pixels index ``palette`` (n, 3):
    a byte a pixel instead of three, a third of a truecolour map's size for the same colours."""
    h, w = indices.shape
    raw = np.concatenate([np.zeros((h, 1), dtype=np.uint8), indices.astype(np.uint8)], axis=1).tobytes()
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 3, 0, 0, 0))
            + _chunk(b"PLTE", palette.astype(np.uint8).tobytes()) + _chunk(b"IDAT", zlib.compress(raw, 9))
            + _chunk(b"IEND", b""))


def data_uri(image: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(image).decode("ascii")


def thumbnail(weights: np.ndarray, levels: int = 256) -> str:
    """A head's (T, T) weights as a PNG data URI, one pixel per query–key pair (the page scales it up), each
    pixel an index into the weights' colour ramp: with 256 levels the colours of weight_colours; with fewer,
    each weight takes the middle colour of its 1/levels band (270 maps at 64 levels weigh a third less)."""
    w = np.clip(weights, 0.0, 1.0)
    if levels < 256:
        band = np.minimum(np.floor(w * levels), levels - 1)  # (T, T) 0 … levels − 1
        w = (band + 0.5) / levels
    steps = np.rint(w * 255).astype(np.uint8)  # (T, T) steps of the ramp
    used, pixels = np.unique(steps, return_inverse=True)  # a palette of only the colours the map uses
    return data_uri(indexed_png(pixels.reshape(steps.shape), WEIGHT_RAMP[used]))


# Geometry of the enlarged head, in viewBox units.
CELL = 22
CELLS_WITH_NUMBERS = 24  # up to 24 tokens a cell prints its weight and names its pair on hover
LABEL_CHARS = 12


def _short(token: str) -> str:
    return token if len(token) <= LABEL_CHARS else token[: LABEL_CHARS - 1] + "…"


def _label_width(tokens: Sequence[str]) -> int:
    return 8 + 7 * max((len(_short(t)) for t in tokens), default=1)


def head_svg(weights: np.ndarray, tokens: Sequence[str], title: str) -> Markup:
    """One head's (T, T) weights, enlarged: query tokens down the left, key tokens across the top
    (numbered from 1), each cell coloured by its weight; up to CELLS_WITH_NUMBERS tokens each cell also
    prints its weight (2 decimals) and its title names its pair."""
    t = weights.shape[0]
    left = _label_width(tokens) + 22  # the labels and their numbers
    top = left
    size = t * CELL
    colours = weight_colours(weights)  # (T, T, 3)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {left + size + 2} {top + size + 2}" '
             f'class="head-svg" role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>']
    for i, tok in enumerate(tokens):
        y = top + i * CELL + CELL * 0.68
        parts.append(f'<text class="row-lab" x="{left - 4}" y="{y:.1f}" text-anchor="end">'
                     f'{i + 1} {escape(_short(tok))}</text>')
        x = left + i * CELL + CELL * 0.68
        parts.append(f'<text class="col-lab" transform="translate({x:.1f} {top - 4}) rotate(-90)">'
                     f'{i + 1} {escape(_short(tok))}</text>')
    if t > CELLS_WITH_NUMBERS:  # too small to read a number: one image, the numbers in the table below it
        parts.append(f'<image href="{data_uri(png(colours))}" x="{left}" y="{top}" width="{size}" height="{size}" '
                     'preserveAspectRatio="none"/>')
    else:
        flat = weights.tolist()
        pair = _("query {i} {query} → key {j} {key}")
        for i in range(t):
            for j in range(t):
                r, g, b = colours[i, j]
                w = flat[i][j]
                ink = "dark" if w >= 0.45 else "light"
                parts.append(
                    f'<g><title>{escape(pair.format(i=i + 1, query=tokens[i], j=j + 1, key=tokens[j]))}'
                    f': {weight(w)}</title>'
                    f'<rect x="{left + j * CELL}" y="{top + i * CELL}" width="{CELL}" height="{CELL}" '
                    f'fill="#{r:02x}{g:02x}{b:02x}"/>'
                    f'<text class="num {ink}" x="{left + j * CELL + CELL / 2:.0f}" '
                    f'y="{top + i * CELL + CELL * 0.65:.1f}" text-anchor="middle">{_two(w)}</text></g>')
    parts.append("</svg>")
    return Markup("".join(parts))


def _two(w: float) -> str:
    """A weight in a 22-unit cell: ".41", "1.0"."""
    text = f"{w:.2f}"
    return local_number("1.0" if text == "1.00" else text[1:])


def condensed_svg(x: np.ndarray, tokens: Sequence[str], title: str) -> tuple[Markup, float]:
    """X (T, d_model) as one thin cell per column and one row per token, no numbers, token labels on the
    left; the colour saturates at the X_PERCENTILE-th percentile of |x|, returned for the legend."""
    t, d = x.shape
    top = float(np.percentile(np.abs(x), X_PERCENTILE)) or 1.0
    image = data_uri(png(signed_colours(x, top)))
    row, col = 18, 2  # viewBox units per row and per column
    left = round(_label_width(tokens) * 1.3) + 10  # labels at 13 units
    width, height = left + d * col, 16 + t * row
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" class="x-svg" role="img" '
             f'aria-label="{escape(title)}"><title>{escape(title)}</title>']
    for i, tok in enumerate(tokens):
        parts.append(f'<text class="row-lab" x="{left - 4}" y="{16 + i * row + 13.5}" text-anchor="end">'
                     f'{i + 1} {escape(_short(tok))}</text>')
    for j in (0, 95, 191, 287, d - 1):  # a few column numbers, counted from 1
        parts.append(f'<text class="col-lab" x="{left + j * col + 1}" y="11" text-anchor="middle">{j + 1}</text>')
    parts.append(f'<image href="{image}" x="{left}" y="16" width="{d * col}" height="{t * row}" '
                 'preserveAspectRatio="none"/></svg>')
    return Markup("".join(parts)), top
