"""Input attribution on SmolLM2 (app.maths.saliency): the NumPy backward pass against PyTorch autograd on
transformers' reading of the same GGUF file (tests/fixtures/smollm2_saliency.npz, written by
scripts/saliency_reference.py) — ∂f/∂x, gradient × input and integrated gradients within 1e-3 of the largest
value — and, without the fixture, against finite differences, completeness, a head switched off and batching."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from app.maths import saliency
from app.maths.decoder_files import DecoderFiles, load_decoder_files
from app.maths.llama import run_decoder, tokenize
from app.maths.saliency import (
    DEFAULT_BASELINE,
    evaluate,
    gradient_x_input,
    input_gradient,
    integrated_gradients,
    value_at_zero,
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "smollm2_saliency.npz"
with np.load(FIXTURE) as npz:
    REF = dict(npz)
TEXTS = range(int(REF["n_texts"]))
STEPS = int(REF["steps"])
OBJECTIVES = ("", "_c")  # f = log p(target); f = logit(target) − logit(contrast)


@pytest.fixture(scope="module")
def model() -> DecoderFiles:
    return load_decoder_files()


def ids_of(i: int) -> np.ndarray:
    return REF[f"ids_{i}"]


def target_and_contrast(i: int, suffix: str) -> tuple[int, int | None]:
    return int(REF[f"target_{i}"]), int(REF[f"contrast_{i}"]) if suffix else None


def assert_close(actual: np.ndarray, expected: np.ndarray) -> None:
    """Within 1e-3 relative, and 1e-3 of the largest magnitude for the entries near 0."""
    np.testing.assert_allclose(actual, expected, rtol=1e-3, atol=1e-3 * float(np.abs(expected).max()))


@pytest.mark.parametrize("suffix", OBJECTIVES)
@pytest.mark.parametrize("i", TEXTS)
def test_the_input_gradient_equals_autograds(model: DecoderFiles, i: int, suffix: str) -> None:
    ids = ids_of(i)
    np.testing.assert_array_equal(tokenize(model, str(REF[f"text_{i}"])).ids, ids)
    target, contrast = target_and_contrast(i, suffix)
    f, grad = input_gradient(model, ids, target, contrast)
    assert grad.shape == (len(ids), model.config.d_model) and grad.dtype == np.float32
    assert f == pytest.approx(float(REF[f"f{suffix}_{i}"]), abs=1e-3)
    assert_close(grad, REF[f"grad{suffix}_{i}"])


@pytest.mark.parametrize("i", TEXTS)
def test_gradient_x_input_equals_autograds(model: DecoderFiles, i: int) -> None:
    target, contrast = target_and_contrast(i, "_c")
    s = gradient_x_input(model, ids_of(i), target, contrast)
    assert (s.method, s.steps, s.baseline, s.contrast) == ("gradient_x_input", 1, "zero", contrast)
    assert_close(s.signed, REF[f"gxi_signed_c_{i}"])
    assert_close(s.norm, REF[f"gxi_norm_c_{i}"])
    assert s.f_baseline == 0.0  # logit(y) − logit(y′) at x = 0
    assert s.completeness_error == pytest.approx(abs(s.total - s.f_x), abs=1e-9)


@pytest.mark.parametrize(("i", "suffix", "baseline"), [(0, "", "zero"), (1, "_c", "zero"), (2, "", "default"),
                                                       (3, "_c", "default")])
def test_integrated_gradients_equal_autograds(model: DecoderFiles, i: int, suffix: str, baseline: str) -> None:
    # Four of the fixture's sixteen cases, for time. Where a path point sits on a steep stretch (text 0's difference
    # from the mean: |∂f/∂x| 30 times its size elsewhere) float32 rounding is magnified: there the two differ by
    # 1.8e-3 of the largest score, and float32 autograd differs from float64 autograd by 3e-4.
    target, contrast = target_and_contrast(i, suffix)
    s = integrated_gradients(model, ids_of(i), target, contrast, steps=STEPS,
                             baseline="zero" if baseline == "zero" else DEFAULT_BASELINE)
    assert_close(s.signed, REF[f"ig_{baseline}_signed{suffix}_{i}"])
    assert_close(s.norm, REF[f"ig_{baseline}_norm{suffix}_{i}"])
    assert s.f_x == pytest.approx(float(REF[f"f{suffix}_{i}"]), abs=1e-3)
    assert s.f_baseline == pytest.approx(float(REF[f"ig_{baseline}_f_base{suffix}_{i}"]), abs=1e-3)


def test_the_fixtures_default_baseline_is_the_modules() -> None:
    assert DEFAULT_BASELINE == str(REF["baseline"]) == "mean"


def test_the_forward_pass_is_the_decoders_with_and_without_a_head(model: DecoderFiles) -> None:
    text = "The capital of France is"
    ids = tokenize(model, text).ids
    for off in (frozenset(), frozenset({(3, 4), (20, 0)})):
        logits = run_decoder(model, text, off).logits.astype(np.float64)
        log_p = logits - logits.max() - math.log(float(np.exp(logits - logits.max()).sum()))
        target = int(np.argmax(logits))
        x = model.weights.embedding[ids][None]
        assert evaluate(model, x, target, None, off)[0] == pytest.approx(log_p[target], abs=1e-4)
        assert evaluate(model, x, target, 17, off)[0] == pytest.approx(logits[target] - logits[17], abs=1e-4)
    assert evaluate(model, np.zeros_like(x), 5)[0] == pytest.approx(value_at_zero(model), abs=1e-6)


def test_the_gradient_matches_finite_differences(model: DecoderFiles) -> None:
    ids = tokenize(model, "The cat sat").ids
    x = model.weights.embedding[ids]  # (T, d_model)
    u = np.random.default_rng(0).standard_normal(x.shape).astype(np.float32)
    u *= 0.5 / np.linalg.norm(u)  # a step of 1e-2 along u moves x by 0.005, a twentieth of a token's norm
    f, grad = input_gradient(model, ids, 260)
    h = 1e-2
    ends = evaluate(model, np.stack([x + h * u, x - h * u]), 260)  # float64 f of float32 passes
    along = float((grad.astype(np.float64) * u).sum())
    assert (ends[0] - ends[1]) / (2 * h) == pytest.approx(along, rel=0.02)
    assert f == pytest.approx(evaluate(model, x[None], 260)[0], abs=1e-6)


def test_completeness_improves_with_steps_on_a_smooth_path(model: DecoderFiles) -> None:
    # From 0.7·x the path only rescales the embeddings (the first RMSNorm forgets a scale): f changes smoothly.
    ids = tokenize(model, "The capital of France is").ids
    scaled = 0.7 * model.weights.embedding[ids]
    coarse, fine = (integrated_gradients(model, ids, 7042, steps=n, baseline=scaled) for n in (1, 16))
    gap = fine.f_x - fine.f_baseline
    assert fine.completeness_error < 0.1 * coarse.completeness_error
    assert fine.completeness_error < 0.01 * abs(gap)
    assert fine.baseline == "given embeddings"
    assert (coarse.f_x, coarse.f_baseline) == (fine.f_x, fine.f_baseline)


def test_a_head_switched_off_changes_the_gradient(model: DecoderFiles) -> None:
    ids = tokenize(model, "The capital of France is").ids
    _, grad = input_gradient(model, ids, 7042)
    _, without = input_gradient(model, ids, 7042, heads_off=frozenset({(0, 4)}))
    assert np.abs(without - grad).max() > 1e-3 * np.abs(grad).max()
    layer_0_off = frozenset((0, head) for head in range(model.config.heads))
    _, first_layer_off = input_gradient(model, ids, 7042, heads_off=layer_0_off)
    assert np.abs(first_layer_off - grad).max() > 1e-2 * np.abs(grad).max()


def test_a_batch_equals_one_input_at_a_time(model: DecoderFiles, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = tokenize(model, "Harry Potter went").ids
    x = model.weights.embedding[ids]
    batch = np.stack([x, 0.5 * x, x[::-1].copy()])  # (3, T, d_model)
    f, grad = input_gradient(model, ids, 260, embeddings=batch)
    assert f.shape == (3,) and grad.shape == batch.shape
    for b in range(3):
        f_b, grad_b = input_gradient(model, ids, 260, embeddings=batch[b])
        assert f_b == pytest.approx(f[b], abs=1e-5)
        np.testing.assert_allclose(grad_b, grad[b], rtol=1e-4, atol=1e-5 * float(np.abs(grad[b]).max()))
    monkeypatch.setattr(saliency, "_TAPE_BYTES", 1)  # one input per chunk
    told: list[tuple[int, int]] = []
    f_c, grad_c = input_gradient(model, ids, 260, embeddings=batch,
                                 progress=lambda done, total: told.append((done, total)))
    assert told == [(1, 3), (2, 3), (3, 3)]
    np.testing.assert_allclose(f_c, f, atol=1e-5)
    np.testing.assert_allclose(grad_c, grad, rtol=1e-4, atol=1e-5 * float(np.abs(grad).max()))


def test_a_token_baseline_puts_that_token_everywhere(model: DecoderFiles) -> None:
    ids = tokenize(model, "The cat").ids
    base, name = saliency.baseline_embeddings(model, ids, 260)
    np.testing.assert_array_equal(base, np.stack([model.weights.embedding[260]] * len(ids)))
    assert name == "token 260 'Ġthe'"
    mean, _ = saliency.baseline_embeddings(model, ids, "mean")
    np.testing.assert_allclose(mean, np.broadcast_to(model.weights.embedding.mean(axis=0, dtype=np.float64),
                                                     mean.shape), atol=1e-7)


@pytest.mark.parametrize("steps", [0, 65])
def test_steps_out_of_bounds_are_refused(model: DecoderFiles, steps: int) -> None:
    with pytest.raises(ValueError, match="steps"):
        integrated_gradients(model, [1, 2], 3, steps=steps)


def test_a_contrast_must_be_another_token(model: DecoderFiles) -> None:
    with pytest.raises(ValueError, match="contrast"):
        input_gradient(model, [1, 2], 3, contrast=3)
