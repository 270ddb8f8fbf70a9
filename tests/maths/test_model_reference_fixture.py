"""tests/fixtures/minilm_reference.npz (written by scripts/model_reference.py from transformers' BertModel): its
numbers agree with each other, so a corrupted or hand-edited fixture fails here rather than in the model's tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "minilm_reference.npz"
N_LAYERS, H, D_MODEL, D_K = 6, 12, 384, 32  # all-MiniLM-L6-v2
CLS, SEP = 101, 102

with np.load(FIXTURE) as npz:  # strings are stored as unicode arrays: no pickle needed
    REF = dict(npz)
SENTENCES = range(int(REF["n_sentences"]))


@pytest.mark.parametrize("i", SENTENCES)
def test_every_array_has_the_sentence_length(i: int) -> None:
    ids = REF[f"ids_{i}"]
    t = len(ids)
    assert 2 < t <= 16
    assert ids[0] == CLS and ids[-1] == SEP
    assert REF[f"tokens_{i}"].shape == (t,)
    assert REF[f"tokens_{i}"][0] == "[CLS]" and REF[f"tokens_{i}"][-1] == "[SEP]"
    assert REF[f"attention_{i}"].shape == (N_LAYERS, H, t, t)
    assert REF[f"hidden_{i}"].shape == (N_LAYERS + 1, t, D_MODEL)
    assert REF[f"embedding_{i}"].shape == (D_MODEL,)
    for name in "qkv":
        assert REF[f"{name}_{i}"].shape == (t, D_K)
        assert REF[f"{name}_{i}"].dtype == np.float32
    assert REF[f"attention_{i}"].dtype == REF[f"hidden_{i}"].dtype == REF[f"embedding_{i}"].dtype == np.float32
    assert str(REF[f"text_{i}"])


@pytest.mark.parametrize("i", SENTENCES)
def test_every_attention_row_is_a_distribution(i: int) -> None:
    attention = REF[f"attention_{i}"].astype(np.float64)  # (N_LAYERS, H, T, T)
    assert np.all(attention >= 0)
    assert np.allclose(attention.sum(axis=-1), 1.0, rtol=0, atol=1e-5)


@pytest.mark.parametrize("i", SENTENCES)
def test_embedding_is_the_normalised_mean_of_the_last_layer(i: int) -> None:
    embedding = REF[f"embedding_{i}"].astype(np.float64)
    assert np.linalg.norm(embedding) == pytest.approx(1.0, abs=1e-5)
    mean = REF[f"hidden_{i}"][-1].astype(np.float64).mean(axis=0)  # (D_MODEL,)
    assert np.allclose(embedding, mean / np.linalg.norm(mean), rtol=0, atol=1e-5)


@pytest.mark.parametrize("i", SENTENCES)
def test_stored_head_qkv_give_its_stored_attention(i: int) -> None:
    layer, head = REF[f"head_{i}"]
    q, k = REF[f"q_{i}"].astype(np.float64), REF[f"k_{i}"].astype(np.float64)  # (T, D_K)
    scores = q @ k.T / np.sqrt(D_K)  # (T, T)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    assert np.allclose(weights, REF[f"attention_{i}"][layer, head], rtol=0, atol=1e-5)


def test_stored_heads_differ_across_sentences() -> None:
    heads = {tuple(REF[f"head_{i}"].tolist()) for i in SENTENCES}
    assert len(heads) == len(SENTENCES)
    assert all(0 <= layer < N_LAYERS and 0 <= head < H for layer, head in heads)


def test_cosine_is_the_dot_product_of_the_stored_embeddings() -> None:
    dot = float(REF["embedding_0"].astype(np.float64) @ REF["embedding_1"].astype(np.float64))
    assert float(REF["cos_01"]) == pytest.approx(dot, abs=1e-6)


def test_head_off_embedding_is_normalised_and_different() -> None:
    off = REF["embedding_off_0"].astype(np.float64)
    assert REF["head_off"].tolist() == [3, 4]
    assert np.linalg.norm(off) == pytest.approx(1.0, abs=1e-5)
    assert not np.allclose(off, REF["embedding_0"], atol=1e-4)
    assert -1.0 <= float(REF["cos_01_off"]) <= 1.0
    assert float(REF["cos_01_off"]) != pytest.approx(float(REF["cos_01"]), abs=1e-4)


def test_provenance_is_recorded() -> None:
    sha256 = str(REF["sha256"])
    assert len(sha256) == 64 and set(sha256) <= set("0123456789abcdef")
    assert str(REF["transformers_version"]) and str(REF["torch_version"])
