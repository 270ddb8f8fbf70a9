"""app.view.context's banner line: the scenario in words, its own formulas typeset, the tokens as text."""

from __future__ import annotations

from dataclasses import replace

from app.state.scenario import from_preset
from app.view.context import describe_scenario


def test_the_banner_line_typesets_its_formulas_and_keeps_tokens_as_text() -> None:
    sc, _ = from_preset("default")
    sc = replace(sc, tokens=("a_b", "$x$", *sc.tokens[2:]), scale=False, temperature=2.0, blocks=1)
    line = str(describe_scenario(sc))
    assert line.startswith("5 tokens “a_b $x$ sat on mat”")  # typed text, never converted
    assert 'no <math display="inline" alttext="÷ √d_k">' in line
    assert '<math display="inline" alttext="τ = 2">' in line
    assert '<math display="inline" alttext="d_ff = ' in line
    outside = "".join(part.split("</math>")[-1] for part in line.split("<math"))
    assert "d_k" not in outside and "d_ff" not in outside and "τ" not in outside
