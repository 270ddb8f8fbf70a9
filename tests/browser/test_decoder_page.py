""""Next word: a real language model" (GET /decoder) in a real Chromium, as a student uses it: the next word's
candidates on the first screen of every screen a class has, the temperature slider swapping only the
candidates, a candidate appended, "Write 4 tokens" against the API's greedy generation, one of the 270 heads
stepped through down to a softmax row's arithmetic, the page without JavaScript, and a text that is too long.

The language model is read after the server starts (a few seconds); until then /decoder answers 503 with a
"loading" page, so the module waits for a 200 first.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import TYPE_CHECKING

import pytest

from app.view.pieces import readable
from tests.browser.conftest import save_screenshot
from tests.browser.test_figures import saved_svg
from tests.conftest import VIEWPORTS

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Response

    from tests.browser.conftest import PageLog

pytestmark = pytest.mark.browser

TEXT = "The capital of France is"
FIRST = "␣Paris"  # the model's likeliest next token for TEXT
LOAD_S = 300.0  # the model is read in ~5 s; a slow or busy machine (its catalogue measured too) in minutes


@pytest.fixture(scope="module", autouse=True)
def decoder_loaded(browser: Browser, base_url: str) -> None:
    wait_for_decoder(base_url)


def wait_for_decoder(base_url: str) -> None:
    """Wait until the language model is read: /decoder answers 200 instead of its 503 "loading" page."""
    deadline = time.monotonic() + LOAD_S
    status: object = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base_url}/decoder", timeout=10) as response:
                if response.status == 200:
                    return
                status = response.status
        except urllib.error.HTTPError as e:
            status = e.code
        except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
            status = e
        time.sleep(0.25)
    pytest.fail(f"/decoder did not answer 200 within {LOAD_S:g} s (last: {status})")


def post_json(base_url: str, path: str, body: dict) -> dict:
    request = urllib.request.Request(f"{base_url}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def overflow(page: Page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def rect(page: Page, selector: str) -> dict:
    """The element's getBoundingClientRect: where it is on the screen as it is scrolled now."""
    return page.locator(selector).first.evaluate(
        "e => { const r = e.getBoundingClientRect();"
        " return {left: r.left, top: r.top, right: r.right, bottom: r.bottom}; }")


def candidates_only(response: Response) -> bool:
    """An htmx request for the candidates alone (the slider's and the cut-offs')."""
    return "/decoder?" in response.url and response.request.headers.get("hx-target") == "candidates"


def rect_height(page: Page, selector: str) -> float:
    box = rect(page, selector)
    return box["bottom"] - box["top"]


def set_temperature(page: Page, value: str) -> None:
    """Move the slider as a script does (its value, then an input event) and wait for the candidates."""
    with page.expect_response(candidates_only) as swap:
        page.locator("#temperature").evaluate(
            "(e, v) => { e.value = v; e.dispatchEvent(new Event('input', {bubbles: true})); }", value)
    assert swap.value.status == 200


def first_percent(page: Page) -> float:
    return float(page.locator("li.bar .pct").first.inner_text().rstrip("%"))


@pytest.mark.slow
def test_the_first_candidate_is_on_the_first_screen_of_every_screen(page: Page) -> None:
    page.set_viewport_size({"width": VIEWPORTS[0][0], "height": VIEWPORTS[0][1]})
    page.goto(f"/decoder?text={TEXT}")
    expect(page.locator("li.bar")).to_have_count(10)
    expect(page.locator("li.bar .tok").first).to_have_text(FIRST)
    expect(page.locator(".dv-grid a.thumb")).to_have_count(270)
    expect(page.locator(".dv-grid .dv-group")).to_have_count(90)  # 3 groups of 3 heads sharing K/V, per layer
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        page.evaluate("window.scrollTo(0, 0)")
        assert overflow(page) <= 0, f"{width}×{height}: the page scrolls sideways"
        heading = rect(page, "#cand-h")
        assert heading["bottom"] <= height, f"{width}×{height}: the candidates' heading is below the first screen"
        assert rect_height(page, "li.bar .pct") <= 1.2 * rect_height(page, "li.bar .tok"), f"{width}×{height}"
        if width >= 768:  # the whole first bar and its percentage, without scrolling
            for part in ("li.bar", "li.bar .tok", "li.bar .pct"):
                box = rect(page, part)
                assert box["left"] >= 0 and box["right"] <= width, (width, height, part, box)
                assert box["top"] >= 0 and box["bottom"] <= height, (width, height, part, box)
        save_screenshot(page, f"decoder-{width}x{height}", full_page=False)
    # Save figure: the next-word bars and the 270 maps, each from its menu.
    page.set_viewport_size({"width": VIEWPORTS[0][0], "height": VIEWPORTS[0][1]})
    bars = saved_svg(page, page.locator("#candidates details.save-figure"), "decoder-candidates.svg")
    assert FIRST in bars, bars
    assert saved_svg(page, page.locator("#decoder-view details.save-figure").first, "decoder-heads.svg")


def test_the_sampler_swaps_only_the_candidates(page: Page) -> None:
    page.goto(f"/decoder?text={TEXT}")
    at_one = first_percent(page)
    # marks on the maps and on the slider: a swap of the workspace, or of the slider, would drop them
    page.locator("#decoder-view").evaluate("e => e.setAttribute('data-unswapped', '')")
    slider = page.locator("#temperature")
    slider.evaluate("e => e.setAttribute('data-unswapped', '')")
    set_temperature(page, "0.5")
    expect(page.locator("#tau-out")).to_have_text("0.5")
    expect(page.locator("#cand-hint")).to_contain_text("Below 1 the likeliest tokens gain")
    expect(page.locator("li.bar .tok").first).to_have_text(FIRST)
    assert first_percent(page) > at_one
    expect(page.locator("#decoder-view")).to_have_attribute("data-unswapped", "")
    assert "temperature=0.5" in page.url
    # a drag that pauses: the bars follow while the slider is held, and the slider still follows the pointer
    box = slider.bounding_box()
    x, y = box["x"] + 8 + (box["width"] - 16) * 0.4 / 4.9, box["y"] + box["height"] / 2  # the thumb at τ = 0.5
    page.mouse.move(x, y)
    page.mouse.down()
    with page.expect_response(candidates_only):
        for dx in range(5, 45, 5):
            page.mouse.move(x + dx, y)
    held = slider.input_value()
    expect(page.locator("#tau-out")).to_have_text(held)
    for dx in range(45, 85, 5):
        page.mouse.move(x + dx, y)
    page.mouse.up()
    assert float(slider.input_value()) > float(held) + 0.5, (held, slider.input_value())
    expect(page.locator("#tau-out")).to_have_text(slider.input_value())
    expect(slider).to_have_attribute("data-unswapped", "")
    # a cold τ: the first bar near 100 %, its percentage on one line
    set_temperature(page, "0.1")
    expect(page.locator("li.bar .pct").first).to_have_text("100.0%")
    assert rect_height(page, "li.bar .pct") <= 1.2 * rect_height(page, "li.bar .tok")
    # top-k: the tokens a sampler can no longer draw are greyed
    page.locator("#top_k").fill("3")
    with page.expect_response(candidates_only):
        page.locator("#top_k").press("Tab")
    expect(page.locator("li.bar.cut")).to_have_count(7)
    expect(page.locator("#cand-hint")).to_contain_text("Greyed tokens are cut off")
    assert "top_k=3" in page.url
    expect(page.locator("#decoder-view")).to_have_attribute("data-unswapped", "")


def test_selecting_a_candidate_appends_it(page: Page) -> None:
    page.goto(f"/decoder?text={TEXT}")
    page.locator("li.bar a").first.click()
    expect(page.locator("#text")).to_have_value(f"{TEXT} Paris")
    expect(page.locator(".tokens-line .tok-chip")).to_have_count(6)
    expect(page.locator(".tokens-line .tok-chip").last).to_have_text(FIRST)
    expect(page.locator("#last-h")).to_contain_text(f"the last token, “{FIRST}”")
    expect(page.locator(".strip .strip-tok").last).to_have_text(FIRST)
    assert "text=The+capital+of+France+is+Paris" in page.url
    # the text box follows, so the next run reads the longer text
    page.get_by_role("button", name="Run the model").click()
    expect(page.locator(".tokens-line .tok-chip")).to_have_count(6)
    expect(page.locator(".tokens-line .tok-chip").last).to_have_text(FIRST)


def test_write_four_tokens_is_the_api_greedy_generation(page: Page, base_url: str) -> None:
    api = post_json(base_url, "/api/generate", {"text": TEXT, "max_new_tokens": 4, "temperature": 0})
    assert len(api["steps"]) == 4
    longer = TEXT + api["text"]
    page.goto(f"/decoder?text={TEXT}")
    page.get_by_role("button", name="Write 4 tokens").click()
    expect(page.locator("#text")).to_have_value(longer, timeout=20_000)  # four passes, then the page: under load
    # the page reads the longer text afresh: its tokens are the API's for that text (the BPE may merge
    # generated tokens, "↵" "↵" into "↵↵")
    tokens = post_json(base_url, "/api/decoder", {"text": longer})["tokens"]
    expect(page.locator(".tokens-line .tok-chip")).to_have_text([readable(t) for t in tokens])
    assert "generate" not in page.url  # reloading the permalink does not write on again


def test_a_head_steps_through_to_a_softmax_row(page: Page) -> None:
    page.goto(f"/decoder?text={TEXT}")
    page.locator('.dv-grid a.thumb[data-head="L18 H7"]').click()
    expect(page.locator("#steps-h")).to_have_text("Step through one head: L18 H7")
    expect(page.locator("a.thumb.selected")).to_have_attribute("data-head", "L18 H7")
    assert "layer=18&head=7" in page.url
    weights = page.locator('#stage-softmax table.heatmap[data-ref="softmax"]')
    weights.locator("tbody tr").nth(4).locator("td").nth(1).click()  # query 5 "␣is", key 2 "␣capital"
    inspector = page.locator("#decoder-inspector")
    expect(inspector.locator(".inspect-title")).to_contain_text("query 5")
    rows = inspector.locator("table.arith-table tbody tr")
    expect(rows).to_have_count(5)  # a causal row: the keys up to and including the query
    expect(rows.nth(1)).to_have_class("sel")
    printed = [float(s.replace("−", "-")) for s in rows.locator("td strong").all_inner_texts()]
    assert abs(sum(printed) - 1) <= 0.0005 * len(printed), printed  # each weight rounded to 3 decimals
    expect(inspector.locator("table.arith-table tfoot td").last).to_have_text("1.000")
    assert "matrix=softmax&row=5&col=2" in page.url


@pytest.mark.parametrize("js_enabled", [False])
def test_without_javascript_a_candidate_is_a_link(page: Page) -> None:
    page.goto(f"/decoder?text={TEXT}")
    expect(page.locator("li.bar")).to_have_count(10)
    first = page.locator("li.bar a").first
    expect(first.locator(".tok")).to_have_text(FIRST)
    first.click()
    page.wait_for_url("**/decoder?text=The+capital+of+France+is+Paris*")
    expect(page.locator("#text")).to_have_value(f"{TEXT} Paris")
    expect(page.locator(".tokens-line .tok-chip").last).to_have_text(FIRST)
    expect(page.locator("li.bar")).to_have_count(10)


def test_a_too_long_text_is_named_and_the_last_result_stays(page: Page, page_log: PageLog) -> None:
    page_log.allow(422, "/decoder", "GET")  # on purpose
    page.goto(f"/decoder?text={TEXT}")
    too_long = ("The capital of France is Paris. " * 40)[:1200]
    # the box's maxlength stops typing at 1,000 characters; a value set from outside is still sent
    page.locator("#text").evaluate("(e, v) => { e.value = v; }", too_long)
    page.get_by_role("button", name="Run the model").click()
    expect(page.locator("#err-decoder-text")).to_contain_text("at most 1000 characters; this one has 1200")
    expect(page.locator("li.bar")).to_have_count(10)
    expect(page.locator("li.bar .tok").first).to_have_text(FIRST)
    expect(page.locator(".tokens-line .tok-chip")).to_have_count(5)
    # within the characters but over the tokens: 20 sentences of 7 tokens
    page.locator("#text").fill(" ".join(["The capital of France is Paris."] * 20))
    page.get_by_role("button", name="Run the model").click()
    expect(page.locator("#err-decoder-text")).to_contain_text("the text is 140 tokens; the limit is 128")
    expect(page.locator("li.bar .tok").first).to_have_text(FIRST)
    page.locator("#text").fill(f"{TEXT} Paris")
    page.get_by_role("button", name="Run the model").click()
    expect(page.locator("#err-decoder-text")).to_be_empty()
    expect(page.locator(".tokens-line .tok-chip")).to_have_count(6)


def test_why_this_word_shows_each_heads_share_and_steps_a_head(page: Page, base_url: str) -> None:
    """The grid of shares fits every screen (its box scrolls, never the page), a contrast chosen in the form
    names both tokens, and a head's cell steps through that head."""
    page.goto(f"/decoder?text={TEXT}")
    why = page.locator("#why")
    expect(why.locator("h2")).to_have_text("Why “␣Paris”? Each part's share of its score")
    expect(why.locator(".why-grid tbody tr")).to_have_count(30)
    api = post_json(base_url, "/api/decoder/attribution", {"text": TEXT})
    best = max((p for p in api["parts"] if p["kind"] == "head"), key=lambda p: p["value"])
    name = f"L{best['layer'] + 1} H{best['head'] + 1}"
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        why.scroll_into_view_if_needed()
        overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"the page is {overflow} px wider than {width}×{height}"
        save_screenshot(page, f"why-{width}x{height}", full_page=False)
    page.set_viewport_size({"width": 1366, "height": 768})
    why.locator(".why-choose").nth(1).get_by_role("link", name="␣the", exact=True).click()
    page.wait_for_url("**against=*")
    expect(page.locator("#why h2")).to_have_text("Why “␣Paris” and not “␣the”? Each part's share")
    page.locator(f'#why .why-grid a[title="{name}"]').click()
    expect(page.locator("#steps-h")).to_have_text(f"Step through one head: {name}")
    assert f"layer={best['layer'] + 1}&head={best['head'] + 1}" in page.url


def test_draws_rollout_queries_and_keys_and_each_heads_effect_fit_every_screen(page: Page) -> None:
    """"Draw 20 times" swaps in twenty draws that add up and repeat with their seed; the rollout's lines and map,
    the queries-and-keys picture and the catalogue's "switched off" column are drawn and fit every screen."""
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto(f"/decoder?text={TEXT}&top_k=5")
    page.locator("#candidates").evaluate("e => e.setAttribute('data-unswapped', '')")
    with page.expect_response(candidates_only):
        page.get_by_role("link", name="Draw 20 times").click()
    counts = page.locator(".draw-bars .count")
    expect(counts.first).to_contain_text("of 20")
    drawn = [int(c.split(" of ")[0]) for c in counts.all_inner_texts()]
    assert sum(drawn) == 20 and len(drawn) <= 5  # top-k 5: never more than five different tokens
    assert "draw=1" in page.url
    expect(page.locator("#candidates")).to_have_attribute("data-unswapped", "")  # only the bars and draws swapped
    first = page.locator(".draw-bars").inner_text()
    page.get_by_role("link", name="Draw 20 more").click()
    page.wait_for_url("**draw=2*")
    page.goto(page.url.replace("draw=2", "draw=1"))  # the same seed draws the same tokens
    expect(page.locator(".draw-bars .count").first).to_be_visible()
    assert page.locator(".draw-bars").inner_text() == first
    expect(page.locator("#rollout-lines-figure svg line").first).to_be_attached()
    expect(page.locator("#rollout-map svg")).to_be_visible()
    expect(page.locator("#qk-map .qk-q")).to_have_count(5)  # one query and one key per token
    expect(page.locator("#qk-map .qk-k")).to_have_count(5)
    expect(page.locator("#catalogue td.effect")).to_have_count(9)
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        for part in ("#draws", "#rollout", "#qk-map", "#catalogue"):
            page.locator(part).scroll_into_view_if_needed()
            assert overflow(page) <= 0, f"{part}: the page is wider than {width}×{height}"
            save_screenshot(page, f"decoder-{part[1:]}-{width}x{height}", full_page=False)


def test_patching_from_next_word_shows_both_maps_on_every_screen(page: Page, page_log: PageLog) -> None:
    """From "Why this word?" to "Patch activations" with the page's text; a word changed and patched: the maps
    come (after the progress bar, if the server takes a while), fit every screen, and the URL is their permalink."""
    page_log.allow(422, "/decoder/patching", "GET")  # on purpose: a corrupted text with more tokens
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto(f"/decoder?text={TEXT}")
    page.locator(".patch-link a").click()
    expect(page.locator("#corrupted")).to_have_value(TEXT)
    page.locator("#corrupted").fill("The capital of Spain is")
    page.get_by_role("button", name="Patch every activation").click()
    expect(page.locator("#patch-heads tbody tr")).to_have_count(30, timeout=120_000)
    expect(page.locator("#patch-residual tbody tr").first.locator("td")).to_have_count(5)
    expect(page.locator(".patch-score")).to_contain_text("logit(“␣Paris”) − logit(“␣Madrid”)")
    assert "corrupted=The+capital+of+Spain+is" in page.url
    page.locator("#corrupted").fill("The capital of the United Kingdom is")  # more tokens: named, the maps stay
    page.get_by_role("button", name="Patch every activation").click()
    expect(page.locator("#err-decoder-corrupted")).to_contain_text("change words, not their number of tokens")
    expect(page.locator("#patch-heads tbody tr")).to_have_count(30)
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        for part in ("#patching-form", "#patch-residual", "#patch-heads"):
            page.locator(part).scroll_into_view_if_needed()
            assert overflow(page) <= 0, f"{part}: the page is wider than {width}×{height}"
            save_screenshot(page, f"patching-{part[1:]}-{width}x{height}", full_page=False)


def test_which_words_made_it_shades_the_text_on_every_screen(page: Page) -> None:
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto(f"/decoder?text={TEXT}")
    page.get_by_role("link", name="Integrated gradients (16 steps)").click()
    expect(page.locator("#saliency .saliency-tokens li")).to_have_count(5, timeout=120_000)
    expect(page.locator("#saliency .saliency-sum")).to_contain_text("the shares add up to")
    assert "saliency=integrated" in page.url
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        page.locator("#saliency").scroll_into_view_if_needed()
        assert overflow(page) <= 0, f"the page is wider than {width}×{height}"
        save_screenshot(page, f"decoder-saliency-{width}x{height}", full_page=False)
