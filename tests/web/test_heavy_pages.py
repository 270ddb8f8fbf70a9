"""Bounded work on the page's routes: a large pinned state cannot inflate without bound, and a small form
that asks for a large scenario is computed in the heavy lane's process, off the event loop.

The unit tests check where each request is answered (a spy on the heavy lane); the server tests run
a real uvicorn and check what a class would feel: /healthz and a default edit keep answering while
heavy requests loop. Their bounds are generous (a tenth of what the old behaviour took): the ratios
themselves are measured by the bench (``python -m bench.trust``), not asserted here."""

from __future__ import annotations

import base64
import statistics
import threading
import time
import urllib.parse
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from app.state.form import FormError
from app.state.pin import MAX_PIN_QUERY_BYTES, check_pin_size, encode_pin
from app.state.reading import decode_pin, read_page
from app.state.scenario import from_preset
from app.web.lanes import Lanes
from app.web.page_work import INLINE_OPERATIONS, page_operations
from bench.trust import bomb, costliest_form
from tests.conftest import form_fields
from tests.servers import LOOPBACK, free_port, running, tail, uvicorn_args

HTMX = {"HX-Request": "true"}


@pytest.fixture
def heavy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the work the app hands to the heavy lane's process."""
    calls: list[str] = []
    in_process = Lanes.in_process

    async def spy(self: Lanes, work: Callable[..., object], *args: object) -> object:
        inner = args[1] if work.__name__ == "encoded" else work  # encoded(accept_encoding, work, *args)
        calls.append(getattr(inner, "__name__", ""))
        return await in_process(self, work, *args)

    monkeypatch.setattr(Lanes, "in_process", spy)
    return calls


def default_page(client: TestClient) -> dict[str, str]:
    return form_fields(client.get("/").text)


# --- a pinned state is bounded -------------------------------------------------------------------


def test_a_pin_that_inflates_past_the_largest_state_is_refused_before_it_is_read() -> None:
    started = time.perf_counter()
    with pytest.raises(FormError) as e:
        decode_pin(bomb(64 * 1024 * 1024))  # 85 KB that inflated to 64 MB and froze a worker for 20 s
    assert e.value.field == "pin"
    assert time.perf_counter() - started < 2.0  # inflating stops at the bound: tens of milliseconds


def test_a_pin_of_too_many_fields_is_refused_before_they_are_built() -> None:
    fields = bomb(MAX_PIN_QUERY_BYTES // 2)  # within the bytes, but far more fields than any state has
    with pytest.raises(FormError, match="pin"):
        decode_pin(fields)


def test_the_largest_real_pin_still_reads_back() -> None:
    sc, _ = from_preset("default")
    assert decode_pin(encode_pin(sc)).tokens == sc.tokens


def long_field_bomb(inflated_bytes: int) -> str:
    """A pin that inflates to one field of ``inflated_bytes``: few separators, so only its size refuses it."""
    return base64.urlsafe_b64encode(zlib.compress(b"a=" + b"1" * inflated_bytes, 9)).decode("ascii")


@pytest.mark.parametrize("route", ["/", "/stages", "/class", "/scenario", "/export", "/handout", "/figure.svg"])
@pytest.mark.parametrize("pin", [bomb(64 << 20), long_field_bomb(64 << 20)], ids=["fields", "one-field"])
def test_a_bomb_pin_on_any_route_is_a_422_naming_the_pin_before_any_other_work(
        client: TestClient, heavy: list[str], route: str, pin: str) -> None:
    """Refused by inflating it a step at a time with a hard cap (app.state.pin.check_pin_size), before the page is
    read and never in the heavy lane's queue, where it once waited behind the costliest pages."""
    form = {**default_page(client), "pin": pin, "export": "x|csv", "figure": "x"}
    r = client.post(route, data=form, headers=HTMX)
    assert r.status_code == 422, r.text[:300]
    assert "pin" in r.text
    assert heavy == []


@pytest.mark.parametrize("field", ["pin", "learn_before"])
def test_check_pin_size_stops_at_the_first_bound_it_passes(field: str) -> None:
    with pytest.raises(FormError, match="pin|learn") as refused:
        check_pin_size(bomb(64 << 20), field)
    assert refused.value.field == field
    with pytest.raises(FormError):
        check_pin_size(long_field_bomb(MAX_PIN_QUERY_BYTES + 1), field)
    with pytest.raises(FormError):
        check_pin_size("not base64 at all!", field)
    check_pin_size(encode_pin(from_preset("bank-river")[0]), field)  # a real pin passes


# --- heavy pages go to the heavy lane, light ones stay -------------------------------------------


def test_the_line_between_light_and_heavy_pages(client: TestClient) -> None:
    page = default_page(client)
    assert page_operations(*read_page(page)) < INLINE_OPERATIONS / 4  # a default edit: far under the line
    assert page_operations(*read_page(costliest_form(page))) > 100 * INLINE_OPERATIONS
    learn = form_fields(client.get("/?preset=learn-bank").text)
    assert page_operations(*read_page(learn), "learn_100") > page_operations(*read_page(learn)) > INLINE_OPERATIONS


def test_a_default_edit_stays_on_the_event_loop(client: TestClient, heavy: list[str]) -> None:
    r = client.post("/stages", data={**default_page(client), "x-1-2": "0.75"}, headers=HTMX)
    assert r.status_code == 200
    assert heavy == []


@pytest.mark.parametrize(("route", "extra", "work"), [
    ("/stages", {}, "_stages"),
    ("/", {}, "_update"),
    ("/export", {"export": "softmax.0|csv"}, "export_file"),
    ("/export", {"export": "|run"}, "export_file"),
    ("/scenario", {}, "_download"),
])
def test_a_small_form_asking_for_a_large_page_is_answered_in_the_heavy_lane(
        client: TestClient, heavy: list[str], route: str, extra: dict[str, str], work: str) -> None:
    form = costliest_form(default_page(client))
    assert len(form) < 200  # small to post, large to answer
    r = client.post(route, data={**form, **extra}, headers=HTMX)
    assert r.status_code == 200, r.text[:300]
    assert heavy == [work]


def test_training_steps_are_answered_in_the_heavy_lane(client: TestClient, heavy: list[str]) -> None:
    page = form_fields(client.get("/?preset=learn-translate").text)
    assert heavy == ["_preset"]  # the Learn panel's first page is heavy too
    heavy.clear()
    r = client.post("/", data={**page, "action": "learn_100"}, headers=HTMX)
    assert r.status_code == 200, r.text[:300]
    assert heavy == ["_update"]


def test_a_shared_link_to_a_large_page_is_answered_in_the_heavy_lane(client: TestClient, heavy: list[str]) -> None:
    query = urllib.parse.urlencode(costliest_form(default_page(client)))
    r = client.get(f"/?{query}")
    assert r.status_code == 200
    assert heavy == ["_index"]


def test_a_full_heavy_lane_answers_503_at_once_and_keeps_the_page(client: TestClient,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    lanes: Lanes = client.app.state.lanes  # type: ignore[attr-defined]
    monkeypatch.setattr(lanes, "in_flight", lanes.processes.total_tokens + lanes.heavy_waiting)
    form = costliest_form(default_page(client))
    r = client.post("/stages", data=form, headers=HTMX)
    assert r.status_code == 503
    assert r.headers["Retry-After"]
    assert r.headers["HX-Reswap"] == "none"  # htmx keeps the last good page; the message goes to its slot
    assert "busy" in r.text
    r = client.post("/stages", data=form)  # without JavaScript: a page that sends them back to their form
    assert r.status_code == 503
    assert "Back" in r.text


def test_a_heavy_page_that_runs_out_of_time_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.config import Settings
    from app.main import create_app

    with TestClient(create_app(Settings(heavy_seconds=0.05))) as client:
        r = client.post("/stages", data=costliest_form(default_page(client)), headers=HTMX)
    assert r.status_code == 503
    assert "more than 0.05 s" in r.text


# --- a real server under heavy requests ----------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log_path = tmp_path_factory.mktemp("heavy") / "server.log"
    with open(log_path, "w+b") as log, running(uvicorn_args(port), port=port, stdout=log,
                                               log=lambda: tail(log)):
        yield f"http://{LOOPBACK}:{port}"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def server_pid(port: int) -> int:
    """The uvicorn process listening on ``port`` (its inode in /proc/net/tcp, then the process owning it)."""
    hex_port = f"{port:04X}"
    inodes = {line.split()[9] for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
              if line.split()[1].endswith(f":{hex_port}") and line.split()[3] == "0A"}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                target = str(fd.readlink())
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    return int(proc.name)
        except OSError:
            continue
    raise AssertionError(f"no process listens on {port}")


def loop_in_threads(url: str, form: dict[str, str], clients: int, seconds: float) -> list[threading.Thread]:
    """``clients`` threads posting ``form`` to ``url`` until ``seconds`` have passed (bounded in time)."""
    deadline = time.monotonic() + seconds

    def loop() -> None:
        with httpx.Client(timeout=60) as c:
            while time.monotonic() < deadline:
                c.post(url, data=form, headers=HTMX)

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    return threads


def timed_gets(url: str, count: int, pause: float = 0.05) -> list[float]:
    times = []
    with httpx.Client(timeout=60) as c:
        for _ in range(count):
            started = time.perf_counter()
            assert c.get(url).status_code == 200
            times.append(time.perf_counter() - started)
            time.sleep(pause)
    return times


def settled_rss_mb(pid: int, seconds: float = 30.0) -> float:
    """The worker's resident memory once its start's work (the real model's weights, the static files) is done:
    unchanged within 2 MB over two seconds of reads."""
    deadline, reads = time.monotonic() + seconds, [rss_mb(pid)]
    while time.monotonic() < deadline:
        time.sleep(0.5)
        reads = [*reads[-3:], rss_mb(pid)]
        if len(reads) == 4 and max(reads) - min(reads) < 2:
            break
    return reads[-1]


def test_healthz_answers_and_memory_stays_flat_while_pin_bombs_are_posted(server: str) -> None:
    pid = server_pid(int(server.rsplit(":", 1)[1]))
    assert httpx.post(server + "/api/model", json={"text": "bank"}, timeout=60).status_code == 200  # weights read
    # the translator is read at start too (about 140 MB, both directions): its weights, not the bombs', if counted
    assert httpx.post(server + "/api/translate", json={"text": "bank"}, timeout=60).status_code == 200
    before = settled_rss_mb(pid)
    with httpx.Client(timeout=60) as c:
        page = form_fields(c.get(server + "/").text)
    threads = loop_in_threads(server + "/stages", {**page, "pin": bomb(64 * 1024 * 1024)}, clients=4, seconds=3)
    waits = timed_gets(server + "/healthz", 30)
    for t in threads:
        t.join()
    assert max(waits) < 0.5, f"/healthz waited {max(waits):.2f} s"  # 20 s before the bound
    assert rss_mb(pid) - before < 100  # it grew by 3.2 GB before; about 20 MB now


def test_a_default_edit_keeps_its_pace_while_four_clients_loop_on_the_costliest_page(server: str) -> None:
    with httpx.Client(timeout=60) as c:
        page = form_fields(c.get(server + "/").text)
        edit = {**page, "x-1-2": "0.75"}

        def edits(count: int) -> list[float]:
            times = []
            for _ in range(count):
                started = time.perf_counter()
                assert c.post(server + "/stages", data=edit, headers=HTMX).status_code == 200
                times.append(time.perf_counter() - started)
                time.sleep(0.02)
            return times

        alone = edits(40)
        threads = loop_in_threads(server + "/stages", costliest_form(page), clients=4, seconds=4)
        loaded = edits(40)
        health = timed_gets(server + "/healthz", 10, pause=0.02)
        for t in threads:
            t.join()
    p95_alone = statistics.quantiles(alone, n=20)[-1]
    p95_loaded = statistics.quantiles(loaded, n=20)[-1]
    # ~600× before (the costliest page took a second on the event loop); the bench measures the ratio. A quarter
    # of a second at least: beside the rest of the suite on two cores, 150 ms has been seen once.
    assert p95_loaded < max(15 * p95_alone, 0.25), (p95_alone, p95_loaded)
    assert max(health) < 0.5, f"/healthz waited {max(health):.2f} s"
