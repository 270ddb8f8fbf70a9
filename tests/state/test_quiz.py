"""Predict-then-reveal through TestClient: what a quiz hides, how a prediction is judged, what it
reveals, and that no hidden value reaches the page before the student predicts it."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.lesson.stages import visible_stages
from app.state.permalink import state_query
from app.state.quiz import NEAR, STAGE_RESULTS, check, hidden_cells, stage_results, tolerance
from app.state.reading import read_form
from app.state.scenario import from_preset
from tests.conftest import form_fields

HTMX = {"HX-Request": "true"}


def heatmap(html: str, ref: str) -> str:
    m = re.search(rf'<table class="heatmap [a-z -]+" data-ref="{re.escape(ref)}"[^>]*>.*?</table>', html, re.S)
    assert m, f"no heatmap {ref}"
    return m.group(0)


def cells(table: str) -> list[str]:
    return re.findall(r"<td[^>]*>(?:<span>)?([^<]*)(?:</span>)?</td>", table)


def quiz_form(client: TestClient, preset: str = "three-token", stage: str = "softmax") -> dict[str, str]:
    r = client.get("/", params={"preset": preset, "stage": stage, "quiz": "on"})
    assert r.status_code == 200
    return form_fields(r.text)


def predict(client: TestClient, fields: dict[str, str], matrix: str, row: int, col: int, guess: str):
    """A prediction for the cell (row, col), counted from 0; the boxes count from 1, as the page does."""
    posted = {**fields, "action": "guess", "guess_matrix": matrix, "guess_row": str(row + 1),
              "guess_col": str(col + 1), "guess": guess}
    return client.post("/stages", data=posted, headers=HTMX)


# --- the rules, without a page --------------------------------------------------------------------


def test_every_stage_but_x_and_mask_has_results_to_predict() -> None:
    for stage in visible_stages(blocks=2):
        assert (stage.key in STAGE_RESULTS) == (stage.key not in ("x", "mask")), stage.key


def test_block_results_need_a_block_and_pre_norm_has_no_layernorm_in_add_and_norm() -> None:
    assert stage_results("addnorm1", None, 0) == ()
    post = from_preset("block")[0].compute()[1]
    assert stage_results("addnorm1", post, 0) == ("residual1", "ln1")
    sc, _ = from_preset("block")
    pre = replace(sc, norm="pre").compute()[1]
    assert stage_results("addnorm1", pre, 0) == ("residual1",)
    assert stage_results("addnorm2", pre, 0) == ("residual2",)


def test_hidden_cells_are_every_cell_but_the_revealed_ones_of_that_head() -> None:
    m = np.zeros((3, 4))
    hidden = hidden_cells("softmax", m, 1, frozenset({"softmax.1.0.2", "softmax.0.1.1", "scores.1.2.3",
                                                      "softmax.1.9.9", "softmax.1.x.1"}))
    expected = np.ones((3, 4), dtype=bool)
    expected[0, 2] = False  # only head 1's cell of this matrix, inside it
    assert (hidden == expected).all()


def test_tolerance_is_absolute_for_weights_and_relative_elsewhere() -> None:
    assert tolerance("softmax", np.array([[0.2, 0.8]]), 3) == 0.05
    assert tolerance("scores", np.array([[-40.0, 10.0]]), 3) == pytest.approx(2.0)  # 5 % of 40
    assert tolerance("scores", np.zeros((2, 2)), 2) == 0.01  # never finer than the last decimal shown


def test_check_judges_against_the_pipelines_value() -> None:
    sc, _ = from_preset("three-token")
    run, stack = sc.compute()
    value = float(run.heads[0].softmax[1, 2])
    tol = tolerance("softmax", run.heads[0].softmax, 3)
    close = check(f"{value + 0.9 * tol}", "softmax.0.1.2", run, stack, 3)
    assert close.verdict == "close" and close.value == value and close.error == pytest.approx(0.9 * tol)
    assert check(f"{value - 2 * tol}", "softmax.0.1.2", run, stack, 3).verdict == "near"
    assert check(f"{value + (NEAR + 0.1) * tol}", "softmax.0.1.2", run, stack, 3).verdict == "off"
    for bad in ("", "abc", "nan", "inf", "0_5", "\u0660.\u0665"):  # 0_5 and ٠.٥ are what float() alone reads
        assert check(bad, "softmax.0.1.2", run, stack, 3).verdict == "nan"
    assert check(f"{-value:.4f}".replace("-", "−"), "softmax.0.1.2", run, stack, 3).guess == -round(value, 4)
    assert check("0.5", "softmax.0.7.2", run, stack, 3) is None  # no such cell
    assert check("0.5", "softmax.3.0.0", run, stack, 3) is None  # no such head


def test_read_form_reveals_only_a_cell_predicted_with_a_number() -> None:
    fields = dict(state_query(*from_preset("three-token")))
    base = {**fields, "quiz": "on", "action": "guess", "guess_matrix": "softmax", "guess_row": "3",
            "guess_col": "2"}  # counted from 1: the cell softmax.0.2.1
    _, view = read_form({**base, "guess": "0.3"})
    assert view.quiz and view.revealed == {"softmax.0.2.1"} and view.inspect == "softmax.0.2.1"
    _, view = read_form({**base, "guess": "three"})
    assert view.revealed == frozenset() and view.guess == "three" and view.inspect == ""
    _, view = read_form({**base, "guess": "0_3"})
    assert view.revealed == frozenset() and view.guess == "0_3" and view.inspect == ""
    _, view = read_form({**base, "guess": "0.3", "quiz": ""})  # no quiz, nothing to reveal
    assert not view.quiz and view.revealed == frozenset()
    _, view = read_form({**base, "action": "reveal_all", "revealed": "softmax.0.0.0"})
    assert not view.quiz and view.revealed == frozenset()


# --- the page -------------------------------------------------------------------------------------


def test_a_quiz_hides_the_stage_results_but_not_its_operands(client: TestClient) -> None:
    r = client.get("/", params={"preset": "three-token", "stage": "softmax", "quiz": "on"})
    assert r.status_code == 200
    weights = heatmap(r.text, "softmax.0")
    assert cells(weights) == ["?"] * 9 and 'data-quiz="1"' in weights
    assert 'class="qz"' in weights and not re.search(r'class="s\d', weights)  # no colour either
    scaled = heatmap(r.text, "scaled.0")
    assert "?" not in cells(scaled)
    assert 'value="softmax.0|csv"' not in r.text  # no export of a hidden matrix
    assert "Export the whole run" not in r.text
    assert '<section class="quiz"' in r.text and 'name="guess"' in r.text
    # No hidden weight is anywhere in the stages or the inspector (the numbers that are also
    # scaled scores aside). The preset's summary above the editor is the seed's text and stays.
    stages = r.text[r.text.index('<section id="stages"'):]
    head = from_preset("three-token")[0].compute()[0].heads[0]
    for v in {f"{w:.3f}" for w in head.softmax.ravel()} - {f"{s:.3f}" for s in head.scaled.ravel()}:
        assert v not in stages


def test_a_prediction_is_judged_and_reveals_its_cell_and_arithmetic(client: TestClient) -> None:
    fields = quiz_form(client)
    sc, _ = from_preset("three-token")
    value = sc.compute()[0].heads[0].softmax[2, 1]
    r = predict(client, fields, "softmax", 2, 1, f"{value + 0.01:.4f}")
    assert r.status_code == 200
    shown = cells(heatmap(r.text, "softmax.0"))
    assert shown[2 * 3 + 1] == f"{value:.3f}" and shown.count("?") == 8
    assert "Close: within the tolerance." in r.text and f"it is <strong>{value:.3f}</strong>" in r.text
    assert "for weights A row 3, column 2; it is" in r.text
    assert re.search(r'name="guess_row" min="1" max="3" value="3"', r.text)
    assert re.search(r'name="guess_col" min="1" max="3" value="2"', r.text)
    assert "Attention weights of query 3" in r.text  # the inspector shows the row's arithmetic
    after = {**fields, **form_fields(r.text)}
    assert after["revealed"] == "softmax.0.2.1" and after["inspect"] == "softmax.0.2.1"
    assert "revealed=softmax.0.2.1" in r.headers["HX-Replace-Url"]

    far = predict(client, after, "softmax", 0, 0, "5")
    assert "Off: more than three times the tolerance away." in far.text
    assert cells(heatmap(far.text, "softmax.0")).count("?") == 7


def test_a_prediction_that_is_not_a_number_reveals_nothing(client: TestClient) -> None:
    r = predict(client, quiz_form(client), "softmax", 0, 0, "a lot")
    assert r.status_code == 200
    assert cells(heatmap(r.text, "softmax.0")) == ["?"] * 9
    assert "Type a number to predict weights A row 1, column 1." in r.text
    assert 'value="a lot"' in r.text  # what the student typed stays


def test_the_inspector_does_not_show_a_hidden_cell(client: TestClient) -> None:
    fields = {**quiz_form(client), "action": "inspect", "inspect_matrix": "softmax", "inspect_row": "2",
              "inspect_col": "2"}
    r = client.post("/stages", data=fields, headers=HTMX)
    assert r.status_code == 200
    assert "hidden by the quiz: predict it first" in r.text and "softmax row 1" not in r.text


def test_reveal_all_ends_the_quiz(client: TestClient) -> None:
    r = client.post("/stages", data={**quiz_form(client), "action": "reveal_all"}, headers=HTMX)
    assert "?" not in cells(heatmap(r.text, "softmax.0"))
    assert form_fields(r.text)["revealed"] == "" and '<section class="quiz"' not in r.text


def test_stepping_on_quizzes_the_next_stage_and_show_all_is_off(client: TestClient) -> None:
    fields = quiz_form(client, stage="scores")
    r = client.post("/stages", data={**fields, "goto": "scaled", "show_all": "on"}, headers=HTMX)
    assert r.status_code == 200
    assert re.findall(r'<article class="stage" id="stage-([a-z]+)"', r.text) == ["scaled"]
    assert "?" not in cells(heatmap(r.text, "scores.0")) and set(cells(heatmap(r.text, "scaled.0"))) == {"?"}


@pytest.mark.parametrize("stage", sorted(STAGE_RESULTS))
def test_every_quizzed_stage_hides_exactly_its_results(client: TestClient, stage: str) -> None:
    preset = "learn-translate" if stage.startswith("grad_") else "block"  # the backward stages need a goal
    r = client.get("/", params={"preset": preset, "stage": stage, "quiz": "on"})
    assert r.status_code == 200
    sc, _ = from_preset(preset)
    stack = sc.compute()[1]
    names = stage_results(stage, stack, 0)
    hidden = re.findall(r'data-ref="([a-z_0-9]+)(?:\.\d+)?"[^>]*data-quiz="1"', r.text)
    assert sorted(set(hidden)) == sorted(names)
