"""View-models for the scaling lab and the cost panel: every number formatted, every chart drawn.

templates/partials/lab.html and cost.html read the dicts returned here and compute nothing.
"""

from __future__ import annotations

import math

from app.i18n import N_, count, decimal, local_number, ngettext, percent
from app.i18n import gettext as _
from app.maths.cost import Cost, cost_growth, crossover
from app.maths.lab import (
    DEFAULT_D_KS,
    SEED_003_SCALED,
    SEED_003_UNSCALED,
    ScoreStats,
    SoftmaxExample,
    scaling_lab,
    softmax_example,
)
from app.view.charts.lab import cost_growth_svg, score_spread_svg
from app.view.typeset import unicode_tex

LAB_SAMPLES = 4000
LAB_N_KEYS = 8
SCORE_LABELS = {"dot": N_("dot-product"), "general": N_("general (Luong)"), "additive": N_("additive (Bahdanau)")}
ATTENTION_LABELS = {"softmax": N_("softmax"), "linear": N_("linear (φ = elu + 1)")}


def seed_number(x: float) -> str:
    """Seed 003's precision: one decimal from 100 up (2,981.0, 403.4, 3,384.4), else three (0.018, 2.718), in the
    reader's language (its decimal sign, its groups of thousands)."""
    return decimal(x, 1 if abs(x) >= 100 else 3)


def fixed(x: float, decimals: int = 3) -> str:
    """Fixed point in the reader's language, with a true minus sign, and −0.000 shown as 0.000."""
    return decimal(x, decimals)


def _score_cells(stats: ScoreStats) -> dict[str, str]:
    return {"mean": fixed(stats.mean, 3), "variance": fixed(stats.variance, 2), "std": fixed(stats.std, 2)}


def _softmax_cells(stats: ScoreStats) -> dict[str, str]:
    sm = stats.softmax
    return {
        "max_weight": fixed(sm.max_weight, 3),
        "entropy": fixed(sm.entropy, 3),
        "effective_keys": fixed(sm.effective_keys, 2),
        "jacobian_norm": fixed(sm.jacobian_norm, 3),
    }


def _example(key: str, title: str, note: str, ex: SoftmaxExample) -> dict:
    return {
        "key": key,
        "title": title,
        "note": note,
        "rows": [
            {"j": j + 1, "z": local_number(f"{z:g}"), "exp": seed_number(e), "weight": fixed(w, 3)}
            for j, (z, e, w) in enumerate(zip(ex.z, ex.exps, ex.weights, strict=True))
        ],
        "total": seed_number(ex.total),
        "weights": "[" + ", ".join(fixed(w, 3) for w in ex.weights) + "]",
        "jacobian": [[fixed(v, 3) for v in row] for row in ex.jacobian],
        "jacobian_norm": fixed(ex.jacobian_norm, 3),
    }


def lab_context(*, seed: int, temperature: float, scale: bool, d_k: int) -> dict:
    """Everything templates/partials/lab.html shows, for the run's seed, τ, ÷√d_k switch and d_k.

    The current d_k joins seed 003's 4, 16, 64 (and 256) so that its row is marked in the chart and tables.
    """
    d_ks = tuple(sorted({*DEFAULT_D_KS, d_k}))
    lab = scaling_lab(seed=seed, samples=LAB_SAMPLES, d_ks=d_ks, n_keys=LAB_N_KEYS, temperature=temperature)
    unscaled_ex = softmax_example(SEED_003_UNSCALED)
    scaled_ex = softmax_example(SEED_003_SCALED)
    return {
        "open": False,
        "seed": seed,
        "samples": count(lab.samples),
        "n_keys": lab.n_keys,
        "temperature": f"{temperature:g}",
        "temperature_is_one": temperature == 1,
        "sharper": temperature < 1,
        "scale": scale,
        "d_k": d_k,
        "run_column": "scaled" if scale else "unscaled",
        "spread_svg": score_spread_svg(lab, current_d_k=d_k),
        "spread_rows": [
            {
                "d_k": r.d_k,
                "current": r.d_k == d_k,
                "expected_std": fixed(math.sqrt(r.d_k), 2),
                "unscaled": _score_cells(r.unscaled),
                "scaled": _score_cells(r.scaled),
            }
            for r in lab.rows
        ],
        "softmax_rows": [
            {
                "d_k": r.d_k,
                "current": r.d_k == d_k,
                "unscaled": _softmax_cells(r.unscaled),
                "scaled": _softmax_cells(r.scaled),
            }
            for r in lab.rows
        ],
        "uniform": {
            "max_weight": fixed(1 / lab.n_keys, 3),
            "entropy": fixed(math.log(lab.n_keys), 3),
            "effective_keys": fixed(lab.n_keys, 2),
        },
        "examples": [
            _example(
                "unscaled", _("Unscaled: softmax([8, −4, 6])"),
                _(r"Simulates $d_k = 64$ (std $\approx 8$): almost all weight collapses to one position."), unscaled_ex,
            ),
            _example(
                "scaled", _("Scaled: softmax([1.0, −0.5, 0.75])"),
                _(r"Std $\approx 1$: weight spreads across all positions."), scaled_ex,
            ),
        ],
        "jacobian_ratio": decimal(scaled_ex.jacobian_norm / unscaled_ex.jacobian_norm, 1),
    }


def _growth_ts(current_t: int, crossover_t: int) -> tuple[int, ...]:
    """Powers of two from 1 to 8× past the current T and the crossover, plus those two T."""
    top = max(current_t, crossover_t, 64) * 8
    return tuple(sorted({*(2**i for i in range(math.ceil(math.log2(top)) + 1)), current_t, crossover_t}))


def _notes(c: Cost) -> list[str]:
    notes = []
    if c.t != c.s:
        notes.append(
            _("Cross-attention: {t} queries against {s} keys. The chart below is self-attention ($S = T$).").format(
                t=c.t, s=c.s)
        )
    if c.attention == "linear" and c.score != "dot":
        notes.append(_(r"Linear attention replaces the score function by $\varphi(q)^{{\top}} \varphi(k)$: "
                       "the {score} score is not counted.").format(
                         score={"general": _("general"), "additive": _("additive")}.get(c.score, c.score)))
    if c.attention == "linear":
        notes.append(_(r"Linear attention never builds the $T \times S$ weights, so its stages grow with $T$ and $S$, "
                       r"not $T S$."))
    if c.score == "additive" and c.attention == "softmax":
        notes.append(_(r"Bahdanau's additive score is never divided by $\sqrt{d_k}$."))
    return notes


# Rows whose name is only symbols get a word in front: a table's row header needs text as well as maths.
_WORDED = {"A·V": N_("Weighted sum A·V"), "Concat·W_O": N_("Output projection Concat·W_O"),
           "φ(K)ᵀ·V": N_("Summary φ(K)ᵀ·V"), "W_Q": N_("Query weights W_Q"), "W_K": N_("Key weights W_K"),
           "W_V": N_("Value weights W_V"), "W_O": N_("Output weights W_O")}


def worded(name: str) -> str:
    """A cost row's name as the table shows it, in the request's language."""
    return _(_WORDED.get(name, name))


def cost_context(c: Cost, *, scale: bool = True) -> dict:
    """Everything templates/partials/cost.html shows for the cost ``c`` (app.maths.cost.attention_cost):
    stage and parameter tables, the growth chart and its table.

    ``scale`` (the run's ÷√d_k switch, which ``c`` counted) only changes the score's label.
    """
    t, s, score, attention, blocks = c.t, c.s, c.score, c.attention, c.blocks
    sizes = {"d_model": c.d_model, "num_heads": c.num_heads, "d_k": c.d_k, "d_v": c.d_v, "d_ff": c.d_ff,
             "blocks": blocks}
    cross = crossover(score=score, d_a=c.d_a, **sizes)
    growth = cost_growth(score=score, d_a=c.d_a, ts=_growth_ts(t, cross), **sizes)
    quadratic_share = c.quadratic_macs / c.total_macs if c.total_macs else 0.0
    size_text = [("T", t), ("S", s), ("d_model", c.d_model), ("h", c.num_heads), ("d_k", c.d_k), ("d_v", c.d_v)]
    if c.d_a is not None:
        size_text.append(("d_a", c.d_a))
    if blocks:
        size_text += [("d_ff", c.d_ff), ("blocks", blocks)]
    return {
        "open": False,
        "t": t,
        "s": s,
        "self_attention": t == s,
        "score": score,
        "score_label": _(SCORE_LABELS[score]) + (" ÷ √d_k" if scale and score != "additive" else ""),
        "attention": attention,
        "attention_label": _(ATTENTION_LABELS[attention]),
        "sizes": ", ".join(ngettext("{n} block", "{n} blocks", v).format(n=v) if k == "blocks"
                           else f"${unicode_tex(k)} = {v}$" for k, v in size_text),
        "layers": c.layers,
        "blocks": blocks,
        "stage_rows": [
            {
                "name": worded(st.name),
                "macs_formula": st.macs_formula or "—",
                "macs": count(st.macs),
                "elementwise_formula": st.elementwise_formula or "—",
                "elementwise": count(st.elementwise),
                "quadratic": st.quadratic,
                "grows": st.grows,
            }
            for st in c.stages
        ],
        "layer_macs": count(c.macs_per_layer),
        "layer_elementwise": count(c.elementwise_per_layer),
        "total_macs": count(c.total_macs),
        "total_elementwise": count(c.total_elementwise),
        "quadratic_macs": count(c.quadratic_macs),
        "linear_macs": count(c.linear_macs),
        "quadratic_share": percent(quadratic_share, 0),
        "param_rows": [
            {"name": worded(p.name), "shape": p.shape, "formula": p.formula, "count": count(p.count)} for p in c.params
        ],
        "layer_params": count(c.params_per_layer),
        "total_params": count(c.total_params),
        "crossover": count(cross),
        "crossover_past": t >= cross,
        "growth_svg": cost_growth_svg(growth, current_t=t, current_linear=attention == "linear"),
        "growth_rows": [
            {
                "t": count(tt),
                "current": tt == t,
                "crossover": tt == cross,
                "row_class": " ".join(name for name, on in (("current", tt == t), ("crossover", tt == cross)) if on),
                "quadratic": count(q),
                "linear": count(li),
                "total": count(tot),
                "linear_attention": count(la),
                "dominant": "T²" if q >= li else "T",
            }
            for tt, q, li, tot, la in zip(
                growth.ts, growth.quadratic, growth.linear, growth.total, growth.linear_attention, strict=True
            )
        ],
        "notes": _notes(c),
    }
