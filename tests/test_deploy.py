"""Deployment: the serving settings, `python -m app.serve`, and the app under a sub-path behind a
reverse proxy (stripping the prefix or passing it on), through TestClient, a real uvicorn behind a
small proxy, and Chromium. The container itself is tested in tests/container (make test-container).
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
import yaml
from fastapi.testclient import TestClient
from pydantic import ValidationError

from app import serve
from app.config import Settings, available_cpus
from app.main import create_app
from tests.browser.conftest import CHROMIUM_ARGS, VIEWPORT, PageLog, _unavailable, find_chromium
from tests.conftest import form_fields
from tests.servers import LOOPBACK, free_port, start, stop
from tests.web.test_pages import heatmap

pytestmark = pytest.mark.server

try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # the browser test is skipped, or fails under REQUIRE_BROWSER=1
    expect = sync_playwright = None

REPO_ROOT = Path(__file__).resolve().parents[1]
ROOT = "/attention"
HTMX = {"HX-Request": "true"}
# Every URL the page gives the browser: links, scripts, styles, forms, htmx requests, the permalink.
LINK = re.compile(r'\b(?:href|src|action|formaction|hx-post|hx-get|data-stages-url)="([^"]*)"')


def links(html: str) -> list[str]:
    """Every path the page links to; an in-page fragment (the skip link's "#stages") is no path."""
    found = [link for link in LINK.findall(html) if not link.startswith("#")]
    assert found, "no links in the page"
    return found


# --- settings -----------------------------------------------------------------------------------


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No ATTENTION_* variable (nor REDIS_URL) from the environment the tests run in."""
    for name in list(os.environ):
        if name.startswith("ATTENTION_") or name == "REDIS_URL":
            monkeypatch.delenv(name)
    return monkeypatch


def test_serving_defaults_work_with_no_environment(clean_env: pytest.MonkeyPatch) -> None:
    s = Settings()
    assert (s.host, s.port, s.root_path, s.forwarded_allow_ips) == ("127.0.0.1", 8000, "", "127.0.0.1")
    assert s.workers == 1  # class rooms live in the process without Redis
    assert s.redis_url == ""


def test_with_redis_the_workers_default_to_the_cpus(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("REDIS_URL", "redis://127.0.0.1:6379/0")
    s = Settings()
    assert s.redis_url == "redis://127.0.0.1:6379/0"
    assert s.workers == available_cpus() >= 1


def test_several_workers_without_redis_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: pytest.fail("uvicorn must not start"))
    with pytest.raises(SystemExit) as stopped:
        serve.serve(Settings(workers=2))
    message = str(stopped.value)
    assert "ATTENTION_WORKERS=2" in message and "REDIS_URL" in message and "ATTENTION_WORKERS=1" in message


def test_environment_variables_override_the_defaults(clean_env: pytest.MonkeyPatch) -> None:
    for name, value in {"HOST": "0.0.0.0", "PORT": "9000", "WORKERS": "3", "ROOT_PATH": "attention/",
                        "FORWARDED_ALLOW_IPS": "10.0.0.0/8,192.0.2.1", "MAX_TOKENS": "8"}.items():
        clean_env.setenv(f"ATTENTION_{name}", value)
    s = Settings()
    assert (s.host, s.port, s.workers, s.root_path) == ("0.0.0.0", 9000, 3, "/attention")
    assert s.forwarded_allow_ips == "10.0.0.0/8,192.0.2.1"
    assert s.max_tokens == 8


def test_an_empty_variable_means_the_default(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ATTENTION_WORKERS", "")
    clean_env.setenv("ATTENTION_PORT", "")
    assert Settings().workers == 1
    assert Settings().port == 8000


@pytest.mark.parametrize(("given", "root_path"), [
    ("", ""), ("/", ""), ("attention", "/attention"), ("/attention/", "/attention"), ("/a/b", "/a/b"),
])
def test_root_path_is_normalised(given: str, root_path: str) -> None:
    assert Settings(root_path=given).root_path == root_path


@pytest.mark.parametrize("field", [
    {"workers": 0}, {"port": 0}, {"port": 70000}, {"root_path": "/a b"}, {"root_path": "/a?x=1"},
    {"root_path": "/a//b"},
])
def test_bad_serving_settings_are_refused(field: dict) -> None:
    with pytest.raises(ValidationError):
        Settings(**field)


@pytest.mark.parametrize(("cpu_max", "cap"), [
    ("max 100000\n", None), ("200000 100000\n", 2), ("150000 100000\n", 2), ("50000 100000\n", 1), (None, None),
])
def test_available_cpus_honours_a_container_cpu_quota(tmp_path: Path, cpu_max: str | None, cap: int | None) -> None:
    path = tmp_path / "cpu.max"
    if cpu_max is not None:
        path.write_text(cpu_max)
    cpus = len(os.sched_getaffinity(0))
    assert available_cpus(path) == (cpus if cap is None else min(cpus, cap))


# --- python -m app.serve ------------------------------------------------------------------------


def test_serve_hands_the_settings_to_uvicorn(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    calls: list[tuple[tuple, dict]] = []
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: calls.append((args, kwargs)))
    serve.serve(Settings(host="0.0.0.0", port=9001, workers=3, forwarded_allow_ips="10.0.0.0/8",
                         redis_url="redis://127.0.0.1:6379/0"))
    [(args, kwargs)] = calls
    assert args == ("app.main:app",)
    assert kwargs["host"] == "0.0.0.0" and kwargs["port"] == 9001 and kwargs["workers"] == 3
    assert kwargs["proxy_headers"] is True and kwargs["forwarded_allow_ips"] == "10.0.0.0/8"
    assert kwargs["timeout_graceful_shutdown"] < 10  # docker stop's grace period


@pytest.mark.parametrize(("host", "url"), [
    ("0.0.0.0", "http://127.0.0.1:8123/healthz"), ("::", "http://[::1]:8123/healthz"),
    ("10.1.2.3", "http://10.1.2.3:8123/healthz"), ("127.0.0.1", "http://127.0.0.1:8123/healthz"),
])
def test_the_health_check_asks_the_server_where_it_listens(host: str, url: str) -> None:
    assert serve.health_url(Settings(host=host, port=8123)) == url


# --- under a sub-path, through TestClient -------------------------------------------------------


@pytest.fixture(scope="module")
def sub_client() -> Iterator[TestClient]:
    with TestClient(create_app(Settings(root_path=ROOT))) as client:
        yield client


@pytest.mark.parametrize("prefix", ["", ROOT], ids=["proxy-strips-prefix", "proxy-keeps-prefix"])
def test_every_link_form_and_htmx_request_carries_the_root_path(sub_client: TestClient, prefix: str) -> None:
    page = sub_client.get(f"{prefix}/")
    assert page.status_code == 200
    assert all(link.startswith(f"{ROOT}/") for link in links(page.text)), links(page.text)
    for link in {urlsplit(link).path for link in links(page.text) if "/static/" in link}:
        # The proxy forwards /attention/static/… with or without the prefix.
        asset = sub_client.get(link.removeprefix(ROOT) if not prefix else link)
        assert asset.status_code == 200, link


@pytest.mark.parametrize("prefix", ["", ROOT], ids=["proxy-strips-prefix", "proxy-keeps-prefix"])
def test_posts_and_pushed_urls_carry_the_root_path(sub_client: TestClient, prefix: str) -> None:
    form = form_fields(sub_client.get(f"{prefix}/").text)
    step = sub_client.post(f"{prefix}/stages", data={**form, "goto": "softmax"}, headers=HTMX)
    assert step.status_code == 200
    assert step.headers["HX-Push-Url"].startswith(f"{ROOT}/?")
    edit = sub_client.post(f"{prefix}/stages", data={**form, "x-0-0": "2.5"}, headers=HTMX)
    assert edit.status_code == 200
    assert edit.headers["HX-Replace-Url"].startswith(f"{ROOT}/?")
    no_js = sub_client.post(f"{prefix}/", data={**form, "action": "add_token"})  # a plain form post
    assert no_js.status_code == 200 and "<html" in no_js.text
    assert all(link.startswith(f"{ROOT}/") for link in links(no_js.text))


def test_the_bare_root_path_redirects_to_the_page(sub_client: TestClient) -> None:
    r = sub_client.get(ROOT, follow_redirects=False)
    assert r.status_code in (307, 308)
    assert urlsplit(r.headers["location"]).path == f"{ROOT}/"


def test_api_and_docs_under_the_root_path(sub_client: TestClient) -> None:
    assert sub_client.get(f"{ROOT}/healthz").json() == {"status": "ok"}
    assert sub_client.get("/healthz").json() == {"status": "ok"}  # the HEALTHCHECK asks the server directly
    docs = sub_client.get(f"{ROOT}/docs")
    assert docs.status_code == 200 and f"{ROOT}/openapi.json" in docs.text
    assert sub_client.get(f"{ROOT}/openapi.json").json()["servers"] == [{"url": ROOT}]


def test_without_a_root_path_links_start_at_the_host_root(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert all(link.startswith("/") and not link.startswith(ROOT) for link in links(page.text))


# --- a real server behind a reverse proxy -------------------------------------------------------


HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


class ReverseProxy(ThreadingHTTPServer):
    """A reverse proxy with the two usual setups: `strip` (nginx `proxy_pass http://app:8000/;`)
    forwards /attention/x as /x, otherwise the path goes on unchanged. Paths outside the prefix get
    404, so a link that escapes the sub-path fails the test. Sets X-Forwarded-For and -Proto. With
    several upstreams (replicas) it takes them in turn, request by request, with no affinity."""

    daemon_threads = True

    def __init__(self, upstreams: list[str], prefix: str, strip: bool) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.prefix, self.strip = prefix, strip
        self.clients = [httpx.Client(base_url=url, timeout=30.0, trust_env=False) for url in upstreams]
        self._turn = itertools.count()  # next() on a count is atomic in CPython
        self.served = [0] * len(upstreams)  # requests each upstream answered
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def upstream(self) -> httpx.Client:
        i = next(self._turn) % len(self.clients)
        self.served[i] += 1
        return self.clients[i]

    def server_close(self) -> None:
        super().server_close()
        for client in self.clients:
            client.close()


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a browser uses it
    server: ReverseProxy

    def _forward(self) -> None:
        proxy = self.server
        if not (self.path == proxy.prefix or self.path.startswith((proxy.prefix + "/", proxy.prefix + "?"))):
            self.send_error(404, "outside the proxied sub-path")
            return
        path = self.path
        if proxy.strip:
            path = "/" + self.path[len(proxy.prefix):].lstrip("/")
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        forwarded = self.headers.get("X-Forwarded-For")
        headers["X-Forwarded-For"] = f"{forwarded}, {self.client_address[0]}" if forwarded else self.client_address[0]
        headers["X-Forwarded-Proto"] = "http"
        answer = proxy.upstream().request(self.command, path, headers=headers, content=body)
        content = answer.content  # decoded: the Content-Encoding is dropped below
        self.send_response(answer.status_code)
        for k, v in answer.headers.multi_items():
            if k.lower() not in HOP_BY_HOP | {"content-length", "content-encoding"}:
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    do_GET = do_POST = _forward

    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet: the server's own log is the one the tests read


@dataclass
class Server:
    url: str
    port: int
    log: Path

    def log_text(self) -> str:
        return self.log.read_text()


@pytest.fixture(scope="module")
def launch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Server]]:
    """`launch(ATTENTION_X=…, args=[...])`: a real server, `python -m app.serve` unless `args` says otherwise."""
    procs: list[subprocess.Popen[bytes]] = []

    def launch_one(*, args: list[str] | None = None, **env: str) -> Server:
        port = free_port()
        log = tmp_path_factory.mktemp("server") / "server.log"
        environ = {k: v for k, v in os.environ.items() if not k.startswith("ATTENTION_")}
        environ.update(env, ATTENTION_PORT=str(port), ATTENTION_WORKERS="1")
        command = args + ["--port", str(port)] if args else ["-m", "app.serve"]
        with log.open("wb") as out:
            procs.append(start(command, port=port, stdout=out, env=environ, log=lambda: log.read_text()[-2000:]))
        return Server(f"http://{LOOPBACK}:{port}", port, log)

    yield launch_one
    for proc in procs:
        stop(proc)


@pytest.fixture(scope="module")
def proxied(launch: Callable[..., Server]) -> Iterator[Callable[..., ReverseProxy]]:
    """`proxied(setup, replicas=1)`: a proxy in front of servers for one of the supported setups."""
    proxies: list[ReverseProxy] = []

    def start(setup: str, replicas: int = 1) -> ReverseProxy:
        if setup == "uvicorn --root-path":  # a stripping proxy, the root path given to uvicorn itself
            servers = [launch(args=["-m", "uvicorn", "app.main:app", "--root-path", ROOT]) for _ in range(replicas)]
        else:
            servers = [launch(ATTENTION_ROOT_PATH=ROOT) for _ in range(replicas)]
        proxy = ReverseProxy([s.url for s in servers], ROOT, strip=setup != "proxy keeps prefix")
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        proxies.append(proxy)
        return proxy

    yield start
    for proxy in proxies:
        proxy.shutdown()
        proxy.server_close()


SETUPS = ["proxy strips prefix", "proxy keeps prefix", "uvicorn --root-path"]


@pytest.mark.parametrize("setup", SETUPS)
def test_page_asset_form_post_and_htmx_post_through_a_proxy(proxied: Callable[..., ReverseProxy],
                                                            setup: str) -> None:
    proxy = proxied(setup)
    with httpx.Client(base_url=proxy.url, timeout=30.0, trust_env=False) as client:
        page = client.get(f"{ROOT}/")
        assert page.status_code == 200
        assert all(link.startswith(f"{ROOT}/") for link in links(page.text)), links(page.text)
        script = client.get(f"{ROOT}/static/vendor/htmx-2.0.11.min.js")
        assert script.status_code == 200 and "htmx" in script.text
        form = form_fields(page.text)
        posted = client.post(f"{ROOT}/", data={**form, "action": "add_token"})
        assert posted.status_code == 200 and 'name="token-5"' in posted.text
        edit = client.post(f"{ROOT}/stages", data={**form, "x-0-0": "2.5"}, headers=HTMX)
        assert edit.status_code == 200 and edit.text.lstrip().startswith('<section id="stages"')
        assert edit.headers["HX-Replace-Url"].startswith(f"{ROOT}/?")
        api = client.post(f"{ROOT}/api/attention", json={"tokens": ["a"], "x": [[1.0, 2.0]]})
        assert api.status_code == 200 and api.json()["x"] == [[1.0, 2.0]]


@pytest.mark.slow
def test_replicas_behind_a_round_robin_balancer_answer_as_one_server(proxied: Callable[..., ReverseProxy],
                                                                     sub_client: TestClient) -> None:
    """No per-user state: a student's page, structural change, edit and step may each reach another
    replica and get exactly what a single server answers."""
    proxy = proxied("proxy strips prefix", replicas=2)

    def session(client: httpx.Client | TestClient) -> list[tuple[str, str]]:
        page = client.get(f"{ROOT}/")
        added = client.post(f"{ROOT}/", data={**form_fields(page.text), "action": "add_token"}, headers=HTMX)
        form = form_fields(added.text)
        edit = client.post(f"{ROOT}/stages", data={**form, "x-5-0": "2.5"}, headers=HTMX)
        step = client.post(f"{ROOT}/stages", data={**form, "x-5-0": "2.5", "goto": "softmax"}, headers=HTMX)
        answers = [page, added, edit, step]
        assert [r.status_code for r in answers] == [200] * 4
        return [(r.text, r.headers.get("HX-Push-Url") or r.headers.get("HX-Replace-Url", "")) for r in answers]

    with httpx.Client(base_url=proxy.url, timeout=30.0, trust_env=False) as balanced:
        through_replicas = session(balanced)
    assert proxy.served == [2, 2]  # every request went to the other replica than the one before
    assert through_replicas == session(sub_client)
    assert heatmap(through_replicas[2][0], "x")[5][0] == "2.500"  # the edit reached the new token's row
    assert "stage=softmax" in through_replicas[3][1]


@pytest.mark.parametrize(("trusted", "client_seen"), [(None, "203.0.113.9"), ("192.0.2.1", "127.0.0.1")],
                         ids=["from-a-trusted-proxy", "from-an-untrusted-address"])
def test_proxy_headers_are_believed_only_from_trusted_addresses(launch: Callable[..., Server], trusted: str | None,
                                                                client_seen: str) -> None:
    server = launch(**({"ATTENTION_FORWARDED_ALLOW_IPS": trusted} if trusted else {}))
    r = httpx.get(f"{server.url}/healthz", headers={"X-Forwarded-For": "203.0.113.9"}, trust_env=False)
    assert r.status_code == 200
    time.sleep(0.2)  # the access log line is written after the response
    access = [line for line in server.log_text().splitlines() if "GET /healthz" in line]
    assert access and access[-1].split()[1].startswith(f"{client_seen}:"), access


@pytest.mark.slow
def test_the_health_check_command_exits_0_only_when_the_server_answers(launch: Callable[..., Server]) -> None:
    server = launch()

    def check(port: int) -> int:
        env = {**os.environ, "ATTENTION_PORT": str(port)}
        return subprocess.run([sys.executable, "-m", "app.serve", "--check"], cwd=REPO_ROOT, env=env,
                              timeout=30).returncode

    assert check(server.port) == 0
    assert check(free_port()) == 1


# --- Chromium under the sub-path ----------------------------------------------------------------


@pytest.mark.browser
def test_chromium_edits_and_steps_under_the_sub_path(proxied: Callable[..., ReverseProxy]) -> None:
    if sync_playwright is None:
        _unavailable("the playwright package is not installed (pip install -e '.[test]')")
    proxy = proxied("proxy strips prefix")
    log = PageLog()
    requested: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=find_chromium(pw), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(10_000)
            page.on("console", log.on_console)
            page.on("response", log.on_response)
            page.on("requestfailed", log.on_request_failed)
            page.on("pageerror", log.on_page_error)
            page.on("request", lambda request: requested.append(request.url))
            assert page.goto(f"{proxy.url}{ROOT}/").status == 200
            page.locator("#editor > summary").click()  # open the inputs drawer, as a student does to edit
            x00 = page.locator('input[name="x-0-0"]')
            with page.expect_response(lambda r: r.url.endswith(f"{ROOT}/stages")) as edit:
                x00.fill("2.5")
            assert edit.value.status == 200
            expect(page.locator('#stages table.heatmap[data-ref="x"] tbody tr').first).to_contain_text("2.500")
            page.locator("#next-stage").click()
            expect(page.locator("#stages article.stage")).to_have_id("stage-qkv")
            expect(page).to_have_url(re.compile(rf"^{re.escape(proxy.url + ROOT)}/\?.*stage=qkv"))
            page.wait_for_function("() => !document.querySelector('.htmx-request')")
        finally:
            browser.close()
    assert not log.problems, log.problems
    outside = [url for url in requested if not urlsplit(url).path.startswith(f"{ROOT}/")]
    assert not outside, outside


# --- the documentation and compose.yaml follow the settings ---------------------------------------


def readme_configuration() -> dict[str, str]:
    """docs/configuration.md's table: variable → its default cell."""
    readme = (REPO_ROOT / "docs" / "configuration.md").read_text()
    section = readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `((?:ATTENTION_)?[A-Z_]+)` \| ([^|]*) \|", section, re.M)
    assert rows, "no Configuration table in docs/configuration.md"
    return dict(rows)


def test_every_setting_is_in_the_docs_with_its_default(clean_env: pytest.MonkeyPatch) -> None:
    documented = readme_configuration()
    defaults = Settings()

    def variable(name: str) -> str:  # REDIS_URL is read as it is commonly named, without the prefix
        return "REDIS_URL" if name == "redis_url" else f"ATTENTION_{name.upper()}"

    assert set(documented) == {variable(name) for name in Settings.model_fields}
    for name, field in Settings.model_fields.items():
        if field.default_factory is not None:  # the CPUs: described in words
            continue
        cell = documented[variable(name)]
        shown = cell.split("`")[1] if "`" in cell else ("" if cell.strip() == "empty" else cell.strip())
        value = getattr(defaults, name)
        written = str(value).lower() if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) \
            else str(value)  # a switch as an environment variable says it: true, false
        assert shown == written, name


def compose_file() -> dict:
    return yaml.safe_load((REPO_ROOT / "compose.yaml").read_text())


def replicas(compose: dict) -> dict[str, dict]:
    """The services built from this repository's Dockerfile."""
    return {name: service for name, service in compose["services"].items() if service.get("build") == "."}


def environment(service: dict) -> dict[str, str | None]:
    """A service's environment: NAME=value set here, a bare NAME passed on from the shell (None)."""
    pairs = [item.split("=", 1) for item in service.get("environment", [])]
    return {pair[0]: pair[1] if len(pair) == 2 else None for pair in pairs}


def test_compose_runs_two_replicas_of_this_image_sharing_the_redis_service() -> None:
    compose = compose_file()
    services, apps = compose["services"], replicas(compose)
    assert len(apps) == 2
    assert {service["image"] for service in apps.values()} == {"attention-demo"}  # one image, built once
    assert services["redis"]["image"].startswith("redis:")
    for name, service in apps.items():
        env = environment(service)
        assert urlsplit(env["REDIS_URL"]).hostname == "redis", name
        assert service["depends_on"]["redis"]["condition"] == "service_healthy", name
        assert "ports" not in service, f"{name}: only the balancer is reached from outside"
        assert all(key.removeprefix("ATTENTION_").lower() in Settings.model_fields or key == "REDIS_URL"
                   for key in env), env
        assert [key for key, value in env.items() if value is None], "no setting passed on from the shell"
    assert "ports" not in services["redis"]


def test_compose_balancer_publishes_one_port_and_proxies_to_both_replicas() -> None:
    compose = compose_file()
    balancer = compose["services"]["balancer"]
    assert balancer["ports"] == ["${PORT:-8000}:8000"]
    config = {volume.split(":")[0]: volume.split(":")[1] for volume in balancer["volumes"]}
    assert config["./deploy/nginx.conf"] == "/etc/nginx/conf.d/default.conf"
    assert set(balancer["depends_on"]) == set(replicas(compose))
    nginx = (REPO_ROOT / "deploy" / "nginx.conf").read_text()
    upstream = re.search(r"upstream attention \{(.*?)\}", nginx, re.S)
    assert upstream, "no upstream block"
    assert re.findall(r"^\s*server ([\w.-]+:\d+)", upstream[1], re.M) == [f"{name}:8000" for name in replicas(compose)]
    assert re.search(r"^\s*listen 8000;", nginx, re.M)


def nginx_block(config: str, header: str, end: str = "}") -> str:
    """The text of an nginx config from ``header {`` to ``end``."""
    start = config.index(header + " {") + len(header) + 2
    return config[start:config.index(end, start)]


def test_the_balancer_passes_server_sent_events_unbuffered_over_http_11() -> None:
    nginx = (REPO_ROOT / "deploy" / "nginx.conf").read_text()
    server = nginx_block(nginx, "server", end="location")  # what every location inherits
    assert "proxy_http_version 1.1;" in server
    assert 'proxy_set_header Connection "";' in server
    assert "proxy_set_header Host $http_host;" in server  # with the port, for the join link
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in server
    [events] = re.findall(r"location ~ (\S+) \{", nginx)
    assert re.search(events, "/class/KQ7M4PXR/events") and re.search(events, "/attention/class/KQ7M4PXR/events")
    assert not re.search(events, "/class/KQ7M4PXR/workspace")
    block = nginx_block(nginx, f"location ~ {events}")
    assert "proxy_buffering off;" in block and "proxy_pass http://attention;" in block
    timeout = re.search(r"proxy_read_timeout (\d+)([smh]);", block)
    assert timeout and int(timeout[1]) * {"s": 1, "m": 60, "h": 3600}[timeout[2]] >= 600
    body = re.search(r"client_max_body_size (\d+)m;", nginx)
    assert body and int(body[1]) * 2**20 > Settings().max_body_bytes  # the app's own 413 answers, not nginx's


def test_the_balancer_times_out_slow_headers_and_bodies() -> None:
    """uvicorn has no timeout for headers, so a slow client is stopped in front of it."""
    server = nginx_block((REPO_ROOT / "deploy" / "nginx.conf").read_text(), "server", end="location")
    seconds = {name: int(value) for name, value in re.findall(r"^\s*(\w+_timeout) (\d+)s;", server, re.M)}
    assert 0 < seconds["client_header_timeout"] <= 15
    assert 0 < seconds["client_body_timeout"] <= Settings().body_timeout_seconds
    assert 0 < seconds["send_timeout"] <= 60
    assert 0 < seconds["keepalive_timeout"] <= 75
