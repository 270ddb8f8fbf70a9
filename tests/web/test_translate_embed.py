"""GET /embed/translate: the translator in another site's frame — the translation and its lines for the page's
query, a link to the whole page, the frame policy of every embed; a bad text is a 422 with its message beside it."""

from __future__ import annotations

from fastapi.testclient import TestClient


def test_the_embed_shows_the_translation_and_its_lines(client: TestClient) -> None:
    r = client.get("/embed/translate?text=I+deposited+money+at+the+bank.&direction=en-pt")
    assert r.status_code == 200
    assert "Eu depositei dinheiro no banco." in r.text and 'id="translate-lines-figure"' in r.text
    assert 'href="/translate?text=I+deposited+money+at+the+bank.&amp;direction=en-pt"' in r.text
    assert "frame-ancestors" in r.headers["content-security-policy"]
    assert 'class="top"' not in r.text  # no page header in a frame


def test_the_page_offers_the_embed(client: TestClient) -> None:
    page = client.get("/translate?text=Hello.&direction=en-pt").text
    assert 'data-embed-src="/embed/translate?text=Hello.&amp;direction=en-pt"' in page


def test_a_bad_text_is_a_422_beside_the_box(client: TestClient) -> None:
    r = client.get("/embed/translate?text=")
    assert r.status_code == 422 and 'id="err-translate-text"' in r.text and "enter a sentence" in r.text
    r = client.get("/embed/translate?text=", headers={"HX-Request": "true"})
    assert r.status_code == 422 and r.headers["hx-reswap"] == "none"
