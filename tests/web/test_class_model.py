"""The real model in a live class (app.web.class_model), with rooms in the process and in a real Redis: the
teacher shows the model and each change reaches the room, students' pages and workspaces show the teacher's
view, a student explores without changing the room, only the teacher publishes, a bad state is refused
naming its field, and the class comes back to a toy scenario."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlencode

import httpx
import pytest
from fastapi.testclient import TestClient

from app.classroom.lesson import MODEL_STATE, shown_model
from app.config import Settings
from app.main import create_app
from bench.cases import BROWSER
from bench.classroom import start_class
from tests.redis_server import RedisServer
from tests.web.test_class_redis import event_stream, next_event, replica
from tests.web.test_classroom import HTMX, Class

SENTENCE = "Cats chase the small grey mice."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def lesson() -> Class:
    return Class(create_app(Settings()))


def room_query(c: Class) -> dict[str, str]:
    """The model page's state the room holds (the room read back from its store)."""
    state = c.room().state
    assert state.startswith(MODEL_STATE), state
    return dict(parse_qsl(shown_model(state) or ""))


def show(c: Class, **fields: str) -> None:
    shown = c.teacher.post(f"/class/{c.code}/model", data=fields)
    assert shown.status_code == 303, shown.text
    assert shown.headers["location"] == f"/class/{c.code}/model"


def tokens_of(html: str) -> list[str]:
    """The enlarged head's token labels: the sentence's WordPiece tokens as the page shows them."""
    return re.findall(r'<th scope="row"[^>]*>(?:<[^>]+>)*\d+ ([^<]+)<', html)


def test_the_teacher_shows_the_model_and_a_student_sees_the_teachers_sentence(lesson: Class) -> None:
    student = lesson.student()
    show(lesson, text=SENTENCE, layer="3", head="5")
    assert room_query(lesson) == {"text": SENTENCE, "layer": "3", "head": "5"}
    page = student.get(f"/class/{lesson.code}")
    assert page.status_code == 200
    assert "Your sentence: a real model" in page.text
    assert f">{SENTENCE}</textarea>" in page.text
    assert "layer 3, head 5" in page.text
    assert 'data-role="student"' in page.text and f"/class/{lesson.code}/workspace?page=model" in page.text
    assert "mice" in page.text and "chase" in page.text
    work = student.get(f"/class/{lesson.code}/workspace?page=model", headers=HTMX)
    assert work.status_code == 200
    assert work.text.startswith("<div id=\"model-work\"") or 'id="model-work"' in work.text
    assert 'id="sentences" aria-label="The two sentences" hx-swap-oob="true"' in work.text
    assert f">{SENTENCE}</textarea>" in work.text
    assert work.headers["HX-Replace-Url"] == f"/class/{lesson.code}"


def test_the_teachers_page_is_the_rooms_model_state(lesson: Class) -> None:
    show(lesson, text=SENTENCE)
    teach = lesson.teacher.get(f"/class/{lesson.code}/teach")
    assert teach.status_code == 303 and teach.headers["location"] == f"/class/{lesson.code}/model"
    page = lesson.teacher.get(f"/class/{lesson.code}/model?text=ignored")
    assert page.status_code == 200
    assert f">{SENTENCE}</textarea>" in page.text  # a GET never changes a class: the room's state, not the address's
    assert 'method="post"' in page.text and f'hx-post="/class/{lesson.code}/model"' in page.text
    assert "Back to a scenario" in page.text and 'data-role="teacher"' in page.text
    assert room_query(lesson) == {"text": SENTENCE}


def test_each_htmx_change_of_the_teacher_reaches_the_room(lesson: Class) -> None:
    show(lesson)
    before = lesson.room().version
    typed = lesson.teacher.post(f"/class/{lesson.code}/model", data={"text": "Dogs bark.", "layer": "2", "head": "7"},
                                headers=HTMX)
    assert typed.status_code == 200
    assert typed.text.lstrip().startswith('<div id="model-work"')
    assert typed.headers["HX-Push-Url"] == f"/class/{lesson.code}/model"
    assert lesson.room().version == before + 1
    # A head's map posts nothing but its link's query.
    picked = lesson.teacher.post(f"/class/{lesson.code}/model?text=Dogs+bark.&layer=6&head=12", headers=HTMX)
    assert picked.status_code == 200 and "layer 6, head 12" in picked.text
    assert room_query(lesson) == {"text": "Dogs bark.", "layer": "6", "head": "12"}
    thumb = f'hx-post="/class/{lesson.code}/model?text=Dogs+bark.&amp;layer=1&amp;head=1" hx-params="none"'
    assert thumb in picked.text


def test_only_the_teacher_publishes(lesson: Class) -> None:
    show(lesson, text=SENTENCE)
    version = lesson.room().version
    student = lesson.student()
    for who in (student, TestClient(lesson.app, follow_redirects=False)):
        refused = who.post(f"/class/{lesson.code}/model", data={"text": "Students rule."})
        assert refused.status_code == 403
        assert "does not open a class" in refused.text
    forged = TestClient(lesson.app, follow_redirects=False, cookies={f"attention_teacher_{lesson.code}": "x" * 43})
    assert forged.post(f"/class/{lesson.code}/model", data={"text": "Forged."}).status_code == 403
    assert lesson.room().version == version and room_query(lesson) == {"text": SENTENCE}


@pytest.mark.parametrize(("fields", "named"), [
    ({"text": ""}, "text"),
    ({"text": "x" * 1001}, "text"),
    ({"text": "bell \x07 here"}, "text"),
    ({"text": " ".join(["word"] * 70)}, "text"),
    ({"text": SENTENCE, "text2": "   "}, "text2"),
    ({"text": SENTENCE, "layer": "7", "head": "1"}, "layer"),
    ({"text": SENTENCE, "layer": "1", "head": "x"}, "head"),
    ({"text": SENTENCE, "layer": "1"}, "head"),
    ({"text": SENTENCE, "off": "9.1"}, "off"),
    ({"text": SENTENCE, "q": "99"}, "q"),
    ({"text": SENTENCE, "matrix": "nothing"}, "matrix"),
])
def test_a_bad_state_is_refused_naming_its_field_and_never_stored(lesson: Class, fields: dict, named: str) -> None:
    show(lesson, text="Kept.")
    version = lesson.room().version
    refused = lesson.teacher.post(f"/class/{lesson.code}/model", data=fields, headers=HTMX)
    assert refused.status_code == 422
    assert f'data-field="{named}"' in refused.text
    assert refused.headers["HX-Reswap"] == "none"
    page = lesson.teacher.post(f"/class/{lesson.code}/model", data=fields)  # without JavaScript: the page again
    assert page.status_code == 422 and f'data-field="{named}"' in page.text
    assert lesson.room().version == version and room_query(lesson) == {"text": "Kept."}


def test_a_state_over_the_class_budget_is_refused_naming_its_field() -> None:
    c = Class(create_app(Settings(class_max_state_bytes=1024)))
    state = c.room().state
    long = "ü" * 200  # one WordPiece token ([UNK]: a word over 100 characters), 1,205 bytes in a URL
    refused = c.teacher.post(f"/class/{c.code}/model", data={"text": long}, headers=HTMX)
    assert refused.status_code == 422, refused.text
    assert 'data-field="text"' in refused.text and "over its 1,024" in refused.text
    assert c.room().state == state


def test_a_student_explores_without_changing_the_room_and_comes_back(lesson: Class) -> None:
    student = lesson.student()
    show(lesson, text=SENTENCE)
    version = lesson.room().version
    own = student.get(f"/class/{lesson.code}/model", params={"text": "Birds sing at dawn."})
    assert own.status_code == 200
    assert ">Birds sing at dawn.</textarea>" in own.text and "class-panel student exploring" in own.text
    swapped = student.get(f"/class/{lesson.code}/model", params={"text": "Birds fly."},
                          headers={**HTMX, "HX-Trigger-Name": "text"})
    assert swapped.status_code == 200 and "HX-Replace-Url" in swapped.headers
    assert swapped.headers["HX-Replace-Url"].startswith(f"/class/{lesson.code}/model?text=Birds+fly.")
    assert lesson.room().version == version and room_query(lesson) == {"text": SENTENCE}
    back = student.get(f"/class/{lesson.code}/workspace?page=model", headers=HTMX)
    assert back.status_code == 200 and f">{SENTENCE}</textarea>" in back.text
    # Without a sentence of their own, the model's address is the class's page.
    bare = student.get(f"/class/{lesson.code}/model")
    assert bare.status_code == 303 and bare.headers["location"] == f"/class/{lesson.code}"
    stranger = TestClient(lesson.app, follow_redirects=False).get(f"/class/{lesson.code}/model?text=Hi")
    assert stranger.status_code == 303 and stranger.headers["location"] == f"/class/{lesson.code}"


def test_the_class_follows_the_teacher_back_to_a_scenario(lesson: Class) -> None:
    student = lesson.student()
    show(lesson, text=SENTENCE)
    moved = student.get(f"/class/{lesson.code}/workspace", headers=HTMX)  # a page still on the toy scenario
    assert moved.status_code == 204 and moved.headers["HX-Redirect"] == f"/class/{lesson.code}"
    assert student.post(f"/class/{lesson.code}/predict", data={"guess": "0.5"}, headers=HTMX).status_code == 422
    back = lesson.teacher.post(f"/class/{lesson.code}/teach", data={"preset": "three-token"})
    assert back.status_code == 303 and back.headers["location"] == f"/class/{lesson.code}/teach"
    assert shown_model(lesson.room().state) is None
    assert lesson.teacher.get(f"/class/{lesson.code}/teach").status_code == 200
    assert lesson.teacher.get(f"/class/{lesson.code}/model").headers["location"] == f"/class/{lesson.code}/teach"
    stale = student.get(f"/class/{lesson.code}/workspace?page=model", headers=HTMX)
    assert stale.status_code == 204 and stale.headers["HX-Redirect"] == f"/class/{lesson.code}"
    page = student.get(f"/class/{lesson.code}")
    assert page.status_code == 200 and "Attention, step by step</h1>" in page.text
    assert "Show the real model" not in page.text  # the teacher's button only


def test_the_toy_teacher_page_offers_the_model(lesson: Class) -> None:
    page = lesson.teacher.get(f"/class/{lesson.code}/teach")
    assert page.status_code == 200
    assert f'<form class="class-switch" method="post" action="/class/{lesson.code}/model">' in page.text
    assert "Show the real model" in page.text


# --- the round trip through each store, over real servers -------------------------------------------


@contextmanager
def servers(store: str, request: pytest.FixtureRequest) -> Iterator[tuple[str, str, RedisServer | None]]:
    """The teacher's server and the student's: one server with rooms in memory, or two sharing a real Redis."""
    if store == "memory":
        with replica("") as (a, _):
            yield a, a, None
        return
    redis_db: RedisServer = request.getfixturevalue("redis_db")
    with replica(redis_db.url()) as (a, _), replica(redis_db.url()) as (b, _):
        yield a, b, redis_db


@pytest.mark.anyio
# In memory on one real server: slow, left to a full run (every other test of this file uses the memory store in
# process, and the Redis case runs the same steps over two real servers).
@pytest.mark.parametrize("store", [pytest.param("memory", marks=pytest.mark.slow), "redis"])
async def test_the_model_state_goes_round_the_store_to_a_students_page(store: str, request: pytest.FixtureRequest,
                                                                       anyio_backend: str) -> None:
    with servers(store, request) as (a, b, redis_db):
        # The model's first pages on a just-started server wait for its weights and catalogue.
        async with httpx.AsyncClient(base_url=a, timeout=30) as teacher, \
                httpx.AsyncClient(base_url=b, timeout=30) as student:
            lesson = await start_class(teacher)
            assert (await student.get(f"/class/{lesson.code}", headers=BROWSER)).status_code == 200
            async with event_stream(student, lesson.code) as events:
                assert await next_event(events) == ("state", 1)
                shown = {"text": SENTENCE, "layer": "4", "head": "2"}
                r = await teacher.post(f"/class/{lesson.code}/model", data=shown, headers=BROWSER)
                assert r.status_code == 303, r.text[:300]
                assert await next_event(events, 5.0) == ("state", 2)
                if redis_db is not None:  # what Redis itself holds, read with its own client
                    held = redis_db.client().hget(f"attention:room:{lesson.code}", "state")
                    held = held.decode() if isinstance(held, bytes) else held
                    assert held == "model:" + urlencode({"text": SENTENCE, "layer": 4, "head": 2})
                r = await student.get(f"/class/{lesson.code}/workspace?page=model", headers=HTMX)
                assert r.status_code == 200
                assert f">{SENTENCE}</textarea>" in r.text and "layer 4, head 2" in r.text
                bad = await teacher.post(f"/class/{lesson.code}/model", data={"text": SENTENCE, "head": "13",
                                                                             "layer": "1"}, headers=HTMX)
                assert bad.status_code == 422 and 'data-field="head"' in bad.text
                r = await teacher.post(f"/class/{lesson.code}/teach", data={"preset": "three-token"}, headers=BROWSER)
                assert r.status_code == 303
                assert await next_event(events, 5.0) == ("state", 3)
            r = await student.get(f"/class/{lesson.code}/workspace?page=model", headers=HTMX)
            assert r.status_code == 204 and r.headers["HX-Redirect"] == f"/class/{lesson.code}"
