"""The printed handout through TestClient: every forward stage in order, the QR code of the state's link, a bad
link's 422 naming its field, the page's form posted to it, and the page's link to it."""

from __future__ import annotations

import re
from html import unescape

import numpy as np
import pytest
import segno
from fastapi.testclient import TestClient

from app.lesson.stages import visible_stages
from tests.conftest import form_fields, grid_keys, join_grids
from tests.web.test_security import _InlineFinder

FORWARD = [s.key for s in visible_stages(blocks=0)]
WITH_BLOCKS = [s.key for s in visible_stages(blocks=1)]


def stage_headings(html: str) -> list[str]:
    return re.findall(r'<h3 id="stage-([a-z_0-9]+)-h"', html)


def printed_link(html: str) -> str:
    """The state's link as the handout prints it: under the title, or on the last page when it is long."""
    short = re.search(r'<a href="[^"]*" id="handout-link">([^<]*)</a>', html)
    long = re.search(r'<p class="long-link">([^<]*)</p>', html)
    assert short or long, "no link printed"
    return unescape((long or short).group(1))


def qr_modules(html: str) -> list[list[bool]]:
    """The dark modules of the handout's QR code, read back from its SVG path (M, h and m commands, in modules)."""
    svg = re.search(r'<svg[^>]*class="handout-qr[^"]*".*?</svg>', html, re.S)
    assert svg, "no QR code"
    size = int(re.search(r'viewBox="0 0 (\d+) ', svg[0])[1]) // 4  # scale 4
    path = re.search(r'<path stroke="#000" d="([^"]+)"', svg[0])[1]
    dark = [[False] * size for _ in range(size)]
    x = y = 0.0
    for cmd, args in re.findall(r"([Mmh])([-\d. ]+)", path):
        numbers = [float(n) for n in args.split()]
        if cmd == "M":
            x, y = numbers
        elif cmd == "m":
            x, y = x + numbers[0], y + numbers[1]
        else:
            for k in range(int(numbers[0])):
                dark[int(y)][int(x) + k] = True
            x += numbers[0]
    return dark


def expected_modules(link: str) -> list[list[bool]]:
    """The link encoded by segno on its own, with the handout's quiet zone of 4 modules."""
    qr = segno.make(link, error="m", micro=False)
    return [[bool(v) for v in row] for row in qr.matrix_iter(scale=1, border=4)]


def test_a_presets_handout_has_every_forward_stage_in_order(client: TestClient) -> None:
    r = client.get("/handout", params={"preset": "bank-river"})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    assert stage_headings(r.text) == FORWARD
    assert "bank ①: by the river" in r.text  # the scenario's title, and its paragraph
    assert "Three heads, each looking for one relationship" in r.text


def test_the_qr_code_holds_the_presets_link(client: TestClient) -> None:
    r = client.get("/handout", params={"preset": "pool", "decimals": "2"})
    assert r.status_code == 200
    link = "http://testserver/?preset=pool&decimals=2"  # the request's own link: GET / reads it the same way
    assert printed_link(r.text) == link
    assert qr_modules(r.text) == expected_modules(link)
    opened = client.get(link)
    assert opened.status_code == 200 and form_fields(opened.text)["decimals"] == "2"


def test_a_whole_states_handout_prints_its_permalink(client: TestClient) -> None:
    page = client.get("/", params={"preset": "causal"})
    permalink = unescape(re.search(r'<a href="([^"]+)" id="permalink">', page.text)[1])
    r = client.get("/handout?" + permalink.partition("?")[2])
    assert r.status_code == 200
    assert stage_headings(r.text) == FORWARD
    assert printed_link(r.text) == "http://testserver" + permalink
    assert qr_modules(r.text) == expected_modules("http://testserver" + permalink)


def test_the_page_links_to_its_handout(client: TestClient) -> None:
    page = client.get("/", params={"preset": "pool"})
    assert page.status_code == 200
    permalink = unescape(re.search(r'<a href="([^"]+)" id="permalink">', page.text)[1])
    tag = re.search(r'<a href="([^"]+)" id="print-handout-link" target="_blank"', page.text)
    assert tag, "no Print handout link"
    assert unescape(tag[1]) == "/handout?" + permalink.partition("?")[2]


def test_a_bad_link_is_422_naming_its_field(client: TestClient) -> None:
    page = client.get("/", params={"preset": "pool"})
    fields = form_fields(page.text)
    r = client.get("/handout", params={**fields, "x-0-0": "nan"})
    assert r.status_code == 422
    m = re.search(r'<p class="field-error" role="alert" data-field="([^"]+)">([^<]*)</p>', r.text)
    assert m and m[1] == "x-0-0" and m[2].startswith("X row 1, column 1: ")
    assert "<article" not in r.text
    back = unescape(re.search(r'<a href="([^"]+)">Open it on the page</a>', r.text)[1])
    assert client.get(back).status_code == 422  # the page shows the same field marked


def test_a_mask_that_hides_every_key_is_422(client: TestClient) -> None:
    fields = form_fields(client.get("/", params={"preset": "pool"}).text)
    keys = len([name for name in fields if name.startswith("token-")])
    r = client.post("/handout", data={**fields, "blocked": " ".join(f"0.{j}" for j in range(keys))})
    assert r.status_code == 422
    assert 'data-field="mask"' in r.text


@pytest.mark.parametrize("joined", [False, True], ids=["one field per cell", "grids joined by the script"])
def test_the_posted_form_prints_the_same_handout(client: TestClient, joined: bool) -> None:
    page = client.get("/", params={"preset": "bank-river"})
    fields = form_fields(page.text)
    if joined:
        fields = join_grids(fields, grid_keys(page.text))
    posted = client.post("/handout", data=fields)
    linked = client.get("/handout", params={"preset": "bank-river"})
    assert posted.status_code == 200
    assert stage_headings(posted.text) == FORWARD
    numbers = re.compile(r'<td class="[ds]-?\d+">(?:<span>)?([^<]*)')
    assert numbers.findall(posted.text) == numbers.findall(linked.text)


def test_every_block_is_printed_in_turn(client: TestClient) -> None:
    r = client.get("/handout", params={"preset": "block"})
    assert r.status_code == 200
    assert stage_headings(r.text) == WITH_BLOCKS * 2
    assert r.text.count("block 1 of 2") == len(WITH_BLOCKS) and r.text.count("block 2 of 2") == len(WITH_BLOCKS)


def test_a_goal_adds_no_backward_stage_and_a_quiz_hides_nothing(client: TestClient) -> None:
    r = client.get("/handout", params={"preset": "learn-bank", "quiz": "on", "stage": "softmax"})
    assert r.status_code == 200
    assert stage_headings(r.text) == FORWARD
    assert 'class="qz"' not in r.text and "?</td>" not in r.text


def test_the_handout_has_no_form_and_no_export_buttons(client: TestClient) -> None:
    r = client.get("/handout", params={"preset": "causal"})
    assert r.status_code == 200
    # The controls a stage's partial brings (the mask's ticks) post nowhere, and static/handout.css hides them.
    assert "<form" not in r.text and 'class="export"' not in r.text and "scroll-cue" not in r.text
    assert "<script" not in r.text.replace('<script src="/static/handout.js" defer></script>', "")


def sixteen_by_sixteen() -> dict[str, str]:
    """A state of 16 tokens with embeddings of 16 (two heads, a causal mask): its link is too long for a QR code."""
    rng = np.random.default_rng(1)
    fields = {"shape": "16,2,8,8,0,0", "scale": "on", "mask": "causal", "stage": "x", "decimals": "3"}
    fields |= {f"token-{i}": f"w{i + 1}" for i in range(16)}
    return fields | {f"x-{i}-{j}": f"{v:.2f}" for (i, j), v in np.ndenumerate(rng.normal(size=(16, 16)))}


def test_a_state_too_long_for_a_qr_code_prints_its_link_on_the_last_page(client: TestClient) -> None:
    r = client.get("/handout", params=sixteen_by_sixteen())
    assert r.status_code == 200
    assert stage_headings(r.text) == FORWARD
    link = printed_link(r.text)
    assert link.startswith("http://testserver/?shape=16%2C2%2C8%2C8%2C0%2C0&token-0=w1&")
    assert len(link) > 3000 and "handout-qr" not in r.text
    assert "too long for a QR code" in r.text
    opened = client.get(link)
    assert opened.status_code == 200
    assert float(form_fields(opened.text)["x-15-15"].replace("−", "-")) == float(sixteen_by_sixteen()["x-15-15"])


@pytest.mark.parametrize("preset", ["bank-river", "block"])
def test_the_handout_needs_no_inline_script_or_style(client: TestClient, preset: str) -> None:
    r = client.get("/handout", params={"preset": preset})
    assert r.status_code == 200
    assert "content-security-policy" in r.headers
    finder = _InlineFinder()
    finder.feed(r.text)
    assert finder.found == []


# What only a screen does: select a cell, tick a box, press Next. The page says it; paper does not.
SCREEN_ONLY = ("Select a cell of Q, K or V", "Select a score", "Select a weight", "Select an output cell",
               "tick cells here", "Select a cell to see its arithmetic", "Next → follows it")


@pytest.mark.parametrize("preset", ["default", "linear", "additive", "block"])
def test_the_handout_leaves_out_the_screens_instructions(client: TestClient, preset: str) -> None:
    r = client.get("/handout", params={"preset": preset})
    assert r.status_code == 200
    text = unescape(r.text[r.text.index("<article"):])  # the stages (a preset's own paragraph is its article's)
    assert "Each row sums to 1." in text  # what the stage says stays
    assert [s for s in SCREEN_ONLY if s in text] == []
    page = client.get("/", params={"preset": preset, "show_all": "on"})
    assert page.status_code == 200
    assert "Select a weight" in unescape(page.text)  # the page still says how
