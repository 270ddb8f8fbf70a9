"""app.presets: every preset runs, and the seed presets reproduce their articles through the page's path."""

from __future__ import annotations

import numpy as np
import pytest

from app.pipeline import AttentionRun
from app.presets import PRESETS
from app.scenario import from_preset
from tests.test_pipeline import POOL_A, POOL_A_AT, POOL_OUTPUT, S003_A, S003_OUTPUT, S003_SCALED

BANK_DIMS = ("person", "outdoors", "money", "place")


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


def most_attended_other_token(key: str, token: str) -> str:
    """The token (other than itself) on which ``token`` puts its largest attention weight."""
    preset = PRESETS[key]
    i = preset.tokens.index(token)
    weights = preset_run(key).heads[0].softmax[i].copy()
    weights[i] = -1.0
    return preset.tokens[int(np.argmax(weights))]


def test_bank_by_the_river_attends_to_lying() -> None:
    assert most_attended_other_token("bank-river", "bank") == "lying"


def test_bank_with_money_attends_to_money() -> None:
    assert most_attended_other_token("bank-money", "bank") == "money"


@pytest.mark.parametrize(("key", "wins", "loses"), [("bank-river", "outdoors", "money"),
                                                    ("bank-money", "money", "outdoors")])
def test_bank_output_leans_to_its_context(key: str, wins: str, loses: str) -> None:
    preset = PRESETS[key]
    assert preset.dim_names == BANK_DIMS
    out = preset_run(key).output[preset.tokens.index("bank")]
    assert out[BANK_DIMS.index(wins)] > out[BANK_DIMS.index(loses)]


def test_bank_presets_share_the_bank_embedding_and_weights() -> None:
    """The contrast is fair only if bank and the weights are the same in both sentences."""
    river, money = PRESETS["bank-river"], PRESETS["bank-money"]
    assert river.x[river.tokens.index("bank")] == money.x[money.tokens.index("bank")]
    assert river.weights == money.weights
