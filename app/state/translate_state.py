"""What a student has in front of them on "Translate" (GET /translate): the text, the direction, and the
cross-attention head stepped through, read from the query string once and written back into a permalink. Layers
and heads are counted from 1 in the query string, as the page counts them; from 0 here."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlencode

from app.i18n import gettext as _
from app.maths.marian import MAX_SOURCE_PIECES
from app.maths.marian_files import DIRECTIONS, TranslatorFiles
from app.maths.registry import TRANSLATOR
from app.state.form import FormError
from app.state.model_state import check_sentence, whole_field

DEFAULT_TEXT = "The bank of the river was muddy."  # seed 000's bank, as the river's
OTHER_BANK = "I deposited money at the bank."  # and as the money's: one click away
DEFAULT_DIRECTION = "en-pt"
DECODER_LAYERS, HEADS = TRANSLATOR.layers, TRANSLATOR.heads  # the cross-attention's grid (app.maths.registry)
ALIGNMENT = (1, 0)  # the last layer's first head, trained on word alignments: the head shown first


@dataclass(frozen=True)
class TranslatePage:
    text: str
    direction: str  # "en-pt" or "pt-en"
    layer: int  # the cross-attention head stepped through, from 0
    head: int

    @property
    def alignment_head(self) -> bool:
        return (self.layer, self.head) == ALIGNMENT


def translate_query(page: TranslatePage, **changes: object) -> str:
    """The permalink's query string, counted from 1, with ``changes`` (text, direction, layer, head)."""
    values = {"text": page.text, "direction": page.direction, "layer": page.layer, "head": page.head, **changes}
    fields = {"text": values["text"], "direction": values["direction"]}
    if (values["layer"], values["head"]) != ALIGNMENT:
        fields.update(layer=int(values["layer"]) + 1, head=int(values["head"]) + 1)  # type: ignore[call-overload]
    return urlencode(fields)


def read_translate_page(files: dict[str, TranslatorFiles], pairs: Iterable[tuple[str, str]]) -> TranslatePage:
    """The query string read once. A bad field raises FormError naming it."""
    given = {key: value for key, value in pairs if key in ("text", "direction", "layer", "head")}
    direction = given.get("direction") or DEFAULT_DIRECTION
    if direction not in DIRECTIONS:
        raise FormError("direction", _("direction: choose English → Portuguese or Portuguese → English"))
    text = given.get("text", DEFAULT_TEXT)
    try:
        check_sentence(text)
    except ValueError as e:
        raise FormError("text", _("text: {problem}").format(problem=e)) from None
    pieces = len(files[direction].tokenizer.encode(text).ids) + 1
    if pieces > MAX_SOURCE_PIECES:
        raise FormError("text", _("text: {n} pieces with the end of the sentence; the limit is {limit}").format(
            n=pieces, limit=MAX_SOURCE_PIECES))
    layer = whole_field("layer", given["layer"], 1, DECODER_LAYERS) if given.get("layer") else None
    head = whole_field("head", given["head"], 1, HEADS) if given.get("head") else None
    if (layer is None) != (head is None):
        missing = "head" if head is None else "layer"
        raise FormError(missing, _("{field}: choose a layer and a head together").format(field=missing))
    if layer is None or head is None:
        layer, head = ALIGNMENT
    return TranslatePage(text=text, direction=direction, layer=layer, head=head)
