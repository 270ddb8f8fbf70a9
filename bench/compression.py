"""What each compression costs and saves, on the bodies the app sends: CPU time per byte saved.

For each body (an edit's fragment, the first page, the JSON API at 64 × 64 × 8, the largest valid
request's answer) and each candidate (gzip, Brotli and zstd at their fast levels, and none), the
median time of a one-shot compression in this process, the size, and the nanoseconds of CPU spent
per byte saved. A link moving a byte in more time than that (8 ns at 1 Gbit/s, 80 ns at 100 Mbit/s)
is slower than the compression: *pays below* is the link speed under which it does.

    python -m bench.compression
"""

from __future__ import annotations

import asyncio
import gzip
import statistics
import time
from collections.abc import Callable

import brotli
import httpx
import zstandard

from app.main import create_app
from bench.cases import LARGEST_REQUEST, Case, api_request, edited, fragment_request, page_state
from bench.results import Compressed
from bench.timing import decoded, send_raw

CANDIDATES: dict[str, Callable[[bytes], bytes]] = {
    "none": lambda b: b,
    "gzip 1": lambda b: gzip.compress(b, 1, mtime=0),
    "gzip 2": lambda b: gzip.compress(b, 2, mtime=0),
    "gzip 6": lambda b: gzip.compress(b, 6, mtime=0),
    "br 0": lambda b: brotli.compress(b, quality=0),
    "br 1": lambda b: brotli.compress(b, quality=1),
    "br 4": lambda b: brotli.compress(b, quality=4),
    "zstd 1": lambda b: zstandard.ZstdCompressor(level=1).compress(b),
    "zstd 3": lambda b: zstandard.ZstdCompressor(level=3).compress(b),
}
QUICK_CANDIDATES = ("none", "gzip 1", "br 1", "zstd 1")


async def bodies(quick: bool) -> dict[str, bytes]:
    """The bodies as the app sends them before compression."""
    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://bench.local") as client:

        async def body(request: httpx.Request) -> bytes:
            _, response, raw = await send_raw(client, request)
            if response.status_code != 200:
                raise RuntimeError(f"{request.url.path} answered {response.status_code}")
            return decoded(raw, response.headers.get("content-encoding", ""))

        default = await page_state(client, Case(5, 3, 1, preset="default"))
        found = {"edit fragment, default preset": await body(fragment_request(client, edited(default, 1))),
                 "first page (GET /)": await body(client.build_request("GET", "/"))}
        if quick:
            return found
        big = await page_state(client, Case(64, 64, 8))
        found["edit fragment, T=64 d=64 h=8, all stages"] = await body(
            fragment_request(client, edited(big, 1, show_all=True)))
        found["API, T=64 d=64 h=8"] = await body(api_request(client, edited(big, 1)))
        found[f"API, {LARGEST_REQUEST.label}"] = await body(LARGEST_REQUEST.request(client))
        return found


def measure(name: str, data: bytes, candidates: tuple[str, ...], seconds: float) -> list[Compressed]:
    out = []
    for candidate in candidates:
        compress = CANDIDATES[candidate]
        size = len(compress(data))
        times = []
        start = time.perf_counter()
        while len(times) < 3 or (time.perf_counter() - start < seconds and len(times) < 200):
            t0 = time.perf_counter()
            compress(data)
            times.append(time.perf_counter() - t0)
        out.append(Compressed(name, candidate, len(data), size, statistics.median(times) * 1000))
    return out


def run(quick: bool = False, log: Callable[[str], None] = print) -> list[Compressed]:
    candidates = QUICK_CANDIDATES if quick else tuple(CANDIDATES)
    results = []
    for name, data in asyncio.run(bodies(quick)).items():
        start = time.perf_counter()
        results += measure(name, data, candidates, 0.05 if quick else 0.5)
        log(f"  {name}: {time.perf_counter() - start:.1f} s")
    return results


def main() -> None:
    from bench.report import compression_table

    print(compression_table(run()))


if __name__ == "__main__":
    main()
