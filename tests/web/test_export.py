"""Export through TestClient: a panel's matrix as CSV, JSON and LaTeX is exactly what the panel shows
(full precision, or rounded as printed), the whole run as the API's JSON, evil tokens neutralised, safe
file names, and every kind of bad request answered with a 422, never a 500."""

from __future__ import annotations

import csv
import io
import json
import re

import numpy as np
import pytest
from fastapi.testclient import TestClient
from httpx import Response

from app.state.scenario import from_preset
from app.view.labels import token_labels
from app.web.export import matrix_csv, matrix_json, matrix_latex, safe_filename
from app.web.responses import AttentionResponse
from tests.conftest import form_fields
from tests.maths.test_attention import S003_A
from tests.web.test_pages import fixed, heatmap, page_form

SAFE_DISPOSITION = re.compile(r'attachment; filename="[A-Za-z0-9_-]+\.(csv|json|tex)"')
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
EVIL_TOKENS = ['=HYPERLINK("x")', "+cmd|'/C calc'!A0", "@SUM(1)", "<script>", '"><img src=x onerror=alert(1)>',
               "\\end{bmatrix} $&#^_%~{}"]


def export(client: TestClient, form: dict[str, str], ref: str, fmt: str) -> Response:
    """POST /export as the page's button does: the whole form plus ``export=ref|format``."""
    return client.post("/export", data={**form, "export": f"{ref}|{fmt}"})


def read_csv(text: str) -> tuple[list[str], list[str], np.ndarray]:
    """(column labels, row labels, values) of an exported CSV."""
    rows = list(csv.reader(io.StringIO(text)))
    header, body = rows[0], rows[1:]
    assert header[0] == ""
    return header[1:], [r[0] for r in body], np.array([[float(v) for v in r[1:]] for r in body])


def latex_rows(text: str) -> list[list[str]]:
    body = text.split("\\begin{bmatrix}", 1)[1].split("\\end{bmatrix}", 1)[0]
    return [[c.strip() for c in row.split("&")] for row in body.strip().split("\\\\")]


def all_stages_page(client: TestClient, preset: str) -> tuple[str, dict[str, str]]:
    """The page with every stage shown, and its form."""
    r = client.post("/stages", data={**page_form(client, preset), "show_all": "on"})
    assert r.status_code == 200
    return r.text, form_fields(r.text)


# --- the formats ----------------------------------------------------------------------------------


def test_csv_of_softmax_is_the_pipelines_weights_at_full_precision(client: TestClient) -> None:
    r = export(client, page_form(client, "three-token"), "softmax.0", "csv")
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/csv; charset=utf-8"
    assert r.headers["content-disposition"] == 'attachment; filename="softmax_0.csv"'
    cols, rows, values = read_csv(r.text)
    sc, _ = from_preset("three-token")
    weights = sc.run().heads[0].softmax  # (T, T)
    assert rows == cols == token_labels(sc.tokens)
    assert values.tolist() == weights.tolist()  # exactly: repr round-trips every float
    assert np.round(values, 3).tolist() == S003_A.tolist()  # seed 003: 0.401 0.198 0.401 / …


def test_latex_of_softmax_is_a_bmatrix_rounded_as_the_panel_prints_it(client: TestClient) -> None:
    form = page_form(client, "three-token")
    r = export(client, form, "softmax.0", "latex")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/x-latex")
    assert r.headers["content-disposition"] == 'attachment; filename="softmax_0.tex"'
    text = r.text
    assert text.startswith("\\begin{bmatrix}\n") and text.endswith("\\end{bmatrix}\n")
    assert text.count("\\\\") == 2 and text.count("&") == 6  # 3 rows, 3 columns
    assert latex_rows(text) == fixed(S003_A, 3)
    r2 = export(client, {**form, "decimals": "2"}, "softmax.0", "latex")
    assert latex_rows(r2.text) == [["0.40", "0.20", "0.40"], ["0.40", "0.40", "0.20"], ["0.50", "0.25", "0.25"]]


def test_json_of_a_matrix_parses_and_matches(client: TestClient) -> None:
    r = export(client, page_form(client, "three-token"), "output.0", "json")
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    assert r.headers["content-disposition"] == 'attachment; filename="output_0.json"'
    body = r.json()
    sc, _ = from_preset("three-token")
    output = sc.run().heads[0].output  # (T, d_v)
    assert body["name"] == "output.0"
    assert body["title"] == "Output A·V"
    assert body["shape"] == [3, 2]
    assert body["row_labels"] == token_labels(sc.tokens)
    assert body["col_labels"] == ["v1", "v2"]
    assert body["values"] == output.tolist()


def test_both_ways_of_naming_the_export_give_the_same_file(client: TestClient) -> None:
    form = page_form(client)
    by_button = export(client, form, "scores.0", "csv")
    by_fields = client.post("/export", data={**form, "export_ref": "scores.0", "export_format": "csv"})
    assert by_button.status_code == by_fields.status_code == 200
    assert by_button.text == by_fields.text


def test_the_whole_run_is_the_apis_response(client: TestClient) -> None:
    r = export(client, page_form(client, "three-token"), "run", "run")
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    assert r.headers["content-disposition"] == 'attachment; filename="attention-run.json"'
    run = r.json()
    assert set(run) == set(AttentionResponse.model_fields)
    AttentionResponse.model_validate(run)
    # The API, given the same input and the weights the run used, answers with the same body.
    api = client.post("/api/attention", json={
        "tokens": run["tokens"], "x": run["x_input"], "num_heads": run["num_heads"], "d_k": run["d_k"],
        "d_v": run["d_v"], "scale": run["scale"], "weights": run["weights"],
    })
    assert api.status_code == 200
    assert api.json() == run
    assert np.round(run["heads"][0]["softmax"], 3).tolist() == S003_A.tolist()


def test_the_whole_run_with_blocks_is_the_apis_response(client: TestClient) -> None:
    sc, _ = from_preset("block")
    r = export(client, page_form(client, "block"), "run", "run")
    assert r.status_code == 200
    run = r.json()
    AttentionResponse.model_validate(run)
    assert len(run["blocks"]) == 2
    api = client.post("/api/attention", json={
        "tokens": run["tokens"], "x": run["x_input"], "num_heads": run["num_heads"], "d_k": run["d_k"],
        "d_v": run["d_v"], "scale": run["scale"], "seed": sc.seed, "blocks": 2, "d_ff": sc.ffn_size,
        "positional_encoding": run["positional_encoding"],
        "weights": {**run["weights"], **run["blocks"][0]["weights"]},
    })
    assert api.status_code == 200
    assert api.json() == run


# --- every panel, and the block and head refs ----------------------------------------------------------


@pytest.mark.parametrize("preset", ["default", "block", "additive", "linear", "positions", "translate", "bank-river"])
def test_every_panel_exports_exactly_what_it_shows(client: TestClient, preset: str) -> None:
    html, form = all_stages_page(client, preset)
    refs = list(dict.fromkeys(re.findall(r'<table class="heatmap [^"]*" data-ref="([^"]+)"', html)))
    assert len(refs) >= 8
    decimals = int(form["decimals"])
    for ref in refs:
        shown = [[c.replace("\u2212", "-") for c in row] for row in heatmap(html, ref)]  # files keep ASCII "-"
        r = export(client, form, ref, "csv")
        assert r.status_code == 200, (ref, r.text)
        assert SAFE_DISPOSITION.fullmatch(r.headers["content-disposition"])
        _, _, values = read_csv(r.text)
        assert fixed(values, decimals) == shown, ref
        latex = export(client, form, ref, "latex")
        assert latex.status_code == 200
        assert latex_rows(latex.text) == shown, ref


def test_block_refs_export_the_blocks_matrices(client: TestClient) -> None:
    form = page_form(client, "block")
    sc, _ = from_preset("block")
    _, stack = sc.compute()
    assert stack is not None
    expected = {
        "ln1.0": stack.blocks[0].ln1.output, "ffn_hidden.0": stack.blocks[0].ffn_hidden,
        "ffn_w1.0": stack.blocks[0].weights.ffn_w1, "ln2.1": stack.blocks[1].ln2.output,
        "x.1": stack.blocks[1].x, "residual1.1": stack.blocks[1].residual1,
        "ln1stats.0": np.stack([stack.blocks[0].ln1.mean, stack.blocks[0].ln1.var], axis=1),
    }
    for ref, m in expected.items():
        r = export(client, form, ref, "csv")
        assert r.status_code == 200, (ref, r.text)
        assert read_csv(r.text)[2].tolist() == m.tolist(), ref
    # A head matrix names the block in view: softmax.0 of block 2 when block 2 is shown.
    r = export(client, {**form, "block": "1"}, "softmax.0", "csv")
    assert read_csv(r.text)[2].tolist() == stack.blocks[1].attention.heads[0].softmax.tolist()
    assert read_csv(r.text)[2].tolist() != stack.blocks[0].attention.heads[0].softmax.tolist()


def test_any_heads_matrices_export_whichever_head_is_shown(client: TestClient) -> None:
    form = page_form(client, "bank-river")
    run = from_preset("bank-river")[0].run()
    for head in ("0", "2"):
        for h in range(3):
            r = export(client, {**form, "head": head}, f"softmax.{h}", "json")
            assert r.status_code == 200
            assert r.json()["values"] == run.heads[h].softmax.tolist()
    r = export(client, form, "w_q.2", "csv")
    assert read_csv(r.text)[2].tolist() == run.weights.w_q[2].tolist()


# --- evil tokens, file names ----------------------------------------------------------------------


@pytest.mark.parametrize("token", EVIL_TOKENS)
def test_evil_tokens_are_neutralised(client: TestClient, token: str) -> None:
    form = {**page_form(client, "three-token"), "token-0": token}
    r = export(client, form, "softmax.0", "csv")
    assert r.status_code == 200
    cols, rows, _ = read_csv(r.text)
    assert rows[0] == cols[0] == f"1 {token}"  # the label, intact, as text
    for row in csv.reader(io.StringIO(r.text)):
        for value in row[:1] if row[0] else row[1:]:  # every label; numbers may be negative
            assert not value.startswith(FORMULA_START), value
    assert r.headers["content-disposition"] == 'attachment; filename="softmax_0.csv"'

    latex = export(client, form, "softmax.0", "latex")
    assert latex.status_code == 200
    assert token not in latex.text and "token" not in latex.text
    assert re.fullmatch(r"(\\begin\{bmatrix\}\n)( +[0-9. &\\-]+\n)+\\end\{bmatrix\}\n", latex.text)

    data = export(client, form, "softmax.0", "json")
    assert data.headers["x-content-type-options"] == "nosniff"
    assert data.json()["row_labels"][0] == f"1 {token}"  # data in a JSON string, never markup


def test_csv_labels_that_could_start_a_formula_get_an_apostrophe() -> None:
    labels = ['=HYPERLINK("x")', "+1", "-1", "@A1", "\tx", "\rx", "plain", "0 =x"]
    text = matrix_csv(np.zeros((len(labels), 1)), labels, ["=col"])
    cols, rows, _ = read_csv(text)
    assert cols == ["'=col"]
    assert rows == ['\'=HYPERLINK("x")', "'+1", "'-1", "'@A1", "'\tx", "'\rx", "plain", "0 =x"]


def test_matrix_formats_handle_signs_and_non_finite_values() -> None:
    m = np.array([[-0.5, -0.0004, 1234.5678], [np.inf, -np.inf, 0.1]])
    assert latex_rows(matrix_latex(m, 2)) == [["-0.50", "0.00", "1234.57"], ["\\infty", "-\\infty", "0.10"]]
    assert "−" not in matrix_latex(m)  # a Unicode minus would break pdfLaTeX
    body = json.loads(matrix_json(m, ["a", "b"], ["c", "d", "e"], "m"))
    assert body["values"] == [[-0.5, -0.0004, 1234.5678], [None, None, 0.1]]
    _, _, values = read_csv(matrix_csv(m, ["a", "b"], ["c", "d", "e"]))
    assert values.tolist() == m.tolist()


def test_latex_wider_than_ten_columns_raises_max_matrix_cols() -> None:
    assert "MaxMatrixCols" not in matrix_latex(np.zeros((2, 10)))
    wide = matrix_latex(np.zeros((2, 12)))
    assert wide.startswith("\\setcounter{MaxMatrixCols}{12}\n\\begin{bmatrix}")
    assert wide.count("&") == 2 * 11


def test_file_names_are_ascii_from_the_ref() -> None:
    assert safe_filename("softmax.0", "csv") == "softmax_0.csv"
    assert safe_filename("ln1stats.1", "tex") == "ln1stats_1.tex"
    assert safe_filename('a"b\r\n.é/../0', "json") == "a_b_0.json"
    assert safe_filename("", "csv") == "matrix.csv"


# --- the page -------------------------------------------------------------------------------------


def test_every_heatmap_on_the_page_has_its_export_buttons(client: TestClient) -> None:
    html, _ = all_stages_page(client, "default")
    refs = set(re.findall(r'<table class="heatmap [^"]*" data-ref="([^"]+)"', html))
    buttons = re.findall(r'<button type="submit" formaction="/export" formmethod="post" name="export" '
                         r'value="([^"]+)\|(csv|json|latex)">', html)
    assert {ref for ref, _ in buttons} == refs
    assert {fmt for _, fmt in buttons} == {"csv", "json", "latex"}
    assert html.count('name="export" value="run|run"') == 1


# --- bad requests ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("fields", "field"), [
    ({"export": "softmax.0|xls"}, "export_format"),
    ({"export": "softmax.0"}, "export_format"),
    ({"export_ref": "softmax.0"}, "export_format"),
    ({}, "export_format"),
    ({"export": "|csv"}, "export_ref"),
    ({"export": "nope.0|csv"}, "export_ref"),
    ({"export": "softmax.7|csv"}, "export_ref"),  # one head only
    ({"export": "ln1.0|csv"}, "export_ref"),  # no blocks in this scenario
    ({"export": "../../etc/passwd|csv"}, "export_ref"),
    ({"export": "x" * 200 + "|csv"}, "export_ref"),
    ({"export": "softmax.0|csv", "x-0-0": "abc"}, "x-0-0"),
    ({"export": "run|run", "x-0-0": "1e999"}, "x-0-0"),
    ({"export": "softmax.0|csv", "shape": ""}, "shape"),
    ({"export": "softmax.0|csv", "preset": "<script>"}, "preset"),
])
def test_bad_export_requests_get_a_422_naming_the_field(client: TestClient, fields: dict[str, str],
                                                        field: str) -> None:
    r = client.post("/export", data={**page_form(client), **fields})
    assert r.status_code == 422
    assert "content-disposition" not in r.headers
    detail = r.json()["detail"]
    assert detail[0]["field"] == field
    assert detail[0]["msg"].startswith(detail[0]["field"].split("-")[0]) or field == "x-0-0"
    assert r.headers["x-content-type-options"] == "nosniff"  # a typed text in the message stays text


def test_a_mask_that_hides_every_key_gets_a_422(client: TestClient) -> None:
    form = {**page_form(client, "three-token"), "blocked": "0.0 0.1 0.2"}
    r = export(client, form, "softmax.0", "csv")
    assert r.status_code == 422
    assert r.json()["detail"][0]["field"] == "mask"
