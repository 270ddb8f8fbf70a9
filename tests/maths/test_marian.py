"""The translator's files and forward pass, checked by hand: the Marian reader against the file's own sizes, the
sinusoids and the SSRU against their formulas, every attention row a distribution, one head's softmax and output
recomputed from its q, k and v, the shortlist obeyed, and the bounds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.maths.marian import (
    CANDIDATES,
    END,
    MAX_SOURCE_PIECES,
    cross_head,
    encoder_head,
    positions,
    ssru,
    translate,
)
from app.maths.marian_files import (
    TranslatorFilesError,
    direction_files,
    load_translator_files,
    model_options,
    read_marian,
    read_shortlist,
)

BANK = "The bank of the river was muddy."


@pytest.fixture(scope="module")
def files():
    return load_translator_files("en-pt")


@pytest.fixture(scope="module")
def river(files):
    return translate(files, BANK)


def test_the_reader_accounts_for_every_byte_and_reads_the_model_s_own_sizes(files) -> None:
    data = direction_files("en-pt")["model"].read_bytes()
    items = read_marian(data)  # raises unless the items end exactly at the file's end
    assert len(items) == 195
    options = model_options(items["special:model.yml"][2].decode())
    assert (options["enc-depth"], options["dec-depth"], options["dim-emb"], options["transformer-heads"]) == \
        ("6", "2", "256", "8")
    cfg = files.config
    assert (cfg.encoder_layers, cfg.decoder_layers, cfg.d_model, cfg.heads, cfg.d_k, cfg.d_ff, cfg.vocab) == \
        (6, 2, 256, 8, 32, 1536, 32000)
    assert files.matrix("encoder_l1_ffn_W1").shape == (256, 1536)  # (k, m): x·W₁
    assert files.matrix("encoder_l1_ffn_W2").shape == (1536, 256)


def test_a_matrix_is_its_int8_values_over_its_multiplier(files) -> None:
    kind, shape, raw = read_marian(direction_files("en-pt")["model"].read_bytes())["encoder_l1_self_Wq"]
    k, m = shape
    stored = np.frombuffer(raw, np.int8, count=k * m).reshape(m, k)  # Bᵀ, row by row
    multiplier = np.frombuffer(raw, "<f4", count=1, offset=k * m)[0]
    assert kind == 0x4101
    assert files.matrix("encoder_l1_self_Wq")[3, 7] == np.float32(stored[7, 3]) / multiplier
    assert np.abs(stored).max() == 127  # quantised to its largest value


def test_a_damaged_file_is_refused_with_a_reason() -> None:
    data = bytearray(direction_files("en-pt")["model"].read_bytes())
    with pytest.raises(TranslatorFilesError, match="end at byte"):
        read_marian(bytes(data[:-10]))
    data[0] = 2
    with pytest.raises(TranslatorFilesError, match="version 2"):
        read_marian(bytes(data))
    with pytest.raises(TranslatorFilesError, match="lengths"):
        read_shortlist(direction_files("en-pt")["shortlist"].read_bytes()[:-4])


def test_the_sinusoids_by_hand() -> None:
    pe = positions(0, 5, 256)
    assert pe.shape == (5, 256)
    p, i = 3, 10
    angle = p * math.exp(-i * math.log(10000.0) / 127)
    assert pe[p, i] == pytest.approx(math.sin(angle), abs=1e-6)
    assert pe[p, 128 + i] == pytest.approx(math.cos(angle), abs=1e-6)
    assert np.array_equal(pe[0], np.r_[np.zeros(128), np.ones(128)])
    assert np.allclose(positions(2, 3, 256), pe[2:5], atol=1e-6)


def test_one_ssru_step_by_hand(files) -> None:
    rng = np.random.default_rng(0)
    y = rng.normal(size=(1, 256)).astype(np.float32)
    c_prev = rng.normal(size=(1, 256)).astype(np.float32)
    out, c = ssru(files, "decoder_l1_rnn", y, c_prev)
    w = {k: v.astype(np.float64) for k, v in files.weights.items() if k.startswith("decoder_l1_rnn")}
    f = 1 / (1 + np.exp(-(y @ w["decoder_l1_rnn_Wf"] + w["decoder_l1_rnn_bf"])))
    c_hand = f * c_prev + (1 - f) * (y @ w["decoder_l1_rnn_W"])
    z = y + np.maximum(c_hand, 0)
    normed = (z - z.mean()) / np.sqrt(z.var() + 1e-9)
    out_hand = normed * w["decoder_l1_rnn_ffn_ln_scale"] + w["decoder_l1_rnn_ffn_ln_bias"]
    assert np.allclose(c, c_hand, atol=1e-5)
    assert np.allclose(out, out_hand, atol=1e-4)


def test_every_attention_row_is_a_distribution(river) -> None:
    s, t = len(river.source), len(river.target)
    assert river.encoder_attention.shape == (6, 8, s, s)
    assert river.cross_attention.shape == (2, 8, t, s)
    assert np.allclose(river.encoder_attention.sum(-1), 1, atol=1e-5)
    assert np.allclose(river.cross_attention.sum(-1), 1, atol=1e-5)
    assert (river.cross_attention >= 0).all()


def test_one_cross_head_recomputed_from_its_q_k_and_v(files, river) -> None:
    for layer, head in ((0, 3), (1, 0)):
        h = cross_head(files, river, layer, head)
        assert h.q.shape == (len(river.target), 32) and h.k.shape == h.v.shape == (len(river.source), 32)
        q, k, v = (m.astype(np.float64) for m in (h.q, h.k, h.v))
        scaled = q @ k.T / math.sqrt(32)
        weights = np.exp(scaled - scaled.max(1, keepdims=True))
        weights /= weights.sum(1, keepdims=True)
        assert np.allclose(h.softmax, weights, atol=1e-5)
        assert np.allclose(h.output, weights @ v, atol=1e-5)
        assert np.allclose(h.softmax, river.cross_attention[layer, head], atol=1e-5)  # what each step used


def test_one_encoder_head_is_the_encoder_s_map(files, river) -> None:
    h = encoder_head(files, river, 4, 2)
    assert np.allclose(h.softmax, river.encoder_attention[4, 2], atol=1e-6)
    assert np.allclose(h.output, h.softmax @ h.v, atol=1e-5)


def test_the_pieces_the_steps_and_the_shortlist(files, river) -> None:
    assert river.source[-1] == "</s>" and river.source_ids[-1] == END
    assert river.target[:2] == ("▁A", "▁margem") and river.text.startswith("A margem do rio")
    assert [s.id for s in river.steps] == [*river.target_ids.tolist(), END]  # the last step chose the end
    for step in river.steps:
        assert step.id in river.shortlist and step.candidates[0][0] == step.id
        assert len(step.candidates) == CANDIDATES
        probabilities = [p for _, _, p in step.candidates]
        assert probabilities == sorted(probabilities, reverse=True) and 0 < sum(probabilities) <= 1 + 1e-9
    allowed = set(river.shortlist.tolist())
    assert set(range(50)) <= allowed and set(river.source_ids.tolist()) <= allowed


def test_the_guided_head_aligns_the_bank_with_its_translation(river) -> None:
    assert river.alignment.shape == (len(river.target), len(river.source))
    looked_at = [river.source[j] for j in river.alignment.argmax(axis=1)]
    assert looked_at[river.target.index("▁margem")] == "▁bank"
    assert looked_at[river.target.index("▁rio")] == "▁river"


def test_too_long_a_text_is_refused_naming_the_field(files) -> None:
    with pytest.raises(ValueError, match=f"text: .* more than {MAX_SOURCE_PIECES}"):
        translate(files, "word " * 200)
