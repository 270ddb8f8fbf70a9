"""The container test's engine, base image, image, containers and Redis: `make test-container`
(pytest -m container).

The image is built from the Dockerfile unchanged, with the docker CLI where a Docker engine answers
and with podman otherwise. Podman runs with runc and lowered ulimits (crun cannot set rlimits on
every host), and builds in Docker's format so the HEALTHCHECK is kept. Where no registry is
reachable and python:3.11-slim is not in podman's store, a stand-in is made under that name from
Debian's python3 (debootstrap, cached in ATTENTION_CACHE_DIR, /var/cache/attention-demo by default).

Containers that use Redis share the host's network, where the tests run Debian's redis-server on a
free loopback port, as replicas on one machine would share a Redis: `start(host_network=True, ...)`.

With no engine (or no redis-server for the tests that need one) the tests are skipped with the
reason, unless REQUIRE_CONTAINER=1 (as .ci/run sets), which turns the skip into a failure. Tests
marked `container` only run when asked for with -m.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import httpx
import pytest

from tests.redis_server import find_redis_server, redis_server

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / "test-artifacts"  # git-ignored
BASE_IMAGE = "docker.io/library/python:3.11-slim"  # the Dockerfile's FROM
# The tag names the checkout, so that two checkouts testing at once on one machine do not run each other's image.
IMAGE = "attention-demo:test-" + re.sub(r"[^a-z0-9_.-]+", "-", REPO_ROOT.name.lower())[:64]
STAND_IN_LABEL = "attention-demo.stand-in"
CACHE_DIR = Path(os.environ.get("ATTENTION_CACHE_DIR", "/var/cache/attention-demo"))
STAND_IN_PACKAGES = "python3,python3-venv,python3-pip,python-is-python3,ca-certificates"
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
PODMAN_LIMITS = ("--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096")
BUILD_TIMEOUT = 1800.0
COMMAND_TIMEOUT = 120.0
START_TIMEOUT_S = 60.0  # give up waiting for a container that never answers

_MEASUREMENTS = pytest.StashKey[dict[str, str]]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "container: builds and runs the image (make test-container; minutes)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave the container tests out of a plain run; `-m container` (make test-container) runs them."""
    if "container" in (config.option.markexpr or ""):
        return
    skipped = [item for item in items if item.get_closest_marker("container")]
    if skipped:
        config.hook.pytest_deselected(items=skipped)
        items[:] = [item for item in items if not item.get_closest_marker("container")]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    measured = config.stash.get(_MEASUREMENTS, {})
    if measured:
        terminalreporter.section("container measurements")
        for name, value in measured.items():
            terminalreporter.write_line(f"{name:<36} {value}")


@pytest.fixture(scope="session")
def measurements(request: pytest.FixtureRequest) -> dict[str, str]:
    """Numbers to print after the run (the README's budgets are checked against them)."""
    return request.config.stash.setdefault(_MEASUREMENTS, {})


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("REQUIRE_CONTAINER") == "1":
        pytest.fail(f"REQUIRE_CONTAINER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@dataclass(frozen=True)
class Engine:
    """A container CLI: `docker` talking to a Docker engine, or `podman`."""

    name: str
    command: tuple[str, ...]
    build_options: tuple[str, ...] = ()
    run_options: tuple[str, ...] = ()

    def __call__(self, *args: str, timeout: float = COMMAND_TIMEOUT,
                 check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([*self.command, *args], capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(self.command)} {' '.join(args)} exited with {result.returncode}:\n"
                                 f"{result.stdout}\n{result.stderr}")
        return result

    def inspect(self, *names: str, kind: str = "container") -> list[dict]:
        return json.loads(self(kind, "inspect", *names).stdout)

    def healthcheck(self, name: str) -> bool:
        """Run the image's HEALTHCHECK command now, as the engine would; True when it passes."""
        if self.name == "podman":
            return self("healthcheck", "run", name, check=False).returncode == 0
        test = self.inspect(name)[0]["Config"]["Healthcheck"]["Test"]  # ["CMD", ...] (exec form)
        return self("exec", name, *test[1:], check=False).returncode == 0

    def health_status(self, name: str) -> str:
        state = self.inspect(name)[0]["State"]
        return (state.get("Health") or state.get("Healthcheck") or {}).get("Status", "")

    def process_users(self, name: str) -> list[tuple[str, str]]:
        """(user, command) of every process in the container, as the host sees them."""
        if self.name == "podman":
            out = self("top", name, "huser", "args").stdout
        else:
            out = self("top", name, "-o", "uid,args").stdout
        return [(line.split(None, 1)[0], line.split(None, 1)[1]) for line in out.strip().splitlines()[1:]]


def find_engine() -> Engine | None:
    """Docker where an engine answers, else podman, else None."""
    docker = shutil.which("docker")
    if docker:
        try:
            if subprocess.run([docker, "info"], capture_output=True, timeout=30).returncode == 0:
                return Engine("docker", (docker,))
        except subprocess.TimeoutExpired:
            pass
    podman = shutil.which("podman")
    if podman is None:
        return None
    runtime = ("--runtime", "runc") if shutil.which("runc") else ()
    ca = ("-v", f"{HOST_CA_BUNDLE}:{HOST_CA_BUNDLE}:ro") if HOST_CA_BUNDLE.is_file() else ()
    return Engine("podman", (podman, *runtime), build_options=("--format", "docker", "--pull=never", *PODMAN_LIMITS,
                                                                 *ca), run_options=PODMAN_LIMITS)


@pytest.fixture(scope="session")
def engine(measurements: dict[str, str]) -> Engine:
    found = find_engine()
    if found is None:
        _unavailable("no container engine: no Docker engine answers `docker info` and podman is not installed "
                     "(make test-container installs podman when run as root)")
    measurements["engine"] = " ".join(found.command)
    return found


def make_stand_in_base(engine: Engine) -> None:
    """Debian's python3 under the name python:3.11-slim, for a machine that cannot reach a registry."""
    rootfs = CACHE_DIR / "bookworm-python3-rootfs"
    if not rootfs.is_dir():
        if os.geteuid() != 0 or shutil.which("debootstrap") is None:
            _unavailable(f"{BASE_IMAGE} cannot be pulled and a stand-in needs root and debootstrap")
        partial = rootfs.with_name(rootfs.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["debootstrap", "--variant=minbase", f"--include={STAND_IN_PACKAGES}", "bookworm",
                        str(partial)], check=True, capture_output=True, timeout=BUILD_TIMEOUT)
        partial.rename(rootfs)
    with subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE) as tar:
        subprocess.run([*engine.command, "import", "--change", f"LABEL {STAND_IN_LABEL}=debootstrap-bookworm",
                        "-", BASE_IMAGE], stdin=tar.stdout, check=True, capture_output=True, timeout=BUILD_TIMEOUT)
    assert tar.returncode == 0, f"tar of {rootfs} failed"


@pytest.fixture(scope="session")
def base_image(engine: Engine, measurements: dict[str, str]) -> str:
    """The base image, present in the engine's store (podman only; docker build pulls it itself)."""
    if engine.name == "docker":
        measurements["base image"] = BASE_IMAGE
        return BASE_IMAGE
    if engine("image", "exists", BASE_IMAGE, check=False).returncode != 0:
        if engine("pull", BASE_IMAGE, check=False, timeout=BUILD_TIMEOUT).returncode != 0:
            make_stand_in_base(engine)
    labels = engine.inspect(BASE_IMAGE, kind="image")[0].get("Labels") or {}
    stand_in = f" (stand-in: {labels[STAND_IN_LABEL]}, Python 3.11)" if STAND_IN_LABEL in labels else ""
    measurements["base image"] = BASE_IMAGE + stand_in
    return BASE_IMAGE


def build(engine: Engine, context: Path, tag: str, log_name: str) -> float:
    """Build the Dockerfile in `context` as `tag`; the seconds it took. The log lands in test-artifacts/."""
    ARTIFACTS.mkdir(exist_ok=True)
    started = time.monotonic()
    result = engine("build", *engine.build_options, "-t", tag, str(context), timeout=BUILD_TIMEOUT, check=False)
    seconds = time.monotonic() - started
    (ARTIFACTS / log_name).write_text(result.stdout + result.stderr)
    assert result.returncode == 0, f"the image did not build; see test-artifacts/{log_name}:\n{result.stderr[-3000:]}"
    return seconds


@pytest.fixture(scope="session")
def image(engine: Engine, base_image: str, measurements: dict[str, str]) -> Iterator[str]:
    """The image built from the repository's Dockerfile, unchanged."""
    seconds = build(engine, REPO_ROOT, IMAGE, "container-build.log")
    measurements["build"] = f"{seconds:.1f} s"
    yield IMAGE


# --- containers of the image ----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1.0, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


@dataclass(frozen=True)
class Running:
    """A started container: its name, its URL on the host, and how long it took to come up."""

    name: str
    url: str
    answered_s: float  # from `run` to GET /healthz answering 200 through the published port
    healthy_s: float  # from `run` to the image's HEALTHCHECK passing

    def client(self, **options: object) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30.0, trust_env=False, **options)


def wait_for(condition: Callable[[], bool], started: float, engine: Engine, name: str, what: str,
             pause: float) -> float:
    """Seconds from `started` until `condition()` holds; fail with the logs if the container stops."""
    while time.monotonic() - started < START_TIMEOUT_S:
        if condition():
            return time.monotonic() - started
        if engine.inspect(name)[0]["State"]["Status"] != "running":
            pytest.fail(f"{name} stopped before {what}:\n{engine('logs', name, check=False).stderr[-3000:]}")
        time.sleep(pause)
    pytest.fail(f"{name}: not {what} within {START_TIMEOUT_S:g} s")


def logs(engine: Engine, name: str) -> str:
    result = engine("logs", name)
    return result.stdout + result.stderr


@dataclass
class Containers:
    """The containers a test module starts; each is removed at the end, its log kept in test-artifacts/."""

    engine: Engine
    image: str
    names: list[str]

    def name(self) -> str:
        name = f"attention-demo-test-{len(self.names)}-{free_port()}"
        self.names.append(name)
        return name

    def run(self, name: str, env: dict[str, str], network: list[str]) -> None:
        options = [arg for key, value in env.items() for arg in ("-e", f"{key}={value}")]
        self.engine("run", "-d", "--name", name, *self.engine.run_options, *network, *options, self.image)

    def start(self, *, host_network: bool = False, **env: str) -> Running:
        """Run the image with these environment variables; return once it answers and is healthy.
        With `host_network` it listens on a free port of the host's loopback, beside the tests' Redis."""
        name, port = self.name(), free_port()
        if host_network:
            network = ["--network", "host"]
            env = {"ATTENTION_HOST": "127.0.0.1", "ATTENTION_PORT": str(port), **env}
        else:
            network = ["-p", f"127.0.0.1:{port}:8000"]
        started = time.monotonic()
        self.run(name, env, network)
        url = f"http://127.0.0.1:{port}"
        answered = wait_for(lambda: answers(f"{url}/healthz"), started, self.engine, name, "answering", 0.05)
        healthy = wait_for(lambda: self.engine.healthcheck(name), started, self.engine, name, "healthy", 0.1)
        return Running(name, url, answered, healthy)

    def exit_code(self, **env: str) -> tuple[int, str]:
        """Run the image with these environment variables until it exits: its exit code and its log."""
        name = self.name()
        self.run(name, env, ["--network", "none"])
        code = int(self.engine("wait", name, timeout=START_TIMEOUT_S).stdout.split()[-1])
        return code, logs(self.engine, name)

    def remove_all(self) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        for name in self.names:
            result = self.engine("logs", name, check=False)
            (ARTIFACTS / f"{name}.log").write_text(result.stdout + result.stderr)
            self.engine("rm", "-f", name, check=False)


@pytest.fixture(scope="module")
def containers(engine: Engine, image: str) -> Iterator[Containers]:
    started = Containers(engine, image, [])
    yield started
    started.remove_all()


@pytest.fixture(scope="module")
def start(containers: Containers) -> Callable[..., Running]:
    """`start(NAME=value, ...)` runs the image with those environment variables; all are removed at the end."""
    return containers.start


# --- Redis on the host --------------------------------------------------------------------------


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """Debian's redis-server on a free port of the host's loopback, keeping nothing on disk: its REDIS_URL
    (tests/redis_server.py, as the other Redis tests start it)."""
    binary = find_redis_server()
    if binary is None:
        _unavailable("redis-server is not installed (make test-container installs it when run as root)")
    with redis_server(binary) as server:
        yield server.url()
