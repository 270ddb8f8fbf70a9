"""Every catalogue says every message, none fuzzy, and each translation keeps what a program reads in it.

The messages are extracted from the sources again here (Babel, as `make messages` does), so a sentence added to a
template, the app or a script without running `make messages` fails as surely as one left untranslated.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from gettext import c2py
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po

from app.i18n import DEFAULT, LANGUAGES, LOCALES_DIR

ROOT = Path(__file__).resolve().parents[2]
TRANSLATED = [lang for lang in LANGUAGES if lang != DEFAULT]
KEYWORDS = {"_": None, "gettext": None, "ngettext": (1, 2), "pgettext": ((1, "c"), 2), "N_": None, "t": None}


@cache
def source_messages() -> frozenset[tuple[str | None, str]]:
    """(context, English message) of every message in the sources, by babel.cfg's mapping."""
    with (ROOT / "babel.cfg").open() as f:
        method_map, options_map = parse_mapping_cfg(f)
    found = set()
    for _file, _line, message, _comments, context in extract_from_dir(
            str(ROOT), method_map, options_map, keywords=KEYWORDS):
        found.add((context, message[0] if isinstance(message, tuple) else message))
    return frozenset(found)


@cache
def catalogue(lang: str) -> Catalog:
    path = LOCALES_DIR / lang / "LC_MESSAGES" / "messages.po"
    with path.open("rb") as f:
        return read_po(f, locale=lang)


def test_the_sources_have_messages_to_translate() -> None:
    messages = source_messages()
    assert len(messages) > 500
    for english in ("Next", "Language", "Save figure"):
        assert any(m == english for _c, m in messages), english


GETTEXT = {"_", "gettext", "ngettext", "pgettext", "N_"}


def test_no_message_hides_inside_an_f_string() -> None:
    """Babel reads Python 3.11's f-string as one token: a _("…") inside its braces is never extracted, so the
    page would show English in every language. Such a message is named outside the f-string."""
    hidden = []
    for path in sorted((ROOT / "app").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.JoinedStr):
                hidden += [f"{path.relative_to(ROOT)}:{call.lineno} {ast.unparse(call)}" for call in ast.walk(node)
                           if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                           and call.func.id in GETTEXT and any(isinstance(a, ast.Constant) for a in call.args)]
    assert not hidden, hidden


@pytest.mark.parametrize("lang", TRANSLATED)
def test_every_message_is_translated_and_none_is_fuzzy(lang: str) -> None:
    cat = catalogue(lang)
    missing = [m for c, m in sorted(source_messages(), key=lambda p: (p[0] or "", p[1]))
               if (m, c) not in {(msg.id if isinstance(msg.id, str) else msg.id[0], msg.context) for msg in cat}]
    assert not missing, f"{lang}: {len(missing)} messages not in the catalogue (run make messages): {missing[:10]}"
    untranslated, fuzzy = [], []
    for msg in cat:
        if not msg.id:
            continue
        strings = msg.string if isinstance(msg.string, tuple) else (msg.string,)
        if not all(s and s.strip() for s in strings):
            untranslated.append(msg.id)
        if msg.fuzzy:
            fuzzy.append(msg.id)
    assert not untranslated, f"{lang}: {len(untranslated)} untranslated: {untranslated[:10]}"
    assert not fuzzy, f"{lang}: {len(fuzzy)} fuzzy (changed in English; check and clear the flag): {fuzzy[:10]}"


PLACEHOLDER = re.compile(r"\{\w*\}|%\(\w+\)[sd]|%[sd]")
TAG = re.compile(r"</?([a-z][a-z0-9]*)\b")
MATHS = re.compile(r"\$[^$]+\$")
ENTITY = re.compile(r"&[a-z]+;|&#x?[0-9a-f]+;", re.I)


def _sorted(pattern: re.Pattern[str], text: str) -> list[str]:
    return sorted(pattern.findall(text))


@pytest.mark.parametrize("lang", TRANSLATED)
def test_each_translation_keeps_its_placeholders_tags_and_maths(lang: str) -> None:
    """What the program fills in ({row}, %(name)s), the HTML tags of a sentence and its formulas ($…$) are the
    same in the translation as in English: only the words around them change."""
    wrong = []
    for msg in catalogue(lang):
        if not msg.id or not msg.string:
            continue
        ids = msg.id if isinstance(msg.id, tuple) else (msg.id,)
        strings = msg.string if isinstance(msg.string, tuple) else (msg.string,)
        for s in strings:
            for pattern in (TAG, MATHS, ENTITY):
                if _sorted(pattern, ids[0]) != _sorted(pattern, s):
                    wrong.append((pattern.pattern, ids[0], s))
            if set(PLACEHOLDER.findall(s)) - set().union(*(PLACEHOLDER.findall(i) for i in ids)):
                wrong.append(("unknown placeholder", ids[0], s))
            if len(ids) == 1 and set(PLACEHOLDER.findall(ids[0])) != set(PLACEHOLDER.findall(s)):
                wrong.append(("placeholders", ids[0], s))
    assert not wrong, f"{lang}: {len(wrong)} translations changed what a program reads: {wrong[:5]}"


@pytest.mark.parametrize("lang", TRANSLATED)
def test_the_textbook_words_are_the_ones_each_language_uses(lang: str) -> None:
    """Query, key, value and embedding in the words of each language's courses."""
    words = {"fr": ("requête", "clé", "valeur", "plongement"), "de": ("Anfrage", "Schlüssel", "Wert", "Einbettung"),
             "es": ("consulta", "clave", "valor"), "zh": ("查询", "键", "值", "嵌入")}[lang]
    text = " ".join(m.string if isinstance(m.string, str) else " ".join(m.string) for m in catalogue(lang) if m.id)
    for word in words:
        assert word.lower() in text.lower(), f"{lang}: {word!r} is never used"


@pytest.mark.parametrize("lang", TRANSLATED)
def test_the_app_says_what_the_catalogue_says(lang: str) -> None:
    """The app reads each .po as it is (app.i18n, no compiled .mo): a message, a plural and a context say what the
    .po says."""
    from app.i18n import gettext, ngettext, speaking, translations

    translations.cache_clear()
    sample = [m for m in catalogue(lang) if m.id and isinstance(m.id, str) and m.string and not m.context][:200]
    plurals = [m for m in catalogue(lang) if isinstance(m.id, tuple) and not m.context][:20]
    form = c2py(catalogue(lang).plural_expr)
    with speaking(lang):
        for m in sample:
            assert gettext(m.id) == m.string
        for m in plurals:
            assert ngettext(m.id[0], m.id[1], 1) == m.string[form(1)]
            assert ngettext(m.id[0], m.id[1], 2) == m.string[form(2)]


@pytest.mark.parametrize("text", [b"", b'msgid "Next"\nmsgstr ""\n', b"a line that is no entry\n",
                                  b'msgid "Next"\nmsgid "Back"\nmsgstr "Retour"\n', b'msgid "\xff"\nmsgstr "x"\n'])
def test_a_broken_or_empty_catalogue_stops_the_app_naming_its_file(
        text: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import app.i18n as i18n

    (tmp_path / "fr" / "LC_MESSAGES").mkdir(parents=True)
    (tmp_path / "fr" / "LC_MESSAGES" / "messages.po").write_bytes(text)
    monkeypatch.setattr(i18n, "LOCALES_DIR", tmp_path)
    i18n.translations.cache_clear()
    try:
        with pytest.raises(i18n.CatalogueError, match=re.escape(str(tmp_path / "fr" / "LC_MESSAGES" / "messages.po"))):
            i18n.load_catalogues()
    finally:
        i18n.translations.cache_clear()


def test_a_missing_catalogue_stops_the_app_naming_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import app.i18n as i18n

    monkeypatch.setattr(i18n, "LOCALES_DIR", tmp_path)
    i18n.translations.cache_clear()
    try:
        with pytest.raises(i18n.CatalogueError, match=r"fr.LC_MESSAGES.messages\.po"):
            i18n.load_catalogues()
    finally:
        i18n.translations.cache_clear()
