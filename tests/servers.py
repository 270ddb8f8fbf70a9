"""Real servers for the tests and the class-load bench: a free loopback port, a process that answers
/healthz before anyone uses it, and a stop that always happens. And nginx with deploy/nginx.conf in front of
app servers on this machine, as compose.yaml's balancer."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

NGINX = "/usr/sbin/nginx"  # Debian's nginx package (make services installs it)

REPO_ROOT = Path(__file__).resolve().parents[1]
LOOPBACK = "127.0.0.1"
START_SECONDS = 30.0  # a server must answer /healthz within this


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def tail(log: IO[bytes], chars: int = 3000) -> str:
    """The end of a server's log file (a file, not a pipe: a full pipe would stall the server).

    Read at an offset (pread): the server writes through the same open file, so moving its offset (seek)
    would make the server's next line land over the log's beginning."""
    fd = log.fileno()
    return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")[-chars:]


def wait_healthy(url: str, proc: subprocess.Popen[bytes], *, log: Callable[[], str] = lambda: "",
                 seconds: float = START_SECONDS) -> None:
    """Return once ``url`` answers 200; raise with the server's log if it exits or stays silent."""
    deadline = time.monotonic() + seconds
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}:\n{log()}")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer within {seconds:g} s:\n{log()}")
        time.sleep(0.1)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, and SIGKILL if the server has not stopped 10 s later."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start(args: Sequence[str], *, port: int, stdout: IO[bytes] | int = subprocess.DEVNULL,
          stderr: IO[bytes] | int = subprocess.STDOUT, env: Mapping[str, str] | None = None,
          log: Callable[[], str] = lambda: "") -> subprocess.Popen[bytes]:
    """``python *args`` from the repository, answering on ``port``; stopped again if it never does. The language
    model is read when first needed, not at start (ATTENTION_PRELOAD_LANGUAGE_MODEL): most servers of the tests
    never show it, and reading it costs seconds of a 2-core machine's CPU; ``env`` may say otherwise."""
    env = {"ATTENTION_PRELOAD_LANGUAGE_MODEL": "false", **(os.environ if env is None else env)}
    proc = subprocess.Popen([sys.executable, *args], cwd=REPO_ROOT, stdout=stdout, stderr=stderr, env=env)
    try:
        wait_healthy(f"http://{LOOPBACK}:{port}/healthz", proc, log=log)
    except BaseException:
        stop(proc)
        raise
    return proc


@contextmanager
def running(args: Sequence[str], *, port: int, stdout: IO[bytes] | int = subprocess.DEVNULL,
            stderr: IO[bytes] | int = subprocess.STDOUT, env: Mapping[str, str] | None = None,
            log: Callable[[], str] = lambda: "") -> Iterator[subprocess.Popen[bytes]]:
    """``start``, and ``stop`` on leaving the block, whatever happens in it."""
    proc = start(args, port=port, stdout=stdout, stderr=stderr, env=env, log=log)
    try:
        yield proc
    finally:
        stop(proc)


def uvicorn_args(port: int, *extra: str) -> list[str]:
    """The app under uvicorn on the loopback ``port``."""
    return ["-m", "uvicorn", "app.main:app", "--host", LOOPBACK, "--port", str(port), *extra]


def find_nginx() -> str | None:
    """Debian's nginx, else one on PATH."""
    return NGINX if os.access(NGINX, os.X_OK) else shutil.which("nginx")


def nginx_config(workdir: Path, port: int, upstreams: Sequence[str], connections: int = 1024) -> Path:
    """deploy/nginx.conf in a whole nginx config of its own, with the replicas' (``host:port``) and the listening
    addresses of this machine in place of compose's service names; ``connections`` per nginx worker (each
    proxied event stream holds two)."""
    site = (REPO_ROOT / "deploy" / "nginx.conf").read_text()
    names = re.findall(r"^\s*server ([\w.-]+:8000);", site, re.M)
    assert len(names) == len(upstreams) == 2, names
    for name, upstream in zip(names, upstreams, strict=True):
        site = site.replace(f"server {name};", f"server {upstream};")
    site = site.replace("listen 8000;", f"listen {LOOPBACK}:{port};")
    temp = workdir / "temp"
    temp.mkdir()
    temp.chmod(0o777)  # nginx's workers, started as root, run as nobody
    paths = "\n".join(f"    {kind}_temp_path {temp / kind};" for kind in ("client_body", "proxy", "fastcgi",
                                                                             "uwsgi", "scgi"))
    config = workdir / "nginx.conf"
    config.write_text(f"""daemon off;
worker_processes 1;
pid {workdir / "nginx.pid"};
error_log {workdir / "error.log"};
events {{ worker_connections {connections}; }}
http {{
    access_log {workdir / "access.log"};
{paths}
{site}
}}
""")
    return config


@contextmanager
def nginx(binary: str, upstreams: Sequence[str], connections: int = 1024) -> Iterator[str]:
    """nginx on a free loopback port with deploy/nginx.conf in front of ``upstreams`` (two ``host:port``): its URL,
    once it answers /healthz. Stopped and its directory removed whatever happens."""
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="attention-nginx-"))
    workdir.chmod(0o755)
    config = nginx_config(workdir, port, upstreams, connections)
    proc = subprocess.Popen([binary, "-c", str(config), "-p", str(workdir)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)
    try:
        errors = workdir / "error.log"
        wait_healthy(f"http://{LOOPBACK}:{port}/healthz", proc, seconds=10,
                     log=lambda: errors.read_text()[-3000:] if errors.is_file() else "")
        yield f"http://{LOOPBACK}:{port}"
    finally:
        stop(proc)
        shutil.rmtree(workdir, ignore_errors=True)
