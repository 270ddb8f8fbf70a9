"""The page's form at the edge (app.form): the strict model of its named fields, the grid reader,
and the FormError each bad field becomes (the field it names, the message beside that input)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from app.config import settings
from app.form import FormError, PageForm, read_fields, read_matrix
from app.permalink import state_query
from app.presets import PRESETS
from app.scenario import as_stack, diff_edits, from_preset, normalise, read_form

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
    ("edits", "w_q.0.0.0=nan", "edits: w_q.0.0.0: enter a finite number between −1000 and 1000"),
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
    ("1,5", "W row 1, column 2: “1,5” is not a number"),
    ("nan", "W row 1, column 2: enter a finite number between −1000 and 1000"),
    ("-Infinity", "W row 1, column 2: enter a finite number between −1000 and 1000"),
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
