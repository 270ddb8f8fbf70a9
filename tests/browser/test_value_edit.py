"""A value edit in a real Chromium: a changed number in the editor's grids brings back the stage body
alone (the page's script marks it, the server answers with what numbers change), so the heatmaps, the
lines, the inspector and the Learn panel follow while the map, the stepper and the view options stay the
same nodes; any other change (a token) still gets the whole stages."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

import pytest

from tests.browser.conftest import htmx_idle
from tests.browser.test_page import cell, cells, current_stage, expected_run, fmt, go_to_stage, heatmap, map_current

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Page, Response, Route

pytestmark = pytest.mark.browser

STAYING = {"map": "nav.pipeline-map", "stepper": "#next-stage", "options": ".view-options"}


def probe(page: Page) -> None:
    """Mark the nodes a value edit leaves on the page, so that a swap that replaced them shows."""
    for name, selector in STAYING.items():
        page.locator(selector).evaluate(f"el => {{ el.probe = '{name}' }}")


def probed(page: Page) -> dict[str, bool]:
    return {name: page.locator(selector).evaluate(f"el => el.probe === '{name}'")
            for name, selector in STAYING.items()}


def edit(page: Page, selector: str, value: str) -> Response:
    with page.expect_response(lambda r: r.url.endswith("/stages") and r.request.method == "POST") as answer:
        page.locator(selector).fill(value)
    assert answer.value.status == 200
    return answer.value


def test_a_value_edit_updates_the_heatmaps_and_the_inspector_and_keeps_the_map(page: Page) -> None:
    page.goto("/")
    go_to_stage(page, "softmax")
    with page.expect_response(lambda r: r.url.endswith("/stages")):
        cell(heatmap(page, "softmax.0"), 1, 2).click()  # the inspector's cell: the whole stages come back
    htmx_idle(page)  # that answer swapped in (it marks the cells the selected one reads) before the edit below
    inspector = page.locator("#inspector")
    expect(inspector).to_contain_text("exp")
    before = inspector.inner_text()
    scaled = heatmap(page, "scaled.0").inner_text()
    probe(page)

    answer = edit(page, 'input[name="x-0-0"]', "2.5")
    assert answer.request.headers.get("attention-edit") == "value"
    assert answer.headers["hx-retarget"] == "#stage-body"

    run = expected_run("default", {(0, 0): 2.5})
    expect(heatmap(page, "scaled.0")).not_to_have_text(scaled)  # swapped in
    htmx_idle(page)
    assert cells(heatmap(page, "softmax.0")) == fmt(run.heads[0].softmax)
    assert cells(heatmap(page, "scaled.0")) == fmt(run.heads[0].scaled)
    expect(inspector).not_to_have_text(before)
    assert f"{run.heads[0].softmax[1, 2]:.3f}" in inspector.inner_text()  # the selected weight, recomputed
    expect(page.locator("#stage-body")).to_have_count(1)
    assert probed(page) == {"map": True, "stepper": True, "options": True}
    expect(current_stage(page)).to_have_id("stage-softmax")

    # The map's links follow the values (each its stage's permalink), as does the address bar.
    href = page.locator("#map-wide-output").get_attribute("href")
    fields = dict(parse_qsl(urlsplit(href).query))
    assert fields["x-0-0"] == "2.5" and fields["stage"] == "output"
    page.wait_for_function("() => new URLSearchParams(location.search).get('x-0-0') === '2.5'")
    permalink = dict(parse_qsl(urlsplit(page.locator("#permalink").get_attribute("href")).query))
    assert {**permalink, "stage": "output"} == fields

    # The map still steps, with the edited value.
    go_to_stage(page, "output")
    assert cells(heatmap(page, "output.0")) == fmt(run.heads[0].output)
    assert probed(page)["map"] is False  # a step brings the whole stages


def test_a_token_edit_brings_the_whole_stages(page: Page) -> None:
    page.goto("/")
    go_to_stage(page, "scores")
    probe(page)
    answer = edit(page, 'input[name="token-1"]', "dog")
    assert answer.request.headers.get("attention-edit") is None
    assert "hx-retarget" not in answer.headers
    expect(heatmap(page, "scores.0").locator("thead")).to_contain_text("dog")
    assert probed(page) == {"map": False, "stepper": False, "options": False}


def test_a_value_edit_while_learning_updates_the_loss_and_the_gradient_sizes(page: Page) -> None:
    page.goto("/?preset=learn-translate")
    sizes = page.locator(".backward-map .grad-size")
    expect(sizes).to_have_count(6)
    before = sizes.all_inner_texts()
    loss = page.locator("#learn .learn-status").get_attribute("data-loss")
    probe(page)

    answer = edit(page, 'input[name="x-0-0"]', "0.9")
    assert answer.request.headers.get("attention-edit") == "value"
    expect(page.locator("#learn .learn-status")).not_to_have_attribute("data-loss", loss)
    assert sizes.all_inner_texts() != before
    assert probed(page) == {"map": True, "stepper": True, "options": True}


def test_an_older_answer_arriving_last_is_not_swapped_in_over_a_newer_one(page: Page) -> None:
    """An edit whose answer is slow, then a step: the step's answer (which carries the edit too, as every
    control sends the whole form) stays on screen when the edit's answer comes back after it. Before, the
    last answer won: the softmax's body came back into the page under the map's "output"."""
    page.goto("/")
    go_to_stage(page, "softmax")
    held: list[Route] = []

    def hold_the_edit(route: Route) -> None:
        if route.request.method == "POST" and route.request.headers.get("attention-edit") == "value" and not held:
            held.append(route)  # answered below, once the step's answer is on screen
        else:
            route.continue_()

    page.route("**/stages", hold_the_edit)
    page.locator('input[name="x-0-0"]').fill("2.5")
    for _ in range(100):  # the edit is sent 300 ms after the typing stops
        if held:
            break
        page.wait_for_timeout(50)
    assert len(held) == 1
    with page.expect_response(lambda r: r.url.endswith("/stages")) as step:
        page.locator("#next-stage").click()
    assert step.value.status == 200
    run = expected_run("default", {(0, 0): 2.5})
    expect(current_stage(page)).to_have_id("stage-output")
    assert cells(heatmap(page, "output.0")) == fmt(run.heads[0].output)  # the step carried the edit

    with page.expect_response(lambda r: r.request == held[0].request) as late:
        held[0].continue_()
    assert late.value.status == 200 and late.value.headers["hx-retarget"] == "#stage-body"
    htmx_idle(page)
    page.evaluate("() => new Promise(requestAnimationFrame)")  # a swap would have happened by now
    expect(current_stage(page)).to_have_id("stage-output")
    expect(map_current(page)).to_have_id("map-wide-output")
    assert cells(heatmap(page, "output.0")) == fmt(run.heads[0].output)
