"""The notebook routes: POST /export/notebook (the page's form), GET /export/notebook?<a permalink's query>,
and GET /model/notebook?<the model page's query>; a bad field is a 422 naming it, never a 5xx."""

from __future__ import annotations

import json

import nbformat
from fastapi.testclient import TestClient

from app.state.page import preset_page
from app.state.permalink import state_query
from tests.conftest import form_fields

IPYNB = "application/x-ipynb+json"


def notebook_of(response) -> nbformat.NotebookNode:
    assert response.status_code == 200, response.text[:300]
    assert response.headers["content-type"] == IPYNB
    assert response.headers["content-disposition"].startswith("attachment; filename=")
    nb = nbformat.reads(response.text, as_version=4)
    nbformat.validate(nb)
    return nb


def code_of(nb: nbformat.NotebookNode) -> str:
    return "\n".join(c.source for c in nb.cells if c.cell_type == "code")


def test_a_preset_link_s_notebook(client: TestClient) -> None:
    nb = notebook_of(client.get("/export/notebook?preset=causal&stage=softmax"))
    code = code_of(nb)
    assert "mask = np.array(" in code and "A = softmax_rows(masked)" in code


def test_a_whole_state_link_s_notebook_holds_that_state(client: TestClient) -> None:
    sc, view = preset_page("bank-river")
    query = dict(state_query(sc, view))
    query["x-0-0"] = "0.123456789"
    code = code_of(notebook_of(client.get("/export/notebook", params=query)))
    assert "0.123456789" in code


def test_the_page_s_form_posted_gives_the_same_state(client: TestClient) -> None:
    page = client.get("/?preset=learn-translate")
    assert 'id="open-notebook"' in page.text
    fields = form_fields(page.text)
    fields["x-1-2"] = "0.75"
    nb = notebook_of(client.post("/export/notebook", data=fields))
    code = code_of(nb)
    assert "0.75" in code and "dL_dscores" in code  # the Learn panel's goal: the backward pass too


def test_a_bad_field_is_a_422_naming_it(client: TestClient) -> None:
    sc, view = preset_page("default")
    query = dict(state_query(sc, view))
    query["x-0-0"] = "banana"
    r = client.get("/export/notebook", params=query)
    assert r.status_code == 422
    assert json.loads(r.text)["detail"][0]["field"] == "x-0-0"
    r = client.post("/export/notebook", data={"shape": "nonsense"})
    assert r.status_code == 422


def test_the_model_page_s_notebook(client: TestClient) -> None:
    page = client.get("/model?text=Birds+fly+south.&layer=2&head=7")
    assert 'id="model-notebook"' in page.text
    nb = notebook_of(client.get("/model/notebook?text=Birds+fly+south.&layer=2&head=7"))
    assert "layer 2, head 7" in nb.cells[0].source and "Birds fly south." in nb.cells[0].source
    r = client.get("/model/notebook?text=Birds&layer=9&head=1")
    assert r.status_code == 422 and json.loads(r.text)["detail"][0]["field"] == "layer"
