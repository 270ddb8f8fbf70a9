"""What a student has in front of them on "Patch activations" (GET /decoder/patching): a clean text and a corrupted
one of the same token count, and optionally the two next tokens whose logit difference is read; from the query
string once, written back into a permalink."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlencode

import numpy as np

from app.i18n import gettext as _
from app.maths.decoder_files import DecoderFiles
from app.state.decoder_state import read_decoder_tokens, token_field
from app.state.form import FormError
from app.state.model_state import check_sentence

DEFAULT_CLEAN = "The capital of France is"
DEFAULT_CORRUPTED = "The capital of Italy is"
# Patching costs about (T − p₀)·N²/2·(h + T/2) rows through one layer (app.maths.patching): up to 12 tokens it
# finishes within 10 s on two cores (docs/performance.md); 16 is the page's limit, at about twice that.
PATCHING_MAX_TOKENS = 16


@dataclass(frozen=True)
class PatchingPage:
    clean: str = DEFAULT_CLEAN
    corrupted: str = DEFAULT_CORRUPTED
    target: int | None = None  # y: the clean run's likeliest next token unless named
    contrast: int | None = None  # y′: the corrupted run's likeliest unless named


@dataclass(frozen=True)
class PatchingRead:
    page: PatchingPage
    clean_ids: np.ndarray  # (T,)
    corrupted_ids: np.ndarray  # (T,)


def _text(model: DecoderFiles, given: dict[str, str], name: str, default: str) -> tuple[str, np.ndarray]:
    text = given.get(name, default)
    try:
        check_sentence(text)
        ids = read_decoder_tokens(model, text)[1]
    except ValueError as e:
        raise FormError(name, str(e)) from None
    if len(ids) > PATCHING_MAX_TOKENS:
        raise FormError(name, _("the text is {n} tokens; patching takes at most {limit}").format(
            n=len(ids), limit=PATCHING_MAX_TOKENS))
    return text, ids


def read_patching_page(model: DecoderFiles, pairs: Iterable[tuple[str, str]]) -> PatchingRead:
    """The page's state from its query string; FormError names the first bad field."""
    given = dict(pairs)
    clean, clean_ids = _text(model, given, "clean", DEFAULT_CLEAN)
    corrupted, corrupted_ids = _text(model, given, "corrupted", DEFAULT_CORRUPTED)
    if len(clean_ids) != len(corrupted_ids):
        raise FormError("corrupted", _("the corrupted text is {n} tokens and the clean text {t}: change words, "
                                       "not their number of tokens").format(n=len(corrupted_ids), t=len(clean_ids)))
    if np.array_equal(clean_ids, corrupted_ids):
        raise FormError("corrupted", _("the corrupted text is the clean text: change a word of it"))
    target, contrast = token_field(model, given, "target"), token_field(model, given, "contrast")
    if target is not None and target == contrast:
        raise FormError("contrast", _("the contrast must be another token than the target"))
    return PatchingRead(PatchingPage(clean, corrupted, target, contrast), clean_ids, corrupted_ids)


def patching_query(page: PatchingPage) -> str:
    fields = [("clean", page.clean), ("corrupted", page.corrupted)]
    fields += [(name, str(token)) for name, token in (("target", page.target), ("contrast", page.contrast))
               if token is not None]
    return urlencode(fields)

