"""Activation patching (app.maths.patching) against PyTorch hooks on transformers' reading of the same GGUF file
(tests/fixtures/smollm2_patching.npz, written by scripts/patching_reference.py): both maps within 1e-3, and the raw
metrics. Then checks of its own: the whole input of the first or of the last layer patched is the clean run; one
residual patch and one head patch against a plain run of app.maths.llama's layers; texts it cannot compare are
refused with their words."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.maths.attention import concat_heads
from app.maths.decoder_files import DecoderFiles, load_decoder_files
from app.maths.llama import (
    DecoderRun,
    KVCache,
    decoder_heads,
    decoder_layer,
    final_logits,
    rms_norm,
    run_decoder,
    swiglu,
)
from app.maths.patching import Patching, activation_patching, logit_difference, run_from

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "smollm2_patching.npz"
with np.load(FIXTURE) as npz:
    REF = dict(npz)
PAIRS = range(int(REF["n_pairs"]))
N, H = 30, 9


@pytest.fixture(scope="module")
def model() -> DecoderFiles:
    return load_decoder_files()


@pytest.fixture(scope="module")
def told() -> list[tuple[int, int]]:
    """What the first pair's patching told its progress callback."""
    return []


@pytest.fixture(scope="module")
def patchings(model: DecoderFiles, told: list[tuple[int, int]]) -> dict[int, Patching]:
    return {
        i: activation_patching(
            model,
            str(REF[f"clean_{i}"]),
            str(REF[f"corrupted_{i}"]),
            progress=(lambda done, total: told.append((done, total))) if i == 0 else None,
        )
        for i in PAIRS
    }


def runs(model: DecoderFiles, i: int) -> tuple[DecoderRun, DecoderRun]:
    return run_decoder(model, str(REF[f"clean_{i}"])), run_decoder(model, str(REF[f"corrupted_{i}"]))


def rest_of_the_model(model: DecoderFiles, layer: int, x: np.ndarray, patching: Patching) -> float:
    """Layers ``layer`` … N − 1 on x (T, d_model) with app.maths.llama's own layer, no cache: normalised m."""
    for at in range(layer, N):
        x, _ = decoder_layer(model, at, x, KVCache())
    logits = final_logits(model, x[-1])
    return float(patching.normalise(logits[patching.target] - logits[patching.contrast]))


@pytest.mark.parametrize("i", PAIRS)
def test_both_maps_equal_the_hooks(model: DecoderFiles, patchings: dict[int, Patching], i: int) -> None:
    p = patchings[i]
    t = len(REF[f"clean_ids_{i}"])
    assert p.clean_tokens == tuple(model.vocabulary[j] for j in REF[f"clean_ids_{i}"])
    assert p.corrupted_tokens == tuple(model.vocabulary[j] for j in REF[f"corrupted_ids_{i}"])
    assert (p.target, p.contrast) == (int(REF[f"target_{i}"]), int(REF[f"contrast_{i}"]))
    assert p.metric_clean == pytest.approx(float(REF[f"metric_clean_{i}"]), abs=1e-3)
    assert p.metric_corrupted == pytest.approx(float(REF[f"metric_corrupted_{i}"]), abs=1e-3)
    assert p.residual.shape == (N, t) and p.heads.shape == (N, H)
    np.testing.assert_allclose(p.residual, REF[f"residual_{i}"], atol=1e-3, rtol=0)
    np.testing.assert_allclose(p.heads, REF[f"heads_{i}"], atol=1e-3, rtol=0)


def test_the_default_pair_reads_paris_against_rome(model: DecoderFiles, patchings: dict[int, Patching]) -> None:
    p = patchings[0]
    assert (model.vocabulary[p.target], model.vocabulary[p.contrast]) == ("ĠParis", "ĠRome")
    assert p.metric_clean > 0 > p.metric_corrupted
    assert np.all(p.residual[:, :3] == 0.0)  # "The capital of" is the same in both texts: nothing to patch there
    assert p.residual[0, 3] == pytest.approx(1.0, abs=1e-3)  # the country's embedding is the whole difference
    assert p.residual[-1, -1] == pytest.approx(1.0, abs=0.02)  # by the last layer it has moved to the last token


def test_progress_is_told_after_every_layer(patchings: dict[int, Patching], told: list[tuple[int, int]]) -> None:
    assert told == [(layer, N) for layer in range(1, N + 1)]


@pytest.mark.parametrize("layer", [0, N - 1])
def test_a_layers_whole_input_patched_is_the_clean_run(
    model: DecoderFiles, patchings: dict[int, Patching], layer: int
) -> None:
    i = 2  # the texts differ at their first token, so every row counts
    p = patchings[i]
    clean, corrupted = runs(model, i)
    x_n = run_from(model, layer, clean.hidden_states[layer][None])  # (1, d_model)
    m = logit_difference(model, x_n, p.target, p.contrast)
    assert float(m[0]) == pytest.approx(p.metric_clean, abs=1e-4)
    assert float(p.normalise(m)[0]) == pytest.approx(1.0, abs=1e-5)
    x_n = run_from(model, layer, corrupted.hidden_states[layer][None])
    assert float(p.normalise(logit_difference(model, x_n, p.target, p.contrast))[0]) == pytest.approx(0.0, abs=1e-5)


@pytest.mark.parametrize(("i", "layer", "row"), [(0, 10, 3), (2, 5, 0), (1, 17, 13)])
def test_a_residual_patch_equals_a_plain_run_with_that_row_replaced(
    model: DecoderFiles, patchings: dict[int, Patching], i: int, layer: int, row: int
) -> None:
    clean, corrupted = runs(model, i)
    x = corrupted.hidden_states[layer].copy()  # (T, d_model)
    x[row] = clean.hidden_states[layer, row]
    assert patchings[i].residual[layer, row] == pytest.approx(
        rest_of_the_model(model, layer, x, patchings[i]), abs=1e-4
    )


@pytest.mark.parametrize(("i", "layer", "head"), [(0, 23, 4), (2, 3, 7)])
def test_a_head_patch_equals_a_plain_run_with_that_heads_output_replaced(
    model: DecoderFiles, patchings: dict[int, Patching], i: int, layer: int, head: int
) -> None:
    clean, corrupted = runs(model, i)
    lw, eps = model.weights.layers[layer], model.config.eps
    x = corrupted.hidden_states[layer]  # (T, d_model)
    output = decoder_heads(model, layer, x, KVCache()).output.copy()  # (h, T, d_k)
    output[head] = decoder_heads(model, layer, clean.hidden_states[layer], KVCache()).output[head]
    x = x + concat_heads(output) @ lw.w_o
    x = x + swiglu(model, layer, rms_norm(x, lw.ffn_norm, eps))
    assert patchings[i].heads[layer, head] == pytest.approx(
        rest_of_the_model(model, layer + 1, x, patchings[i]), abs=1e-4
    )


def test_token_ids_and_a_head_switched_off(model: DecoderFiles, patchings: dict[int, Patching]) -> None:
    p = activation_patching(model, REF["clean_ids_0"], REF["corrupted_ids_0"], heads_off=frozenset({(23, 4)}))
    assert p.clean_tokens == patchings[0].clean_tokens
    assert p.heads[23, 4] == 0.0  # off in every run: its output is 0 whichever run it comes from
    assert not np.allclose(p.heads, patchings[0].heads, atol=1e-3)


def test_texts_of_different_token_counts_are_refused_by_name(model: DecoderFiles) -> None:
    with pytest.raises(ValueError, match=r"'The capital of France is' has 5 tokens .* 'The capital of the United"):
        activation_patching(model, "The capital of France is", "The capital of the United Kingdom is")


def test_runs_with_the_same_metric_are_refused(model: DecoderFiles) -> None:
    with pytest.raises(ValueError, match="same logit difference"):
        activation_patching(model, "The capital of France is", "The capital of France is")
