"""What is measured: the sizes, and the requests a student's edit makes for each of them.

An edit is built the way the page builds it: the page's ``<form id="state">`` is read back as a
browser would post it, one X cell is changed, and the whole form goes to POST /stages with
``HX-Request: true`` and ``Attention-Edit: value``, each grid joined into one field as the page's
script sends it. The JSON
API gets the same computation: the same tokens, X, sizes and seed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx
import numpy as np

from app.lesson.presets import PRESETS
from app.state.reading import read_form
from tests.conftest import form_fields, join_grids

BROWSER = {"Accept-Encoding": "gzip, deflate, br, zstd"}  # what Chromium sends
HTMX = {**BROWSER, "HX-Request": "true"}
VALUE_EDIT = {"Attention-Edit": "value"}  # what the page's script adds when only numbers in a grid changed
EDIT_STAGE = "softmax"  # the stage an edit's fragment shows: the T×T weights, the centre of the lesson
ATTENTION_STAGES = ("x", "qkv", "scores", "scaled", "mask", "softmax", "output", "multihead")
EDIT_VARIANTS = 4  # prebuilt edits cycled through, so consecutive requests change a value


@dataclass(frozen=True)
class Case:
    """One size to measure: T tokens of d_model dimensions and h heads (d_k = d_v = d_model // h),
    weights drawn from seed 0; or a preset's own page."""

    tokens: int
    d_model: int
    heads: int
    preset: str = ""

    @property
    def label(self) -> str:
        if self.preset:
            return f"{self.preset} preset (T={self.tokens} d={self.d_model} h={self.heads})"
        return f"T={self.tokens} d={self.d_model} h={self.heads}"

    def seed_form(self) -> dict[str, str]:
        """The smallest form POST / reads into this size: shape, tokens and X; the weights come
        from seed 0 and the page returns the whole form as a browser would have it."""
        d_k = max(1, self.d_model // self.heads)
        x = np.round(np.random.default_rng(0).uniform(-1.0, 1.0, (self.tokens, self.d_model)), 2)  # (T, d_model)
        form = {"shape": f"{self.d_model},{self.heads},{d_k},{d_k},0,0", "scale": "on", "decimals": "3"}
        form.update({f"token-{i}": f"w{i}" for i in range(self.tokens)})
        form.update({f"x-{i}-{j}": f"{v:g}" for i, row in enumerate(x.tolist()) for j, v in enumerate(row)})
        return form


DEFAULT_CASE = Case(5, 3, 1, preset="default")
GRID = tuple(Case(t, d, h) for t in (5, 16, 64) for d in (3, 16, 64) for h in (1, 8))
SCALING_TOKENS = (4, 8, 16, 24, 32, 48, 64)
SCALING_D_MODEL, SCALING_HEADS = 16, 1


async def page_state(client: httpx.AsyncClient, case: Case) -> dict[str, str]:
    """The page's state form for a case, as a browser would post it back."""
    if case.preset:
        r = await client.get("/", params={"preset": case.preset})
    else:
        r = await client.post("/", data=case.seed_form())
    if r.status_code != 200:
        raise RuntimeError(f"{case.label}: the page answered {r.status_code}")
    fields = form_fields(r.text)
    if "shape" not in fields:
        raise RuntimeError(f"{case.label}: no state form in the page")
    return fields


def edited(fields: dict[str, str], k: int, *, stage: str = EDIT_STAGE, show_all: bool = False) -> dict[str, str]:
    """The form after the k-th edit: one X cell set to a new value, the stage in view chosen."""
    out = dict(fields)
    t = sum(1 for name in fields if name.startswith("token-"))
    d = int(fields["shape"].split(",")[0])
    out[f"x-{k % t}-{(k // t) % d}"] = f"{0.25 * (k % 7) - 0.75:g}"
    out["stage"] = stage
    if show_all:
        out["show_all"] = "on"
    else:
        out.pop("show_all", None)
    return out


def api_body(fields: dict[str, str]) -> dict:
    """The JSON API request for the same computation as the form: tokens, X, sizes, seed and
    options, and the weights only when a preset designed them (the rest are drawn from the seed)."""
    sc, _ = read_form(fields)
    body: dict = {
        "tokens": list(sc.tokens), "x": sc.x.tolist(), "num_heads": sc.num_heads, "d_k": sc.d_k,
        "d_v": sc.d_v, "seed": sc.seed, "scale": sc.scale, "temperature": sc.temperature,
        "mask": sc.mask_mode, "score": sc.score, "attention": sc.attention,
    }
    preset = PRESETS.get(sc.preset)
    if sc.edits or (preset is not None and preset.weights):
        w = sc.weights()
        body["weights"] = {name: w[name].tolist() for name in ("w_q", "w_k", "w_v", "w_o")}
    return body


def api_request(client: httpx.AsyncClient, fields: dict[str, str]) -> httpx.Request:
    content = json.dumps(api_body(fields), separators=(",", ":")).encode()
    return client.build_request("POST", "/api/attention", content=content,
                                headers={**BROWSER, "Content-Type": "application/json"})


def fragment_request(client: httpx.AsyncClient, fields: dict[str, str], *, value_edit: bool = True) -> httpx.Request:
    """The htmx edit of ``fields`` (one field per cell) as the page sends it: grids joined, and marked as a value
    edit (static/app.js), so the stage body comes back; unmarked, the whole stages section, as any other control."""
    headers = {**HTMX, **VALUE_EDIT} if value_edit else HTMX
    return client.build_request("POST", "/stages", data=join_grids(fields), headers=headers)


def health_request(client: httpx.AsyncClient) -> httpx.Request:
    return client.build_request("GET", "/healthz", headers=BROWSER)


@dataclass(frozen=True)
class ApiCase:
    """One request to POST /api/attention at a size the page's edits do not reach: T tokens of
    d_model dimensions, h heads, d_k = d_v (default d_model // h), transformer blocks (d_ff = 4·d_model)."""

    tokens: int
    d_model: int
    heads: int
    blocks: int = 0
    d_head: int | None = None
    attention: str = "softmax"

    @property
    def label(self) -> str:
        extra = f", d_k=d_v={self.d_head}" if self.d_head else ""
        extra += f", {self.attention} attention" if self.attention != "softmax" else ""
        return f"T={self.tokens} d={self.d_model} h={self.heads}, {self.blocks} blocks{extra}"

    def body(self) -> bytes:
        x = np.round(np.random.default_rng(0).uniform(-1.0, 1.0, (self.tokens, self.d_model)), 2)  # (T, d_model)
        body = {"tokens": [f"w{i}" for i in range(self.tokens)], "x": x.tolist(), "num_heads": self.heads,
                "blocks": self.blocks, "attention": self.attention, "seed": 0}
        if self.d_head:
            body |= {"d_k": self.d_head, "d_v": self.d_head}
        return json.dumps(body, separators=(",", ":")).encode()

    def request(self, client: httpx.AsyncClient) -> httpx.Request:
        return client.build_request("POST", "/api/attention", content=self.body(),
                                    headers={**BROWSER, "Content-Type": "application/json"})


# The "largest valid request": every size at its bound but d_k = d_model // h. Giving d_k = d_v = 64
# as well (LARGEST_RESPONSE) multiplies the per-head matrices by 8: the largest response the bounds allow.
LARGEST_REQUEST = ApiCase(64, 64, 8, blocks=4)
LARGEST_RESPONSE = ApiCase(64, 64, 8, blocks=4, d_head=64, attention="linear")


async def api_requests(client: httpx.AsyncClient, cases: tuple[ApiCase, ...]) -> dict[str, list[httpx.Request]]:
    """/healthz, the default preset's edit through the API, and each case's request."""
    fields = await page_state(client, DEFAULT_CASE)
    requests = {"healthz": [health_request(client)], "default": [api_request(client, edited(fields, 1))]}
    requests |= {case.label: [case.request(client)] for case in cases}
    return requests


async def edit_requests(client: httpx.AsyncClient, case: Case) -> dict[str, list[httpx.Request]]:
    """Prebuilt requests per endpoint, so encoding them is not timed: /healthz, the JSON API, the
    edit's fragment (one stage), the same edit with every stage shown, and the same edit unmarked (the
    whole stages section)."""
    fields = await page_state(client, case)
    forms = [edited(fields, k) for k in range(EDIT_VARIANTS)]
    return {
        "healthz": [health_request(client)],
        "api": [api_request(client, f) for f in forms],
        "stage": [fragment_request(client, f) for f in forms],
        "all": [fragment_request(client, edited(fields, k, show_all=True)) for k in range(EDIT_VARIANTS)],
        "whole": [fragment_request(client, f, value_edit=False) for f in forms],
    }


async def stage_requests(client: httpx.AsyncClient, case: Case) -> dict[str, list[httpx.Request]]:
    """An edit's fragment for each attention stage in turn (and /healthz)."""
    fields = await page_state(client, case)
    requests = {"healthz": [health_request(client)]}
    for stage in ATTENTION_STAGES:
        requests[stage] = [fragment_request(client, edited(fields, k, stage=stage)) for k in range(EDIT_VARIANTS)]
    return requests
