"""The page through TestClient: full page vs htmx fragment, stepping, the inspector, errors, escaping,
presets, structural actions, resizing, static files and the no-inline-script rule."""

from __future__ import annotations

import re
from collections.abc import Callable
from html import unescape as html_unescape

import numpy as np
import pytest
from fastapi.testclient import TestClient
from httpx import Response
from markupsafe import escape

import app.web.respond
from app.config import settings
from app.lesson.stages import STAGES, visible_stages
from app.state.scenario import from_preset
from app.view.typeset import lead_sentence, prose
from app.web.lanes import Lanes
from tests.conftest import form_fields, join_grids
from tests.maths.test_attention import POOL_A_AT, POOL_OUTPUT, S003_A, S003_OUTPUT

HTMX = {"HX-Request": "true"}
STAGE_KEYS = [s.key for s in visible_stages(blocks=0)]  # without transformer blocks
EVIL_TOKENS = ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>']


def page_form(client: TestClient, preset: str = "default") -> dict[str, str]:
    """The state form as GET /?preset=… renders it, ready to post back."""
    r = client.get("/", params={"preset": preset})
    assert r.status_code == 200
    return form_fields(r.text)


def heatmap(html: str, ref: str) -> list[list[str]]:
    """The printed numbers of the first heatmap whose data-ref is ``ref``, row by row."""
    m = re.search(rf'<table class="heatmap [^"]*" data-ref="{re.escape(ref)}"[^>]*>(.*?)</table>', html, re.S)
    assert m, f"no heatmap {ref}"
    body = m.group(1).split("<tbody>", 1)[1]
    cell = r"<td[^>]*>(?:<span>)?([^<]*)(?:</span>)?</td>"  # a wide matrix's numbers are in a <span>
    return [re.findall(cell, row) for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


def fixed(m: np.ndarray, decimals: int) -> list[list[str]]:
    """A matrix as the heatmap prints it: rounded, then fixed-point."""
    return [[f"{v:.{decimals}f}" for v in row] for row in (np.round(np.asarray(m), decimals) + 0.0).tolist()]


def error_slot(html: str, slot: str) -> tuple[str, str | None]:
    """(message, data-field) of the ``err-<slot>`` element."""
    m = re.search(rf'<div id="err-{slot}"([^>]*)>([^<]*)</div>', html)
    assert m, f"no err-{slot} slot"
    field = re.search(r'data-field="([^"]*)"', m.group(1))
    return m.group(2), field.group(1) if field else None


def stage_articles(html: str) -> list[str]:
    return re.findall(r'<article class="stage" id="stage-([a-z]+)"', html)


def inspector(html: str) -> str:
    m = re.search(r'<aside id="inspector".*?</aside>', html, re.S)
    assert m, "no inspector"
    return m.group(0)


def is_full_page(r: Response) -> bool:
    return r.text.lstrip().lower().startswith("<!doctype html>") and "<html" in r.text


# --- full page and fragments ----------------------------------------------------------------------


def test_get_index_renders_the_page(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    assert is_full_page(r)
    assert '<form id="state" method="post"' in r.text
    assert 'id="stages"' in r.text
    assert stage_articles(r.text) == ["x"]


def test_show_all_renders_every_stage(client: TestClient) -> None:
    form = dict(page_form(client), show_all="on")
    r = client.post("/stages", data=form, headers=HTMX)
    assert r.status_code == 200
    assert stage_articles(r.text) == STAGE_KEYS
    for key in STAGE_KEYS:
        assert f'id="stage-{key}-h"' in r.text


def test_show_all_on_the_no_js_post_renders_every_stage(client: TestClient) -> None:
    form = dict(page_form(client), show_all="on")
    r = client.post("/", data=form)
    assert r.status_code == 200
    assert is_full_page(r)
    assert stage_articles(r.text) == STAGE_KEYS


def test_shared_link_with_the_full_state_renders_every_stage(client: TestClient) -> None:
    r = client.get("/", params=dict(page_form(client), show_all="on"))
    assert r.status_code == 200
    assert is_full_page(r)
    assert stage_articles(r.text) == STAGE_KEYS


def test_htmx_edit_returns_a_fragment_with_changed_numbers(client: TestClient) -> None:
    form = dict(page_form(client), show_all="on")
    before = client.post("/stages", data=form, headers=HTMX)
    after = client.post("/stages", data={**form, "x-1-2": "0.75"}, headers=HTMX)
    assert before.status_code == after.status_code == 200
    assert "<html" not in after.text
    assert after.text.lstrip().startswith('<section id="stages"')
    assert heatmap(after.text, "x")[1][2] == "0.750"
    assert heatmap(before.text, "x")[1][2] == "0.500"
    for ref in ("q.0", "scores.0", "softmax.0", "output.0", "final"):
        assert heatmap(after.text, ref) != heatmap(before.text, ref), ref
    # The error slots are cleared out of band.
    for slot in ("tokens", "x", "weights", "sizes", "view"):
        assert re.search(rf'<div id="err-{slot}"[^>]*hx-swap-oob="true"[^>]*></div>', after.text), slot


VALUE_EDIT = {**HTMX, "Attention-Edit": "value"}  # what static/app.js adds when only grid numbers changed


def test_a_value_edit_returns_the_stage_body_with_the_same_numbers_as_the_whole_stages(client: TestClient) -> None:
    form = {**page_form(client), "stage": "softmax", "inspect": "softmax.0.1.2", "x-1-2": "0.75"}
    whole = client.post("/stages", data=form, headers=HTMX)
    body = client.post("/stages", data=form, headers=VALUE_EDIT)
    assert whole.status_code == body.status_code == 200
    assert body.text.lstrip().startswith('<div id="stage-body"')
    assert body.headers["HX-Retarget"] == "#stage-body" and body.headers["HX-Reswap"] == "outerHTML"
    assert "HX-Retarget" not in whole.headers
    assert "attention-edit" in [v.strip().lower() for v in body.headers["vary"].split(",")]
    # What a value does not change stays on the page: the map, the stepper, the view options, the closed panels.
    for part in ('id="stages"', 'class="pipeline-map', 'class="stepper"', 'class="view-options"', 'class="extras"'):
        assert part in whole.text and part not in body.text, part
    # What it changes comes in full: every heatmap, the lines, the inspector's arithmetic and the page's link.
    for ref in ("scaled.0", "softmax.0"):
        assert heatmap(body.text, ref) == heatmap(whole.text, ref), ref
    assert re.search(r'<figure class="lines[^"]*" id="[^"]+"', body.text)
    assert inspector(body.text) == inspector(whole.text) and "Select a cell" not in inspector(body.text)
    permalink = re.search(r'href="([^"]*)" id="permalink"', body.text)
    assert permalink and permalink.group(1) == re.search(r'href="([^"]*)" id="permalink"', whole.text).group(1)
    assert "x-1-2=0.75" in html_unescape(permalink.group(1))
    assert len(body.content) < 0.6 * len(whole.content)
    # Out of band, as with the whole stages: the summary and the cleared error slots.
    assert re.search(r'<(p|details) id="summary"[^>]*hx-swap-oob="true"', body.text)
    for slot in ("tokens", "x", "weights", "sizes", "view"):
        assert re.search(rf'<div id="err-{slot}"[^>]*hx-swap-oob="true"[^>]*></div>', body.text), slot


def test_a_value_edit_follows_the_numbers(client: TestClient) -> None:
    form = {**page_form(client), "show_all": "on"}
    before = client.post("/stages", data=form, headers=VALUE_EDIT)
    after = client.post("/stages", data={**form, "x-1-2": "0.75"}, headers=VALUE_EDIT)
    assert before.status_code == after.status_code == 200
    assert heatmap(after.text, "x")[1][2] == "0.750" and heatmap(before.text, "x")[1][2] == "0.500"
    for ref in ("q.0", "scores.0", "softmax.0", "output.0", "final"):
        assert heatmap(after.text, ref) != heatmap(before.text, ref), ref
    assert stage_articles(after.text) == STAGE_KEYS  # show all stages: every stage in the body


@pytest.mark.parametrize("extra", [{"goto": "scores"}, {"action": "pin"}, {"action": "inspect"}])
def test_a_step_or_an_action_gets_the_whole_stages_even_when_marked(client: TestClient, extra: dict) -> None:
    r = client.post("/stages", data={**page_form(client), **extra}, headers=VALUE_EDIT)
    assert r.status_code == 200
    assert r.text.lstrip().startswith('<section id="stages"') and "HX-Retarget" not in r.headers


def test_the_mark_without_htmx_is_the_whole_page(client: TestClient) -> None:
    r = client.post("/stages", data={**page_form(client), "x-0-0": "0.25"}, headers={"Attention-Edit": "value"})
    assert r.status_code == 200
    assert is_full_page(r) and heatmap(r.text, "x")[0][0] == "0.250"


def test_a_bad_value_in_a_value_edit_is_422_naming_it_and_swaps_nothing(client: TestClient) -> None:
    r = client.post("/stages", data={**page_form(client), "x-1-2": "abc"}, headers=VALUE_EDIT)
    assert r.status_code == 422
    assert r.headers["HX-Reswap"] == "none" and "HX-Retarget" not in r.headers
    message, field = error_slot(r.text, "x")
    assert field == "x-1-2" and message.startswith("X row 2, column 3: ")


def test_a_value_edit_while_learning_sends_the_gradient_sizes_out_of_band(client: TestClient) -> None:
    form = page_form(client, "learn-translate")
    before = client.post("/stages", data=form, headers=VALUE_EDIT)
    after = client.post("/stages", data={**form, "x-0-0": "0.9"}, headers=VALUE_EDIT)
    assert before.status_code == after.status_code == 200

    def sizes(html: str) -> list[str]:
        nav = re.search(r'<nav class="backward-map" id="backward-map"[^>]*hx-swap-oob="true"[^>]*>(.*?)</nav>',
                        html, re.S)
        assert nav, "no backward map out of band"
        return re.findall(r'<span class="grad-size">([^<]*)</span>', nav.group(1))

    assert len(sizes(after.text)) == 6 and sizes(after.text) != sizes(before.text)
    assert 'id="learn"' in after.text  # the Learn panel's loss follows the values too


def test_every_map_link_names_its_stage_for_the_page_script(client: TestClient) -> None:
    """After a value edit the page's script sets each map link from the new permalink (static/app.js)."""
    r = client.post("/stages", data=page_form(client), headers=HTMX)
    assert r.status_code == 200
    links = re.findall(r'<a id="map-(?:wide|compact)-([a-z_0-9]+)" data-stage="([a-z_0-9]+)" href="([^"]*)"', r.text)
    assert len(links) == 2 * len(STAGE_KEYS)
    permalink = html_unescape(re.search(r'href="([^"]*)" id="permalink"', r.text).group(1))
    for key, stage, href in links:
        assert key == stage
        assert html_unescape(href) == re.sub(r"([?&]stage=)[^&]*", rf"\g<1>{stage}", permalink) + "#stages"
    assert 'data-max-url="8000"' in r.text


def test_htmx_structural_post_returns_the_workspace(client: TestClient) -> None:
    r = client.post("/", data=page_form(client), headers=HTMX)
    assert r.status_code == 200
    assert "<html" not in r.text
    assert r.text.lstrip().startswith('<div id="workspace"')
    assert 'id="stages"' in r.text and 'id="editor"' in r.text


def test_no_js_form_post_returns_the_whole_page(client: TestClient) -> None:
    form = page_form(client)
    for url in ("/", "/stages"):
        r = client.post(url, data={**form, "x-0-0": "0.25"})
        assert r.status_code == 200
        assert is_full_page(r), url
        assert heatmap(r.text, "x")[0][0] == "0.250"
        assert form_fields(r.text)["x-0-0"] == "0.25"


@pytest.mark.parametrize("key", STAGE_KEYS)
def test_goto_renders_that_stage(client: TestClient, key: str) -> None:
    stage = next(s for s in STAGES if s.key == key)
    r = client.post("/stages", data={**page_form(client), "goto": key}, headers=HTMX)
    assert r.status_code == 200
    assert stage_articles(r.text) == [key]
    heading = re.search(rf'<h3 id="stage-{key}-h">(.*?)</h3>', r.text, re.S)
    assert heading and str(prose(stage.title)) in heading.group(1)
    assert f'<input type="hidden" name="stage" value="{key}">' in r.text


def map_links(html: str) -> list[tuple[str, str, str]]:
    """(id, href, aria-current) of every link on the pipeline map, both drawings, in order."""
    m = re.search(r'<nav class="pipeline-map [^"]*" aria-label="Pipeline"[^>]*>(.*?)</nav>', html, re.S)
    assert m, "no pipeline map"
    found = []
    for tag in re.findall(r"<a ([^>]*)>", m.group(1)):
        attrs = dict(re.findall(r'([a-z-]+)="([^"]*)"', tag))
        found.append((attrs["id"], html_unescape(attrs["href"]), attrs.get("aria-current", "")))
    return found


def test_the_map_links_every_stage_in_the_page_and_in_the_fragment(client: TestClient) -> None:
    page = client.get("/")
    step = client.post("/stages", data={**page_form(client), "goto": "softmax"}, headers=HTMX)
    assert page.status_code == step.status_code == 200
    for r, current in ((page, "x"), (step, "softmax")):
        found = map_links(r.text)
        assert [i for i, _, _ in found] == [f"map-{layout}-{k}" for layout in ("wide", "compact") for k in STAGE_KEYS]
        assert [i for i, _, now in found if now] == [f"map-wide-{current}", f"map-compact-{current}"]
    assert "<html" not in step.text  # the fragment carries its own map


def test_a_map_link_is_the_permalink_of_its_stage(client: TestClient) -> None:
    r = client.post("/stages", data={**page_form(client), "x-0-0": "0.25"}, headers=HTMX)
    assert r.status_code == 200
    href = dict((i, h) for i, h, _ in map_links(r.text))["map-wide-output"]
    followed = client.get(href)  # what a browser without JavaScript does
    assert followed.status_code == 200
    assert stage_articles(followed.text) == ["output"]
    assert form_fields(followed.text)["x-0-0"] == "0.25"


def test_show_all_marks_no_stage_on_the_map(client: TestClient) -> None:
    r = client.post("/stages", data=dict(page_form(client), show_all="on"), headers=HTMX)
    assert r.status_code == 200
    assert not [i for i, _, now in map_links(r.text) if now]


def test_a_state_too_large_for_links_steps_with_buttons(client: TestClient) -> None:
    form = form_fields(client.post("/", data={**page_form(client), "d_model": "64"}, headers=HTMX).text)
    for _ in range(5):  # 10 tokens × 64 dimensions: more than 8 KB of numbers
        form = form_fields(client.post("/", data={**form, "action": "add_token"}, headers=HTMX).text)
    r = client.post("/", data=form)  # no JavaScript
    assert r.status_code == 200
    assert {h for _, h, _ in map_links(r.text)} == {"#map-steps"}
    steps = re.search(r'<p class="map-steps nojs" id="map-steps">(.*?)</p>', r.text, re.S)
    assert steps and re.findall(r'name="goto" value="([a-z0-9]+)"', steps.group(1)) == STAGE_KEYS
    assert 'id="map-steps"' not in client.get("/").text  # a state that fits links its stages instead


@pytest.mark.parametrize("index", range(1, len(STAGE_KEYS) - 1))
def test_step_buttons_point_to_the_neighbours(client: TestClient, index: int) -> None:
    r = client.post("/stages", data={**page_form(client), "goto": STAGE_KEYS[index]}, headers=HTMX)
    assert r.status_code == 200
    assert re.search(rf'name="goto" value="{STAGE_KEYS[index - 1]}" id="prev-stage"', r.text)
    assert re.search(rf'name="goto" value="{STAGE_KEYS[index + 1]}" id="next-stage"', r.text)


def test_first_and_last_stage_disable_their_step_button(client: TestClient) -> None:
    first = client.post("/stages", data={**page_form(client), "goto": STAGE_KEYS[0]}, headers=HTMX)
    last = client.post("/stages", data={**page_form(client), "goto": STAGE_KEYS[-1]}, headers=HTMX)
    assert first.status_code == last.status_code == 200
    assert re.search(r'id="prev-stage"[^>]*disabled', first.text)
    assert not re.search(r'id="next-stage"[^>]*disabled', first.text)
    assert re.search(r'id="next-stage"[^>]*disabled', last.text)


def test_unknown_stage_falls_back_to_the_first(client: TestClient) -> None:
    r = client.post("/stages", data={**page_form(client), "goto": "nope"}, headers=HTMX)
    assert r.status_code == 200
    assert stage_articles(r.text) == ["x"]


# --- the inspector --------------------------------------------------------------------------------


def test_inspector_shows_seed_003_softmax_row(client: TestClient) -> None:
    form = {**page_form(client, "three-token"), "stage": "softmax", "inspect": "softmax.0.2.0"}
    r = client.post("/stages", data=form, headers=HTMX)
    assert r.status_code == 200
    box = inspector(r.text)
    for number in ("1.414", "4.113", "2.028", "8.169", "0.503", "0.248"):
        assert number in box, number
    assert '<tr class="sel"><th scope="row">1 token 1</th>' in box  # keys counted from 1, as on the page
    # The inspected cell is marked in the heatmap.
    assert re.search(r'data-ref="softmax.0".*?<td class="[^"]* sel">0.503</td>', r.text, re.S)


def test_inspector_softmax_of_very_negative_scores(client: TestClient) -> None:
    # Query 1 is 40·e₁ and every key has −40 in its first dimension: row 0 of the scores is −1600/√2.
    form = {**page_form(client, "three-token"), "w_q-0-0": "40", "w_k-0-0": "-40", "w_k-1-0": "-40",
            "w_k-2-0": "-40", "stage": "softmax", "inspect": "softmax.0.0.0"}
    r = client.post("/stages", data=form, headers=HTMX)
    assert r.status_code == 200
    assert "nan" not in inspector(r.text)


def test_inspector_row_and_column_form(client: TestClient) -> None:
    """The form counts from 1, as the page does; the cell reference it becomes counts from 0."""
    form = {**page_form(client, "three-token"), "stage": "softmax", "action": "inspect",
            "inspect_matrix": "softmax", "inspect_row": "3", "inspect_col": "1"}
    r = client.post("/stages", data=form, headers=HTMX)
    assert r.status_code == 200
    assert 'id="inspect-ref" value="softmax.0.2.0"' in r.text
    box = inspector(r.text)
    assert "8.169" in box and "0.503" in box
    assert "(counting from 1)" in box
    assert re.search(r'name="inspect_row" min="1" max="3" value="3"', box)
    assert re.search(r'name="inspect_col" min="1" max="\d+" value="1"', box)
    for row in ("0", "-1"):
        refused = client.post("/stages", data={**form, "inspect_row": row}, headers=HTMX)
        assert refused.status_code == 422
        assert error_slot(refused.text, "view") == (
            f"inspect_row: enter a whole number from 1 to {8 * settings.max_tokens}", "inspect_row")


def test_inspector_dot_product_of_a_score(client: TestClient) -> None:
    form = {**page_form(client, "three-token"), "stage": "scores", "inspect": "scores.0.2.0"}
    r = client.post("/stages", data=form, headers=HTMX)
    assert r.status_code == 200
    box = inspector(r.text)
    assert "Score of query 3 (token 3) for key 1 (token 1)" in box  # counted from 1
    assert "<mtext>Scores</mtext><mrow><mn>3</mn><mo>,</mo><mn>1</mn>" in box.replace("&#x0002C;", ",")
    # Q₃·K₁ = 1·1 + 1·1: the products, then the result, as MathML numbers
    assert box.count("<mn>1.000</mn><mo>·</mo><mn>1.000</mn>") == 2
    assert '<div class="arith result"><math display="inline" alttext="= 2.000">' in box


def test_inspector_ignores_an_out_of_range_ref(client: TestClient) -> None:
    form = {**page_form(client, "three-token"), "stage": "softmax", "inspect": "softmax.0.9.0"}
    r = client.post("/stages", data=form, headers=HTMX)
    assert r.status_code == 200
    assert "Select a cell" in inspector(r.text)


# --- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["abc", "nan", "1e999", "inf", "-Infinity", "", "1001"])
def test_htmx_bad_cell_is_422_without_swap(client: TestClient, bad: str) -> None:
    r = client.post("/stages", data={**page_form(client), "x-1-2": bad}, headers=HTMX)
    assert r.status_code == 422
    assert r.headers["HX-Reswap"] == "none"
    assert "<html" not in r.text
    message, field = error_slot(r.text, "x")
    assert field == "x-1-2"
    assert message.startswith("X row 2, column 3: ")
    assert 'hx-swap-oob="true"' in r.text


@pytest.mark.parametrize(("name", "value", "slot"), [
    ("w_q-0-1", "zz", "weights"),
    ("token-0", "t" * (settings.max_token_chars + 1), "tokens"),
    ("seed", "-1", "sizes"),
    ("d_model", "65", "sizes"),
    ("num_heads", "0", "sizes"),
    ("num_heads", "9", "sizes"),
    ("decimals", "9", "view"),
    ("edits", "w_q.0.0.0=nan", "weights"),
    ("shape", "garbage", "sizes"),
    ("preset", "nope", "sizes"),
])
def test_htmx_bad_field_names_it_in_its_slot(client: TestClient, name: str, value: str, slot: str) -> None:
    r = client.post("/", data={**page_form(client), name: value}, headers=HTMX)
    assert r.status_code == 422
    assert r.headers["HX-Reswap"] == "none"
    message, field = error_slot(r.text, slot)
    assert field == name
    assert message


def test_no_js_bad_cell_returns_the_page_with_the_message(client: TestClient) -> None:
    r = client.post("/", data={**page_form(client), "x-1-2": "abc"})
    assert r.status_code == 422
    assert is_full_page(r)
    message, field = error_slot(r.text, "x")
    assert field == "x-1-2"
    assert message.startswith("X row 2, column 3: ")
    assert re.search(r'name="x-1-2" value="abc"[^>]*aria-invalid="true"', r.text)


@pytest.mark.parametrize(("name", "value"), [("decimals", "9"), ("head", "9"), ("temperature", "abc")])
def test_no_js_bad_view_field_shows_the_message(client: TestClient, name: str, value: str) -> None:
    form = {**page_form(client), name: value}
    htmx = client.post("/stages", data=form, headers=HTMX)
    assert htmx.status_code == 422
    message, field = error_slot(htmx.text, "view")
    assert field == name and message
    r = client.post("/", data=form)
    assert r.status_code == 422
    assert str(escape(message)) in r.text


def test_no_js_error_keeps_an_added_token(client: TestClient) -> None:
    added = client.post("/", data={**page_form(client), "action": "add_token"})
    assert added.status_code == 200
    form = form_fields(added.text)
    assert form["token-5"] == "new"
    r = client.post("/", data={**form, "x-5-0": "abc"})
    assert r.status_code == 422
    assert form_fields(r.text).get("token-5") == "new"


def test_bad_shared_link_is_422_with_the_default_page(client: TestClient) -> None:
    r = client.get("/", params={**page_form(client), "x-0-0": "nan"})
    assert r.status_code == 422
    assert is_full_page(r)
    assert error_slot(r.text, "x")[0].startswith("X row 1, column 1: ")


def test_unknown_preset_in_the_query_falls_back_to_the_default(client: TestClient) -> None:
    r = client.get("/", params={"preset": "nope"})
    assert r.status_code == 200
    assert form_fields(r.text)["preset"] == "default"


# --- escaping -------------------------------------------------------------------------------------


@pytest.mark.parametrize("token", EVIL_TOKENS)
def test_token_text_is_escaped_everywhere(client: TestClient, token: str) -> None:
    form = {**page_form(client), "token-0": token, "show_all": "on", "inspect": "softmax.0.0.0"}
    responses = [
        client.post("/", data=form),
        client.post("/", data=form, headers=HTMX),
        client.post("/stages", data=form, headers=HTMX),
        client.post("/stages", data={**form, "stage": "output", "show_all": "", "inspect": "output.0.0.0"},
                    headers=HTMX),
        client.get("/", params=form),
    ]
    for r in responses:
        assert r.status_code == 200
        assert token not in r.text
        assert "<script>alert" not in r.text and "<img" not in r.text
        assert str(escape(token)) in r.text
    # Read back from the form, the token is exactly what was typed.
    assert form_fields(responses[0].text)["token-0"] == token


@pytest.mark.parametrize("token", EVIL_TOKENS)
def test_typed_text_is_escaped_in_error_messages(client: TestClient, token: str) -> None:
    for headers in (HTMX, {}):
        r = client.post("/", data={**page_form(client), "x-0-0": token}, headers=headers)
        assert r.status_code == 422
        assert "<script>alert" not in r.text and "<img" not in r.text
        assert error_slot(r.text, "x")[0].startswith("X row 1, column 1: ")


# --- presets --------------------------------------------------------------------------------------


def test_pool_preset_page_shows_seed_001(client: TestClient) -> None:
    form = page_form(client, "pool")
    assert form["decimals"] == "2"
    assert "scale" not in form  # seed 001 does not scale
    r = client.get("/", params={**form, "show_all": "on"})
    assert r.status_code == 200
    assert heatmap(r.text, "scores.0") == fixed(POOL_A_AT, 2)
    assert heatmap(r.text, "scaled.0") == fixed(POOL_A_AT, 2)
    assert heatmap(r.text, "final") == fixed(POOL_OUTPUT, 2)
    assert heatmap(r.text, "final")[0] == ["0.38", "0.22", "0.16", "0.14"]


def test_pool_preset_summary_quotes_the_similarities(client: TestClient) -> None:
    r = client.get("/", params={"preset": "pool"})
    assert r.status_code == 200
    assert "0.30" in r.text and "0.14" in r.text
    assert heatmap(r.text, "x")[0] == ["0.50", "0.10", "0.10", "0.20"]


def test_three_token_preset_page_shows_seed_003(client: TestClient) -> None:
    r = client.get("/", params={**page_form(client, "three-token"), "show_all": "on"})
    assert r.status_code == 200
    assert heatmap(r.text, "softmax.0") == fixed(S003_A, 3)
    assert heatmap(r.text, "softmax.0")[2] == ["0.503", "0.248", "0.248"]
    assert heatmap(r.text, "output.0") == fixed(S003_OUTPUT, 3)
    assert ["0.401", "0.198", "0.401"] in heatmap(r.text, "softmax.0")


@pytest.mark.parametrize("decimals", [1, 2, 3, 4])
def test_decimals_choice_changes_the_printed_numbers(client: TestClient, decimals: int) -> None:
    form = {**page_form(client, "three-token"), "stage": "softmax", "decimals": str(decimals)}
    r = client.post("/stages", data=form, headers=HTMX)
    assert r.status_code == 200
    weights = from_preset("three-token")[0].run().heads[0].softmax
    assert heatmap(r.text, "softmax.0") == fixed(weights, decimals)


# --- headers --------------------------------------------------------------------------------------


def test_every_page_response_varies_on_hx_request(client: TestClient) -> None:
    form = page_form(client)
    responses = [
        client.get("/"),
        client.post("/", data=form),
        client.post("/", data=form, headers=HTMX),
        client.post("/stages", data=form),
        client.post("/stages", data=form, headers=HTMX),
        client.post("/stages", data={**form, "x-0-0": "abc"}, headers=HTMX),
        client.post("/", data={**form, "x-0-0": "abc"}),
    ]
    for r in responses:
        assert r.status_code in (200, 422)
        vary = [v.strip().lower() for v in r.headers["vary"].split(",")]
        assert "hx-request" in vary, r.request.url


# --- structural actions ---------------------------------------------------------------------------


def tokens_of(form: dict[str, str]) -> list[str]:
    return [form[f"token-{i}"] for i in range(len(form)) if f"token-{i}" in form]


def test_add_token(client: TestClient) -> None:
    form = page_form(client)
    r = client.post("/", data={**form, "action": "add_token"}, headers=HTMX)
    assert r.status_code == 200
    after = form_fields(r.text)
    assert tokens_of(after) == ["the", "cat", "sat", "on", "mat", "new"]
    for i in range(5):
        for j in range(3):
            assert after[f"x-{i}-{j}"] == form[f"x-{i}-{j}"]
    new_row = [float(after[f"x-5-{j}"].replace("\u2212", "-")) for j in range(3)]  # inputs show a true minus
    assert all(-1.0 <= v <= 1.0 for v in new_row)
    assert len(heatmap(r.text, "x")) == 6


def test_remove_first_token(client: TestClient) -> None:
    form = page_form(client)
    r = client.post("/", data={**form, "action": "remove_token-0"}, headers=HTMX)
    assert r.status_code == 200
    after = form_fields(r.text)
    assert tokens_of(after) == ["cat", "sat", "on", "mat"]
    assert [after[f"x-0-{j}"] for j in range(3)] == [form[f"x-1-{j}"] for j in range(3)]
    assert "x-4-0" not in after


def test_remove_the_last_remaining_token_is_refused(client: TestClient) -> None:
    form = {k: v for k, v in page_form(client).items() if not re.match(r"(token|x)-[1-9]", k)}
    assert tokens_of(form) == ["the"]
    r = client.post("/", data={**form, "action": "remove_token-0"}, headers=HTMX)
    assert r.status_code == 422
    message, _ = error_slot(r.text, "tokens")
    assert "at least one" in message


def test_add_token_beyond_the_limit_is_refused(client: TestClient) -> None:
    form = page_form(client)
    for i in range(settings.max_tokens):
        form[f"token-{i}"] = f"t{i}"
        for j in range(3):
            form[f"x-{i}-{j}"] = "0.1"
    r = client.post("/", data={**form, "action": "add_token"}, headers=HTMX)
    assert r.status_code == 422
    assert f"at most {settings.max_tokens}" in error_slot(r.text, "tokens")[0]


def test_new_weights_leave_the_designed_weights(client: TestClient) -> None:
    form = page_form(client, "pool")
    assert form["w_q-0-0"] == "1" and form["w_q-0-1"] == "0"
    r = client.post("/", data={**form, "action": "new_weights"}, headers=HTMX)
    assert r.status_code == 200
    after = form_fields(r.text)
    assert after["preset"] == ""
    identity = [after[f"w_q-{i}-{j}"] == ("1" if i == j else "0") for i in range(4) for j in range(4)]
    assert not all(identity)
    assert [after[f"x-0-{j}"] for j in range(4)] == [form[f"x-0-{j}"] for j in range(4)]


def test_weight_edit_changes_q(client: TestClient) -> None:
    form = {**page_form(client, "pool"), "stage": "qkv"}
    r = client.post("/stages", data={**form, "w_q-0-0": "2"}, headers=HTMX)
    assert r.status_code == 200
    # Q = X·W_Q with W_Q = I except W_Q[0][0] = 2: Q[0][0] = 2·0.5.
    assert heatmap(r.text, "q.0")[0] == ["1.00", "0.10", "0.10", "0.20"]


def test_weight_edit_survives_switching_heads(client: TestClient) -> None:
    """Only the shown head's weights are inputs; the others' edits ride along in the hidden field."""
    two_heads = client.post("/", data={**page_form(client), "d_model": "4", "num_heads": "2"}, headers=HTMX)
    assert two_heads.status_code == 200
    form = form_fields(two_heads.text)
    other = client.post("/", data={**form, "w_q-0-0": "0.99", "head": "1"}, headers=HTMX)
    assert other.status_code == 200
    shown = form_fields(other.text)
    assert shown["shape"].split(",")[4] == "1"  # the head on screen
    assert "w_q.0.0.0=0.99" in shown["edits"].split()
    back = client.post("/", data={**shown, "head": "0"}, headers=HTMX)
    assert back.status_code == 200
    assert form_fields(back.text)["w_q-0-0"] == "0.99"


# --- resizing -------------------------------------------------------------------------------------


def test_growing_d_model_keeps_x(client: TestClient) -> None:
    form = page_form(client)
    r = client.post("/", data={**form, "d_model": "5"}, headers=HTMX)
    assert r.status_code == 200
    after = form_fields(r.text)
    assert after["shape"].split(",")[:2] == ["5", "1"]
    assert after["d_model"] == "5"
    for i in range(5):
        for j in range(3):
            assert after[f"x-{i}-{j}"] == form[f"x-{i}-{j}"]
        assert f"x-{i}-4" in after and f"x-{i}-5" not in after
    assert len(heatmap(r.text, "x")[0]) == 5


def test_shrinking_d_model_keeps_the_overlapping_columns(client: TestClient) -> None:
    form = page_form(client)
    r = client.post("/", data={**form, "d_model": "2"}, headers=HTMX)
    assert r.status_code == 200
    after = form_fields(r.text)
    for i in range(5):
        assert [after[f"x-{i}-{j}"] for j in range(2)] == [form[f"x-{i}-{j}"] for j in range(2)]
        assert f"x-{i}-2" not in after


def test_more_heads_resize_d_k_and_offer_a_head_choice(client: TestClient) -> None:
    form = page_form(client)
    r = client.post("/", data={**form, "d_model": "4", "num_heads": "2"}, headers=HTMX)
    assert r.status_code == 200
    after = form_fields(r.text)
    assert after["shape"] == "4,2,2,2,0,0"  # d_model, h, d_k, d_v, head, d_ff (0: no block)
    assert (after["d_k"], after["d_v"]) == ("2", "2")
    assert '<select name="head" hx-post=' in r.text  # beside the stages, updating the editor's weights too
    for i in range(5):
        assert [after[f"x-{i}-{j}"] for j in range(3)] == [form[f"x-{i}-{j}"] for j in range(3)]
    # The second head is shown on request, with its own weights.
    other = client.post("/stages", data={**after, "head": "1", "goto": "qkv"}, headers=HTMX)
    assert other.status_code == 200
    assert "W_Q (head 2)" in other.text
    assert heatmap(other.text, "w_q.1") != heatmap(other.text, "q.1")


def test_resizing_keeps_an_edited_weight(client: TestClient) -> None:
    form = page_form(client)
    r = client.post("/", data={**form, "w_q-0-0": "0.5", "d_model": "4"}, headers=HTMX)
    assert r.status_code == 200
    assert form_fields(r.text)["w_q-0-0"] == "0.5"


# --- static files and the no-inline-script rule ---------------------------------------------------


@pytest.mark.parametrize(("path", "kind"), [
    ("/static/vendor/htmx-2.0.11.min.js", "javascript"),
    ("/static/favicon.svg", "image/svg+xml"),
    ("/static/app.js", "javascript"),
    ("/static/app.css", "text/css"),
])
def test_static_files_are_served(client: TestClient, path: str, kind: str) -> None:
    r = client.get(path)
    assert r.status_code == 200
    assert kind in r.headers["content-type"]
    assert r.content
    page = client.get("/")
    assert f'"{path}"' in page.text  # the page links this very file


def test_page_links_the_vendored_htmx(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200
    assert '<script src="/static/vendor/htmx-2.0.11.min.js" defer></script>' in r.text
    links = re.findall(r'(?:src|href)="([^"]*)"', r.text)
    assert links and all(link.startswith(("/", "#")) for link in links), links  # nothing from a CDN
    assert '"allowEval": false' in r.text


@pytest.mark.parametrize("preset", ["default", "pool", "three-token", "bank-river"])
def test_no_inline_scripts_or_styles(client: TestClient, preset: str) -> None:
    form = {**page_form(client, preset), "show_all": "on", "inspect": "softmax.0.0.0"}
    for r in (client.get("/", params={"preset": preset}), client.post("/", data=form),
              client.post("/stages", data=form, headers=HTMX)):
        assert r.status_code == 200
        scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", r.text, re.S | re.I)
        assert all("src=" in attrs and body.strip() == "" for attrs, body in scripts), scripts
        assert not re.search(r"\sstyle\s*=", r.text, re.I)
        assert "<style" not in r.text.lower()
        assert not re.search(r"\son[a-z]+\s*=", r.text, re.I)  # no inline event handlers
        assert "hx-on" not in r.text and "javascript:" not in r.text


# --- what a student (or a crafted post) may leave in the form ----------------------------------------


@pytest.mark.parametrize("action", ["remove_token-\u00b2", "remove_token-" + "9" * 5000, "remove_ctoken-x"])
def test_a_remove_action_with_an_odd_index_is_refused_not_a_500(client: TestClient, action: str) -> None:
    r = client.post("/", data={**page_form(client), "action": action}, headers=HTMX)
    assert r.status_code in (200, 422)


@pytest.mark.parametrize(("name", "value"), [
    ("inspect_row", "-1"), ("inspect_col", "1.5"), ("guess_row", "x"), ("ctoken-0", "t" * 500),
])
def test_a_field_read_only_when_used_does_not_block_an_edit(client: TestClient, name: str, value: str) -> None:
    """The inspector's row box (in a closed panel) or a source token with cross-attention off may
    hold anything: an edit still goes through. Its own button then names it."""
    form = {**page_form(client), name: value, "x-0-0": "0.75"}
    assert client.post("/stages", data=form, headers=HTMX).status_code == 200
    if name.startswith("inspect"):
        r = client.post("/stages", data={**form, "action": "inspect", "inspect_matrix": "q"}, headers=HTMX)
        assert r.status_code == 422 and error_slot(r.text, "view")[1] == name


def test_no_js_page_with_a_missing_cell_comes_back_with_the_rest(client: TestClient) -> None:
    form = {k: v for k, v in page_form(client).items() if k != "x-1-1"}
    form["x-0-0"] = "0.75"
    r = client.post("/", data=form)
    assert r.status_code == 422
    message, field = error_slot(r.text, "x")
    assert field == "x-1-1" and message == "X row 2, column 2: enter a number"
    assert form_fields(r.text)["x-0-0"] == "0.75"  # the student's other values stay


# --- grids posted as one field each (the page's script) -------------------------------------------------


@pytest.mark.parametrize("preset", ["default", "translate", "block", "learn-bank", "additive"])
@pytest.mark.parametrize("url", ["/", "/stages"])
def test_joined_grids_get_the_same_answer_as_cell_by_cell(client: TestClient, preset: str, url: str) -> None:
    form = {**page_form(client, preset), "x-1-0": "0.75", "w_k-0-1": "-2", "show_all": "on"}
    cells = client.post(url, data=form, headers=HTMX)
    joined = client.post(url, data=join_grids(form), headers=HTMX)
    assert cells.status_code == joined.status_code == 200
    assert joined.text == cells.text
    assert joined.headers.get("HX-Push-Url") == cells.headers.get("HX-Push-Url")
    assert joined.headers.get("HX-Replace-Url") == cells.headers.get("HX-Replace-Url")
    assert float(heatmap(joined.text, "x")[1][0]) == 0.75


@pytest.mark.parametrize(("cell", "slot"), [("x-1-2", "x"), ("w_o-0-1", "weights")])
def test_htmx_bad_cell_of_a_joined_grid_names_the_cell(client: TestClient, cell: str, slot: str) -> None:
    r = client.post("/stages", data=join_grids({**page_form(client), cell: "1001"}), headers=HTMX)
    assert r.status_code == 422
    assert r.headers["HX-Reswap"] == "none"
    message, field = error_slot(r.text, slot)
    assert field == cell
    assert message.endswith(": enter a finite number between −1000 and 1000")


def test_no_js_page_for_joined_grids_with_a_bad_cell_comes_back_cell_by_cell(client: TestClient) -> None:
    """The page that shows the error sets the bad cell aside in its own input and keeps the rest."""
    r = client.post("/", data=join_grids({**page_form(client), "x-0-0": "0.75", "x-1-2": "abc", "w_q-1-1": "3"}))
    assert r.status_code == 422
    assert is_full_page(r)
    message, field = error_slot(r.text, "x")
    assert (field, message) == ("x-1-2", "X row 2, column 3: “abc” is not a number")
    assert re.search(r'name="x-1-2" value="abc"[^>]*aria-invalid="true"', r.text)
    after = form_fields(r.text)
    assert (after["x-0-0"], after["w_q-1-1"]) == ("0.75", "3")
    assert not any(name.startswith("grid-") for name in after)


@pytest.fixture
def threaded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the functions the page hands off the event loop: "parse" (the posted form, to the
    thread pool) and "heavy" for the response's work (to the heavy lane's process)."""
    calls: list[str] = []
    original = app.web.respond.run_in_threadpool
    in_process = Lanes.in_process

    async def spy(func: Callable[..., object], *args: object) -> object:
        calls.append(func.__name__)
        return await original(func, *args)

    async def heavy(self: Lanes, work: Callable[..., object], *args: object) -> object:
        calls.append("heavy")
        return await in_process(self, work, *args)

    monkeypatch.setattr(app.web.respond, "run_in_threadpool", spy)
    monkeypatch.setattr(Lanes, "in_process", heavy)
    return calls


@pytest.mark.parametrize(("d_model", "parsed_in_a_thread", "answered_in_a_thread"), [
    ("", False, False),  # the default preset: 84 fields
    ("16", False, True),  # 1,137 fields: computed in a thread
    ("32", True, True),  # 4,289 fields without JavaScript: parsed in a thread too
])
def test_a_large_form_is_read_and_answered_off_the_event_loop(client: TestClient, threaded: list[str], d_model: str,
                                                              parsed_in_a_thread: bool,
                                                              answered_in_a_thread: bool) -> None:
    form = page_form(client)
    if d_model:
        form = form_fields(client.post("/", data={**form, "d_model": d_model}).text)
    threaded.clear()
    r = client.post("/stages", data=form, headers=HTMX)
    assert r.status_code == 200
    assert ("parse" in threaded, "heavy" in threaded) == (parsed_in_a_thread, answered_in_a_thread)
    # Joined, the same form parses in a fraction of the time (on the loop), and is as much work to answer.
    threaded.clear()
    r = client.post("/stages", data=join_grids(form), headers=HTMX)
    assert r.status_code == 200
    assert ("parse" in threaded, "heavy" in threaded) == (False, answered_in_a_thread)


def test_opening_a_deeply_nested_file_is_a_clear_error(client: TestClient) -> None:
    r = client.post("/scenario/open", files={"scenario": ("s.json", b"[" * 100_000, "application/json")})
    assert r.status_code == 422
    assert "this file is not a scenario" in r.text


def test_a_value_that_rounds_to_zero_shows_as_0_in_its_input(client: TestClient) -> None:
    """−0.0 and a tiny negative typed into X come back as 0, never -0."""
    form = {**page_form(client), "x-0-0": "-0.0", "x-0-1": "-0.0000001", "w_q-0-0": "-1e-9"}
    r = client.post("/", data=form)
    assert r.status_code == 200
    after = form_fields(r.text)
    assert (after["x-0-0"], after["x-0-1"], after["w_q-0-0"]) == ("0", "0", "0")
    assert 'value="-0"' not in r.text


def test_inputs_show_a_true_minus_sign_and_take_either_sign_back(client: TestClient) -> None:
    """The preset's −0.3 shows as "−0.3"; the page's own form posts back unchanged, and a typed "-" or "−"
    reads the same."""
    form = page_form(client)
    assert form["x-0-2"] == "−0.3" and not [k for k, v in form.items() if re.fullmatch(r"-[0-9.]+", v)]
    for typed in ("-0.5", "−0.5"):
        r = client.post("/", data={**form, "x-0-2": typed})
        assert r.status_code == 200
        after = form_fields(r.text)
        assert after["x-0-2"] == "−0.5" and after["x-1-1"] == form["x-1-1"]


# --- cross-attention --------------------------------------------------------------------------------


def test_ticking_cross_attention_labels_k_and_v_with_c(client: TestClient) -> None:
    """Queries from X, keys and values from C: stage 1 multiplies C, not X, by W_K and W_V."""
    self_attention = client.post("/stages", data={**page_form(client), "stage": "qkv"}, headers=HTMX)
    assert self_attention.status_code == 200
    operand = r'<span class="expr"><math display="inline" alttext="(\w)">'
    assert re.findall(operand, self_attention.text) == ["X", "X", "X"]
    assert '<span class="mname"><math display="inline" alttext="K">' in self_attention.text
    r = client.post("/", data={**page_form(client), "cross": "on", "stage": "qkv"})
    assert r.status_code == 200
    assert re.findall(operand, r.text) == ["X", "C", "C"]
    maths = re.findall(r'<span class="mname"><math display="inline" alttext="([^"]*)">.*?</math></span> '
                       r'<span class="shape">([^<]*)</span>', r.text)
    assert ("Q = X W_Q", "5×3") in maths
    assert ("K = C W_K", "6×3") in maths and ("V = C W_V", "6×3") in maths
    # The editor's grids: the matrix's letter typeset, its words as text.
    titles = re.findall(r'<span class="mname"><math display="inline" alttext="([^"]*)">.*?</math>([^<]*)</span> '
                        r'<span class="shape">([^<]*)</span>', r.text)
    assert ("X", " (target sentence: queries)", "5×3") in titles
    assert ("C", " (source sentence: keys and values)", "6×3") in titles
    assert "have a row per source token of" in r.text and 'alttext="K = C W_K"' in r.text
    assert 'alttext="S = 6"' in r.text
    fields = form_fields(r.text)
    assert [fields[f"ctoken-{i}"] for i in range(6)] == ["Le", "chat", "assis", "sur", "le", "tapis"]
    scores = client.post("/stages", data={**fields, "goto": "scores"}, headers=HTMX)
    assert scores.status_code == 200
    assert len(heatmap(scores.text, "scores.0")) == 5 and len(heatmap(scores.text, "scores.0")[0]) == 6
    x = client.post("/stages", data={**fields, "goto": "x"}, headers=HTMX)
    assert all(f'alttext="{maths}"' in x.text for maths in ("T = 5", "S = 6", "d_model = 3"))


# --- counting from 1 --------------------------------------------------------------------------------


def test_the_page_counts_from_1_everywhere_a_student_reads_an_index(client: TestClient) -> None:
    r = client.get("/", params={"preset": "default"})
    assert r.status_code == 200
    assert "Rows, columns, tokens and heads are counted from 1." in r.text
    assert '<th scope="row">1 the</th>' in r.text and '<th scope="row">0 the</th>' not in r.text
    assert 'aria-label="token 1"' in r.text and 'aria-label="token 0"' not in r.text
    assert 'aria-label="token 5 (mat) is padding"' in r.text
    assert 'aria-label="remove token 1 (the)"' in r.text and 'aria-label="remove token 0 (the)"' not in r.text
    assert 'aria-label="X row 1 the, column x1"' in r.text
    assert re.search(r'name="inspect_row" min="1" max="5" value="1"', r.text)
    cross = client.post("/", data={**form_fields(r.text), "cross": "on"})
    assert cross.status_code == 200
    assert 'aria-label="source token 1"' in cross.text and 'aria-label="remove source token 6 (tapis)"' in cross.text
    assert 'aria-label="source token 1 (Le) is padding"' in cross.text
    learned = client.post("/", data={**form_fields(r.text), "positional_encoding": "learned"})
    assert learned.status_code == 200
    assert '<th scope="row">pos 1</th>' in learned.text and "pos 0<" not in learned.text


# --- the banner -------------------------------------------------------------------------------------


def summary(html: str) -> str:
    """The scenario's banner: a line of its own once edited (or hidden), else its summary folded to a details."""
    m = re.search(r'<(p|details) id="summary"[^>]*>.*?</\1>', html, re.S)
    assert m, "no summary"
    return m.group(0)


def prose_parts(text: str) -> tuple[str, str]:
    """A preset's summary as the banner prints it: its first sentence on the folded line, the rest under "more"."""
    lead, rest = lead_sentence(text)
    return str(prose(lead)), str(prose(rest))


def shows(banner: str, text: str) -> bool:
    return all(part in banner for part in prose_parts(text))


def test_the_banner_follows_a_structural_change(client: TestClient) -> None:
    preset = from_preset("default")[0].preset_obj
    form = page_form(client)
    assert shows(summary(client.get("/").text), preset.summary)
    r = client.post("/", data={**form, "d_model": "4", "num_heads": "2", "mask": "causal", "action": "add_token"},
                    headers=HTMX)
    assert r.status_code == 200
    banner = summary(r.text)
    assert preset.title in banner and prose_parts(preset.summary)[0] not in banner
    assert ("edited from the preset: 6 tokens “the cat sat on mat new”, embeddings of 4, 2 heads, causal mask."
            in banner)
    assert '<a href="/?preset=default">Start over from the preset</a>' in banner
    # A token renamed in the values area (an htmx edit of the stages) updates it out of band.
    renamed = client.post("/stages", data={**form, "token-0": "a"}, headers=HTMX)
    assert renamed.status_code == 200
    banner = summary(renamed.text)
    assert 'hx-swap-oob="true"' in banner and "edited from the preset: 5 tokens “a cat sat on mat”" in banner


def test_the_banner_keeps_the_summary_for_value_edits_and_says_so(client: TestClient) -> None:
    text = from_preset("pool")[0].preset_obj.summary
    form = page_form(client, "pool")
    same = client.post("/stages", data={**form, "stage": "scores"}, headers=HTMX)
    assert shows(summary(same.text), text) and "values edited" not in summary(same.text)
    edited = client.post("/stages", data={**form, "x-0-0": "0.9"}, headers=HTMX)
    assert edited.status_code == 200
    banner = summary(edited.text)
    assert 'hx-swap-oob="true"' in banner
    assert shows(banner, text) and "(values edited)" in banner and "edited from the preset" not in banner
    no_js = client.post("/", data={**form, "x-0-0": "0.9"})
    assert "(values edited)" in summary(no_js.text) and 'hx-swap-oob' not in summary(no_js.text)


def test_without_a_preset_the_banner_is_empty_but_there_for_updates(client: TestClient) -> None:
    r = client.post("/", data={**page_form(client), "action": "new_weights"}, headers=HTMX)
    assert r.status_code == 200
    assert summary(r.text) == '<p id="summary" class="summary" hidden></p>'


# --- the lab and cost panels ----------------------------------------------------------------------


def test_extra_panels_are_computed_only_when_opened(client: TestClient) -> None:
    form = page_form(client)
    assert 'id="lab-panel"' in client.get("/").text
    closed = client.post("/stages", data=form, headers=HTMX)
    chart = 'role="img" class="chart '  # the lab's SVG charts (the pipeline map is an SVG too)
    assert 'name="show_panel" value="lab"' in closed.text and chart not in closed.text
    opened = client.post("/stages", data={**form, "show_panel": "lab"}, headers=HTMX)
    assert chart in opened.text and "0.881" in opened.text  # seed 003's softmax([8, −4, 6])
    assert form_fields(opened.text)["panels"] == "lab"
    both = client.post("/stages", data={**form, "panels": "lab", "show_panel": "cost"}, headers=HTMX)
    assert re.search(r'id="cost-panel" open>', both.text) and re.search(r'id="lab-panel" open>', both.text)
    assert form_fields(both.text)["panels"] == "cost lab"
    assert "crossover" in both.text
    ignored = client.post("/stages", data={**form, "panels": "lab <script>"}, headers=HTMX)
    assert form_fields(ignored.text)["panels"] == "lab"
