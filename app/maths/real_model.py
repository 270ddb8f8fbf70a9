"""What every real model shares, whatever its architecture: a text as the model reads it (:class:`Tokenized`),
the heads switched off in one layer (:func:`heads_in`), and a read-only float32 weight (:func:`frozen`).

Each real model's maths module (app.maths.bert, app.maths.llama, app.maths.marian) offers the same few functions
under the same names, with the meaning said here, and the registry (app.maths.registry) names them for every
layer above:

    tokenize(files, text) -> Tokenized                    the text's pieces and ids, as the model reads them
    run(files, text, …)   -> a run                        every layer's output and every head's weights
    one head stepped through -> app.maths.records.HeadResult   q, k, v, scores, scaled, softmax, output
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Tokenized:
    """A text as a model reads it: its pieces (as the model's tokenizer writes them) and their ids."""

    text: str
    tokens: tuple[str, ...]  # WordPiece with [CLS] and [SEP]; byte-level BPE ("Ġ" a space); SentencePiece + "</s>"
    ids: np.ndarray  # (T,) int64


def heads_in(heads: frozenset[tuple[int, int]], layer: int) -> list[int]:
    """Of (layer, head) pairs, the heads of ``layer``."""
    return [h for (l_, h) in heads if l_ == layer]


def frozen(a: np.ndarray) -> np.ndarray:
    """A read-only float32 copy: never a view into a reader's buffer or memory map (a float32 tensor
    de-quantises to one), which would keep the whole file in memory for as long as the weights live."""
    out = np.array(a, dtype=np.float32, order="C", copy=True)
    out.setflags(write=False)
    return out
