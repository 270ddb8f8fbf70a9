"""What a student waits for on the real models' pages, measured in Chromium: writing one token, selecting a head
and switching heads off on /decoder, selecting a head on /model. For each, p50 and p95 of the time from the click
to the first swap that shows its answer (htmx's ``afterSettle``, timed in the page with ``performance.now()``), and
the first answer's size as the browser decoded it and as it came over the wire, and the size of every answer the
interaction brought (on /decoder a token written on shows the next word first, then asks for the rest).

    python -m bench.decoder_clicks --base-url http://127.0.0.1:8000            # a running server, at 1366×768
    python -m bench.decoder_clicks --base-url http://127.0.0.1:8000 --rounds 3  # only to prove it runs
    python -m bench.decoder_clicks --text "Once upon a time in Lyon"             # a text the server has not seen

The server is any running app (``make run``), idle but for this script; its models must be read. A head click
alternates between two heads, so that after the first round its answers are kept by the server: what is timed is
then the browser's own work and the answer's bytes. Writing a token asks a new question each time (a longer text).
Chromium is Debian's (/usr/bin/chromium, or CHROMIUM_PATH). Prints a Markdown table for docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlencode

from playwright.sync_api import Page, Response, sync_playwright

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
VIEWPORT = {"width": 1366, "height": 768}
TIMEOUT_MS = 120_000

# Counts htmx's swaps and keeps the time of the first one after a click that shows an answer (not a question's
# place in the queue), in the page's own clock.
WATCH = """() => {
  window.__settles = 0;
  document.body.addEventListener("htmx:afterSettle", () => {
    window.__settles += 1;
    if (window.__shown === null && !document.querySelector(".waiting")) window.__shown = performance.now();
  });
}"""
# A swap since the click, and no question still waiting its turn (app.web.served's waiting slot).
SHOWN = "(n) => window.__settles > n && !document.querySelector('.waiting')"
CLICK = """(selector) => {
  const before = window.__settles; window.__shown = null; window.__clicked = performance.now();
  document.querySelector(selector).click(); return before;
}"""


@dataclass
class Measured:
    name: str
    times_ms: list[float] = field(default_factory=list)
    decoded: list[int] = field(default_factory=list)
    wire: list[int] = field(default_factory=list)
    all_decoded: list[int] = field(default_factory=list)  # with the answers that follow the first (the rest)

    def row(self) -> str:
        times = sorted(self.times_ms)
        p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
        return (f"| {self.name} | {statistics.median(times):.0f} | {p95:.0f} | "
                f"{statistics.median(self.decoded) / 1000:.0f} | {statistics.median(self.wire) / 1000:.1f} | "
                f"{statistics.median(self.all_decoded) / 1000:.0f} |")


def measure(page: Page, measured: Measured, selector: Callable[[int], str]) -> None:
    """One interaction per round: click ``selector(i)``, wait for htmx's first swap after it and its answers."""
    answers: list[Response] = []

    def keep(response: Response) -> None:
        if response.request.headers.get("hx-request") == "true":
            answers.append(response)

    page.on("response", keep)
    for i in range(len(measured.times_ms), len(measured.times_ms) + ROUNDS):
        answers.clear()
        page.wait_for_selector(selector(i), timeout=TIMEOUT_MS)  # a question that waited its turn may still come
        before = page.evaluate(CLICK, selector(i))
        page.wait_for_function(SHOWN, arg=before, timeout=TIMEOUT_MS)
        measured.times_ms.append(page.evaluate("() => window.__shown - window.__clicked"))
        page.wait_for_load_state("networkidle")
        if not answers:
            continue
        first = next((a for a in answers if b'class="waiting"' not in a.body()), answers[-1])
        measured.decoded.append(len(first.body()))
        measured.wire.append(first.request.sizes()["responseBodySize"])
        shown = [a for a in answers if b'class="waiting"' not in a.body()]
        measured.all_decoded.append(sum(len(a.body()) for a in shown))
    page.remove_listener("response", keep)


ROUNDS = 10


def open_page(page: Page, url: str, ready: str) -> None:
    """The page, once its results are there (a waiting page asks again by itself), watched for swaps."""
    page.goto(url)
    page.wait_for_selector(ready)
    page.wait_for_load_state("networkidle")
    page.evaluate(WATCH)


def main() -> None:
    global ROUNDS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8000")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--label", default="", help="a word in the table's first column (before, after)")
    parser.add_argument("--text", default="Once upon a time",
                        help="the text written on: a text the server has not seen makes every token a new question")
    args = parser.parse_args()
    ROUNDS = args.rounds
    label = f"{args.label}: " if args.label else ""
    results = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport=VIEWPORT)
        page.set_default_timeout(TIMEOUT_MS)

        open_page(page, f"{args.base_url}/decoder?text=The+capital+of+France+is", "#decoder-view")
        heads = Measured(f"{label}/decoder head click")
        measure(page, heads, lambda i: f"#decoder-view a.thumb:nth-of-type({1 + i % 2})")
        results.append(heads)
        heads_off = Measured(f"{label}/decoder switch 3 heads off")
        measure(page, heads_off, lambda i: f"#switch .shortcuts li:nth-child({1 + i % 2}) a")
        results.append(heads_off)
        open_page(page, f"{args.base_url}/decoder?{urlencode({'text': args.text})}", "#decoder-view")
        write = Measured(f"{label}/decoder write 1 token")
        measure(page, write, lambda i: 'button[name="generate"][value="1"]')
        results.append(write)

        open_page(page, f"{args.base_url}/model", "#model-view")
        model_heads = Measured(f"{label}/model head click")
        measure(page, model_heads, lambda i: f"#model-view a.thumb:nth-of-type({2 + i % 2})")
        results.append(model_heads)
        browser.close()

    print("| interaction | p50 ms | p95 ms | answer KB decoded | answer KB on the wire | every answer KB decoded |")
    print("|---|---:|---:|---:|---:|---:|")
    for m in results:
        print(m.row())


if __name__ == "__main__":
    main()
