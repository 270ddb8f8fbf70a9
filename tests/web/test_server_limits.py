"""A real uvicorn against careless and hostile clients at the socket: a client that goes away in the
middle of its body, and one that sends its body too slowly.

Each client is a raw socket, so it can do what no HTTP library does: declare a Content-Length and
send half of it, or trickle it a few bytes at a time. The server's log is kept in a file and read.
"""

from __future__ import annotations

import os
import select
import socket
import tempfile
import time
from collections.abc import Iterator
from typing import IO

import pytest

from tests.servers import LOOPBACK, free_port, running, tail, uvicorn_args

pytestmark = pytest.mark.server

BODY_TIMEOUT = 1.0  # ATTENTION_BODY_TIMEOUT_SECONDS for these servers: short, so the slow client is quick to test
WAIT_SECONDS = 10.0  # any test waits at most this for the server to log or answer


class Server:
    def __init__(self, port: int, log: IO[bytes]) -> None:
        self.port = port
        self.log = log

    def text(self) -> str:
        return tail(self.log, chars=1_000_000)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """The app under uvicorn at its default log level, its log (stdout and stderr) in a file."""
    port = free_port()
    env = {**os.environ, "ATTENTION_BODY_TIMEOUT_SECONDS": str(BODY_TIMEOUT)}
    with tempfile.TemporaryFile() as log, running(uvicorn_args(port), port=port, stdout=log, env=env,
                                                   log=lambda: tail(log)):
        yield Server(port, log)


def head(path: str, length: int, content_type: str = "application/x-www-form-urlencoded") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: {LOOPBACK}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


def wait_for(condition, seconds: float = WAIT_SECONDS) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


ROUTES = [("/stages", "application/x-www-form-urlencoded"), ("/", "application/x-www-form-urlencoded"),
          ("/api/attention", "application/json"), ("/export", "multipart/form-data; boundary=xyz")]


@pytest.mark.parametrize(("path", "content_type"), ROUTES)
def test_a_client_leaving_mid_body_is_logged_in_one_line(server: Server, path: str, content_type: str) -> None:
    before = server.text()
    with socket.create_connection((LOOPBACK, server.port), timeout=WAIT_SECONDS) as s:
        s.sendall(head(path, 1000, content_type) + b"a" * 500)
        time.sleep(0.2)  # the half body reaches the app before the connection closes
    assert wait_for(lambda: any(word in server.text()[len(before):] for word in (f"POST {path} ", "Traceback")))
    time.sleep(0.3)  # anything else the server writes about it
    new = server.text()[len(before):]
    assert "Traceback" not in new, new[:3000]
    lines = [line for line in new.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert path in lines[0] and "500 of 1000 bytes" in lines[0]


def answer(s: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (or WAIT_SECONDS pass)."""
    data = b""
    s.settimeout(WAIT_SECONDS)
    try:
        while chunk := s.recv(65536):
            data += chunk
    except TimeoutError:
        pass
    return data


def test_a_body_that_stops_coming_gets_408_and_the_connection_closed(server: Server) -> None:
    with socket.create_connection((LOOPBACK, server.port), timeout=WAIT_SECONDS) as s:
        started = time.monotonic()
        s.sendall(head("/stages", 1000) + b"a" * 10)
        reply = answer(s)
        took = time.monotonic() - started
    assert reply.startswith(b"HTTP/1.1 408 "), reply[:200]
    assert b"connection: close" in reply.lower()
    assert BODY_TIMEOUT * 0.9 <= took < WAIT_SECONDS  # closed by the server, not by our wait running out


def test_a_body_trickled_a_byte_at_a_time_gets_408_by_its_deadline(server: Server) -> None:
    """Each byte arrives well inside the deadline, the whole body never does: the deadline is for the body."""
    with socket.create_connection((LOOPBACK, server.port), timeout=WAIT_SECONDS) as s:
        started = time.monotonic()
        s.sendall(head("/api/attention", 1000, "application/json"))
        for _ in range(int(WAIT_SECONDS * 10)):  # at most 100 bytes, one each 0.1 s, while the server says nothing
            readable, _, _ = select.select([s], [], [], 0.1)
            if readable:  # its answer: read before another byte is sent (a byte sent to a closed socket is
                break     # answered with a reset, which drops the answer still unread)
            try:
                s.sendall(b" ")
            except OSError:  # closed by the server
                break
        took = time.monotonic() - started
        try:
            reply = answer(s)
        except ConnectionResetError:  # the byte sent in the instant the server closed: its reset drops the 408
            reply = b""
    # the 408's words are checked by the test above; here the deadline: the server closed it in time
    assert reply.startswith(b"HTTP/1.1 408 ") or (not reply and took >= BODY_TIMEOUT * 0.9), reply[:200]
    assert took < BODY_TIMEOUT + 3
