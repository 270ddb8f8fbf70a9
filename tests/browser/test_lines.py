"""The attention lines in a real Chromium, with and without JavaScript: one visible line per query–key
pair and head, widths that follow the weights, hover and focus isolating a token's lines, the head
checkboxes, presenter mode, a phone's width, and screenshots of both bank presets."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from app.state.scenario import from_preset

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from playwright.sync_api import Locator, Page

pytestmark = pytest.mark.browser

LAPTOP = {"width": 1366, "height": 768}
PHONE = {"width": 390, "height": 844}
BANK = 6  # bank's row in "Sherry is lying on the river bank"

# Whether an element of the figure is drawn: no ancestor up to the <svg> is display: none or fully
# transparent, and it is not visibility: hidden (checkVisibility() answers true inside a hidden <g>).
SHOWN = """const shown = (el) => {
  if (getComputedStyle(el).visibility !== 'visible') return false;
  for (let n = el; n && n.tagName !== 'svg'; n = n.parentElement) {
    const style = getComputedStyle(n);
    if (style.display === 'none' || parseFloat(style.opacity) === 0) return false;
  }
  return true;
};"""
# Per head ("h0", …): how many of the query-grouped lines ("qs") or of the keys' own copies ("ks") are drawn.
VISIBLE = """(svg, side) => {
  """ + SHOWN + """
  const seen = {};
  svg.querySelectorAll(`.${side} .e line`).forEach((line) => {
    const head = [...line.parentElement.classList].find((c) => /^h\\d$/.test(c));
    if (shown(line)) seen[head] = (seen[head] || 0) + 1;
  });
  return seen;
}"""
# A line's opacity as drawn: its own times every ancestor's.
OPACITY = """(el) => {
  let o = 1;
  for (let n = el; n && n.tagName !== 'svg'; n = n.parentElement) o *= parseFloat(getComputedStyle(n).opacity);
  return o;
}"""


def figure(page: Page) -> Locator:
    return page.locator("#stage-softmax svg.lines-svg")


def query(page: Page, i: int) -> Locator:
    return figure(page).locator(".qs > .tok").nth(i)


def key(page: Page, j: int) -> Locator:
    return figure(page).locator(".ks > .tok").nth(j)


def visible_lines(page: Page, side: str = "qs") -> dict[str, int]:
    return figure(page).evaluate(VISIBLE, side)


def line_opacity(token: Locator) -> float:
    """How opaque a token's lines are drawn (its first head group's)."""
    return float(token.locator(".e").first.evaluate(OPACITY))


def shown_weights(token: Locator) -> int:
    """How many of the token's printed weights are on screen."""
    count = "(t) => { " + SHOWN + " return [...t.querySelectorAll('.wt text')].filter(shown).length; }"
    return int(token.evaluate(count))


def open_bank(page: Page, preset: str = "bank-river", **query_args: str) -> None:
    page.set_viewport_size(LAPTOP)
    extra = "".join(f"&{k}={v}" for k, v in query_args.items())
    page.goto(f"/?preset={preset}&stage=softmax{extra}")
    expect(figure(page)).to_be_visible()


@pytest.mark.parametrize("js_enabled", [True, False])
def test_lines_follow_the_weights_and_a_token_in_use_shows_only_its_own(page: Page, js_enabled: bool) -> None:
    open_bank(page)
    sc, _ = from_preset("bank-river")
    t, s = len(sc.tokens), len(sc.key_tokens)
    assert visible_lines(page) == {"h0": t * s, "h1": t * s, "h2": t * s}
    assert visible_lines(page, "ks") == {}  # a key's own copy waits until the key is in use

    # Widths as drawn follow the weights: 6·w, monotone.
    bank_lines = query(page, BANK).locator(".e line")
    drawn = bank_lines.evaluate_all(
        "ls => ls.map((l) => [parseFloat(l.dataset.w), parseFloat(getComputedStyle(l).strokeWidth)])")
    assert len(drawn) == 3 * s
    for w, width in drawn:
        assert width == pytest.approx(6 * w, abs=0.006)
    ordered = sorted(drawn)
    assert all(a[1] <= b[1] for a, b in zip(ordered, ordered[1:], strict=False) if a[0] < b[0])

    # The preset's focus, bank, is drawn strong with its weights printed; the other queries faint.
    assert line_opacity(query(page, BANK)) == pytest.approx(1.0)
    assert line_opacity(query(page, 0)) == pytest.approx(0.12)
    assert shown_weights(query(page, BANK)) == 3 * s

    # Hovering Sherry shows Sherry's lines and weights; bank's fade.
    query(page, 0).locator(".hit").hover()
    assert line_opacity(query(page, 0)) == pytest.approx(1.0)
    assert line_opacity(query(page, BANK)) == pytest.approx(0.06)
    assert shown_weights(query(page, 0)) == 3 * s and shown_weights(query(page, BANK)) == 0

    # Hovering the key river: the queries' lines give way to river's own, one per query and head.
    key(page, 5).locator(".hit").hover()
    assert visible_lines(page) == {}
    assert visible_lines(page, "ks") == {"h0": t, "h1": t, "h2": t}
    assert shown_weights(key(page, 5)) == 3 * t

    # Focus (Tab, or a tap) does the same as hover once the pointer has left.
    page.mouse.move(0, 0)
    query(page, 2).focus()
    assert line_opacity(query(page, 2)) == pytest.approx(1.0)
    assert line_opacity(query(page, BANK)) == pytest.approx(0.06)

    # Unticking a head hides its lines; the others stay.
    page.get_by_role("checkbox", name="head 1: who").uncheck()
    assert visible_lines(page) == {"h1": t * s, "h2": t * s}
    page.get_by_role("checkbox", name="head 1: who").check()
    assert visible_lines(page) == {"h0": t * s, "h1": t * s, "h2": t * s}


@pytest.mark.parametrize(("preset", "where"), [("bank-river", "river"), ("bank-money", "money")])
def test_screenshots_of_bank_s_lines(page: Page, screenshot: Callable[..., Path], preset: str, where: str) -> None:
    open_bank(page, preset)
    bank = query(page, len(from_preset(preset)[0].tokens) - 1)
    where_lines = bank.locator(".e.h2 line")
    weights = [float(w) for w in where_lines.evaluate_all("ls => ls.map((l) => l.dataset.w)")]
    strongest = weights.index(max(weights))
    assert key(page, strongest).locator(".lab").text_content() == where
    figure(page).scroll_into_view_if_needed()
    screenshot(f"lines-{preset}-1366x768", full_page=False)


def test_unticked_heads_stay_unticked_after_an_edit(page: Page) -> None:
    open_bank(page)
    page.get_by_role("checkbox", name="head 2: when").uncheck()
    with page.expect_response(re.compile(r"/stages$")):
        page.locator("#next-stage").click()
    with page.expect_response(re.compile(r"/stages$")):
        page.locator("#prev-stage").click()
    expect(figure(page)).to_be_visible()
    expect(page.get_by_role("checkbox", name="head 2: when")).not_to_be_checked()
    assert "h1" not in visible_lines(page)


@pytest.mark.parametrize("js_enabled", [False])
def test_head_checkboxes_work_in_presenter_mode(page: Page) -> None:
    open_bank(page, "bank-money", present="on")
    expect(page.locator("#workspace")).to_have_class(re.compile(r"\bpresent\b"))
    page.get_by_role("checkbox", name="head 3: where").uncheck()
    assert set(visible_lines(page)) == {"h0", "h1"}
    box = figure(page).bounding_box()
    assert box is not None and box["y"] + box["height"] <= LAPTOP["height"] * 1.5  # a projector's screen and a bit


def test_the_figure_fits_a_phone(page: Page, screenshot: Callable[..., Path]) -> None:
    page.set_viewport_size(PHONE)
    page.goto("/?preset=bank-money&stage=softmax")
    expect(figure(page)).to_be_visible()
    fig = page.locator("#stage-softmax figure.lines")
    fig.scroll_into_view_if_needed()
    box, svg = fig.bounding_box(), figure(page).bounding_box()
    assert box is not None and svg is not None
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    assert svg["x"] + svg["width"] <= box["x"] + box["width"] + 0.5
    assert float(query(page, 0).locator(".lab").evaluate(  # labels stay readable, about 10 px or more
        "el => el.getBoundingClientRect().height")) >= 9
    screenshot("lines-bank-money-390x844", full_page=False)


# The figure beside the weights: boxes, the size a token's label is drawn at, and each label's contrast against
# what is behind it (WCAG's relative luminance of the computed colours; the first opaque background up the tree).
VIEW = """() => {
  const stage = document.getElementById('stage-softmax');
  const fig = stage.querySelector('figure.lines'), svg = fig.querySelector('svg.lines-svg');
  const weights = stage.querySelector('table.heatmap[data-ref^="softmax."]');
  const box = (el) => {
    const b = el.getBoundingClientRect();
    return {left: b.left, right: b.right, top: b.top, bottom: b.bottom};
  };
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = (c) => {
    const [r, g, b] = rgb(c).slice(0, 3)
      .map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const background = (el) => {
    for (let n = el; n; n = n.parentElement) {
      const c = getComputedStyle(n).backgroundColor, a = rgb(c);
      if (a.length === 3 || (a.length === 4 && a[3] === 1)) return c;
    }
    return 'rgb(255, 255, 255)';
  };
  const behind = background(fig);
  const ratio = (fg) => {
    const [a, b] = [lum(fg), lum(behind)].sort((x, y) => y - x);
    return (a + 0.05) / (b + 0.05);
  };
  const shown = (t) => t.getBoundingClientRect().width > 0 && getComputedStyle(t).visibility === 'visible';
  const texts = [...svg.querySelectorAll('.lab, .colh, .wt text')].filter(shown)
    .map((t) => [t.textContent, ratio(getComputedStyle(t).fill)]);
  const html = [...fig.querySelectorAll('figcaption, .head-toggle')]
    .map((e) => [e.textContent.trim().slice(0, 20), ratio(getComputedStyle(e).color)]);
  const label = svg.querySelector('.qs .lab');
  return {
    fig: box(fig), svg: box(svg), weights: box(weights), content: stage.querySelector('.weights-view').clientWidth,
    label: parseFloat(getComputedStyle(label).fontSize) * label.getScreenCTM().a,
    contrast: texts.concat(html), width: innerWidth, height: innerHeight,
  };
}"""
WIDE_SCREENS = ((1366, 768), (1920, 1080))
NARROW_SCREENS = ((768, 1024), (390, 844))


@pytest.mark.parametrize("inputs_open", [False])  # the page as it comes: the stages have the whole width
def test_the_lines_are_a_view_beside_the_weights_sized_to_the_screen(
    page: Page, screenshot: Callable[..., Path]
) -> None:
    """The lines figure has its own place beside the softmax weights A on a laptop and a projector (at least 40 %
    of the stage's width, wholly on screen once the stage is), below them on a tablet, a phone, or beside the
    open inputs (a stage under 1100 px); the drawing
    fills its place; token labels of 14 px or more on a laptop; every label at 4.5:1 contrast or more."""
    page.set_viewport_size(LAPTOP)
    page.goto("/?preset=bank-money&stage=softmax")
    expect(figure(page)).to_be_visible()
    page.mouse.move(0, 0)
    for width, height in WIDE_SCREENS + NARROW_SCREENS:
        page.set_viewport_size({"width": width, "height": height})
        page.locator("#stage-softmax").evaluate("el => el.scrollIntoView({block: 'start'})")
        m = page.evaluate(VIEW)
        where = f"at {width}×{height}"
        fig, svg, weights = m["fig"], m["svg"], m["weights"]
        assert fig["left"] >= 0 and fig["right"] <= width + 0.5, f"{where}: the figure is wider than the screen"
        assert svg["right"] - svg["left"] >= fig["right"] - fig["left"] - 2, f"{where}: the drawing is narrower"
        if (width, height) in WIDE_SCREENS:
            assert fig["left"] >= weights["right"], f"{where}: the figure is not beside the weights {m}"
            assert fig["top"] < weights["bottom"] and fig["bottom"] > weights["top"], f"{where}: not beside {m}"
            assert fig["right"] - fig["left"] >= 0.4 * m["content"] - 0.5, f"{where}: under 40 % of the stage"
            assert fig["top"] >= 0 and fig["bottom"] <= height, f"{where}: the figure is not on screen {fig}"
            assert m["label"] >= 14, f"{where}: token labels drawn at {m['label']:.1f} px"
        else:
            assert fig["top"] >= weights["bottom"], f"{where}: the figure is not below the weights {m}"
        low = [(text, round(r, 2)) for text, r in m["contrast"] if r < 4.5]
        assert not low, f"{where}: labels under 4.5:1 contrast: {low}"
        screenshot(f"lines-view-{width}x{height}", full_page=False)


PROJECTOR = {"width": 1920, "height": 1080}
LABEL_ON_A_PROJECTOR = 17  # px: a token's name read from the back of a room (14-unit labels drew 16 px here)


def test_presenter_mode_sets_the_tokens_labels_large_enough_for_a_room(page: Page) -> None:
    """Bank ①'s weights and their lines in presenter mode at 1920×1080: every token's label at least 17 px as drawn
    (its font size times the drawing's scale), and none cut off by the drawing's box."""
    page.set_viewport_size(PROJECTOR)
    page.goto("/?preset=bank-river&stage=softmax&present=on")
    page.wait_for_selector('#stage-softmax[data-fitted="1920x1080"]', state="attached")
    labels = page.evaluate("""() => [...document.querySelectorAll('#stage-softmax .lines-svg .lab')].map((t) => {
      const b = t.getBoundingClientRect();
      return {size: parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a, left: b.left, right: b.right};
    })""")
    assert labels, "no labels drawn"
    smallest = min(label["size"] for label in labels)
    assert smallest >= LABEL_ON_A_PROJECTOR, f"the lines' labels are {smallest:.1f} px on a projector"
    assert all(label["left"] >= 0 and label["right"] <= PROJECTOR["width"] for label in labels)
