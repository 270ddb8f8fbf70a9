"""GET /decoder's "Why this word?": each part's share of the next token's logit, as the page prints it, against
POST /api/decoder/attribution (itself held to PyTorch hooks); the grid's cells step through their heads; a token
named by the query string, a contrast, and a bad one's 422 naming its field."""

from __future__ import annotations

import re
from html import unescape

import pytest
from fastapi.testclient import TestClient

from app.view.decoder_view import decoder_catalogue_view

TEXT = "The capital of France is"
MINUS = "−"


@pytest.fixture(autouse=True, scope="module")
def ready() -> None:
    decoder_catalogue_view()


def number(text: str) -> float:
    return float(text.replace(MINUS, "-").replace(",", ".").replace("+", ""))


def section(html: str) -> str:
    found = re.search(r'<section class="why".*?</section>', html, re.S)
    assert found is not None, "no Why section"
    return found.group(0)


def grid(html: str) -> list[list[float]]:
    rows = re.findall(r"<tr><th scope=\"row\">L\d+</th>(.*?)</tr>", section(html), re.S)
    return [[number(unescape(re.sub(r"<[^>]+>", "", c)).strip()) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in rows]


def test_the_grid_prints_the_apis_shares_and_the_sum_gives_the_logit(client: TestClient) -> None:
    r = client.get("/decoder", params={"text": TEXT})
    assert r.status_code == 200
    api = client.post("/api/decoder/attribution", json={"text": TEXT}).json()
    cells = grid(r.text)
    assert len(cells) == 30 and all(len(row) == 10 for row in cells)  # 9 heads and the FFN
    for p in api["parts"]:
        if p["kind"] == "head":
            assert cells[p["layer"]][p["head"]] == pytest.approx(p["value"], abs=0.005 + 1e-9)
        elif p["kind"] == "mlp":
            assert cells[p["layer"]][9] == pytest.approx(p["value"], abs=0.005 + 1e-9)
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", section(r.text))).split())
    assert "Why “␣Paris”?" in text
    total = re.search(r"= ([\d.]+) = logit\(“␣Paris”\) = ([\d.]+)", text)
    assert total is not None and number(total.group(2)) == pytest.approx(api["logit"], abs=0.005)
    assert number(total.group(1)) == pytest.approx(api["sum"], abs=0.005)
    assert 'href="/decoder?text=The+capital+of+France+is&amp;layer=24&amp;head=5#steps"' in section(r.text)


def test_a_token_and_a_contrast_from_the_query_string(client: TestClient) -> None:
    r = client.get("/decoder", params={"text": TEXT, "why": " Paris", "against": "Ġthe"})
    assert r.status_code == 200
    api = client.post("/api/decoder/attribution", json={"text": TEXT, "target": " Paris", "contrast": " the"}).json()
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", section(r.text))).split())
    assert "Why “␣Paris” and not “␣the”?" in text
    assert f"{api['logit']:.2f}" in text
    assert grid(r.text)[23][4] == pytest.approx(next(p["value"] for p in api["parts"]
                                                     if p.get("layer") == 23 and p.get("head") == 4), abs=0.005)
    assert '<strong aria-current="true">␣the</strong>' in section(r.text)  # the contrast chosen, said
    assert "why=7042&amp;against=" in section(r.text)  # each other candidate one link away


@pytest.mark.parametrize(("params", "field"), [({"why": "Paris is"}, "why"), ({"why": "99999"}, "why"),
                                               ({"why": " Paris", "against": "ĠParis"}, "against")])
def test_a_bad_token_is_a_422_naming_its_field(client: TestClient, params: dict, field: str) -> None:
    r = client.get("/decoder", params={"text": TEXT, **params})
    assert r.status_code == 422
    assert field in r.text and TEXT in unescape(r.text)  # the text typed is kept


def test_min_p_greys_the_bars_it_cuts_and_shows_what_the_rest_are_drawn_with(client: TestClient) -> None:
    r = client.get("/decoder", params={"text": TEXT, "temperature": "1.5", "min_p": "0.05"})
    assert r.status_code == 200
    api = client.post("/api/decoder", json={"text": TEXT, "temperature": 1.5, "min_p": 0.05}).json()
    bars = re.findall(r'<li class="bar( cut)?">.*?<span class="pct">(.*?)</span></a>', r.text, re.S)
    assert len(bars) == 10
    for (cut, pct), c in zip(bars, api["next"]["candidates"], strict=True):
        assert (cut == " cut") == (c["drawn"] == 0)
        assert (c["probability"] >= 0.05 * api["next"]["candidates"][0]["probability"]) == (c["drawn"] > 0)
        if c["drawn"]:
            shown = re.search(r'<span class="drawn">→ ([\d.]+)%', pct)
            assert shown is not None and float(shown.group(1)) == pytest.approx(100 * c["drawn"], abs=0.05)
    assert "min_p=0.05" in r.text  # the permalink keeps it
    bad = client.get("/decoder", params={"text": TEXT, "min_p": "2"})
    assert bad.status_code == 422 and "min_p" in bad.text


def test_the_rollout_says_the_first_tokens_share_and_draws_the_rest_renormalised(client: TestClient) -> None:
    r = client.get("/decoder", params={"text": TEXT})
    last = client.post("/api/decoder", json={"text": TEXT}).json()["rollout"][-1]
    found = re.search(r'<section class="rollout".*?</section>', r.text, re.S)
    assert found is not None
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", found.group(0))).split())
    first = re.search(r"takes ([\d.]+)% of the last row", text)
    rest = re.search(r"share the remaining ([\d.]+)%", text)
    assert first is not None and rest is not None
    assert float(rest.group(1)) > 0 and float(first.group(1)) < 100  # never printed as 0 % and 100 %
    assert float(rest.group(1)) == pytest.approx(100 * sum(last[1:]), rel=0.05)
    shown = [float(p) for p in re.findall(r'<span class="pct">([\d.]+)%</span>', found.group(0))]
    assert shown == pytest.approx([100 * v / sum(last[1:]) for v in last[1:]], abs=0.05)
