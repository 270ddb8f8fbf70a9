"""GET /embed/translate: the translator in another site's frame — the translation and its lines for the page's
query, a link to the whole page, the frame policy of every embed; a bad text is a 422 with its message beside it.
GET /translate/handout: the same state printed under the QR code of its link."""

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


def test_the_handout_prints_the_translation_under_the_qr_code_of_its_link(client: TestClient) -> None:
    query = "text=I+deposited+money+at+the+bank.&direction=en-pt&layer=1&head=4"
    page = client.get(f"/translate?{query}").text
    assert f'id="translate-handout" href="/translate/handout?{query.replace("&", "&amp;")}"' in page
    r = client.get(f"/translate/handout?{query}")
    assert r.status_code == 200
    assert "Eu depositei dinheiro no banco." in r.text and 'class="handout-qr' in r.text
    assert f'href="http://testserver/translate?{query.replace("&", "&amp;")}"' in r.text  # absolute: another device
    assert "Step through one cross-attention head: L1 H4" in r.text and 'data-ref="alignment"' in r.text
    bad = client.get("/translate/handout?text=")
    assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "text"
