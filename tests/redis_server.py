"""A real Redis for the tests and the bench: Debian's redis-server on a free loopback port, keeping
nothing on disk, answering PING before anyone uses it, and stopped whatever happens."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tests.servers import LOOPBACK, free_port, stop, tail

SYSTEM_REDIS = "/usr/bin/redis-server"  # Debian's redis-server package (make services installs it)
START_SECONDS = 10.0  # redis-server must answer PING within this


def find_redis_server() -> str | None:
    """REDIS_SERVER if set, else Debian's redis-server, else one on PATH."""
    for path in (os.environ.get("REDIS_SERVER"), SYSTEM_REDIS, shutil.which("redis-server")):
        if path and os.access(path, os.X_OK):
            return path
    return None


@dataclass(frozen=True)
class RedisServer:
    port: int
    pid: int

    def url(self, db: int = 0) -> str:
        return f"redis://{LOOPBACK}:{self.port}/{db}"

    def client(self, db: int = 0):  # noqa: ANN201 - redis.Redis, imported late like the app does
        import redis

        return redis.Redis(host=LOOPBACK, port=self.port, db=db, decode_responses=True)

    def flush(self) -> None:
        """Every database emptied: each test starts from nothing."""
        with self.client() as r:
            r.flushall()


def _answers_ping(port: int) -> bool:
    import redis

    try:
        with redis.Redis(host=LOOPBACK, port=port, socket_timeout=1, socket_connect_timeout=1) as r:
            return bool(r.ping())
    except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
        return False


@contextmanager
def redis_server(binary: str) -> Iterator[RedisServer]:
    """redis-server on a free port of 127.0.0.1, without snapshots or an append-only file."""
    port = free_port()
    args = [binary, "--port", str(port), "--bind", LOOPBACK, "--save", "", "--appendonly", "no",
            "--daemonize", "no", "--loglevel", "warning"]
    with tempfile.TemporaryFile() as log, tempfile.TemporaryDirectory() as workdir:
        proc = subprocess.Popen(args, cwd=workdir, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + START_SECONDS
            while not _answers_ping(port):
                if proc.poll() is not None:
                    raise RuntimeError(f"redis-server exited with {proc.returncode}:\n{tail(log)}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not answer PING within {START_SECONDS:g} s:\n{tail(log)}")
                time.sleep(0.05)
            yield RedisServer(port, proc.pid)
        finally:
            stop(proc)
