"""The static files (/static), each compressed once at its smallest rather than per request at the fastest level.

The middleware compresses what the app writes at zstd level 1 (app.web.compression): right for a page made per
request, wasteful for a script that never changes. Here each compressible file (scripts, styles, SVG, fonts,
JSON) is compressed once per encoding at the encoder's best level — Brotli 11, zstd 19, gzip 9; a file over
256 KB, such as the API docs' script, at levels that take milliseconds rather than seconds — kept in memory
while the file is unchanged (by its mtime and size), and sent with Content-Encoding, so the middleware leaves it
as it is. Brotli goes first here: at its best level it is the smallest of the three (the first page's scripts
and styles, 62 KB with zstd 1, are about 48 KB). The files a first page loads are compressed when the app
starts, in a thread, so no request waits for them; any other on its first request, in a thread too.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import anyio
import brotli
import zstandard
from starlette.datastructures import Headers
from starlette.responses import FileResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from app.web.compression import accepted_encodings

COMPRESSIBLE = {".css", ".js", ".mjs", ".svg", ".json", ".map", ".ttf", ".otf", ".txt", ".html", ".md"}
ORDER = ("br", "zstd", "gzip")  # the smallest first, at these levels
MAX_BYTES = 4 * 1024 * 1024  # larger files are sent as the middleware sends them
SKIP_WARMING = ("vendor/swagger-ui", "fonts/")  # the API's docs and the figures' fonts: compressed when asked for


_PACKED: dict[tuple[str, str], tuple[int, int, bytes]] = {}  # (path, encoding) → mtime, size, compressed bytes


BEST_UP_TO = 256 * 1024  # a larger file (the API docs' script, 1.4 MB) gets faster levels: Brotli 11 takes seconds


def _compress(body: bytes, encoding: str) -> bytes:
    best = len(body) <= BEST_UP_TO
    if encoding == "br":
        return brotli.compress(body, quality=11 if best else 6)
    if encoding == "zstd":
        return zstandard.ZstdCompressor(level=19 if best else 9).compress(body)
    return gzip.compress(body, 9 if best else 6, mtime=0)


class PrecompressedStatic(StaticFiles):
    """StaticFiles whose compressible files are answered from their bytes compressed once at the best level."""

    def __init__(self, *, directory: Path) -> None:
        super().__init__(directory=directory)
        self.root = Path(directory)
        self.packed = _PACKED  # one per process: every app of the process serves the same files

    def kept(self, full: str, encoding: str, stat: os.stat_result) -> bytes | None:
        """The file's compressed bytes when they were made from the file as it is now."""
        kept = self.packed.get((full, encoding))
        return kept[2] if kept is not None and kept[:2] == (stat.st_mtime_ns, stat.st_size) else None

    def packed_bytes(self, full: str, encoding: str, stat: os.stat_result) -> bytes:
        kept = self.kept(full, encoding, stat)
        if kept is not None:
            return kept
        body = _compress(Path(full).read_bytes(), encoding)
        self.packed[full, encoding] = (stat.st_mtime_ns, stat.st_size, body)
        return body

    def warm(self) -> None:
        """Compress every file a page may load, in every encoding (run in a thread at start)."""
        for path in sorted(self.root.rglob("*")):
            relative = path.relative_to(self.root).as_posix()
            if path.suffix in COMPRESSIBLE and path.is_file() and not relative.startswith(SKIP_WARMING):
                stat = path.stat()
                if stat.st_size <= MAX_BYTES:
                    for encoding in ORDER:
                        self.packed_bytes(str(path), encoding, stat)

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        if not isinstance(response, FileResponse) or response.status_code != 200 or response.stat_result is None:
            return response  # 304, 404, a directory's index
        full, stat = str(response.path), response.stat_result
        if Path(full).suffix not in COMPRESSIBLE or stat.st_size > MAX_BYTES:
            return response
        accepted = accepted_encodings(Headers(scope=scope).get("accept-encoding", ""))
        encoding = next((e for e in ORDER if e in accepted), None)
        if encoding is None:
            return response
        packed = self.kept(full, encoding, stat)
        if packed is None:  # compressed once, in a thread: Brotli 11 takes tens of milliseconds
            packed = await anyio.to_thread.run_sync(self.packed_bytes, full, encoding, stat)
        headers = {k: v for k, v in response.headers.items() if k.lower() not in ("content-length",)}
        headers.update({"content-encoding": encoding, "vary": "Accept-Encoding"})
        return Response(packed, status_code=200, headers=headers, media_type=response.media_type)
