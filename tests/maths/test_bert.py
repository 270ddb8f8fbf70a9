"""The pretrained model's forward pass (app.maths.bert) and its files (app.maths.model_files): the files are
the ones checked, the pass agrees with per-head loops written here from the paper's formulas, and GELU's
erfc with the C library's."""

from __future__ import annotations

import math
import zipfile
from pathlib import Path

import numpy as np
import pytest

from app.maths.bert import cosine, erfc, gelu, head_result, layer_attention_run, run_model, tokenize
from app.maths.model_files import MINILM_L6, ModelFilesError, load_model_files, model_zip, read_model_files

SENTENCE = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="module")
def model():
    return load_model_files()


def test_the_files_are_the_checked_ones_and_their_sizes_are_the_apis(model) -> None:
    cfg = model.config
    assert cfg == MINILM_L6 and (cfg.layers, cfg.heads, cfg.d_model, cfg.d_k, cfg.d_ff) == (6, 12, 384, 32, 1536)
    assert cfg.vocab == 30522 and cfg.eps == 1e-12
    assert len(model.weights.layers) == 6 and model.weights.layers[0].w_q.shape == (12, 384, 32)


def test_weights_whose_sha256_differs_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelFilesError, match="sha256"):
        read_model_files(model_zip(), expected_sha256="0" * 64)
    changed = tmp_path / "model.zip"
    with zipfile.ZipFile(model_zip()) as src, zipfile.ZipFile(changed, "w") as dst:
        for name in ("config.json", "tokenizer.json"):
            dst.writestr(name, src.read(name))
        raw = bytearray(src.read("model.safetensors"))
        raw[-1] ^= 1  # one bit of one weight
        dst.writestr("model.safetensors", bytes(raw))
    with pytest.raises(ModelFilesError, match="expected"):
        read_model_files(changed)


def test_the_tokenizer_is_uncased_wordpiece_between_cls_and_sep(model) -> None:
    t = tokenize(model, "Tokenizers split UNBELIEVABLY rare words!")
    assert t.tokens[0] == "[CLS]" and t.tokens[-1] == "[SEP]"
    assert all(tok == tok.lower() for tok in t.tokens[1:-1])
    assert any(tok.startswith("##") for tok in t.tokens)  # a rare word in pieces
    assert len(t.ids) == len(t.tokens) and t.ids[0] == 101 and t.ids[-1] == 102


def test_erfc_and_gelu_agree_with_the_c_librarys_erf() -> None:
    x = np.linspace(-10, 10, 40001)
    expected = np.array([math.erfc(v) for v in x])
    assert np.max(np.abs(erfc(x) - expected) / expected) < 1.2e-7
    g = gelu(x.astype(np.float32))
    exact = np.array([0.5 * v * math.erfc(-v / math.sqrt(2)) for v in x.astype(np.float32).astype(np.float64)])
    assert g.dtype == np.float32
    assert np.max(np.abs(g - exact)) < 5e-7


def reference_layer(model, layer: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One BERT layer written head by head from the formulas, in float64, with Hugging Face's tensors."""
    lw = model.weights.layers[layer]
    x = x.astype(np.float64)
    heads, weights = [], []
    for i in range(model.config.heads):
        q = x @ lw.w_q[i] + lw.b_q[i]
        k = x @ lw.w_k[i] + lw.b_k[i]
        v = x @ lw.w_v[i] + lw.b_v[i]
        s = q @ k.T / math.sqrt(q.shape[1])
        a = np.exp(s - s.max(axis=1, keepdims=True))
        a /= a.sum(axis=1, keepdims=True)
        weights.append(a)
        heads.append(a @ v)

    def ln(z, g, b):
        return (z - z.mean(1, keepdims=True)) / np.sqrt(z.var(1, keepdims=True) + 1e-12) * g + b

    attended = ln(x + np.concatenate(heads, axis=1) @ lw.w_o + lw.b_o, lw.ln1_gamma, lw.ln1_beta)
    pre = attended @ lw.ffn_w1 + lw.ffn_b1
    hidden = pre * 0.5 * np.vectorize(math.erfc)(-pre / math.sqrt(2))
    return ln(attended + hidden @ lw.ffn_w2 + lw.ffn_b2, lw.ln2_gamma, lw.ln2_beta), np.stack(weights)


def test_every_layer_agrees_with_a_per_head_loop_in_float64(model) -> None:
    run = run_model(model, tokenize(model, SENTENCE))
    t = len(run.tokens)
    assert run.attention.shape == (6, 12, t, t) and run.hidden_states.shape == (7, t, 384)
    for layer in range(6):
        out, weights = reference_layer(model, layer, run.hidden_states[layer])
        np.testing.assert_allclose(run.attention[layer], weights, atol=2e-6)
        np.testing.assert_allclose(run.hidden_states[layer + 1], out, atol=2e-4)
    mean = run.hidden_states[-1].astype(np.float64).mean(axis=0)
    np.testing.assert_allclose(run.embedding, mean / np.linalg.norm(mean), atol=1e-6)
    np.testing.assert_allclose(run.attention.sum(axis=-1), 1.0, atol=1e-5)


def test_one_heads_step_through_is_the_layers_own_numbers(model) -> None:
    run = run_model(model, tokenize(model, SENTENCE))
    h = head_result(model, run, 2, 5)
    layer = layer_attention_run(model, run, 2)
    np.testing.assert_array_equal(h.softmax, run.attention[2, 5])
    np.testing.assert_array_equal(layer.heads[5].q, h.q)
    np.testing.assert_allclose(h.scaled, h.scores / math.sqrt(32), rtol=1e-6)
    np.testing.assert_allclose(h.output, h.softmax @ h.v, atol=1e-6)
    np.testing.assert_array_equal(layer.x, run.hidden_states[2])
    assert layer.num_heads == 12 and layer.concat.shape == (len(run.tokens), 384)


def test_a_head_switched_off_weighs_nothing_and_moves_the_embedding(model) -> None:
    tokens = tokenize(model, SENTENCE)
    on = run_model(model, tokens)
    off = run_model(model, tokens, frozenset({(3, 4)}))
    assert not off.attention[3, 4].any()
    np.testing.assert_array_equal(off.attention[:3], on.attention[:3])  # layers before it are untouched
    np.testing.assert_array_equal(off.attention[3, :4], on.attention[3, :4])
    assert 0.9 < cosine(on.embedding, off.embedding) < 1.0


def test_sentences_that_mean_alike_have_close_embeddings(model) -> None:
    def emb(text: str) -> np.ndarray:
        return run_model(model, tokenize(model, text)).embedding

    cat = emb("A cat sits on the mat.")
    assert cosine(cat, emb("A kitten is sitting on a rug.")) > cosine(cat, emb("Stock markets fell sharply today."))
