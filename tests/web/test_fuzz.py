"""A bounded fuzz of request parsing, and the resource bounds.

Hypothesis sends what no form or client would: arbitrary JSON and arbitrary bytes to the API,
valid requests with one part broken, arbitrary form fields to every form endpoint, arbitrary
query strings to the page. The answer is always below 500, and a JSON error names a field.

Then every size a request can claim, far over its bound (10⁹), must be refused with a 422 that
names it before any array is made: the request's peak memory, measured with tracemalloc, stays
that of a small request.
"""

from __future__ import annotations

import json
import math
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from fastapi.testclient import TestClient
from httpx import Response
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app.config import settings as bounds
from app.main import create_app
from tests.conftest import form_fields
from tests.web.test_schema import valid_requests

API = "/api/attention"
JSON = {"content-type": "application/json"}
HTMX = {"HX-Request": "true"}
FUZZ = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
REQUEST_FIELDS = ("tokens", "x", "num_heads", "d_k", "d_v", "weights", "seed", "scale", "temperature", "mask",
                  "window", "score", "attention", "blocks", "d_ff", "activation", "norm", "context",
                  "positional_encoding", "position_table")
WEIGHT_FIELDS = ("w_q", "w_k", "w_v", "w_o", "w_a", "w_1", "w_2", "v_a", "ffn_w1", "ffn_b1", "ffn_w2", "ffn_b2")


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    """One app for the module: a fresh one per example would only measure start-up."""
    with TestClient(create_app(), raise_server_exceptions=False) as c:
        yield c


def assert_json_error_names_a_field(response: Response, *, as_sent: bool = True) -> None:
    """Each problem has its field, and a message led by it: as sent (the API's "x[1][2]: …") or, for the
    page's forms, by the label the page shows beside that input ("FFN b₁[0][0]: …" for ffn_b1-0-0)."""
    assert response.headers["content-type"].startswith("application/json")
    detail = response.json()["detail"]
    assert isinstance(detail, list) and detail
    for item in detail:
        assert item["field"], item
        label, _, message = item["msg"].partition(": ")
        assert label and message, item
        if as_sent:
            assert label == item["field"], item


def assert_api_answer(response: Response) -> None:
    """200 with finite numbers, or a 422 that names the field; never a 5xx."""
    assert response.status_code in (200, 422), response.text[:500]
    if response.status_code == 422:
        assert_json_error_names_a_field(response)
    else:
        json.loads(response.text, parse_constant=lambda name: pytest.fail(f"the answer holds {name}"))


# --- the JSON API ------------------------------------------------------------------------------------

SCALARS = (st.none() | st.booleans() | st.integers(-(10**20), 10**20) | st.floats() | st.text(max_size=12)
           | st.sampled_from([0, 1, -1, 10**9, 1e999, 0.5, "none", "causal", "dot", "linear", "learned"]))
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.sampled_from(REQUEST_FIELDS + WEIGHT_FIELDS) | st.text(max_size=8), children, max_size=5),
    max_leaves=40,
)
# Objects with the request's own field names, so the fuzz reaches past "field required".
REQUEST_LIKE = st.fixed_dictionaries({}, optional={name: JSON_VALUES for name in REQUEST_FIELDS})


@FUZZ
@given(JSON_VALUES | REQUEST_LIKE)
@example({"tokens": ["a"], "x": [[math.nan]]})
@example({"tokens": ["a"], "x": [[1.0]], "weights": {"w_q": [[[1.0]], [[1.0, 2.0]]]}, "num_heads": 2, "d_k": 1})
def test_any_json_body_gets_200_or_a_422_naming_a_field(client: TestClient, body: Any) -> None:
    assert_api_answer(client.post(API, content=json.dumps(body), headers=JSON))  # NaN, Infinity as JSON tokens


@FUZZ
@given(st.binary(max_size=300) | st.text(max_size=100).map(str.encode))
@example(b"\xff\xfe\x00")
@example(b"[" * 100_000)
@example(b'{"tokens": ["a"], "x": [[1e99999]]}')
def test_any_bytes_get_a_422_naming_a_field(client: TestClient, raw: bytes) -> None:
    response = client.post(API, content=raw, headers=JSON)
    assert response.status_code == 422, response.text[:500]
    assert_json_error_names_a_field(response)


def paths(value: Any, at: tuple = ()) -> Iterator[tuple]:
    """Every place in a JSON value: its path of keys and indices."""
    yield at
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, (*at, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from paths(item, (*at, i))


@st.composite
def broken_requests(draw: st.DrawFn) -> Any:
    """A valid request with one thing broken: a part removed, replaced, duplicated or added to."""
    body = draw(valid_requests())
    where = draw(st.sampled_from(list(paths(body))[1:]))
    *parent_path, last = where
    parent = body
    for key in parent_path:
        parent = parent[key]
    action = draw(st.sampled_from(["remove", "replace", "duplicate", "append"]))
    if action == "remove":
        del parent[last]
    elif action == "replace":
        parent[last] = draw(JSON_VALUES)
    elif action == "duplicate" and isinstance(parent, list):
        parent.insert(last, json.loads(json.dumps(parent[last])))
    elif isinstance(parent[last], list):
        parent[last].append(draw(JSON_VALUES))
    else:
        parent[last] = [parent[last], draw(SCALARS)]
    return body


@FUZZ
@given(broken_requests())
def test_a_valid_request_with_one_thing_broken_gets_200_or_a_422(client: TestClient, body: Any) -> None:
    assert_api_answer(client.post(API, content=json.dumps(body), headers=JSON))


# --- the page's forms and query string -----------------------------------------------------------------

FORM_TEXT = st.text(max_size=20) | st.sampled_from(
    ["", "0", "-1", "1e999", "nan", "-inf", "1000000000", "99999999999999999999", "0x10", "1,2", "3,1,3,3,0,0",
     "1000000000,1,1,1,0,0", "on", "x", "softmax.0.0.0", "softmax.0|csv", "run|run", "remove_token-999999",
     # digits int() reads or refuses in its own words: superscripts, Arabic-Indic, thousands of them
     "remove_token-\u00b2", "\u0661\u0662", "\u00b2.0", "9" * 5000, "remove_token-" + "9" * 5000,
     "w_q.0.0." + "9" * 5000 + "=1", "3,1,3,3,\u00b2"]
)
FORM_NAMES = st.text(max_size=12) | st.sampled_from(
    ["shape", "d_model", "num_heads", "d_k", "d_v", "d_ff", "blocks", "window", "seed", "head", "block", "stage",
     "goto", "action", "edits", "blocked", "inspect", "inspect_matrix", "inspect_row", "inspect_col", "mask",
     "cross", "ctoken-0", "c-0-0", "pos-0-0", "token-64", "x-0-0", "x-99-99", "w_q-0-0", "w_o-0-0", "export",
     "export_ref", "export_format", "temperature", "decimals", "panels", "show_panel", "preset", "present"]
)


@pytest.fixture(scope="module")
def preset_forms(client: TestClient) -> dict[str, dict[str, str]]:
    return {key: form_fields(client.get("/", params={"preset": key}).text) for key in ("default", "translate", "block",
                                                                                       "sparse", "linear")}


@st.composite
def broken_forms(draw: st.DrawFn, forms: dict[str, dict[str, str]]) -> dict[str, str]:
    """A real form of some preset with fields changed, removed and added."""
    form = dict(forms[draw(st.sampled_from(sorted(forms)))])
    names = sorted(form)
    for name in draw(st.lists(st.sampled_from(names), max_size=4, unique=True)):
        if draw(st.booleans()):
            del form[name]
        else:
            form[name] = draw(FORM_TEXT)
    form |= draw(st.dictionaries(FORM_NAMES, FORM_TEXT, max_size=4))
    return form


@pytest.mark.parametrize(("path", "headers"), [("/", {}), ("/", HTMX), ("/stages", {}), ("/stages", HTMX)],
                         ids=["page", "page-htmx", "stages", "stages-htmx"])
def test_any_form_gets_an_answer_below_500(client: TestClient, preset_forms: dict[str, dict[str, str]],
                                           path: str, headers: dict[str, str]) -> None:
    @FUZZ
    @given(broken_forms(preset_forms))
    def post(form: dict[str, str]) -> None:
        response = client.post(path, data=form, headers=headers)
        assert response.status_code in (200, 422), response.text[:500]
        assert response.headers["content-type"].startswith("text/html")

    post()


def test_any_export_form_gets_a_file_or_a_422_naming_a_field(client: TestClient,
                                                            preset_forms: dict[str, dict[str, str]]) -> None:
    refs = st.sampled_from(["softmax.0", "scores.0", "output.0", "x", "final", "q.7", "", "run", "a" * 41])
    formats = st.sampled_from(["csv", "json", "latex", "run", "pdf", ""])

    @FUZZ
    @given(broken_forms(preset_forms), refs | st.text(max_size=12), formats | st.text(max_size=6))
    def post(form: dict[str, str], ref: str, fmt: str) -> None:
        response = client.post("/export", data={**form, "export": f"{ref}|{fmt}"})
        assert response.status_code in (200, 422), response.text[:500]
        if response.status_code == 422:
            assert_json_error_names_a_field(response, as_sent=False)
        else:
            assert response.headers["content-disposition"].startswith("attachment")

    post()


@pytest.mark.parametrize(("method", "path", "headers"), [
    ("GET", "/", {}),
    ("POST", "/", {}),
    ("POST", "/stages", {}),
    ("POST", "/", HTMX),
    ("POST", "/stages", HTMX),
], ids=["get-page", "page", "stages", "page-htmx", "stages-htmx"])
def test_an_unreadable_pin_gets_a_message_not_a_500(client: TestClient, preset_forms: dict[str, dict[str, str]],
                                                    method: str, path: str, headers: dict[str, str]) -> None:
    form = {**preset_forms["default"], "pin": "__proto__"}
    if method == "GET":
        response = client.get(path, params=form)
    else:
        response = client.post(path, data=form, headers=headers)
    assert response.status_code == 422
    assert "pin" in response.text


QUERY_STRINGS = (st.dictionaries(FORM_NAMES, FORM_TEXT, max_size=6).map(urlencode)
                 | st.text(max_size=60).map(lambda text: quote(text, safe="=&;")))


@FUZZ
@given(QUERY_STRINGS)
@example(urlencode({"shape": "1000000000,8,64,64,0,256", "token-0": "a", "x-0-0": "1"}))
@example("preset=block&present=1&stage=ffn")
def test_any_query_string_gets_a_page_below_500(client: TestClient, query: str) -> None:
    response = client.get(f"/?{query}")
    assert response.status_code in (200, 422), response.text[:500]
    assert response.headers["content-type"].startswith("text/html")


# --- resource bounds: sizes far over their bounds are refused before any array is made ---------------

HUGE = 10**9
SMALL = {"tokens": ["a", "b"], "x": [[0.5, -0.5], [0.25, 1.0]]}
OVER_BOUND_REQUESTS: list[tuple[str, dict[str, Any], str]] = [
    ("num_heads", {**SMALL, "num_heads": HUGE}, "num_heads"),
    ("d_k", {**SMALL, "d_k": HUGE}, "d_k"),
    ("d_v", {**SMALL, "d_v": HUGE}, "d_v"),
    ("d_ff", {**SMALL, "blocks": 1, "d_ff": HUGE}, "d_ff"),
    ("blocks", {**SMALL, "blocks": HUGE}, "blocks"),
    ("window", {**SMALL, "mask": "local", "window": HUGE}, "window"),
    ("seed", {**SMALL, "seed": 2**64}, "seed"),
    ("negative_d_k", {**SMALL, "d_k": -HUGE}, "d_k"),
    ("float_heads", {**SMALL, "num_heads": 1e300}, "num_heads"),
    ("T", {"tokens": ["a"] * (bounds.max_tokens + 1), "x": [[1.0]] * (bounds.max_tokens + 1)}, "tokens"),
    ("d_model", {"tokens": ["a"], "x": [[1.0] * (bounds.max_d_model + 1)]}, "x[0]"),
    ("S", {**SMALL, "context": {"tokens": ["s"] * (bounds.max_tokens + 1),
                                "x": [[1.0, 2.0]] * (bounds.max_tokens + 1)}}, "context.tokens"),
    ("token_length", {**SMALL, "tokens": ["a", "b" * (bounds.max_token_chars + 1)]}, "tokens[1]"),
    ("mask_rows", {**SMALL, "mask": [[False]] * (bounds.max_tokens + 1)}, "mask"),
    ("position_table_rows", {**SMALL, "position_table": [[0.0, 0.0]] * (bounds.max_tokens + 1)}, "position_table"),
    ("w_o_rows", {**SMALL, "weights": {"w_o": [[0.0, 0.0]] * (bounds.max_heads * bounds.max_d_head + 1)}},
     "weights.w_o"),
    ("w_q_heads", {**SMALL, "weights": {"w_q": [[[0.0], [0.0]]] * (bounds.max_heads + 1)}}, "weights.w_q"),
    ("ffn_b1", {**SMALL, "weights": {"ffn_b1": [0.0] * (bounds.max_d_ff + 1)}}, "weights.ffn_b1"),
]


def peak_bytes(call: Callable[[], Response]) -> tuple[Response, int]:
    """The answer, and the most memory Python and NumPy held at once while it was made."""
    tracemalloc.start()
    try:
        response = call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return response, peak


@pytest.fixture(scope="module")
def small_request_peak(client: TestClient) -> int:
    """The peak of a valid request at the bounds' smallest: what a refused request may cost at most."""
    response, peak = peak_bytes(lambda: client.post(API, json=SMALL))
    assert response.status_code == 200
    return peak


@pytest.mark.parametrize(("body", "field"), [(b, f) for _, b, f in OVER_BOUND_REQUESTS],
                         ids=[i for i, _, _ in OVER_BOUND_REQUESTS])
def test_api_sizes_over_their_bounds_are_refused_before_any_array(client: TestClient, small_request_peak: int,
                                                                  body: dict[str, Any], field: str) -> None:
    raw = json.dumps(body)
    response, peak = peak_bytes(lambda: client.post(API, content=raw, headers=JSON))
    assert response.status_code == 422
    assert_json_error_names_a_field(response)
    assert any(item["field"].startswith(field) for item in response.json()["detail"]), response.text
    # Parsing holds a few copies of the body; an array of the claimed size would be gigabytes.
    assert peak < small_request_peak + 20 * len(raw) + 2**20


OVER_BOUND_FORM_FIELDS = [
    ("d_model", str(HUGE)), ("num_heads", str(HUGE)), ("d_k", str(HUGE)), ("d_v", str(HUGE)),
    ("d_ff", str(HUGE)), ("blocks", str(HUGE)), ("window", str(HUGE)), ("seed", str(2**64)),
    ("shape", f"{HUGE},1,{HUGE},{HUGE},0,{HUGE}"), ("head", str(HUGE)), ("block", str(HUGE)),
    ("decimals", str(HUGE)), ("temperature", "1e9"),
]


@pytest.mark.parametrize(("name", "value"), OVER_BOUND_FORM_FIELDS, ids=[n for n, _ in OVER_BOUND_FORM_FIELDS])
def test_page_sizes_over_their_bounds_are_refused_before_any_array(client: TestClient, name: str, value: str,
                                                                   preset_forms: dict[str, dict[str, str]]) -> None:
    form = {**preset_forms["default"], name: value}
    baseline, small_peak = peak_bytes(lambda: client.post("/stages", data=preset_forms["default"], headers=HTMX))
    assert baseline.status_code == 200
    response, peak = peak_bytes(lambda: client.post("/stages", data=form, headers=HTMX))
    assert response.status_code == 422
    assert name in response.text  # the message names the field
    assert peak < small_peak + 2**20


def test_page_with_more_tokens_than_the_bound_is_refused(client: TestClient,
                                                         preset_forms: dict[str, dict[str, str]]) -> None:
    form = dict(preset_forms["default"])
    d_model = int(form["shape"].split(",")[0])
    for i in range(bounds.max_tokens + 1):
        form[f"token-{i}"] = f"t{i}"
        form |= {f"x-{i}-{j}": "0.5" for j in range(d_model)}
    response = client.post("/stages", data=form, headers=HTMX)
    assert response.status_code == 422
    assert f"at most {bounds.max_tokens}" in response.text
