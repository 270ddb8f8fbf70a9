"""Masks, cross-attention, positional encodings and temperature: pipeline and API.

References are independent: hand-computed values, seed 003's PE table, and a plain per-head loop.
"""

from __future__ import annotations

import html
import json
import math
import re
from dataclasses import replace

import numpy as np
import pytest
from fastapi.testclient import TestClient
from markupsafe import escape

from app.maths.attention import run_attention
from app.maths.blocks import LAYER_NORM_EPS, layer_norm
from app.maths.masks import causal_mask
from app.maths.positions import alibi_bias, alibi_slopes, rope_rotate, sinusoidal_encoding
from app.state.scenario import from_preset
from tests.conftest import form_fields

RNG = np.random.default_rng(7)


def reference_attention(x: np.ndarray, c: np.ndarray, w: dict, mask: np.ndarray | None, scale: bool,
                        temperature: float = 1.0) -> np.ndarray:
    """A plain loop over heads, query rows and key rows: no vectorised helper from the app."""
    h = w["w_q"].shape[0]
    heads = []
    for i in range(h):
        q, k, v = x @ w["w_q"][i], c @ w["w_k"][i], c @ w["w_v"][i]
        d_k = q.shape[1]
        out = np.zeros((x.shape[0], v.shape[1]))
        for r in range(x.shape[0]):
            logits = []
            for j in range(c.shape[0]):
                s = sum(q[r, t] * k[j, t] for t in range(d_k)) / ((math.sqrt(d_k) if scale else 1) * temperature)
                logits.append(None if mask is not None and mask[r, j] else s)
            top = max(s for s in logits if s is not None)
            e = [0.0 if s is None else math.exp(s - top) for s in logits]
            total = sum(e)
            for j in range(c.shape[0]):
                out[r] += e[j] / total * v[j]
        heads.append(out)
    return np.concatenate(heads, axis=1) @ w["w_o"]


def test_causal_weights_above_diagonal_are_exactly_zero() -> None:
    run = run_attention(RNG.normal(size=(5, 4)), num_heads=2, mask="causal")
    for head in run.heads:
        assert np.all(head.softmax[np.triu_indices(5, k=1)] == 0.0)
        assert np.allclose(head.softmax.sum(axis=1), 1.0)
        assert head.softmax[0, 0] == 1.0  # the first token sees only itself


def test_masked_run_matches_a_per_head_loop() -> None:
    x = RNG.normal(size=(4, 6))
    mask = np.array([[0, 1, 0, 0], [1, 0, 0, 1], [0, 0, 0, 0], [1, 1, 1, 0]], dtype=bool)
    run = run_attention(x, num_heads=3, d_k=2, d_v=3, mask=mask, temperature=0.7)
    w = {n: getattr(run.weights, n) for n in ("w_q", "w_k", "w_v", "w_o")}
    assert np.allclose(run.output, reference_attention(x, x, w, mask, True, 0.7))


def test_cross_attention_matches_a_per_head_loop_and_is_t_by_s() -> None:
    x, c = RNG.normal(size=(3, 4)), RNG.normal(size=(5, 4))
    run = run_attention(x, num_heads=2, context=c)
    assert run.heads[0].scores.shape == (3, 5)
    assert run.heads[1].v.shape == (5, 2)
    w = {n: getattr(run.weights, n) for n in ("w_q", "w_k", "w_v", "w_o")}
    assert np.allclose(run.output, reference_attention(x, c, w, None, True))


def test_full_row_mask_is_an_error_not_nan() -> None:
    with pytest.raises(ValueError, match="row 1"):
        run_attention(np.ones((2, 2)), mask=np.array([[False, True], [True, True]]))


def test_sinusoidal_encoding_reproduces_seed_003_table() -> None:
    seed_table = [[0.000, 1.000, 0.000, 1.000], [0.841, 0.540, 0.010, 1.000], [0.909, -0.416, 0.020, 1.000]]
    assert np.round(sinusoidal_encoding(3, 4), 3).tolist() == seed_table
    sc, _ = from_preset("positions")
    assert np.round(sc.run().x, 3).tolist() == seed_table


def test_without_positions_swapping_tokens_swaps_outputs_with_them_they_differ() -> None:
    dog, _ = from_preset("dog-bites-man")
    man, _ = from_preset("man-bites-dog")
    a, b = dog.run().output, man.run().output
    assert np.allclose(a, b[[2, 1, 0]])  # the same rows, permuted
    pa = replace(dog, positional_encoding="sinusoidal").run().output
    pb = replace(man, positional_encoding="sinusoidal").run().output
    assert not np.allclose(pa, pb[[2, 1, 0]], atol=1e-3)


def test_rope_keeps_norms_and_depends_only_on_relative_position() -> None:
    q = RNG.normal(size=(6, 4))
    rotated = rope_rotate(q)
    assert np.allclose(np.linalg.norm(rotated, axis=1), np.linalg.norm(q, axis=1))
    assert np.allclose(rotated[0], q[0])  # position 0 is not rotated
    # the same vector at positions (1, 3) and (2, 4): equal dot products
    same = np.tile(q[:1], (6, 1))
    r = rope_rotate(same)
    assert np.isclose(r[1] @ r[3], r[2] @ r[4])


def test_alibi_bias_is_minus_slope_times_distance() -> None:
    bias = alibi_bias(2, 3, 3)
    assert bias.shape == (2, 3, 3)
    assert bias[0, 0, 2] == pytest.approx(-(2**-4) * 2)  # m_1 = 2^(−8·1/2)
    assert bias[1, 2, 0] == pytest.approx(-(2**-8) * 2)
    run = run_attention(RNG.normal(size=(3, 4)), num_heads=2, positional_encoding="alibi")
    head = run.heads[0]
    assert np.allclose(head.scaled, head.scores / math.sqrt(run.d_k) + head.bias)


def test_sinusoidal_encoding_with_an_odd_d_model_ends_on_a_sine() -> None:
    pe = sinusoidal_encoding(4, 5)  # (T, d_model)
    for pos in range(4):
        for col in range(5):
            angle = pos / 10000 ** ((col // 2 * 2) / 5)
            assert pe[pos, col] == pytest.approx(math.sin(angle) if col % 2 == 0 else math.cos(angle), abs=1e-15)
    assert pe[1, 4] == pytest.approx(math.sin(10000**-0.8), rel=1e-14)  # 6.3096e-4: the last column is a sine
    assert not np.allclose(pe[:, :4], sinusoidal_encoding(4, 4))  # 10000^(2/5), not 10000^(2/4)


def rope_by_hand(x: list[float], pos: int) -> list[float]:
    """Turn dimensions (0, 1), (2, 3), … of one vector by pos·10000^(−2m/d): a 2×2 rotation per pair."""
    d, out = len(x), list(x)
    for m in range(d // 2):
        angle = pos * 10000 ** (-2 * m / d)
        a, b = x[2 * m], x[2 * m + 1]
        out[2 * m] = a * math.cos(angle) - b * math.sin(angle)
        out[2 * m + 1] = a * math.sin(angle) + b * math.cos(angle)
    return out


@pytest.mark.parametrize("d", [1, 4, 5, 6])
def test_rope_turns_adjacent_pairs_by_pos_times_10000_to_the_minus_2m_over_d(d: int) -> None:
    x = RNG.normal(size=(2, 7, d))  # (h, T, d)
    rotated = rope_rotate(x)
    for h in range(2):
        for pos in range(7):
            np.testing.assert_allclose(rotated[h, pos], rope_by_hand(x[h, pos].tolist(), pos), rtol=1e-13, atol=1e-15)
    if d % 2:
        np.testing.assert_array_equal(rotated[..., -1], x[..., -1])  # an odd last dimension is not turned
    # Adjacent pairing: a vector along dimension 1 stays within dimensions 0 and 1.
    e1 = np.zeros((7, 6))
    e1[:, 1] = 1.0
    turned = rope_rotate(e1)
    assert np.all(turned[:, 2:] == 0.0) and turned[3, 0] == pytest.approx(-math.sin(3.0))


def test_layer_norm_uses_the_biased_variance_and_eps_1e_5() -> None:
    ones, zeros = np.ones(4), np.zeros(4)
    ln = layer_norm(np.array([[1.0, 2.0, 3.0, 4.0]]), ones, zeros)
    assert ln.var[0] == 1.25  # Σ(z − 2.5)²/4, not /3
    assert ln.normalized[0, 0] == pytest.approx(-1.5 / math.sqrt(1.25 + 1e-5), rel=1e-14)
    # A row whose variance, 1e-6, is below ε: (z − μ)/√(σ² + 1e-5) = ±1e-3/√1.1e-5 ≈ ±0.3015, not ±1.
    small = layer_norm(np.array([[0.0, 2e-3, 0.0, 2e-3]]), ones, zeros)
    np.testing.assert_allclose(small.normalized[0], [-1, 1, -1, 1] * np.array(1e-3 / math.sqrt(1.1e-5)), rtol=1e-9)
    assert LAYER_NORM_EPS == 1e-5


def alibi_slopes_as_the_paper_s_code(n: int) -> list[float]:
    """The ALiBi repository's rule, recursive as it is written there: a geometric sequence starting
    at 2^(−8/n) for n a power of two; otherwise the power of two below, then every other slope of
    twice that, as many as are missing."""
    if math.log2(n).is_integer():
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]
    below = 2 ** math.floor(math.log2(n))
    return alibi_slopes_as_the_paper_s_code(below) + alibi_slopes_as_the_paper_s_code(2 * below)[0::2][: n - below]


def test_alibi_slopes_are_the_paper_s() -> None:
    # The paper (Press et al. 2022, section 3): for 8 heads 1/2, 1/4, …, 1/256; for 16 heads 1/√2, 1/2, …, 1/256.
    assert alibi_slopes(8).tolist() == [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256]
    np.testing.assert_allclose(alibi_slopes(16), [2 ** -(k / 2) for k in range(1, 17)], rtol=1e-15)
    # Head counts that are not a power of two: the power of two below, then every other slope above.
    assert alibi_slopes(3).tolist() == [1 / 16, 1 / 256, 1 / 4]
    assert alibi_slopes(6).tolist() == [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8]
    assert alibi_slopes(7).tolist() == [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8, 1 / 32]
    for h in range(1, 17):
        np.testing.assert_allclose(alibi_slopes(h), alibi_slopes_as_the_paper_s_code(h), rtol=1e-14)


def test_alibi_with_six_heads_biases_each_head_by_its_slope() -> None:
    run = run_attention(RNG.normal(size=(4, 12)), num_heads=6, positional_encoding="alibi")
    distance = np.abs(np.arange(4)[:, None] - np.arange(4)[None, :])  # (T, S)
    for head, m in zip(run.heads, [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8], strict=True):
        np.testing.assert_array_equal(head.bias, -m * distance)


def test_temperature_divides_the_scaled_scores() -> None:
    x = RNG.normal(size=(4, 4))
    base, hot = run_attention(x), run_attention(x, temperature=2.0)
    assert np.allclose(hot.heads[0].scaled, base.heads[0].scaled / 2)
    # a higher temperature flattens every row: the largest weight can only fall
    assert np.all(hot.heads[0].softmax.max(axis=1) <= base.heads[0].softmax.max(axis=1) + 1e-12)


def test_causal_mask_shape() -> None:
    assert causal_mask(2, 3).tolist() == [[False, True, True], [False, False, True]]


def test_translation_preset_aligns_each_french_word_with_its_english_counterpart() -> None:
    sc, view = from_preset("translate")
    weights = sc.run().heads[0].softmax
    assert weights.shape == (6, 6)
    assert weights.argmax(axis=1).tolist() == [0, 1, 2, 3, 4, 5]
    assert view.stage == "softmax"


# --- API -----------------------------------------------------------------------------------------

BASE = {"tokens": ["a", "b", "c"], "x": [[1.0, 0.5], [0.2, -0.3], [0.4, 0.9]]}


def post(client: TestClient, **extra: object) -> tuple[int, dict]:
    r = client.post("/api/attention", content=json.dumps({**BASE, **extra}),
                    headers={"content-type": "application/json"})
    return r.status_code, r.json()


def test_api_causal_mask_nulls_hidden_scaled_and_zeroes_weights(client: TestClient) -> None:
    status, body = post(client, mask="causal")
    assert status == 200
    head = body["heads"][0]
    assert head["scaled"][0][1] is None and head["scaled"][0][2] is None and head["scaled"][1][2] is None
    assert head["scaled"][2][0] is not None
    assert head["softmax"][0] == [1.0, 0.0, 0.0]
    assert body["mask"][0] == [False, True, True]


def test_api_explicit_mask_and_full_row_rejected(client: TestClient) -> None:
    status, body = post(client, mask=[[False, True, False], [False, False, False], [True, False, False]])
    assert status == 200
    assert body["heads"][0]["softmax"][0][1] == 0.0
    status, body = post(client, mask=[[True, True, True], [False, False, False], [False, False, False]])
    assert status == 422
    assert "mask[0]" in body["detail"][0]["msg"]


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"mask": [[False, False]]}, "mask"),
        ({"mask": [[False, False], [False, False], [False, False]]}, "mask[0]"),
        ({"mask": "diagonal"}, "mask"),
        ({"mask": [[0, 1, 0], [0, 0, 0], [0, 0, 0]]}, "mask"),
        ({"context": {"tokens": [], "x": []}}, "context"),
        ({"context": {"tokens": ["x"], "x": [[1.0, 2.0, 3.0]]}}, "context.x"),
        ({"context": {"tokens": ["x", "y"], "x": [[1.0, 2.0]]}}, "context.tokens"),
        ({"positional_encoding": "fourier"}, "positional_encoding"),
        ({"temperature": 0}, "temperature"),
        ({"temperature": "hot"}, "temperature"),
        ({"position_table": [[0.0, 0.0]]}, "position_table"),
    ],
)
def test_api_rejects_bad_mechanism_fields(client: TestClient, extra: dict, needle: str) -> None:
    status, body = post(client, **extra)
    assert status == 422
    assert any(needle in d["msg"] for d in body["detail"])


def test_api_cross_attention_and_positions(client: TestClient) -> None:
    context = {"tokens": ["u", "v", "w", "z"], "x": [[0.1, 0.2], [0.3, -0.1], [0.0, 1.0], [0.5, 0.5]]}
    status, body = post(client, context=context, positional_encoding="sinusoidal", num_heads=2, d_k=1)
    assert status == 200
    head = body["heads"][1]
    assert len(head["scores"]) == 3 and len(head["scores"][0]) == 4
    assert len(head["v"]) == 4
    assert np.allclose(np.array(body["x"]) - np.array(BASE["x"]), body["pe"])
    assert len(body["context"]) == 4
    status, body = post(client, positional_encoding="rope")
    assert status == 200 and body["heads"][0]["q_rot"] is not None
    status, body = post(client, positional_encoding="alibi")
    assert status == 200 and body["heads"][0]["bias"][0][2] < 0
    status, body = post(client, positional_encoding="learned", position_table=[[1.0, 0.0]] * 3)
    assert status == 200 and body["pe"] == [[1.0, 0.0]] * 3


def test_the_mask_grid_shows_each_scaled_score_or_why_it_is_hidden() -> None:
    """Each checkbox cell against a hand check: causal cells are ticked, disabled and say why; a
    padding key likewise; a cell hidden by hand is ticked but can be unticked; every open cell
    shows its scaled score from an independent Q·Kᵀ/√d_k; token text stays text."""
    from app.state.scenario import View
    from app.view.editor import mask_grid

    sc, _ = from_preset("default")
    sc = replace(sc, tokens=("<b>x</b>", *sc.tokens[1:]), mask_mode="causal", padding=frozenset({1}),
                 blocked=frozenset({(3, 0)}))
    run = sc.run()
    w = sc.weights()
    scaled = (sc.x @ w["w_q"][0]) @ (sc.x @ w["w_k"][0]).T / math.sqrt(sc.d_k)
    html = str(mask_grid(sc, run, View(decimals=3)))
    rows = re.findall(r'<tr><th scope="row">(.*?)</th>(.*?)</tr>', html)
    assert [label for label, _ in rows][0].startswith("1 &lt;b&gt;x&lt;/b&gt;") and "<b>" not in html
    names = [str(escape(t)) for t in sc.tokens]
    for i, (_, cells) in enumerate(rows):
        tds = re.findall(r'<td class="(\w+)"><label><input type="checkbox" name="block-(\d+)-(\d+)"([^>]*)> '
                         r'(.*?)</label>(?:<span class="why">(\w+)</span>)?</td>', cells)
        assert len(tds) == len(sc.tokens)
        for j, (cls, qi, kj, attrs, text, why) in enumerate(tds):
            assert (int(qi), int(kj)) == (i, j)
            # The label counts from 1, as the page does; the field name is internal and counts from 0.
            assert f'aria-label="hide key {j + 1} ({names[j]}) from query {i + 1} ({names[i]})"' in attrs
            expected_why = "causal" if j > i else ("padding" if j == 1 else "")
            hidden = bool(expected_why) or (i, j) == (3, 0)
            assert why == expected_why
            assert (cls == "hidden", "checked" in attrs, "disabled" in attrs) == (hidden, hidden, bool(expected_why))
            assert text == ("−∞" if hidden else f"{scaled[i, j]:.3f}")


# --- the page states each convention --------------------------------------------------------------

HTMX = {"HX-Request": "true"}


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

