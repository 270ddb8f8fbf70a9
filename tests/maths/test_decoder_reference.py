"""The decoder's forward pass against Hugging Face transformers' LlamaForCausalLM on the same GGUF file: the
numbers in tests/fixtures/smollm2_reference.npz, written once by scripts/decoder_reference.py (which needs
transformers and torch; the project never does). Both compute in float32 from the same de-quantised weights,
so they differ only by the order of float32 sums: attention and probabilities within 1e-4, logits within 5e-3,
the residual stream within 1e-3 of each row's typical size; in practice far closer (each test also asserts
the closeness measured, not only the one allowed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.maths.decoder_files import (
    DECODER_SHA256,
    DecoderFiles,
    DecoderFilesError,
    decoder_file,
    load_decoder_files,
    read_decoder_file,
)
from app.maths.llama import (
    DecoderContinuation,
    DecoderRun,
    final_logits,
    head_at,
    lens,
    rms_norm,
    run_decoder,
    tokenize,
)
from app.maths.sampling import generate, temperature_softmax

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "smollm2_reference.npz"
with np.load(FIXTURE) as npz:  # strings are stored as unicode arrays: no pickle needed
    REF = dict(npz)
TOKENIZER_TEXTS = range(int(REF["tok_n"]))
TEXTS = range(int(REF["n_texts"]))
GENERATED = [i for i in TEXTS if f"generate_{i}" in REF]
HIDDEN_LAYERS = (0, 1, 2, 15, 29, 30)  # the rows of the residual stream the fixture keeps (0: the embeddings)
TOP = 50  # the candidates whose logits and probabilities are compared
# Hugging Face's q and k put the pair RoPE turns in columns (j, j + 32), the GGUF file (and so the app) in
# columns (2j, 2j + 1): Hugging Face's column j is the app's column HF_COLUMNS[j].
HF_COLUMNS = np.r_[0:64:2, 1:64:2]


@pytest.fixture(scope="module")
def model() -> DecoderFiles:
    return load_decoder_files()


@pytest.fixture(scope="module")
def runs(model: DecoderFiles) -> dict[int, DecoderRun]:
    return {i: run_decoder(model, str(REF[f"text_{i}"])) for i in TEXTS}


def test_the_fixture_holds_what_these_tests_read() -> None:
    assert len(TOKENIZER_TEXTS) >= 10 and len(TEXTS) >= 5 and GENERATED
    for i in TEXTS:
        t = len(REF[f"ids_{i}"])
        assert REF[f"hidden_{i}"].shape == (len(HIDDEN_LAYERS), t, 576)
        assert REF[f"attention_{i}"].shape == (30, 9, t, t)
        assert REF[f"lens_ids_{i}"].shape == REF[f"lens_probs_{i}"].shape == (30, t)
    assert all(REF[f"generate_{i}"].shape == (16,) for i in GENERATED)


def test_the_reference_was_made_from_the_file_the_app_checks(model: DecoderFiles) -> None:
    assert str(REF["sha256"]) == DECODER_SHA256 == model.sha256


def test_a_file_with_another_hash_is_refused_and_the_error_names_both() -> None:
    wrong = "0" * 64
    with pytest.raises(DecoderFilesError, match=f"sha256 {DECODER_SHA256}, expected {wrong}"):
        read_decoder_file(decoder_file(), expected_sha256=wrong)


@pytest.mark.parametrize("i", TOKENIZER_TEXTS)
def test_tokens_ids_and_decoding_agree_with_hugging_face(model: DecoderFiles, i: int) -> None:
    text = str(REF[f"tok_text_{i}"])
    read = tokenize(model, text)
    tokens, ids = read.tokens, read.ids
    assert list(tokens) == REF[f"tok_tokens_{i}"].tolist()
    np.testing.assert_array_equal(ids, REF[f"tok_ids_{i}"])
    assert ids.dtype == np.int64
    assert model.tokenizer.decode(ids.tolist(), skip_special_tokens=False) == text == str(REF[f"tok_decoded_{i}"])


@pytest.mark.parametrize("i", TEXTS)
def test_attention_and_next_token_agree_with_hugging_face(runs: dict[int, DecoderRun], i: int) -> None:
    run = runs[i]
    assert list(run.tokens) == REF[f"tokens_{i}"].tolist()
    np.testing.assert_array_equal(run.ids, REF[f"ids_{i}"])
    attention = REF[f"attention_{i}"]  # (30, 9, T, T)
    assert run.attention.shape == attention.shape
    np.testing.assert_allclose(run.attention, attention, atol=1e-4, rtol=0)
    assert np.abs(run.attention - attention).max() < 2e-5  # measured: under 7e-6

    logits = REF[f"logits_{i}"]  # (vocab,)
    top = np.argsort(-logits, kind="stable")[:TOP]
    np.testing.assert_allclose(run.logits[top], logits[top], atol=5e-3, rtol=0)
    assert np.abs(run.logits[top] - logits[top]).max() < 2e-4  # measured: under 3e-5
    p, p_ref = temperature_softmax(run.logits, 1.0), temperature_softmax(logits, 1.0)
    np.testing.assert_allclose(p[top], p_ref[top], atol=1e-4, rtol=0)
    if logits[top[0]] - logits[top[1]] > 0.05:  # the winner is not a near-tie: it must be the same token
        assert int(np.argmax(run.logits)) == int(top[0])


@pytest.mark.parametrize("i", TEXTS)
def test_residual_stream_agrees_with_hugging_face_row_by_row(model: DecoderFiles, runs: dict[int, DecoderRun],
                                                             i: int) -> None:
    """From layer ~12 on, the first token carries one activation near 22,500 while its others are near 50 and
    other tokens' near 1: one absolute tolerance would be either blind to the small rows or too tight for the
    big one. Each element is allowed 1e-3 of its row's median size, plus 1e-5 of itself (float32 keeps 7 digits
    through 30 layers of 576- and 1536-term sums)."""
    run = runs[i]
    hidden = run.hidden_states[list(HIDDEN_LAYERS)].astype(np.float64)  # (6, T, d_model)
    ref = REF[f"hidden_{i}"].astype(np.float64)
    assert hidden.shape == ref.shape
    np.testing.assert_array_equal(hidden[0], ref[0])  # the embeddings: the same rows of the same table
    typical = np.median(np.abs(ref), axis=-1, keepdims=True)  # (6, T, 1)
    allowed = 1e-3 * typical + 1e-5 * np.abs(ref)
    assert np.all(np.abs(hidden - ref) <= allowed), np.max(np.abs(hidden - ref) / allowed)
    assert np.max(np.abs(hidden - ref) / allowed) < 0.5  # measured: under 0.3
    assert np.abs(ref[3:, 0]).max() > 1000  # the big activation is really there to be compared
    normed = rms_norm(run.hidden_states[-1], model.weights.final_norm, model.config.eps)  # the LM head's input
    final = REF[f"final_normed_{i}"]
    np.testing.assert_allclose(normed, final, atol=1e-4 * np.abs(final).max(), rtol=0)


@pytest.mark.parametrize("i", TEXTS)
def test_logit_lens_agrees_with_hugging_face_at_every_layer_and_position(model: DecoderFiles,
                                                                         runs: dict[int, DecoderRun],
                                                                         i: int) -> None:
    run = runs[i]
    ids, probs = lens(model, run.hidden_states[1:])  # (30, T) each
    ref_ids, ref_probs = REF[f"lens_ids_{i}"], REF[f"lens_probs_{i}"]
    assert ids.shape == ref_ids.shape == (model.config.layers, len(run.ids))
    np.testing.assert_allclose(probs, ref_probs, atol=1e-3, rtol=0)
    assert np.abs(probs - ref_probs).max() < 1e-4  # measured: under 2e-5
    # A different top token is allowed only where the two are tied to within float32's reach: there the
    # app's own probabilities of both must be within 1e-4. (None are, on these texts.)
    for layer, t in zip(*np.nonzero(ids != ref_ids), strict=True):
        p = temperature_softmax(final_logits(model, run.hidden_states[layer + 1, t]), 1.0)
        assert p[ids[layer, t]] - p[ref_ids[layer, t]] < 1e-4, (layer, t)
    assert np.count_nonzero(ids != ref_ids) <= ids.size // 100
    assert ids[-1, -1] == int(np.argmax(run.logits))  # the last layer's lens reads the logits


@pytest.mark.parametrize("i", TEXTS)
def test_one_heads_vectors_agree_with_hugging_face(model: DecoderFiles, runs: dict[int, DecoderRun],
                                                   i: int) -> None:
    """x, q, k, v and the head's output, each within 5e-5 of the reference's largest entry (measured: under
    5e-6 of it); q and k after putting the app's interleaved columns in Hugging Face's half-split order."""
    layer, head = (int(v) for v in REF[f"head_{i}"])
    g = model.config.kv_head(head)
    assert g == head // 3
    heads = head_at(model, runs[i], layer)
    ours = {
        "x": heads.x,
        "q_pre": heads.q_pre[head][:, HF_COLUMNS],
        "k_pre": heads.k_pre[g][:, HF_COLUMNS],
        "q": heads.q[head][:, HF_COLUMNS],
        "k": heads.k[g][:, HF_COLUMNS],
        "v": heads.v[g],
        "head_output": heads.output[head],
    }
    for name, got in ours.items():
        ref = REF[f"{name}_{i}"]
        assert got.shape == ref.shape, name
        np.testing.assert_allclose(got, ref, atol=5e-5 * np.abs(ref).max(), rtol=0, err_msg=name)
    # The column order matters: unpermuted, the app's q is not Hugging Face's.
    assert not np.allclose(heads.q_pre[head], REF[f"q_pre_{i}"], atol=1e-2)


@pytest.mark.parametrize("i", GENERATED)
def test_greedy_generation_writes_hugging_faces_tokens(model: DecoderFiles, runs: dict[int, DecoderRun],
                                                       i: int) -> None:
    steps = generate(DecoderContinuation(model, runs[i].ids), 16, temperature=0)
    assert [s.id for s in steps] == REF[f"generate_{i}"].tolist()
