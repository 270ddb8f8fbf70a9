"""Each kind of number in each language: Babel's symbols for the locale (CLDR), a true minus sign, thousands apart
by a thin space where the decimal sign is a comma; the fast path writes what Babel writes."""

from __future__ import annotations

import pytest
from babel.numbers import format_decimal

from app.i18n import (
    DECIMAL_COMMA,
    LANGUAGES,
    MINUS,
    THIN_SPACE,
    angle,
    cosine,
    count,
    decimal,
    decimal_sign,
    frequency,
    local_decimals,
    local_number,
    logit,
    percent,
    probability,
    score,
    signed,
    speaking,
    temperature,
    weight,
)

NBSP = "\u00a0"

# (function, value, English and Chinese, French, German and Spanish)
KINDS = [
    (lambda v: percent(v), 0.7731, "77.3%", f"77,3{NBSP}%"),
    (lambda v: percent(v), 1.0, "100.0%", f"100,0{NBSP}%"),
    (lambda v: percent(v, 2), 0.000512, "0.05%", f"0,05{NBSP}%"),
    (logit, 17.3749, "17.37", "17,37"),
    (logit, -3.5, f"{MINUS}3.50", f"{MINUS}3,50"),
    (weight, 0.25, "0.250", "0,250"),
    (lambda v: weight(v, 2), 0.996, "1.00", "1,00"),
    (probability, 0.773, "0.77", "0,77"),
    (score, 0.614, "0.61", "0,61"),
    (cosine, 0.83241, "0.8324", "0,8324"),
    (angle, 1.5707963, "1.571", "1,571"),
    (angle, -0.0001, "0.000", "0,000"),  # rounds to zero: no sign
    (frequency, 0.0031623, "0.00316", "0,00316"),
    (frequency, 1.43e-05, "0.0000143", "0,0000143"),
    (frequency, 1.0, "1.00", "1,00"),
    (temperature, 0.5, "0.5", "0,5"),
    (temperature, 1.0, "1", "1"),
    (temperature, 2.3, "2.3", "2,3"),
    (count, 1, "1", "1"),
    (count, 49152, "49,152", f"49{THIN_SPACE}152"),
    (lambda v: decimal(v, 1), -12345.67, f"{MINUS}12,345.7", f"{MINUS}12{THIN_SPACE}345,7"),
    (lambda v: signed(cosine(v)), 0.0012, "+0.0012", "+0,0012"),
    (lambda v: signed(cosine(v)), -0.0012, f"{MINUS}0.0012", f"{MINUS}0,0012"),
]


@pytest.mark.parametrize("lang", list(LANGUAGES))
@pytest.mark.parametrize(("kind", "value", "point", "comma"), KINDS)
def test_each_kind_of_number_in_each_language(kind, value: float, point: str, comma: str, lang: str) -> None:
    with speaking(lang):
        assert kind(value) == (comma if lang in DECIMAL_COMMA else point)


@pytest.mark.parametrize("lang", list(LANGUAGES))
def test_the_decimal_sign_is_babels(lang: str) -> None:
    """DECIMAL_COMMA (the hot path's table, and <html data-decimal>) says what CLDR says."""
    with speaking(lang):
        assert decimal_sign() == format_decimal(0.5, locale=lang)[1]
        assert (decimal_sign() == ",") == (lang in DECIMAL_COMMA)


@pytest.mark.parametrize("lang", list(LANGUAGES))
@pytest.mark.parametrize("value", [0.0, 0.25, -0.25, 1.0, -1.5, 3.14159, -999.494, 999.49, 12.0005])
@pytest.mark.parametrize("places", [0, 1, 2, 3, 4])
def test_the_fast_path_writes_what_babel_writes(lang: str, value: float, places: int) -> None:
    """Below a thousand ``decimal`` formats with Python: the same text as Babel's pattern, minus sign aside."""
    pattern = "#,##0." + "0" * places if places else "#,##0"
    with speaking(lang):
        expected = format_decimal(round(value, places) + 0.0, format=pattern, locale=lang).replace("-", MINUS)
        assert decimal(value, places) == expected
        assert local_number(f"{round(value, places) + 0.0:.{places}f}") == expected  # the heatmaps' hot path


def test_english_text_with_numbers_reads_in_the_readers_language() -> None:
    with speaking("fr"):
        assert local_decimals("1.5 × 10⁻⁴ and 12,345.6 …") == f"1,5 × 10⁻⁴ and 12{THIN_SPACE}345,6 …"
    with speaking("zh"):
        assert local_decimals("1.5 and 12,345.6") == "1.5 and 12,345.6"
