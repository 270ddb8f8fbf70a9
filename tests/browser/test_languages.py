"""The page in French, German, Spanish and Chinese, as a student sees it in Chromium.

For every preset, in every language: each stage, stepped through with Next as a student does, shows no English
sentence (beyond tokens, formulas and names) and nothing cut or overflowing; the first stage is measured at the
four screens of a class (1366×768, 1920×1080, 768×1024, 390×844), and presenter mode fits a projector. /model,
/decoder and a live class, whose students each read their own language, are swept the same way. The language
selector switches at once without losing an edit, and a French student types −0,25.

An English sentence is found two ways: a text on screen that is an English message of the catalogue left
untranslated, or a run of English words (the, of, with, …) that no catalogue knows; tokens (the seed articles' own
words), the real models' English sentences, maths, code and the page's names are not sentences to translate.
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING

import pytest
from babel.messages.pofile import read_po

from app.i18n import LANGUAGES, LOCALES_DIR
from app.lesson.presets import PRESETS
from tests.browser.conftest import open_class_menu, save_screenshot
from tests.browser.test_decoder_page import wait_for_decoder
from tests.browser.test_viewports import stage_keys
from tests.conftest import SAMPLE_LANGUAGES, SAMPLE_PRESETS, VIEWPORTS, swept

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's fixtures skip every test (or fail them under REQUIRE_BROWSER=1)
    expect = None

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.browser

TRANSLATED = [lang for lang in LANGUAGES if lang != "en"]
SWEPT = swept(TRANSLATED, SAMPLE_LANGUAGES)  # every one in a full run (tests/conftest.py)


def languages_of(preset: str) -> list[str]:
    """The languages a preset's every stage is stepped through in: the sample presets in every language of the
    run; in a full run each other preset in one, in turn, so that each language meets a quarter of the presets
    (every message is checked translated in every language by tests/i18n, every run)."""
    if preset in SAMPLE_PRESETS or len(SWEPT) < len(TRANSLATED):
        return SWEPT
    return [TRANSLATED[sorted(PRESETS).index(preset) % len(TRANSLATED)]]

# Every visible text of the page, with what it is in: text nodes under elements the reader sees, not inside
# maths, code, inputs, tokens (a heatmap's labels, the lines' words, a model's pieces), nor what says translate="no".
VISIBLE_TEXTS = """() => {
  const skip = 'math, code, pre, kbd, script, style, textarea, select, noscript, template, [translate="no"], ' +
               '.visually-hidden, table.heatmap th, .tok, .token, .tokens, .piece, .pieces, .sentence, svg text';
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const text = n.textContent.replace(/\\s+/g, ' ').trim();
    if (!/[A-Za-z]{2}/.test(text)) continue;
    const el = n.parentElement;
    if (!el || el.closest(skip)) continue;
    if (!el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true})) continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    const cls = typeof el.className === 'string' && el.className ? '.' + el.className.split(' ')[0] : '';
    out.push([text, el.tagName.toLowerCase() + cls]);
  }
  for (const el of document.querySelectorAll('[aria-label], [title], [placeholder]')) {
    if (el.closest(skip) && !el.matches('select, textarea')) continue;
    if (!el.checkVisibility()) continue;
    for (const a of ['aria-label', 'title', 'placeholder']) {
      const value = el.getAttribute(a);
      if (value && /[A-Za-z]{2}/.test(value)) out.push([value, el.tagName.toLowerCase() + '@' + a]);
    }
  }
  return out;
}"""

# What is cut or overflows: the page wider than the screen; a button, label, summary, heading or link whose text
# is wider than its box where the box hides the rest.
CUT = """() => {
  const cut = [];
  const named = 'button, summary, label, h1, h2, h3, h4, legend, a, th, .top *';
  for (const el of document.querySelectorAll(named)) {
    if (!el.checkVisibility() || el.closest('.visually-hidden') || el.getBoundingClientRect().width <= 2) continue;
    const s = getComputedStyle(el);
    const hides = ['hidden', 'clip'].includes(s.overflowX) || s.textOverflow === 'ellipsis';
    if (hides && el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0)
      cut.push([el.tagName.toLowerCase(), el.textContent.trim().slice(0, 60), el.scrollWidth, el.clientWidth]);
  }
  return {overflow: document.documentElement.scrollWidth - innerWidth, cut};
}"""

ENGLISH_WORDS = frozenset(
    "the of and is are with this that each every which from your you what how when into by not can its their "
    "these those there here been have were would should could does than then only".split())  # not German's was, also
NAMES = ("MiniLM", "SmolLM2", "all-MiniLM-L6-v2", "SmolLM2-135M-Instruct", "Hugging Face", "PyTorch", "NumPy",
         "GitHub", "BertViz", "Transformer", "SVG", "PNG", "CSV", "JSON", "LaTeX", "htmx", "QR")


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", text)).strip()


@cache
def untranslated_english(lang: str) -> frozenset[str]:
    """The English messages whose text differs in ``lang``: seen on a ``lang`` page, they were not translated."""
    with (LOCALES_DIR / lang / "LC_MESSAGES" / "messages.po").open("rb") as f:
        cat = read_po(f, locale=lang)
    out = set()
    for m in cat:
        ids = m.id if isinstance(m.id, tuple) else (m.id,)
        strings = m.string if isinstance(m.string, tuple) else (m.string,)
        for i in ids:
            text = _norm(i)
            if re.search(r"[{}$%]", text) or not re.search(r"[A-Za-z]{3}", text):
                continue
            if all(_norm(s) != text for s in strings):
                out.add(text)
    return frozenset(out)


@cache
def token_words() -> frozenset[str]:
    """Every token and sentence of the presets and the real models' examples: words a page shows as they are."""
    from app.lesson import model_sentences

    words = {t.lower() for p in PRESETS.values() for t in p.tokens}
    for value in vars(model_sentences).values():
        for text in value if isinstance(value, tuple | list) else (value,):
            if isinstance(text, str):
                words.update(w.lower() for w in re.findall(r"[A-Za-z']+", text))
    return frozenset(words)


def english_on_screen(page: Page, lang: str) -> list[tuple[str, str]]:
    found = []
    messages = untranslated_english(lang)
    for text, where in page.evaluate(VISIBLE_TEXTS):
        plain = text
        for name in NAMES:
            plain = plain.replace(name, " ")
        words = re.findall(r"[A-Za-z']+", plain)
        if text in messages and len(text) > 2:
            found.append((text, where))
            continue
        english = [w for w in words if w.lower() in ENGLISH_WORDS and w.lower() not in token_words()]
        if len(words) >= 3 and len({w.lower() for w in english}) >= 2:
            found.append((text, where))
    return found


def check_language(page: Page, lang: str, where: str) -> None:
    english = english_on_screen(page, lang)
    assert not english, f"{where} in {lang}: English on screen: {english[:8]}"
    m = page.evaluate(CUT)
    assert m["overflow"] <= 0, f"{where} in {lang}: the page is {m['overflow']} px wider than the screen"
    assert not m["cut"], f"{where} in {lang}: cut: {m['cut'][:5]}"


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_stage_of_every_preset_in_the_languages(page: Page, preset: str) -> None:
    keys = stage_keys(preset)
    for lang in languages_of(preset):
        page.set_viewport_size({"width": 1366, "height": 768})
        page.goto(f"/?preset={preset}&stage={keys[0]}&lang={lang}")
        expect(page.locator("html")).to_have_attribute("lang", re.compile(lang))
        for n, key in enumerate(keys):
            if n:
                page.locator("#next-stage").click()
            expect(page.locator(f"#stage-{key}")).to_have_count(1, timeout=15_000)
            check_language(page, lang, f"{preset} stage {key}")
            if n == len(keys) // 2:  # one stage at every screen of a class
                for width, height in VIEWPORTS[1:] + VIEWPORTS[:1]:
                    page.set_viewport_size({"width": width, "height": height})
                    check_language(page, lang, f"{preset} stage {key} at {width}×{height}")
                    if preset == "bank-river":
                        save_screenshot(page, f"language-{lang}-{preset}-{key}-{width}x{height}", full_page=False)


def test_presenter_mode_fits_in_every_language(page: Page) -> None:
    for lang in SWEPT:
        for width, height in ((1920, 1080), (1366, 768)):
            page.set_viewport_size({"width": width, "height": height})
            page.goto(f"/?preset=bank-river&stage=softmax&present=on&lang={lang}")
            page.wait_for_selector(f'#stage-softmax[data-fitted="{width}x{height}"]', state="attached")
            check_language(page, lang, f"presenter at {width}×{height}")
            save_screenshot(page, f"language-{lang}-presenter-{width}x{height}", full_page=False)


def test_the_selector_switches_at_once_and_keeps_the_edit(page: Page) -> None:
    page.goto("/?preset=bank-river&stage=x&lang=en")
    page.evaluate("() => { const i = document.querySelector(\"input[name='x-0-0']\"); i.value = '0.75'; "
                  "i.dispatchEvent(new Event('input', {bubbles: true})); }")
    expect(page.locator("#stage-x table.heatmap tbody tr").first.locator("td").first).to_have_text("0.750")
    page.locator("select[data-language]").select_option("fr")
    expect(page.locator("html")).to_have_attribute("lang", "fr")
    expect(page.locator("#stage-x table.heatmap tbody tr").first.locator("td").first).to_have_text("0,750")
    assert page.locator("input[name='x-0-0']").input_value() == "0,75"
    # French is kept: a new visit opens in French.
    page.goto("/?preset=bank-river")
    expect(page.locator("html")).to_have_attribute("lang", "fr")
    page.locator("select[data-language]").select_option("en")
    expect(page.locator("html")).to_have_attribute("lang", "en")


def test_a_french_student_types_a_decimal_comma_in_a_cell(page: Page) -> None:
    page.goto("/?preset=bank-river&stage=x&lang=fr")
    page.evaluate("() => { const i = document.querySelector(\"input[name='x-0-0']\"); i.value = '−0,25'; "
                  "i.dispatchEvent(new Event('input', {bubbles: true})); }")
    expect(page.locator("#stage-x table.heatmap tbody tr").first.locator("td").first).to_have_text("−0,250")


@pytest.fixture
def decoder_ready(browser: Browser, base_url: str) -> None:
    wait_for_decoder(base_url)


@pytest.mark.slow
def test_the_real_models_pages_in_every_language(page: Page, decoder_ready: None) -> None:
    """/model and /decoder, at the four screens, in each language; each says its model reads English and shows
    the French sentence in many more pieces than the English one."""
    for lang in TRANSLATED:
        for path in ("/model", "/decoder?text=The+capital+of+France+is"):
            page.set_viewport_size({"width": 1366, "height": 768})
            page.goto(f"{path}{'&' if '?' in path else '?'}lang={lang}")
            reads = page.locator("details.reads-english[open]")
            expect(reads).to_be_visible()
            counts = [int(re.search(r"\d+", t).group()) for t in reads.locator("td.count").all_inner_texts()]
            assert counts[1] > counts[0] + 4, f"{path}: English and French in {counts[:2]} pieces"
            for width, height in VIEWPORTS[1:] + VIEWPORTS[:1]:
                page.set_viewport_size({"width": width, "height": height})
                check_language(page, lang, f"{path} at {width}×{height}")
                save_screenshot(page, f"language-{lang}-{path.split('?')[0].strip('/')}-{width}x{height}",
                                full_page=False)


def test_a_live_class_each_student_in_their_own_language(browser: Browser, base_url: str) -> None:
    """An English teacher; a French and a Chinese student follow each step, each in their own language."""
    contexts = [browser.new_context(viewport={"width": w, "height": h}, base_url=base_url, locale=locale)
                for (w, h), locale in (((1366, 768), "en-US"), ((1366, 768), "fr-FR"), ((390, 844), "zh-CN"))]
    try:
        teacher, *students = (c.new_page() for c in contexts)
        teacher.goto("/?preset=three-token")
        open_class_menu(teacher)
        teacher.get_by_role("button", name="Teach a live class").click()
        teacher.wait_for_url(re.compile(r"/class/[A-Z0-9]{8}/teach$"))
        code = teacher.locator(".class-code").inner_text().replace("-", "")
        for student, lang in zip(students, ("fr", "zh"), strict=True):
            student.goto(f"/class/{code}")  # Accept-Language chooses
            expect(student.locator("html")).to_have_attribute("lang", re.compile(lang))
        for step in ("qkv", "scores", "scaled", "mask"):
            teacher.locator("#next-stage").click()
            expect(teacher.locator(f"#stages article#stage-{step}")).to_be_visible()
            for student, lang in zip(students, ("fr", "zh"), strict=True):
                expect(student.locator(f"#stages article#stage-{step}")).to_be_visible(timeout=10_000)
                check_language(student, lang, f"a student following to {step}")
            expect(teacher.locator("html")).to_have_attribute("lang", "en")
        expect(students[0].locator("#class-panel")).to_contain_text("Vous suivez l")  # the French panel
        for student, lang in zip(students, ("fr", "zh"), strict=True):
            save_screenshot(student, f"language-{lang}-class-student", full_page=False)
    finally:
        for c in contexts:
            c.close()
