"""The five articles the lesson is drawn from, as a reader sees them named: "article 1" to "article 5",
counted from 1 like everything on the page, each with its own title the first time a source names it.

(In the repository they are the seed files 000 to 004, in the same order.)
"""

from __future__ import annotations

from app.i18n import N_, gettext

ARTICLES = (
    N_("Attention Mechanism"),  # 1: the homonym bank, its who/when/where heads and attention lines
    N_("Intuition Behind the Attention Head of Transformers"),  # 2: pool beats badminton, attention(A, A, A)
    N_("Attention Mechanism Fundamentals"),  # 3: Mark Andrews' slides, the transformer block
    N_("Attention mechanism and transformers"),  # 4: worked examples, alignment table, variants, why scale
    N_("Understanding the Attention Mechanism in Transformers"),  # 5: step by step, masks, cost
)


def article(n: int) -> str:
    """A source as the page names it: "article 4, “Attention mechanism and transformers”"."""
    return f"article {n}, “{ARTICLES[n - 1]}”"


def articles(*numbers: int) -> str:
    """Several sources: "articles 2, 4 and 5"."""
    *first, last = (str(n) for n in numbers)
    return f"articles {', '.join(first)} and {last}" if first else f"article {last}"


# A source line, one whole sentence per message: the article's title and ``what`` are messages of their own.
ONE_ARTICLE = N_("Article {n}, “{title}”: {what}")
SEVERAL_ARTICLES = N_("Articles {numbers} and {last}: {what}")
# Every source line cite() has written (English, at import) → its articles and its ``what``.
_CITED: dict[str, tuple[tuple[int, ...], str]] = {}


def _source_line(numbers: tuple[int, ...], what: str, say) -> str:
    if len(numbers) == 1:
        return say(ONE_ARTICLE).format(n=numbers[0], title=say(ARTICLES[numbers[0] - 1]), what=say(what))
    *first, last = numbers
    return say(SEVERAL_ARTICLES).format(numbers=", ".join(str(n) for n in first), last=last, what=say(what))


def cite(*numbers: int, what: str) -> str:
    """A preset's or a goal's source line, in English: "Article 4, “…”: what", or "Articles 2, 4 and 5: what".

    ``what`` is marked for the catalogue by the caller (``N_``); :func:`source_line` says the line in the
    request's language."""
    line = _source_line(numbers, what, lambda text: text)
    _CITED[line] = (numbers, what)
    return line


def source_line(line: str) -> str:
    """A source line written by :func:`cite` (``preset.source``, ``goal.source``) in the request's language,
    rebuilt from its messages; any other text through ``gettext`` as it is."""
    if line not in _CITED:
        return gettext(line)
    numbers, what = _CITED[line]
    return _source_line(numbers, what, gettext)
