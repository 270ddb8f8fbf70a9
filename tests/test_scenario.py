"""The page's state (app.scenario): how values appear in the editor, what a mechanism switched on
starts from, and how far a scenario has moved from its preset."""

from __future__ import annotations

import pytest

from app.scenario import format_input


@pytest.mark.parametrize(("value", "shown"), [
    (-0.0, "0"), (-1e-9, "0"), (-4.9e-7, "0"), (0.0, "0"), (1e-9, "0"),
    (-5e-6, "-5e-06"), (-0.5, "-0.5"), (2.0, "2"), (0.123456789, "0.123457"),
])
def test_an_input_never_shows_minus_zero(value: float, shown: str) -> None:
    assert format_input(value) == shown
