"""The page in the class's language: gettext catalogues, the language of the request, numbers as it writes them.

Every sentence a person reads is a message of the catalogue ``app/locales/<lang>/LC_MESSAGES/messages.po``
(extracted by ``make messages``), read as it is when a process first needs it: there is no compiled ``.mo`` to
forget, whether the app was installed by ``make``, ``pip install .``, ``pip install -e .`` or the image:

- templates call ``_("…")``, ``ngettext(…)`` or ``{% trans %}…{% endtrans %}`` (Jinja2's i18n extension);
- the lesson's data (stages, presets, goals, …) marks its texts ``N_("…")``, which leaves them English (the JSON
  API and the exports use them as they are), and the page translates them where it shows them: ``_(stage.title)``;
- the page's Python that writes a sentence at request time calls ``gettext``, which reads the request's language.

The request's language is a context variable set once per request (``app.main``'s LanguageMiddleware), from
``?lang=``, a posted ``lang`` field, the ``lang`` cookie, then the browser's Accept-Language; the JSON API is
always English. A heavy page rendered in another process carries it there (``app.web.page_work``).
"""

from __future__ import annotations

import gettext as _gettext
import io
import re
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from pathlib import Path

from babel.core import Locale, UnknownLocaleError, negotiate_locale
from babel.messages.mofile import write_mo
from babel.messages.pofile import PoFileError, read_po
from babel.numbers import format_decimal, format_percent

LOCALES_DIR = Path(__file__).resolve().parent / "locales"
DOMAIN = "messages"
DEFAULT = "en"


def N_(message: str) -> str:  # noqa: N802 (gettext's own name for a marker)
    """Marks ``message`` for the catalogue and leaves it as it is: translated where it is shown."""
    return message


# Each language named in itself, in the order of the header's selector.
LANGUAGES: dict[str, str] = {"en": "English", "fr": "Français", "de": "Deutsch", "es": "Español", "zh": "中文"}
# Each language named in the reader's language (_() where shown): the real models' inputs and outputs, which are
# never translated, say which language they are in (Portuguese: the translator's other side).
LANGUAGE_NAMES: dict[str, str] = {"en": N_("English"), "fr": N_("French"), "de": N_("German"), "es": N_("Spanish"),
                                  "zh": N_("Chinese"), "pt": N_("Portuguese")}
# <html lang>: the BCP 47 tag of each (Simplified Chinese written as such).
HTML_LANG = {"en": "en", "fr": "fr", "de": "de", "es": "es", "zh": "zh-Hans"}
# Languages whose textbooks write a decimal comma: 0,25 (and English and Chinese 0.25).
DECIMAL_COMMA = frozenset({"fr", "de", "es"})
COOKIE = "lang"
COOKIE_MAX_AGE = 365 * 24 * 3600

_current: ContextVar[str] = ContextVar("language", default=DEFAULT)




class CatalogueError(RuntimeError):
    """A language's catalogue is missing or cannot be read: the page would silently speak English."""


def catalogue_path(lang: str) -> Path:
    return LOCALES_DIR / lang / "LC_MESSAGES" / f"{DOMAIN}.po"


@cache
def translations(lang: str) -> _gettext.NullTranslations:
    """The catalogue of ``lang``, read from its ``.po`` (Babel's reader, fuzzy entries left out, as pybabel compile
    does) into a gettext ``GNUTranslations`` (plural forms, contexts); English says each message as it is written.
    A missing, unreadable or empty catalogue is a ``CatalogueError`` naming its file, never English in disguise."""
    if lang == DEFAULT:
        return _gettext.NullTranslations()
    path = catalogue_path(lang)
    try:
        with path.open("rb") as f:
            catalogue = read_po(f, locale=lang, domain=DOMAIN, abort_invalid=True)
    except (OSError, PoFileError, ValueError, UnknownLocaleError) as e:
        raise CatalogueError(f"the {LANGUAGES.get(lang, lang)} catalogue {path} cannot be read: {e}") from e
    if not any(m.id and m.string and not m.fuzzy for m in catalogue):
        raise CatalogueError(f"the {LANGUAGES.get(lang, lang)} catalogue {path} translates no message")
    compiled = io.BytesIO()
    write_mo(compiled, catalogue)  # gettext's own binary form, in memory: Python's gettext reads it as it is
    compiled.seek(0)
    return _gettext.GNUTranslations(compiled)


def load_catalogues() -> None:
    """Every language's catalogue read now (about 35 ms of CPU each), so that a missing or broken one stops the
    app at start, naming its file."""
    for lang in LANGUAGES:
        translations(lang)


def language() -> str:
    """The language of this request (``en`` outside one)."""
    return _current.get()


def set_language(lang: str) -> None:
    _current.set(lang if lang in LANGUAGES else DEFAULT)


@contextmanager
def speaking(lang: str):
    """Within the block, messages are in ``lang``."""
    token = _current.set(lang if lang in LANGUAGES else DEFAULT)
    try:
        yield
    finally:
        _current.reset(token)


def gettext(message: str) -> str:
    """``message`` in the request's language (empty stays empty: gettext would give the catalogue's header)."""
    if not message or _current.get() == DEFAULT:
        return message
    return translations(_current.get()).gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    if _current.get() == DEFAULT:
        return singular if n == 1 else plural
    return translations(_current.get()).ngettext(singular, plural, n)


def pgettext(context: str, message: str) -> str:
    """``message`` in the request's language, told apart by ``context`` from the same English word elsewhere."""
    if _current.get() == DEFAULT:
        return message
    return translations(_current.get()).pgettext(context, message)


_ = gettext


def pick_language(query: str | None, cookie: str | None, accept_language: str | None) -> str:
    """The language of a page: ``?lang=`` (or a posted ``lang``), else the cookie, else the first of the
    browser's Accept-Language we have (``fr-CH`` reads French, ``zh-CN`` and ``zh-Hans`` Chinese), else English."""
    for chosen in (query, cookie):
        if chosen in LANGUAGES:
            return chosen
    if accept_language:
        preferred = []
        for part in accept_language.split(",")[:20]:
            tag, _sep, params = part.strip().partition(";")
            q = 1.0
            if params.strip().startswith("q="):
                try:
                    q = float(params.strip()[2:])
                except ValueError:
                    q = 0.0
            if tag and q > 0:
                preferred.append((q, tag.strip().replace("_", "-")))
        ordered = [tag for _q, tag in sorted(preferred, key=lambda p: -p[0])]
        for tag in ordered:
            found = negotiate_locale([tag], list(LANGUAGES), sep="-") or negotiate_locale(
                [tag.split("-")[0]], list(LANGUAGES), sep="-")
            if found:
                return found
    return DEFAULT


# Numbers as the class writes them: the page's own text only (heatmaps, the inspector, charts, editors' cells);
# the JSON API and every export keep "0.25" and "-" whatever the language. A number is written by Babel with the
# reader's locale's symbols (CLDR), with two choices of the project's: a true minus sign everywhere, and where the
# decimal sign is a comma, thousands apart by a thin space (12 345,6, ISO 80000) rather than a point that a reader
# of both languages could take for a decimal one. One function per kind of number below; a template has each as a
# filter (app.web.respond).
MINUS = "\u2212"
THIN_SPACE = "\u202f"  # groups of thousands where the comma is the decimal sign: 12 345,6 (ISO 80000)


@cache
def _locale(lang: str) -> Locale:
    return Locale.parse(lang)


@cache
def _symbols(lang: str) -> tuple[str, str]:
    """(decimal sign, group sign) of ``lang`` as the page writes them."""
    symbols = _locale(lang).number_symbols["latn"]
    decimal = symbols["decimal"]
    return decimal, THIN_SPACE if decimal == "," else symbols["group"]


def decimal_comma() -> bool:
    return decimal_sign() == ","


def decimal_sign() -> str:
    return _symbols(_current.get())[0]


def decimal_sign_of(lang: str) -> str:
    """``lang``'s decimal sign (Babel's CLDR data): "," for fr, de, es; "." for en, zh."""
    return _symbols(lang if lang in LANGUAGES else DEFAULT)[0]


def _written(text: str, lang: str) -> str:
    """Babel's text with the project's minus, and its thin-spaced thousands where the decimal sign is a comma."""
    group = _locale(lang).number_symbols["latn"]["group"]
    wanted = _symbols(lang)[1]
    if group != wanted:
        text = text.replace(group, wanted)
    return text.replace("-", MINUS)


@cache
def _pattern(places: int) -> str:
    return "#,##0." + "0" * places if places else "#,##0"


def decimal(value: float, places: int) -> str:
    """``value`` with exactly ``places`` decimals in the reader's language: ``−1.50`` (``−1,50``); a value that
    rounds to zero has no sign."""
    lang = _current.get()
    value = round(float(value), places) + 0.0  # + 0.0: −0.0 prints as 0
    if -1000.0 < value < 1000.0:  # no group of thousands: Babel's text, by Python's formatting (15× faster)
        text = f"{value:.{places}f}".replace("-", MINUS)
        return text.replace(".", ",") if _symbols(lang)[0] == "," else text
    return _written(format_decimal(value, format=_pattern(places), locale=_locale(lang)), lang)


@cache
def _percent_pattern(lang: str, places: int) -> str:
    """The locale's own percent pattern (``#,##0%``, ``#,##0 %``) with ``places`` decimals."""
    pattern = _locale(lang).percent_formats[None].pattern
    return re.sub(r"0(?=[^0#]*$)", "0" + ("." + "0" * places if places else ""), pattern, count=1)


def percent(fraction: float, places: int = 1) -> str:
    """A probability as a percentage, as the reader's language writes one: 77.3% (en, zh), 77,3 % (fr, de, es)."""
    lang = _current.get()
    return _written(format_percent(round(float(fraction), places + 2) + 0.0, format=_percent_pattern(lang, places),
                                   locale=_locale(lang)), lang)


def count(n: int) -> str:
    """A whole number (tokens, heads, students, operations): 12,345 (en), 12 345 (fr, de, es)."""
    lang = _current.get()
    return _written(format_decimal(int(n), format="#,##0", locale=_locale(lang)), lang)


def weight(value: float, places: int = 3) -> str:
    """An attention weight (a cell's title, a line's printed weight, a narrow strip: ``places`` 2): 0.250, 0.25."""
    return decimal(value, places)


def probability(p: float) -> str:
    """A probability read as a fraction where a table is narrow (the logit lens): 0.77."""
    return decimal(p, 2)


def logit(value: float) -> str:
    """A logit, a score before softmax: 17.37."""
    return decimal(value, 2)


def cosine(value: float) -> str:
    """A cosine similarity: 0.8324."""
    return decimal(value, 4)


def score(value: float) -> str:
    """A head's score in a catalogue of behaviours (its mean weight on a pattern, a threshold): 0.61."""
    return decimal(value, 2)


def frequency(theta: float) -> str:
    """A rotation's rate in radians per position (RoPE's θ_i, from 1 down to 10⁻⁵), to three significant digits:
    0.00316 (0,00316), never in exponent form."""
    lang = _current.get()
    return _written(format_decimal(float(theta), format="@@@", locale=_locale(lang)), lang)


def temperature(tau: float) -> str:
    """A softmax temperature as its slider sets it, in steps of 0.1 without a trailing zero: 0.5, 1, 2.3."""
    lang = _current.get()
    return _written(format_decimal(round(float(tau), 2), format="#,##0.##", locale=_locale(lang)), lang)


def angle(radians: float) -> str:
    """An angle in radians (RoPE's rotation of a pair of dimensions): 1.571."""
    return decimal(radians, 3)


def signed(text: str) -> str:
    """A change, written by one of the functions above, with its sign even when it is not negative: +0.0012."""
    return text if text.startswith(MINUS) else "+" + text


def local_number(text: str) -> str:
    """A number already written in English (``0.250``, ``-1.5``, ``−1.5``: a heatmap's cells, written once for the
    exports too), in the request's language: what ``decimal`` writes, by one replace per sign (the hot path)."""
    text = text.replace("-", MINUS)
    return text.replace(".", ",") if _current.get() in DECIMAL_COMMA else text


def local_numbers(rows: list[list[str]]) -> list[list[str]]:
    """``local_number`` over a table's rows, at the cost of one replace per cell."""
    if _current.get() in DECIMAL_COMMA:
        return [[t.replace("-", MINUS).replace(".", ",") for t in row] for row in rows]
    return [[t.replace("-", MINUS) for t in row] for row in rows]


@cache
def language_name(lang: str, in_lang: str) -> str:
    """``lang``'s name written in ``in_lang`` (Babel's CLDR data)."""
    try:
        return Locale.parse(lang).get_display_name(Locale.parse(in_lang)) or lang
    except (UnknownLocaleError, ValueError):
        return lang


_DECIMAL_POINT = re.compile(r"(?<=\d)\.(?=\d)")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


def local_decimals(text: str) -> str:
    """Every number of an English-written sentence or label (``0.25``, ``12,345.6``, ``1.5 × 10⁻⁴``) as the
    reader's language writes it: the decimal comma and thin-spaced thousands where its textbooks use them.
    Other points (an ellipsis, an abbreviation, a sentence's end) are left alone. Apply once, to English text."""
    if _current.get() not in DECIMAL_COMMA:
        return text
    return _DECIMAL_POINT.sub(",", _THOUSANDS.sub(THIN_SPACE, text))
