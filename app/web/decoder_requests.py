"""What the language model's API requests share (app.web.decoder_api, app.web.why_api): a text read into the model's
tokens, heads switched off, and a next token named by its id, its piece or a one-token text."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from app.config import settings
from app.maths.registry import DECODER
from app.serving.real_models import language_model
from app.state.decoder_state import read_decoder_tokens
from app.web.fields import ModelText, whole_number
from app.web.schemas import mismatch

LAYERS, HEADS, D_MODEL, D_K = DECODER.layers, DECODER.heads, DECODER.d_model, DECODER.d_k

Text = ModelText
Layer = whole_number(0, LAYERS - 1)
Head = whole_number(0, HEADS - 1)


class DecoderHeadRef(BaseModel):
    """One query head of one layer, each counted from 0."""

    model_config = ConfigDict(extra="forbid")
    layer: Layer
    head: Head


class TextRequest(BaseModel):
    """A text for the language model, read into its tokens by ``_read_tokens``, and heads switched off."""

    model_config = ConfigDict(extra="forbid")
    text: Text = Field(description=f"A text of at most {settings.model_max_chars} characters and "
                                   f"{settings.decoder_max_tokens} tokens; newlines and tabs are its only control "
                                   "characters.")
    heads_off: list[DecoderHeadRef] = Field(
        default=[], max_length=LAYERS * HEADS,
        description="Query heads switched off: their attention weights are 0, so their part of the "
                    "concatenation is 0 before W_O.")
    _ids: np.ndarray | None = PrivateAttr(default=None)

    def _read_tokens(self) -> None:
        try:
            self._ids = read_decoder_tokens(language_model().files(), self.text)[1]
        except ValueError as e:
            raise mismatch("text", str(e)) from None

    @property
    def ids(self) -> np.ndarray:
        assert self._ids is not None
        return self._ids

    @property
    def off(self) -> frozenset[tuple[int, int]]:
        return frozenset((r.layer, r.head) for r in self.heads_off)


class TokenRef(BaseModel):
    id: int
    token: str
