"""app.view.editor: the mask's grid of checkboxes, each cell against a hand check."""

from __future__ import annotations

import math
import re
from dataclasses import replace

from markupsafe import escape

from app.state.scenario import View, from_preset
from app.view.editor import editor_grids, mask_grid


def test_the_mask_grid_shows_each_scaled_score_or_why_it_is_hidden() -> None:
    """Each checkbox cell against a hand check: causal cells are ticked, disabled and say why; a
    padding key likewise; a cell hidden by hand is ticked but can be unticked; every open cell
    shows its scaled score from an independent Q·Kᵀ/√d_k; token text stays text."""
    sc, _ = from_preset("default")
    sc = replace(sc, tokens=("<b>x</b>", *sc.tokens[1:]), mask_mode="causal", padding=frozenset({1}),
                 blocked=frozenset({(3, 0)}))
    run = sc.run()
    w = sc.weights()
    scaled = (sc.x @ w["w_q"][0]) @ (sc.x @ w["w_k"][0]).T / math.sqrt(sc.d_k)
    html = str(mask_grid(sc, run, View(decimals=3)))
    rows = re.findall(r'<tr><th scope="row">(.*?)</th>(.*?)</tr>', html)
    assert [label for label, _ in rows][0].startswith("1 &lt;b&gt;x&lt;/b&gt;") and "<b>" not in html
    names = [str(escape(t)) for t in sc.tokens]
    for i, (_, cells) in enumerate(rows):
        tds = re.findall(r'<td class="(\w+)"><label><input type="checkbox" name="block-(\d+)-(\d+)"([^>]*)> '
                         r'(.*?)</label>(?:<span class="why">(\w+)</span>)?</td>', cells)
        assert len(tds) == len(sc.tokens)
        for j, (cls, qi, kj, attrs, text, why) in enumerate(tds):
            assert (int(qi), int(kj)) == (i, j)
            # The label counts from 1, as the page does; the field name is internal and counts from 0.
            assert f'aria-label="hide key {j + 1} ({names[j]}) from query {i + 1} ({names[i]})"' in attrs
            expected_why = "causal" if j > i else ("padding" if j == 1 else "")
            hidden = bool(expected_why) or (i, j) == (3, 0)
            assert why == expected_why
            assert (cls == "hidden", "checked" in attrs, "disabled" in attrs) == (hidden, hidden, bool(expected_why))
            assert text == ("−∞" if hidden else f"{scaled[i, j]:.3f}".replace("-", "−"))  # a true minus sign


def test_grids_typeset_their_titles_and_show_a_true_minus_sign() -> None:
    sc, view = from_preset("additive")
    grids = editor_grids(sc, view, sc.run())
    titles = {g.key: str(g.label) for g in grids["weights"] + grids["score"]}
    assert titles["w_q"].startswith('<math display="inline" alttext="W_Q">')
    assert titles["w_o"].startswith('<math display="inline" alttext="W_O">') and titles["w_o"].endswith(
        "</math> rows of head 1")
    assert titles["v_a"].startswith('<math display="inline" alttext="v_a">')
    v_a = next(g for g in grids["score"] if g.key == "v_a")
    assert v_a.rows[0][0] == "vₐ"
    sc, view = from_preset("default")  # its X has negative values
    x = editor_grids(sc, view, sc.run())["x"]
    values = [cell[1] for _, cells in x.rows for cell in cells]
    assert any(v.startswith("−") for v in values) and not any("-" in v for v in values)
    assert [float(v.replace("−", "-")) for v in values] == sc.x.ravel().tolist()
