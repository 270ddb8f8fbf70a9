"""A figure's SVG document: its frame (size, white ground, fonts, a caption), the page's colours written out, and
``inline``, which turns a drawer's classes into presentation attributes by a small table of rules, so that a
drawing made for the page (its colours in static/*.css) is the same drawing in a file.

A rule is a selector and what it sets: the selector a tuple of class sets, the last one the element's own,
the ones before it its ancestors' (in order, as CSS's descendant combinator); a class written "!name" must be
absent. ``REMOVE`` as the value of "display" drops the element: what the page hides until hovered.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from markupsafe import escape

from app.view.map_drawing import text_width
from app.view.model_maps import DIVERGING, SEQUENTIAL

SVG_NS = "http://www.w3.org/2000/svg"
FONT_FAMILY = "DejaVu Sans, Arial, Helvetica, sans-serif"  # DejaVu Sans is vendored in static/fonts for the PNG
# static/app.css's --ink, --muted, --accent and the panel's white.
INK, MUTED, ACCENT, WHITE = "#1b1b1f", "#5a5a66", "#253494", "#ffffff"
MASKED_INK = "#444444"  # a −∞ cell's text (static/app.css td.mk)
MASKED_STRIPES = ("#ececec", "#d6d6d6")  # its hatching
# The heatmap buckets whose number is printed in white (static/app.css): the darkest of each scale.
LIGHT_TEXT = frozenset({"d-5", "d-4", "d3", "d4", "d5", "s6", "s7", "s8"})
REMOVE = "none"

ET.register_namespace("", SVG_NS)


def bucket_fill(bucket: str) -> str:
    """A heatmap class's colour as static/app.css paints it: s0 … s8 (weights), d-5 … d5 (signed)."""
    if bucket.startswith("s"):
        return SEQUENTIAL[int(bucket[1:])]
    return DIVERGING[int(bucket[1:]) + len(DIVERGING) // 2]


def bucket_ink(bucket: str) -> str:
    """The colour of the number printed on that bucket."""
    return WHITE if bucket in LIGHT_TEXT else INK


Selector = tuple[frozenset[str], ...]


@dataclass(frozen=True)
class Rule:
    selector: Selector
    attrs: Mapping[str, str]


def rule(selector: str, **attrs: str) -> Rule:
    """``rule("qs tok.!focus e", opacity="0.12")``: spaces part ancestors, dots join one element's classes;
    attribute names with "_" for "-"."""
    parts = tuple(frozenset(p.split(".")) for p in selector.split())
    return Rule(parts, {k.replace("_", "-"): v for k, v in attrs.items()})


def _has(classes: set[str], wanted: frozenset[str]) -> bool:
    return all((c[1:] not in classes) if c.startswith("!") else (c in classes) for c in wanted)


def _matches(selector: Selector, own: set[str], ancestors: Sequence[set[str]]) -> bool:
    if not _has(own, selector[-1]):
        return False
    i = 0
    for classes in ancestors:  # outermost first: each earlier part found in order
        if i < len(selector) - 1 and _has(classes, selector[i]):
            i += 1
    return i == len(selector) - 1


# What a file has no use for: the page's hooks for scripts, htmx, keyboard and CSS.
_DROPPED = ("class", "tabindex", "role", "href", "aria-current", "aria-label", "aria-labelledby", "aria-describedby")


def _tag(el: ET.Element) -> str:
    return el.tag.rpartition("}")[2]


# Characters XML does not allow (a token may hold U+FFFE): written as U+FFFD, so that every file parses.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(s: str) -> str:
    return _NOT_XML.sub("\ufffd", s)


def inline(svg: str, rules: Sequence[Rule]) -> ET.Element:
    """The drawer's ``svg`` with every rule applied in order (a later rule wins, as a later CSS rule of the
    same weight does), its links made groups and its page-only attributes dropped."""
    root = ET.fromstring(xml_text(svg))

    def visit(el: ET.Element, ancestors: list[set[str]]) -> None:
        own = set(el.get("class", "").split())
        for child in list(el):
            child_own = set(child.get("class", "").split())
            attrs: dict[str, str] = {}
            for r in rules:
                if _matches(r.selector, child_own, [*ancestors, own]):
                    attrs.update(r.attrs)
            if attrs.get("display") == REMOVE:
                el.remove(child)
                continue
            for k, v in attrs.items():
                child.set(k, v)
            visit(child, [*ancestors, own])
        if _tag(el) == "a":
            el.tag = f"{{{SVG_NS}}}g"
        for name in [k for k in el.attrib if k in _DROPPED or k.startswith(("hx-", "data-"))]:
            del el.attrib[name]

    visit(root, [])
    return root


def nested(root: ET.Element, x: float, y: float, scale: float = 1.0) -> tuple[str, float, float]:
    """A drawing placed at (x, y) inside a figure, as a nested <svg>: its markup, width and height."""
    x0, y0, w, h = (float(v) for v in root.get("viewBox", "0 0 0 0").split())
    width, height = w * scale, h * scale
    root.attrib.pop("xmlns", None)
    for name in ("width", "height", "x", "y"):
        root.attrib.pop(name, None)
    root.set("x", num(x))
    root.set("y", num(y))
    root.set("width", num(width))
    root.set("height", num(height))
    markup = ET.tostring(root, encoding="unicode").replace(f' xmlns="{SVG_NS}"', "", 1)
    return markup, width, height


def num(v: float) -> str:
    """A coordinate: two decimals at most."""
    return f"{v:.2f}".rstrip("0").rstrip(".")


def text(x: float, y: float, words: str, *, size: float = 12, fill: str = INK, anchor: str = "start",
         weight: str = "", extra: str = "") -> str:
    """One line of text, escaped."""
    bold = f' font-weight="{weight}"' if weight else ""
    end = f' text-anchor="{anchor}"' if anchor != "start" else ""
    return (f'<text x="{num(x)}" y="{num(y)}" font-size="{num(size)}" fill="{fill}"{end}{bold}{extra}>'
            f"{escape(words)}</text>")


CAPTION_PX, NOTE_PX = 15.0, 12.0
MARGIN = 12.0


def caption(title: str, detail: str = "") -> tuple[str, float]:
    """The figure's caption line at the top: its title in bold, ``detail`` (a shape) after it in grey; and the
    height it takes."""
    after = f'<tspan dx="8" font-weight="normal" fill="{MUTED}" font-size="{NOTE_PX:g}">{escape(detail)}</tspan>' \
        if detail else ""
    line = (f'<text x="{num(MARGIN)}" y="{num(MARGIN + CAPTION_PX)}" font-size="{CAPTION_PX:g}" fill="{INK}" '
            f'font-weight="bold">{escape(title)}{after}</text>')
    return line, MARGIN + CAPTION_PX + 10


def caption_width(title: str, detail: str = "") -> float:
    """How wide the caption line is, margins included: its title in bold (about 12 % wider), then its detail."""
    after = 8 + text_width(detail, NOTE_PX) if detail else 0.0
    return 2 * MARGIN + 1.12 * text_width(title, CAPTION_PX) + after


def document(width: float, height: float, body: Sequence[str], title: str, desc: str = "") -> str:
    """The standalone SVG: an XML declaration, the root with its size and viewBox, a white ground, the body."""
    w, h = num(width), num(height)
    described = f"<desc>{escape(desc)}</desc>" if desc else ""
    return xml_text(f'<?xml version="1.0" encoding="UTF-8"?>\n'
                    f'<svg xmlns="{SVG_NS}" version="1.1" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
                    f'font-family="{FONT_FAMILY}">'
                    f"<title>{escape(title)}</title>{described}"
                    f'<rect width="{w}" height="{h}" fill="{WHITE}"/>{"".join(body)}</svg>\n')
