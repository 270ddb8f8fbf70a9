""""Patch activations" (GET /decoder/patching): app.maths.patching's two maps as tables a student can read — the
residual stream's rows by layer × position, every head by layer × head — each cell the patched run's normalised
logit difference (0: as the corrupted text, 1: as the clean text), coloured on one fixed scale, the largest named."""

from __future__ import annotations

import numpy as np

from app.i18n import decimal
from app.i18n import gettext as _
from app.maths.decoder_files import DecoderFiles
from app.maths.patching import Patching
from app.serving.real_models import language_model
from app.state.patching_state import PatchingRead, patching_query
from app.view.heatmap import DIVERGING_BUCKETS
from app.view.labels import head_name
from app.view.pieces import readable

LARGEST = 5  # the cells named under each map


def patched_classes(values: np.ndarray) -> np.ndarray:
    """A diverging colour class per cell on one scale for every text: 1 (the clean run's answer) is the darkest
    purple, −1 the darkest orange; a cell beyond ±1 (a patch that overshoots) takes the darkest of its side."""
    idx = np.rint(np.clip(values, -1.0, 1.0) * DIVERGING_BUCKETS).astype(int)
    names = np.array([f"d{i}" for i in range(-DIVERGING_BUCKETS, DIVERGING_BUCKETS + 1)])
    return names[idx + DIVERGING_BUCKETS]


def cell(value: float) -> str:
    return decimal(float(value), 2)


def patched(read: PatchingRead) -> Patching:
    """The page's (or the API's) patching, from the language model's service: kept, or computed once however many
    ask, its layers told as the waiting page's progress."""
    page = read.page
    return language_model().patching(page.clean, page.corrupted, read.clean_ids, read.corrupted_ids, page.target,
                                     page.contrast)


def patching_view(model: DecoderFiles, read: PatchingRead, p: Patching) -> dict:
    """The two maps, the runs' scores and the largest patches, as the page shows them."""
    clean = [readable(t) for t in p.clean_tokens]
    corrupted = [readable(t) for t in p.corrupted_tokens]
    columns = [{"clean": c, "corrupted": k, "differs": c != k, "index": i + 1}
               for i, (c, k) in enumerate(zip(clean, corrupted, strict=True))]
    res_classes, head_classes = patched_classes(p.residual), patched_classes(p.heads)
    n, t = p.residual.shape
    residual_rows = [{"name": _("into L{layer}").format(layer=layer + 1),
                      "cells": [{"value": cell(p.residual[layer, i]), "cls": res_classes[layer, i]} for i in range(t)]}
                     for layer in range(n)]
    head_rows = [{"layer": layer + 1,
                  "cells": [{"value": cell(p.heads[layer, h]), "cls": head_classes[layer, h],
                             "name": head_name(layer, h)} for h in range(p.heads.shape[1])]}
                 for layer in range(n)]
    order = np.argsort(-np.abs(p.heads), axis=None, kind="stable")[:LARGEST]
    largest_heads = [{"name": head_name(int(k // p.heads.shape[1]), int(k % p.heads.shape[1])),
                      "value": cell(p.heads.flat[k])} for k in order]
    vocab = model.vocabulary
    return {"columns": columns, "residual": residual_rows, "heads": head_rows, "largest_heads": largest_heads,
            "target": readable(vocab[p.target]), "contrast": readable(vocab[p.contrast]),
            "metric_clean": decimal(p.metric_clean, 2), "metric_corrupted": decimal(p.metric_corrupted, 2),
            "tokens": t, "query": patching_query(read.page), "layers": n}
