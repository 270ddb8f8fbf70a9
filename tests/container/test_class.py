"""A live class on two replicas of the image sharing one Redis, as compose.yaml runs them.

The teacher starts and steps the class on one replica, the student follows it on the other: the
student's event stream gets the change within a second, and the workspace it then fetches shows the
teacher's stage. Without Redis, more than one worker is refused. With nginx installed, the same
class goes through deploy/nginx.conf in front of both replicas. `make test-container` runs this.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from app.lesson.presets import DEFAULT_PRESET
from app.state.page import preset_page
from app.state.permalink import state_query
from tests.container.conftest import (
    ARTIFACTS,
    Containers,
    Engine,
    Running,
    _unavailable,
    answers,
    free_port,
    logs,
)
from tests.servers import find_nginx, nginx_config

pytestmark = pytest.mark.container

MAX_EVENT_S = 1.0  # from the teacher's step to the "state" event on a student's stream
HTMX = {"HX-Request": "true"}


@pytest.fixture(scope="module")
def replicas(containers: Containers, redis_url: str) -> tuple[Running, Running]:
    """Two containers of the image with REDIS_URL naming the same Redis, each with its default workers."""
    return (containers.start(host_network=True, REDIS_URL=redis_url),
            containers.start(host_network=True, REDIS_URL=redis_url))


def started_workers(engine: Engine, name: str) -> int:
    return logs(engine, name).count("Started server process")


# --- a class, driven over HTTP as the pages' forms and htmx do ------------------------------------


def default_state() -> dict[str, str]:
    """The page's state for the default preset, as its form posts it."""
    return dict(state_query(*preset_page(DEFAULT_PRESET)))


@dataclass
class Teacher:
    client: httpx.Client
    code: str
    key: str
    page: str  # the teacher's page, as first drawn

    @classmethod
    def start_class(cls, client: httpx.Client) -> Teacher:
        """Start a class from the default preset's page and open the teacher link."""
        started = client.post("/class", data={**default_state(), "action": "start_class"})
        assert started.status_code == 303, started.text[-500:]
        link = started.headers["location"]  # /class/<code>/teach?key=...
        code, key = link.split("/")[-2], parse_qs(urlsplit(link).query)["key"][0]
        moved = client.get(link)  # the key goes into an HttpOnly cookie; the page never holds it
        assert moved.status_code == 303
        page = client.get(moved.headers["location"])
        assert page.status_code == 200 and 'data-role="teacher"' in page.text
        assert key not in page.text
        return cls(client, code, key, page.text)

    def step(self, stage: str, **fields: str) -> None:
        """Go to `stage` on the teacher's page (an htmx post of the stages, as a stage button sends)."""
        r = self.client.post("/stages", headers=HTMX, data={
            **default_state(), "class_code": self.code, "class_key": self.key, "goto": stage, "stage": stage, **fields})
        assert r.status_code == 200, r.text[-500:]


class EventStream:
    """A student's server-sent events, read line by line from an open response."""

    def __init__(self, response: httpx.Response) -> None:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        self.lines = response.iter_lines()

    def next_event(self) -> tuple[str, str]:
        """The next event's name and data; comments (keep-alives) and retry lines are skipped."""
        kind, data = "", ""
        for line in self.lines:
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data = line.removeprefix("data: ")
            elif line == "" and kind:
                return kind, data
        raise AssertionError("the event stream ended")


def stage_shown(html: str) -> str:
    found = re.search(r'name="stage" value="([a-z_0-9]+)"', html)
    assert found, "no stage in the workspace"
    return found[1]


def follow_a_class(teacher_url: str, student_url: str, measurements: dict[str, str], label: str) -> Teacher:
    """The teacher on `teacher_url` starts a class and steps to softmax with the quiz on; the student,
    on `student_url`, joins, listens, predicts. Returns the teacher, after checking each step."""
    options = {"timeout": httpx.Timeout(10.0, read=5.0), "trust_env": False}
    with httpx.Client(base_url=teacher_url, **options) as t, httpx.Client(base_url=student_url, **options) as s:
        teacher = Teacher.start_class(t)
        joined = s.get(f"/class/{teacher.code}")
        assert joined.status_code == 200
        assert "attention_student" in s.cookies
        first = s.get(f"/class/{teacher.code}/workspace", headers=HTMX)
        assert first.status_code == 200 and stage_shown(first.text) != "softmax"

        with s.stream("GET", f"/class/{teacher.code}/events") as response:
            events = EventStream(response)
            kind, version = events.next_event()  # the room's version, at once
            assert kind == "state"
            stepped = time.monotonic()
            teacher.step("softmax", quiz="on")
            kind, data = events.next_event()
            seconds = time.monotonic() - stepped
            assert kind == "state" and int(data.split()[0]) > int(version), (kind, data, version)
            measurements[f"class event, {label}"] = f"{seconds * 1000:.0f} ms after the step (budget {MAX_EVENT_S:g} s)"
            assert seconds <= MAX_EVENT_S

            workspace = s.get(f"/class/{teacher.code}/workspace", headers=HTMX)
            assert workspace.status_code == 200
            assert stage_shown(workspace.text) == "softmax"

            predicted = s.post(f"/class/{teacher.code}/predict", headers=HTMX, data={
                "guess_matrix": "softmax", "guess_row": "1", "guess_col": "2", "guess": "0.3"})
            assert predicted.status_code == 200 and "Sent: your prediction 0.3" in predicted.text
            kind, data = events.next_event()
            assert kind == "predictions" and data.split()[1] == "1"

        results = t.post(f"/class/{teacher.code}/results", headers=HTMX, data={"class_key": teacher.key})
        assert results.status_code == 200
        assert "Reveal to the class" in results.text  # the student's prediction, on the teacher's replica
        return teacher


# --- two replicas, one Redis --------------------------------------------------------------------


def test_a_student_on_one_replica_follows_the_teacher_on_the_other(
    replicas: tuple[Running, Running], measurements: dict[str, str]
) -> None:
    a, b = replicas
    follow_a_class(a.url, b.url, measurements, "replica A → B")


def test_a_teacher_link_opens_on_either_replica(replicas: tuple[Running, Running]) -> None:
    a, b = replicas
    with a.client() as on_a, b.client() as on_b:
        teacher = Teacher.start_class(on_a)
        page = on_b.get(f"/class/{teacher.code}/teach?{urlencode({'key': teacher.key})}", follow_redirects=True)
        wrong = on_b.get(f"/class/{teacher.code}/teach?key=not-the-key")
    assert page.status_code == 200 and teacher.code in page.text and 'data-role="teacher"' in page.text
    assert wrong.status_code == 403


def test_with_redis_the_workers_default_to_the_cpus(engine: Engine, replicas: tuple[Running, Running]) -> None:
    for replica in replicas:
        cpus = int(engine("exec", replica.name, "nproc").stdout)
        assert started_workers(engine, replica.name) == cpus


def test_several_workers_without_redis_are_refused(containers: Containers) -> None:
    code, log = containers.exit_code(ATTENTION_WORKERS="2")
    assert code != 0
    assert "ATTENTION_WORKERS=2 needs REDIS_URL" in log
    assert "Started server process" not in log


# --- the same class through deploy/nginx.conf -----------------------------------------------------


@pytest.fixture(scope="module")
def balancer(replicas: tuple[Running, Running]) -> Iterator[str]:
    """nginx on a free loopback port with deploy/nginx.conf in front of both replicas: its URL."""
    binary = find_nginx()
    if binary is None:
        _unavailable("nginx is not installed (make test-container installs it when run as root)")
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="attention-nginx-"))
    workdir.chmod(0o755)
    config = nginx_config(workdir, port, [r.url.removeprefix("http://") for r in replicas])
    proc = subprocess.Popen([binary, "-c", str(config), "-p", str(workdir)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 10
        while not answers(f"{url}/healthz"):
            assert proc.poll() is None and time.monotonic() < deadline, (workdir / "error.log").read_text()[-3000:]
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        ARTIFACTS.mkdir(exist_ok=True)
        for name in ("error.log", "access.log"):
            if (workdir / name).is_file():
                shutil.copy(workdir / name, ARTIFACTS / f"nginx-{name}")
        shutil.rmtree(workdir, ignore_errors=True)


def test_a_class_through_the_balancer_reaches_both_replicas(
    balancer: str, replicas: tuple[Running, Running], engine: Engine, measurements: dict[str, str]
) -> None:
    before = [logs(engine, r.name).count("/class/") for r in replicas]
    teacher = follow_a_class(balancer, balancer, measurements, "through nginx")
    after = [logs(engine, r.name).count("/class/") for r in replicas]
    assert all(b > a for a, b in zip(before, after, strict=True)), (before, after)  # no affinity: both served
    assert f'{balancer}/class/{teacher.code}' in teacher.page  # the join link names the balancer, port and all
