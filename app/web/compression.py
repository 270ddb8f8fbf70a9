"""Response compression: the encodings, their levels, and the choice among them.

starlette-compress compresses every response over MINIMUM_SIZE bytes (the page, its fragments, the
static files, errors): zstd for a client that accepts it, else Brotli, else gzip, at the levels
below, chosen for the CPU they spend per byte they save (docs/performance.md, "Compression"). A class's
event stream (text/event-stream) is left as it is: the workspace its events carry is compressed once for
the whole class (app.web.class_stream), where compressing each stream would cost that work per student
(and a compressor's memory per open stream). The JSON API compresses its own answer in
its worker thread (``compressed``) with the same choice, because compressing megabytes on the event
loop would hold up every other request meanwhile; the middleware leaves an encoded response as it is.
"""

from __future__ import annotations

import threading
import zlib

import brotli
import zstandard
from starlette.responses import Response
from starlette_compress import remove_compress_type

MINIMUM_SIZE = 1024  # bytes: below it, the headers would outweigh the saving
ZSTD_LEVEL = 1
BROTLI_QUALITY = 1
GZIP_LEVEL = 1
PREFERENCE = ("zstd", "br", "gzip")  # the server's order, whatever q-values the client gives (as the middleware)

remove_compress_type("text/event-stream")  # its payloads come compressed (app.web.class_stream)

MIDDLEWARE_OPTIONS = dict(minimum_size=MINIMUM_SIZE, zstd_level=ZSTD_LEVEL, brotli_quality=BROTLI_QUALITY,
                          gzip_level=GZIP_LEVEL)


def accepted_encodings(accept_encoding: str) -> set[str]:
    """The encodings of PREFERENCE an Accept-Encoding header allows: named with q > 0, or covered by * when
    not refused with q=0."""
    accepted, refused, anything = set(), set(), False
    for item in accept_encoding.split(","):
        name, _, params = item.partition(";")
        name = name.strip().lower()
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if not name:
            continue
        if q <= 0:
            refused.add(name)
        elif name == "*":
            anything = True
        else:
            accepted.add(name)
    if anything:
        accepted |= set(PREFERENCE)
    return (accepted - refused) & set(PREFERENCE)


def preferred_encoding(accept_encoding: str) -> str | None:
    """The encoding to answer with, or None to send the body as it is."""
    accepted = accepted_encodings(accept_encoding)
    return next((e for e in PREFERENCE if e in accepted), None)


_local = threading.local()  # a zstd compressor per thread: making one costs more than a small answer's compression


def compress(body: bytes, encoding: str) -> bytes:
    if encoding == "zstd":
        compressor = getattr(_local, "zstd", None)
        if compressor is None:
            compressor = _local.zstd = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
        return compressor.compress(body)
    if encoding == "br":
        return brotli.compress(body, quality=BROTLI_QUALITY)
    if encoding == "gzip":
        compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # 31: the gzip container
        return compressor.compress(body) + compressor.flush()
    raise ValueError(f"no such encoding: {encoding}")


def compressed(body: bytes, media_type: str, accept_encoding: str) -> Response:
    """A response of ``body`` compressed as the client prefers (as the middleware would), for a worker
    thread to build: the codecs let go of the GIL while they work."""
    encoding = preferred_encoding(accept_encoding) if len(body) >= MINIMUM_SIZE else None
    if encoding is None:
        return Response(body, media_type=media_type)
    return Response(compress(body, encoding), media_type=media_type,
                    headers={"Content-Encoding": encoding, "Vary": "Accept-Encoding"})
