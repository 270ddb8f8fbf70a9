""""Why this word?" on the language model's page: each head's, each feed-forward block's and the embedding's share
of the next token's logit (app.maths.attribution), as a layers × heads grid with the feed-forward blocks beside it,
the largest shares named, and the sum that gives the logit back."""

from __future__ import annotations

import math

import numpy as np

from app.i18n import decimal, percent
from app.i18n import gettext as _
from app.maths.attribution import attention_rollout, logit_attribution
from app.maths.decoder_files import DecoderFiles
from app.maths.llama import DecoderRun
from app.maths.sampling import temperature_softmax, top_candidates
from app.serving.real_models import language_model
from app.state.decoder_state import CANDIDATES, SALIENCY_METHODS, DecoderPage, decoder_query
from app.view.attention_lines import attention_lines
from app.view.heatmap import bucket_classes
from app.view.labels import head_name
from app.view.model_maps import head_svg
from app.view.pieces import readable

LARGEST = 5  # the parts named under the grid


def share(value: float) -> str:
    """A share of a logit, signed, two decimals: +2.82, −0.06."""
    text = decimal(value, 2)
    return text if text.startswith("−") or float(round(value, 2)) == 0.0 else "+" + text


def rollout_view(run: DecoderRun) -> dict:
    """The attention rollout: the last token's row with the first token's share said, and the rest of each row
    renormalised without it, so that a share of a thousandth is drawn at a scale where it can be read — as bars,
    as lines from the last token to its sources, and as a map of every row."""
    rolled = attention_rollout(run.attention)  # (T, T)
    last = rolled[-1]
    rest = last[1:]
    total = float(rest.sum())
    shares = rest / total if total > 0 else rest
    tokens = [readable(t) for t in run.tokens]
    # places enough for the rest's two first significant digits (0.000044 %), so that neither prints as 0 or 100
    places = 2 if total <= 0 else min(12, max(2, 1 - math.floor(math.log10(100 * total))))
    view = {"first": tokens[0], "first_share": percent(float(last[0]), places), "rest_share": percent(total, places),
            "bars": [{"token": t, "percent": percent(float(s)), "width": f"{max(0.5, 100 * float(s)):.1f}"}
                     for t, s in zip(tokens[1:], shares, strict=True)], "lines": None, "map": None}
    if len(tokens) < 3:  # one token after the first: nothing to compare
        return view
    view["lines"] = attention_lines(shares[None, None, :], tokens[-1:], tokens[1:], [_("rollout")],
                                    fig_id="rollout-lines", focus=0)
    without = rolled.copy()
    without[:, 0] = 0.0  # the first token's column left out, each row renormalised over the others
    sums = without.sum(axis=1, keepdims=True)
    without = np.divide(without, sums, out=np.zeros_like(without), where=sums > 0)
    view["map"] = head_svg(without, tokens, _("Attention rollout, each row without the first token, renormalised"))
    return view


def explained_token(run: DecoderRun, page: DecoderPage) -> int:
    """The next token Why this word? and Which words made it? explain: the one asked for, else the likeliest."""
    return page.why if page.why is not None else int(np.argmax(run.logits))


def why_view(model: DecoderFiles, run: DecoderRun, page: DecoderPage) -> dict:
    """The grid, the largest parts, the sum, and the tokens a student may ask about (the candidates)."""
    target = explained_token(run, page)
    a = logit_attribution(model, run, target, page.against)
    head_classes, head_top = bucket_classes(a.heads, "signed")
    mlp_classes, mlp_top = bucket_classes(a.mlp, "signed")
    rows = []
    for layer in range(a.heads.shape[0]):
        cells = [{"value": share(a.heads[layer, h]), "cls": head_classes[layer, h], "name": head_name(layer, h),
                  "query": decoder_query(page, layer=layer, head=h, cell=None)} for h in range(a.heads.shape[1])]
        rows.append({"layer": layer + 1, "heads": cells,
                     "mlp": {"value": share(a.mlp[layer]), "cls": mlp_classes[layer]}})
    parts = [(a.embedding, _("the embedding of “{token}”").format(token=readable(run.tokens[-1])), None)]
    parts += [(a.heads[la, h], head_name(la, h), decoder_query(page, layer=la, head=h, cell=None))
              for la in range(a.heads.shape[0]) for h in range(a.heads.shape[1])]
    parts += [(a.mlp[la], _("FFN {layer}").format(layer=la + 1), None) for la in range(a.mlp.shape[0])]
    largest = sorted(parts, key=lambda p: -abs(p[0]))[:LARGEST]
    p = temperature_softmax(run.logits, 1.0)
    choices = [int(i) for i in top_candidates(p, CANDIDATES)]
    for token in (target, page.against):
        if token is not None and token not in choices:
            choices.append(token)
    return {
        "target": readable(model.vocabulary[target]), "target_id": target,
        "contrast": None if page.against is None else readable(model.vocabulary[page.against]),
        "contrast_id": page.against,
        "logit": decimal(a.logit, 2), "embedding": share(a.embedding), "heads_sum": share(float(a.heads.sum())),
        "mlp_sum": share(float(a.mlp.sum())), "total": decimal(a.total, 2),
        "rows": rows, "head_top": decimal(head_top, 2), "mlp_top": decimal(mlp_top, 2),
        "largest": [{"value": share(v), "name": name, "query": query, "positive": v > 0} for v, name, query in largest],
        "explain": [{"token": readable(model.vocabulary[i]), "current": i == target,
                     "query": decoder_query(page, why=i, against=None if page.against == i else page.against,
                                            cell=None)} for i in choices],
        "against": [{"token": None, "current": page.against is None,
                     "query": decoder_query(page, why=page.why, against=None, cell=None)}]
                   + [{"token": readable(model.vocabulary[i]), "current": i == page.against,
                       "query": decoder_query(page, why=target, against=i, cell=None)}
                      for i in choices if i != target],
    }


def saliency_view(model: DecoderFiles, run: DecoderRun, page: DecoderPage) -> dict:
    """"Which words made it?": the links that compute it (gradient × input, integrated gradients) and, when asked,
    each input token's signed share of f (log p of the token Why this word? explains, or its logit against the
    contrast) shaded on one diverging scale, its size either way, and how far the shares are from adding up."""
    view = {"links": [{"key": key, "current": key == page.saliency,
                       "query": decoder_query(page, saliency=key, cell=None)} for key in SALIENCY_METHODS],
            "result": None}
    if page.saliency is None:
        return view
    target = explained_token(run, page)
    s = language_model().saliency(page.text, run.ids, page.heads_off, target, page.against,
                                  SALIENCY_METHODS[page.saliency])
    classes, top = bucket_classes(s.signed, "signed")
    total = float(s.signed.sum())
    view["result"] = {
        "method": page.saliency, "steps": s.steps, "baseline": s.baseline,
        "target": readable(model.vocabulary[target]),
        "contrast": None if page.against is None else readable(model.vocabulary[page.against]),
        "tokens": [{"token": readable(t), "signed": share(float(a)), "norm": decimal(float(n), 2), "cls": c,
                    "width": f"{100 * float(n) / max(float(s.norm.max()), 1e-12):.1f}"}
                   for t, a, n, c in zip(s.tokens, s.signed, s.norm, classes, strict=True)],
        "top": decimal(top, 2), "f_x": decimal(s.f_x, 2), "f_baseline": decimal(s.f_baseline, 2),
        "gap": decimal(s.f_x - s.f_baseline, 2), "sum": decimal(total, 2),
        "error": decimal(s.completeness_error, 2),
        "error_share": percent(s.completeness_error / max(abs(s.f_x - s.f_baseline), 1e-12), 0),
    }
    return view
