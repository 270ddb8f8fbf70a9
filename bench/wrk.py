"""``python -m bench.wrk``: an edit's requests per second against /healthz's, with wrk against one real server.

The server is the container's command (``python -m app.serve``, one worker, access log to /dev/null) on a
free loopback port. wrk (``apt-get install wrk``) sends each request in turn for ``--seconds``, /healthz
just before each, round after round, so that a slow moment of the machine lands on both; the ratio of
each round is the edit's requests/s over /healthz's, and the median round is reported (1.0 = as fast as
/healthz, 0.5 = half its rate). The requests:

- ``api``: the default preset's edit through POST /api/attention, a new seed in each request
  (bench/wrk/post.lua, seeded), compressed as Chromium asks;
- ``htmx``: the default preset's edit as the page sends it (POST /stages, HX-Request, each grid one field,
  a value edit as the editor's inputs mark it), a different cell each time (bench/wrk/post.lua, forms);
- ``htmx-full``: the same edit without the value-edit mark: the whole stages section, as every other
  control gets it;
- ``api-64``: T = 64, d_model = 64, 8 heads through the API, a new seed each time, sent uncompressed.

    python -m bench.wrk                                   # every request, 3 rounds of 5 s
    python -m bench.wrk --only api,htmx --rounds 5 --seconds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import httpx

from bench.cases import BROWSER, DEFAULT_CASE, HTMX, VALUE_EDIT, ApiCase, api_body, edited, page_state
from bench.report import GOAL_CASE
from tests.conftest import join_grids
from tests.servers import LOOPBACK, free_port, running

HERE = Path(__file__).resolve().parent / "wrk"
FORM_VARIANTS = 64  # edits cycled through: each changes another cell of X


@dataclass(frozen=True)
class Target:
    """One request for wrk: a path, how bench/wrk/post.lua posts (its mode and file), and the headers of -H."""

    name: str
    path: str
    mode: str  # "forms" or "seeded"
    data: Path
    headers: dict[str, str]


def _wrk(base: str, target: Target | None, seconds: float, connections: int, offset: int) -> float:
    """Requests per second for ``target`` (/healthz when None); raises when any answer was not 2xx."""
    args = ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "--latency"]
    if target is None:
        args += ["-H", "Accept-Encoding: " + BROWSER["Accept-Encoding"], base + "/healthz"]
    else:
        for name, value in target.headers.items():
            args += ["-H", f"{name}: {value}"]
        args += ["-s", str(HERE / "post.lua"), base + target.path, "--", target.mode, str(target.data), str(offset)]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk {target.name if target else 'healthz'}:\n{out}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


async def _targets(base: str, folder: Path, only: set[str]) -> list[Target]:
    """The requests, built from the default preset's page as the server sends it."""
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        fields = await page_state(client, DEFAULT_CASE)
    forms = [join_grids(edited(fields, k)) for k in range(FORM_VARIANTS)]
    (folder / "forms.txt").write_text("\n".join(urlencode(f) for f in forms))
    (folder / "api.json").write_text(json.dumps(api_body(edited(fields, 1)) | {"seed": 0}, separators=(",", ":")))
    big = ApiCase(GOAL_CASE.tokens, GOAL_CASE.d_model, GOAL_CASE.heads)
    (folder / "api-64.json").write_bytes(big.body())
    targets = [
        Target("api", "/api/attention", "seeded", folder / "api.json", BROWSER),
        Target("htmx", "/stages", "forms", folder / "forms.txt", {**HTMX, **VALUE_EDIT}),
        Target("htmx-full", "/stages", "forms", folder / "forms.txt", HTMX),
        Target("api-64", "/api/attention", "seeded", folder / "api-64.json", {}),
    ]
    return [t for t in targets if not only or t.name in only]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--only", default="", help="comma-separated: api, htmx, htmx-full, api-64")
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        print("wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 1
    port = free_port()
    base = f"http://{LOOPBACK}:{port}"
    env = {**os.environ, "ATTENTION_HOST": LOOPBACK, "ATTENTION_PORT": str(port), "ATTENTION_WORKERS": "1"}
    with tempfile.TemporaryDirectory() as tmp, running(["-m", "app.serve"], port=port, env=env):
        targets = asyncio.run(_targets(base, Path(tmp), set(filter(None, args.only.split(",")))))
        for target in targets:  # warm-up: first-call costs are not the edit's
            _wrk(base, target, 1, args.connections, 10**9)
        rates: dict[str, list[tuple[float, float]]] = {t.name: [] for t in targets}
        offset = 0
        for round_no in range(args.rounds):
            for target in targets[round_no % len(targets):] + targets[:round_no % len(targets)]:
                healthz = _wrk(base, None, args.seconds, args.connections, 0)
                offset += 10**7  # seeds never repeat across runs
                rates[target.name].append((_wrk(base, target, args.seconds, args.connections, offset), healthz))
                print(f"  round {round_no + 1} {target.name}: {rates[target.name][-1][0]:.0f}/s, "
                      f"/healthz {healthz:.0f}/s", file=sys.stderr, flush=True)
    print(f"wrk -t1 -c{args.connections}, {args.rounds} rounds of {args.seconds:g} s, one worker "
          f"(load average {os.getloadavg()[0]:.1f} at the end)\n")
    print("| request | requests/s | /healthz requests/s | ÷ /healthz (median round) | rounds |")
    print("| --- | ---: | ---: | ---: | --- |")
    for name, pairs in rates.items():
        ratios = sorted(r / h for r, h in pairs)
        print(f"| {name} | {statistics.median(r for r, _ in pairs):.0f} | {statistics.median(h for _, h in pairs):.0f} "
              f"| {statistics.median(ratios):.3f}× | {', '.join(f'{r:.3f}' for r in ratios)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
