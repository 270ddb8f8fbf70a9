"""app.lesson.presets: every preset runs, and the seed presets reproduce their articles through the page's path."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from app.lesson.presets import PRESETS
from app.maths.records import AttentionRun
from app.state.scenario import from_preset
from tests.maths.test_attention import POOL_A, POOL_A_AT, POOL_OUTPUT, S003_A, S003_OUTPUT, S003_SCALED

BANK_DIMS = ("person", "action", "time", "outdoors", "money", "place")
WHO, WHEN, WHERE = 0, 1, 2  # the bank presets' heads


def preset_run(key: str) -> AttentionRun:
    """The run the page shows for a preset: the same Scenario path as GET /?preset=key."""
    scenario, _ = from_preset(key)
    return scenario.run()


@pytest.mark.parametrize("key", list(PRESETS))
def test_every_preset_runs(key: str) -> None:
    preset = PRESETS[key]
    scenario, view = from_preset(key)
    run = scenario.run()
    t = len(preset.tokens)
    assert scenario.preset == key
    assert len(preset.x) == t
    assert run.x.shape == (t, preset.d_model)
    assert run.output.shape == (t, preset.d_model)
    assert run.num_heads == preset.num_heads
    assert view.decimals == preset.decimals
    for head in run.heads:
        s = head.v.shape[0]  # the keys: T tokens, or S source tokens in cross-attention
        assert head.softmax.shape == (t, s)
        assert np.all(head.softmax >= 0.0)
        np.testing.assert_allclose(head.softmax.sum(axis=1), np.ones(t))
    assert np.all(np.isfinite(run.output))


@pytest.mark.parametrize("key", list(PRESETS))
def test_preset_dim_names_fit_d_model(key: str) -> None:
    preset = PRESETS[key]
    assert preset.dim_names == () or len(preset.dim_names) == preset.d_model


def test_pool_preset_reproduces_seed_001() -> None:
    run = preset_run("pool")
    np.testing.assert_array_equal(run.x, POOL_A)
    assert run.scale is False
    np.testing.assert_array_equal(np.round(run.heads[0].scores, 2), POOL_A_AT)
    np.testing.assert_array_equal(np.round(run.output, 2), POOL_OUTPUT)
    assert PRESETS["pool"].decimals == 2


def test_three_token_preset_reproduces_seed_003() -> None:
    run = preset_run("three-token")
    head = run.heads[0]
    assert run.d_k == 2
    np.testing.assert_array_equal(np.round(head.scaled, 3), S003_SCALED)
    np.testing.assert_array_equal(np.round(head.softmax, 3), S003_A)
    np.testing.assert_array_equal(np.round(head.output, 3), S003_OUTPUT)
    np.testing.assert_array_equal(np.round(run.output[:, :2], 3), S003_OUTPUT)


def attention_row(key: str, head: int, token: str) -> dict[str, float]:
    """The weights of ``token``'s query in ``head``, by key token (the first of repeated tokens)."""
    preset = PRESETS[key]
    row = preset_run(key).heads[head].softmax[preset.tokens.index(token)]  # (T,)
    weights: dict[str, float] = {}
    for t, w in zip(preset.tokens, row.tolist(), strict=True):
        weights.setdefault(t, w)
    return weights


@pytest.mark.parametrize("key", list(PRESETS))
def test_preset_head_names_fit_num_heads(key: str) -> None:
    preset = PRESETS[key]
    assert preset.head_names == () or len(preset.head_names) == preset.num_heads


@pytest.mark.parametrize("key", list(PRESETS))
def test_preset_focus_is_one_of_its_tokens(key: str) -> None:
    preset = PRESETS[key]
    assert preset.focus == "" or preset.focus in preset.tokens
    assert (preset.focus == "bank") == ("bank" in key)  # seed 000's figure draws bank's lines


@pytest.mark.parametrize("key", ["bank-river", "bank-money"])
def test_bank_presets_have_the_who_when_where_heads(key: str) -> None:
    preset = PRESETS[key]
    run = preset_run(key)
    assert preset.head_names == ("who", "when", "where")
    assert preset.dim_names == BANK_DIMS
    assert (run.num_heads, run.d_k, run.d_v) == (3, 2, 2)
    for name in ("w_q", "w_k", "w_v", "w_o"):  # the designed weights, not seeded ones of another shape
        np.testing.assert_array_equal(getattr(run.weights, name), preset.weight_arrays()[name])


@pytest.mark.parametrize(
    ("key", "head", "token", "target"),
    [
        ("bank-river", WHO, "bank", "Sherry"),
        ("bank-river", WHO, "lying", "Sherry"),
        ("bank-money", WHO, "bank", "Ryan"),
        ("bank-money", WHO, "transfer", "Ryan"),
        ("bank-river", WHEN, "bank", "lying"),
        ("bank-river", WHEN, "Sherry", "lying"),
        ("bank-money", WHEN, "bank", "needed"),
        ("bank-money", WHEN, "Ryan", "needed"),
        ("bank-river", WHERE, "bank", "river"),
        ("bank-money", WHERE, "bank", "money"),
    ],
)
def test_each_bank_head_finds_its_relationship(key: str, head: int, token: str, target: str) -> None:
    """The head's largest weight, itself included, goes to its target, by a clear margin."""
    row = attention_row(key, head, token)
    runner_up = max(w for t, w in row.items() if t != target)
    assert max(row, key=lambda t: row[t]) == target
    assert row[target] >= 0.5
    assert row[target] - runner_up >= 0.3


def test_where_head_sends_bank_to_the_river_or_to_money_and_transfer() -> None:
    river = attention_row("bank-river", WHERE, "bank")
    money = attention_row("bank-money", WHERE, "bank")
    assert river["river"] > 3 * max(river["lying"], river["on"], river["bank"])
    others = {t: w for t, w in money.items() if t != "bank"}
    assert sorted(others, key=lambda t: others[t], reverse=True)[:2] == ["money", "transfer"]


@pytest.mark.parametrize(("key", "wins", "loses"), [("bank-river", "outdoors", "money"),
                                                    ("bank-money", "money", "outdoors")])
def test_bank_output_leans_to_its_context(key: str, wins: str, loses: str) -> None:
    preset = PRESETS[key]
    out = preset_run(key).output[preset.tokens.index("bank")]  # (d_model,)
    assert out[BANK_DIMS.index(wins)] > 0.5
    assert out[BANK_DIMS.index(loses)] < 0.1


def test_bank_presets_share_the_bank_embedding_and_weights() -> None:
    """The contrast is fair only if bank and the weights are the same in both sentences."""
    river, money = PRESETS["bank-river"], PRESETS["bank-money"]
    assert river.x[river.tokens.index("bank")] == money.x[money.tokens.index("bank")]
    assert river.weights == money.weights
    assert (river.num_heads, river.d_k, river.head_names) == (money.num_heads, money.d_k, money.head_names)


def test_without_positions_swapping_tokens_swaps_outputs_with_them_they_differ() -> None:
    dog, _ = from_preset("dog-bites-man")
    man, _ = from_preset("man-bites-dog")
    a, b = dog.run().output, man.run().output
    assert np.allclose(a, b[[2, 1, 0]])  # the same rows, permuted
    pa = replace(dog, positional_encoding="sinusoidal").run().output
    pb = replace(man, positional_encoding="sinusoidal").run().output
    assert not np.allclose(pa, pb[[2, 1, 0]], atol=1e-3)


def test_translation_preset_aligns_each_french_word_with_its_english_counterpart() -> None:
    sc, view = from_preset("translate")
    weights = sc.run().heads[0].softmax
    assert weights.shape == (6, 6)
    assert weights.argmax(axis=1).tolist() == [0, 1, 2, 3, 4, 5]
    assert view.stage == "softmax"
