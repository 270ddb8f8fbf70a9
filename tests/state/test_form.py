"""The page's form at the edge (app.state.form): the strict model of its named fields, the grid reader,
and the FormError each bad field becomes (the field it names, the message beside that input)."""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from dataclasses import replace

import numpy as np
import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from app.config import settings
from app.lesson.presets import PRESETS
from app.state.form import FormError, PageForm, read_fields
from app.state.grids import MAX_GRID_SIDE, count_values, expand_grids, grid_rows, has_grid, read_matrix
from app.state.numbers import is_number, read_number
from app.state.permalink import state_query
from app.state.reading import read_form, read_page
from app.state.scenario import as_stack, diff_edits, from_preset, normalise
from app.state.tokens import hidden_character, token_pattern
from tests.conftest import CELL_NAME, form_fields, grid_keys, join_grids

BASE = dict(
    pair.split("=", 1) for pair in ["token-0=a", "token-1=b", "shape=2,1,2,2,0", "x-0-0=1", "x-0-1=2", "x-1-0=3",
                                    "x-1-1=4"]
)


def error_of(form: dict[str, str]) -> FormError:
    with pytest.raises(FormError) as e:
        read_form(form)
    return e.value


def test_the_model_is_strict_and_reads_every_named_field() -> None:
    # Strict: a field added later without its own text reader refuses the text instead of coercing it.
    assert PageForm.model_config["strict"] is True
    f = read_fields({**BASE, "seed": " 7 ", "scale": "on", "mask": "causal", "temperature": "0.5",
                     "d_ff": "16", "decimals": "2", "panels": "cost lab bogus", "revealed": "q.0.0.0 q.0.0.0",
                     "edits": "w_q.0.1.1=2.5"})
    assert (f.tokens, f.shape, f.seed, f.scale, f.mask, f.temperature, f.d_ff, f.decimals) == (
        ("a", "b"), (2, 1, 2, 2, 0, 0), 7, True, "causal", 0.5, 16, 2)
    assert f.panels == {"cost", "lab"} and f.revealed == {"q.0.0.0"}
    assert f.edits == {("w_q", 0, 1, 1): 2.5}
    # Empty and absent fields take their defaults; a flag is on only for on/true/1.
    f = read_fields({**BASE, "seed": "", "scale": "yes", "mask": ""})
    assert (f.seed, f.scale, f.mask, f.score, f.temperature) == (None, False, "none", "dot", 1.0)


def test_a_value_that_is_not_text_is_not_coerced() -> None:
    """Only text is read: a number or a list where the form has text counts as absent, never as a value."""
    f = read_fields({**BASE, "seed": 12, "d_model": [3], "quiz": True})
    assert (f.seed, f.d_model, f.quiz) == (None, None, False)


@pytest.mark.parametrize(("name", "value", "message"), [
    ("seed", "abc", f"seed: enter a whole number from 0 to {settings.max_seed}"),
    ("seed", "3.5", f"seed: enter a whole number from 0 to {settings.max_seed}"),
    ("seed", "-1", f"seed: -1 is out of range; enter 0 to {settings.max_seed}"),
    ("d_model", "65", f"d_model: 65 is out of range; enter 1 to {settings.max_d_model}"),
    ("num_heads", "0", f"num_heads: 0 is out of range; enter 1 to {settings.max_heads}"),
    ("d_ff", "9999", f"d_ff: 9999 is out of range; enter 1 to {settings.max_d_ff}"),
    ("decimals", "9", "decimals: 9 is out of range; enter 1 to 4"),
    ("head", "x", f"head: enter a whole number from 0 to {settings.max_heads - 1}"),
    ("mask", "diagonal", "mask: choose one of none, causal, local, strided"),
    ("score", "cosine", "score: choose one of dot, general, additive"),
    ("norm", "<b>", "norm: choose one of post, pre"),
    ("temperature", "nan", "temperature: choose a value from 0.05 to 20"),
    ("temperature", "0", "temperature: choose a value from 0.05 to 20"),
    ("temperature", "21", "temperature: choose a value from 0.05 to 20"),
    ("temperature", "warm", "temperature: choose a value from 0.05 to 20"),
    ("shape", "2,1", "shape: the form is incomplete; reload the page"),
    ("shape", "2,1,2,2,1", "shape: out of range; reload the page"),
    ("shape", "99,1,2,2,0", "shape: out of range; reload the page"),
    ("preset", "nope", "preset: unknown preset “nope”"),
    ("edits", "w_q.0.0.0", "edits: cannot read “w_q.0.0.0”"),
    ("edits", "w_q.0.0.0=nan", "edits: w_q.0.0.0: “nan” is not a number"),
    ("edits", "w_q.0.0.0=1e999", "edits: w_q.0.0.0: enter a finite number between −1000 and 1000"),
    ("edits", "w_k.1.0.1=abc", "edits: w_k.1.0.1: “abc” is not a number"),
    ("blocked", "1.x", "blocked: cannot read “1.x”"),
    ("pin", "p" * (4 * 1024 * 1024 + 1), "pin: the pinned state is too large; unpin it"),
])
def test_a_bad_field_is_an_error_naming_it(name: str, value: str, message: str) -> None:
    e = error_of({**BASE, name: value})
    assert (e.field, e.message) == (name, message)


def test_tokens_are_bounded() -> None:
    e = error_of({**BASE, "token-1": "t" * (settings.max_token_chars + 1)})
    assert (e.field, e.message) == ("token-1", f"token 2: at most {settings.max_token_chars} characters")
    many = {f"token-{i}": "t" for i in range(settings.max_tokens + 5)}
    e = error_of({**BASE, **many})
    assert (e.field, e.message) == ("token-0", f"tokens: at most {settings.max_tokens}")
    e = error_of({k: v for k, v in BASE.items() if not k.startswith("token")})
    assert (e.field, e.message) == ("token-0", "tokens: at least one token is needed")


def test_the_row_and_column_forms_need_both_numbers() -> None:
    e = error_of({**BASE, "action": "inspect", "inspect_matrix": "q", "inspect_row": "1"})
    assert e.field == "inspect_col"
    # Typed counting from 1, as the page counts; the cell reference counts from 0.
    sc, view = read_form({**BASE, "action": "inspect", "inspect_matrix": "q", "inspect_row": "2", "inspect_col": "1"})
    assert view.inspect == "q.0.1.0"
    e = error_of({**BASE, "action": "inspect", "inspect_matrix": "q", "inspect_row": "2", "inspect_col": "0"})
    assert (e.field, e.message) == ("inspect_col",
                                    f"inspect_col: enter a whole number from 1 to {8 * settings.max_tokens}")
    # A prediction outside a quiz is not one: its fields are not needed.
    assert read_form({**BASE, "action": "guess"})[1].guess == ""


def test_braces_and_markup_in_a_message_stay_as_typed() -> None:
    """The message is carried, not formatted: nothing a student types is read as a template."""
    for typed in ("{message}", "{field}", "{{7*7}}", "<script>"):
        e = error_of({**BASE, "preset": typed})
        assert e.message == f"preset: unknown preset “{typed}”"
        e = error_of({**BASE, "x-1-0": typed})
        assert (e.field, e.message) == ("x-1-0", f"X row 2, column 1: “{typed}” is not a number")


# --- grids ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "message"), [
    ("", "W row 1, column 2: enter a number"),
    ("   ", "W row 1, column 2: enter a number"),
    ("abc", "W row 1, column 2: “abc” is not a number"),
    ("1,5,2", "W row 1, column 2: “1,5,2” is not a number"),
    ("nan", "W row 1, column 2: “nan” is not a number"),
    ("-Infinity", "W row 1, column 2: “-Infinity” is not a number"),
    ("1e999", "W row 1, column 2: enter a finite number between −1000 and 1000"),
    ("1000.5", "W row 1, column 2: enter a finite number between −1000 and 1000"),
])
def test_a_bad_cell_names_its_input(text: str, message: str) -> None:
    form = {"w-0-0": "1", "w-0-1": text, "w-1-0": "bad too", "w-1-1": "1"}
    with pytest.raises(FormError) as e:
        read_matrix(form, "w", 2, 2, "W")
    assert (e.value.field, e.value.message) == ("w-0-1", message)  # the first bad cell, row by row


def test_a_missing_cell_is_an_error() -> None:
    with pytest.raises(FormError) as e:
        read_matrix({"w-0-0": "1"}, "w", 1, 2, "W")
    assert (e.value.field, e.value.message) == ("w-0-1", "W row 1, column 2: enter a number")


finite = st.floats(min_value=-settings.max_abs_value, max_value=settings.max_abs_value, allow_nan=False)


@hsettings(max_examples=200, deadline=None)
@given(st.integers(1, 5).flatmap(lambda r: st.integers(1, 5).flatmap(
    lambda c: st.tuples(st.just(r), st.just(c), st.lists(finite, min_size=r * c, max_size=r * c)))),
       st.sampled_from(["{!r}", "{:.3f}", " {:g} ", "{:e}", "{:+}"]))
def test_cells_read_exactly_as_python_reads_them(shape: tuple, style: str) -> None:
    """Every cell is the float Python's own parser gives for its text: exact, in the spellings
    Python and a browser's number input write (repr, fixed, %g with spaces, exponent, signed)."""
    rows, cols, values = shape
    texts = [style.format(v) for v in values]
    form = {f"g-{k // cols}-{k % cols}": text for k, text in enumerate(texts)}
    got = read_matrix(form, "g", rows, cols, "G")
    assert got.shape == (rows, cols)
    assert got.ravel().tolist() == [float(t) for t in texts]


def test_the_page_round_trips_through_the_model() -> None:
    """Every preset's link (the same fields as its form) reads back to the same scenario."""
    for key in PRESETS:
        sc, view = from_preset(key)
        again, _ = read_form(dict(state_query(sc, view)))
        np.testing.assert_array_equal(again.x, sc.x)
        assert again.tokens == sc.tokens
        for name, w in sc.weights().items():
            np.testing.assert_array_equal(again.weights()[name], w, err_msg=name)


@hsettings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(PRESETS)), st.data())
def test_normalise_keeps_exactly_the_edits_that_change_a_weight(key: str, data: st.DataObject) -> None:
    """Against the direct reference: apply every edit, then compare the whole weights with the base."""
    sc, _ = from_preset(key)
    base = sc.base_weights()
    names = sorted(base)
    edits = {}
    for _ in range(data.draw(st.integers(0, 12))):
        name = data.draw(st.sampled_from(names))
        stack = as_stack(name, base[name])
        h, r, c = (data.draw(st.integers(0, n + 1)) for n in stack.shape)  # some past the edge
        in_range = h < stack.shape[0] and r < stack.shape[1] and c < stack.shape[2]
        same = in_range and data.draw(st.booleans())
        edits[(name, h, r, c)] = float(stack[h, r, c]) if same else data.draw(finite)
    edits[("not_a_weight", 0, 0, 0)] = 1.0
    edited = replace(sc, edits=edits)
    assert normalise(edited).edits == diff_edits(edited.weights(), edited.base_weights())


@pytest.mark.parametrize(("name", "value", "message"), [
    ("blocked", "\u00b2.0", "blocked: cannot read “².0”"),
    ("edits", "w_q.0.0." + "9" * 5000 + "=1", "edits: cannot read “w_q.0.0." + "9" * 22 + "”"),
    ("seed", "\u0661\u0662", f"seed: enter a whole number from 0 to {settings.max_seed}"),
    ("seed", "9" * 5000, f"seed: enter a whole number from 0 to {settings.max_seed}"),
    ("temperature", "\u0661", "temperature: choose a value from 0.05 to 20"),
    ("shape", "2,1,2,2,\u00b2", "shape: the form is incomplete; reload the page"),
])
def test_numbers_are_ascii_digits_and_odd_text_gets_our_message(name: str, value: str, message: str) -> None:
    """Python's int() takes "١٢" and refuses 5,000 digits with its own words: neither reaches a student."""
    e = error_of({**BASE, name: value})
    assert (e.field, e.message) == (name, message)


# --- numbers: one grammar everywhere the form reads one ---------------------------------------------

# The page's grammar for a number, written out here on its own: ASCII digits, a sign (the minus sign the
# page prints too), a decimal point or comma (0,5 as a French class writes it), an exponent, spaces or tabs around.
STRICT_NUMBER = re.compile(r"[ \t]*[+\-−]?(?:[0-9]+[.,]?[0-9]*|[.,][0-9]+)(?:[eE][+\-−]?[0-9]+)?[ \t]*")


def as_float(text: str) -> float:
    return float(text.replace("−", "-").replace(",", "."))
# What Python's float() reads besides: underscores, other scripts' digits, nan and inf, other spaces.
FLOAT_ONLY = ["1_0", "1_000.5", "1e1_0", "\u0661\u0662", "\u06f1\u06f2", "\uff11\uff12", "\u0967", "nan", "NaN",
              "-inf", "Infinity", "1\u00a0", "\u20031", "1\r", "\x0c1", "1\n"]


@pytest.mark.parametrize("text", FLOAT_ONLY)
def test_what_only_float_reads_is_not_a_number_in_any_cell(text: str) -> None:
    float(text)  # Python reads it, the page does not
    with pytest.raises(ValueError):
        read_number(text)
    assert not is_number(text)
    for form in ({"w-0-0": "1", "w-0-1": text}, {"grid-w": f"1 {text}"}):
        with pytest.raises(FormError) as e:
            read_matrix(form, "w", 1, 2, "W")
        assert e.value.field == "w-0-1" and e.value.message.endswith("is not a number"), e.value.message


@pytest.mark.parametrize(("name", "value", "message"), [
    ("seed", "1_0", f"seed: enter a whole number from 0 to {settings.max_seed}"),
    ("d_model", "1_6", f"d_model: enter a whole number from 1 to {settings.max_d_model}"),
    ("decimals", "\u0662", "decimals: enter a whole number from 1 to 4"),
    ("temperature", "1_0", "temperature: choose a value from 0.05 to 20"),
    ("temperature", "\uff11", "temperature: choose a value from 0.05 to 20"),
    ("edits", "w_q.0.0.0=1_0", "edits: w_q.0.0.0: “1_0” is not a number"),
    ("x-1-0", "1_0", "X row 2, column 1: “1_0” is not a number"),
    ("x-0-1", "\u0661\u0662", "X row 1, column 2: “\u0661\u0662” is not a number"),
])
def test_a_setting_or_cell_spelled_only_as_float_reads_it_is_refused_naming_it(name: str, value: str,
                                                                                message: str) -> None:
    e = error_of({**BASE, name: value})
    assert (e.field, e.message) == (name, message)


def test_a_joined_grid_with_an_underscore_names_the_cell() -> None:
    e = error_of({**BASE, "grid-x": "1 2;3 4_0"})
    assert (e.field, e.message) == ("x-1-1", "X row 2, column 2: “4_0” is not a number")


def test_the_minus_sign_the_page_prints_reads_as_minus() -> None:
    assert read_number("−0.5") == -0.5 and read_number("1e−3") == 0.001 and read_number(" +2 ") == 2.0
    sc, _ = read_form({**BASE, "x-0-0": "−1.5", "edits": "w_q.0.0.0=−2"})
    assert sc.x[0, 0] == -1.5 and sc.edits[("w_q", 0, 0, 0)] == -2.0
    assert read_matrix({"grid-w": "−1 2;3 −4e−1"}, "w", 2, 2, "W").tolist() == [[-1.0, 2.0], [3.0, -0.4]]
    assert is_number("−0.25")


def test_a_decimal_comma_reads_as_a_point_in_every_cell_and_a_list_never_does() -> None:
    assert read_number("0,5") == 0.5 and read_number("−0,25") == -0.25 and read_number(",5") == 0.5
    assert read_matrix({"grid-w": "0,5 −1,25;3 0.5"}, "w", 2, 2, "W").tolist() == [[0.5, -1.25], [3.0, 0.5]]
    sc, _ = read_form({**BASE, "x-0-0": "−0,25", "edits": "w_q.0.0.0=0,5"})
    assert sc.x[0, 0] == -0.25 and sc.edits[("w_q", 0, 0, 0)] == 0.5
    for text in ("1,2,3", "1,000.5", "0.5,", ",", "1,,5"):  # a list, or both signs: not a number
        assert not is_number(text), text


NUMBER_TEXT = st.from_regex(STRICT_NUMBER, fullmatch=True)
ANY_TEXT = st.text(st.sampled_from("0123456789+-−.eE _\t\n\r\u00a0\u0661\uff11naifINFxy,"), max_size=12) | st.text()


@hsettings(max_examples=500, deadline=None)
@given(NUMBER_TEXT)
def test_the_reader_agrees_with_float_on_the_grammar(text: str) -> None:
    want = as_float(text)
    if abs(want) == float("inf"):  # past float's range: not a finite number
        with pytest.raises(ValueError):
            read_number(text)
    else:
        assert read_number(text) == want and is_number(text)


@hsettings(max_examples=1000, deadline=None)
@given(ANY_TEXT)
def test_the_reader_takes_the_grammar_and_nothing_else(text: str) -> None:
    try:
        got: float | None = read_number(text)
    except ValueError:
        got = None
    if STRICT_NUMBER.fullmatch(text) is None:
        assert got is None
    elif got is not None:
        assert got == as_float(text)
    # A grid reads each cell as read_number does, one by one or joined (a cell's text never holds " " or ";"
    # when joined: those split it).
    bounded = got is not None and abs(got) <= settings.max_abs_value
    cells = {"w-0-0": text, "w-0-1": "0"}
    spellings = [cells] + ([{"grid-w": f"{text} 0"}] if not any(c in text for c in " ;") else [])
    for form in spellings:
        try:
            assert read_matrix(form, "w", 1, 2, "W").tolist() == [[got, 0.0]] and bounded
        except FormError as e:
            assert not bounded and e.field == "w-0-0"


# --- tokens: text a student can see ----------------------------------------------------------------

# Each with the character the message must name: controls (NUL, ESC, a newline), the right-to-left
# override, a zero width space, a byte order mark, a line separator, a tag character, and a joiner
# standing alone or at an end (inside a word it stays).
HIDDEN_TOKENS = [("a\x00b", "U+0000"), ("\x1b[31mred", "U+001B"), ("two\nlines", "U+000A"), ("\u202eevil", "U+202E"),
                 ("zero\u200bwidth", "U+200B"), ("\ufeffbom", "U+FEFF"), ("a\u2028b", "U+2028"),
                 ("flag\U000e0067", "U+E0067"), ("\u200d", "U+200D"), ("word\u200c", "U+200C"),
                 ("a\u200c\u200db", "U+200C")]
# Joiners inside a word: Persian's zero width non-joiner, an emoji sequence, a Devanagari conjunct.
JOINED_WORDS = ["\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645", "\U0001f469\u200d\U0001f4bb",
                "\u0915\u094d\u200d\u0937", "\u2764\ufe0f\u200d\U0001f525"]


@pytest.mark.parametrize(("text", "code"), HIDDEN_TOKENS)
def test_a_token_with_a_control_or_invisible_character_is_refused_naming_it(text: str, code: str) -> None:
    e = error_of({**BASE, "token-1": text})
    assert e.field == "token-1" and e.message.startswith("token 2: remove the ") and code in e.message, e.message
    e = error_of({**BASE, "cross": "on", "ctoken-0": "src", "ctoken-1": text, "c-0-0": "1", "c-0-1": "1",
                  "c-1-0": "1", "c-1-1": "1"})
    assert e.field == "ctoken-1" and e.message.startswith("source token 2: remove the ") and code in e.message


@pytest.mark.parametrize("text", JOINED_WORDS)
def test_joiners_inside_a_word_are_kept(text: str) -> None:
    assert read_fields({**BASE, "token-1": text}).tokens == ("a", text)


def refused_by_category(text: str) -> bool:
    """The rule read straight from Unicode's categories, character by character."""
    def hidden(k: int) -> bool:
        return unicodedata.category(text[k]) in ("Cc", "Cf", "Zl", "Zp")
    return any(hidden(k) and not (text[k] in "\u200c\u200d" and 0 < k < len(text) - 1 and not hidden(k - 1)
                                  and not hidden(k + 1)) for k in range(len(text)))


TOKEN_TEXT = st.text(st.sampled_from("ab \x00\x1b\t\n\u200b\u200c\u200d\u202e\u2028\ufeff\u0645\U0001f469\U000e0067"),
                     max_size=8) | st.text(max_size=12)


@hsettings(max_examples=1000, deadline=None)
@given(TOKEN_TEXT)
def test_a_token_is_refused_by_its_categories_and_the_schemas_pattern_says_the_same(text: str) -> None:
    refused = hidden_character(text) is not None
    assert refused == refused_by_category(text)
    assert refused == (re.fullmatch(token_pattern(), text) is None)


def test_a_missing_shape_says_to_reload() -> None:
    e = error_of({k: v for k, v in BASE.items() if k != "shape"})
    assert (e.field, e.message) == ("shape", "shape: the form is incomplete; reload the page")


def test_unknown_panels_do_not_push_out_known_ones() -> None:
    assert read_fields({**BASE, "panels": "bogus other lab cost"}).panels == {"lab", "cost"}


def test_source_tokens_are_checked_only_with_cross_attention_on() -> None:
    long = {**BASE, "ctoken-0": "t" * (settings.max_token_chars + 1)}
    assert read_fields(long).ctokens == ("t" * (settings.max_token_chars + 1),)
    e = error_of({**long, "cross": "on"})
    assert (e.field, e.message) == ("ctoken-0", f"source token 1: at most {settings.max_token_chars} characters")


def test_a_bad_weight_cell_names_its_matrix_head_row_and_column_from_1() -> None:
    w_q = {f"w_q-{i}-{j}": "0.5" for i in range(2) for j in range(2)}
    e = error_of({**BASE, **w_q, "w_q-1-0": "abc"})
    assert (e.field, e.message) == ("w_q-1-0", "W_Q (head 1) row 2, column 1: “abc” is not a number")
    e = error_of({**BASE, "cross": "on", "ctoken-0": "a", "c-0-0": "1", "c-0-1": ""})
    assert (e.field, e.message) == ("c-0-1", "C row 1, column 2: enter a number")


# --- a grid as one joined field (how the page's script posts it) -------------------------------------

W = {"w-0-0": "1", "w-0-1": "-2.5", "w-1-0": "3e-2", "w-1-1": "0"}


def test_a_joined_grid_reads_as_its_cells() -> None:
    joined = read_matrix({"grid-w": "1 -2.5;3e-2 0"}, "w", 2, 2, "W")
    assert joined.tolist() == read_matrix(W, "w", 2, 2, "W").tolist() == [[1.0, -2.5], [0.03, 0.0]]


@hsettings(max_examples=200, deadline=None)
@given(st.integers(1, 5).flatmap(lambda r: st.integers(1, 5).flatmap(
    lambda c: st.tuples(st.just(r), st.just(c), st.lists(finite, min_size=r * c, max_size=r * c)))),
       st.sampled_from(["{!r}", "{:.3f}", "{:g}", "{:e}", "{:+}"]))
def test_joined_cells_read_exactly_as_the_same_cells_one_by_one(shape: tuple, style: str) -> None:
    rows, cols, values = shape
    texts = [style.format(v) for v in values]
    cells = {f"g-{k // cols}-{k % cols}": text for k, text in enumerate(texts)}
    joined = join_grids(cells)
    assert list(joined) == ["grid-g"]
    got = read_matrix(joined, "g", rows, cols, "G")
    assert got.tobytes() == read_matrix(cells, "g", rows, cols, "G").tobytes()  # bit for bit
    assert expand_grids(joined) == cells


def _outcome(form: dict[str, str]) -> object:
    try:
        return read_matrix(form, "w", 2, 2, "W").tolist()
    except FormError as e:
        return e.field, e.message


@pytest.mark.parametrize("text", ["", "abc", "1,5,2", "nan", "-Infinity", "1e999", "1000.5", "١٢", "0x10", "1_000",
                                  "+.5", "5.", "-0"])
def test_a_cell_of_a_joined_grid_is_refused_or_read_exactly_as_alone(text: str) -> None:
    cells = {**W, "w-1-0": text}
    one_by_one = _outcome(cells)
    assert _outcome(join_grids(cells)) == one_by_one
    if text in ("", "abc", "1,5,2", "nan", "-Infinity", "1e999", "1000.5", "١٢", "0x10", "1_000"):
        assert one_by_one[0] == "w-1-0"  # refused, naming the cell


@pytest.mark.parametrize(("text", "field"), [
    ("1 2;3", "w-1-1"),  # a row one cell short
    ("1 2", "w-1-0"),  # a row short
    ("1", "w-0-1"),
    ("", "w-0-0"),
    ("1  2;3 4", "w-0-1"),  # two spaces: an empty cell between them
    (";", "w-0-0"),
])
def test_a_joined_grid_short_of_cells_names_the_first_missing_one(text: str, field: str) -> None:
    with pytest.raises(FormError) as e:
        read_matrix({"grid-w": text}, "w", 2, 2, "W")
    i, j = (int(n) + 1 for n in field.split("-")[1:])
    assert (e.value.field, e.value.message) == (field, f"W row {i}, column {j}: enter a number")


def test_cells_beyond_the_grid_are_not_read_in_either_spelling() -> None:
    """As with one field per cell, where an x-9-9 the shape does not reach is never looked at."""
    extra = read_matrix({"grid-w": "1 2 junk;3 4 junk;junk"}, "w", 2, 2, "W")
    assert extra.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert read_matrix({"grid-w": "1 2;3 4 " + "9 " * 100_000}, "w", 2, 2, "W").tolist() == extra.tolist()


def test_a_joined_grid_wins_over_cells_of_the_same_grid() -> None:
    form = {**W, "grid-w": "5 6;7 8"}
    assert read_matrix(form, "w", 2, 2, "W").tolist() == [[5.0, 6.0], [7.0, 8.0]]
    assert {k: v for k, v in expand_grids(form).items() if k.startswith("w-")} == {
        "w-0-0": "5", "w-0-1": "6", "w-1-0": "7", "w-1-1": "8"}


def test_a_grid_is_there_in_either_spelling_with_its_rows() -> None:
    assert has_grid(W, "w") and has_grid({"grid-w": ""}, "w")
    assert not has_grid({"w-0-1": "1", "grid-x": "1"}, "w")
    assert grid_rows({"grid-w": "1;2;3"}, "w", 8) == grid_rows({"w-0-0": "1", "w-1-0": "2", "w-2-0": "3"}, "w", 8) == 3
    assert grid_rows({"grid-w": "1;2;3"}, "w", 2) == 2
    assert grid_rows({}, "w", 4) == grid_rows({"grid-w": ""}, "w", 4) == 1


def test_expanding_a_joined_grid_stops_at_the_largest_form() -> None:
    side = ";".join([" ".join(["1"] * 1000)] * 1000)  # 1000 × 1000
    huge = {"seed": "1", "grid-a": side, "grid-b": side, "grid-c": side}
    out = expand_grids(huge)
    assert "a-255-255" in out and "a-0-256" not in out and "a-256-0" not in out  # never past the widest grid
    assert settings.max_form_fields <= len(out) <= settings.max_form_fields + MAX_GRID_SIDE  # then stops
    assert out["seed"] == "1"


def test_a_joined_grid_counts_its_cells_as_values() -> None:
    assert count_values(W) == count_values(join_grids(W)) == 4
    assert count_values({**W, "seed": "1"}) == count_values(join_grids({**W, "seed": "1"})) == 5


# Every preset, and the states that bring the other grids on screen: C (cross-attention), P (learned
# positions), the score weights, the FFN and LayerNorms (blocks), the Learn panel's target, another head,
# the mask's checkboxes (left as they are by the script).
STATES = [(key, {}) for key in PRESETS] + [
    ("default", {"positional_encoding": "learned"}), ("translate", {"positional_encoding": "learned"}),
    ("default", {"score": "general"}), ("learn-translate", {"panels": "learn target"}),
    ("bank-river", {"head": "1"}), ("causal", {"stage": "mask"}), ("block", {"blocks": "1", "d_ff": "6"}),
]


def page_state(client: TestClient, key: str, changes: dict[str, str]) -> tuple[dict[str, str], str]:
    """The state form of a preset's page, after posting ``changes`` without JavaScript; and the page."""
    r = client.get("/", params={"preset": key})
    if changes:
        r = client.post("/", data={**form_fields(r.text), **changes})
    assert r.status_code == 200
    return form_fields(r.text), r.text


def same_state(a: object, b: object) -> bool:
    """Dataclasses (Scenario, View, Learning) field by field, arrays bit for bit."""
    if dataclasses.is_dataclass(a) and type(a) is type(b):
        return all(same_state(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and (
            a.shape == b.shape and a.tobytes() == b.tobytes())
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return type(a) is type(b) and len(a) == len(b) and all(same_state(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize(("key", "changes"), STATES, ids=[f"{k}{'-' + '-'.join(c.values()) if c else ''}"
                                                           for k, c in STATES])
def test_the_joined_form_reads_as_the_same_state_as_cell_by_cell(client: TestClient, key: str,
                                                                 changes: dict[str, str]) -> None:
    cells, html = page_state(client, key, changes)
    joined = join_grids(cells, grid_keys(html))
    # The script joins exactly the grids of number inputs: every cell field but the mask's checkboxes.
    assert grid_keys(html) == {CELL_NAME.match(n)[1] for n in cells if CELL_NAME.match(n)} - {"block"}
    assert joined == join_grids(cells)
    assert not any(CELL_NAME.match(n) and not n.startswith("block-") for n in joined)
    assert len(joined) < len(cells)
    assert same_state(read_page(joined), read_page(cells))
    assert expand_grids(joined) == cells


def test_an_edited_weight_reads_the_same_joined(client: TestClient) -> None:
    cells, _ = page_state(client, "bank-river", {"head": "2"})
    cells |= {"w_q-1-0": "0.5", "w_o-0-2": "-3", "x-2-1": "7"}
    sc, view = read_page(join_grids(cells))
    assert same_state((sc, view), read_page(cells))
    assert sc.weights()["w_q"][2, 1, 0] == 0.5 and sc.x[2, 1] == 7.0 and view.head == 2


@pytest.mark.parametrize(("cell", "message"), [
    ("x-1-2", "X row 2, column 3: “abc” is not a number"),
    ("w_k-0-1", "W_K (head 1) row 1, column 2: “abc” is not a number"),
    ("w_o-2-0", "W_O rows of head 1, row 3, column 1: “abc” is not a number"),
    ("c-3-1", "C row 4, column 2: “abc” is not a number"),
    ("target-1-0", "target row 2, column 1: “abc” is not a number"),
])
def test_a_bad_cell_of_the_joined_page_form_names_the_cell(client: TestClient, cell: str, message: str) -> None:
    cells, _ = page_state(client, "learn-translate", {"panels": "learn target"})
    assert cell in cells
    with pytest.raises(FormError) as one_by_one:
        read_page({**cells, cell: "abc"})
    with pytest.raises(FormError) as joined:
        read_page(join_grids({**cells, cell: "abc"}))
    assert (joined.value.field, joined.value.message) == (one_by_one.value.field, one_by_one.value.message)
    assert (joined.value.field, joined.value.message) == (cell, message)
