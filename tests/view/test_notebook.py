"""The exported notebook: valid against nbformat's schema, and run for real in a Python kernel (nbclient,
ipykernel), where its last cell compares its own NumPy rebuild with the page's numbers. Every preset, the
mechanisms no preset opens with (general score, ALiBi, learned positions, pre-norm GELU blocks, linear
attention under a mask, an output loss), and a tampered number, which must make the check fail."""

from __future__ import annotations

from dataclasses import replace

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from app.lesson.presets import PRESETS
from app.lesson.stages import BY_KEY
from app.maths.bert import run_model
from app.maths.model_files import load_model_files
from app.state.learning import Learning
from app.state.model_state import read_wordpieces
from app.state.page import preset_page
from app.state.scenario import Scenario, View
from app.view.notebook import attention_notebook, notebook_text
from app.view.notebook.model import model_notebook
from app.view.panels import page_stages

pytestmark = pytest.mark.kernel

CHECKED = "matrices agree with the page's"


def execute(nb: nbformat.NotebookNode) -> str:
    """Run every cell in a fresh kernel; the last cell's printed text."""
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    return "".join(out.get("text", "") for out in nb.cells[-1].outputs)


def checked_count(text: str) -> int:
    assert CHECKED in text, text
    return int(text.split()[1])


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_s_notebook_runs_and_agrees_with_the_page(preset: str) -> None:
    sc, view = preset_page(preset)
    nb = attention_notebook(sc, view)
    nbformat.validate(nb)
    sources = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "import torch" not in sources and "from app" not in sources  # NumPy only
    n = checked_count(execute(nb))
    assert n >= 11  # X, Q, K, V, scores, scaled, masked, A, head_out, concat, output at least
    if PRESETS[preset].goal:  # a loss: one head's backward pass too
        assert "dL_dscores" in sources and n >= 20


def _variant(preset: str, **changes: object) -> tuple[Scenario, View]:
    sc, view = preset_page(preset)
    return replace(sc, **changes), view


VARIANTS = {
    "general score, ALiBi": lambda: _variant("bank-money", score="general", positional_encoding="alibi"),
    "additive, learned positions, local mask": lambda: _variant(
        "default", score="additive", positional_encoding="learned", mask_mode="local", window=1),
    "pre-norm GELU blocks, sinusoidal": lambda: _variant(
        "block", blocks=3, norm="pre", activation="gelu", positional_encoding="sinusoidal"),
    "post-norm tanh-GELU blocks with cross-attention": lambda: _variant(
        "translate", blocks=2, activation="gelu_tanh"),
    "linear attention under a causal mask": lambda: _variant("linear", mask_mode="causal"),
    "RoPE with padding and temperature": lambda: _variant(
        "causal", positional_encoding="rope", padding=frozenset({1}), temperature=0.5),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_mechanisms_no_preset_opens_with(name: str) -> None:
    sc, view = VARIANTS[name]()
    checked_count(execute(attention_notebook(sc, view)))


@pytest.mark.parametrize("score", ["dot", "general", "additive"])
def test_an_output_loss_s_backward_pass_of_one_head(score: str) -> None:
    """The squared error of the output, head 2 of bank ② (three heads), with RoPE for the dot product."""
    sc, view = preset_page("bank-money")
    sc = replace(sc, score=score, positional_encoding="rope" if score == "dot" else "none")
    target = np.full((len(sc.tokens), sc.d_model), 0.25)
    view = replace(view, head=1, learning=Learning(goal="output", head=0, target=target))
    nb = attention_notebook(sc, view)
    assert "dL_dW_O" in "\n".join(c.source for c in nb.cells)
    assert checked_count(execute(nb)) >= 20


def test_a_tampered_number_makes_the_check_fail() -> None:
    sc, view = preset_page("causal")
    nb = attention_notebook(sc, view)
    state = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("tokens = "))
    first = repr(float(sc.x[0, 0]))
    assert first in state.source
    state.source = state.source.replace(first, repr(float(sc.x[0, 0]) + 0.001), 1)
    with pytest.raises(CellExecutionError, match="Not equal to tolerance"):
        execute(nb)


def test_the_notebook_holds_the_page_s_text_and_state() -> None:
    sc, view = preset_page("learn-translate")
    nb = nbformat.reads(notebook_text(sc, view), as_version=4)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for stage in page_stages(sc, view):  # every stage the page steps through, backward ones too
        assert f"### {stage.number}. " in markdown, stage.key
    assert BY_KEY["softmax"].explanation in markdown
    assert r"\sqrt{d_k}" in markdown  # the page's formulas, for Jupyter's MathJax
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert repr(list(sc.tokens)) in code and "W_Q = np.array(" in code and "target = np.array(" in code


def test_the_real_model_s_head_as_a_notebook() -> None:
    """Layer 3, head 4 on a sentence: the head's weight slices, Q … A·V, checked to float32 precision."""
    model = load_model_files()
    tokens = read_wordpieces(model, "The cat sat on the mat because it was tired.")
    nb = model_notebook(model, tokens.text, run_model(model, tokens), layer=2, head=3)
    nbformat.validate(nb)
    state = next(c.source for c in nb.cells if c.cell_type == "code" and c.source.startswith("tokens = "))
    assert "W_Q = np.array(" in state and "dtype=np.float32)  # (384, 32)" in state
    assert "it" in state and len(state) < 800_000  # one head's slices, not the model
    assert execute(nb).startswith("All 7 matrices agree")


def test_linear_attention_with_an_output_loss_stops_at_the_forward_pass_and_says_so() -> None:
    sc, view = preset_page("linear")
    target = np.zeros((len(sc.tokens), sc.d_model))
    view = replace(view, learning=Learning(goal="output", head=0, target=target))
    nb = attention_notebook(sc, view)
    assert "backward pass through linear attention" in "\n".join(c.source for c in nb.cells)
    checked_count(execute(nb))
