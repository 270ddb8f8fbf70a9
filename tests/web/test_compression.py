"""Compression: what each client is answered with, the same choice for the page (the middleware) and the
JSON API (compressed in its worker thread), small answers left alone, and event streams flushed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fastapi.responses import StreamingResponse
from fastapi.testclient import TestClient
from starlette.types import Message

from app.main import create_app
from app.web.compression import accepted_encodings, preferred_encoding

CHROMIUM = "gzip, deflate, br, zstd"
BODY = {"tokens": ["a", "b", "c"], "x": [[0.2, -0.4, 0.9, 0.1], [0.5, 0.5, -0.3, 0.0], [-0.7, 0.2, 0.4, 0.8]]}


@pytest.mark.parametrize(("header", "chosen"), [
    (CHROMIUM, "zstd"),
    ("gzip, deflate, br", "br"),  # Safari
    ("gzip", "gzip"),
    ("GZIP;q=0.5, Br;q=1", "br"),  # the server's order, whatever the q-values
    ("zstd;q=0, br;q=0, gzip", "gzip"),
    ("*", "zstd"),
    ("*, zstd;q=0", "br"),
    ("identity", None),
    ("", None),
    ("gzip;q=nonsense", None),
])
def test_the_preferred_encoding(header: str, chosen: str | None) -> None:
    assert preferred_encoding(header) == chosen


def test_deflate_is_not_offered() -> None:
    assert accepted_encodings("deflate") == set()


@pytest.mark.parametrize("header", [CHROMIUM, "gzip, deflate, br", "gzip", "br;q=0, gzip", "*", "identity"])
def test_the_page_and_the_api_choose_alike(client: TestClient, header: str) -> None:
    page = client.get("/", headers={"Accept-Encoding": header})
    api = client.post("/api/attention", json=BODY, headers={"Accept-Encoding": header})
    assert page.status_code == api.status_code == 200
    assert len(page.content) > 1024 and len(api.content) > 1024  # both over the minimum size
    assert page.headers.get("content-encoding") == api.headers.get("content-encoding") == preferred_encoding(header)
    assert api.json()["tokens"] == BODY["tokens"]  # decoded by the client as sent
    if preferred_encoding(header):
        assert "accept-encoding" in api.headers["vary"].lower()


def test_small_answers_are_sent_as_they_are(client: TestClient) -> None:
    r = client.get("/healthz", headers={"Accept-Encoding": CHROMIUM})
    assert r.status_code == 200
    assert "content-encoding" not in r.headers


def test_an_encoded_api_answer_is_not_encoded_twice(client: TestClient) -> None:
    r = client.post("/api/attention", json=BODY, headers={"Accept-Encoding": "zstd"})
    assert r.status_code == 200
    assert r.headers["content-encoding"] == "zstd"
    assert r.json()["x"] == BODY["x"]


@pytest.mark.parametrize("encoding", ["zstd", "br", "gzip"])
def test_an_event_stream_is_sent_event_by_event_as_it_is(encoding: str) -> None:
    """Each event leaves the server when it is sent, not compressed again: a class's events carry payloads
    compressed once for the whole class (app.web.class_stream)."""
    app = create_app()
    events = [f"data: event {i} {'x' * 300}\n\n".encode() for i in range(3)]

    async def stream() -> AsyncIterator[bytes]:
        for event in events:
            yield event

    app.add_api_route("/events", lambda: StreamingResponse(stream(), media_type="text/event-stream"))
    sent: list[Message] = []

    requested = False

    async def receive() -> Message:  # the request, then a client that stays until the stream ends
        nonlocal requested
        if requested:
            await asyncio.Event().wait()
        requested = True
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": "/events", "raw_path": b"/events", "query_string": b"", "root_path": "",
             "headers": [(b"host", b"test"), (b"accept-encoding", encoding.encode())],
             "client": ("127.0.0.1", 1), "server": ("test", 80)}
    asyncio.run(app(scope, receive, send))
    start, *bodies = sent
    assert not any(name == b"content-encoding" for name, _ in start["headers"])
    assert [m["body"] for m in bodies if m.get("body")][: len(events)] == events  # one whole event per message


@pytest.mark.parametrize(("accept", "encoding"), [("gzip, deflate, br, zstd", "br"), ("zstd, gzip", "zstd"),
                                                  ("gzip", "gzip"), ("identity", None)])
def test_a_static_file_is_sent_compressed_once_at_its_smallest(client: TestClient, accept: str,
                                                               encoding: str | None) -> None:
    """Scripts and styles are compressed once at the encoder's best level (app.web.static_files), not per request
    at the fastest: Brotli 11 first, the file's bytes once decoded, its ETag kept for a revalidation."""
    path = Path(__file__).resolve().parents[2] / "static" / "vendor" / "htmx-2.0.11.min.js"
    r = client.get("/static/vendor/htmx-2.0.11.min.js", headers={"Accept-Encoding": accept})
    assert r.status_code == 200 and r.headers.get("content-encoding") == encoding
    assert r.content == path.read_bytes()  # httpx decodes it
    if encoding is not None:
        assert r.headers["vary"] == "Accept-Encoding"
        raw = int(r.headers["content-length"])
        assert raw < {"br": 0.30, "zstd": 0.33, "gzip": 0.35}[encoding] * path.stat().st_size
    again = client.get("/static/vendor/htmx-2.0.11.min.js", headers={"Accept-Encoding": accept,
                                                                      "If-None-Match": r.headers["etag"]})
    assert again.status_code == 304
    assert client.get("/static/no-such-file.js").status_code == 404
