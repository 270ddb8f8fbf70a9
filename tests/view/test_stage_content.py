"""What the stages say, checked on the Python side: the softmax's input under a mask, −∞ in a heatmap and in the
lines, the inspector's rounding, counting from 1, the articles' names, and the attention goal's floor."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import replace

import numpy as np
import pytest

from app.lesson.articles import ARTICLES, cite
from app.lesson.presets import PRESETS
from app.lesson.stages import visible_stages
from app.maths.arithmetic import CellRef, explain
from app.maths.gradient_arithmetic import explain_gradient
from app.state.learning import learning_loss_and_gradients, preset_learning
from app.state.scenario import from_preset
from app.view.attention_lines import attention_lines
from app.view.context import loss_floor
from app.view.gradient_worked import gradient_worked
from app.view.heatmap import heatmap_table
from app.view.panels import PanelBuilder, gradient_decimals
from app.view.stage_panels import stage_view
from app.view.worked import rounding_note, worked

SOFTMAX = next(s for s in visible_stages(0) if s.key == "softmax")
MASKED_PRESETS = sorted(k for k, p in PRESETS.items() if p.mask != "none")
CELL = re.compile(r'<td class="([^"]*)">(?:<span>)?([^<]*)(?:</span>)?</td>')  # a wide matrix's numbers: a <span>


def cells(table: str) -> list[tuple[str, str]]:
    """(class, text) of every cell of a heatmap table, row by row."""
    return CELL.findall(table)


# --- 1. the softmax's input -------------------------------------------------------------------------


@pytest.mark.parametrize("preset", MASKED_PRESETS)
def test_under_a_mask_the_softmax_stage_shows_the_masked_scores(preset: str) -> None:
    sc, view = from_preset(preset)
    run = sc.run()
    panel = stage_view(PanelBuilder(sc, run, view), SOFTMAX).panels["input"]
    assert panel.ref == "masked.0" and "Masked" in panel.title
    hidden, scaled = run.mask, run.heads[0].scaled  # (T, S) each
    shown = cells(str(panel.table))
    assert len(shown) == hidden.size
    for (cls, text), hide, value in zip(shown, hidden.ravel(), scaled.ravel(), strict=True):
        if hide:
            assert (cls, text) == ("mk", "−∞")
        else:
            assert cls != "mk" and float(text.replace("−", "-")) == pytest.approx(value, abs=0.0005)


def test_padding_hides_its_column_in_the_softmax_input() -> None:
    sc, view = from_preset("default")
    sc = replace(sc, padding=frozenset({3}))
    run = sc.run()
    shown = cells(str(stage_view(PanelBuilder(sc, run, view), SOFTMAX).panels["input"].table))
    columns = len(sc.tokens)
    assert [text for j, (_, text) in enumerate(shown) if j % columns == 3] == ["−∞"] * len(sc.tokens)
    assert all(text != "−∞" for j, (_, text) in enumerate(shown) if j % columns != 3)


def test_without_a_mask_the_softmax_input_stays_scaled() -> None:
    sc, view = from_preset("default")
    panel = stage_view(PanelBuilder(sc, sc.run(), view), SOFTMAX).panels["input"]
    assert panel.ref == "scaled.0" and "−∞" not in str(panel.table)


def test_minus_infinity_is_hatched_and_outside_the_colour_scale() -> None:
    m = np.array([[1.0, -np.inf], [-2.0, 0.5]])
    table, top = heatmap_table(m, row_labels=["a", "b"], col_labels=["a", "b"], kind="signed", decimals=2,
                               ref="masked.0", caption="Masked")
    assert top == 2.0  # the largest finite |value|
    assert cells(str(table)) == [("d2", "1.00"), ("mk", "−∞"), ("d-5", "−2.00"), ("d1", "0.50")]


def test_the_inspector_names_the_masked_row_and_sums_over_visible_keys_only() -> None:
    sc, _ = from_preset("causal")
    run = sc.run()
    last = len(sc.tokens) - 1  # the last query sees every key, yet the mask is on
    for i in (0, last):
        e = explain(run, CellRef("softmax", 0, i, 0), list(sc.tokens), [])
        assert e.masked and "masked row" in e.title
        assert r"Masked" in str(worked(e, 3).heading) and "Scaled" not in str(worked(e, 3).heading)
        visible = [en for en in e.entries if not en.hidden]
        assert len(visible) == i + 1
        assert e.total == pytest.approx(sum(np.exp(run.heads[0].scaled[i, : i + 1])))
    plain, _ = from_preset("default")
    e = explain(plain.run(), CellRef("softmax", 0, 0, 0), list(plain.tokens), [])
    assert not e.masked and "Scaled" in str(worked(e, 3).heading)


def test_the_lines_draw_no_line_for_a_hidden_key_and_print_minus_infinity() -> None:
    weights = np.array([[[1.0, 0.0], [0.4, 0.6]]])  # (1, 2, 2): causal
    hidden = np.array([[False, True], [False, False]])
    svg = str(attention_lines(weights, ["a", "b"], ["a", "b"], ["head 1"], fig_id="t", hidden=hidden).svg)
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    first = root.find(f".//{ns}g[@class='qs']")[0]
    assert [line.get("y2") for line in first.iter(f"{ns}line")] == ["0"]  # to key 1 only
    assert [t.text for t in first.iter(f"{ns}text") if t.get("class") == "mk"] == ["−∞"]
    assert first.get("aria-label").startswith("query 1 a:") and "masked keys 2" in first.get("aria-label")


# --- 10. the inspector's numbers add up -------------------------------------------------------------


def printed_sum(values: list[float], decimals: int) -> str:
    return f"{round(sum(round(v, decimals) for v in values), decimals) + 0.0:.{decimals}f}"


def test_rounded_terms_that_do_not_add_up_say_so() -> None:
    # 0.004 + 0.004 + 0.004 = 0.012 → 0.01, each printed 0.00: the printed terms add up to 0.00
    note = rounding_note([0.004, 0.004, 0.004], 0.012, 2)
    assert len(note) == 1 and "add up to 0.00" in note[0] and "0.01200" in note[0] and "0.01." in note[0]
    assert rounding_note([0.25, 0.5], 0.75, 2) == []


def test_a_gradient_cell_prints_the_same_in_its_heatmap_and_its_inspector() -> None:
    sc, view = from_preset("learn-translate")  # two decimals on the page
    learning = preset_learning(sc)
    run = sc.run()
    grads = learning_loss_and_gradients(run, learning)[1]
    d = gradient_decimals(view.decimals)
    assert d == 3
    for i in range(len(sc.tokens)):
        for j in range(len(sc.key_tokens)):
            e = explain_gradient(run, grads, learning.loss_spec(), CellRef("g_scaled", 0, i, j), list(sc.tokens),
                                 list(sc.key_tokens), [])
            w = gradient_worked(e, d)
            heat = f"{round(float(grads.heads[0].scaled[i, j]), d) + 0.0:.{d}f}".replace("-", "−")
            assert heat in w.lines[-1].split('alttext="')[1]  # "= −0.100": the result line's text
            # the row sum of the softmax backward: its printed terms add up, or a line says they do not
            terms = [en.product for en in e.entries if not en.hidden]
            adds_up = printed_sum(terms, d) == f"{round(e.row_sum, d) + 0.0:.{d}f}"
            assert adds_up != any("Terms rounded" in str(line) for line in w.lines)


# --- 11. counting from 1, and the articles' names -----------------------------------------------------


def test_no_preset_names_a_seed_file_or_counts_from_0() -> None:
    for p in PRESETS.values():
        text = " ".join((p.title, p.source, p.summary, *p.tokens))
        assert not re.search(r"\b[Ss]eeds? 0\d\d|\bseeds'", text), p.key
        assert not re.search(r"\b(pos|query|key|token|head) 0\b", text), p.key


def test_a_source_names_its_article_by_number_and_title() -> None:
    assert cite(4, what="x") == f"Article 4, “{ARTICLES[3]}”: x"
    assert cite(2, 4, 5, what="y") == "Articles 2, 4 and 5: y"
    assert PRESETS["translate"].source.startswith("Article 4, “Attention mechanism and transformers”")


# --- 12. the attention goal's floor ------------------------------------------------------------------


def test_the_floor_is_the_targets_entropy_and_the_gradient_there() -> None:
    sc, _ = from_preset("learn-translate")
    learning = preset_learning(sc)
    t = learning.target
    entropy = sum(-sum(p * np.log(p) for p in row if p > 0) for row in t.tolist()) / len(t)
    floor = loss_floor(learning)
    assert floor["loss"] == pytest.approx(entropy) and floor["total"] == floor["loss"]
    assert round(floor["loss"], 3) == 0.948
    assert (floor["entries"], floor["rows"]) == (36, 6) and floor["grad_a"] == pytest.approx(1.0)
