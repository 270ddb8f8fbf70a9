"""Everything the "Next word" templates get (decoder_context): the next token's candidates as bars, the last
token's attention, the 270 heads at once grouped by the key/value head they share, one head stepped through
on the real numbers (RMSNorm, Q and K before and after RoPE, V, scores, ÷√d_k, the causal mask, softmax,
A·V, each cell's arithmetic), and the logit lens. Every label counts from 1; every number comes from
app.maths."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.i18n import N_, angle, decimal, frequency, percent, probability, weight
from app.i18n import gettext as _
from app.lesson.decoder_texts import DECODER_BEHAVIOUR_TEXTS
from app.maths.arithmetic import CellRef, explain
from app.maths.decoder_files import DecoderFiles
from app.maths.llama import (
    DecoderRun,
    head_at,
    layer_attention_run,
    lens,
)
from app.maths.registry import DECODER
from app.maths.sampling import DRAWS, draw, sampling_distribution, temperature_softmax, top_candidates
from app.serving.real_models import language_model
from app.state.decoder_state import (
    CANDIDATES,
    GENERATE_CHOICES,
    MAX_DRAW_SEED,
    DecoderPage,
    DecoderRead,
    decoder_query,
)
from app.state.model_state import INSPECTABLE
from app.view.attention_lines import attention_lines
from app.view.heatmap import SEQUENTIAL_BUCKETS, legend
from app.view.labels import head_name, numbered
from app.view.model_maps import condensed_svg, head_svg, thumbnail
from app.view.model_view import head_panel
from app.view.pieces import labels, readable, token_text
from app.view.qk_map_view import qk_picture
from app.view.why_view import rollout_view, saliency_view, why_view
from app.view.worked import worked

DECIMALS = 3
THUMB_LEVELS = 64  # colours of a head's small map: 270 of them must fit the page's 250 KB


@dataclass(frozen=True)
class Bar:
    token: str  # readable
    id: int
    probability: float
    logit: float
    kept: bool  # inside top-k, top-p and min-p: a sampler may draw it
    href_query: str  # the page with this token appended to the text
    intact: float | None = None  # its probability with every head on, when some are switched off
    drawn: float | None = None  # with a cut-off, the probability a sampler draws it with (renormalised)

    @property
    def drawn_percent(self) -> str:
        return "" if self.drawn is None else percent(self.drawn)

    @property
    def intact_percent(self) -> str:
        return "" if self.intact is None else percent(self.intact)

    @property
    def percent(self) -> str:
        """Its probability as a percentage in the reader's language: 77.3% (77,3 % in French)."""
        return percent(self.probability)

    @property
    def width(self) -> str:
        """The bar's length out of 100 (an SVG rect's width: the page's policy allows no inline style)."""
        return f"{max(0.5, 100 * self.probability):.1f}"


def sampled(logits: np.ndarray, page: DecoderPage) -> np.ndarray:
    """What a sampler draws each token with at the page's τ and cut-offs (vocab,): the bars' arrows and the draws."""
    return sampling_distribution(logits, page.temperature, page.top_k, page.top_p, page.min_p)


def candidate_bars(model: DecoderFiles, logits: np.ndarray, page: DecoderPage,
                   intact: np.ndarray | None = None, drawn: np.ndarray | None = None) -> list[Bar]:
    """The next token's CANDIDATES most likely, under softmax(logits/τ); which a sampler with top-k and top-p
    may still draw; and, given the logits with every head on (``intact``), each one's probability there."""
    p = temperature_softmax(logits, page.temperature)
    before = None if intact is None else temperature_softmax(intact, page.temperature)
    if drawn is None:
        drawn = sampled(logits, page)
    kept = drawn > 0
    cut = page.top_k is not None or page.top_p is not None or page.min_p is not None
    bars = []
    for i in top_candidates(p, CANDIDATES):
        piece = model.vocabulary[i]
        appended = page.text + token_text(piece)
        bars.append(Bar(readable(piece), int(i), float(p[i]), float(logits[i]), bool(kept[i]),
                        decoder_query(page, text=appended, cell=None),
                        None if before is None else float(before[i]), float(drawn[i]) if cut else None))
    return bars


def draws_view(model: DecoderFiles, p: np.ndarray, page: DecoderPage) -> dict:
    """"Draw 20 times": the links that draw (again, with the next seed) or hide the draws; and, when drawn, each
    token drawn with its count beside the count a sampler expects (its probability after τ and the cut-offs × 20),
    most drawn first. ``p`` is what the sampler draws with (``sampled``). Seeded by the page's ``draw``, so the same
    link draws the same tokens."""
    view = {"n": DRAWS, "seed": page.draw, "rows": [],
            "query": decoder_query(page, draw=1 if page.draw is None else page.draw % MAX_DRAW_SEED + 1, cell=None),
            "hide_query": decoder_query(page, draw=None, cell=None)}
    if page.draw is None:
        return view
    ids, counts = np.unique(draw(p, DRAWS, page.draw), return_counts=True)
    order = sorted(range(len(ids)), key=lambda k: (-counts[k], -p[ids[k]]))
    view["rows"] = [{"token": readable(model.vocabulary[int(ids[k])]), "count": int(counts[k]),
                     "expected": float(p[ids[k]] * DRAWS), "width": f"{100 * counts[k] / DRAWS:.1f}",
                     "expected_at": f"{min(100.0, 100 * p[ids[k]]):.1f}"} for k in order]
    view["distinct"] = len(ids)
    return view


@dataclass(frozen=True)
class Thumb:
    layer: int
    head: int
    src: str
    query: str
    selected: bool
    off: bool = False

    @property
    def name(self) -> str:
        return head_name(self.layer, self.head)


def head_maps(run: DecoderRun, page: DecoderPage, layer: int, head: int) -> list[list[list[Thumb]]]:
    """Layer by layer, the query heads in groups of those that share one key/value head."""
    g = DECODER.config.group
    rows = []
    for la in range(run.layers):
        thumbs = [Thumb(la, h, thumbnail(run.attention[la, h], THUMB_LEVELS),
                        decoder_query(page, layer=la, head=h, cell=None), (la, h) == (layer, head),
                        (la, h) in page.heads_off)
                  for h in range(run.heads)]
        rows.append([thumbs[i : i + g] for i in range(0, run.heads, g)])
    return rows


def steps(model: DecoderFiles, run: DecoderRun, page: DecoderPage, layer: int, head: int) -> dict:
    """One head's step-through on the whole text: every stage's heatmap and the inspected cell's arithmetic."""
    heads = head_at(model, run, layer)
    cfg = model.config
    g = cfg.kv_head(head)
    rows, dims = labels(run.tokens), numbered("", cfg.d_k)
    sel = page.cell

    def at(matrix: str) -> tuple[int, int] | None:
        return (sel.row, sel.col) if sel is not None and sel.matrix == matrix else None

    t = len(run.tokens)
    x_svg, x_top = condensed_svg(heads.x, [readable(p) for p in run.tokens],
                                 _("RMSNorm(x), the input of layer {layer}'s heads: {shape}").format(
                                     layer=layer + 1, shape=f"{t}×{cfg.d_model}"))
    panels = {
        "q_pre": head_panel(heads.q_pre[head], N_("Q before RoPE"), "", rows, dims),
        "q": head_panel(heads.q[head], N_("Q after RoPE"), "", rows, dims),
        "k_pre": head_panel(heads.k_pre[g], N_("K before RoPE"), "", rows, dims),
        "k": head_panel(heads.k[g], N_("K after RoPE"), "", rows, dims),
        "v": head_panel(heads.v[g], "V", "", rows, dims),
        "scores": head_panel(heads.scores[head], "Scores Q·Kᵀ", "", rows, rows, ref="scores", selected=at("scores")),
        "scaled": head_panel(heads.scaled[head], "Scaled Q·Kᵀ/√d_k", "", rows, rows, ref="scaled",
                             selected=at("scaled")),
        "masked": head_panel(heads.masked[head], N_("Masked: −∞ above the diagonal"), "", rows, rows),
        "softmax": head_panel(heads.weights[head], "Attention weights A", "", rows, rows, kind="weights", ref="softmax",
                          selected=at("softmax")),
        "output": head_panel(heads.output[head], "Output A·V", "", rows, dims, ref="output", selected=at("output")),
    }
    explanation = None
    if sel is not None:
        att = layer_attention_run(model, run, layer)
        explanation = explain(att, CellRef(sel.matrix, head, sel.row, sel.col),
                              [readable(p) for p in run.tokens], numbered("x", cfg.d_model))
    sharing = [h for h in range(cfg.heads) if cfg.kv_head(h) == g]
    theta = [cfg.rope_base ** (-2 * i / cfg.d_k) for i in range(cfg.d_k // 2)]
    last = t - 1
    rope_rows = [{"pair": i + 1, "theta": frequency(theta[i]), "angle": angle(last * theta[i])}
                 for i in (0, 1, 2, cfg.d_k // 4, cfg.d_k // 2 - 1)]
    lines = attention_lines(heads.weights[head][None], [readable(p) for p in run.tokens],
                            [readable(p) for p in run.tokens], [_("head {n}").format(n=head + 1)],
                            fig_id="decoder-lines",
                            focus=last)
    return {"x_svg": x_svg, "x_top": decimal(x_top, 2), "x_legend": legend("signed", x_top, 2), "panels": panels,
            "d_k": cfg.d_k, "d_model": cfg.d_model, "sqrt_d_k": f"{np.sqrt(cfg.d_k):g}", "kv_head": g,
            "sharing": sharing, "rope_rows": rope_rows, "rope_base": f"{cfg.rope_base:,.0f}", "last": last,
            "last_token": readable(run.tokens[last]), "lines": lines, "explanation": explanation,
            "qk": qk_picture(heads.q[head], heads.k[g], heads.weights[head], [readable(p) for p in run.tokens],
                             _("Queries and keys of head {head}, layer {layer}, in one picture").format(
                                 head=head + 1, layer=layer + 1)),
            "worked": None if explanation is None else worked(explanation, DECIMALS), "inspectable": INSPECTABLE}


def last_row(run: DecoderRun, layer: int, head: int) -> list[dict]:
    """The last token's attention over every token before it (and itself), in the chosen head."""
    w = run.attention[layer, head, -1]  # (T,)
    return [{"token": readable(p), "weight": weight(float(v), 2), "bucket": bucket(float(v))}
            for p, v in zip(run.tokens, w, strict=True)]


def bucket(p: float) -> str:
    """The heatmaps' sequential colour class (s0 … s8) of a weight or probability in [0, 1]."""
    return f"s{min(SEQUENTIAL_BUCKETS - 1, max(0, int(p * SEQUENTIAL_BUCKETS)))}"


def lens_view(model: DecoderFiles, run: DecoderRun, every: bool) -> dict:
    """The logit lens: the top token after each layer at the last position, and (``every``) at every position."""
    ids, probs = lens(model, run.hidden_states[1:, -1])  # (N,)
    last = [{"layer": la + 1, "token": readable(model.vocabulary[i]), "probability": probability(p),
             "width": f"{max(0.5, 100 * p):.1f}"} for la, (i, p) in enumerate(zip(ids, probs, strict=True))]
    table = None
    if every:
        all_ids, all_probs = lens(model, run.hidden_states[1:])  # (N, T)
        table = [[{"token": readable(model.vocabulary[i]), "p": probability(p), "bucket": bucket(p)}
                  for i, p in zip(row_i, row_p, strict=True)] for row_i, row_p in zip(all_ids, all_probs, strict=True)]
    return {"last": last, "table": table}


def decoder_run(model: DecoderFiles, text: str, heads_off: frozenset[tuple[int, int]] = frozenset()) -> DecoderRun:
    """The text's run, with those heads off, from the language model's service (kept, or computed once)."""
    return language_model().run(text, heads_off)


def next_logits(model: DecoderFiles, text: str, heads_off: frozenset[tuple[int, int]] = frozenset()) -> np.ndarray:
    """The text's next-token logits, kept from its page's run, or computed."""
    return language_model().logits(text, heads_off)


def intact_logits(model: DecoderFiles, page: DecoderPage) -> np.ndarray | None:
    """With heads switched off, the logits with every head on, to compare; else None."""
    return next_logits(model, page.text) if page.heads_off else None


def switch_view(page: DecoderPage) -> dict:
    """Switch heads off: what is off, and one link per measured habit that switches off its three heads with the
    highest attention scores (or all back on), with what that did on the habit's own texts."""
    shortcuts = [{"title": e["title"], "names": ", ".join(h["name"] for h in e["heads"]), "ratio": e["together_ratio"],
                  "query": decoder_query(page, off=frozenset((h["layer"], h["head"]) for h in e["heads"]),
                                         off_layers=frozenset(), cell=None)}
                 for e in decoder_catalogue_view()]
    return {"count": len(page.heads_off), "shortcuts": shortcuts,
            "on_query": decoder_query(page, off=frozenset(), off_layers=frozenset(), cell=None),
            "names": ", ".join(head_name(la, h) for la, h in sorted(page.heads_off))}


def default_head(page: DecoderPage) -> tuple[int, int]:
    """The head asked for, else the one the catalogue measures looking most at the previous token: a head whose
    pattern a student can name at once."""
    if page.layer is not None and page.head is not None:
        return page.layer, page.head
    best = next(e for e in language_model().catalogue() if e.behaviour == "previous").best
    return best.layer, best.head


# The parts of the page a request may ask for (app.web.decoder_pages): the whole page; the next word and the text
# written on ("next"); everything below it ("rest"); one head's step-through and what names its head ("head").
PAGE_PARTS = ("page", "next", "rest", "head")


def decoder_context(model: DecoderFiles, read: DecoderRead, part: str = "page") -> dict:
    """The context of the whole page, or of one of its PAGE_PARTS, for a state read by
    app.state.decoder_state.read_decoder_page: a part computes only what it shows."""
    page = read.page
    run = decoder_run(model, page.text, page.heads_off)
    layer, head = default_head(page)
    tokens = [readable(p) for p in run.tokens]
    ctx = {"page": page, "run": run, "layer": layer, "head": head, "head_name": head_name(layer, head),
           "query_string": decoder_query(page), "spec": DECODER.config, "rows": labels(run.tokens), "readable": tokens}
    if part in ("page", "next", "head"):
        intact = intact_logits(model, page)
        drawn = sampled(run.logits, page)  # (vocab,)
        ctx.update(bars=candidate_bars(model, run.logits, page, intact, drawn), draws=draws_view(model, drawn, page),
                   change=off_change(model, run.logits, intact, page), generate_choices=GENERATE_CHOICES,
                   last_row=last_row(run, layer, head), last_token=tokens[-1])
    if part in ("page", "rest", "head"):
        title = _("Layer {layer}, head {head}: attention weights, queries down, keys across").format(
            layer=layer + 1, head=head + 1)
        ctx.update(enlarged=head_svg(run.attention[layer, head], tokens, title), switch=switch_view(page),
                   steps=steps(model, run, page, layer, head))
    if part in ("page", "rest"):
        ctx.update(maps=head_maps(run, page, layer, head), lens=lens_view(model, run, page.lens_all),
                   lens_all_query=decoder_query(page, lens_all=not page.lens_all), why=why_view(model, run, page),
                   saliency=saliency_view(model, run, page),
                   rollout=rollout_view(run),
                   catalogue=[dict(e, heads=[dict(h, query=decoder_query(page, layer=h["layer"], head=h["head"],
                                                                         cell=None)) for h in e["heads"]])
                              for e in decoder_catalogue_view()])
    return ctx


def off_change(model: DecoderFiles, logits: np.ndarray, intact: np.ndarray | None, page: DecoderPage) -> dict | None:
    """With heads switched off, what changed for the next token: which heads are off, the token that came first
    with every head on and its probability then and now, the one that comes first now, and whether the first
    became more likely without the heads (the page says so: self-repair, or heads that worked against it)."""
    if intact is None:
        return None
    now = temperature_softmax(logits, page.temperature)  # (vocab,)
    before = temperature_softmax(intact, page.temperature)  # (vocab,)
    first_before, first_now = int(np.argmax(before)), int(np.argmax(now))
    return {"names": ", ".join(head_name(la, h) for la, h in sorted(page.heads_off)),
            "before": readable(model.vocabulary[first_before]), "after": readable(model.vocabulary[first_now]),
            "same": first_before == first_now, "was": float(before[first_before]),
            "then": float(now[first_before]), "now": float(now[first_now]),
            "more": float(now[first_before]) > float(before[first_before])}


def candidates_context(model: DecoderFiles, read: DecoderRead) -> dict:
    """Only the candidates, for the temperature slider and the cut-offs: from the text's kept logits."""
    page = read.page
    logits = next_logits(model, page.text, page.heads_off)
    drawn = sampled(logits, page)  # (vocab,)
    return {"page": page, "query_string": decoder_query(page),
            "bars": candidate_bars(model, logits, page, intact_logits(model, page), drawn),
            "draws": draws_view(model, drawn, page)}


def decoder_catalogue_view() -> tuple[dict, ...]:
    """What heads do, measured once per process by the language model's service over the lesson's fixed texts:
    per behaviour its words, its three strongest heads by where they look, and what switching them off does; the
    words in the request's language."""
    service = language_model()
    return tuple(dict(e, title=_(e["title"]), explanation=_(e["explanation"]),
                      heads=[dict(h, name=head_name(h["layer"], h["head"])) for h in e["heads"]])
                 for e in _catalogue_entries(service.catalogue(), service.effects()))


# |ΔF| below this (in nats, a 1 % change of the probability) is "hardly changes": the texts' positions average
# out smaller differences, which float32 rounding alone can make.
EFFECT_NOISE = 0.01


def effect_sign(change: float) -> str:
    """What a change of the right next token's log-probability says, as the page words it: "hurts" (the model
    does worse without the heads), "helps" (better without them) or "none"; read from the change as the page
    prints it (two decimals), so that the words never disagree with the number beside them."""
    change = round(change, 2)
    if change <= -EFFECT_NOISE:
        return "hurts"
    return "helps" if change >= EFFECT_NOISE else "none"


def signed(change: float) -> str:
    """A change with its sign, two decimals, the minus sign typeset: +0.01, −1.63 (the view's English number)."""
    return f"{change:+.2f}".replace("-", "−")


def _catalogue_entries(measured: tuple, effects: tuple) -> tuple[dict, ...]:
    """The measured catalogue as the page's entries, in English (the view translates): a few microseconds."""
    entries = []
    for entry, effect in zip(measured, effects, strict=True):
        words = DECODER_BEHAVIOUR_TEXTS[entry.behaviour]
        entries.append({"key": entry.behaviour, "title": words.title, "explanation": words.explanation,
                        "baseline": f"{entry.baseline:.2f}", "threshold": f"{entry.threshold:.2f}",
                        "showing": entry.showing, "positions": effect.positions,
                        "together": signed(effect.together), "together_sign": effect_sign(effect.together),
                        "together_ratio": float(np.exp(effect.together)),
                        "heads": [{"name": head_name(h.layer, h.head), "layer": h.layer, "head": h.head,
                                   "score": f"{h.score:.2f}", "change": signed(e.change),
                                   "sign": effect_sign(e.change)}
                                  for h, e in zip(entry.heads, effect.heads, strict=True)]})
    return tuple(entries)
