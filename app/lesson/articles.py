"""The five articles the lesson is drawn from, as a reader sees them named: "article 1" to "article 5",
counted from 1 like everything on the page, each with its own title the first time a source names it.

(In the repository they are the seed files 000 to 004, in the same order.)
"""

from __future__ import annotations

ARTICLES = (
    "Attention Mechanism",  # 1: the homonym bank, its who/when/where heads and attention lines
    "Intuition Behind the Attention Head of Transformers",  # 2: pool beats badminton, attention(A, A, A)
    "Attention Mechanism Fundamentals",  # 3: Mark Andrews' slides, the transformer block
    "Attention mechanism and transformers",  # 4: worked examples, alignment table, variants, why scale
    "Understanding the Attention Mechanism in Transformers",  # 5: step by step, masks, cost
)


def article(n: int) -> str:
    """A source as the page names it: "article 4, “Attention mechanism and transformers”"."""
    return f"article {n}, “{ARTICLES[n - 1]}”"


def articles(*numbers: int) -> str:
    """Several sources: "articles 2, 4 and 5"."""
    *first, last = (str(n) for n in numbers)
    return f"articles {', '.join(first)} and {last}" if first else f"article {last}"


def cite(*numbers: int, what: str) -> str:
    """A preset's or a goal's source line: "Article 4, “…”: what", or "Articles 2, 4 and 5: what"."""
    named = article(numbers[0]) if len(numbers) == 1 else articles(*numbers)
    return f"{named[0].upper()}{named[1:]}: {what}"
