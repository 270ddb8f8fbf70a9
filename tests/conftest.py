"""Shared fixtures and helpers: a TestClient on a fresh app, a real Redis, and the page's form read back
as a dict, as a browser posts it without JavaScript (one field per cell) or as the page's script posts
it (one field per grid)."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Iterator
from html.parser import HTMLParser
from types import SimpleNamespace
from typing import TypeVar

import anyio
import anyio.from_thread
import pytest
import starlette.testclient
from fastapi.testclient import TestClient
from hypothesis import settings

# A real model's page answers with its place in the queue when its answer takes longer than this (app.web.served):
# the tests read whole answers, and tests/web/test_served.py and the browser's test of the waiting page set their
# own. Set before the app is imported (its settings are read then), and inherited by the servers the tests start.
os.environ.setdefault("ATTENTION_FIRST_SCREEN_SECONDS", "30")

from app.lesson.presets import PRESETS  # noqa: E402
from app.main import create_app  # noqa: E402
from tests.redis_server import RedisServer, find_redis_server, redis_server  # noqa: E402

T = TypeVar("T")

# --- what a run covers -----------------------------------------------------------------------------------
# `make test` (pytest as it stands) runs every test, with exceptions that `make test-all` (pytest --full, what
# CI runs) adds: a sweep over every preset (a test parametrized over them all: every stage of every preset in every
# language, on every screen, …) runs on SAMPLE_PRESETS only, a browser's sweep over the page's languages, a
# page's stages or the screens on SAMPLE_LANGUAGES, SAMPLE_STAGES or SAMPLE_SCREENS (`swept`), and the tests
# marked slow (a benchmark's own run, fifty concurrent clients, a proxy in front of the app) are left out.
# `make check` leaves out the browser, server and kernel tests too. A full run also has Schemathesis's
# coverage phase (tests/web/test_schema.py).
SAMPLE_PRESETS = frozenset({"bank-river"})  # two heads, a seed's worked example: the lesson's own scenario
# A browser's sweep over every language of the page runs on these in `make test`: the longest words and the
# other script, where a page overflows or is cut first (tests/i18n checks every catalogue in every run).
SAMPLE_LANGUAGES = ("de", "zh")
# A browser's sweep over every stage of a page (presenter mode's accessibility) runs on these in `make test`: the
# projections, the attention weights and the block's feed-forward network, three kinds of stage.
SAMPLE_STAGES = ("qkv", "softmax", "ffn")
# The screens a page is tested on (width, height): a school laptop, a projector, a tablet, a phone. A browser's
# test parametrized over every one of them runs on SAMPLE_SCREENS in `make test`: the laptop and the phone.
VIEWPORTS = ((1366, 768), (1920, 1080), (768, 1024), (390, 844))
SAMPLE_SCREENS = ((1366, 768), (390, 844))
# In a full run, four sweeps over every preset take half of the presets each, in pairs: the presets in the order
# sorted(PRESETS), those at even places to the first of a pair, those at odd places to the second (the sample
# presets to both). Every preset meets one sweep of each pair — the legends or presenter mode's fit, the stage
# scrolled into view or accessibility — beside the sweeps that take them all (every screen, the first screen,
# the languages): together they were a third of make test-all.
HALVES = {"test_legends_numbers_and_symbols_read_right_on_every_screen": 0,
          "test_presenter_mode_fits_each_stage_on_one_projector_screen": 1,
          "test_every_stage_of_every_preset_has_no_serious_violations": 0,
          "test_the_stage_comes_into_view_after_every_change_of_stage": 1}
MARKERS = {
    "server": "starts a process of its own: a uvicorn server, redis-server, nginx, a benchmark",
    "kernel": "runs a notebook in a Jupyter kernel",
    "slow": "tens of seconds, covered in part by faster tests: run by make test-all (pytest --full) and CI",
}
FULL_RUN = "ATTENTION_TESTS_FULL"  # "1" in a full run, for what a module decides as it is imported
# Fixtures that start a process (the browser's, a server, Redis), by name across the test files.
SERVER_FIXTURES = {"redis_service", "redis_db", "base_url", "browser", "page", "server", "servers", "launch",
                   "quick_run", "redis_class_server", "two_servers"}


def swept(values: Iterable[T], sample: Iterable[T]) -> list[T]:
    """``values`` in a full run, those of ``sample`` among them otherwise (known as a module is imported)."""
    chosen = list(sample)
    return list(values) if os.environ.get(FULL_RUN) == "1" else [v for v in values if v in chosen]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full", action="store_true",
                     help="every preset in every sweep, and the slow tests (make test-all; CI)")


def pytest_configure(config: pytest.Config) -> None:
    os.environ[FULL_RUN] = "1" if config.getoption("--full") else "0"
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


def pytest_report_header(config: pytest.Config) -> str:
    if config.getoption("--full"):
        return "every test: every preset in every sweep, and the slow tests"
    return (f"sweeps over {', '.join(sorted(SAMPLE_PRESETS))} of the {len(PRESETS)} presets, "
            f"{', '.join(SAMPLE_LANGUAGES)} of the languages, {', '.join(SAMPLE_STAGES)} of the stages and "
            f"{', '.join(f'{w}×{h}' for w, h in SAMPLE_SCREENS)} of the screens, slow tests left out: make test-all "
            "(pytest --full) runs every one")


def _sweeps(items: list[pytest.Item]) -> list[pytest.Item]:
    """The items of a sweep over every preset whose preset is not a sample: a test function parametrized over
    (nearly) every preset is a sweep; one parametrized over a few chosen presets is kept whole."""
    by_function: dict[tuple[str, str], list[tuple[pytest.Item, set[str]]]] = {}
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        presets = {v for v in params.values() if isinstance(v, str) and v in PRESETS}
        if presets:
            by_function.setdefault((item.nodeid.split("::")[0], item.originalname), []).append((item, presets))
    out = []
    for entries in by_function.values():
        if len(set().union(*(p for _, p in entries))) >= len(PRESETS) - 2:
            out += [item for item, presets in entries if not presets & SAMPLE_PRESETS]
    return out


def _other_half(item: pytest.Item) -> bool:
    """Whether a full run leaves ``item`` to the other sweep of its pair (HALVES)."""
    half = HALVES.get(getattr(item, "originalname", ""))
    preset = getattr(getattr(item, "callspec", None), "params", {}).get("preset")
    if half is None or preset not in PRESETS or preset in SAMPLE_PRESETS:
        return False
    return sorted(PRESETS).index(preset) % 2 != half


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        on_redis = any(isinstance(v, str) and v == "redis" for v in params.values())  # a store's test on redis-server
        if (on_redis or SERVER_FIXTURES & set(getattr(item, "fixturenames", ()))) and not item.get_closest_marker(
                "server"):
            item.add_marker("server")
    if config.getoption("--full"):
        other_half = [item for item in items if _other_half(item)]
        if other_half:
            config.hook.pytest_deselected(items=other_half)
            items[:] = [item for item in items if item not in other_half]
        return
    left = set(_sweeps(items)) | {item for item in items if item.get_closest_marker("slow")}
    if left:
        config.hook.pytest_deselected(items=[item for item in items if item in left])
        items[:] = [item for item in items if item not in left]


# Hypothesis: "ci" (the default) runs a bounded, fixed set of examples, the same on every run;
# HYPOTHESIS_PROFILE=explore draws twenty times as many, at random, to look further.
settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True, database=None)
settings.register_profile("explore", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session", autouse=True)
def one_event_loop() -> Iterator[None]:
    """Every TestClient of a test process runs its app on one event loop (one blocking portal for the session)
    instead of a loop of its own: the heavy lane's worker processes (anyio's, kept per loop) then start once
    per test process, not once per test, where each start cost about a second."""
    with anyio.from_thread.start_blocking_portal() as portal:
        shared = SimpleNamespace(**{name: getattr(anyio.from_thread, name) for name in dir(anyio.from_thread)
                                    if not name.startswith("__")})
        shared.start_blocking_portal = lambda **_: contextlib.nullcontext(portal)
        starlette.testclient.anyio = SimpleNamespace(**{name: getattr(anyio, name) for name in dir(anyio)
                                                       if not name.startswith("__")}, from_thread=shared)
        try:
            yield
        finally:
            starlette.testclient.anyio = anyio


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(create_app()) as c:
        yield c


# CI (.ci/run) sets these: a test that needs Redis fails there instead of skipping.
REQUIRE_REDIS = ("REQUIRE_REDIS", "REQUIRE_BROWSER")


@pytest.fixture(scope="session")
def redis_service() -> Iterator[RedisServer]:
    """Debian's redis-server on a free loopback port for the whole session (never a fake). Without it
    the tests that need it are skipped, or fail when REQUIRE_REDIS=1 or REQUIRE_BROWSER=1."""
    binary = find_redis_server()
    if binary is None:
        reason = "redis-server not found: install Debian's redis-server (make services) or set REDIS_SERVER"
        required = [name for name in REQUIRE_REDIS if os.environ.get(name) == "1"]
        if required:
            pytest.fail(f"{required[0]}=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    with redis_server(binary) as server:
        yield server


@pytest.fixture
def redis_db(redis_service: RedisServer) -> RedisServer:
    """The session's Redis, emptied before the test."""
    redis_service.flush()
    return redis_service


class _FormParser(HTMLParser):
    """Collects what a browser would submit from a form: inputs, checked checkboxes, selects.

    Submit buttons are left out (a browser sends only the one that was pressed). When the
    document has a ``<form id="state">`` only its fields count; a fragment counts whole.
    """

    def __init__(self, form_id: str | None) -> None:
        super().__init__(convert_charrefs=True)
        self.form_id = form_id
        self.inside = form_id is None
        self.depth = 0  # <form> nesting while inside the wanted form
        self.fields: dict[str, str] = {}
        self._select: str | None = None
        self._select_first: str | None = None
        self._select_chosen: str | None = None
        self._option: dict[str, str | None] | None = None
        self._option_text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "form":
            if self.inside:
                self.depth += 1
            elif a.get("id") == self.form_id:
                self.inside, self.depth = True, 1
            return
        if not self.inside:
            return
        name = a.get("name")
        if tag == "input" and name and "disabled" not in a:
            kind = (a.get("type") or "text").lower()
            if kind in ("submit", "button", "image", "reset"):
                return
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    self.fields[name] = a.get("value") or "on"
                return
            self.fields[name] = a.get("value") or ""
        elif tag == "select" and name:
            self._select, self._select_first, self._select_chosen = name, None, None
        elif tag == "option" and self._select is not None:
            self._option, self._option_text = a, []

    def handle_data(self, data: str) -> None:
        if self._option is not None:
            self._option_text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "form" and self.inside and self.form_id is not None:
            self.depth -= 1
            if self.depth == 0:
                self.inside = False
        elif tag == "option" and self._option is not None:
            value = self._option.get("value")
            value = "".join(self._option_text).strip() if value is None else value
            if self._select_first is None:
                self._select_first = value
            if "selected" in self._option:
                self._select_chosen = value
            self._option = None
        elif tag == "select" and self._select is not None:
            chosen = self._select_chosen if self._select_chosen is not None else self._select_first
            if chosen is not None:
                self.fields[self._select] = chosen
            self._select = None


def form_fields(html: str, form_id: str | None = "state") -> dict[str, str]:
    """The fields a browser would post from ``<form id=form_id>`` (or from a whole fragment)."""
    scoped = form_id is not None and f'id="{form_id}"' in html
    parser = _FormParser(form_id if scoped else None)
    parser.feed(html)
    parser.close()
    return parser.fields


CELL_NAME = re.compile(r"^(.+)-(\d+)-(\d+)$")
GRID_KEY = re.compile(r'<table\b[^>]*\bdata-grid="([^"]+)"')


def grid_keys(html: str) -> set[str]:
    """The grids of number inputs in a page (``table[data-grid]``), the ones its script joins."""
    return set(GRID_KEY.findall(html))


def join_grids(fields: dict[str, str], keys: set[str] | None = None) -> dict[str, str]:
    """The form as the page's script posts it (static/app.js, on htmx:configRequest): each grid's
    cells ``<key>-<i>-<j>`` replaced by one field ``grid-<key>``, rows joined by ";" and cells by
    " ". ``keys``: the grids to join; by default every grid of cells but the mask's checkboxes
    (``block-i-j``), which are exactly the page's ``table[data-grid]`` grids."""
    grids: dict[str, dict[tuple[int, int], str]] = {}
    out: dict[str, str] = {}
    for name, value in fields.items():
        m = CELL_NAME.match(name)
        if m and (m[1] in keys if keys is not None else m[1] != "block"):
            grids.setdefault(m[1], {})[(int(m[2]), int(m[3]))] = value
        else:
            out[name] = value
    for key, cells in grids.items():
        rows, cols = max(i for i, _ in cells) + 1, max(j for _, j in cells) + 1
        assert len(cells) == rows * cols, f"{key}: not a whole grid"
        out[f"grid-{key}"] = ";".join(" ".join(cells[i, j] for j in range(cols)) for i in range(rows))
    return out
