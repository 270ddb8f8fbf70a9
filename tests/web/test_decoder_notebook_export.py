"""GET /decoder/notebook?<the "Next word" page's query>: the head the page steps through as a notebook, linked
from the page; a bad field is a 422 naming it, never a 5xx."""

from __future__ import annotations

import json

import nbformat
from fastapi.testclient import TestClient

from app.maths.decoder_files import load_decoder_files
from app.serving.real_models import language_model
from app.state.decoder_state import DecoderPage
from app.view.decoder_view import decoder_catalogue_view, default_head

IPYNB = "application/x-ipynb+json"
QUERY = "text=Birds+fly+south.&layer=3&head=5"


def test_the_page_links_its_head_s_notebook(client: TestClient) -> None:
    load_decoder_files()  # the page answers 503 "loading" until the model is read and its heads measured
    decoder_catalogue_view()
    assert language_model().ready()
    r = client.get(f"/decoder?{QUERY}")
    assert r.status_code == 200
    assert 'id="decoder-notebook"' in r.text
    assert f'href="/decoder/notebook?{QUERY.replace("&", "&amp;")}" download' in r.text


def test_a_permalink_s_notebook(client: TestClient) -> None:
    r = client.get(f"/decoder/notebook?{QUERY}")
    assert r.status_code == 200, r.text[:300]
    assert r.headers["content-type"] == IPYNB
    assert r.headers["content-disposition"] == 'attachment; filename="attention-decoder.ipynb"'
    nb = nbformat.reads(r.text, as_version=4)
    nbformat.validate(nb)
    assert "layer 3, head 5" in nb.cells[0].source and "Birds fly south." in nb.cells[0].source
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "tokens = ['Birds', 'Ġfly', 'Ġsouth', '.']" in code and "W_Q = from_4_bits(" in code


def test_without_a_head_the_head_the_page_chooses(client: TestClient) -> None:
    r = client.get("/decoder/notebook?text=Birds+fly+south.")
    assert r.status_code == 200
    layer, head = default_head(DecoderPage(text="Birds fly south."))
    assert f"layer {layer + 1}, head {head + 1}" in nbformat.reads(r.text, as_version=4).cells[0].source


def test_a_bad_field_is_a_422_naming_it(client: TestClient) -> None:
    r = client.get("/decoder/notebook?text=Birds&layer=31&head=1")
    assert r.status_code == 422
    assert r.headers["content-type"] == "application/json"
    assert json.loads(r.text)["detail"][0]["field"] == "layer"
    r = client.get("/decoder/notebook?text=")
    assert r.status_code == 422 and json.loads(r.text)["detail"][0]["field"] == "text"
