"""Figures as files ("Save figure"): every figure the pages draw, as a standalone SVG document that a slide,
a paper or an illustrator opens as it is: xmlns, a viewBox, its size, every colour written out (no class, no
CSS variable), text as text in fonts every machine has (``FONT_FAMILY``), on a white ground.

The drawings are the page's own: a heatmap from the numbers and colour buckets of app.view.heatmap, the lines,
the map, the charts and the head maps from their drawers, whose classes are written out as attributes
(app.view.figure.document.inline). app.web.figures turns a document into a PNG.
"""
