"""Every number a reader sees on a page is written in the reader's language: no decimal point left in French,
German or Spanish text beside a decimal comma, and a count in a sentence in its plural form.

Only the text a reader sees counts: attributes (a form field's value the server reads back, a link), scripts,
styles, a text box of code to copy (an embed's <iframe>) and a link's address written out are left out, and so are
names that hold a point (the Apache-2.0 licence); MathML is text like any other (it writes the language's decimal
sign too).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from fastapi.testclient import TestClient

from app.view.decoder_view import decoder_catalogue_view

COMMA_LANGUAGES = ("fr", "de", "es")
PAGES = {
    "decoder": "/decoder?text=The+capital+of+France+is&row=3&col=2",
    "decoder cooler, heads off": "/decoder?text=The+capital+of+France+is&temperature=0.5&off=17.1&lens=all",
    "decoder one token": "/decoder?text=Hi",
    "model": "/model?text=The+cat+sat+on+the+mat.",
    "scenario": "/?preset=bank-river&stage=softmax",
    "scenario rope": "/?preset=bank-river&stage=qkv&positions=rope",
    "scenario every stage": "/?preset=bank-river&show_all=on&temperature=0.7",
    "scenario's panels": "/?preset=why-scale&stage=softmax&panels=lab+cost+inputs+learn+target",
    "embed decoder": "/embed/decoder?text=The+capital+of+France+is&layer=17&head=2",
    "embed model": "/embed/model?text=The+cat+sat+on+the+mat.&layer=2&head=3",
    "embed": "/embed?preset=bank-river&stage=softmax",
    "handout": "/handout?preset=bank-river",
}
# Void elements never hold text, and are never closed.
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
HIDDEN = {"script", "style", "template", "noscript", "textarea"}
DECIMAL_POINT = re.compile(r"\d\.\d")
NAMES = re.compile(r"Apache-2\.0")
URL = re.compile(r"(https?://|/)\S*")  # a link written out (the page's own address), read by a browser


class VisibleText(HTMLParser):
    """The text of a page outside scripts, styles and attributes, with the innermost element holding each piece."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.pieces: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        pass

    def handle_endtag(self, tag: str) -> None:
        if tag in self.open:
            while self.open.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        if data.strip() and not HIDDEN & set(self.open):
            self.pieces.append(("/".join(self.open[-3:]), data.strip()))


def visible_text(html: str) -> list[tuple[str, str]]:
    parser = VisibleText()
    parser.feed(html)
    return parser.pieces


@pytest.fixture(scope="module", autouse=True)
def ready() -> None:
    decoder_catalogue_view()  # the language model read and its heads measured, as the app's start does


@pytest.mark.parametrize("lang", COMMA_LANGUAGES)
@pytest.mark.parametrize("page", PAGES)
def test_no_number_keeps_a_decimal_point(client: TestClient, page: str, lang: str) -> None:
    r = client.get(PAGES[page] + f"&lang={lang}")
    assert r.status_code == 200
    assert f'lang="{lang}"' in r.text
    left = sorted({(where, text[:100]) for where, text in visible_text(r.text)
                   if DECIMAL_POINT.search(NAMES.sub("", text)) and not URL.fullmatch(text)})
    assert not left, f"{len(left)} pieces of text with a decimal point: {left[:200]}"


def text_of(html: str) -> str:
    return " ".join(" ".join(text for _where, text in visible_text(html)).split())


@pytest.mark.parametrize(("lang", "one", "two"), [
    ("en", "1 token;", "2 tokens;"), ("fr", "1 token ;", "2 tokens ;"), ("de", "1 Token;", "2 Tokens;"),
    ("es", "1 token;", "2 tokens;")])
def test_a_count_in_a_sentence_takes_its_plural_form(client: TestClient, lang: str, one: str, two: str) -> None:
    """The decoder's tokens, counted in a sentence: one token, two tokens, in each language's own forms."""
    single = client.get(f"/decoder?text=Hi&lang={lang}")
    double = client.get(f"/decoder?text=Hi+there&lang={lang}")
    assert single.status_code == 200 and double.status_code == 200
    assert one in text_of(single.text) and two not in text_of(single.text)
    assert two in text_of(double.text)


def test_a_probability_is_a_percentage_in_the_readers_language(client: TestClient) -> None:
    """The candidates' percentages and their logits beside them, with the same decimal sign."""
    fr = text_of(client.get("/decoder?text=The+capital+of+France+is&lang=fr").text)
    en = text_of(client.get("/decoder?text=The+capital+of+France+is&lang=en").text)
    assert re.search(r"␣Paris 77,3 % 17,\d\d", fr)  # (text_of reads the no-break space before % as a space)
    assert re.search(r"␣Paris 77\.3% 17\.\d\d", en)


def test_a_template_compiled_before_any_request_still_writes_each_reader_s_numbers() -> None:
    """Every template is compiled at a server's start, in English: a filter of a constant (``{{ 1 | decimal(3) }}``,
    ``{% filter tex %}…{% endfilter %}``) must not be folded into it then."""
    from app.i18n import speaking
    from app.web.respond import templates

    template = templates.env.from_string(
        "{{ 1 | decimal(3) }} {{ 0.5 | percent }} {% filter tex %}\\sqrt{2.5}{% endfilter %}")
    english = template.render()
    with speaking("fr"):
        french = template.render()
    assert english.startswith("1.000 ") and french.startswith("1,000 ")
    assert "<mn>2.5</mn>" in english and "<mn>2,5</mn>" in french
