"""The language model in a live class (app.web.class_decoder), with rooms in the process and in a real Redis shared
by two servers: the teacher shows "Next word" and the students' pages follow its text, head and temperature; a bad
field is a 422 naming it and nothing is stored; a student explores without changing the room and cannot change it;
the class's guesses of the next word are counted, normalised and matched with the model's candidates; the reveal
shows both to the students; a bad guess is a 422 naming its field. A class moved to "Next word" (and back) sends its
page in one event, made once for the class and once per language."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import html
import re
from collections.abc import AsyncIterator
from urllib.parse import parse_qsl, urlencode

import httpx
import pytest
from fastapi.testclient import TestClient

from app.classroom.lesson import DECODER_STATE, real_page
from app.classroom.next_word import NextWord, guess_ref, next_word, tally
from app.config import Settings
from app.main import create_app
from app.maths.decoder_files import load_decoder_files
from app.state.decoder_state import read_decoder_page
from app.view.decoder_view import candidates_context
from app.web import class_decoder, classroom
from bench.cases import BROWSER
from bench.classroom import start_class
from tests.redis_server import RedisServer
from tests.web.test_class_redis import event_stream, next_event, replica
from tests.web.test_classroom import HTMX, Class

TEXT = "The capital of France is"  # the model's likeliest next token: " Paris" (77 %)
OTHER = "Once upon a time there was a"
CANDIDATES = {**HTMX, "HX-Target": "candidates"}  # the temperature slider's and the cut-offs' requests


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def lesson() -> Class:
    return Class(create_app(Settings()))


def question(c: Class) -> NextWord:
    """The page's state and the class's question, as the room holds them (read back from its store)."""
    state = c.room().state
    assert state.startswith(DECODER_STATE), state
    found = next_word(state)
    assert found is not None
    return found


def room_query(c: Class) -> dict[str, str]:
    return dict(parse_qsl(question(c).query))


def show(c: Class, **fields: str) -> None:
    shown = c.teacher.post(f"/class/{c.code}/decoder", data=fields)
    assert shown.status_code == 303, shown.text
    assert shown.headers["location"] == f"/class/{c.code}/decoder"


def typed(page: str) -> str:
    """The text in the page's text box."""
    return html.unescape(re.search(r'<textarea id="text"[^>]*>([^<]*)</textarea>', page)[1])


def temperature(page: str) -> str:
    return re.search(r'<input type="range" id="temperature"[^>]*value="([^"]*)"', page)[1]


def guess(student: TestClient, c: Class, word: str, **fields: str) -> httpx.Response:
    return student.post(f"/class/{c.code}/decoder/guess", data={"guess": word, **fields}, headers=HTMX)


def guesses_panel(c: Class) -> str:
    r = c.teacher.post(f"/class/{c.code}/decoder/guesses", headers=HTMX)
    assert r.status_code == 200, r.text
    return r.text


def counted(panel: str) -> list[tuple[str, int, str]]:
    """(word, count, mark) for each row of the class's guesses, in the page's order."""
    rows = re.findall(r'<span class="guess-word">([^<]*)</span>.*?<span class="guess-count">(\d+)</span>'
                      r'<span class="guess-mark">([^<]*)</span>', panel)
    return [(html.unescape(w), int(n), html.unescape(m)) for w, n, m in rows]


# --- the teacher shows the page, the students follow -----------------------------------------------------


def test_the_teacher_shows_the_language_model_and_a_student_sees_text_head_and_temperature(lesson: Class) -> None:
    student = lesson.student()
    show(lesson, text=TEXT, layer="3", head="5", temperature="0.5")
    assert room_query(lesson) == {"text": TEXT, "layer": "3", "head": "5", "temperature": "0.5"}
    page = student.get(f"/class/{lesson.code}")
    assert page.status_code == 200
    assert "Next word: a real language model</h1>" in page.text
    assert typed(page.text) == TEXT and temperature(page.text) == "0.5"
    assert "<strong>L3 H5</strong>: layer 3, head 5" in page.text
    assert 'data-role="student"' in page.text
    assert f'data-workspace="/class/{lesson.code}/workspace?page=decoder"' in page.text
    assert f'<form id="decoder-form" method="get" action="/class/{lesson.code}/decoder"' in page.text
    work = student.get(f"/class/{lesson.code}/workspace?page=decoder", headers=HTMX)
    assert work.status_code == 200
    assert work.text.lstrip().startswith('<div id="decoder-work"')
    assert typed(work.text) == TEXT and 'hx-swap-oob="true">' in work.text  # the text box, out of band
    assert work.headers["HX-Replace-Url"] == f"/class/{lesson.code}"


def test_each_change_of_the_teacher_reaches_the_room_and_the_students(lesson: Class) -> None:
    student = lesson.student()
    show(lesson, text=TEXT)
    before = lesson.room().version
    typed_in = lesson.teacher.post(f"/class/{lesson.code}/decoder", data={"text": OTHER}, headers=HTMX)
    assert typed_in.status_code == 200
    assert typed_in.text.lstrip().startswith('<div id="decoder-work"')
    assert typed_in.headers["HX-Push-Url"] == f"/class/{lesson.code}/decoder"
    assert lesson.room().version == before + 1
    # The slider asks for the candidates alone; the room takes the temperature.
    slid = lesson.teacher.post(f"/class/{lesson.code}/decoder", data={"text": OTHER, "temperature": "2"},
                               headers=CANDIDATES)
    assert slid.status_code == 200 and 'id="cand-bars" hx-swap-oob="true"' in slid.text
    assert 'id="decoder-work"' not in slid.text
    # A head's map posts nothing but its link's query: the teacher's links post, and say so.
    link = urlencode({"text": OTHER, "temperature": "2", "layer": "7", "head": "2"})
    picked = lesson.teacher.post(f"/class/{lesson.code}/decoder?{link}", headers=HTMX)
    assert picked.status_code == 200 and "<strong>L7 H2</strong>" in picked.text
    assert f'hx-post="/class/{lesson.code}/decoder?text=' in picked.text and 'hx-params="none"' in picked.text
    assert room_query(lesson) == {"text": OTHER, "layer": "7", "head": "2", "temperature": "2"}
    work = student.get(f"/class/{lesson.code}/workspace?page=decoder", headers=HTMX)
    assert typed(work.text) == OTHER and temperature(work.text) == "2" and "<strong>L7 H2</strong>" in work.text
    # "Write 4 tokens" writes on, and the room keeps the longer text.
    wrote = lesson.teacher.post(f"/class/{lesson.code}/decoder", data={"text": TEXT, "generate": "4"}, headers=HTMX)
    assert wrote.status_code == 200
    longer = room_query(lesson)["text"]
    assert longer.startswith(TEXT + " Paris") and "generate" not in room_query(lesson)


def test_heads_the_teacher_switches_off_reach_the_students_every_one(lesson: Class) -> None:
    student = lesson.student()
    show(lesson, text=TEXT)
    ticked = [("text", TEXT), ("off", "1.1"), ("off", "2.3"), ("off_layer", "5")]  # the form's repeated fields
    r = lesson.teacher.post(f"/class/{lesson.code}/decoder", content=urlencode(ticked), headers={
        **HTMX, "Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 200, r.text
    assert sorted(question(lesson).pairs()) == sorted(ticked)
    work = student.get(f"/class/{lesson.code}/workspace?page=decoder", headers=HTMX).text
    assert "With 11 heads switched off" in work  # two ticked, and the nine of layer 5
    assert re.search(r'<a href="[^"]*#candidates" hx-post="[^"]*" hx-params="none"', r.text)  # the shortcuts post


def test_the_teachers_page_is_the_rooms_state(lesson: Class) -> None:
    show(lesson, text=TEXT, ask="on")
    teach = lesson.teacher.get(f"/class/{lesson.code}/teach")
    assert teach.status_code == 303 and teach.headers["location"] == f"/class/{lesson.code}/decoder"
    elsewhere = lesson.teacher.get(f"/class/{lesson.code}/model")
    assert elsewhere.status_code == 303 and elsewhere.headers["location"] == f"/class/{lesson.code}/decoder"
    page = lesson.teacher.get(f"/class/{lesson.code}/decoder?text=ignored")
    assert page.status_code == 200
    assert typed(page.text) == TEXT  # a GET never changes a class: the room's state, not the address's
    assert f'<form id="decoder-form" method="post" action="/class/{lesson.code}/decoder"' in page.text
    assert 'id="candidates"' in page.text and 'id="class-results"' in page.text  # the teacher sees both
    assert "Back to a scenario" in page.text and "Show the real model" in page.text
    assert "Show the language model" not in page.text
    assert re.search(r'<input type="checkbox" name="ask" value="on" checked> Ask the class first', page.text)
    assert f'data-results="/class/{lesson.code}/decoder/guesses"' in page.text
    assert 'id="guess-form"' not in page.text  # the students' form only


def test_the_toy_and_model_pages_offer_the_language_model(lesson: Class) -> None:
    toy = lesson.teacher.get(f"/class/{lesson.code}/teach")
    assert toy.status_code == 200
    assert f'<form class="class-switch" method="post" action="/class/{lesson.code}/decoder">' in toy.text
    assert "Show the language model" in toy.text and "Show the real model" in toy.text
    assert lesson.teacher.post(f"/class/{lesson.code}/model", data={"text": "Cats sleep."}).status_code == 303
    model = lesson.teacher.get(f"/class/{lesson.code}/model")
    assert "Show the language model" in model.text and "Show the real model" not in model.text


@pytest.mark.parametrize(("fields", "named"), [
    ({"text": ""}, "text"),
    ({"text": "x" * 1001}, "text"),
    ({"text": "bell \x07 here"}, "text"),
    ({"text": "ü" * 200}, "text"),  # 200 tokens, over the 128 the model reads
    ({"text": TEXT, "layer": "31", "head": "1"}, "layer"),
    ({"text": TEXT, "layer": "1", "head": "x"}, "head"),
    ({"text": TEXT, "temperature": "0"}, "temperature"),
    ({"text": TEXT, "temperature": "nan"}, "temperature"),
    ({"text": TEXT, "top_p": "1.5"}, "top_p"),
    ({"text": TEXT, "generate": "99"}, "generate"),
    ({"text": TEXT, "matrix": "nothing"}, "matrix"),
])
def test_a_bad_field_is_refused_naming_it_and_never_stored(lesson: Class, fields: dict, named: str) -> None:
    show(lesson, text="Kept.", ask="on")
    state, version = lesson.room().state, lesson.room().version
    refused = lesson.teacher.post(f"/class/{lesson.code}/decoder", data=fields, headers=HTMX)
    assert refused.status_code == 422
    assert f'data-field="{named}"' in refused.text
    assert refused.headers["HX-Reswap"] == "none"
    page = lesson.teacher.post(f"/class/{lesson.code}/decoder", data=fields)  # without JavaScript: the page again
    assert page.status_code == 422 and f'data-field="{named}"' in page.text
    assert lesson.room().version == version and lesson.room().state == state


def test_a_state_over_the_class_budget_is_refused_naming_its_field() -> None:
    c = Class(create_app(Settings(class_max_state_bytes=1024)))
    state = c.room().state
    long = "=" * 900  # 15 tokens, 2,705 bytes in a URL
    refused = c.teacher.post(f"/class/{c.code}/decoder", data={"text": long}, headers=HTMX)
    assert refused.status_code == 422, refused.text
    assert 'data-field="text"' in refused.text and "over its 1,024" in refused.text
    assert c.room().state == state


def test_a_student_cannot_change_the_room_and_explores_on_their_own(lesson: Class) -> None:
    student = lesson.student()
    show(lesson, text=TEXT, ask="on")
    state, version = lesson.room().state, lesson.room().version
    stranger = TestClient(lesson.app, follow_redirects=False)
    for who in (student, stranger):
        for path, data in (("decoder", {"text": "Students rule."}), ("decoder/question", {"reveal": "1"}),
                           ("decoder/question", {"ask": ""})):
            refused = who.post(f"/class/{lesson.code}/{path}", data=data)
            assert refused.status_code == 403 and "does not open a class" in refused.text
        assert who.post(f"/class/{lesson.code}/decoder/guesses").status_code == 403
    forged = TestClient(lesson.app, follow_redirects=False, cookies={f"attention_teacher_{lesson.code}": "x" * 43})
    assert forged.post(f"/class/{lesson.code}/decoder", data={"text": "Forged."}).status_code == 403
    # A text of their own: the page's GETs, their candidates shown even while the class is asked first.
    own = student.get(f"/class/{lesson.code}/decoder", params={"text": OTHER})
    assert own.status_code == 200 and typed(own.text) == OTHER
    assert "class-panel student exploring" in own.text and 'id="candidates"' in own.text
    assert 'id="class-guess"' not in own.text
    slid = student.get(f"/class/{lesson.code}/decoder", params={"text": OTHER, "temperature": "3"},
                       headers={**CANDIDATES, "HX-Trigger-Name": "temperature"})
    assert slid.status_code == 200 and slid.headers["HX-Replace-Url"].startswith(f"/class/{lesson.code}/decoder?")
    assert lesson.room().state == state and lesson.room().version == version
    back = student.get(f"/class/{lesson.code}/workspace?page=decoder", headers=HTMX)
    assert back.status_code == 200 and typed(back.text) == TEXT
    bare = student.get(f"/class/{lesson.code}/decoder")  # without a text of their own: the class's page
    assert bare.status_code == 303 and bare.headers["location"] == f"/class/{lesson.code}"


# --- the class predicts the next word ----------------------------------------------------------------------


def test_asked_first_students_see_the_guess_form_not_the_candidates_and_never_both(lesson: Class) -> None:
    student = lesson.student()
    show(lesson, text=TEXT, ask="on")
    page = student.get(f"/class/{lesson.code}").text
    assert 'id="candidates"' not in page and "Paris" not in page
    assert 'id="class-guess"' in page and '<label for="guess">Your guess for the next word</label>' in page
    assert re.search(r'<input type="text" id="guess" name="guess" form="guess-form" maxlength="40"', page)
    assert f'<input type="hidden" name="about" value="{guess_ref(TEXT)}" form="guess-form">' in page
    assert f'<form id="guess-form" method="post" action="/class/{lesson.code}/decoder/guess"' in page
    assert 'id="class-results"' not in page  # the class's guesses: the teacher's until revealed
    teacher_says = lesson.teacher.get(f"/class/{lesson.code}/decoder").text
    assert "The class is asked first." in teacher_says and "no candidates until you reveal them" in teacher_says
    # Not asked first: the candidates at once, never beside a guess box, and both sides say so.
    assert lesson.teacher.post(f"/class/{lesson.code}/decoder/question", data={"ask": ""}).status_code == 303
    assert question(lesson).ask is False
    page = student.get(f"/class/{lesson.code}").text
    assert 'id="candidates"' in page and "␣Paris" in page and 'id="class-guess"' not in page
    assert "The teacher shows the model's candidates at once: no guessing this time." in page
    teacher_says = lesson.teacher.get(f"/class/{lesson.code}/decoder").text
    assert "The class is not asked." in teacher_says and "with no guess box" in teacher_says


def test_guesses_are_counted_normalised_and_matched_with_the_candidates(lesson: Class) -> None:
    show(lesson, text=TEXT, ask="on")
    students = [lesson.student() for _ in range(5)]
    for student, word in zip(students, (" Paris", "paris ", "Lyon", "PARIS", "the"), strict=True):
        sent = guess(student, lesson, word, about=guess_ref(TEXT))
        assert sent.status_code == 200 and 'class="quiz-feedback sent"' in sent.text
        assert f"your guess “{word.strip()}”" in html.unescape(sent.text)
    changed = guess(students[4], lesson, "Marseille")  # a new guess replaces the student's own
    assert changed.status_code == 200 and "The class has sent 5 so far" in changed.text
    panel = guesses_panel(lesson)
    assert "5 of 5 students guessed; they see the model's candidates once you reveal them." in panel
    rows = counted(panel)  # " Paris", "paris ", "PARIS": one answer, spelled as the model does; most common first
    assert rows == [("Paris", 3, "✓ the model's no. 1"), ("Lyon", 1, ""), ("Marseille", 1, "")]
    # The marks are the model's own: each against the candidates' decoded text, stripped of its space.
    model = load_decoder_files()
    bars = candidates_context(model, read_decoder_page(model, [("text", TEXT)]))["bars"]
    expected = tally([" Paris", "paris ", "Lyon", "PARIS", "Marseille"], model, bars)
    assert [(t.word, t.count, t.rank) for t in expected] == [(w, n, int(m.rsplit(" ", 1)[1]) if m else 0)
                                                              for w, n, m in rows]
    assert "Reveal to the class" in panel and 'form="class-question" name="reveal" value="1"' in panel


def test_the_reveal_shows_the_students_the_guesses_and_the_candidates(lesson: Class) -> None:
    show(lesson, text=TEXT, ask="on")
    ann, bob, carl = lesson.student(), lesson.student(), lesson.student()
    for student, word in ((ann, "Paris"), (bob, "London"), (carl, "banana")):
        assert guess(student, lesson, word).status_code == 200
    before = lesson.room().version
    revealed = lesson.teacher.post(f"/class/{lesson.code}/decoder/question", data={"reveal": "1"}, headers=HTMX)
    assert revealed.status_code == 200 and "Revealed to the class." in revealed.text
    assert lesson.room().version == before + 1 and question(lesson).revealed and question(lesson).ask
    for student in (ann, bob):
        work = student.get(f"/class/{lesson.code}/workspace?page=decoder", headers=HTMX).text
        assert 'id="candidates"' in work and "␣Paris" in work and "77.3%" in work  # the probabilities
        assert 'id="class-results"' in work and 'id="class-guess"' not in work
        assert counted(work) == [("banana", 1, ""), ("London", 1, "✓ the model's no. 3"),
                                 ("Paris", 1, "✓ the model's no. 1")]
        assert "2 of 3 guesses are among the model's 10 likeliest tokens" in work
        assert "Reveal to the class" not in work
    late = guess(ann, lesson, "Rome")
    assert late.status_code == 422 and "revealed" in late.text
    # The teacher's next text asks again, unrevealed, with no guesses yet; back to the first, its guesses are kept.
    show(lesson, text=OTHER)
    assert question(lesson).ask and not question(lesson).revealed
    assert "No guesses yet" in guesses_panel(lesson)
    assert 'id="candidates"' not in ann.get(f"/class/{lesson.code}").text
    show(lesson, text=TEXT)
    assert [n for _, n, _ in counted(guesses_panel(lesson))] == [1, 1, 1]


@pytest.mark.parametrize(("word", "why"), [
    ("", "type the word"),
    ("   ", "type the word"),
    ("x" * 41, "at most 40 characters"),
    ("Par\x07is", "control character U+0007"),
    ("Pa\u200bris", "invisible character U+200B"),
])
def test_a_bad_guess_is_a_422_naming_its_field_and_nothing_is_kept(lesson: Class, word: str, why: str) -> None:
    show(lesson, text=TEXT, ask="on")
    student = lesson.student()
    refused = guess(student, lesson, word)
    assert refused.status_code == 422
    assert 'data-field="guess"' in refused.text and refused.text.count("guess: ") == 1 and why in refused.text
    page = student.post(f"/class/{lesson.code}/decoder/guess", data={"guess": word})  # without JavaScript: a page
    assert page.status_code == 422 and "Back to the class" in page.text
    assert "No guesses yet" in guesses_panel(lesson)


def test_a_guess_needs_the_rooms_text_a_student_and_the_language_model(lesson: Class) -> None:
    student = lesson.student()
    assert guess(student, lesson, "Paris").status_code == 422  # the class is on a toy scenario
    show(lesson, text=TEXT)
    stale = guess(student, lesson, "Paris", about=guess_ref(OTHER))  # sent for a text the teacher has left
    assert stale.status_code == 422 and "changed the text" in stale.text
    stranger = guess(TestClient(lesson.app, follow_redirects=False), lesson, "Paris")
    assert stranger.status_code == 403
    assert "No guesses yet" in guesses_panel(lesson)
    assert student.post(f"/class/{lesson.code}/predict", data={"guess": "0.5"}, headers=HTMX).status_code == 422


def test_guesses_per_student_are_limited() -> None:
    c = Class(create_app(Settings(class_predictions_per_minute=3)))
    show(c, text=TEXT)
    student = c.student()
    assert [guess(student, c, f"word{i}").status_code for i in range(4)] == [200, 200, 200, 429]


def test_the_class_follows_the_teacher_back_to_a_scenario(lesson: Class) -> None:
    student = lesson.student()
    show(lesson, text=TEXT)
    moved = student.get(f"/class/{lesson.code}/workspace?page=model", headers=HTMX)  # a page on another kind
    assert moved.status_code == 204 and moved.headers["HX-Redirect"] == f"/class/{lesson.code}"
    back = lesson.teacher.post(f"/class/{lesson.code}/teach", data={"preset": "three-token"})
    assert back.status_code == 303 and real_page(lesson.room().state) is None
    stale = student.get(f"/class/{lesson.code}/workspace?page=decoder", headers=HTMX)
    assert stale.status_code == 204 and stale.headers["HX-Redirect"] == f"/class/{lesson.code}"
    assert lesson.teacher.get(f"/class/{lesson.code}/decoder").headers["location"] == f"/class/{lesson.code}/teach"
    assert lesson.teacher.post(f"/class/{lesson.code}/decoder/guesses").status_code == 204
    page = student.get(f"/class/{lesson.code}")
    assert page.status_code == 200 and "Attention, step by step</h1>" in page.text


# --- a following page moved to "Next word" by its stream's event ---------------------------------------------


@contextlib.asynccontextmanager
async def asgi_events(app, path: str, lang: str = "") -> AsyncIterator[asyncio.Queue[bytes]]:  # noqa: ANN001
    """A page's event stream, straight from the app on this event loop (``lang``: the page's language cookie):
    each event's bytes, in a queue."""
    events: asyncio.Queue[bytes] = asyncio.Queue()
    gone = asyncio.Event()
    received = b""
    url, _, query = path.partition("?")
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": url, "raw_path": url.encode(), "query_string": query.encode(), "root_path": "",
             "headers": [(b"host", b"testserver"), (b"accept-encoding", b"gzip, br, zstd"),
                         *([(b"cookie", f"lang={lang}".encode())] if lang else [])],
             "client": ("127.0.0.1", 40000), "server": ("testserver", 80)}

    asked = False

    async def receive() -> dict:
        nonlocal asked
        if not asked:  # the request's (empty) body, then nothing until the page goes
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        nonlocal received
        if message["type"] == "http.response.body":
            received += message.get("body", b"")
            while b"\n\n" in received:
                event, received = received.split(b"\n\n", 1)
                events.put_nowait(event)

    task = asyncio.create_task(app(scope, receive, send))
    try:
        yield events
    finally:
        gone.set()
        await asyncio.wait_for(task, 10)


async def state_data(events: asyncio.Queue[bytes]) -> bytes:
    """The data of the stream's next "state" event."""
    while True:
        event = (await asyncio.wait_for(events.get(), 60)).decode()
        if "event: state" in event:
            return next(line for line in event.split("\n") if line.startswith("data: "))[6:].encode()


def inflated(packed: bytes) -> str:
    return gzip.decompress(base64.b64decode(packed)).decode()


@pytest.mark.anyio
async def test_a_class_moved_to_next_word_sends_its_page_in_the_event_made_once(
        anyio_backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """20 students' streams on a toy scenario's page: after the teacher's move to "Next word" each gets one event
    carrying the class's whole page for it, marked as a page, the same bytes (one page made and rendered once),
    the page a student's GET of /class/{code} gets; 3 more in German get it in German (once more); and back to a
    scenario, the toy scenario's page."""
    made, rendered_pages = [], []
    page_of, work = classroom.following_page, class_decoder.class_decoder_work

    async def counted_page(request, room):  # noqa: ANN001, ANN202
        made.append(room.version)
        return await page_of(request, room)

    def counted_work(page, read, lesson, url, template, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if template == "decoder.html":
            rendered_pages.append(url)
        return work(page, read, lesson, url, template, *args, **kwargs)

    monkeypatch.setattr(classroom, "following_page", counted_page)
    monkeypatch.setattr(class_decoder, "class_decoder_work", counted_work)
    app = create_app(Settings())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver", timeout=60) as teacher, \
            httpx.AsyncClient(transport=transport, base_url="http://testserver", timeout=60) as student, \
            contextlib.AsyncExitStack() as stack:
        lesson = await start_class(teacher)
        assert (await student.get(f"/class/{lesson.code}", headers=BROWSER)).status_code == 200
        made.clear()
        toy = f"/class/{lesson.code}/events?workspace=&v=1"
        streams = [await stack.enter_async_context(asgi_events(app, toy)) for _ in range(20)]
        german = [await stack.enter_async_context(asgi_events(app, toy, "de")) for _ in range(3)]
        unknown = await stack.enter_async_context(asgi_events(app, f"/class/{lesson.code}/events?workspace=x&v=1"))
        assert [await state_data(s) for s in [*streams, *german, unknown]] == [b"1"] * 24  # shown already
        shown = await teacher.post(f"/class/{lesson.code}/decoder", data={"text": TEXT, "ask": "on"}, headers=BROWSER)
        assert shown.status_code == 303, shown.text[:300]
        carried = {await state_data(s) for s in streams}
        assert len(carried) == 1  # the same bytes to every stream
        version, mark, packed = carried.pop().split(b" ")
        assert (version, mark) == (b"2", b"page")  # a page, never swapped in as a workspace
        page = inflated(packed)
        assert page.startswith("<!doctype html>") and "<h1>Next word: a real language model</h1>" in page
        assert typed(page) == TEXT and 'id="class-guess"' in page  # the class is asked first
        assert f'data-events="/class/{lesson.code}/events?workspace=decoder"' in page
        carried_de = {await state_data(s) for s in german}
        assert len(carried_de) == 1
        version, mark, packed = carried_de.pop().split(b" ")
        assert (version, mark) == (b"2", b"page")
        page_de = inflated(packed)
        assert '<html lang="de"' in page_de and "<h1>Nächstes Wort: ein echtes Sprachmodell</h1>" in page_de
        assert made == [2, 2] and rendered_pages == [f"/class/{lesson.code}/decoder"] * 2  # once per language
        assert await state_data(unknown) == b"2"  # no such kind of page: the version alone, nothing made for it
        again = await student.get(f"/class/{lesson.code}", headers=BROWSER)
        assert again.status_code == 200 and again.text == page  # a reload's page, without the reload
        assert len(rendered_pages) == 2

        # Back to a scenario: a page that shows "Next word" gets the toy scenario's page.
        async with asgi_events(app, f"/class/{lesson.code}/events?workspace=decoder&v=2") as events:
            assert await state_data(events) == b"2"
            back = await teacher.post(f"/class/{lesson.code}/teach", data={"preset": "three-token"},
                                      headers=BROWSER)
            assert back.status_code == 303
            version, mark, packed = (await state_data(events)).split(b" ")
            assert (version, mark) == (b"3", b"page")
            page = inflated(packed)
            assert "Attention, step by step</h1>" in page and 'id="stage-x"' in page
            assert f'data-events="/class/{lesson.code}/events?workspace="' in page
            assert page == (await student.get(f"/class/{lesson.code}", headers=BROWSER)).text


# --- the round trip through Redis, over two real servers ----------------------------------------------------


@pytest.mark.anyio
@pytest.mark.slow
async def test_two_servers_sharing_redis_run_the_next_word(redis_db: RedisServer, anyio_backend: str) -> None:
    """The teacher on one server, a student on the other: the page's state, the guess and the reveal go
    through Redis and reach the other server's event stream."""
    with replica(redis_db.url()) as (a, _), replica(redis_db.url()) as (b, _):
        # The language model's first pages on a just-started server wait for its weights.
        async with httpx.AsyncClient(base_url=a, timeout=60) as teacher, \
                httpx.AsyncClient(base_url=b, timeout=60) as student:
            lesson = await start_class(teacher)
            assert (await student.get(f"/class/{lesson.code}", headers=BROWSER)).status_code == 200
            async with event_stream(student, lesson.code) as events:
                assert await next_event(events) == ("state", 1)
                shown = {"text": TEXT, "layer": "2", "head": "4", "temperature": "0.7", "ask": "on"}
                r = await teacher.post(f"/class/{lesson.code}/decoder", data=shown, headers=BROWSER)
                assert r.status_code == 303, r.text[:300]
                assert await next_event(events, 5.0) == ("state", 2)
                held = redis_db.client().hget(f"attention:room:{lesson.code}", "state")
                held = held.decode() if isinstance(held, bytes) else held
                assert held == DECODER_STATE + urlencode({"text": TEXT, "layer": 2, "head": 4,
                                                          "temperature": 0.7, "ask": 1})
                r = await student.get(f"/class/{lesson.code}/workspace?page=decoder", headers=HTMX)
                assert r.status_code == 200 and typed(r.text) == TEXT and "<strong>L2 H4</strong>" in r.text
                assert 'data-query="text=The+capital+of+France+is&amp;layer=2&amp;head=4&amp;temperature=0.7"' in r.text
                assert 'id="candidates"' not in r.text and 'id="class-guess"' in r.text  # the class is asked first
                r = await student.post(f"/class/{lesson.code}/decoder/guess",
                                       data={"guess": " paris", "about": guess_ref(TEXT)}, headers=HTMX)
                assert r.status_code == 200, r.text
                assert await next_event(events, 5.0) == ("predictions", 2)
                words = redis_db.client().hgetall(f"attention:room:{lesson.code}:guesses")
                assert [v.decode() if isinstance(v, bytes) else v for v in words.values()] == ["paris"]
                r = await teacher.post(f"/class/{lesson.code}/decoder/guesses", headers=HTMX)
                assert counted(r.text) == [("paris", 1, "✓ the model's no. 1")]
                bad = await teacher.post(f"/class/{lesson.code}/decoder", data={"text": TEXT, "head": "10",
                                                                               "layer": "1"}, headers=HTMX)
                assert bad.status_code == 422 and 'data-field="head"' in bad.text
                r = await teacher.post(f"/class/{lesson.code}/decoder/question", data={"reveal": "1"}, headers=HTMX)
                assert r.status_code == 200 and "Revealed to the class." in r.text
                assert await next_event(events, 5.0) == ("state", 3)
                r = await student.get(f"/class/{lesson.code}/workspace?page=decoder", headers=HTMX)
                assert 'id="candidates"' in r.text and temperature(r.text) == "0.7"
                assert counted(r.text) == [("paris", 1, "✓ the model's no. 1")]
