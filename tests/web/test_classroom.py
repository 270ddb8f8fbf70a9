"""A live class through the HTTP routes (rooms in the process): who may change a room, what students
see, predictions and their checks, the bounds, and the security headers on every new route.

The browser side (following by server-sent events, explore and back, the histogram, reveal) is in
tests/browser/test_class.py; the Redis store and two servers sharing one class in tests/classroom/test_rooms.py
and tests/web/test_class_redis.py.
"""

from __future__ import annotations

import base64
import gzip
import math
import os
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.classroom.store import CODE_ALPHABET, normal_code, spoken_code
from app.config import Settings
from app.main import create_app
from app.state.page import preset_page
from app.state.permalink import state_query
from app.view.charts.predictions import bins, predictions_svg
from tests.conftest import form_fields, join_grids

PRESET = "three-token"
HTMX = {"HX-Request": "true"}


def preset_fields(preset: str = PRESET, **view: str) -> dict[str, str]:
    sc, v = preset_page(preset)
    return {**dict(state_query(sc, v)), **view}


class Class:
    """A class on one app: the teacher's client (its cookie holds the key) and a way to add students."""

    def __init__(self, app, preset: str = PRESET) -> None:  # noqa: ANN001
        self.app = app
        self.teacher = TestClient(app, follow_redirects=False)
        started = self.teacher.post("/class", data={**preset_fields(preset), "action": "start_class"})
        assert started.status_code == 303, started.text
        link = started.headers["location"]
        self.code = re.fullmatch(r"/class/([A-Z0-9]{8})/teach\?key=(.+)", link)[1]
        self.key = dict(parse_qsl(urlsplit(link).query))["key"]
        opened = self.teacher.get(link)
        assert opened.status_code == 303 and opened.headers["location"] == f"/class/{self.code}/teach"
        assert "key=" not in opened.headers["location"]  # the address a projector shows holds no secret

    def student(self) -> TestClient:
        client = TestClient(self.app, follow_redirects=False)
        page = client.get(f"/class/{self.code}")
        assert page.status_code == 200, page.text
        return client

    def state(self) -> dict[str, str]:
        """The teacher's page's form: the room's state, with the class's hidden fields."""
        page = self.teacher.get(f"/class/{self.code}/teach")
        assert page.status_code == 200
        fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page.text))
        assert fields["class_code"] == self.code and "class_key" not in fields
        assert self.key not in page.text  # the key is in the teacher's HttpOnly cookie only
        return {**fields, **room_fields(self)}

    def step(self, **fields: str) -> None:
        """An edit on the teacher's page, as htmx posts it."""
        r = self.teacher.post("/stages", data={**self.state(), **fields}, headers=HTMX)
        assert r.status_code == 200, r.text
        assert "HX-Push-Url" not in r.headers and "HX-Replace-Url" not in r.headers  # the address keeps the class

    def room(self):  # noqa: ANN201
        import asyncio

        return asyncio.run(self.app.state.rooms.get(self.code))


def room_fields(c: Class) -> dict[str, str]:
    room = c.room()
    return dict(parse_qsl(room.state, keep_blank_values=True))


@pytest.fixture
def app():  # noqa: ANN201
    return create_app(Settings())


@pytest.fixture
def lesson(app) -> Class:  # noqa: ANN001
    return Class(app)


def workspace(client: TestClient, code: str) -> str:
    r = client.get(f"/class/{code}/workspace", headers=HTMX)
    assert r.status_code == 200
    return r.text


def current_stage(html: str) -> str:
    return re.search(r'<article class="stage[^"]*" id="stage-([a-z_0-9]+)"', html)[1]


# --- codes and keys ----------------------------------------------------------------------------


def test_codes_are_eight_unambiguous_characters_read_in_two_halves(lesson: Class) -> None:
    assert len(lesson.code) == 8 and set(lesson.code) <= set(CODE_ALPHABET)
    assert not set("01IOL") & set(CODE_ALPHABET)
    assert len(CODE_ALPHABET) ** 8 > 8e11  # with 200 rooms, a guess finds one about once in 4 billion
    assert spoken_code("KQ7M4PXR") == "KQ7M-4PXR"
    assert normal_code(" kq7m-4pxr ") == "KQ7M4PXR"
    for bad in ("KQ7M4PX", "KQ7M4PXRR", "KQ0M4PXR", "../../x", "ＫＱ７Ｍ４ＰＸＲ", "KQ7M4P", ""):
        assert normal_code(bad) == ""


def test_the_join_form_takes_the_code_as_typed(lesson: Class) -> None:
    client = TestClient(lesson.app, follow_redirects=False)
    typed = spoken_code(lesson.code).lower()
    r = client.get("/class", params={"code": f" {typed} "})
    assert r.status_code == 303 and r.headers["location"] == f"/class/{lesson.code}"


def test_a_teacher_reload_keeps_the_class_and_its_state(lesson: Class) -> None:
    lesson.step(goto="softmax", stage="softmax")
    page = lesson.teacher.get(f"/class/{lesson.code}/teach")
    assert page.status_code == 200
    assert current_stage(page.text) == "softmax"
    assert 'name="class_code"' in page.text and lesson.code in page.text
    assert 'name="class_key"' not in page.text and lesson.key not in page.text
    assert "<svg" in page.text and "class-qr" in page.text  # the QR code of the join link


def test_the_qr_code_holds_the_join_link(lesson: Class) -> None:
    import segno

    page = lesson.teacher.get(f"/class/{lesson.code}/teach").text
    join = f"http://testserver/class/{lesson.code}"
    assert f'href="{join}"' in page
    # The same link drawn by segno on its own gives the same modules (an independent encoding).
    expected = segno.make(join, error="m")
    drawn = re.search(r'<svg[^>]*class="class-qr".*?</svg>', page, re.S)[0]
    assert f'viewBox="0 0 {(expected.symbol_size(scale=4, border=2))[0]}' in drawn


@pytest.mark.parametrize("key", ["", "x", "A" * 43, "A" * 500])
def test_a_forged_teacher_key_opens_nothing(lesson: Class, key: str) -> None:
    client = TestClient(lesson.app, follow_redirects=False)
    r = client.get(f"/class/{lesson.code}/teach", params={"key": key})
    assert r.status_code == 403
    assert "does not open a class" in r.text
    assert "set-cookie" not in r.headers


def test_a_key_opens_only_its_own_class(app) -> None:  # noqa: ANN001
    first, second = Class(app), Class(app)
    client = TestClient(app, follow_redirects=False)
    assert client.get(f"/class/{second.code}/teach", params={"key": first.key}).status_code == 403
    r = client.post("/stages", data={**first.state(), "class_code": second.code, "goto": "softmax", "stage": "softmax"},
                    headers=HTMX)
    assert r.status_code == 200  # the student's own page answers …
    assert second.room().version == 1  # … and the other class is untouched


# --- who changes a room ---------------------------------------------------------------------------


def test_the_teachers_edits_change_the_room_and_students_see_them(lesson: Class) -> None:
    student = lesson.student()
    assert current_stage(workspace(student, lesson.code)) == "x"
    lesson.step(goto="scores", stage="scores")
    assert lesson.room().version == 2
    assert current_stage(workspace(student, lesson.code)) == "scores"
    # A structural edit (POST /, the whole workspace) too: a new token.
    r = lesson.teacher.post("/", data={**lesson.state(), "action": "add_token"}, headers=HTMX)
    assert r.status_code == 200 and "HX-Push-Url" not in r.headers
    assert lesson.room().version == 3
    tokens = [v for k, v in room_fields(lesson).items() if k.startswith("token-")]
    assert len(tokens) == 4
    # The student's page is the room's state: the same numbers as the preset's page with a token more.
    html = workspace(student, lesson.code)
    assert html.count('name="token-') == 4


def test_a_students_edits_and_forged_fields_never_change_the_room(lesson: Class) -> None:
    student = lesson.student()
    state = {k: v for k, v in lesson.state().items() if k != "class_key"}
    for extra in ({}, {"class_key": "forged"}, {"class_key": lesson.key[:-1]},
                  {"class_reveal": "softmax.0.0.0", "quiz": "on"}):
        for path in ("/stages", "/"):
            r = student.post(path, data={**state, "class_follow": "1", "goto": "softmax", "stage": "softmax", **extra},
                             headers=HTMX)
            assert r.status_code == 200
            assert "HX-Push-Url" not in r.headers  # a student's page in a class keeps the class's address
    assert lesson.room().version == 1
    assert current_stage(workspace(student, lesson.code)) == "x"


def test_a_bad_edit_on_the_teachers_page_keeps_the_room(lesson: Class) -> None:
    lesson.step(goto="scores", stage="scores")
    r = lesson.teacher.post("/stages", data={**lesson.state(), "x-0-0": "nan"}, headers=HTMX)
    assert r.status_code == 422 and "x-0-0" in r.text
    assert lesson.room().version == 2


# --- joining ------------------------------------------------------------------------------------------


def test_unknown_codes_are_404_then_429_for_the_browser(app) -> None:  # noqa: ANN001
    lesson = Class(app)
    client = TestClient(app, follow_redirects=False)
    limit = Settings().class_failures_per_client
    codes = [c * 6 for c in CODE_ALPHABET if c * 6 != lesson.code][:limit + 1]
    answers = [client.get(f"/class/{code}").status_code for code in codes]
    assert answers == [404] * limit + [429]
    assert client.cookies.get("attention_client")  # the browser's tries are counted by its own cookie
    # Over the limit: even the right code is refused for a minute, so codes cannot be enumerated.
    refused = client.get(f"/class/{lesson.code}")
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "60"
    assert client.get("/class", params={"code": lesson.code}).status_code == 429
    assert "wait a minute" in refused.text


def test_students_are_anonymous_ids_in_a_cookie_of_the_class_path(lesson: Class) -> None:
    client = TestClient(lesson.app, follow_redirects=False)
    r = client.get(f"/class/{lesson.code}")
    cookie = r.headers["set-cookie"]
    assert cookie.startswith("attention_student=")
    assert f"Path=/class/{lesson.code}" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    first = client.cookies.get("attention_student")
    client.get(f"/class/{lesson.code}")  # a reload is the same student (the cookie's age renewed)
    assert client.cookies.get("attention_student") == first
    assert lesson.room().students == 1


def test_a_full_class_and_a_full_server_say_so(app) -> None:  # noqa: ANN001
    small = create_app(Settings(class_max_students=2, class_max_rooms=1))
    lesson = Class(small)
    lesson.student()
    lesson.student()
    third = TestClient(small).get(f"/class/{lesson.code}")
    assert third.status_code == 503 and "This class is full" in third.text
    refused = TestClient(small, follow_redirects=False).post("/class", data=preset_fields())
    assert refused.status_code == 503 and "No room for another class" in refused.text
    assert Settings().class_max_students >= 300


# --- predictions --------------------------------------------------------------------------------------


def quiz_on_softmax(lesson: Class) -> None:
    lesson.step(goto="softmax", stage="softmax", quiz="on")


def send(student: TestClient, lesson: Class, value: str, row: int = 1, col: int = 2,
         matrix: str = "softmax", htmx: bool = True):  # noqa: ANN201
    return student.post(f"/class/{lesson.code}/predict", headers=HTMX if htmx else {},
                        data={"guess_matrix": matrix, "guess_row": str(row), "guess_col": str(col), "guess": value})


def softmax_cell(preset: str, row: int, col: int) -> float:
    """The weight computed here, without the pipeline: X W_Q, X W_K, ÷ √d_k, a row's softmax."""
    sc, _ = preset_page(preset)
    w = sc.weights()
    q, k = sc.x @ w["w_q"][0], sc.x @ w["w_k"][0]
    scaled = q @ k.T / math.sqrt(sc.d_k)
    e = np.exp(scaled[row] - scaled[row].max())
    return float(e[col] / e.sum())


def test_predictions_reach_the_teacher_with_the_true_value(lesson: Class) -> None:
    quiz_on_softmax(lesson)
    students = [lesson.student() for _ in range(3)]
    for student, value in zip(students, ("0.2", "0.9", "0.35"), strict=True):
        r = send(student, lesson, value)
        assert r.status_code == 200 and "Sent: your prediction" in r.text
    changed = send(students[1], lesson, "0.3")  # one per student per cell: this replaces 0.9
    assert "The class has sent 3 so far" in changed.text
    results = lesson.teacher.post(f"/class/{lesson.code}/results", data={"class_key": lesson.key}, headers=HTMX)
    assert results.status_code == 200
    truth = softmax_cell(PRESET, 0, 1)
    assert f"value {float(f'{truth:.3f}'):.3f}" in results.text
    assert "3 predictions" in results.text and "Reveal to the class" in results.text
    desc = re.search(r"<desc[^>]*>(.*?)</desc>", results.text)[1]
    assert desc.startswith("3 predictions:")
    # The students' own view has no histogram and no value before the reveal.
    html = workspace(students[0], lesson.code)
    assert "class-histogram" not in html and "Send to the class" in html


def test_the_reveal_reaches_students_with_the_histogram(lesson: Class) -> None:
    quiz_on_softmax(lesson)
    student = lesson.student()
    send(student, lesson, "0.25")
    lesson.step(class_reveal="softmax.0.0.1")
    assert "softmax.0.0.1" in room_fields(lesson)["revealed"]
    html = workspace(student, lesson.code)
    assert "class-histogram" in html and "The class's predictions" in html
    assert f"{softmax_cell(PRESET, 0, 1):.3f}" in html
    # A revealed cell takes no more predictions; another hidden one does.
    late = send(student, lesson, "0.3")
    assert late.status_code == 422 and "revealed this cell" in late.text
    assert send(student, lesson, "0.3", row=2, col=1).status_code == 200


def test_after_the_reveal_each_student_sees_how_close_they_were(lesson: Class) -> None:
    quiz_on_softmax(lesson)
    near, far, silent = lesson.student(), lesson.student(), lesson.student()
    truth = softmax_cell(PRESET, 0, 1)
    send(near, lesson, f"{truth + 0.01:.4f}")
    send(far, lesson, "0.9")
    assert "Your prediction" not in near.get(f"/class/{lesson.code}/mine", headers=HTMX).text  # not yet revealed
    lesson.step(class_reveal="softmax.0.0.1")
    mine = near.get(f"/class/{lesson.code}/mine", headers=HTMX)
    assert mine.status_code == 200 and mine.headers["cache-control"] == "no-store"
    sent = float(f"{truth + 0.01:.4f}")
    assert f"Your prediction for weights A row 1, column 2: <strong>{sent}</strong>" in mine.text
    assert f"{truth:.3f}" in mine.text and "Close: within the tolerance." in mine.text
    other = far.get(f"/class/{lesson.code}/mine", headers=HTMX).text
    assert "0.9" in other and "Off:" in other and f"{truth + 0.01:.4f}" not in other  # each sees only their own
    assert "Your prediction" not in silent.get(f"/class/{lesson.code}/mine", headers=HTMX).text
    assert "Your prediction" not in TestClient(lesson.app).get(f"/class/{lesson.code}/mine").text  # no cookie
    assert f'hx-get="/class/{lesson.code}/mine"' in workspace(near, lesson.code)


@pytest.mark.parametrize(("fields", "named"), [
    ({"guess": "abc"}, "type your prediction as a number"),
    ({"guess": "nan"}, "type your prediction as a number"),
    ({"guess": "inf"}, "type your prediction as a number"),
    ({"guess": "\u0661\u0662"}, "type your prediction as a number"),  # float() reads ١٢ as 12
    ({"guess": "1_0"}, "type your prediction as a number"),
    ({"guess": "1e9"}, "between"),
    ({"guess": "0.5", "guess_matrix": "w_q"}, "guess_matrix"),
    ({"guess": "0.5", "guess_row": "99"}, "guess_row"),
    ({"guess": "0.5", "guess_row": "-1"}, "guess_row"),
    ({"guess": "x" * 5000}, "guess"),
])
def test_bad_predictions_are_a_clear_4xx_and_change_nothing(lesson: Class, fields: dict, named: str) -> None:
    quiz_on_softmax(lesson)
    student = lesson.student()
    data = {"guess_matrix": "softmax", "guess_row": "1", "guess_col": "1", **fields}
    r = student.post(f"/class/{lesson.code}/predict", data=data, headers=HTMX)
    assert r.status_code == 422, r.text
    assert named in r.text
    assert lesson.app.state.rooms.rooms[lesson.code].predictions == {}


def test_predictions_need_a_quiz_a_student_and_a_class(lesson: Class) -> None:
    student = lesson.student()
    no_quiz = send(student, lesson, "0.5")
    assert no_quiz.status_code == 422 and "no quiz" in no_quiz.text
    quiz_on_softmax(lesson)
    stranger = TestClient(lesson.app)  # never joined: no cookie
    assert send(stranger, lesson, "0.5").status_code == 403
    stranger.cookies.set("attention_student", "forged", path=f"/class/{lesson.code}")
    assert send(stranger, lesson, "0.5").status_code == 403
    assert stranger.post("/class/ZZZZZZZZ/predict", data={"guess": "1"}).status_code == 404
    assert lesson.app.state.rooms.rooms[lesson.code].predictions == {}


def test_predictions_per_student_are_limited(app) -> None:  # noqa: ANN001
    limited = create_app(Settings(class_predictions_per_minute=3))
    lesson = Class(limited)
    quiz_on_softmax(lesson)
    student = lesson.student()
    assert [send(student, lesson, "0.5").status_code for _ in range(4)] == [200, 200, 200, 429]
    assert "wait a moment" in send(student, lesson, "0.5").text
    assert lesson.student() is not None and send(lesson.student(), lesson, "0.5").status_code == 200


def test_a_prediction_without_javascript_answers_with_a_page(lesson: Class) -> None:
    quiz_on_softmax(lesson)
    student = lesson.student()
    r = send(student, lesson, "0.4", htmx=False)
    assert r.status_code == 200 and "<!doctype html>" in r.text.lower()
    assert f'href="/class/{lesson.code}"' in r.text  # back to the class


def test_a_new_scenario_starts_the_predictions_afresh(lesson: Class) -> None:
    quiz_on_softmax(lesson)
    send(lesson.student(), lesson, "0.4")
    lesson.step(class_reveal="softmax.0.1.1")  # a view change keeps them
    assert lesson.app.state.rooms.rooms[lesson.code].predictions
    assert lesson.teacher.post(f"/class/{lesson.code}/teach", data={"preset": "pool"}).status_code == 303
    assert lesson.app.state.rooms.rooms[lesson.code].predictions == {}


def test_results_need_the_teachers_key(lesson: Class) -> None:
    for key in ("", "forged", lesson.key + "x"):
        r = TestClient(lesson.app).post(f"/class/{lesson.code}/results", data={"class_key": key})
        assert r.status_code == 403


def test_the_teacher_saves_a_cells_predictions_as_svg_and_png(lesson: Class) -> None:
    """Save figure on the teacher's results: the histogram as a standalone SVG (its counts and the cell's value
    as text) and as a PNG twice its size; a student, or a cell nobody predicted, gets none."""
    quiz_on_softmax(lesson)
    for value in ("0.2", "0.21", "0.6"):
        send(lesson.student(), lesson, value)
    results = lesson.teacher.post(f"/class/{lesson.code}/results", data={"class_key": lesson.key}, headers=HTMX)
    assert f'/class/{lesson.code}/figure.svg?cell=softmax.0.0.1' in results.text.replace("&amp;", "&")
    svg = lesson.teacher.get(f"/class/{lesson.code}/figure.svg", params={"cell": "softmax.0.0.1"})
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    assert 'filename="class-predictions-softmax-0-0-1.svg"' in svg.headers["content-disposition"]
    root = ET.fromstring(svg.text)
    words = {"".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")}
    truth = float(f"{softmax_cell(PRESET, 0, 1):.3f}")
    assert {"2", "1", "predicted value · 3 answers"} <= words and any(f"{truth:.3f}"[:4] in w for w in words)
    assert "class=" not in svg.text and len(root.get("viewBox").split()) == 4
    png = lesson.teacher.get(f"/class/{lesson.code}/figure.png", params={"cell": "softmax.0.0.1"})
    assert png.status_code == 200 and png.content[:8] == b"\x89PNG\r\n\x1a\n"
    width = int.from_bytes(png.content[16:20], "big")
    assert abs(width - 2 * float(root.get("viewBox").split()[2])) <= 1  # resvg rounds the size up
    missing = lesson.teacher.get(f"/class/{lesson.code}/figure.svg", params={"cell": "softmax.0.2.2"})
    assert missing.status_code == 422 and missing.json()["detail"][0]["loc"] == ["query", "cell"]
    assert lesson.student().get(f"/class/{lesson.code}/figure.svg", params={"cell": "softmax.0.0.1"}).status_code == 403


# --- the histogram ----------------------------------------------------------------------------------


def test_bins_hold_every_prediction_and_the_value() -> None:
    values = [0.2, 0.3, 0.35, 0.31, -1.0]
    b = bins(values, 0.198)
    assert sum(b.counts) == len(values)
    assert b.edges[0] <= min(values) and b.edges[-1] > max(values)
    assert len(b.counts) <= 12
    steps = np.diff(b.edges)
    assert np.allclose(steps, steps[0])
    one = bins([0.5, 0.5], 0.5)  # no spread at all still draws a bin
    assert sum(one.counts) == 2


def test_the_histogram_states_its_numbers_and_escapes_its_label() -> None:
    svg = str(predictions_svg([0.1, 0.1, 0.4], 0.12, label="A <row> 1", chart_id="h1"))
    assert "&lt;row&gt;" in svg and "<row>" not in svg
    assert "3 predictions" in svg and "The value is 0.120" in svg
    assert "style=" not in svg and "<script" not in svg
    one = str(predictions_svg([0.1], 0.12, label="A", chart_id="h2"))
    assert "1 prediction:" in one and "1 answer<" in one


# --- headers and streams ---------------------------------------------------------------------------


def test_every_class_route_has_the_security_headers(lesson: Class) -> None:
    student = lesson.student()
    quiz_on_softmax(lesson)
    responses = [
        lesson.teacher.get(f"/class/{lesson.code}/teach"),
        student.get(f"/class/{lesson.code}"),
        student.get(f"/class/{lesson.code}/workspace", headers=HTMX),
        send(student, lesson, "0.3"),
        lesson.teacher.post(f"/class/{lesson.code}/results", data={"class_key": lesson.key}),
        TestClient(lesson.app).get("/class/ZZZZZZZZ"),
        TestClient(lesson.app, follow_redirects=False).get("/class", params={"code": lesson.code}),
    ]
    for r in responses:
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp, r.url
        assert r.headers["x-frame-options"] == "DENY"
        assert r.status_code < 500


@pytest.mark.server
def test_the_event_stream_tells_the_version_at_once(lesson: Class) -> None:
    """A real server: the stream's first event, and its headers."""
    import httpx

    from tests.servers import LOOPBACK, free_port, running, uvicorn_args

    port = free_port()
    env = {**os.environ, "ATTENTION_CLASS_MAX_STREAMS": "1"}
    with running(uvicorn_args(port), port=port, env=env):
        base = f"http://{LOOPBACK}:{port}"
        teacher = httpx.Client(base_url=base, follow_redirects=True)
        r = teacher.post("/class", data={**preset_fields(), "action": "start_class"})
        code = re.search(r"/class/([A-Z0-9]{8})/teach", str(r.url))[1]
        with httpx.stream("GET", f"{base}/class/{code}/events", timeout=5) as events:
            assert events.headers["content-type"].startswith("text/event-stream")
            assert events.headers["cache-control"] == "no-store"
            assert "content-security-policy" in events.headers
            lines = events.iter_lines()
            assert next(lines) == "retry: 2000"
            assert next(lines) == "id: 1"  # a reconnecting browser says which version it had
            assert next(lines) == "event: state"
            assert next(lines) == "data: 1"
            # One stream per worker here: a second is refused while the first is open …
            full = httpx.get(f"{base}/class/{code}/events", timeout=5)
            assert full.status_code == 503 and full.headers["retry-after"] == "10"
        # … and the place is free again once the first has gone.
        for _ in range(50):
            with httpx.stream("GET", f"{base}/class/{code}/events", timeout=5) as again:
                if again.status_code == 200:
                    break
            time.sleep(0.1)
        assert again.status_code == 200
        missing = httpx.get(f"{base}/class/ZZZZZZZZ/events")
        assert missing.status_code == 404


def _carried(lines: Iterator[str]) -> tuple[int, str]:
    """The next "state" event of a stream: its version, and the workspace it carries inflated ("" for none)."""
    for line in lines:
        if line.startswith("data: "):
            version, _, packed = line[6:].partition(" ")
            return int(version), gzip.decompress(base64.b64decode(packed)).decode() if packed else ""
    raise AssertionError("the stream ended")


@pytest.mark.server
def test_a_following_students_stream_carries_the_workspace_made_once_for_the_class() -> None:
    """One render and one compression per change, the same bytes to every following stream; the stream is not
    compressed again, and a page that already shows the room's version is not sent it again."""
    import httpx

    from tests.servers import LOOPBACK, free_port, running, uvicorn_args

    port = free_port()
    with running(uvicorn_args(port), port=port, env=dict(os.environ)):
        base = f"http://{LOOPBACK}:{port}"
        teacher = httpx.Client(base_url=base, follow_redirects=True)
        r = teacher.post("/class", data={**preset_fields(), "action": "start_class"})
        code = re.search(r"/class/([A-Z0-9]{8})/teach", str(r.url))[1]
        form = join_grids(form_fields(r.text))
        url = f"{base}/class/{code}/events?workspace="
        zstd = {"Accept-Encoding": "zstd, br, gzip"}
        with httpx.stream("GET", url + "&v=0", headers=zstd, timeout=10) as one, \
                httpx.stream("GET", url + "&v=1", headers=zstd, timeout=10) as two, \
                httpx.stream("GET", f"{base}/class/{code}/events", timeout=10) as teachers:
            assert "content-encoding" not in one.headers  # its payloads come compressed
            first, second, plain = one.iter_lines(), two.iter_lines(), teachers.iter_lines()
            version, html = _carried(first)
            assert version == 1 and 'name="stage" value="x"' in html and html.startswith("<div id=\"workspace\"")
            assert _carried(second) == (1, "")  # it shows version 1 already
            assert _carried(plain) == (1, "")  # the teacher's page follows no one
            raw = {}
            for stage in ("qkv", "scores"):
                teacher.post("/stages", data={**form, "goto": stage}, headers={"HX-Request": "true"})
                for name, lines in (("one", first), ("two", second)):
                    for line in lines:
                        if line.startswith("data: "):
                            raw[name] = line
                            break
                assert raw["one"] == raw["two"]  # the same bytes, made once
                version, html = _carried(iter([raw["one"]]))
                assert f'name="stage" value="{stage}"' in html
                assert _carried(plain)[1] == ""
            assert version == 3
            # The workspace route answers the same page a browser without DecompressionStream fetches.
            fetched = httpx.get(f"{base}/class/{code}/workspace", headers={"HX-Request": "true"}).text
            assert fetched == html


def down_redis_app() -> TestClient:
    """An app whose REDIS_URL names a port nothing listens on: Redis down."""
    from tests.servers import LOOPBACK, free_port

    return TestClient(create_app(Settings(redis_url=f"redis://{LOOPBACK}:{free_port()}/0")),
                      raise_server_exceptions=False)


PAGE_LOAD = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}  # as a browser asks


def test_a_class_request_while_redis_is_down_is_a_503() -> None:
    client = down_redis_app()
    for r in (client.get("/class/ABCDEFGH"), client.post("/stages", data={"class_code": "ABCDEFGH"}),
              client.get("/class/ABCDEFGH/workspace", headers={**PAGE_LOAD, "HX-Request": "true"})):
        assert r.status_code == 503 and r.headers["retry-after"] == "5"
        assert r.headers["content-type"].startswith("text/plain")  # htmx or a script: the sentence alone
        assert "The class's storage does not answer" in r.text
        assert "content-security-policy" in r.headers
    assert client.get("/healthz").status_code == 200  # the page without a class needs no Redis


@pytest.mark.parametrize(("lang", "title"), [("en", "The class is reconnecting"),
                                             ("de", "Der Kurs verbindet sich neu")])
def test_a_class_page_loaded_while_redis_is_down_says_it_is_reconnecting_and_reloads(lang: str, title: str) -> None:
    client = down_redis_app()
    for path in ("/class/ABCDEFGH", "/class/ABCDEFGH/teach", f"/class?code=ABCDEFGH&lang={lang}"):
        r = client.get(path, headers={**PAGE_LOAD, "Accept-Language": lang})
        assert r.status_code == 503, (path, r.status_code)
        assert r.headers["content-type"].startswith("text/html")
        assert r.headers["retry-after"] == "5" and r.headers["refresh"] == "5"
        assert r.headers["cache-control"] == "no-store"
        assert f"<h2>{title}</h2>" in r.text and f'<html lang="{lang}"' in r.text
    # A form posted without JavaScript is not posted again by itself: the page says to send it again.
    r = client.post("/class/ABCDEFGH/predict", headers={**PAGE_LOAD, "Accept-Language": lang},
                    data={"guess_matrix": "softmax", "guess_row": "1", "guess_col": "1", "guess": "0.5"})
    assert r.status_code == 503 and "refresh" not in r.headers and f"<h2>{title}</h2>" in r.text


def no_redis_asked(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> list[tuple[object, ...]]:
    """Every connection the app's store asks its pool for, each refused as by a Redis that is down."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    asked: list[tuple[object, ...]] = []

    async def refused(*args: object, **kwargs: object) -> None:
        asked.append(args)
        raise RedisConnectionError("Redis is down")

    monkeypatch.setattr(client.app.state.rooms.redis.connection_pool, "get_connection", refused)
    return asked


def test_the_pages_without_a_class_answer_while_redis_is_down_without_asking_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from app.serving.real_models import language_model

    monkeypatch.setattr(language_model(), "ready", lambda: False)  # "Next word" alone is the slow test's
    with down_redis_app() as client:
        asked = no_redis_asked(client, monkeypatch)
        page = client.get("/", headers=PAGE_LOAD)
        answers = {"/": page, "/model": client.get("/model", params={"text": "The bank of the river."}),
                   "step": client.post("/stages", data={**join_grids(form_fields(page.text)), "goto": "softmax"},
                                       headers={"HX-Request": "true"})}
        assert {name: r.status_code for name, r in answers.items()} == dict.fromkeys(answers, 200)
        loading = client.get("/decoder", headers=PAGE_LOAD)
        assert loading.status_code == 503 and "The language model is still being read" in loading.text
        assert asked == []
        assert client.get("/class/ABCDEFGH", headers=PAGE_LOAD).status_code == 503  # a class's page does ask
        assert asked


@pytest.mark.slow
def test_next_word_answers_while_redis_is_down_without_asking_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.view.decoder_view import decoder_catalogue_view

    decoder_catalogue_view()  # the language model read and its heads measured, as the app's start does
    with down_redis_app() as client:
        asked = no_redis_asked(client, monkeypatch)
        r = client.get("/decoder", params={"text": "The capital of France is"}, headers=PAGE_LOAD)
        assert r.status_code == 200 and "Paris" in r.text
        assert asked == []


@pytest.fixture(autouse=True)
def _no_cross_test_rooms() -> Iterator[None]:
    yield
    from app.classroom import lesson

    lesson._shown.clear()
    lesson._rendered.clear()
    from app.web import class_stream

    class_stream._carried.clear()
