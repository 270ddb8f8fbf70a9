"""The page's state (app.state.scenario): how values appear in the editor, what a mechanism switched on
starts from, and how far a scenario has moved from its preset."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from app.lesson.presets import PRESETS
from app.state.form import FormError
from app.state.permalink import state_query
from app.state.reading import read_form, with_shown
from app.state.scenario import (
    Scenario,
    View,
    as_stack,
    departure,
    format_input,
    from_preset,
    new_weights,
    normalise,
    with_position_table,
)


@pytest.mark.parametrize(("value", "shown"), [
    (-0.0, "0"), (-1e-9, "0"), (-4.9e-7, "0"), (0.0, "0"), (1e-9, "0"),
    (-5e-6, "-5e-06"), (-0.5, "-0.5"), (2.0, "2"), (0.123456789, "0.123457"),
])
def test_an_input_never_shows_minus_zero(value: float, shown: str) -> None:
    assert format_input(value) == shown


# --- cross-attention switched on ------------------------------------------------------------------


def _tick_cross(key: str, **fields: str) -> tuple[Scenario, View]:
    """The preset's form posted with cross-attention just ticked (no source sentence on screen yet)."""
    sc, view = from_preset(key)
    form = {k: v for k, v in state_query(sc, view) if not k.startswith(("ctoken-", "c-", "cross"))}
    return read_form({**form, "cross": "on", **fields})


def test_ticking_cross_attention_gives_the_default_preset_its_own_source_sentence() -> None:
    off, _ = from_preset("default")
    on, _ = _tick_cross("default")
    assert on.cross and on.context_tokens == ("Le", "chat", "assis", "sur", "le", "tapis")
    assert on.context_x.shape == (6, off.d_model)  # S = 6 ≠ T = 5
    assert not np.array_equal(on.context_x[: len(off.tokens)], off.x)
    a, b = off.run().heads[0], on.run().heads[0]
    assert b.scores.shape == (5, 6) and b.softmax.shape == (5, 6)
    np.testing.assert_array_equal(a.q, b.q)  # queries still come from X
    for name in ("k", "v"):  # keys and values from C: other rows, other numbers
        assert getattr(b, name).shape[0] == 6
        assert not np.allclose(getattr(a, name), getattr(b, name)[:5]), name
    assert not np.allclose(a.scores, b.scores[:, :5])
    assert not np.allclose(a.softmax, b.softmax[:, :5])
    # Deterministic: the same seed gives the same sentence, another seed another embedding.
    again, _ = _tick_cross("default")
    np.testing.assert_array_equal(again.context_x, on.context_x)
    other, _ = _tick_cross("default", seed="7")
    assert not np.array_equal(other.context_x, on.context_x)


def test_a_preset_without_a_source_sentence_gets_numbered_source_tokens() -> None:
    on, _ = _tick_cross("pool")
    assert on.context_tokens == ("src 1", "src 2", "src 3")
    assert not np.array_equal(on.context_x, on.x)


def test_the_translate_preset_keeps_its_own_source_sentence() -> None:
    sc, _ = from_preset("translate")
    assert sc.context_tokens == PRESETS["translate"].context_tokens
    np.testing.assert_array_equal(sc.context_x, np.array(PRESETS["translate"].context_x))
    again, _ = _tick_cross("translate")  # unticked, then ticked again
    assert again.context_tokens == sc.context_tokens
    np.testing.assert_array_equal(again.context_x, sc.context_x)


def test_switching_cross_attention_clears_the_marks_on_the_old_keys() -> None:
    on, _ = _tick_cross("causal", blocked="4.0", **{"pad-1": "on"})
    assert (on.blocked, on.padding) == (frozenset(), frozenset())
    sc, view = on, View(stage="mask")
    form = dict(state_query(replace(sc, blocked=frozenset({(4, 0)}), padding=frozenset({5})), view))
    kept, _ = read_form(form)
    assert (kept.blocked, kept.padding) == ({(4, 0)}, {5})  # while it stays on, they stay
    off, _ = read_form({k: v for k, v in form.items() if k != "cross"})  # unticked
    assert not off.cross and (off.blocked, off.padding) == (frozenset(), frozenset())


def test_a_longer_source_sentence_with_a_learned_position_table() -> None:
    """S = 6 > T = 5: the table grows a row, the five on screen are kept."""
    sc, view = from_preset("default")
    learned = dict(state_query(with_position_table(replace(sc, positional_encoding="learned")), view))
    learned["pos-2-1"] = "0.5"
    on, _ = read_form({**learned, "cross": "on"})
    assert on.position_table.shape == (6, sc.d_model)
    assert on.position_table[2, 1] == 0.5


def test_cross_attention_switched_on_survives_its_url() -> None:
    on, view = _tick_cross("default")
    back, _ = read_form(dict(state_query(on, view)))
    assert back.context_tokens == on.context_tokens
    np.testing.assert_array_equal(back.context_x, on.context_x)
    np.testing.assert_array_equal(back.run().output, on.run().output)


def test_a_query_left_with_no_key_is_named_counting_from_1() -> None:
    sc, _ = from_preset("default")
    with pytest.raises(FormError) as e:
        replace(sc, blocked=frozenset((2, j) for j in range(5))).compute()
    assert e.value.field == "mask"
    assert e.value.message.startswith("mask: query 3 (sat) would see no key at all")


# --- how far from the preset ----------------------------------------------------------------------


@pytest.mark.parametrize("key", list(PRESETS))
def test_every_preset_as_loaded_and_read_back_is_its_preset(key: str) -> None:
    sc, view = from_preset(key)
    assert departure(sc) == (False, False)
    assert departure(read_form(dict(state_query(sc, view)))[0]) == (False, False)


@pytest.mark.parametrize(("change", "expected"), [
    ({"x-0-0": "0.75"}, (False, True)),
    ({"edits": "w_k.0.1.2=3"}, (False, True)),
    ({"token-0": "a"}, (True, False)),
    ({"action": ""}, (False, False)),
    ({"d_model": "4"}, (True, False)),
    ({"num_heads": "3"}, (True, False)),
    ({"d_k": "2"}, (True, False)),
    ({"mask": "causal"}, (True, False)),
    ({"mask": "local"}, (True, False)),
    ({"blocked": "1.0"}, (True, False)),
    ({"pad-2": "on"}, (True, False)),
    ({"cross": "on"}, (True, False)),
    ({"positional_encoding": "rope"}, (True, False)),
    ({"score": "additive"}, (True, False)),
    ({"attention": "linear"}, (True, False)),
    ({"temperature": "2"}, (True, False)),
    ({"blocks": "1"}, (True, False)),
])
def test_departure_tells_structure_from_values(change: dict[str, str], expected: tuple[bool, bool]) -> None:
    sc, view = from_preset("default")
    form = {k: v for k, v in state_query(sc, view) if k != "scale"}  # the ÷√d_k toggle is a mechanism
    assert departure(read_form({**form, "scale": "on", **change})[0]) == expected
    assert departure(read_form(form)[0]) == (True, False)  # ÷√d_k switched off


def test_a_source_sentence_edited_is_a_value_edit_and_no_preset_is_no_departure() -> None:
    sc, view = from_preset("translate")
    assert departure(read_form({**dict(state_query(sc, view)), "c-0-0": "0.5"})[0]) == (False, True)
    assert departure(new_weights(sc)) == (False, False)


# --- the matrices on screen, read into edits ----------------------------------------------------------


def _cell_by_cell(edits: dict, shown: list) -> dict:
    """Every shown cell stored as an edit, over the hidden ones (what normalise then trims)."""
    out = dict(edits)
    for name, head, row0, m in shown:
        for (r, c), v in np.ndenumerate(m):
            out[(name, head, row0 + r, c)] = float(v)
    return out


@hsettings(max_examples=60, deadline=None)
@given(st.sampled_from(["default", "bank-river", "additive", "block"]), st.data())
def test_shown_matrices_become_exactly_the_edits_cell_by_cell_storage_would(key: str, data: st.DataObject) -> None:
    """with_shown compares each shown matrix with the base in one go; the result is what storing
    every shown cell as an edit and then normalising gives, with the same weights."""
    sc, _ = from_preset(key)
    base = sc._base
    shown, hidden = [], {}
    for name in data.draw(st.lists(st.sampled_from(sorted(base)), max_size=4, unique=True)):
        stack = as_stack(name, base[name])  # (stacks, R, C)
        head = data.draw(st.integers(0, stack.shape[0]))  # one past the last: a head the base lacks
        row0 = data.draw(st.integers(0, stack.shape[1] + 2))  # past the last row too
        rows, cols = data.draw(st.integers(1, stack.shape[1] + 1)), data.draw(st.integers(1, stack.shape[2] + 1))
        m = np.zeros((rows, cols))  # (rows, cols): the base where it reaches, some cells changed
        part = stack[min(head, stack.shape[0] - 1), row0:row0 + rows, :cols]
        m[:part.shape[0], :part.shape[1]] = part
        for _ in range(data.draw(st.integers(0, 3))):
            m[data.draw(st.integers(0, rows - 1)), data.draw(st.integers(0, cols - 1))] = data.draw(
                st.sampled_from([0.0, -0.0, 0.5, -2.0]))
        shown.append((name, head, row0, m))
        for _ in range(data.draw(st.integers(0, 3))):  # hidden edits under the shown cells, and beside them
            cell = (row0 + data.draw(st.integers(0, rows)), data.draw(st.integers(0, cols)))
            hidden[(name, data.draw(st.sampled_from([head, 0])), *cell)] = data.draw(st.sampled_from([1.0, -0.25]))
    fast = replace(sc, edits=with_shown(hidden, shown, base))
    slow = replace(sc, edits=_cell_by_cell(hidden, shown))
    assert normalise(fast).edits == normalise(slow).edits
    assert all(np.array_equal(a, b) for a, b in zip(fast.weights().values(), slow.weights().values(), strict=True))
