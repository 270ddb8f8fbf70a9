"""Finding one's way on the page, on the four screens of a class (1366×768, 1920×1080, 768×1024, 390×844).

After every change of stage (Next, Prev, a map link, a gradient chip, a new scenario) the stage's heading and
the top of its result are on screen; after a view control's change the focus is still on that control; the
skip link is the first Tab stop and leads to the stage; the heatmaps of the inputs are edited in place from the
keyboard; the Inputs drawer fits a phone and a 6-dimension X beside the stages on a laptop; the Learn panel's
target inputs show their numbers whole.

One page per preset for the sweep: the viewport is resized rather than the page reloaded. Motion is reduced
(the page then scrolls at once), so a measure right after a swap sees where the page settles.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from app.lesson.presets import PRESETS
from tests.browser.conftest import htmx_idle, open_class_menu, save_screenshot
from tests.conftest import VIEWPORTS

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None
    PlaywrightTimeout = TimeoutError

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

LAPTOP, PHONE = VIEWPORTS[0], VIEWPORTS[3]


@pytest.fixture
def inputs_open() -> bool:
    """The page as it comes: the inputs drawer closed."""
    return False


# Where the stage in view is: its heading and the top of its result (its first matrix that is not an operand).
SEEN = """() => {
  const stage = document.querySelector('#stages article.stage');
  const h = stage.querySelector('.stage-head h3').getBoundingClientRect();
  const table = stage.querySelector('figure.panel:not(.operand) table');
  const r = table ? table.getBoundingClientRect() : h;
  return {stage: stage.id, headTop: h.top, headBottom: h.bottom, resultTop: r.top, height: innerHeight,
          title: stage.querySelector('.stage-head h3').textContent.trim()};
}"""


def settle(page: Page) -> None:
    """Wait until no request is in flight and htmx has settled the last swap."""
    htmx_idle(page)
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def assert_stage_seen(page: Page, after: str, stage: str | None = None) -> None:
    settle(page)
    try:  # where the page comes to rest (a scroll may follow the last frame)
        page.wait_for_function(
            f"() => {{ const m = ({SEEN})(); return m.headTop >= 0 && m.headBottom <= m.height"
            " && m.resultTop >= 0 && m.resultTop < m.height - 10; }",
            timeout=2_000,
        )
    except PlaywrightTimeout:
        pass  # measured and reported below
    m = page.evaluate(SEEN)
    where = f"after {after}, {m['stage']} ({m['title']}) at {page.viewport_size}"
    if stage is not None:
        assert m["stage"] == f"stage-{stage}", f"{where}: expected stage {stage}"
    assert 0 <= m["headTop"] and m["headBottom"] <= m["height"], f"{where}: heading off screen {m}"
    assert 0 <= m["resultTop"] < m["height"] - 10, f"{where}: result's top off screen {m}"


def shown_links(page: Page, nav: str) -> list[str]:
    """The stage keys of the links in the drawing of `nav` that is on screen, the current one left out."""
    return page.evaluate(
        """(nav) => [...document.querySelectorAll(nav + ' a[data-stage]')]
      .filter(a => a.getBoundingClientRect().width > 0 && !a.classList.contains('current')
                   && a.getAttribute('aria-current') !== 'step' && !a.querySelector('.current'))
      .map(a => a.id || a.dataset.stage)""",
        nav,
    )


def current_stage(page: Page) -> str:
    return page.locator("#stages input[name='stage']").input_value()


def click_stage_link(page: Page, nav: str, index: int) -> str | None:
    """Click a link of the map (or a gradient chip) other than the current stage; its stage key, or None."""
    links = shown_links(page, nav)
    if not links:
        return None
    ident = links[index % len(links)]
    link = (
        page.locator(f"#{ident}")
        if page.locator(f"#{ident}").count()
        else page.locator(f"{nav} a[data-stage='{ident}']")
    )
    key = link.get_attribute("data-stage")
    link.click()
    return key


def other_preset(preset: str) -> str:
    keys = sorted(PRESETS)
    return keys[(keys.index(preset) + 1) % len(keys)]


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_the_stage_comes_into_view_after_every_change_of_stage(page: Page, preset: str) -> None:
    page.emulate_media(reduced_motion="reduce")
    page.set_viewport_size({"width": LAPTOP[0], "height": LAPTOP[1]})
    page.goto(f"/?preset={other_preset(preset)}")
    learn = bool(PRESETS[preset].goal)
    for n, (width, height) in enumerate(VIEWPORTS):
        page.set_viewport_size({"width": width, "height": height})
        if n % 2 == 0:  # a new scenario from the menu, at the top of the page
            with page.expect_navigation():
                page.select_option("#preset-choice", preset)
            assert_stage_seen(page, f"choosing {preset}")
        else:  # or after reading down the page
            page.evaluate("() => window.scrollTo(0, document.documentElement.scrollHeight)")
        if page.locator("#next-stage").is_enabled():
            page.click("#next-stage")
            assert_stage_seen(page, "Next")
        page.evaluate("() => window.scrollTo(0, 0)")
        if page.locator("#prev-stage").is_enabled():
            page.click("#prev-stage")
            assert_stage_seen(page, "Prev")
        page.evaluate("() => window.scrollTo(0, 0)")
        key = click_stage_link(page, ".pipeline-map", n * 3 + 2)
        assert key is not None, "no map link on screen"
        assert_stage_seen(page, f"the map's link to {key}", key)
        if learn:
            page.evaluate("() => window.scrollTo(0, 0)")
            key = click_stage_link(page, ".backward-map", n)
            assert key is not None, "no gradient chip on screen"
            assert_stage_seen(page, f"the gradient chip of {key}", key)
        if n % 2 == 1:  # back to the scenario's page for the next size
            page.evaluate("() => window.scrollTo(0, 0)")
            with page.expect_navigation():
                page.select_option("#preset-choice", other_preset(preset))
            assert_stage_seen(page, f"choosing {other_preset(preset)}")
        if learn and (width, height) == LAPTOP:
            assert page.locator("#learn").is_visible()


def test_the_stage_scrolls_smoothly_into_view_when_motion_is_welcome(page: Page) -> None:
    page.set_viewport_size({"width": LAPTOP[0], "height": LAPTOP[1]})
    page.goto("/?preset=learn-bank")
    page.click("#next-stage")
    page.wait_for_function(
        f"() => {{ const m = ({SEEN})(); return m.stage === 'stage-output' && m.headTop >= 0"
        " && m.resultTop < m.height - 10; }"
    )
    assert page.evaluate("() => document.activeElement.id") == "next-stage"  # the scroll took no focus
    save_screenshot(page, "navigation-learn-next-1366x768", full_page=False)


def test_the_stage_comes_into_view_under_the_teachers_class_bar(page: Page) -> None:
    page.emulate_media(reduced_motion="reduce")
    page.set_viewport_size({"width": LAPTOP[0], "height": LAPTOP[1]})
    page.goto("/?preset=learn-bank")
    open_class_menu(page)
    with page.expect_navigation():
        page.click("button[value='start_class']")
    expect(page.locator("#class-panel")).to_be_visible()
    page.click("#next-stage")
    assert_stage_seen(page, "Next in a class")


def press_and_swap(page: Page, key: str) -> None:
    with page.expect_response(lambda r: r.request.method == "POST"):
        page.keyboard.press(key)
    settle(page)


def test_the_focus_stays_on_the_view_control_the_student_uses(page: Page) -> None:
    page.set_viewport_size({"width": LAPTOP[0], "height": LAPTOP[1]})
    page.goto("/?preset=bank-river&stage=softmax")
    active = "() => document.activeElement && document.activeElement.name"

    page.focus("#stages input[name='temperature']")
    press_and_swap(page, "ArrowRight")
    expect(page.locator(".view-options output")).to_have_text("1.1")
    assert page.evaluate(active) == "temperature"
    press_and_swap(page, "ArrowRight")  # the slider moves, not the stage
    expect(page.locator(".view-options output")).to_have_text("1.2")
    assert page.evaluate(active) == "temperature"
    assert current_stage(page) == "softmax"

    page.focus("#stages select[name='decimals']")
    press_and_swap(page, "ArrowDown")
    assert page.evaluate(active) == "decimals"
    assert current_stage(page) == "softmax"

    page.focus("#stages select[name='head']")
    press_and_swap(page, "ArrowDown")  # this one swaps the whole workspace
    expect(page.locator("#stage-softmax figcaption").first).to_contain_text("head 2")
    assert page.evaluate(active) == "head"
    assert current_stage(page) == "softmax"

    # A control without an id is found again by its name and value: the Learn panel's step button.
    page.goto("/?preset=learn-bank")
    page.focus("button[value='learn_1']")
    press_and_swap(page, "Enter")
    expect(page.locator(".learn-status")).to_contain_text("after 1 step")
    assert page.evaluate("() => document.activeElement.value") == "learn_1"


def test_the_skip_link_is_the_first_stop_and_leads_to_the_stage(page: Page) -> None:
    page.set_viewport_size({"width": LAPTOP[0], "height": LAPTOP[1]})
    page.goto("/?preset=learn-bank")
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.className") == "skip-link"
    expect(page.locator(".skip-link")).to_be_in_viewport()
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.id") == "stage-softmax"
    page.wait_for_function(f"() => ({SEEN})().headTop >= 0 && ({SEEN})().headTop < 40")


def cell_text(page: Page, ref: str, row: int, col: int) -> str:
    return page.locator(f"table[data-ref='{ref}'] tbody tr").nth(row).locator("td").nth(col).inner_text()


def table_text(html: str, ref: str) -> str:
    found = re.search(rf'data-ref="{re.escape(ref)}".*?</table>', html, re.S)
    assert found, ref
    return re.sub(r"<[^>]+>", " ", found.group(0))


def test_the_x_heatmap_is_edited_in_place_from_the_keyboard(page: Page) -> None:
    page.set_viewport_size({"width": LAPTOP[0], "height": LAPTOP[1]})
    page.goto("/")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")  # the skip link: the stage in view, X
    page.keyboard.press("Tab")  # the first cell of X
    assert page.evaluate("() => document.activeElement.closest('table').dataset.ref") == "x"
    page.keyboard.press("ArrowRight")
    assert page.evaluate("() => document.activeElement.cellIndex") == 2
    before = cell_text(page, "x", 0, 1)
    assert before == "0.100"

    page.keyboard.press("Enter")  # edits
    box = page.locator("table[data-ref='x'] input.cell-edit")
    expect(box).to_be_focused()
    assert box.input_value() == page.locator("#editor input[name='x-0-1']").input_value()
    page.keyboard.type("9")
    page.keyboard.press("Escape")  # cancels
    expect(box).to_have_count(0)
    assert cell_text(page, "x", 0, 1) == before

    page.keyboard.press("Enter")
    page.keyboard.press("Control+a")
    page.keyboard.type("1.5")
    with page.expect_request(lambda r: r.method == "POST") as sent:
        page.keyboard.press("Enter")  # commits
    assert sent.value.headers.get("attention-edit") == "value"  # the light answer: the stage body alone
    settle(page)
    expect(page.locator("table[data-ref='x'] tbody tr").first.locator("td").nth(1)).to_have_text("1.500")
    assert page.evaluate(
        "() => [document.activeElement.closest('table').dataset.ref, document.activeElement.cellIndex]"
    ) == ["x", 2]  # the same cell, in the new table
    save_screenshot(page, "navigation-edit-x-1366x768", full_page=False)

    # Downstream: Q = X·W_Q follows.
    unedited = table_text(page.request.get("/?stage=qkv").text(), "q.0")
    page.click("#next-stage")
    settle(page)
    edited = " ".join(page.locator("table[data-ref='q.0']").inner_text().split())
    assert edited != " ".join(unedited.split())


def test_a_weight_is_edited_in_place_and_its_result_follows(page: Page) -> None:
    page.set_viewport_size({"width": PHONE[0], "height": PHONE[1]})
    page.goto("/?stage=qkv")
    q = page.locator("table[data-ref='q.0']")
    before = q.inner_text()
    page.locator("table[data-ref='w_q.0'] tbody tr").first.locator("td").first.dblclick()
    box = page.locator("table[data-ref='w_q.0'] input.cell-edit")
    expect(box).to_be_focused()
    box.fill("2")
    box.press("Enter")
    settle(page)
    expect(page.locator("table[data-ref='w_q.0'] tbody tr").first.locator("td").first).to_have_text("2.000")
    assert q.inner_text() != before
    assert page.locator("#editor input[name='w_q-0-0']").input_value() == "2"
    # Another head's matrices and a sum are not the drawer's numbers: not editable.
    page.goto("/?preset=positions")
    expect(page.locator("table[data-ref='x_input'][data-edit='x']")).to_have_count(1)
    expect(page.locator("table[data-ref='x'][data-edit]")).to_have_count(0)


@pytest.mark.parametrize("preset", ["default", "bank-river"])
def test_the_inputs_drawer_fits_a_phone(page: Page, preset: str) -> None:
    page.set_viewport_size({"width": PHONE[0], "height": PHONE[1]})
    page.goto(f"/?preset={preset}")
    page.click("#editor > summary")
    expect(page.locator("#editor input[name='x-0-0']")).to_be_visible()
    assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE[0]


# Every input of the grid inside the drawer's visible box and the screen.
GRID_SEEN = """(key) => {
  const body = document.querySelector('#editor .editor-body').getBoundingClientRect();
  const inputs = [...document.querySelectorAll(`#editor table[data-grid="${key}"] input`)];
  return inputs.filter(i => { const r = i.getBoundingClientRect();
    return r.left < body.left - 0.5 || r.right > body.right + 0.5 || r.right > innerWidth; }).map(i => i.name);
}"""


@pytest.mark.parametrize("preset", [p for p in sorted(PRESETS) if PRESETS[p].d_model == 6])
def test_the_inputs_drawer_shows_a_six_dimension_x_whole_on_a_laptop(page: Page, preset: str) -> None:
    page.set_viewport_size({"width": LAPTOP[0], "height": LAPTOP[1]})
    page.goto(f"/?preset={preset}")
    page.click("#editor > summary")
    expect(page.locator("#editor input.token").first).to_be_visible()
    assert page.locator("#editor table[data-grid='x'] thead th").count() >= 7  # the token column and 6 dimensions
    for key in ("x", "c"):
        assert page.evaluate(GRID_SEEN, key) == [], f"{preset}: inputs of {key} cut off"
    assert page.evaluate("() => document.documentElement.scrollWidth") <= LAPTOP[0]


def test_the_learn_targets_show_their_numbers_whole(page: Page) -> None:
    page.set_viewport_size({"width": LAPTOP[0], "height": LAPTOP[1]})
    page.goto("/?preset=learn-bank")
    page.click("#learn-settings > summary")
    cells = page.locator(".target-grid input.num")
    expect(cells.first).to_be_visible()
    assert cells.first.input_value().startswith("0.1428")
    cut = page.evaluate("""() => [...document.querySelectorAll('.target-grid input.num')]
      .filter(i => i.scrollWidth > i.clientWidth).map(i => i.name + '=' + i.value)""")
    assert cut == []


# learn-bank's pictures (the Learn panel above the stage) in a full run; the default preset's in every run.
@pytest.mark.parametrize("preset", ["default", pytest.param("learn-bank", marks=pytest.mark.slow)])
def test_screenshots_of_the_first_screen_a_step_and_an_edit(page: Page, preset: str) -> None:
    """Pictures to look at, at each size: a scenario's first screen, the screen after Next (with the Learn panel
    above the stage for learn-bank), and an edit in place."""
    page.emulate_media(reduced_motion="reduce")
    page.goto(f"/?preset={preset}")
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        page.evaluate("() => window.scrollTo(0, 0)")
        save_screenshot(page, f"navigation-first-{preset}-{width}x{height}", full_page=False)
        step = "#next-stage" if page.locator("#next-stage").is_enabled() else "#prev-stage"
        page.click(step)
        assert_stage_seen(page, step)
        save_screenshot(page, f"navigation-step-{preset}-{width}x{height}", full_page=False)
    if preset != "default":
        return
    page.goto("/")
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        page.locator(".skip-link").focus()
        page.keyboard.press("Enter")
        page.keyboard.press("Tab")
        page.keyboard.press("Enter")
        expect(page.locator("input.cell-edit")).to_be_focused()
        page.keyboard.type("2")
        save_screenshot(page, f"navigation-editing-{width}x{height}", full_page=False)
        page.keyboard.press("Escape")
