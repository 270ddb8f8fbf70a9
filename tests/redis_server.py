"""A real Redis for the tests and the bench: Debian's redis-server on a free loopback port, keeping
nothing on disk, answering PING before anyone uses it, and stopped whatever happens. And one that keeps
its append-only file, as compose.yaml's does, to be stopped and started again on the same port and directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

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


class DurableRedis:
    """redis-server with its append-only file in ``workdir`` (as compose.yaml runs it), on one loopback port
    across restarts: ``stop`` is a SIGTERM (Redis writes its file and exits), ``start`` reads the file back."""

    def __init__(self, binary: str, workdir: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.workdir = workdir
        self.args = [binary, "--port", str(self.port), "--bind", LOOPBACK, "--save", "", "--appendonly", "yes",
                     "--appendfsync", "everysec", "--dir", str(workdir), "--daemonize", "no", "--loglevel", "warning"]
        self.log = open(workdir / "redis.log", "ab")  # noqa: SIM115 - kept open across restarts, closed by close()
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://{LOOPBACK}:{self.port}/{db}"

    def client(self, db: int = 0):  # noqa: ANN201 - redis.Redis, imported late like the app does
        import redis

        return redis.Redis(host=LOOPBACK, port=self.port, db=db, decode_responses=True, socket_timeout=2)

    def start(self) -> None:
        """Start it (again), and return once it answers PING (with its file read back)."""
        self.proc = subprocess.Popen(self.args, cwd=self.workdir, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_SECONDS
        while not _answers_ping(self.port):
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}:\n{tail(self.log)}")
            if time.monotonic() > deadline:
                stop(self.proc)
                raise RuntimeError(f"redis-server did not answer PING within {START_SECONDS:g} s:\n{tail(self.log)}")
            time.sleep(0.02)

    def stop(self) -> None:
        """SIGTERM, as a restart of its container sends: Redis writes its append-only file and exits."""
        if self.proc is not None:
            stop(self.proc)
            self.proc = None

    def close(self) -> None:
        self.stop()
        self.log.close()


@contextmanager
def durable_redis_server(binary: str) -> Iterator[DurableRedis]:
    """A DurableRedis in a directory of its own, started; stopped and its directory removed whatever happens."""
    with tempfile.TemporaryDirectory(prefix="attention-redis-") as workdir:
        server = DurableRedis(binary, Path(workdir))
        try:
            server.start()
            yield server
        finally:
            server.close()
