"""Write tests/fixtures/sampling_reference.npz: what transformers' samplers draw from, on fixed logits.

transformers' ``generate`` warps the next token's scores in this order (generation/utils.py,
_get_logits_processor): TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper, MinPLogitsWarper, each
setting the scores it cuts to −inf; the sampler then draws from softmax of what is left. This script applies those
warpers to two sets of logits — SmolLM2's own next-token logits after "The capital of France is" (from
tests/fixtures/smollm2_reference.npz) and 1,000 made-up ones drawn with a fixed seed — for every combination of
temperature, top-k, top-p and min-p below, and stores the distributions, so that the app's
app.maths.sampling.sampling_distribution is tested against transformers without importing it.

What it writes: logits_<s> float32 (V,) for s in 0, 1; and per case c: case_c float64 (5,) = (set, τ, top_k or 0,
top_p or 0, min_p or 0); kept_c int32, the token ids transformers may draw, and p_c float64 their
probabilities (every other token's is 0).

Needs the reference venv of scripts/decoder_reference.py (torch, transformers); run from the repository's root:

    /tmp/refvenv/bin/python scripts/sampling_reference.py

Made with torch 2.15.0 and transformers 4.57.6.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import torch
from transformers.generation.logits_process import (
    LogitsProcessorList,
    MinPLogitsWarper,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
TEMPERATURES = (0.7, 1.0, 1.5)
TOP_K = (None, 5, 50)
TOP_P = (None, 0.5, 0.9)
MIN_P = (None, 0.05, 0.2)


def main() -> None:
    with np.load(FIXTURES / "smollm2_reference.npz") as npz:
        real = npz["logits_0"].astype(np.float32)
    made_up = np.random.default_rng(2024).normal(0.0, 3.0, 1000).astype(np.float32)
    out: dict[str, np.ndarray] = {"logits_0": real, "logits_1": made_up}
    c = 0
    for s, logits in enumerate((real, made_up)):
        for tau, k, p, m in itertools.product(TEMPERATURES, TOP_K, TOP_P, MIN_P):
            warpers = LogitsProcessorList([TemperatureLogitsWarper(tau)])
            if k is not None:
                warpers.append(TopKLogitsWarper(top_k=k))
            if p is not None:
                warpers.append(TopPLogitsWarper(top_p=p))
            if m is not None:
                warpers.append(MinPLogitsWarper(min_p=m))
            scores = warpers(torch.zeros((1, 1), dtype=torch.long), torch.from_numpy(logits)[None].clone())
            probs = torch.softmax(scores.double(), dim=-1)[0].numpy()
            if s == 0 and k is None and p is None and m is None:
                continue  # nothing cut: softmax of SmolLM2's 49,152 logits, tested elsewhere
            kept = np.flatnonzero(probs)
            out[f"case_{c}"] = np.array([s, tau, k or 0, p or 0, m or 0], dtype=np.float64)
            out[f"kept_{c}"], out[f"p_{c}"] = kept.astype(np.int32), probs[kept]
            c += 1
    out["n_cases"] = np.int64(c)
    np.savez_compressed(FIXTURES / "sampling_reference.npz", **out)
    print("wrote", c, "cases")


if __name__ == "__main__":
    main()
