"""Attention rollout (app.maths.attribution.attention_rollout) against its formula written as a loop over
transformers' own attentions (the reference files of both real models), and what it says about SmolLM2."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.maths.attribution import attention_rollout
from app.maths.bert import run_model, tokenize
from app.maths.decoder_files import load_decoder_files
from app.maths.llama import run_decoder
from app.maths.model_files import load_model_files

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def rollout_by_hand(attention: np.ndarray) -> np.ndarray:
    """Abnar & Zuidema's rule, one cell at a time: Â = (mean over heads + I) / 2, rows to 1, R = Â_N … Â_1."""
    n, h, t, _ = attention.shape
    rolled = [[float(i == j) for j in range(t)] for i in range(t)]
    for layer in range(n):
        mixed = [[sum(float(attention[layer, k, i, j]) for k in range(h)) / h / 2 + (0.5 if i == j else 0.0)
                  for j in range(t)] for i in range(t)]
        mixed = [[v / sum(row) for v in row] for row in mixed]
        rolled = [[sum(mixed[i][m] * rolled[m][j] for m in range(t)) for j in range(t)] for i in range(t)]
    return np.array(rolled)


@pytest.mark.parametrize(("fixture", "i"), [("smollm2_reference.npz", 0), ("smollm2_reference.npz", 1),
                                            ("minilm_reference.npz", 0), ("minilm_reference.npz", 1)])
def test_rollout_of_transformers_attentions_equals_the_formula(fixture: str, i: int) -> None:
    with np.load(FIXTURES / fixture) as npz:
        attention = npz[f"attention_{i}"]
    got = attention_rollout(attention)
    np.testing.assert_allclose(got, rollout_by_hand(attention), atol=1e-12)
    np.testing.assert_allclose(got.sum(axis=-1), 1.0, atol=1e-12)


def test_the_apps_rollout_equals_the_one_of_transformers_attentions() -> None:
    with np.load(FIXTURES / "smollm2_reference.npz") as npz:
        text, attention = str(npz["text_1"]), npz["attention_1"]
    np.testing.assert_allclose(attention_rollout(run_decoder(load_decoder_files(), text).attention),
                               attention_rollout(attention), atol=1e-4)
    with np.load(FIXTURES / "minilm_reference.npz") as npz:
        text, attention = str(npz["text_0"]), npz["attention_0"]
    model = load_model_files()
    np.testing.assert_allclose(attention_rollout(run_model(model, tokenize(model, text)).attention),
                               attention_rollout(attention), atol=1e-4)


def test_on_smollm2_the_first_token_takes_nearly_every_row() -> None:
    with np.load(FIXTURES / "smollm2_reference.npz") as npz:
        rolled = attention_rollout(npz["attention_1"])
    assert rolled[:, 0].min() >= 0.999  # the attention sink: said on the page and in the API's description
    assert np.allclose(np.triu(rolled, 1), 0.0)  # causal: nothing flows from a later token
