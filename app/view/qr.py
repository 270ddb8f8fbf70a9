"""A link as a QR code for paper (segno): an inline SVG with a title and no style attribute, printed larger when
it has more modules. The toy page's handout (app.web.handout) and the translator's (app.web.translate_pages) print
one under their title."""

from __future__ import annotations

import segno
from markupsafe import Markup

from app.i18n import gettext as _

# A QR code up to each of these versions is printed at its own size (handout.css): modules of about 0.4 mm at least.
QR_SIZES = (10, 20, 30, 40)


def printed_qr(url: str) -> Markup | None:
    """The link as a QR code, None when the link is longer than a QR code holds (about 2,900 characters)."""
    try:
        qr = segno.make(url, error="m", micro=False)  # the highest correction level that fits, at least M
    except segno.DataOverflowError:
        try:
            qr = segno.make(url, error="l", micro=False)
        except segno.DataOverflowError:
            return None
    size = next(f"qr-{v}" for v in QR_SIZES if qr.version <= v)
    svg = qr.svg_inline(scale=4, border=4, dark="#000", light="#fff", title=_("QR code of this state's link"),
                        svgclass=f"handout-qr {size}", lineclass=None, omitsize=True)
    return Markup(svg.replace("<svg ", '<svg role="img" ', 1))
