"""The translator's figures as files: ``figure=lines`` where each written piece looked (the selected cross-attention
head's lines, at first the alignment head's), ``heads`` the 2 × 8 cross-attention maps. The state is the page's own
query, read by its own reader (app.state.translate_state)."""

from __future__ import annotations

from app.i18n import gettext as _
from app.maths.marian import Translation, cross_head
from app.maths.marian_files import TranslatorFiles
from app.state.form import FormError
from app.state.translate_state import DECODER_LAYERS, HEADS, TranslatePage
from app.view.attention_lines import attention_lines
from app.view.figure.drawings import HeadMap, head_grid_svg, lines_svg
from app.view.figure.stage_figures import SavedFigure
from app.view.labels import head_name
from app.view.model_maps import thumbnail

TRANSLATOR_FIGURES = ("lines", "heads")


def translator_figure(files: TranslatorFiles, run: Translation, page: TranslatePage, figure: str) -> SavedFigure:
    """A figure of the "Translate" page on its text."""
    if figure not in TRANSLATOR_FIGURES:
        raise FormError("figure", "figure: choose lines or heads")
    if not run.target:
        raise FormError("text", _("text: the model wrote nothing for it, so there is no figure to draw"))
    layer, head = page.layer, page.head
    name = head_name(layer, head)
    if figure == "lines":
        weights = cross_head(files, run, layer, head).softmax
        fig = attention_lines(weights[None], run.target, run.source, [name], fig_id="translate-lines-file", cross=True)
        title = _("“{source}” → “{target}”: where each written piece looked ({name})").format(
            source=page.text, target=run.text, name=name)
        return SavedFigure(lines_svg(fig, title), f"translate-lines-layer{layer + 1}-head{head + 1}")
    rows = [[[HeadMap(thumbnail(run.cross_attention[la, h]), (la, h) == (layer, head), False)] for h in range(HEADS)]
            for la in range(DECODER_LAYERS)]
    names = [_("H{head}").format(head=h + 1) for h in range(HEADS)]
    title = _("Cross-attention, every head: {layers} layers × {heads} heads").format(layers=DECODER_LAYERS,
                                                                                    heads=HEADS)
    return SavedFigure(head_grid_svg(rows, names, title, f"“{page.text}” → “{run.text}”"), "translate-heads")
