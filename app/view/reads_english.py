"""The real models read English: one sentence in English, in French and in the reader's language, as each model
splits it. MiniLM's WordPiece vocabulary and SmolLM2's byte-level BPE were learnt from English text, so a French
sentence falls into many more pieces (traverse, parc ##e, eta ##it), accents are dropped or split into bytes, and
Chinese characters are mostly [UNK] to MiniLM. The page shows this rather than hiding it (templates/reads_english.html).

The sentences are the models' input, so they are never translated: each is written once here, in its language.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from app.maths.bert import tokenize as encoder_tokenize
from app.maths.decoder_files import load_decoder_files
from app.maths.llama import tokenize as decoder_tokenize
from app.maths.model_files import load_model_files
from app.view.pieces import readable

# The same sentence (the animal/street pair of the head catalogue) in each language of the page.
SENTENCES = {
    "en": "The animal didn't cross the street because it was too tired.",
    "fr": "L'animal n'a pas traversé la rue parce qu'il était trop fatigué.",
    "de": "Das Tier überquerte die Straße nicht, weil es zu müde war.",
    "es": "El animal no cruzó la calle porque estaba demasiado cansado.",
    "zh": "动物没有过马路，因为它太累了。",
}


@dataclass(frozen=True)
class Split:
    lang: str
    text: str
    pieces: tuple[str, ...]
    unknown: int  # pieces the model has no word for ([UNK])


@cache
def splits(model: str, reader: str) -> tuple[Split, ...]:
    """English, French and (when it is another) the reader's language, as ``model`` ("encoder": MiniLM,
    "decoder": SmolLM2) splits each: its pieces without [CLS] and [SEP], a leading space shown as ␣."""
    langs = ["en", "fr"] + ([reader] if reader not in ("en", "fr") else [])
    out = []
    for lang in langs:
        text = SENTENCES[lang]
        if model == "encoder":
            pieces = encoder_tokenize(load_model_files(), text).tokens[1:-1]
        else:
            pieces = tuple(readable(p) for p in decoder_tokenize(load_decoder_files(), text).tokens)
        out.append(Split(lang, text, tuple(pieces), sum(p == "[UNK]" for p in pieces)))
    return tuple(out)
