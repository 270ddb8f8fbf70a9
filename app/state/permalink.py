"""Permalinks: the page's whole state as a query string that GET / reads back with read_form.

The query holds what the form would post, written from the state rather than from a posted form, so
it describes the page after an action (a token added, a stage stepped to). Defaults are left out to
keep links short. Pure Python: the web layer decides when to put it in the address bar.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote_plus

from app.state.scenario import Scenario, View, encode_edits, format_input

# Browsers and proxies accept longer URLs, but 8 KB is what every one of them accepts. A longer
# state is offered as a file ("Download scenario") instead.
MAX_URL_CHARS = 8000


def _matrix(prefix: str, m) -> list[tuple[str, str]]:
    return [(f"{prefix}-{i}-{j}", format_input(v)) for i, row in enumerate(m.tolist()) for j, v in enumerate(row)]


def state_query(sc: Scenario, view: View) -> list[tuple[str, str]]:
    """The (field, value) pairs that read_form turns back into exactly (sc, view)."""
    q: list[tuple[str, str]] = []
    if sc.preset:
        q.append(("preset", sc.preset))
    ffn = sc.ffn_size if sc.blocks else 0
    q.append(("shape", f"{sc.d_model},{sc.num_heads},{sc.d_k},{sc.d_v},{view.head},{ffn}"))
    q += [(f"token-{i}", t) for i, t in enumerate(sc.tokens)]
    q += _matrix("x", sc.x)
    if sc.seed:
        q.append(("seed", str(sc.seed)))
    if sc.scale:
        q.append(("scale", "on"))
    if sc.edits:
        q.append(("edits", encode_edits(sc.edits)))
    if sc.temperature != 1.0:
        q.append(("temperature", format_input(sc.temperature)))
    if sc.mask_mode != "none":
        q.append(("mask", sc.mask_mode))
    if sc.mask_mode in ("local", "strided"):
        q.append(("window", str(sc.window)))
    if sc.blocked:
        q.append(("blocked", " ".join(f"{i}.{j}" for i, j in sorted(sc.blocked))))
    q += [(f"pad-{j}", "on") for j in sorted(sc.padding)]
    if sc.positional_encoding != "none":
        q.append(("positional_encoding", sc.positional_encoding))
    if sc.position_table is not None:
        q += _matrix("pos", sc.position_table)
    if sc.cross and sc.context_x is not None:
        q.append(("cross", "on"))
        q += [(f"ctoken-{i}", t) for i, t in enumerate(sc.context_tokens)]
        q += _matrix("c", sc.context_x)
    for name, value, default in (("score", sc.score, "dot"), ("attention", sc.attention, "softmax")):
        if value != default:
            q.append((name, value))
    if sc.blocks:
        q += [("blocks", str(sc.blocks)), ("d_ff", str(sc.ffn_size)), ("activation", sc.activation),
              ("norm", sc.norm)]
    # The view: which stage, head and block, and how it is shown.
    q.append(("stage", view.stage))
    if view.head:
        q.append(("head", str(view.head)))
    if view.block:
        q.append(("block", str(view.block)))
    if view.show_all:
        q.append(("show_all", "on"))
    q.append(("decimals", str(view.decimals)))
    if view.inspect:
        q.append(("inspect", view.inspect))
    if view.panels:
        q.append(("panels", " ".join(sorted(view.panels))))
    if view.present:
        q.append(("present", "on"))
    if view.quiz:
        q.append(("quiz", "on"))
        if view.revealed:
            q.append(("revealed", " ".join(sorted(view.revealed))))
    if view.pin:
        q.append(("pin", view.pin))
    if view.learning is not None:
        q += view.learning.query()
    return q


_PLAIN = re.compile(r"[A-Za-z0-9_.~-]*")  # what quote_plus leaves as it is


def query_string(pairs: list[tuple[str, str]]) -> str:
    """urlencode(pairs), quoting only what needs it: most of a state is short numbers, and this
    runs on every edit."""
    return "&".join(f"{k if _PLAIN.fullmatch(k) else quote_plus(k)}={v if _PLAIN.fullmatch(v) else quote_plus(v)}"
                    for k, v in pairs)


def permalink(path: str, sc: Scenario, view: View) -> str:
    """``path`` (the page's URL path, which may sit under a proxy's prefix) with the state's query."""
    return f"{path}?{query_string(state_query(sc, view))}"


def stage_permalinks(path: str, sc: Scenario, view: View, keys: Iterable[str]) -> dict[str, str]:
    """The permalink of the state at each of these stages (the map's links, and the page's own at
    view.stage). The query is written once: only its stage field differs from link to link."""
    pairs = state_query(sc, view)
    at = next(i for i, (name, _) in enumerate(pairs) if name == "stage")
    head, tail = query_string(pairs[:at]), query_string(pairs[at + 1:])
    return {key: f"{path}?{head}&{query_string([('stage', key)])}&{tail}"
            for key in dict.fromkeys([*keys, view.stage])}


def fits_in_url(url: str) -> bool:
    return len(url) <= MAX_URL_CHARS
