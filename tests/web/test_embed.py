"""The views to embed (app.web.embed): one stage, the lines alone and a real model's head, their own posts, a bad
stage or figure as a 422 naming it, the "Embed" box under each stage of the page, and which sites may frame what
(app.web.security, ATTENTION_EMBED_ORIGINS)."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from app.config import Settings
from app.main import create_app
from app.view.decoder_view import decoder_catalogue_view
from tests.conftest import form_fields

HTMX = {"HX-Request": "true"}
SOFTMAX = "/embed?preset=pool&stage=softmax"
MOODLE = "https://moodle.example.edu"


def directives(policy: str) -> dict[str, list[str]]:
    return {d.split()[0]: d.split()[1:] for d in (p.strip() for p in policy.split(";")) if d}


def stages_shown(page: str) -> list[str]:
    return re.findall(r'<article class="stage" id="stage-([a-z0-9]+)"', page)


def softmax_row(page: str) -> list[str]:
    """The first row of the weights' heatmap, as its words."""
    body = page[page.index('data-ref="softmax'):]
    body = body[body.index("<tbody>"):]
    return re.sub(r"<[^>]+>", " ", body[:body.index("</tr>")]).split()


@pytest.fixture
def framed() -> Iterator[TestClient]:
    """An app that a Moodle may frame."""
    with TestClient(create_app(Settings(embed_origins=f"{MOODLE}, https://lms.example.org:8443"))) as c:
        yield c


def test_read_embed_shows_one_stage_without_the_page_around_it(client: TestClient) -> None:
    r = client.get(SOFTMAX)
    assert r.status_code == 200
    page = r.text
    assert stages_shown(page) == ["softmax"]
    assert 'class="top"' not in page and 'class="foot"' not in page  # no header, no footer
    assert "pipeline-map" not in page and "view-options" not in page and "class-start" not in page
    assert 'id="prev-stage"' in page and 'id="next-stage"' in page and 'id="inspector"' in page
    # The page's scripts find the form and its stages' route: here, the embed's own.
    assert '<form id="state" method="post" action="/embed" data-stages-url="/embed/stages"' in page
    assert 'hx-post="/embed/stages"' in page and 'hx-post="/stages"' not in page
    # The inputs come folded (closed by the script; open without it) under the stage.
    assert 'data-drawer="inputs" data-keep="closed"' in page
    assert page.index('id="stages"') < page.index('id="editor"')
    full = re.search(r'<a class="embed-open" href="([^"]+)" target="_blank"', page)
    assert full and html.unescape(full[1]).startswith("/?preset=pool&") and "stage=softmax" in html.unescape(full[1])


def test_read_embed_of_the_lines_alone(client: TestClient) -> None:
    r = client.get("/embed?preset=bank-river&stage=x&figure=lines")  # a stage without lines: the weights'
    assert r.status_code == 200
    assert stages_shown(r.text) == ["softmax"]
    assert '<figure class="lines"' in r.text and 'class="head-toggles"' in r.text
    assert "data-ref=" not in r.text.split('id="editor"')[0]  # no heatmap, no stepper
    assert 'id="next-stage"' not in r.text and 'id="view-head"' not in r.text  # the lines show every head
    assert form_fields(r.text)["figure"] == "lines"  # kept by every post


def test_read_embed_of_a_real_models_head(client: TestClient) -> None:
    r = client.get("/embed/model?text=The+cat+sat+on+the+mat.&layer=2&head=3&matrix=softmax&row=2&col=3")
    assert r.status_code == 200
    page = r.text
    assert 'class="top"' not in page and 'id="steps"' in page and 'id="model-inspector"' in page
    assert '<form id="model-form" method="get" action="/embed/model"' in page
    assert "layer 2, head 3" in page and 'class="inspect-title"' in page
    assert 'href="/model?' in page  # "Open the full page"
    swapped = client.get("/embed/model?text=A+dog.&layer=1&head=1", headers=HTMX)
    assert swapped.status_code == 200
    assert swapped.text.lstrip().startswith('<div id="model-work"') and "<html" not in swapped.text


def test_read_embed_of_the_language_model(client: TestClient) -> None:
    """/embed/decoder: the next word's candidates (the API's first), one head's map and its step-through, the text
    in its box; a candidate appends itself within the embed; htmx gets the changing part; a bad layer is a 422."""
    decoder_catalogue_view()  # the model read and its heads measured, as the app's start does
    r = client.get("/embed/decoder", params={"text": "The capital of France is", "layer": "17", "head": "2"})
    assert r.status_code == 200
    page = r.text
    assert 'class="top"' not in page and 'id="candidates"' in page and 'id="steps"' in page
    assert '<form id="decoder-form" method="get" action="/embed/decoder"' in page
    assert "layer 17, head 2 of SmolLM2-135M" in page and 'href="/decoder?' in page  # "Open the full page"
    api = client.post("/api/decoder", json={"text": "The capital of France is"}).json()["next"]["candidates"][0]
    assert api["token"] == "ĠParis" and "␣Paris" in page  # byte-level BPE writes a space as Ġ
    assert re.search(r'<a [^>]*href="/embed/decoder\?[^"]*Paris', page)  # a candidate stays in the frame
    assert 'href="/decoder/notebook?' in page  # the notebook is the page's own route
    swapped = client.get("/embed/decoder", params={"text": "A dog", "layer": "1", "head": "1"}, headers=HTMX)
    assert swapped.status_code == 200
    assert swapped.text.lstrip().startswith('<div id="decoder-work"') and "<html" not in swapped.text
    bad = client.get("/embed/decoder", params={"text": "A dog", "layer": "99"})
    assert bad.status_code == 422 and 'data-field="layer"' in bad.text
    framed = client.get("/embed/decoder", params={"text": "A dog"})
    assert "frame-ancestors 'self'" in framed.headers["content-security-policy"]
    shown = client.get("/decoder", params={"text": "A dog"}).text  # the page's Embed box for its head
    assert 'data-embed-src="/embed/decoder?text=A+dog' in shown.replace("&amp;", "&")


@pytest.mark.parametrize(("query", "field"), [
    ("preset=pool&stage=nope", "stage"),
    ("preset=pool&stage=ffn", "stage"),  # a block's stage, in a scenario without blocks
    ("preset=pool&stage=softmax&figure=bars", "figure"),
    ("shape=2,1,2,2,0,0&token-0=a&x-0-0=1&x-0-1=oops&stage=softmax", "x-0-1"),
])
def test_read_embed_with_a_bad_field_is_a_422_naming_it(client: TestClient, query: str, field: str) -> None:
    r = client.get(f"/embed?{query}")
    assert r.status_code == 422
    named = re.search(r'<div id="err-([a-z]+)" class="field-error" role="alert" data-field="([^"]+)">([^<]*)<', r.text)
    assert named and named[2] == field
    if field in ("stage", "figure"):  # beside the stage, in words that name it; a cell's message names its row
        assert named[1] == "view" and named[3].startswith(f"{field}: ")
    assert stages_shown(r.text)  # the message beside a stage, not a bare error page


def test_read_embed_model_with_a_bad_field_is_a_422_naming_it(client: TestClient) -> None:
    r = client.get("/embed/model?text=The+cat.&layer=9&head=1")
    assert r.status_code == 422
    assert 'data-field="layer">layer: ' in r.text


def test_a_step_and_an_inspected_cell_answer_with_the_embeds_stages(client: TestClient) -> None:
    fields = form_fields(client.get(SOFTMAX).text)
    r = client.post("/embed/stages", data={**fields, "goto": "output"}, headers=HTMX)
    assert r.status_code == 200
    assert r.text.lstrip().startswith('<section id="stages"') and stages_shown(r.text) == ["output"]
    assert "HX-Push-Url" not in r.headers  # a frame's history is the host page's: nothing pushed
    r = client.post("/embed/stages", data={**fields, "inspect": "softmax.0.0.1"}, headers=HTMX)
    assert r.status_code == 200 and 'class="inspect-title"' in r.text


def test_a_value_edit_changes_the_weights(client: TestClient) -> None:
    fields = form_fields(client.get(SOFTMAX).text)
    before = softmax_row(client.post("/embed/stages", data=fields, headers=HTMX).text)
    after = softmax_row(client.post("/embed/stages", data={**fields, "x-0-0": "3"}, headers=HTMX).text)
    assert before[:2] == after[:2] == ["1", "pool"] and before != after


def test_a_structural_change_answers_with_the_whole_embed(client: TestClient) -> None:
    fields = form_fields(client.get(SOFTMAX).text)
    r = client.post("/embed", data={**fields, "action": "add_token"}, headers=HTMX)
    assert r.status_code == 200
    assert r.text.lstrip().startswith('<div id="workspace" class="embed"') and 'name="token-3"' in r.text
    assert stages_shown(r.text) == ["softmax"]
    # Without JavaScript the whole embed, its inputs open.
    r = client.post("/embed", data={**fields, "action": "add_token"})
    assert r.status_code == 200 and r.text.startswith("<!doctype html>") and 'data-keep="open"' in r.text


def test_a_bad_post_keeps_the_last_good_stage(client: TestClient) -> None:
    fields = form_fields(client.get(SOFTMAX).text)
    r = client.post("/embed/stages", data={**fields, "x-0-0": "nan"}, headers=HTMX)
    assert r.status_code == 422 and r.headers["HX-Reswap"] == "none"
    assert 'id="err-x"' in r.text and 'data-field="x-0-0"' in r.text
    r = client.post("/embed/stages", data={**fields, "x-0-0": "nan"})  # without JavaScript: the embed again
    assert r.status_code == 422 and 'data-field="x-0-0"' in r.text and stages_shown(r.text) == ["softmax"]
    assert 'value="nan"' in r.text  # what was typed stays in its box


def test_tokens_stay_text_in_the_embed(client: TestClient) -> None:
    r = client.get('/embed?shape=1,1,1,1,0,0&token-0=<script>alert(1)</script>&x-0-0=1&stage=softmax')
    assert r.status_code == 200
    assert "<script>alert(1)" not in r.text and "&lt;script&gt;alert(1)" in r.text


# --- the "Embed" box under each stage of the page -------------------------------------------------------


def embed_codes(page: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r"<textarea [^>]*data-embed-src[^>]*>([^<]*)</textarea>", page)]


def test_each_stage_of_the_page_gives_its_iframe(client: TestClient) -> None:
    r = client.get("/?preset=pool&stage=softmax")
    assert r.status_code == 200
    codes = embed_codes(r.text)
    assert len(codes) == 2  # the stage, and its lines alone
    stage = re.fullmatch(r'<iframe src="([^"]+)" width="720" height="560" title="Attention: Softmax" '
                         r'loading="lazy"></iframe>', codes[0])
    assert stage, codes[0]
    src = html.unescape(stage[1])  # the attribute as the host page's parser reads it: &amp; → &
    assert "&amp;" in stage[1] and src.startswith("/embed?preset=pool&") and "stage=softmax" in src
    shown = client.get(src)
    assert shown.status_code == 200 and stages_shown(shown.text) == ["softmax"]
    lines = html.unescape(re.search(r'src="([^"]+)"', codes[1])[1])
    assert lines.endswith("&figure=lines") and client.get(lines).status_code == 200
    assert '<script src="/static/embed.js" defer></script>' in r.text and "/static/embed.css" in r.text


def test_every_stage_shown_has_its_own_box(client: TestClient) -> None:
    r = client.get("/?preset=pool&stage=x&show_all=on")
    assert r.status_code == 200
    assert len(r.text.split('class="embed-box"')) - 1 == len(stages_shown(r.text))
    assert r.text.count("static/embed.js") == 1


def test_the_iframe_and_its_links_keep_the_root_path() -> None:
    with TestClient(create_app(Settings(root_path="/attention"))) as c:
        page = c.get("/attention/?preset=pool&stage=scores").text
        src = html.unescape(re.search(r'src="([^"]+)"', embed_codes(page)[0])[1])
        assert src.startswith("/attention/embed?preset=pool&")
        embedded = c.get(src)
    assert embedded.status_code == 200
    assert 'action="/attention/embed" data-stages-url="/attention/embed/stages"' in embedded.text
    assert 'class="embed-open" href="/attention/?preset=pool&amp;' in embedded.text


# --- who may frame what -----------------------------------------------------------------------------------


EMBEDS = [("GET", SOFTMAX), ("GET", "/embed/model?text=A+cat."), ("GET", "/embed?preset=pool&stage=nope"),
          ("POST", "/embed/stages")]
PAGES = [("GET", "/?preset=pool"), ("GET", "/model?text=A+cat."), ("HEAD", "/decoder"), ("GET", "/docs"),
         ("POST", "/api/attention"), ("GET", "/no/such/page"), ("GET", "/embedded"), ("GET", "/static/embed.js")]


def answer(client: TestClient, method: str, path: str):
    if method == "POST" and path.startswith("/api/"):
        return client.post(path, json={"tokens": ["a"], "x": [[1.0]]})
    if method == "POST":
        return client.post(path, data=form_fields(client.get(SOFTMAX).text), headers=HTMX)
    return client.request(method, path)


@pytest.mark.parametrize(("method", "path"), EMBEDS)
def test_embeds_may_be_framed_by_this_app_alone_by_default(client: TestClient, method: str, path: str) -> None:
    r = answer(client, method, path)
    assert directives(r.headers["content-security-policy"])["frame-ancestors"] == ["'self'"]
    assert r.headers["x-frame-options"] == "SAMEORIGIN"


@pytest.mark.parametrize(("method", "path"), EMBEDS)
def test_embeds_may_be_framed_by_the_configured_origins(framed: TestClient, method: str, path: str) -> None:
    r = answer(framed, method, path)
    policy = directives(r.headers["content-security-policy"])
    assert policy["frame-ancestors"] == ["'self'", MOODLE, "https://lms.example.org:8443"]
    assert "x-frame-options" not in r.headers  # it cannot name them: the policy speaks
    assert policy["script-src"] == ["'self'"] and policy["style-src"] == ["'self'"]  # nothing else relaxed


@pytest.mark.parametrize(("method", "path"), PAGES)
def test_every_other_response_refuses_every_frame(framed: TestClient, method: str, path: str) -> None:
    r = answer(framed, method, path)
    assert directives(r.headers["content-security-policy"])["frame-ancestors"] == ["'none'"]
    assert r.headers["x-frame-options"] == "DENY"


def test_a_post_from_another_site_is_still_refused(framed: TestClient) -> None:
    """Framing is allowed; a page of the framing site posting to the embed is not (only the frame's own posts)."""
    fields = form_fields(framed.get(SOFTMAX).text)
    r = framed.post("/embed/stages", data=fields, headers={**HTMX, "Sec-Fetch-Site": "cross-site", "Origin": MOODLE})
    assert r.status_code == 403
    r = framed.post("/embed/stages", data=fields, headers={**HTMX, "Sec-Fetch-Site": "same-origin"})
    assert r.status_code == 200


def test_the_embed_reads_no_cookie(client: TestClient) -> None:
    plain = client.get(SOFTMAX).text
    client.cookies.update({"attention_teacher_KQ7M4PXR": "x", "attention_client": "y", "attention_student": "z"})
    r = client.get(SOFTMAX)
    assert r.status_code == 200 and "set-cookie" not in r.headers
    assert r.text == plain


@pytest.mark.parametrize(("given", "written"), [
    ("", ""),
    ("https://Moodle.example.edu/", "https://moodle.example.edu"),
    ("https://a.example, http://127.0.0.1:8001  http://[::1]:9000", "https://a.example http://127.0.0.1:8001 "
                                                                    "http://[::1]:9000"),
])
def test_embed_origins_are_read_one_way(given: str, written: str) -> None:
    settings = Settings(embed_origins=given)
    assert settings.embed_origins == written and settings.frame_origins == tuple(written.split())


@pytest.mark.parametrize("given", ["moodle.example.edu", "https://*.example.edu", "https://a.example/course",
                                   "ftp://a.example", "https://a.example:99999", "https://user@a.example",
                                   "https://a.example;script-src", "'self'", "https://a.example?x=1", "*"])
def test_an_embed_origin_that_is_not_an_origin_stops_the_start(given: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(f"{given!r} is not an origin: write scheme://host[:port]")):
        Settings(embed_origins=f"https://ok.example {given}")
