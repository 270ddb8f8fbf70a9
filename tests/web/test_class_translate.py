"""The translator in a live class (app.web.class_translate), with rooms in the process and over two real servers
sharing a real Redis: the teacher shows the translator and each change reaches the room, students' pages and
workspaces show the teacher's text and head, a student translates a text of their own without changing the room,
only the teacher publishes, a bad state is refused naming its field, and the class comes back to a toy scenario."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode

import httpx
import pytest
from fastapi.testclient import TestClient

from app.classroom.lesson import TRANSLATE_STATE, shown_real
from app.config import Settings
from app.main import create_app
from bench.cases import BROWSER
from bench.classroom import start_class
from tests.web.test_class_model import servers
from tests.web.test_class_redis import event_stream, next_event
from tests.web.test_classroom import HTMX, Class

MONEY = "I deposited money at the bank."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def lesson() -> Class:
    return Class(create_app(Settings()))


def room_query(c: Class) -> dict[str, str]:
    state = c.room().state
    assert state.startswith(TRANSLATE_STATE), state
    return dict(parse_qsl(shown_real(state, "translate") or ""))


def show(c: Class, **fields: str) -> None:
    shown = c.teacher.post(f"/class/{c.code}/translate", data=fields)
    assert shown.status_code == 303, shown.text
    assert shown.headers["location"] == f"/class/{c.code}/translate"


def test_the_teacher_shows_the_translator_and_a_student_sees_the_teachers_text(lesson: Class) -> None:
    student = lesson.student()
    show(lesson, text=MONEY, layer="1", head="4")
    assert room_query(lesson) == {"text": MONEY, "direction": "en-pt", "layer": "1", "head": "4"}
    page = student.get(f"/class/{lesson.code}")
    assert page.status_code == 200
    assert "Translate: where each word looks" in page.text and f">{MONEY}</textarea>" in page.text
    assert "Eu depositei dinheiro no banco." in page.text
    assert "Step through one cross-attention head: L1 H4" in page.text
    assert 'data-role="student"' in page.text and f"/class/{lesson.code}/workspace?page=translate" in page.text
    work = student.get(f"/class/{lesson.code}/workspace?page=translate", headers=HTMX)
    assert work.status_code == 200 and 'id="translate-work"' in work.text
    assert 'id="translate-sentences" aria-label="The text to translate" hx-swap-oob="true"' in work.text
    assert work.headers["HX-Replace-Url"] == f"/class/{lesson.code}"


def test_the_teachers_page_posts_and_offers_the_way_back(lesson: Class) -> None:
    show(lesson, text=MONEY)
    teach = lesson.teacher.get(f"/class/{lesson.code}/teach")
    assert teach.status_code == 303 and teach.headers["location"] == f"/class/{lesson.code}/translate"
    page = lesson.teacher.get(f"/class/{lesson.code}/translate?text=ignored")
    assert page.status_code == 200 and f">{MONEY}</textarea>" in page.text  # the room's, not the address's
    assert f'<form id="translate-form" method="post" action="/class/{lesson.code}/translate"' in page.text
    assert 'hx-params="none"' in page.text  # the maps' links post their query
    assert "Back to a scenario" in page.text and "Show the translator" not in page.text
    change = lesson.teacher.post(f"/class/{lesson.code}/translate?text=The+bank+of+the+river+was+muddy.&layer=2&head=3",
                                 headers=HTMX)
    assert change.status_code == 200 and change.headers["HX-Push-Url"] == f"/class/{lesson.code}/translate"
    assert room_query(lesson)["layer"] == "2" and room_query(lesson)["text"] == "The bank of the river was muddy."


def test_only_the_teacher_publishes_and_a_bad_state_is_never_stored(lesson: Class) -> None:
    student = lesson.student()
    show(lesson, text=MONEY)
    state = lesson.room().state
    refused = student.post(f"/class/{lesson.code}/translate", data={"text": "Hello."})
    assert refused.status_code == 403
    for fields, named in (({"text": ""}, "text"), ({"text": MONEY, "layer": "3", "head": "1"}, "layer"),
                          ({"text": MONEY, "direction": "de-en"}, "direction")):
        bad = lesson.teacher.post(f"/class/{lesson.code}/translate", data=fields, headers=HTMX)
        assert bad.status_code == 422 and f'data-field="{named}"' in bad.text
    assert lesson.room().state == state


def test_a_student_translates_their_own_text_without_changing_the_room(lesson: Class) -> None:
    student = lesson.student()
    show(lesson, text=MONEY)
    version = lesson.room().version
    own = student.get(f"/class/{lesson.code}/translate", params={"text": "The river is wide."})
    assert own.status_code == 200 and ">The river is wide.</textarea>" in own.text
    assert "class-panel student exploring" in own.text
    assert lesson.room().version == version and room_query(lesson)["text"] == MONEY
    stranger = TestClient(lesson.app, follow_redirects=False).get(f"/class/{lesson.code}/translate?text=Hi")
    assert stranger.status_code == 303 and stranger.headers["location"] == f"/class/{lesson.code}"


def test_the_class_follows_the_teacher_back_to_a_scenario(lesson: Class) -> None:
    student = lesson.student()
    show(lesson, text=MONEY)
    back = lesson.teacher.post(f"/class/{lesson.code}/teach", data={"preset": "translate"})
    assert back.status_code == 303 and shown_real(lesson.room().state, "translate") is None
    stale = student.get(f"/class/{lesson.code}/workspace?page=translate", headers=HTMX)
    assert stale.status_code == 204 and stale.headers["HX-Redirect"] == f"/class/{lesson.code}"


def test_the_toy_teacher_page_offers_the_translator(lesson: Class) -> None:
    page = lesson.teacher.get(f"/class/{lesson.code}/teach")
    assert f'<form class="class-switch" method="post" action="/class/{lesson.code}/translate">' in page.text
    assert "Show the translator" in page.text


@pytest.mark.anyio
async def test_the_translator_goes_round_redis_between_two_servers(request: pytest.FixtureRequest,
                                                                   anyio_backend: str) -> None:
    with servers("redis", request) as (a, b, redis_db):
        async with httpx.AsyncClient(base_url=a, timeout=30) as teacher, \
                httpx.AsyncClient(base_url=b, timeout=30) as student:
            lesson = await start_class(teacher)
            assert (await student.get(f"/class/{lesson.code}", headers=BROWSER)).status_code == 200
            async with event_stream(student, lesson.code) as events:
                assert await next_event(events) == ("state", 1)
                shown = {"text": MONEY, "direction": "en-pt", "layer": "2", "head": "5"}
                r = await teacher.post(f"/class/{lesson.code}/translate", data=shown, headers=BROWSER)
                assert r.status_code == 303, r.text[:300]
                assert await next_event(events, 5.0) == ("state", 2)
                held = redis_db.client().hget(f"attention:room:{lesson.code}", "state")
                held = held.decode() if isinstance(held, bytes) else held
                assert held == "translate:" + urlencode(shown)
                r = await student.get(f"/class/{lesson.code}/workspace?page=translate", headers=HTMX)
                assert r.status_code == 200
                assert "Eu depositei dinheiro no banco." in r.text and "L2 H5" in r.text


# --- Ask the class first: where does a written piece look? -----------------------------------------


def about(html: str) -> str:
    found = re.search(r'name="about" value="([^"]+)"', html)
    assert found, "no tap form on the page"
    return found[1]


def test_asked_first_students_tap_then_the_teacher_reveals(lesson: Class) -> None:
    one, two = lesson.student(), lesson.student()
    show(lesson, text="The bank of the river was muddy.", ask="on")
    page = one.get(f"/class/{lesson.code}").text
    assert "Your turn first" in page and "▁margem" in page  # the second written piece, asked by default
    assert 'id="translate-lines-figure"' not in page and 'data-ref="alignment"' not in page  # no answer beside it
    ref = about(page)
    for student, tap in ((one, "2"), (two, "2"), (two, "5")):  # a student's new tap replaces theirs
        sent = student.post(f"/class/{lesson.code}/translate/tap", data={"about": ref, "tap": tap}, headers=HTMX)
        assert sent.status_code == 200 and "Sent: “" in sent.text
    teacher = lesson.teacher.post(f"/class/{lesson.code}/translate/taps", headers=HTMX).text
    counts = dict(re.findall(r'<th scope="row">\d+ (\S+)</th>\s*<td><svg class="tap-bar".*?</svg> (\d+)</td>',
                             teacher))
    assert counts["▁bank"] == "1" and counts["▁river"] == "1" and counts["▁The"] == "0"
    assert "(2 taps)" in teacher

    revealed = lesson.teacher.post(f"/class/{lesson.code}/translate/question", data={"reveal": "on"}, headers=HTMX)
    assert revealed.status_code == 200 and room_query(lesson).get("revealed") == "1"
    page = one.get(f"/class/{lesson.code}").text
    assert "Your turn first" not in page and 'id="translate-lines-figure"' in page and "(2 taps)" in page
    late = two.post(f"/class/{lesson.code}/translate/tap", data={"about": ref, "tap": "1"}, headers=HTMX)
    assert late.status_code == 422 and "revealed" in late.text


def test_a_tap_is_refused_when_stale_out_of_range_or_not_asked(lesson: Class) -> None:
    student = lesson.student()
    show(lesson, text="The bank of the river was muddy.", ask="on")
    ref = about(student.get(f"/class/{lesson.code}").text)
    wrong = student.post(f"/class/{lesson.code}/translate/tap", data={"about": ref, "tap": "11"}, headers=HTMX)
    assert wrong.status_code == 422 and 'data-field="tap"' in wrong.text
    moved = lesson.teacher.post(f"/class/{lesson.code}/translate/question", data={"word": "4"}, headers=HTMX)
    assert moved.status_code == 200 and room_query(lesson)["word"] == "4"
    stale = student.post(f"/class/{lesson.code}/translate/tap", data={"about": ref, "tap": "5"}, headers=HTMX)
    assert stale.status_code == 422 and "changed the question" in stale.text
    assert "“▁rio”" in student.get(f"/class/{lesson.code}").text  # the fourth written piece now
    lesson.teacher.post(f"/class/{lesson.code}/translate/question", data={"ask": ""}, headers=HTMX)
    off = student.post(f"/class/{lesson.code}/translate/tap", data={"about": ref, "tap": "5"}, headers=HTMX)
    assert off.status_code == 422 and "not asking" in off.text
    stranger = lesson.student()
    bad_word = lesson.teacher.post(f"/class/{lesson.code}/translate/question", data={"word": "40"}, headers=HTMX)
    assert bad_word.status_code == 422 and "word:" in bad_word.text
    assert stranger.post(f"/class/{lesson.code}/translate/question", data={"reveal": "on"}).status_code == 403
