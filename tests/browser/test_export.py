"""Export in a real Chromium: a panel's CSV, JSON and LaTeX and the whole run download as files, with
JavaScript (fetch + a temporary <a download>, no htmx swap) and without it (a plain form post)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import numpy as np
import pytest

from app.web.responses import AttentionResponse
from tests.browser.conftest import htmx_idle
from tests.browser.test_page import current_stage, expected_run, go_to_stage, heatmap
from tests.maths.test_attention import S003_A

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Download, Locator, Page

    from tests.browser.conftest import PageLog

pytestmark = pytest.mark.browser


def export_control(page: Page, ref: str, stage: str) -> Locator:
    """The export disclosure of the panel whose heatmap is ``ref`` in one stage, opened."""
    panel = page.locator(f"#stage-{stage} figure.panel", has=page.locator(f'table.heatmap[data-ref="{ref}"]'))
    details = panel.locator("details.export")
    details.locator("summary").click()
    expect(details).to_have_attribute("open", "")
    return details


def download(page: Page, button: Locator) -> tuple[str, str]:
    """Click ``button``, wait for the download it starts: (suggested file name, content)."""
    with page.expect_download() as info:
        button.click()
    d: Download = info.value
    return d.suggested_filename, Path(d.path()).read_text(encoding="utf-8")


def download_without_javascript(page: Page, page_log: PageLog, button: Locator) -> tuple[str, str]:
    """Like ``download``, for a plain form post: Chromium aborts a navigation that turns into a
    download (net::ERR_ABORTED, its documented behaviour), which the page's log does not count as
    a problem (a cancelled document load); any other failure stays and fails the test. The page's
    own requests (its favicon) finish first, so the navigation cannot abort them."""
    page.wait_for_load_state("networkidle")
    with page.expect_event("requestfailed") as failed:
        name, text = download(page, button)
    request = failed.value
    assert (request.method, urlsplit(request.url).path, request.failure) == ("POST", "/export", "net::ERR_ABORTED")
    assert not page_log.problems, page_log.problems
    return name, text


def csv_values(text: str) -> tuple[list[str], np.ndarray]:
    rows = list(csv.reader(io.StringIO(text)))
    return [r[0] for r in rows[1:]], np.array([[float(v) for v in r[1:]] for r in rows[1:]])


def test_panel_csv_downloads_with_javascript_and_the_page_stays(page: Page) -> None:
    page.goto("/?preset=three-token")
    go_to_stage(page, "softmax")
    url = page.url
    control = export_control(page, "softmax.0", "softmax")
    posts: list[str] = []
    page.on("request", lambda r: posts.append(urlsplit(r.url).path) if r.method == "POST" else None)

    name, text = download(page, control.get_by_role("button", name="CSV"))

    assert posts == ["/export"]  # fetched by export.js; htmx posted nothing
    assert name == "softmax_0.csv"
    labels, values = csv_values(text)
    assert labels == ["1 token 1", "2 token 2", "3 token 3"]
    assert values.tolist() == expected_run("three-token").heads[0].softmax.tolist()
    assert np.round(values, 3).tolist() == S003_A.tolist()
    # htmx did not swap the file into the page: same address, same stage, the panel still there.
    assert page.url == url
    expect(current_stage(page)).to_have_id("stage-softmax")
    expect(heatmap(page, "softmax.0", "softmax")).to_be_visible()


def test_export_follows_an_edit_and_latex_and_json_download(page: Page) -> None:
    page.goto("/")
    go_to_stage(page, "output")
    with page.expect_response(lambda r: r.url.endswith("/stages")):  # the stages are swapped first
        page.locator('input[name="x-0-0"]').fill("2.5")
    htmx_idle(page)
    expected = expected_run("default", {(0, 0): 2.5}).heads[0].output
    control = export_control(page, "output.0", "output")

    name, text = download(page, control.get_by_role("button", name="JSON"))
    assert name == "output_0.json"
    body = json.loads(text)
    assert body["name"] == "output.0"
    assert body["values"] == expected.tolist()

    name, text = download(page, control.get_by_role("button", name="LaTeX"))
    assert name == "output_0.tex"
    assert text.startswith("\\begin{bmatrix}") and text.count("\\\\") == expected.shape[0] - 1
    first_row = text.splitlines()[1].strip(" \\").split(" & ")
    assert first_row == [f"{v:.3f}" for v in np.round(expected[0], 3) + 0.0]


def test_whole_run_json_downloads(page: Page) -> None:
    page.goto("/?preset=three-token")
    name, text = download(page, page.get_by_role("button", name="Export the whole run (JSON)"))
    assert name == "attention-run.json"
    run = json.loads(text)
    AttentionResponse.model_validate(run)
    assert np.round(run["heads"][0]["softmax"], 3).tolist() == S003_A.tolist()


def test_a_bad_field_shows_the_export_message(page: Page, page_log: PageLog) -> None:
    page_log.allow(422, "/stages")
    page_log.allow(422, "/export")
    page.goto("/?preset=three-token")
    go_to_stage(page, "softmax")
    page.locator('input[name="x-0-0"]').fill("5000")
    expect(page.locator("#err-x")).to_contain_text("X row 1, column 1")
    control = export_control(page, "softmax.0", "softmax")
    control.get_by_role("button", name="CSV").click()
    expect(control.locator(".export-error")).to_contain_text("X row 1, column 1")


@pytest.mark.parametrize("js_enabled", [False])
def test_panel_csv_downloads_without_javascript(page: Page, page_log: PageLog) -> None:
    page.goto("/?preset=three-token")
    go_to_stage(page, "softmax")
    control = export_control(page, "softmax.0", "softmax")

    name, text = download_without_javascript(page, page_log, control.get_by_role("button", name="CSV"))

    assert name == "softmax_0.csv"
    assert csv_values(text)[1].tolist() == expected_run("three-token").heads[0].softmax.tolist()
    expect(current_stage(page)).to_have_id("stage-softmax")  # the page stays

    name, text = download_without_javascript(page, page_log,
                                             page.get_by_role("button", name="Export the whole run (JSON)"))
    assert name == "attention-run.json"
    assert json.loads(text)["tokens"] == ["token 1", "token 2", "token 3"]
