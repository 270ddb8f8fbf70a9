"""POST /api/decoder/saliency and "Which words made it?" on GET /decoder: each input token's share as the API
answers it, against PyTorch autograd on transformers' reading of the same file with the same rule and steps
(tests/fixtures/smollm2_saliency.npz, scripts/saliency_reference.py); the page prints the API's shares and says how
far they are from adding up; a bad field's 422 names it."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.view.decoder_view import decoder_catalogue_view

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "smollm2_saliency.npz"
with np.load(FIXTURE) as npz:
    REF = dict(npz)
TEXT = str(REF["text_0"])
HTMX = {"HX-Request": "true"}


@pytest.fixture(autouse=True, scope="module")
def ready() -> None:
    decoder_catalogue_view()


def close(got: list[float], want: np.ndarray) -> None:
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max()))


def test_gradient_x_input_equals_autograd(client: TestClient) -> None:
    r = client.post("/api/decoder/saliency", json={"text": TEXT})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["target"]["id"] == int(REF["target_0"]) and doc["method"] == "gradient_x_input"
    assert doc["f"] == "log p(target)" and doc["f_x"] == pytest.approx(float(REF["f_0"]), abs=1e-3)
    close([s["signed"] for s in doc["scores"]], REF["gxi_signed_0"])
    close([s["norm"] for s in doc["scores"]], REF["gxi_norm_0"])
    total = sum(s["signed"] for s in doc["scores"])
    assert doc["completeness_error"] == pytest.approx(abs(total - (doc["f_x"] - doc["f_baseline"])), abs=1e-6)


def test_integrated_gradients_with_a_contrast_equal_autograd(client: TestClient) -> None:
    steps = int(REF["steps"])
    r = client.post("/api/decoder/saliency", json={
        "text": TEXT, "contrast": int(REF["contrast_0"]), "method": "integrated_gradients", "steps": steps,
        "baseline": "zero"})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["f"] == "logit(target) − logit(contrast)" and doc["steps"] == steps
    close([s["signed"] for s in doc["scores"]], REF["ig_zero_signed_c_0"])
    close([s["norm"] for s in doc["scores"]], REF["ig_zero_norm_c_0"])
    assert doc["f_baseline"] == pytest.approx(float(REF["ig_zero_f_base_c_0"]), abs=1e-3)


@pytest.mark.parametrize(("body", "named"), [
    ({"text": TEXT, "method": "integrated_gradients", "steps": 65}, "steps"),
    ({"text": TEXT, "method": "saliency"}, "method"),
    ({"text": TEXT, "baseline": " Paris is"}, "baseline"),
    ({"text": TEXT, "target": " Paris", "contrast": " Paris"}, "contrast"),
])
def test_a_bad_field_is_named(client: TestClient, body: dict, named: str) -> None:
    r = client.post("/api/decoder/saliency", json=body)
    assert r.status_code == 422
    error = r.json()["detail"][0]
    assert error.get("field", error["loc"][-1]) == named


def test_the_page_shades_each_token_by_the_apis_share(client: TestClient) -> None:
    plain = client.get("/decoder", params={"text": TEXT}, headers=HTMX | {"HX-Target": "decoder-rest"})
    assert 'class="saliency-tokens"' not in plain.text  # computed only when asked
    links = re.findall(r'<p class="saliency-links">.*?</p>', plain.text, re.S)[0]
    assert "saliency=gradient" in links and "saliency=integrated" in links
    r = client.get("/decoder", params={"text": TEXT, "saliency": "integrated"})
    assert r.status_code == 200
    api = client.post("/api/decoder/saliency", json={"text": TEXT, "method": "integrated_gradients"}).json()
    shares = re.findall(r'<li class="d-?\d"><span class="tok">([^<]*)</span><span class="share">([^<]*)</span>',
                        r.text)
    assert [unescape(t) for t, _ in shares] == ["The", "␣capital", "␣of", "␣France", "␣is"]
    assert [float(v.replace("−", "-")) for _, v in shares] == [round(s["signed"], 2) for s in api["scores"]]
    said = " ".join(unescape(re.sub(r"<[^>]+>", " ", re.search(r'<p class="saliency-sum">.*?</p>', r.text, re.S)
                                    .group(0))).split())
    error = f"{api['completeness_error']:.2f}"
    assert f"{error} off" in said and "16 steps" in said
    bad = client.get("/decoder", params={"text": TEXT, "saliency": "all"}, headers=HTMX)
    assert bad.status_code == 422 and "saliency must be one of gradient, integrated" in unescape(bad.text)
