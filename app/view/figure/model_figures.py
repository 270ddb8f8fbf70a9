"""The real models' figures as files: ``figure=heads`` every head at once (the model view's grid), ``head`` the
head in view enlarged, and on the language model's page ``candidates``, the next token's bars. The state is the
page's own query, read by its own reader (app.state.model_state, app.state.decoder_state); the head shown is
the one the page shows.
"""

from __future__ import annotations

from app.i18n import gettext as _
from app.maths.decoder_files import DecoderFiles
from app.maths.model_files import ModelFiles
from app.maths.registry import DECODER
from app.serving.real_models import sentence_model
from app.state.decoder_state import DecoderRead
from app.state.form import FormError
from app.state.model_state import HEADS, ModelRead
from app.view.decoder_view import candidate_bars, decoder_run, default_head, head_maps, intact_logits
from app.view.figure.drawings import CandidateBar, HeadMap, candidates_svg, head_grid_svg, head_svg_figure
from app.view.figure.stage_figures import SavedFigure
from app.view.model_maps import head_svg, thumbnail
from app.view.model_view import default_query, shown_head
from app.view.pieces import readable

MODEL_FIGURES = ("heads", "head")
DECODER_FIGURES = ("heads", "head", "candidates")


def _check(figure: str, names: tuple[str, ...]) -> None:
    if figure not in names:
        raise FormError("figure", f"figure: choose {', '.join(names[:-1])} or {names[-1]}")


def _enlarged_title(layer: int, head: int) -> str:
    return _("Layer {layer}, head {head}").format(layer=layer + 1, head=head + 1)


def model_figure(model: ModelFiles, read: ModelRead, figure: str) -> SavedFigure:
    """A figure of the "Your sentence" page (all-MiniLM-L6-v2) on its first sentence."""
    _check(figure, MODEL_FIGURES)
    page = read.page
    one, two = sentence_model().run(read.first), sentence_model().run(read.second)
    query = page.query if page.query is not None else default_query(one.tokens)
    layer, head = shown_head(page, one, two, query)
    if figure == "head":
        title = _enlarged_title(layer, head)
        return SavedFigure(head_svg_figure(head_svg(one.attention[layer, head], one.tokens, title), title),
                           f"model-layer{layer + 1}-head{head + 1}")
    rows = [[[HeadMap(thumbnail(one.attention[la, h]), (la, h) == (layer, head), (la, h) in page.heads_off)]
             for h in range(one.heads)] for la in range(one.layers)]
    title = _("Every head at once: {layers} layers × {heads} heads").format(layers=one.layers, heads=one.heads)
    names = [_("H{head}").format(head=h + 1) for h in range(HEADS)]
    return SavedFigure(head_grid_svg(rows, names, title, f"“{page.text}”"),
                       "model-heads")


def decoder_figure(model: DecoderFiles, read: DecoderRead, figure: str) -> SavedFigure:
    """A figure of the "Next word" page (SmolLM2-135M-Instruct) on its text."""
    _check(figure, DECODER_FIGURES)
    page = read.page
    run = decoder_run(model, page.text, page.heads_off)
    layer, head = default_head(page)
    if figure == "head":
        title = _enlarged_title(layer, head)
        drawing = head_svg(run.attention[layer, head], [readable(p) for p in run.tokens], title)
        return SavedFigure(head_svg_figure(drawing, title), f"decoder-layer{layer + 1}-head{head + 1}")
    if figure == "candidates":
        bars = [CandidateBar(b.token, b.percent, float(b.width), b.kept, b.intact_percent)
                for b in candidate_bars(model, run.logits, page, intact_logits(model, page))]
        prompt = _("After the text “{text}”").format(text=page.text)
        return SavedFigure(candidates_svg(bars, _("The next word"), f"τ = {page.temperature:g}", prompt),
                           "decoder-candidates")
    spec = DECODER.config
    rows = [[[HeadMap(t.src, t.selected, t.off) for t in group] for group in groups]
            for groups in head_maps(run, page, layer, head)]
    names = [_("K/V {group}: H{first}–{last}").format(group=g + 1, first=g * spec.group + 1, last=(g + 1) * spec.group)
             for g in range(spec.kv_heads)]
    title = _("All {total} heads at once: {layers} layers × {heads} heads").format(
        total=spec.layers * spec.heads, layers=spec.layers, heads=spec.heads)
    return SavedFigure(head_grid_svg(rows, names, title, ""), "decoder-heads")
