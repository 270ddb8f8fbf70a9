"""GET /decoder/patching and POST /api/decoder/patching: activation patching as the API answers it, against the same
patching done with PyTorch hooks on transformers' reading of the same file (tests/fixtures/smollm2_patching.npz,
scripts/patching_reference.py); the page's maps print the API's numbers; a bad field's 422 names it and keeps what
was typed; "Next word" links here with its text to change a word of."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.view.decoder_view import decoder_catalogue_view

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "smollm2_patching.npz"
with np.load(FIXTURE) as npz:
    REF = dict(npz)
CLEAN, CORRUPTED = str(REF["clean_0"]), str(REF["corrupted_0"])
HTMX = {"HX-Request": "true"}


@pytest.fixture(autouse=True, scope="module")
def ready() -> None:
    decoder_catalogue_view()


def number(text: str) -> float:
    return float(unescape(text).replace("−", "-"))


def table(html: str, section: str) -> list[list[float]]:
    found = re.search(rf'<section class="patch-map" id="{section}".*?</section>', html, re.S).group(0)
    rows = re.findall(r'<tr><th scope="row">[^<]*</th>(.*?)</tr>', found, re.S)
    return [[number(c) for c in re.findall(r"<td[^>]*>([^<]*)</td>", row)] for row in rows]


@pytest.fixture
def api(client: TestClient) -> dict:  # computed once: the service keeps the patching
    r = client.post("/api/decoder/patching", json={"clean": CLEAN, "corrupted": CORRUPTED})
    assert r.status_code == 200, r.text
    return r.json()


def test_the_apis_maps_equal_the_pytorch_hooks(api: dict) -> None:
    assert api["target"]["id"] == int(REF["target_0"]) and api["target"]["token"] == "ĠParis"
    assert api["contrast"]["id"] == int(REF["contrast_0"]) and api["contrast"]["token"] == "ĠRome"
    assert api["metric_clean"] == pytest.approx(float(REF["metric_clean_0"]), abs=1e-3)
    assert api["metric_corrupted"] == pytest.approx(float(REF["metric_corrupted_0"]), abs=1e-3)
    np.testing.assert_allclose(api["residual"], REF["residual_0"], atol=1e-3, rtol=0)
    np.testing.assert_allclose(api["heads"], REF["heads_0"], atol=1e-3, rtol=0)
    assert len(api["clean_tokens"]) == len(api["residual"][0]) == 5


def test_the_page_prints_the_apis_maps(client: TestClient, api: dict) -> None:
    r = client.get("/decoder/patching", params={"clean": CLEAN, "corrupted": CORRUPTED})
    assert r.status_code == 200
    np.testing.assert_allclose(table(r.text, "patch-residual"), np.round(api["residual"], 2), atol=0.0051)
    np.testing.assert_allclose(table(r.text, "patch-heads"), np.round(api["heads"], 2), atol=0.0051)
    said = " ".join(unescape(re.sub(r"<[^>]+>", " ", re.search(r'<p class="patch-score">.*?</p>', r.text, re.S)
                                    .group(0))).split())
    assert "logit(“␣Paris”) − logit(“␣Rome”): 7.31 on the clean text, −6.02 on the corrupted one" in said
    fragment = client.get("/decoder/patching", params={"clean": CLEAN, "corrupted": CORRUPTED},
                          headers=HTMX | {"HX-Target": "patching-work"})
    assert fragment.text.lstrip().startswith('<div id="patching-work">') and "<html" not in fragment.text
    assert fragment.headers["HX-Push-Url"].startswith("/decoder/patching?clean=The+capital")


@pytest.mark.parametrize(("fields", "named", "words"), [
    ({"clean": CLEAN, "corrupted": "The capital of the United Kingdom is"}, "corrupted", "change words"),
    ({"clean": CLEAN, "corrupted": CLEAN}, "corrupted", "is the clean text"),
    ({"clean": "", "corrupted": CORRUPTED}, "clean", "the text is empty"),
    ({"clean": CLEAN, "corrupted": CORRUPTED, "target": " Paris is"}, "target", "is 2 tokens"),
    ({"clean": "word " * 20, "corrupted": "word " * 19 + "bird"}, "clean", "patching takes at most 16"),
])
def test_a_bad_field_is_named_by_the_page_and_the_api(client: TestClient, fields: dict, named: str,
                                                      words: str) -> None:
    page = client.get("/decoder/patching", params=fields)
    assert page.status_code == 422 and f'data-field="{named}"' in page.text and words in unescape(page.text)
    assert f'value="{fields["corrupted"]}"' in unescape(page.text)  # what was typed stays
    fragment = client.get("/decoder/patching", params=fields, headers=HTMX | {"HX-Target": "patching-work"})
    assert fragment.status_code == 422 and fragment.headers["HX-Reswap"] == "none"  # the last result stays
    api = client.post("/api/decoder/patching", json=fields)
    assert api.status_code == 422 and api.json()["detail"][0]["field"] == named


def test_next_word_links_here_with_its_text_to_change_a_word_of(client: TestClient) -> None:
    r = client.get("/decoder", params={"text": CLEAN}, headers=HTMX | {"HX-Target": "decoder-rest"})
    link = re.search(r'<p class="patch-link"><a href="([^"]+)"', r.text).group(1)
    assert unescape(link) == "/decoder/patching?clean=The+capital+of+France+is"
    page = client.get(unescape(link))
    assert page.status_code == 200 and 'id="patch-heads"' not in page.text
    assert f'id="corrupted" name="corrupted" value="{CLEAN}"' in page.text and "Change one word" in page.text
