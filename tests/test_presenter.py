"""Presenter mode through the form: one stage, the editor's inputs kept but hidden, the mode carried."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from tests.conftest import form_fields

HTMX = {"HX-Request": "true"}


def articles(html: str) -> list[str]:
    return re.findall(r'<article class="stage" id="stage-([a-z0-9]+)"', html)


def test_presenter_link_opens_one_stage_with_the_editor_hidden(client: TestClient) -> None:
    r = client.get("/", params={"preset": "three-token", "present": "1"})
    assert r.status_code == 200
    assert '<div id="workspace" class="workspace present">' in r.text
    assert re.search(r'<div hidden>\s*<section id="editor"', r.text)
    fields = form_fields(r.text)
    assert fields["present"] == "on" and "x-0-0" in fields  # the state still posts
    assert articles(r.text) == ["x"]
    assert "Exit presenter mode" in r.text


def test_the_mode_survives_posts_and_ignores_show_all(client: TestClient) -> None:
    form = form_fields(client.get("/", params={"present": "1"}).text)
    r = client.post("/stages", data={**form, "show_all": "on", "goto": "softmax"}, headers=HTMX)
    assert r.status_code == 200
    assert articles(r.text) == ["softmax"]
    assert form_fields(r.text)["present"] == "on"
    off = client.post("/", data={**form, "present": ""}, headers=HTMX)
    assert 'class="workspace present"' not in off.text and "Presenter mode" in off.text
