"""What each stage's words state, as the page renders them: the conventions the maths keeps (ALiBi's slopes,
RoPE's pairing, the sinusoidal formula, LayerNorm's ε), the FFN's activation, how a mask enters linear
attention; and the score functions written in one orientation in the stages, the schema and the docs."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.lesson.presets import PRESETS
from app.lesson.stages import BY_KEY, Options, describe
from tests.conftest import form_fields

HTMX = {"HX-Request": "true"}


def page_form(client: TestClient, preset: str = "default") -> dict[str, str]:
    r = client.get("/", params={"preset": preset})
    assert r.status_code == 200
    return form_fields(r.text)


def stage_text(client: TestClient, stage: str, **fields: str) -> str:
    """The words and maths of one stage of the default preset with ``fields`` changed, without spaces."""
    form = form_fields(client.get("/").text)
    r = client.post("/stages", data={**form, **fields, "goto": stage}, headers=HTMX)
    assert r.status_code == 200
    article = re.search(rf'<article class="stage" id="stage-{stage}".*?</article>', r.text, re.S).group(0)
    return "".join(html.unescape(re.sub(r"<[^>]+>", "", article)).split())


def test_the_scaled_stage_states_alibi_s_slopes(client: TestClient) -> None:
    text = stage_text(client, "scaled", positional_encoding="alibi", num_heads="3", d_k="1")
    assert "mh=2−8h/H" in text and "poweroftwo" in text and "everyotherslopefortwicethat" in text


def test_the_scores_stage_states_rope_s_pairing_and_base(client: TestClient) -> None:
    text = stage_text(client, "scores", positional_encoding="rope")
    assert "(1,2),(3,4),…" in text and "θm=10000−2m/dk" in text and "pos=0forthefirsttoken" in text
    assert "anoddlastdimensionisnotturned" in text


def test_the_x_stage_states_the_sinusoidal_formula_for_odd_d_model(client: TestClient) -> None:
    text = stage_text(client, "x", positional_encoding="sinusoidal")
    assert "Ppos,2i=sin(pos/100002i/dmodel)" in text and "anodddmodelendsonasine" in text


def test_the_add_and_norm_stage_states_eps_and_the_biased_variance(client: TestClient) -> None:
    text = stage_text(client, "addnorm1", blocks="1")
    assert "σ2+10−5" in text and "dividedbydmodel" in text


@pytest.mark.parametrize(("activation", "shown", "not_shown"), [
    ("relu", ["ReLU(z) = max(0, z)"], ["erf", "GPT-2"]),
    ("gelu", ["erf", "the exact form (PyTorch's default, BERT)"], ["GPT-2", "0.044715"]),
    ("gelu_tanh", ["0.044715", "GPT-2's approximation", "4.74"], ["PyTorch's default"]),
])
def test_the_ffn_stage_names_its_activation(client: TestClient, activation: str, shown: list[str],
                                            not_shown: list[str]) -> None:
    form = {**page_form(client, "block"), "activation": activation}
    r = client.post("/stages", data={**form, "goto": "ffn"}, headers=HTMX)
    assert r.status_code == 200
    note = re.search(r'<article class="stage" id="stage-ffn".*?</article>', r.text, re.S).group(0)
    text = "".join(html.unescape(re.sub(r"<[^>]+>", "", note)).split())  # its words and maths, no spaces

    def found(words: str) -> bool:
        return "".join(words.split()) in text

    assert all(map(found, shown)) and not any(map(found, not_shown)), text
    assert 'selected>' + {"relu": "ReLU", "gelu": "GELU (exact)", "gelu_tanh": "GELU (tanh approximation)"}[
        activation] in client.post("/", data=form, headers=HTMX).text


@pytest.mark.parametrize("mask", ["none", "causal"])
def test_the_linear_output_stage_says_how_a_mask_enters(client: TestClient, mask: str) -> None:
    form = {**page_form(client, "linear"), "mask": mask}
    r = client.post("/stages", data={**form, "goto": "output"}, headers=HTMX)
    assert r.status_code == 200
    stage = re.search(r'<article class="stage" id="stage-output".*?</article>', r.text, re.S).group(0)
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", "", stage)).split())
    said = "is still built from every key; the mask is applied per query inside the sums"
    assert (said in text) == (mask == "causal")
    assert ("seen by" in text) == (mask == "causal")  # the formula and the equation skip hidden keys


def test_the_score_functions_are_written_in_one_orientation_everywhere(client: TestClient) -> None:
    """q_i and k_j are rows, as the code computes (Q·W₁)_ia + (K·W₂)_ja: q_i·W₁, never W₁q or W₁ᵀq."""
    schema = client.get("/openapi.json").text
    readme = "".join(p.read_text() for p in (Path(__file__).resolve().parents[2] / "docs").glob("*.md"))
    sources = [schema, readme, PRESETS["additive"].summary,
               *(" ".join(describe(BY_KEY["scores"], Options(score=score))) for score in ("general", "additive"))]
    column_forms = ("W₁q", "W₁ᵀq", "W_1 q", "W_1^{\\top} q", "qᵀ·W", "q_i^{\\top} W_a", "v_aᵀ", "v_a^{\\top}")
    for text in sources:
        assert not [form for form in column_forms if form in text], text[:200]
    for text in (schema, readme):
        assert "v_a·tanh(q_i·W₁ + k_j·W₂)" in text and "q_i·W_a·k_jᵀ" in text
    assert r"v_a \cdot \tanh(q_i W_1 + k_j W_2)" in describe(BY_KEY["scores"], Options(score="additive"))[0]
    assert r"q_i W_a\, k_j^{\top}" in describe(BY_KEY["scores"], Options(score="general"))[0]
