"""Server-side cost per request, measured in-process through httpx's ASGI transport.

Every endpoint of a case is timed in the same loop as /healthz, interleaved (healthz, A, healthz,
B, …, with the order rotated each round), so a slow moment of the machine lands on both and the
ratio to /healthz stays meaningful. Requests accept what Chromium accepts (gzip, deflate, br, zstd);
responses are read raw (still compressed, as on the wire) and not decoded inside the timed part.
"""

from __future__ import annotations

import gzip
import statistics
import time
import zlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser

import brotli
import httpx
import numpy as np
import zstandard

from bench.cases import BROWSER


@dataclass(frozen=True)
class Budget:
    """How long to measure one case: rounds until ``seconds`` have passed, within the bounds."""

    seconds: float
    min_rounds: int
    max_rounds: int


FULL = Budget(seconds=1.0, min_rounds=3, max_rounds=100)
QUICK = Budget(seconds=0.05, min_rounds=2, max_rounds=5)


@dataclass(frozen=True)
class Timing:
    """One endpoint of one case: the median time, how many samples, and the response's size."""

    samples: int
    median_ms: float
    p90_ms: float
    wire_bytes: int  # as sent: compressed when the response was
    body_bytes: int  # decoded
    encoding: str  # the Content-Encoding ("" when sent as it is)
    request_bytes: int

    @property
    def compressed(self) -> bool:
        return bool(self.encoding)

    def ratio(self, floor: Timing) -> float:
        """This request's cost in /healthz requests: 2.0 means half of /healthz's requests per second."""
        return self.median_ms / floor.median_ms


@dataclass
class _Samples:
    durations: list[float]
    last: bytes = b""
    encoding: str = ""


async def send_raw(client: httpx.AsyncClient, request: httpx.Request) -> tuple[float, httpx.Response, bytes]:
    """(seconds, response, raw body): the time from sending to the last byte, body still encoded."""
    start = time.perf_counter()
    response = await client.send(request, stream=True)
    raw = b"".join([chunk async for chunk in response.aiter_raw()])
    elapsed = time.perf_counter() - start
    await response.aclose()
    return elapsed, response, raw


def decoded(raw: bytes, encoding: str) -> bytes:
    """A body as sent with ``encoding`` (a Content-Encoding), decoded."""
    if encoding == "gzip":
        return gzip.decompress(raw)
    if encoding == "deflate":
        return zlib.decompress(raw)
    if encoding == "br":
        return brotli.decompress(raw)
    if encoding == "zstd":
        return zstandard.ZstdDecompressor().decompressobj().decompress(raw)  # the frame may not state its size
    if encoding:
        raise ValueError(f"unknown Content-Encoding {encoding!r}")
    return raw


async def measure(client: httpx.AsyncClient, requests: dict[str, list[httpx.Request]],
                  budget: Budget) -> dict[str, Timing]:
    """Time every endpoint in ``requests`` (which must hold "healthz"), interleaved with /healthz."""
    names = [name for name in requests if name != "healthz"]
    samples = {name: _Samples([]) for name in requests}

    async def once(name: str, round_no: int) -> None:
        variants = requests[name]
        elapsed, response, raw = await send_raw(client, variants[round_no % len(variants)])
        if response.status_code != 200:
            raise RuntimeError(f"{response.request.method} {response.request.url.path} answered "
                               f"{response.status_code}: {raw[:200]!r}")
        s = samples[name]
        s.durations.append(elapsed)
        s.last, s.encoding = raw, response.headers.get("content-encoding", "")

    for name in requests:  # warm-up: first-call costs (imports, template compilation) are not the edit's
        await once(name, 0)
        samples[name].durations.clear()
    start = time.perf_counter()
    rounds = 0
    while rounds < budget.max_rounds and (rounds < budget.min_rounds or time.perf_counter() - start < budget.seconds):
        shift = rounds % max(1, len(names))
        for name in names[shift:] + names[:shift]:
            await once("healthz", rounds)
            await once(name, rounds)
        if not names:
            await once("healthz", rounds)
        rounds += 1
    return {name: _timing(s, requests[name][0]) for name, s in samples.items()}


def _timing(s: _Samples, request: httpx.Request) -> Timing:
    ms = sorted(d * 1000 for d in s.durations)
    return Timing(
        samples=len(ms), median_ms=statistics.median(ms), p90_ms=ms[min(len(ms) - 1, int(0.9 * len(ms)))],
        wire_bytes=len(s.last), body_bytes=len(decoded(s.last, s.encoding)), encoding=s.encoding,
        request_bytes=len(request.content),
    )


# --- the first page --------------------------------------------------------------------------------


class _Assets(HTMLParser):
    """The stylesheets, scripts and icon a browser fetches for the page."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "script" and a.get("src"):
            self.urls.append(a["src"] or "")
        elif tag == "link" and a.get("href") and (a.get("rel") or "") in ("stylesheet", "icon"):
            self.urls.append(a["href"] or "")


@dataclass(frozen=True)
class Resource:
    url: str
    body_bytes: int
    wire_bytes: int
    encoding: str

    @property
    def compressed(self) -> bool:
        return bool(self.encoding)


async def first_page(client: httpx.AsyncClient, path: str = "/") -> list[Resource]:
    """The page and every asset it loads, each fetched as Chromium fetches it (gzip, deflate, br, zstd)."""

    async def fetch(url: str) -> tuple[Resource, bytes]:
        request = client.build_request("GET", url, headers=BROWSER)
        _, response, raw = await send_raw(client, request)
        if response.status_code != 200:
            raise RuntimeError(f"GET {url} answered {response.status_code}")
        encoding = response.headers.get("content-encoding", "")
        body = decoded(raw, encoding)
        return Resource(url, len(body), len(raw), encoding), body

    page, html = await fetch(path)
    parser = _Assets()
    parser.feed(html.decode())
    return [page] + [(await fetch(url))[0] for url in parser.urls]


# --- fitting the growth with T ---------------------------------------------------------------------


def fit_quadratic(ts: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float]:
    """Least-squares (a, b, c) ≥ 0 of y ≈ a + b·T + c·T².

    A cost has no negative part, so the fit is constrained: with three terms the best non-negative
    fit is the best unconstrained fit over some subset of them, and every subset is tried."""
    t = np.asarray(ts, dtype=float)
    y = np.asarray(ys, dtype=float)
    design = np.stack([np.ones_like(t), t, t * t], axis=1)  # (n, 3)
    best, best_err = np.zeros(3), float(np.sum(y * y))
    for cols in ([0, 1, 2], [0, 1], [0, 2], [1, 2], [0], [1], [2]):
        coef, *_ = np.linalg.lstsq(design[:, cols], y, rcond=None)
        if np.all(coef >= 0):
            err = float(np.sum((design[:, cols] @ coef - y) ** 2))
            if err < best_err:
                best, best_err = np.zeros(3), err
                best[cols] = coef
    return float(best[0]), float(best[1]), float(best[2])


def quadratic_takes_over(a: float, b: float, c: float) -> float | None:
    """The T from which the T² term outweighs the rest (c·T² = a + b·T), or None if it never does."""
    if c <= 0:
        return None
    disc = b * b + 4 * c * a
    if disc < 0:
        return None
    root = (b + disc**0.5) / (2 * c)
    return root if root > 0 else None


async def timed(label: str, step: Callable[[], Awaitable[dict[str, Timing]]],
                log: Callable[[str], None]) -> dict[str, Timing]:
    """Run one measurement step and log how long it took."""
    start = time.perf_counter()
    result = await step()
    log(f"  {label}: {time.perf_counter() - start:.1f} s")
    return result
