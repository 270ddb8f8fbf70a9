"""Why ÷√d_k (app/view/charts/why_scale.py): the panel's claim holds, and its every number is the run's.

The two runs are recomputed here by a plain NumPy loop (forward pass, the softmax's backward pass by hand, SGD on
W_Q and W_K) from the same start, and ‖∂L/∂Scores‖ is checked against central differences on the scores
themselves. Then the claim is asserted on those numbers, and the panel's sentences, table and charts are read
back against them.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from app.lesson.goals import SATURATED, WHY_SCALE_LEARNING_RATE, WHY_SCALE_STEPS, why_scale
from app.lesson.seed_numbers import WHY_SCALE_D_K, WHY_SCALE_D_V, WHY_SCALE_SEED, WHY_SCALE_TOKENS, why_scale_x
from app.maths.attention import seeded_weights
from app.view.charts.learn import short_number
from app.view.charts.why_scale import (
    CHARTS,
    comparison_rows,
    loss_change,
    why_scale_bump,
    why_scale_chart,
    why_scale_claim,
    why_scale_context,
)
from tests.view.test_learn_charts import SVG, assert_affine, desc, parse, polylines, texts

T = len(WHY_SCALE_TOKENS)


# --- an independent reference -------------------------------------------------------------------------


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))  # (T, T)
    return e / e.sum(axis=1, keepdims=True)


def _loss_of_scores(s: np.ndarray, c: float, v: np.ndarray, w_o: np.ndarray, target: np.ndarray) -> float:
    """L = mean((softmax(Scores / c)·V·W_O − target)²), Scores = Q·Kᵀ."""
    return float(np.mean((_softmax(s / c) @ v @ w_o - target) ** 2))


def reference(scale: bool, steps: int = WHY_SCALE_STEPS, lr: float = WHY_SCALE_LEARNING_RATE) -> dict:
    """The run step by step: Scores = X·W_Q·(X·W_K)ᵀ, A = softmax(Scores / c), c = 8 or 1; L the mean squared
    error of A·V·W_O against each token's previous value; ∂L/∂Z = A ⊙ (G − rowsum(G ⊙ A)), G = ∂L/∂A."""
    x = np.array(why_scale_x())  # (T, d_model)
    w = seeded_weights(x.shape[1], 1, WHY_SCALE_D_K, WHY_SCALE_D_V, WHY_SCALE_SEED)
    w_q, w_k, w_v, w_o = w.w_q[0], w.w_k[0], w.w_v[0], w.w_o  # (d_model, d_k) … (d_v, d_model)
    c = math.sqrt(WHY_SCALE_D_K) if scale else 1.0
    v = x @ w_v  # (T, d_v)
    target = np.roll(np.eye(T), -1, axis=1) @ v @ w_o  # (T, d_model) row i: token i − 1's value
    out: dict[str, list] = {"losses": [], "norms": [], "max_weights": [], "w": []}
    for _ in range(steps + 1):
        q, k = x @ w_q, x @ w_k  # (T, d_k)
        s = q @ k.T  # (T, T)
        a = _softmax(s / c)
        err = a @ v @ w_o - target  # (T, d_model)
        g = (2 * err / err.size) @ w_o.T @ v.T  # (T, T) ∂L/∂A
        d_s = a * (g - (g * a).sum(axis=1, keepdims=True)) / c  # (T, T) ∂L/∂Scores
        out["losses"].append(float(np.mean(err**2)))
        out["norms"].append(float(np.linalg.norm(d_s)))
        out["max_weights"].append(a.max(axis=1))
        out["w"].append((w_q, w_k))
        w_q, w_k = w_q - lr * x.T @ (d_s @ k), w_k - lr * x.T @ (d_s.T @ q)
    out["std_start"] = float((s0 := x @ out["w"][0][0] @ (x @ out["w"][0][1]).T).std() / c)
    out["scores_start"], out["x"], out["v"], out["w_o"], out["target"], out["c"] = s0, x, v, w_o, target, c
    return out


@pytest.fixture(scope="module")
def runs() -> dict[str, dict]:
    return {"scaled": reference(True), "unscaled": reference(False)}


@pytest.fixture(scope="module")
def result() -> dict:
    return why_scale()


def test_the_pipeline_is_the_reference(runs: dict, result: dict) -> None:
    for run, ref in runs.items():
        np.testing.assert_allclose(result[run]["losses"], ref["losses"], rtol=1e-9)
        np.testing.assert_allclose(result[run]["grad_scores_norm"], ref["norms"], rtol=1e-7, atol=1e-15)
        np.testing.assert_allclose(result[run]["max_weights"], ref["max_weights"], rtol=1e-9)
        assert result[run]["softmax_input_std_start"] == pytest.approx(ref["std_start"], rel=1e-12)


def test_the_step_0_weights_by_hand(runs: dict, result: dict) -> None:
    """A row's largest weight is 1 / Σ_j exp(z_ij − max_j z_ij), z = Scores / c."""
    for run, ref in runs.items():
        z = ref["scores_start"] / ref["c"]  # (T, T)
        by_hand = [1.0 / sum(math.exp(zj - max(row)) for zj in row) for row in z.tolist()]
        assert result[run]["max_weight_start"] == pytest.approx(by_hand, rel=1e-12)


@pytest.mark.parametrize("step", [0, 100, WHY_SCALE_STEPS])
@pytest.mark.parametrize("run", ["scaled", "unscaled"])
def test_the_gradient_norm_against_finite_differences(runs: dict, result: dict, run: str, step: int) -> None:
    ref = runs[run]
    w_q, w_k = ref["w"][step]
    s = ref["x"] @ w_q @ (ref["x"] @ w_k).T  # (T, T) the scores at that step
    h = 1e-5
    d_s = np.zeros_like(s)
    for i, j in np.ndindex(s.shape):
        e = np.zeros_like(s)
        e[i, j] = h
        d_s[i, j] = (
            _loss_of_scores(s + e, ref["c"], ref["v"], ref["w_o"], ref["target"])
            - _loss_of_scores(s - e, ref["c"], ref["v"], ref["w_o"], ref["target"])
        ) / (2 * h)
    assert result[run]["grad_scores_norm"][step] == pytest.approx(float(np.linalg.norm(d_s)), rel=1e-5)


def test_the_claim_holds(runs: dict) -> None:
    """What the panel says, on the reference's numbers: the scores' spread is about √64 = 8 without ÷√d_k and
    about 1 with it; every unscaled row starts nearly one-hot and no scaled one does; ‖∂L/∂Scores‖ is smaller
    without ÷√d_k at every step; the unscaled loss barely moves while the scaled one falls by over 85 %."""
    scaled, unscaled = runs["scaled"], runs["unscaled"]
    assert 7.5 < unscaled["std_start"] < 8.5 and 0.9 < scaled["std_start"] < 1.1
    assert min(unscaled["max_weights"][0]) >= SATURATED and np.mean(unscaled["max_weights"][0]) >= 0.98
    assert max(scaled["max_weights"][0]) < SATURATED and np.mean(scaled["max_weights"][0]) < 0.6
    assert np.all(np.array(unscaled["norms"]) < np.array(scaled["norms"]))
    assert unscaled["norms"][0] < scaled["norms"][0] / 10
    assert abs(unscaled["losses"][-1] / unscaled["losses"][0] - 1) < 0.05  # "barely moves"
    assert scaled["losses"][-1] < 0.15 * scaled["losses"][0]
    assert np.all(np.diff(scaled["losses"]) <= 0) and np.all(np.diff(unscaled["losses"]) <= 0)


# --- the words and the table --------------------------------------------------------------------------


def test_the_claim_states_the_references_numbers(runs: dict, result: dict) -> None:
    scaled, unscaled = runs["scaled"], runs["unscaled"]
    claim = why_scale_claim(result)
    assert claim == why_scale_context()["claim"]
    expected = [
        f"standard deviation {unscaled['std_start']:.2f} (about $\\sqrt{{64}} = 8$)",
        f"every row of $A$ starts nearly one-hot: its largest weight is {min(unscaled['max_weights'][0]):.3f} or more",
        f"standard deviation {scaled['std_start']:.2f}, "
        f"largest weights {np.mean(scaled['max_weights'][0]):.3f} on average",
        f"starts {scaled['norms'][0] / unscaled['norms'][0]:.0f}× smaller than with",
        f"({short_number(unscaled['norms'][0])} against {short_number(scaled['norms'][0])})",
        "stays smaller at every step from 0 to 200",
        f"$\\eta = {WHY_SCALE_LEARNING_RATE:g}$",
        f"barely moves ({unscaled['losses'][0]:.4f} → {unscaled['losses'][-1]:.4f})",
        f"it falls from {short_number(scaled['losses'][0])} to {short_number(scaled['losses'][-1])}",
    ]
    for part in expected:
        assert part in claim, part
    assert "7.93" in claim and "0.947 or more" in claim and "11×" in claim and "(0.00091 against 0.0098)" in claim


def test_the_table_is_the_references(runs: dict, result: dict) -> None:
    rows = {r["key"]: r for r in why_scale_context()["rows"]}
    assert rows == {r["key"]: r for r in comparison_rows(result)}
    for i, run in enumerate(("scaled", "unscaled")):
        ref = runs[run]
        cells = {key: r["cells"][i] for key, r in rows.items()}
        assert all(c["run"] == run for c in cells.values())
        assert cells["softmax_input_std_start"]["text"] == f"{ref['std_start']:.2f}"
        assert cells["max_weight_start_mean"]["text"] == f"{np.mean(ref['max_weights'][0]):.3f}"
        assert cells["max_weight_start"]["text"] == (
            f"{min(ref['max_weights'][0]):.3f} to {max(ref['max_weights'][0]):.3f}"
        )
        assert cells["grad_scores_norm_start"]["text"] == short_number(ref["norms"][0])
        assert cells["losses"]["text"] == loss_change(ref["losses"][0], ref["losses"][-1])
    texts_ = [[c["text"] for c in r["cells"]] for r in rows.values()]
    assert texts_ == [
        ["0.99", "7.93"],
        ["0.554", "0.990"],
        ["0.414 to 0.764", "0.947 to 1.000"],
        ["0.0098", "0.00091"],
        ["0.422 → 0.048", "0.4643 → 0.4639"],
    ]  # docs/using.md's table


def test_no_bump_to_explain(runs: dict, result: dict) -> None:
    """At η = 0.1 the unscaled gradient never climbs back to twice its lowest value: nothing for the page to
    explain (at η = 0.2 a row starts leaving saturation near step 165, and the page says so)."""
    norms = runs["unscaled"]["norms"]
    low = int(np.argmin(norms))
    assert max(norms[low:]) < 2 * norms[low] and max(norms) == norms[0] and why_scale_bump(result) == ""
    bumped = why_scale(learning_rate=0.2)
    norms = bumped["unscaled"]["grad_scores_norm"]
    peak = int(np.argmax(norms[1:])) + 1
    weights = np.array(bumped["unscaled"]["max_weights"])  # (steps + 1, T)
    row = int(np.argmax(np.abs(weights[-1] - weights[0])))
    bump = why_scale_bump(bumped)
    assert f"up to step {peak}" in bump and f"row {row + 1} ({WHY_SCALE_TOKENS[row]})" in bump
    assert f"from {weights[0, row]:.4f} to {weights[-1, row]:.3f}" in bump
    assert "The loss falls at every step in both runs." in bump
    assert norms[peak] > 2 * min(norms[:peak]) and weights[:, row].min() >= SATURATED


def made_up(
    scaled_norms: list[float], unscaled_norms: list[float], unscaled_losses: list[float], unscaled_weights: list[float]
) -> dict:
    n = len(scaled_norms)
    return {
        "d_k": 64,
        "steps": n - 1,
        "learning_rate": 0.5,
        "tokens": ["a", "b"],
        "scaled": {
            "losses": [1.0] + [0.5] * (n - 1),
            "grad_scores_norm": scaled_norms,
            "max_weight_start": [0.5, 0.6],
            "softmax_input_std_start": 1.0,
            "max_weights": [[0.5, 0.6]] * n,
        },
        "unscaled": {
            "losses": unscaled_losses,
            "grad_scores_norm": unscaled_norms,
            "max_weight_start": unscaled_weights,
            "softmax_input_std_start": 8.0,
            "max_weights": [unscaled_weights] * n,
        },
    }


def test_the_claim_follows_the_numbers_it_is_given() -> None:
    claim = why_scale_claim(made_up([0.1, 0.1, 0.1], [0.3, 0.05, 0.2], [2.0, 1.0, 0.5], [0.95, 0.5]))
    assert "1 of the 2 rows of $A$ start nearly one-hot" in claim
    assert "starts 3.0× larger than with" in claim and "is smaller at 1 of the 3 steps from 0 to 2" in claim
    assert "the loss without $\\div \\sqrt{d_k}$ falls from 2.000 to 0.500" in claim
    claim = why_scale_claim(made_up([0.1, 0.1], [0.1, 0.01], [1.0, 1.0], [0.5, 0.6]))
    assert "no row of $A$ starts nearly one-hot: the largest weight is 0.600" in claim
    assert "starts about as large as with" in claim
    assert why_scale_bump(made_up([0.1] * 3, [0.05, 0.04, 0.03], [1.0] * 3, [0.99, 0.99])) == ""  # no rise


# --- the charts -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "label", "log"), CHARTS)
def test_each_chart_draws_both_runs(result: dict, key: str, label: str, log: bool) -> None:
    svg = parse(why_scale_chart(result, key, chart_id="c"))
    assert svg.get("viewBox") == "0 0 320 214"
    assert "200 SGD steps" in svg.find(f"{SVG}title").text
    lines = polylines(svg)
    assert set(lines) == {"scaled", "unscaled"}
    labels = texts(svg)
    assert labels.count("÷√dk") == 1 and labels.count("no ÷√dk") == 1  # each line named at its end
    assert (label + (" (log scale)" if log else "")) in labels
    for run in ("scaled", "unscaled"):
        values = result[run][key]
        assert len(lines[run]) == len(values) and short_number(values[-1]) in labels
        ys = [p[1] for p in lines[run]]
        assert assert_affine([math.log10(v) for v in values] if log else values, ys) < 0
        word = "with" if run == "scaled" else "without"
        assert f"{word} ÷√d_k from {short_number(values[0])} to {short_number(values[-1])}" in desc(svg)


def test_the_charts_text_is_at_least_13_units(result: dict) -> None:
    """Drawn at 300 px or wider (static/learn.css), 13 units are 12 px or more."""
    css = (Path(__file__).resolve().parents[2] / "static" / "learn.css").read_text()
    sizes = re.findall(r"svg\.why-scale-chart[^{]*\{\s*font-size:\s*(\d+)px", css)
    assert sizes and all(int(s) >= 13 for s in sizes)
    svg = parse(why_scale_chart(result, "losses", chart_id="c"))
    assert not [t for t in svg.iter(f"{SVG}text") if t.get("font-size")]  # sizes come from the stylesheet


def test_the_context_is_computed_once_and_read_only() -> None:
    context = why_scale_context()
    assert context is why_scale_context()
    assert isinstance(context, Mapping) and context["seed"] == WHY_SCALE_SEED and context["root"] == "8"
    assert context["all_saturated"] and context["scaled_larger"]  # the note's two remarks hold for this run
    ids = [ET.fromstring(str(c)).get("aria-labelledby") for c in context["charts"]]
    assert ids == [
        "why-scale-losses-title why-scale-losses-desc",
        "why-scale-grad-scores-norm-title why-scale-grad-scores-norm-desc",
    ]
    with pytest.raises(TypeError):
        context["claim"] = "changed"  # type: ignore[index]
    with pytest.raises(TypeError):
        context["rows"][0]["label"] = "changed"  # type: ignore[index]


def test_a_few_steps() -> None:
    context = why_scale_context(5)
    assert "every step from 0 to 5" in context["claim"] and context["steps"] == 5
    for chart in context["charts"]:
        parse(chart)
