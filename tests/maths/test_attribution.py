"""Direct logit attribution (app.maths.attribution) against PyTorch hooks on transformers' reading of the same GGUF
file (tests/fixtures/smollm2_attribution.npz, written by scripts/attribution_reference.py): each head's, each
feed-forward block's and the embedding's share of the logit, within 1e-3, and the parts adding up to the logit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.maths.attribution import logit_attribution, residual_parts
from app.maths.decoder_files import DecoderFiles, load_decoder_files
from app.maths.llama import DecoderRun, run_decoder

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "smollm2_attribution.npz"
with np.load(FIXTURE) as npz:
    REF = dict(npz)
TEXTS = range(int(REF["n_texts"]))


@pytest.fixture(scope="module")
def model() -> DecoderFiles:
    return load_decoder_files()


@pytest.fixture(scope="module")
def runs(model: DecoderFiles) -> dict[int, DecoderRun]:
    return {i: run_decoder(model, str(REF[f"text_{i}"])) for i in TEXTS}


@pytest.mark.parametrize("i", TEXTS)
def test_each_parts_share_of_the_logit_equals_the_hooks(model: DecoderFiles, runs: dict[int, DecoderRun],
                                                        i: int) -> None:
    run = runs[i]
    target = int(REF[f"target_{i}"])
    assert int(np.argmax(run.logits)) == target
    a = logit_attribution(model, run, target)
    np.testing.assert_allclose(a.heads, REF[f"heads_{i}"], atol=1e-3, rtol=0)
    np.testing.assert_allclose(a.mlp, REF[f"mlp_{i}"], atol=1e-3, rtol=0)
    assert a.embedding == pytest.approx(float(REF[f"embedding_{i}"]), abs=1e-3)
    assert a.logit == pytest.approx(float(REF[f"logit_{i}"]), abs=1e-3)
    assert a.total == pytest.approx(a.logit, abs=1e-3)  # the parts add up to the logit


@pytest.mark.parametrize("i", TEXTS)
def test_why_the_target_and_not_the_runner_up_equals_the_hooks(model: DecoderFiles, runs: dict[int, DecoderRun],
                                                               i: int) -> None:
    target, contrast = int(REF[f"target_{i}"]), int(REF[f"contrast_{i}"])
    a = logit_attribution(model, runs[i], target, contrast)
    np.testing.assert_allclose(a.heads, REF[f"heads_c_{i}"], atol=1e-3, rtol=0)
    np.testing.assert_allclose(a.mlp, REF[f"mlp_c_{i}"], atol=1e-3, rtol=0)
    assert a.logit == pytest.approx(float(REF[f"difference_{i}"]), abs=1e-3)
    assert a.total == pytest.approx(a.logit, abs=1e-3)


def test_the_residual_parts_add_up_to_the_last_layers_output(model: DecoderFiles, runs: dict[int, DecoderRun]) -> None:
    run = runs[0]
    embedding, heads, mlp = residual_parts(model, run)
    np.testing.assert_allclose(embedding + heads.sum(axis=(0, 1)) + mlp.sum(axis=0), run.hidden_states[-1, -1],
                               atol=1e-3)
    np.testing.assert_array_equal(embedding, model.weights.embedding[run.ids[-1]])


def test_a_head_switched_off_has_no_share(model: DecoderFiles) -> None:
    text = str(REF["text_0"])
    run = run_decoder(model, text, frozenset({(23, 4)}))
    a = logit_attribution(model, run, int(REF["target_0"]))
    assert a.heads[23, 4] == 0.0
    assert a.total == pytest.approx(a.logit, abs=1e-3)
