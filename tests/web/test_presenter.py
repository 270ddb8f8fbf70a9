"""Presenter mode through TestClient: one stage, the editor hidden but still in the form, the mode
carried by a hidden field through every response, show_all ignored, and the way back out."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from app.lesson.stages import visible_stages
from app.state.reading import read_form
from app.state.scenario import View
from tests.conftest import form_fields

HTMX = {"HX-Request": "true"}
STAGE_KEYS = [s.key for s in visible_stages(blocks=0)]


def stage_articles(html: str) -> list[str]:
    return re.findall(r'<article class="stage" id="stage-([a-z]+)"', html)


def presenting(html: str) -> bool:
    return re.search(r'<div id="workspace" class="workspace present">', html) is not None


def hidden_editor(html: str) -> str:
    """The markup inside presenter mode's hidden wrapper, which must hold the whole editor."""
    m = re.search(r'<div hidden>\s*(<details id="editor".*?</details>)\s*</div>', html, re.S)
    assert m, "the editor is not inside a hidden wrapper"
    return m.group(1)


def present_form(client: TestClient, preset: str = "three-token") -> dict[str, str]:
    r = client.get("/", params={"preset": preset, "present": "1"})
    assert r.status_code == 200
    return form_fields(r.text)


def test_preset_url_opens_presenter_mode_with_one_stage(client: TestClient) -> None:
    r = client.get("/", params={"preset": "three-token", "present": "1"})
    assert r.status_code == 200
    assert presenting(r.text)
    assert stage_articles(r.text) == ["x"]
    assert 'id="present-toggle"' in r.text and ">Exit presenter mode</button>" in r.text
    assert ">Presenter mode</button>" not in r.text
    assert '<link rel="stylesheet" href="/static/present.css">' in r.text
    assert '<script src="/static/present.js" defer></script>' in r.text


def test_presenter_mode_keeps_the_editors_inputs_in_the_form(client: TestClient) -> None:
    normal = form_fields(client.get("/", params={"preset": "three-token"}).text)
    r = client.get("/", params={"preset": "three-token", "present": "1"})
    assert r.status_code == 200
    editor = hidden_editor(r.text)
    assert 'name="x-0-0"' in editor and 'name="token-0"' in editor and 'name="w_q-0-0"' in editor
    fields = form_fields(r.text)
    assert fields["present"] == "on"
    assert normal["present"] == ""
    assert {k: v for k, v in fields.items() if k != "present"} == {k: v for k, v in normal.items() if k != "present"}


def test_normal_page_has_the_presenter_button_and_no_hidden_editor(client: TestClient) -> None:
    r = client.get("/", params={"preset": "three-token"})
    assert r.status_code == 200
    assert not presenting(r.text)
    assert "<div hidden>" not in r.text
    toggle = r'<button type="submit" name="present" value="on" id="present-toggle"\s*>Presenter mode</button>'
    button = re.search(toggle, r.text)
    assert button, "no Presenter mode button"
    # The hidden field comes first: when the pressed toggle posts too, its value is the later one.
    assert r.text.index('<input type="hidden" name="present"') < button.start()


@pytest.mark.parametrize("value", ["on", "1", "true"])
def test_read_form_reads_present(client: TestClient, value: str) -> None:
    fields = form_fields(client.get("/", params={"preset": "three-token"}).text)
    _, view = read_form({**fields, "present": value})
    assert view.present
    _, view = read_form({**fields, "present": ""})
    assert not view.present
    _, view = read_form({k: v for k, v in fields.items() if k != "present"})
    assert not view.present


def test_stepping_keeps_presenter_mode(client: TestClient) -> None:
    form = present_form(client)
    r = client.post("/stages", data={**form, "goto": "softmax"}, headers=HTMX)
    assert r.status_code == 200
    assert r.text.lstrip().startswith('<section id="stages"')
    assert stage_articles(r.text) == ["softmax"]
    assert form_fields(r.text, None)["present"] == "on"
    assert ">Exit presenter mode</button>" in r.text


def test_the_address_keeps_presenter_mode(client: TestClient) -> None:
    r = client.post("/stages", data={**present_form(client), "goto": "scores"}, headers=HTMX)
    assert r.status_code == 200
    back = client.get(r.headers["HX-Push-Url"])
    assert back.status_code == 200
    assert presenting(back.text)
    assert stage_articles(back.text) == ["scores"]


def test_inspecting_a_cell_keeps_presenter_mode(client: TestClient) -> None:
    form = {**present_form(client), "stage": "softmax", "inspect": "softmax.0.2.0"}
    r = client.post("/stages", data=form, headers=HTMX)
    assert r.status_code == 200
    assert "Attention weights of query 3" in r.text and "0.503" in r.text
    assert form_fields(r.text, None)["present"] == "on"


@pytest.mark.parametrize("headers", [HTMX, {}])
def test_structural_post_keeps_presenter_mode(client: TestClient, headers: dict[str, str]) -> None:
    r = client.post("/", data={**present_form(client), "stage": "scores"}, headers=headers)
    assert r.status_code == 200
    assert presenting(r.text)
    assert stage_articles(r.text) == ["scores"]
    assert form_fields(r.text)["present"] == "on"
    hidden_editor(r.text)


def test_show_all_is_ignored_in_presenter_mode(client: TestClient) -> None:
    form = {**present_form(client), "show_all": "on", "stage": "scaled"}
    for r in (client.post("/stages", data=form, headers=HTMX), client.post("/", data=form),
              client.get("/", params=form)):
        assert r.status_code == 200
        assert stage_articles(r.text) == ["scaled"]
        assert not re.search(r'id="next-stage"[^>]*\sdisabled', r.text)  # stepping stays on
    # Without presenter mode the same form shows every stage.
    r = client.post("/stages", data={**form, "present": ""}, headers=HTMX)
    assert stage_articles(r.text) == STAGE_KEYS
    assert View(show_all=True, present=True).show_all is False
    assert View(show_all=True).show_all is True


@pytest.mark.parametrize("headers", [HTMX, {}])
def test_the_pressed_toggle_wins_over_the_hidden_field(client: TestClient, headers: dict[str, str]) -> None:
    """A browser posts the hidden field and then the pressed button, both named present."""
    normal = form_fields(client.get("/", params={"preset": "three-token"}).text)
    entering = client.post("/", data={**normal, "stage": "mask", "present": ["", "on"]}, headers=headers)
    assert entering.status_code == 200
    assert presenting(entering.text)
    leaving = client.post("/", data={**form_fields(entering.text), "present": ["on", ""]}, headers=headers)
    assert leaving.status_code == 200
    assert not presenting(leaving.text)
    assert stage_articles(leaving.text) == ["mask"]
    assert "<div hidden>" not in leaving.text
    assert form_fields(leaving.text)["present"] == ""


def test_presenter_page_has_no_inline_scripts_or_styles(client: TestClient) -> None:
    r = client.get("/", params={"preset": "three-token", "present": "1"})
    assert r.status_code == 200
    assert not re.search(r"\sstyle\s*=", r.text, re.I)
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", r.text, re.S | re.I)
    assert scripts and all("src=" in attrs and body.strip() == "" for attrs, body in scripts), scripts
    assert not re.search(r"\son[a-z]+\s*=", r.text, re.I)  # no inline event handlers


@pytest.mark.parametrize(("path", "kind"), [("/static/present.css", "text/css"), ("/static/present.js", "javascript")])
def test_presenter_files_are_served(client: TestClient, path: str, kind: str) -> None:
    r = client.get(path)
    assert r.status_code == 200
    assert kind in r.headers["content-type"]
    assert r.content
