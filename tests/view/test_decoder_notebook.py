"""The language model's head as a notebook: run for real in a Python kernel (nbclient, ipykernel), where its last
cell checks its own NumPy rebuild against the page's numbers, for a head of the first layer and one of a deep
layer that read different key/value heads; a tampered number makes that check fail; the notebook imports only
NumPy; and its 4-bit weights are the model file's own blocks."""

from __future__ import annotations

import ast

import nbformat
import numpy as np
import pytest
from gguf import GGUFReader
from nbclient.exceptions import CellExecutionError
from nbformat.v4 import new_code_cell

from app.maths.decoder_files import decoder_file, load_decoder_files
from app.maths.llama import DecoderRun, run_decoder
from app.view.notebook.decoder import decoder_notebook, q4_1_blocks
from tests.view.test_notebook import execute

pytestmark = pytest.mark.kernel

TEXT = "Birds fly south in the winter."
# Prints the largest difference between the notebook's matrices and the page's: 0 on the page's own machine.
LARGEST_DIFFERENCE = new_code_cell(
    "print(max(float(np.abs(globals()[k][np.isfinite(v)] - v[np.isfinite(v)]).max()) for k, v in page.items()))")


@pytest.fixture(scope="module")
def run() -> DecoderRun:
    return run_decoder(load_decoder_files(), TEXT)


def code_cell(nb: nbformat.NotebookNode, start: str) -> nbformat.NotebookNode:
    return next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith(start))


@pytest.mark.parametrize(("layer", "head", "kv", "sharing"), [  # the last layer's kernel: in a full run
    (0, 0, 1, "1, 2, 3"), pytest.param(23, 7, 3, "7, 8, 9", marks=pytest.mark.slow)])
def test_a_head_s_notebook_runs_and_agrees_with_the_page(run: DecoderRun, layer: int, head: int, kv: int,
                                                         sharing: str) -> None:
    nb = decoder_notebook(load_decoder_files(), TEXT, run, layer, head)
    nbformat.validate(nb)
    assert f"layer {layer + 1}, head {head + 1}" in nb.cells[0].source and TEXT in nb.cells[0].source
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert f"key/value head {kv} of 3, which query heads {sharing} share" in markdown
    assert "W_Q = from_4_bits(q_Q, d_Q, m_Q)  # (576, 64)" in code_cell(nb, "# query head").source
    state = code_cell(nb, "x = ").source
    assert state.startswith("x = np.array(") and f"dtype=np.float32)  # ({len(run.tokens)}, 576)" in state
    assert len(nbformat.writes(nb)) < 1_000_000
    nb.cells.append(LARGEST_DIFFERENCE)
    assert float(execute(nb)) == 0.0  # bit for bit, on the machine that computed the page
    check = "".join(out.get("text", "") for out in nb.cells[-2].outputs)
    assert check.startswith("All 11 matrices agree with the page's")


@pytest.mark.parametrize(("cell", "number"), [  # a tampered x: in a full run
    pytest.param("x = ", "x", marks=pytest.mark.slow), ("# key/value", "q_K")], ids=["x", "W_K"])
def test_a_tampered_number_makes_the_check_fail(run: DecoderRun, cell: str, number: str) -> None:
    """The first number of x moved by 0.001, or the first of the shared key head's 4-bit weights by one step."""
    model = load_decoder_files()
    nb = decoder_notebook(model, TEXT, run, 0, 0)
    code = code_cell(nb, cell)
    if number == "x":
        first = str(np.float32(run.hidden_states[0][0, 0]))
        new = str(np.float32(run.hidden_states[0][0, 0] + 0.001))
        assert f"[{first}, " in code.source
    else:
        q = int(q4_1_blocks(model.weights.layers[0].w_k[0])[0][0, 0])
        first, new = str(q), str(q - 1 if q else 1)
        assert f"q_K = np.array([\n    [{first}, " in code.source
    code.source = code.source.replace(f"[{first}, ", f"[{new}, ", 1)
    with pytest.raises(CellExecutionError, match="Not equal to tolerance"):
        execute(nb)


def test_the_notebook_imports_only_numpy(run: DecoderRun) -> None:
    nb = decoder_notebook(load_decoder_files(), TEXT, run, 4, 2)
    imported = set()
    for cell in nb.cells:
        if cell.cell_type == "code":
            for node in ast.walk(ast.parse(cell.source)):
                if isinstance(node, ast.Import):
                    imported |= {alias.name for alias in node.names}
                elif isinstance(node, ast.ImportFrom):
                    imported.add(node.module or "")
    assert imported == {"numpy"}


@pytest.mark.slow
def test_the_4_bit_weights_are_the_file_s_own_blocks() -> None:
    """Every layer's W_Q, W_K and W_V slices, written as whole numbers, steps and minima, are the Q4_1 blocks of
    the GGUF file (2 bytes of float16 step, 2 of float16 minimum, then 16 bytes: element j in the low 4 bits of
    byte j, element j + 16 in the high 4), and build back the page's float32 weights bit for bit."""
    model = load_decoder_files()
    tensors = {t.name: t for t in GGUFReader(str(decoder_file())).tensors}
    d_k = model.config.d_k
    for layer, lw in enumerate(model.weights.layers):
        for name, weights in (("attn_q", lw.w_q), ("attn_k", lw.w_k), ("attn_v", lw.w_v)):
            raw = np.asarray(tensors[f"blk.{layer}.{name}.weight"].data)  # (out, 18 × 20 bytes)
            raw = raw.reshape(raw.shape[0], -1, 20)  # (out, 18, 20)
            steps = raw[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)  # (out, 18)
            minima = raw[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float32)  # (out, 18)
            nibbles = np.concatenate([raw[..., 4:] & 0x0F, raw[..., 4:] >> 4], axis=-1)  # (out, 18, 32)
            for head, w in enumerate(weights):
                rows = slice(head * d_k, (head + 1) * d_k)  # this head's output rows of the file's matrix
                q, d, m = q4_1_blocks(w)
                np.testing.assert_array_equal(d, steps[rows].T)
                np.testing.assert_array_equal(m, minima[rows].T)
                np.testing.assert_array_equal(q, nibbles[rows].transpose(1, 2, 0).reshape(-1, d_k))
                np.testing.assert_array_equal(q * np.repeat(d, 32, axis=0) + np.repeat(m, 32, axis=0), w)


def test_a_weight_that_is_not_4_bit_blocks_is_refused() -> None:
    w = np.linspace(-1.0, 1.0, 576 * 64, dtype=np.float32).reshape(576, 64)
    with pytest.raises(ValueError, match="Q4_1"):
        q4_1_blocks(w)
