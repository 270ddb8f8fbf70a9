"""Security headers on every kind of response, a page that needs no inline script or style, and
token text that stays inert everywhere it appears: page, inspector, quiz, pin, permalinks, exports
and error messages."""

from __future__ import annotations

import re
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from fastapi.testclient import TestClient

from app.lesson.presets import PRESETS
from app.lesson.stages import visible_stages
from app.state.permalink import state_query
from app.state.pin import encode_pin
from app.state.reading import decode_pin
from app.state.scenario import from_preset
from app.web.security import DOCS_POLICY, PAGE_POLICY, embed_policy
from tests.conftest import form_fields

HTMX = {"HX-Request": "true"}
EVIL = ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>', "{{7*7}}", 'hx-get="/x"',
        "{% raw %}", "'; alert(1); '", "</textarea><b>"]


def directives(policy: str) -> dict[str, list[str]]:
    return {d.split()[0]: d.split()[1:] for d in (p.strip() for p in policy.split(";")) if d}


def assert_secure_headers(response, policy: str = PAGE_POLICY) -> None:
    h = response.headers
    assert h["content-security-policy"] == policy
    assert h["x-content-type-options"] == "nosniff"
    assert h["referrer-policy"] == "no-referrer"
    assert h["x-frame-options"] == "DENY"


def test_the_page_policy_is_strict() -> None:
    d = directives(PAGE_POLICY)
    assert d["default-src"] == ["'self'"] and d["script-src"] == ["'self'"] and d["style-src"] == ["'self'"]
    assert d["object-src"] == ["'none'"] and d["base-uri"] == ["'none'"]
    assert d["frame-ancestors"] == ["'none'"] and d["form-action"] == ["'self'"]
    assert "unsafe" not in PAGE_POLICY
    docs = directives(DOCS_POLICY)
    assert docs["script-src"] == ["'self'"] and "unsafe-eval" not in DOCS_POLICY  # only styles relaxed
    # The views to embed: the page's policy but for who may frame them.
    embed = directives(embed_policy(("https://moodle.example.edu",)))
    assert embed == {**d, "frame-ancestors": ["'self'", "https://moodle.example.edu"]}
    assert directives(embed_policy()) == {**d, "frame-ancestors": ["'self'"]}


def test_every_kind_of_response_carries_the_headers(client: TestClient) -> None:
    page = client.get("/")
    assert_secure_headers(page)
    fields = form_fields(page.text)
    assert_secure_headers(client.post("/stages", data=fields, headers=HTMX))
    assert_secure_headers(client.post("/stages", data={**fields, "x-0-0": "nan"}, headers=HTMX))  # 422
    assert_secure_headers(client.post("/api/attention", json={"tokens": ["a"], "x": [[1.0]]}))
    assert_secure_headers(client.post("/api/attention", content=b'{"tokens": ["a"], "x": [[1e999]]}',
                                      headers={"content-type": "application/json"}))
    assert_secure_headers(client.post("/api/attention", content=b"x" * 10, headers={"content-length": "999999999"}))
    assert_secure_headers(client.get("/static/app.css"))
    assert_secure_headers(client.get("/no/such/page"))
    assert_secure_headers(client.get("/healthz"))
    assert_secure_headers(client.get("/openapi.json"))
    assert_secure_headers(client.get("/docs"), DOCS_POLICY)
    # A view to embed may be framed by this app's own pages (and by ATTENTION_EMBED_ORIGINS: tests/web/test_embed.py).
    for embedded in (client.get("/embed?preset=pool&stage=softmax"), client.get("/embed?preset=pool&stage=nope")):
        assert embedded.headers["content-security-policy"] == embed_policy()
        assert embedded.headers["x-frame-options"] == "SAMEORIGIN"
        assert embedded.headers["x-content-type-options"] == "nosniff"
        assert embedded.headers["referrer-policy"] == "no-referrer"


@pytest.mark.slow
def test_docs_are_served_from_this_app_with_no_inline_script(client: TestClient) -> None:
    r = client.get("/docs")
    assert r.status_code == 200
    sources = re.findall(r'<script src="([^"]+)"></script>', r.text)
    assert sources and all(s.startswith("/static/") for s in sources)
    assert "<script>" not in r.text and "cdn" not in r.text.lower()
    for src in [*sources, *re.findall(r'<link rel="stylesheet" href="([^"]+)"', r.text)]:
        assert client.get(src).status_code == 200, src
    assert 'data-openapi="/openapi.json"' in r.text


class _InlineFinder(HTMLParser):
    """Everything a strict CSP would block: inline scripts, style elements and attributes,
    event-handler attributes, javascript: URLs."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "script" and not a.get("src"):
            self.found.append("inline <script>")
        if tag == "style":
            self.found.append("<style>")
        for name, value in attrs:
            if name == "style" or name.startswith("on"):
                self.found.append(f"{tag} {name}=")
            if value and value.strip().lower().startswith("javascript:"):
                self.found.append(f"{tag} {name}=javascript:")


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_no_page_needs_inline_script_or_style(client: TestClient, preset: str) -> None:
    """Every stage (show_all), both extra panels, a quiz and presenter mode, for every preset."""
    blocks = PRESETS[preset].blocks
    urls = [f"/?preset={preset}&show_all=on&panels=lab+cost&inspect=softmax.0.0.0",
            f"/?preset={preset}&present=on&stage={visible_stages(blocks)[-1].key}",
            f"/?preset={preset}&stage=softmax&quiz=on"]
    for url in urls:
        r = client.get(url)
        assert r.status_code == 200
        finder = _InlineFinder()
        finder.feed(r.text)
        assert finder.found == [], url


# --- evil tokens ----------------------------------------------------------------------------------


class _Elements(HTMLParser):
    """Tags and attribute names in a document: what an injected token would add."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [name for name, _ in attrs]


def structure(html: str) -> tuple[list[str], list[str]]:
    p = _Elements()
    p.feed(html)
    return p.tags, p.attrs


def evil_fields(client: TestClient) -> dict[str, str]:
    fields = form_fields(client.get("/?preset=three-token&stage=softmax").text)
    return {**fields, **{f"token-{i}": t for i, t in enumerate(EVIL[:3])}}


def test_evil_tokens_are_inert_in_the_page_inspector_quiz_and_pin(client: TestClient) -> None:
    # Plain tokens of its own, as the evil ones are: both pages' banners quote the edited sentence.
    plain = {f"token-{i}": t for i, t in enumerate(("one", "two", "three"))}
    clean = client.post("/stages", data={**form_fields(client.get("/?preset=three-token&stage=softmax").text),
                                         **plain, "inspect": "softmax.0.1.1", "quiz": "on", "action": "pin"},
                        headers=HTMX)
    fields = {**evil_fields(client), "inspect": "softmax.0.1.1", "quiz": "on", "action": "pin"}
    r = client.post("/stages", data=fields, headers=HTMX)
    assert r.status_code == 200
    # The same elements and attributes as with plain tokens: the text added no markup.
    clean_tags, clean_attrs = structure(clean.text)
    tags, attrs = structure(r.text)
    assert tags == clean_tags
    assert sorted(set(attrs)) == sorted(set(clean_attrs))
    assert "<script>alert" not in r.text and "<img" not in r.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in r.text  # shown as text
    assert "{{7*7}}" in r.text and "49" not in re.sub(r"\d+\.\d+", "", r.text)  # not evaluated
    # The pin carries the tokens and gives them back unchanged.
    pinned = decode_pin(form_fields(r.text)["pin"])
    assert list(pinned.tokens) == EVIL[:3]


def test_evil_tokens_round_trip_through_a_permalink_as_data(client: TestClient) -> None:
    r = client.post("/stages", data=evil_fields(client), headers=HTMX)
    url = r.headers["HX-Replace-Url"]
    assert "<" not in url and '"' not in url and " " not in url  # percent-encoded
    query = dict(parse_qsl(urlsplit(url).query))
    assert [query[f"token-{i}"] for i in range(3)] == EVIL[:3]
    again = client.get(url)
    assert again.status_code == 200 and "<script>alert" not in again.text
    assert [form_fields(again.text)[f"token-{i}"] for i in range(3)] == EVIL[:3]


@pytest.mark.parametrize("token", EVIL)
def test_an_evil_token_in_an_error_message_is_escaped(client: TestClient, token: str) -> None:
    fields = form_fields(client.get("/?preset=three-token").text)
    long_token = token * 10  # over the length bound: the message names the field, not the text
    r = client.post("/stages", data={**fields, "token-0": long_token}, headers=HTMX)
    assert r.status_code == 422
    assert "<script>alert" not in r.text and "<img" not in r.text
    r = client.post("/stages", data={**fields, "preset": token}, headers=HTMX)
    assert r.status_code == 422 and "<script>alert" not in r.text and "<img" not in r.text
    # The API answers JSON, never HTML, and the browser is told not to guess otherwise.
    api = client.post("/api/attention", json={"tokens": [token, "b"], "x": [[1.0], ["x"]]})
    assert api.status_code == 422 and api.headers["content-type"] == "application/json"
    assert api.headers["x-content-type-options"] == "nosniff"
    assert all(e["field"] for e in api.json()["detail"])


def test_evil_tokens_in_the_api_come_back_as_json_strings(client: TestClient) -> None:
    r = client.post("/api/attention", json={"tokens": EVIL[:2], "x": [[1.0, 0.0], [0.0, 1.0]]})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.json()["tokens"] == EVIL[:2]


# A NUL, a terminal's escape and the right-to-left override: escaped, each still garbles the page or a
# terminal it is copied into (the override reverses the text after it, up to the end of its line).
HIDDEN = [("a\x00b", "control character U+0000"), ("\x1b[2Jwiped", "control character U+001B"),
          ("\u202eevil", "invisible character U+202E (right-to-left override)")]


@pytest.mark.parametrize(("token", "what"), HIDDEN)
def test_a_token_with_a_hidden_character_is_a_422_naming_it_everywhere(client: TestClient, token: str,
                                                                       what: str) -> None:
    """The page (with and without JavaScript), the JSON API, a permalink and a pinned state alike."""
    fields = form_fields(client.get("/?preset=three-token").text)
    message = f"token 3: remove the {what} from it"
    for r in (client.post("/stages", data={**fields, "token-2": token}, headers=HTMX),
              client.post("/", data={**fields, "token-2": token})):
        assert r.status_code == 422 and message in r.text, r.text[-2000:]
    # Without JavaScript the page keeps the student's scenario: the other tokens, and the typed one in its input
    page = client.post("/", data={**fields, "token-0": "river", "token-2": token}).text
    assert (form_fields(page)["token-0"], form_fields(page)["token-2"]) == ("river", token)
    assert '<th scope="row">1 river</th>' in page  # the stages are the student's, not the preset's
    api = client.post("/api/attention", json={"tokens": ["a", token], "x": [[1.0], [2.0]]})
    assert api.status_code == 422
    assert [(e["field"], e["msg"]) for e in api.json()["detail"]] == [("tokens[1]", f"tokens[1]: remove the {what} "
                                                                                    "from it")]
    source = {"tokens": ["a"], "x": [[1.0]], "context": {"tokens": ["b", token], "x": [[1.0], [2.0]]}}
    assert [e["field"] for e in client.post("/api/attention", json=source).json()["detail"]] == ["context.tokens[1]"]
    sc, view = from_preset("three-token")
    link = client.get("/?" + urlencode({**dict(state_query(sc, view)), "token-2": token}))
    assert link.status_code == 422 and message in link.text
    pin = encode_pin(replace(sc, tokens=(*sc.tokens[:2], token)))
    pinned = client.post("/stages", data={**fields, "pin": pin}, headers=HTMX)
    assert pinned.status_code == 422 and f"pin: the pinned state is not valid ({message}); unpin it" in pinned.text


def test_evil_view_fields_are_ignored_or_refused(client: TestClient) -> None:
    sc, view = from_preset("three-token")
    base = dict(state_query(sc, view))
    for name in ("stage", "inspect", "revealed", "panels", "decimals", "pin", "guess_matrix"):
        r = client.post("/stages", data={**base, name: EVIL[1], "quiz": "on", "action": "guess",
                                         "guess": EVIL[0]}, headers=HTMX)
        assert r.status_code in (200, 422), name
        assert "<img" not in r.text and "<script>alert" not in r.text, name


def test_the_security_docs_list_the_headers_sent(client: TestClient) -> None:
    """docs/security.md's table is what the server sends, header by header."""
    readme = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    section = readme.split("\n## Security\n", 1)[1].split("\n## ", 1)[0]
    table = dict(re.findall(r"^\s*\| ([A-Z][\w-]+) \| `([^`]+)` \|$", section, re.MULTILINE))
    sent = client.get("/").headers
    assert table and {name.lower(): value for name, value in table.items()} == {
        name.lower(): sent[name] for name in table
    }
    assert set(table) >= {"Content-Security-Policy", "X-Content-Type-Options", "Referrer-Policy"}
    assert "Reporting a problem" in section


def test_an_unexpected_error_still_gets_the_headers() -> None:
    """Starlette's error layer sits outside every middleware: the 500 a bug causes must not lose them."""
    from app.main import create_app

    app = create_app()

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("a bug")

    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.get("/boom")
    assert r.status_code == 500 and r.text == "Internal Server Error"
    assert_secure_headers(r)
    with TestClient(app) as c, pytest.raises(RuntimeError):  # and the error is still raised (logged)
        c.get("/boom")
