"""The measurements as markdown: tables, the goals marked met or not met, and docs/performance.md's block."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.cases import EDIT_STAGE, LARGEST_REQUEST, Case
from bench.results import (
    GOAL_STUDENTS,
    INTERVAL_S,
    MAX_FOLLOW_CPU_MS,
    MAX_FOLLOW_MS,
    MAX_FOLLOW_P95_MS,
    STEP_TIMEOUT_S,
    Compressed,
    FollowResult,
    LoadResult,
)
from bench.timing import Resource, Timing, fit_quadratic, quadratic_takes_over

# The goals, stated once.
MAX_EDIT_RATIO = 2.0  # an edit sustains >= 50 % of /healthz's requests per second
MAX_FRAGMENT_OVER_API = 2.0  # at 64 × 64 × 8 the fragment costs <= 2× the JSON API
MAX_GOAL_API_RATIO = 20.0  # at 64 × 64 × 8 the JSON API sustains >= 5 % of /healthz's requests per second
MAX_LARGEST_OVER_DEFAULT = 100.0  # the largest valid request costs <= 100 default requests
MAX_MIXED_P95_RATIO = 3.0  # the class's edits' p95 under the mixed load, against their p95 alone
MAX_FRAGMENT_KB = 100.0  # an edit's fragment at 64 × 64, on the wire
MAX_FIRST_PAGE_KB = 60.0  # page + htmx + CSS + JS, compressed
CLASS_SIZE, MAX_CLASS_P95_MS = 200, 50.0
GOAL_CASE = Case(64, 64, 8)
DOCS_BEGIN, DOCS_END = "<!-- bench:begin -->", "<!-- bench:end -->"

Measured = list[tuple[Case, dict[str, Timing]]]


@dataclass
class Results:
    environment: str
    cases: Measured = field(default_factory=list)  # healthz, api, stage, all per case
    stages: Measured = field(default_factory=list)  # healthz and one fragment per stage
    scaling: Measured = field(default_factory=list)  # healthz, api, stage, all per T
    api: dict[str, Timing] = field(default_factory=dict)  # healthz, the default request, the large API requests
    page: list[Resource] = field(default_factory=list)
    compression: list[Compressed] = field(default_factory=list)
    load: list[LoadResult] = field(default_factory=list)
    following: list[FollowResult] = field(default_factory=list)  # a class following its teacher's steps
    model: str = ""  # bench.model's section with its heading (the real model against Hugging Face), when it ran


@dataclass(frozen=True)
class Goal:
    text: str
    target: str
    measured: str
    met: bool | None  # None: not measured in this run

    @property
    def verdict(self) -> str:
        return "not measured" if self.met is None else ("**met**" if self.met else "**NOT met**")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A markdown table; numbers right-aligned."""
    def cell(v: object) -> str:
        return str(v).replace("|", "\\|")

    align = ["---:" if rows and _numeric(rows[0][i]) else "---" for i in range(len(headers))]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _numeric(v: object) -> bool:
    return isinstance(v, int | float) or bool(re.match(r"[\d.—]", str(v)))


def kb(n: int) -> str:
    return f"{n / 1024:.1f}"


def size(t: Timing) -> str:
    """Decoded → wire kilobytes; a response over 1 KB that was not compressed is marked."""
    if t.compressed:
        return f"{kb(t.body_bytes)} → {kb(t.wire_bytes)}"
    return kb(t.wire_bytes) + (" (not compressed)" if t.body_bytes >= 1024 else "")


def ms(v: float) -> str:
    return "—" if math.isnan(v) else (f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}")


def ratio(v: float) -> str:
    return f"{v:.2f}×" if v < 10 else f"{v:.0f}×"


def cost_table(cases: Measured) -> str:
    rows = []
    for case, t in cases:
        floor = t["healthz"]
        rows.append([
            case.label, ms(floor.median_ms),
            ms(t["api"].median_ms), ratio(t["api"].ratio(floor)),
            ms(t["stage"].median_ms), ratio(t["stage"].ratio(floor)),
            ms(t["all"].median_ms), ratio(t["all"].ratio(floor)),
            ratio(t["stage"].median_ms / t["api"].median_ms),
            size(t["api"]), size(t["stage"]), size(t["all"]), kb(t["stage"].request_bytes),
            ms(t["whole"].median_ms), ratio(t["whole"].ratio(floor)), size(t["whole"]),
        ])
    return table(["case", "/healthz ms", "API ms", "API ÷ healthz", "fragment ms", "fragment ÷ healthz",
                  "all stages ms", "all ÷ healthz", "fragment ÷ API", "API KB", "fragment KB",
                  "all stages KB", "edit post KB", "whole stages ms", "whole ÷ healthz", "whole stages KB"], rows)


def stage_table(measured: Measured) -> str:
    rows = []
    for case, t in measured:
        floor = t["healthz"]
        for stage, timing in t.items():
            if stage != "healthz":
                rows.append([case.label, stage, ms(timing.median_ms), ratio(timing.ratio(floor)), size(timing)])
    return table(["case", "stage in view", "fragment ms", "÷ healthz", "fragment KB"], rows)


@dataclass(frozen=True)
class Fit:
    name: str
    unit: str
    a: float
    b: float
    c: float
    t_max: int

    @property
    def takes_over(self) -> float | None:
        return quadratic_takes_over(self.a, self.b, self.c)

    def share_at(self, t: float) -> float:
        """The T² term's share of the fitted total at T = t."""
        total = self.a + self.b * t + self.c * t * t
        return self.c * t * t / total if total > 0 else float("nan")

    def line(self) -> str:
        fit = f"- {self.name}: {self.unit} ≈ {self.a:.3g} + {self.b:.3g}·T + {self.c:.3g}·T²"
        if self.c <= 0:
            return f"{fit}; no T² part measurable: linear up to T = {self.t_max}."
        over = self.takes_over
        where = (f"the T² term outweighs the rest from T ≈ {over:.0f}" if over is not None and over <= self.t_max
                 else f"the T² term stays below the rest up to T = {self.t_max}")
        return f"{fit}; {where}; at T = {self.t_max} it is {self.share_at(self.t_max):.0%} of the total."


def scaling_fits(measured: Measured) -> list[Fit]:
    ts = [case.tokens for case, _ in measured]
    fits = []
    for key, name in (("api", "JSON API"), ("stage", f"fragment ({EDIT_STAGE})"), ("all", "fragment (all stages)")):
        for unit, value in (("ms", lambda t: t.median_ms), ("KB on the wire", lambda t: t.wire_bytes / 1024)):
            a, b, c = fit_quadratic(ts, [value(t[key]) for _, t in measured])
            fits.append(Fit(f"{name}, {unit}", unit, a, b, c, max(ts)))
    return fits


def scaling_table(measured: Measured) -> str:
    rows = []
    for case, t in measured:
        rows.append([case.tokens, ms(t["healthz"].median_ms), ms(t["api"].median_ms), kb(t["api"].wire_bytes),
                     ms(t["stage"].median_ms), kb(t["stage"].wire_bytes), ms(t["all"].median_ms),
                     kb(t["all"].wire_bytes)])
    return table(["T", "/healthz ms", "API ms", "API KB gz", "fragment ms", "fragment KB gz", "all stages ms",
                  "all stages KB gz"], rows)


def page_table(resources: list[Resource]) -> str:
    rows = [[r.url, kb(r.body_bytes),
             kb(r.wire_bytes) + ("" if r.compressed or r.body_bytes < 1024 else " (not compressed)"),
             r.encoding or "—"] for r in resources]
    rows.append(["**total**", kb(sum(r.body_bytes for r in resources)), kb(sum(r.wire_bytes for r in resources)), ""])
    return table(["resource", "KB", "KB on the wire", "encoding"], rows)


def api_table(timings: dict[str, Timing]) -> str:
    """The large API requests against /healthz and against the default preset's request."""
    floor, default = timings["healthz"], timings["default"]
    rows = [[name if name != "default" else "default preset (T=5 d=3 h=1)", ms(t.median_ms), ratio(t.ratio(floor)),
             ratio(t.median_ms / default.median_ms), size(t), t.encoding or "—"]
            for name, t in timings.items() if name != "healthz"]
    return table(["POST /api/attention", "ms", "÷ healthz", "÷ default request", "KB", "encoding"], rows)


def load_table(results: list[LoadResult]) -> str:
    rows = []
    for r in results:
        errors = _errors(r.errors)
        server = "—" if r.server_cpu is None else f"{r.server_cpu:.0%}"
        client = "—" if r.client_cpu is None else f"{r.client_cpu:.0%}"
        load = "—" if r.load_average is None else f"{r.load_average:.1f}"
        rows.append([r.students, f"{r.students / INTERVAL_S:.0f}", f"{r.rate:.0f}", r.sent, errors,
                     ms(r.p50_ms), ms(r.p95_ms), ms(r.p99_ms), ms(r.max_ms), ms(r.lag_p95_ms), server, client, load])
    return table(["students", "edits/s offered", "answered/s", "sent", "errors", "p50 ms", "p95 ms", "p99 ms",
                  "max ms", "client lag p95 ms", "server CPU", "client CPU", "load average"], rows)


def follow_table(results: list[FollowResult]) -> str:
    """A class following its teacher: per step, the time to the last student's event and workspace."""
    rows = []
    for r in results:
        p = r.pct
        rows.append([r.students, r.store, r.steps, ms(p(r.to_event_ms, 50)), ms(p(r.to_event_ms, 95)),
                     ms(p(r.to_workspace_ms, 50)), ms(p(r.to_workspace_ms, 95)),
                     ms(max(r.to_workspace_ms)) if r.to_workspace_ms else "—", ms(p(r.teacher_ms, 50)),
                     ms(p(r.cpu_ms, 50)), ms(p(r.cpu_ms, 50) / r.students) if r.students else "—",
                     kb(r.workspace_bytes), _errors(r.errors) if not r.missed else
                     f"{_errors(r.errors)}, {r.missed} missed",
                     "—" if r.client_cpu is None else f"{r.client_cpu:.0%}",
                     "—" if r.load_average is None else f"{r.load_average:.1f}"])
    return table(["students", "store", "steps", "to last event p50 ms", "to last event p95 ms",
                  "to last workspace p50 ms", "to last workspace p95 ms", "to last workspace max ms",
                  "teacher's answer p50 ms",
                  "server CPU per step ms", "server CPU per student ms", "workspace KB", "errors", "client CPU",
                  "load average"], rows)


def compression_table(results: list[Compressed]) -> str:
    rows = []
    for c in results:
        saved = c.body_bytes > c.wire_bytes
        rows.append([c.body, c.candidate, ms(c.ms), kb(c.wire_bytes), f"{c.body_bytes / c.wire_bytes:.2f}",
                     f"{c.ns_per_byte_saved:.1f}" if saved else "—",
                     f"{c.pays_below_mbit:,.0f}" if saved else "—"])
    return table(["body", "encoding", "ms", "KB", "ratio", "ns CPU per byte saved", "pays below Mbit/s"], rows)


def _errors(errors: dict[str, int]) -> str:
    return str(sum(errors.values())) + (f" ({', '.join(f'{k}: {v}' for k, v in errors.items())})" if errors else "")


def _alone(results: list[LoadResult], students: int) -> LoadResult | None:
    """The run of ``students`` without heavy clients, on the same server."""
    return next((r for r in results if r.students == students and r.heavy is None), None)


def mixed_table(results: list[LoadResult]) -> str:
    """The class's edits while heavy clients send the largest request, against the same class alone."""
    rows = []
    for r in results:
        if r.heavy is None:
            continue
        alone = _alone(results, r.students)
        against = "—" if alone is None or not alone.p95_ms else ratio(r.p95_ms / alone.p95_ms)
        h = r.heavy
        rows.append([r.students, h.clients, f"{r.rate:.0f}", _errors(r.errors), ms(r.p50_ms), ms(r.p95_ms),
                     ms(r.p99_ms), ms(r.max_ms), against, f"{h.ok / r.seconds:.1f}", _errors(h.errors),
                     ms(h.p50_ms), ms(h.p95_ms), kb(h.wire_bytes),
                     "—" if r.server_cpu is None else f"{r.server_cpu:.0%}",
                     "—" if r.load_average is None else f"{r.load_average:.1f}"])
    return table(["students", "heavy clients", "edits answered/s", "edit errors", "edit p50 ms", "edit p95 ms",
                  "edit p99 ms", "edit max ms", "edit p95 ÷ alone", "heavy answered/s", "heavy errors",
                  "heavy p50 ms", "heavy p95 ms", "heavy KB on the wire", "server CPU", "load average"], rows)


def _find(measured: Measured, case: Case) -> dict[str, Timing] | None:
    return next((t for c, t in measured if c == case), None)


def _over(value: float, limit: float, unit: str = "×") -> str:
    if value <= limit:
        return ""
    return f", {value / limit:.1f}× the limit" if unit == "×" else f", {value - limit:.0f} {unit} over"


def goals(results: Results) -> list[Goal]:
    out = []
    default = results.cases[0][1] if results.cases and results.cases[0][0].preset else None
    for key, name in (("api", "JSON API"), ("stage", "htmx fragment")):
        text = f"default preset: an edit through the {name} sustains ≥ 50 % of /healthz's requests/s"
        if default is None:
            out.append(Goal(text, f"time ≤ {MAX_EDIT_RATIO:g}× /healthz", "—", None))
            continue
        r = default[key].ratio(default["healthz"])
        measured = f"{r:.2f}× ({100 / r:.0f} % of /healthz's rate){_over(r, MAX_EDIT_RATIO)}"
        out.append(Goal(text, f"time ≤ {MAX_EDIT_RATIO:g}× /healthz", measured, r <= MAX_EDIT_RATIO))
    big = _find(results.cases, GOAL_CASE)
    for key, name in (("stage", f"fragment ({EDIT_STAGE} in view)"), ("all", "fragment with all stages shown")):
        text = f"{GOAL_CASE.label}: the {name} costs ≤ 2× the JSON API"
        if big is None:
            out.append(Goal(text, f"≤ {MAX_FRAGMENT_OVER_API:g}×", "—", None))
            continue
        r = big[key].median_ms / big["api"].median_ms
        out.append(Goal(text, f"≤ {MAX_FRAGMENT_OVER_API:g}×",
                        f"{r:.2f}× ({ms(big[key].median_ms)} ms vs {ms(big['api'].median_ms)} ms)"
                        f"{_over(r, MAX_FRAGMENT_OVER_API)}", r <= MAX_FRAGMENT_OVER_API))
    text = f"{GOAL_CASE.label}: the JSON API sustains ≥ {100 / MAX_GOAL_API_RATIO:g} % of /healthz's requests/s"
    if big is None:
        out.append(Goal(text, f"time ≤ {MAX_GOAL_API_RATIO:g}× /healthz", "—", None))
    else:
        r = big["api"].ratio(big["healthz"])
        out.append(Goal(text, f"time ≤ {MAX_GOAL_API_RATIO:g}× /healthz",
                        f"{r:.1f}× ({100 / r:.1f} % of /healthz's rate){_over(r, MAX_GOAL_API_RATIO)}",
                        r <= MAX_GOAL_API_RATIO))
    text = f"the largest valid request ({LARGEST_REQUEST.label}) costs ≤ 100 default requests (default preset, API)"
    largest = results.api.get(LARGEST_REQUEST.label)
    if largest is None or "default" not in results.api:
        out.append(Goal(text, f"≤ {MAX_LARGEST_OVER_DEFAULT:g}×", "—", None))
    else:
        default_ms = results.api["default"].median_ms
        r = largest.median_ms / default_ms
        out.append(Goal(text, f"≤ {MAX_LARGEST_OVER_DEFAULT:g}×",
                        f"{r:.0f}× ({ms(largest.median_ms)} ms vs {ms(default_ms)} ms)"
                        f"{_over(r, MAX_LARGEST_OVER_DEFAULT)}", r <= MAX_LARGEST_OVER_DEFAULT))
    everything = [t for m in (results.cases, results.stages, results.scaling) for _, ts in m for t in ts.values()]
    everything += list(results.api.values())
    plain = [t for t in everything if not t.compressed and t.body_bytes >= 1024]
    out.append(Goal("responses over 1 KB are compressed", "all",
                    f"{len(everything) - len(plain)} of {len(everything)} measured responses compressed"
                    if everything else "—", (not plain) if everything else None))
    heavy = [(t.wire_bytes, case, stage) for case, ts in results.stages for stage, t in ts.items()
             if stage != "healthz" and (case.tokens, case.d_model) == (64, 64)]
    heavy += [(ts["stage"].wire_bytes, case, EDIT_STAGE) for case, ts in results.cases
              if (case.tokens, case.d_model) == (64, 64)]
    text = "an edit's fragment at T = 64, d_model = 64 is ≤ 100 KB on the wire (heaviest stage, h = 1 or 8)"
    if heavy:
        wire, case, stage = max(heavy, key=lambda v: v[0])
        out.append(Goal(text, f"≤ {MAX_FRAGMENT_KB:g} KB",
                        f"{kb(wire)} KB ({stage}, {case.label}){_over(wire / 1024, MAX_FRAGMENT_KB, 'KB')}",
                        wire / 1024 <= MAX_FRAGMENT_KB))
    else:
        out.append(Goal(text, f"≤ {MAX_FRAGMENT_KB:g} KB", "—", None))
    text = "the first page with htmx, CSS and JS, compressed"
    if results.page:
        wire = sum(r.wire_bytes for r in results.page) / 1024
        out.append(Goal(text, f"≤ {MAX_FIRST_PAGE_KB:g} KB",
                        f"{wire:.1f} KB{_over(wire, MAX_FIRST_PAGE_KB, 'KB')}", wire <= MAX_FIRST_PAGE_KB))
    else:
        out.append(Goal(text, f"≤ {MAX_FIRST_PAGE_KB:g} KB", "—", None))
    text = f"{CLASS_SIZE} students, one worker: p95 ≤ {MAX_CLASS_P95_MS:g} ms and no errors"
    cls = next((r for r in results.load if r.students == CLASS_SIZE), None)
    if cls is None:
        out.append(Goal(text, f"p95 ≤ {MAX_CLASS_P95_MS:g} ms, 0 errors", "—", None))
    else:
        met = cls.p95_ms <= MAX_CLASS_P95_MS and cls.error_count == 0
        out.append(Goal(text, f"p95 ≤ {MAX_CLASS_P95_MS:g} ms, 0 errors",
                        f"p95 {ms(cls.p95_ms)} ms, {cls.error_count} errors"
                        f"{_over(cls.p95_ms, MAX_CLASS_P95_MS, 'ms')}", met))
    mixed = next((r for r in results.load if r.heavy is not None), None)
    alone = None if mixed is None else _alone(results.load, mixed.students)
    target = f"p95 ≤ {MAX_MIXED_P95_RATIO:g}× alone, 0 errors"
    if mixed is None or alone is None or mixed.heavy is None:
        out.append(Goal("mixed load: a class's edits while clients send the largest request in a loop", target,
                        "—", None))
    else:
        text = (f"mixed load: {mixed.students} students' edits while {mixed.heavy.clients} clients send the largest "
                "request in a loop")
        r = mixed.p95_ms / alone.p95_ms
        errors = mixed.error_count + mixed.heavy.error_count
        out.append(Goal(text, target, f"p95 {ms(mixed.p95_ms)} ms vs {ms(alone.p95_ms)} ms alone ({ratio(r)}), "
                                      f"{errors} errors{_over(r, MAX_MIXED_P95_RATIO)}",
                        r <= MAX_MIXED_P95_RATIO and errors == 0))
    for follow in [r for r in results.following if r.students == GOAL_STUDENTS] or [None]:
        where = ("one worker" if follow is None or follow.store == "memory" else "one worker, Redis"
                 if follow.servers == 1 else f"{follow.servers} servers sharing Redis")
        text = (f"{GOAL_STUDENTS} students follow the teacher's step, {where}: the last student's workspace, and "
                "the servers' CPU per student per step")
        target = (f"p95 ≤ {MAX_FOLLOW_P95_MS:g} ms, max ≤ {MAX_FOLLOW_MS:g} ms, 0 errors, "
                  f"≤ {MAX_FOLLOW_CPU_MS:g} ms CPU")
        if follow is None or not follow.to_workspace_ms:
            out.append(Goal(text, target, "—", None))
            continue
        p95, worst = follow.pct(follow.to_workspace_ms, 95), max(follow.to_workspace_ms)
        cpu = follow.pct(follow.cpu_ms, 50) / follow.students if follow.cpu_ms else float("nan")
        out.append(Goal(text, target, f"p95 {ms(p95)} ms, max {ms(worst)} ms over {follow.steps} steps, "
                                      f"{follow.error_count} errors, {cpu:.2f} ms CPU",
                        p95 <= MAX_FOLLOW_P95_MS and worst <= MAX_FOLLOW_MS and follow.error_count == 0
                        and cpu <= MAX_FOLLOW_CPU_MS))
    return out


def goals_table(results: Results) -> str:
    return table(["goal", "target", "measured", "verdict"],
                 [[g.text, g.target, g.measured, g.verdict] for g in goals(results)])


def summary(results: Results) -> str:
    """What docs/performance.md shows: the goals, the cost per request and the class load."""
    parts = [goals_table(results)]
    if results.cases:
        parts.append(cost_table(results.cases))
    if results.api:
        parts.append(api_table(results.api))
    if results.load:
        parts.append(load_table([r for r in results.load if r.heavy is None]))
    if any(r.heavy for r in results.load):
        parts.append(mixed_table(results.load))
    if results.following:
        parts.append(follow_table(results.following))
    return "\n\n".join(parts)


def markdown(results: Results) -> str:
    """The whole results file."""
    parts = [
        "# Benchmark results",
        "Written by `make bench` (`python -m bench`); docs/performance.md shows the goals, the "
        "cost table and the class load from the same run. Times are medians of in-process requests "
        "(httpx's ASGI transport, the whole middleware stack, compression included), each case interleaved "
        "with GET /healthz so that the ratios compare requests made at the same moment; ratios matter, "
        "absolute times are this machine's. Requests accept what Chromium accepts (gzip, deflate, br, zstd); "
        "sizes are KB decoded → KB on the wire.",
        results.environment,
        "## Goals",
        goals_table(results),
    ]
    if results.cases:
        parts += ["## Cost of one edit, per size",
                  f"*fragment*: POST /stages with HX-Request, the page's whole form with one X cell changed and "
                  f"the {EDIT_STAGE} stage in view, marked as a value edit as the page's script marks it "
                  "(Attention-Edit: value): the stage body comes back; *all stages*: the same with *show all "
                  "stages* ticked; *whole stages*: the same edit unmarked, answered with the whole stages section "
                  "as every other control is; *API*: POST /api/attention for the same computation. *edit post "
                  "KB*: the form a browser posts.",
                  cost_table(results.cases)]
    if results.stages:
        parts += ["## The edit's fragment for each stage in view", stage_table(results.stages)]
    if results.scaling:
        first = results.scaling[0][0]
        parts += [f"## Growth with T (d_model = {first.d_model}, h = {first.heads})", scaling_table(results.scaling),
                  "Least-squares fits of the medians:", "\n".join(f.line() for f in scaling_fits(results.scaling))]
    if results.api:
        parts += ["## Large API requests",
                  "POST /api/attention beyond the page's sizes, interleaved with GET /healthz, against the default "
                  "preset's edit through the API (*÷ default request*).", api_table(results.api)]
    if results.page:
        parts += ["## The first page (GET /)", page_table(results.page)]
    if results.compression:
        parts += ["## Compression: CPU per byte saved",
                  "Each body as the app sends it, compressed in one shot in this process (median): *ns CPU per "
                  "byte saved* is the time over the bytes it saves; a link that moves a byte in more time than "
                  "that (8 ns at 1 Gbit/s, 80 ns at 100 Mbit/s) is slower than the compression, so it pays on "
                  "links slower than *pays below*. The app sends zstd 1, else Brotli 1, else gzip 1 "
                  "(docs/performance.md, *Compression*).", compression_table(results.compression)]
    if results.load:
        seconds = results.load[0].seconds
        parts += ["## Class load (one uvicorn worker on 127.0.0.1)",
                  f"Each student posts an edit (the default preset's form, one X cell changed, {EDIT_STAGE} in "
                  f"view) every {INTERVAL_S:g} s ± 25 %, for {seconds:g} s, from one asyncio aiohttp client on the "
                  "same machine. *client lag*: how late edits went out against the students' schedule (a student "
                  "waits for the previous answer, as htmx does, so slow answers delay the next edit; so does a "
                  "client short of CPU); *server CPU*, *client CPU*: each process's CPU time over the run's wall "
                  "time (100 % = one core); *load average*: the machine's, at the end of the run (above the "
                  "CPU count, other work was competing: the tail latencies suffer first).",
                  load_table([r for r in results.load if r.heavy is None])]
    if any(r.heavy for r in results.load):
        parts += ["## Mixed load: the class and the largest request",
                  "The same server, the same students, while each heavy client posts the largest valid request "
                  f"({LARGEST_REQUEST.label}) to /api/attention, reads the whole answer and sends it again. "
                  "*edit p95 ÷ alone*: against the same number of students without heavy clients, above.",
                  mixed_table(results.load)]
    if results.following:
        first = results.following[0]
        parts += ["## A class following its teacher (uvicorn workers on 127.0.0.1)",
                  f"The teacher starts a class from the default preset's page and steps {first.steps} times through "
                  "the stages with the page's own request (the teacher page's form with goto, POST /stages with "
                  "HX-Request); each student has joined (GET /class/{code}) and holds an event stream to "
                  "/class/{code}/events?workspace= as a following student's page does: each \"state\" event "
                  "carries the workspace, rendered and compressed once per change on each server, which the "
                  "student inflates, checking it shows the new stage. *to last event* and *to last "
                  "workspace*: from the teacher's request sent to the last student's event received, and to the "
                  f"last student's workspace read, over the steps; {first.pause_s:g} s between steps; a workspace not "
                  f"read within {STEP_TIMEOUT_S:g} s is *missed*. *server CPU per step*: the worker's CPU time "
                  "from the teacher's request to the last workspace (median). The students are coroutines of one "
                  "aiohttp client on the same machine; *client CPU*: its CPU time over the steps' wall time. "
                  "*redis*: the same with REDIS_URL, the rooms and their events going through a redis-server on "
                  "the same machine; *redis, 2 servers*: two workers sharing it, the students joining each in turn; "
                  "*server CPU*: both workers'.", follow_table(results.following)]
    if results.model.strip():
        parts.append(results.model.strip())
    return "\n\n".join(parts) + "\n"


def update_docs(path: Path, results: Results) -> bool:
    """Replace the block between the page's bench markers with the summary; False if there is none."""
    text = path.read_text()
    begin, end = text.find(DOCS_BEGIN), text.find(DOCS_END)
    if begin < 0 or end < begin:
        return False
    block = f"{DOCS_BEGIN}\n{results.environment}\n\n{summary(results)}\n{DOCS_END}"
    path.write_text(text[:begin] + block + text[end + len(DOCS_END):])
    return True
