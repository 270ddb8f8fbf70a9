""""Which word made it?" on the language model's page in a live class (app.web.class_decoder,
app.classroom.which_word), with the rooms in the process: the teacher asks which word of the text made the model say
its answer; a following student's page has a button per token and the model's candidates, but not what explains the
answer; the students' taps are counted per token on the teacher's panel as they come; a bad tap is a 422 naming
what is wrong; the reveal shows everyone the taps beside gradient × input's shares, the same as POST
/api/decoder/saliency's, and says whether the class's most tapped token is the one gradient × input ranks first;
a tap after the reveal is refused."""

from __future__ import annotations

import html
import re

import httpx
import pytest
from fastapi.testclient import TestClient

from app.classroom.next_word import NextWord, guess_ref, next_word, word_ref
from app.config import Settings
from app.main import create_app
from tests.web.test_class_decoder import OTHER, TEXT, question, show
from tests.web.test_classroom import HTMX, Class

TOKENS = ["The", "␣capital", "␣of", "␣France", "␣is"]  # TEXT's tokens, as the page writes them


@pytest.fixture
def lesson() -> Class:
    c = Class(create_app(Settings()))
    show(c, text=TEXT, ask="on")
    return c


def ask_which(c: Class, on: str = "on") -> httpx.Response:
    r = c.teacher.post(f"/class/{c.code}/decoder/question", data={"which": on}, headers=HTMX)
    assert r.status_code == 200, r.text
    return r


def tap(student: TestClient, c: Class, place: str, about: str = word_ref(TEXT)) -> httpx.Response:
    return student.post(f"/class/{c.code}/decoder/tap", data={"tap": place, "about": about}, headers=HTMX)


def panel(c: Class) -> str:
    r = c.teacher.post(f"/class/{c.code}/decoder/guesses", headers=HTMX)
    assert r.status_code == 200, r.text
    return r.text


def counts(page: str) -> list[tuple[str, int, str, bool]]:
    """(token, taps, gradient × input's share as written, marked first) for each row of the class's taps."""
    rows = re.findall(r'<tr><th scope="row">([^<]*)</th><td>(\d+)</td><td class="norm-bar">.*?</td>'
                      r'<td class="d-?\d">(★ )?([^<]*)</td></tr>', page)
    return [(html.unescape(t), int(n), s, bool(star)) for t, n, star, s in rows]


def said(page: str) -> str:
    found = re.search(r'<p class="which-verdict">(.*?)</p>', page, re.S)
    assert found, "no sentence about the class's taps"
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", found[1])).split())


def test_the_question_keeps_its_kind_in_the_rooms_state_after_the_pages_fields() -> None:
    asked = NextWord("text=Hi", ask=True, which=True)
    assert asked.state().endswith("text=Hi&ask=1&which=1")
    assert next_word(asked.state()) == asked and asked.asks_which
    assert next_word(NextWord("text=Hi", which=True).state()).asks_which is False  # not asked: nothing to tap
    assert asked.word_ref == word_ref("Hi") != guess_ref("Hi") and asked.answers_ref == asked.word_ref
    assert word_ref("Hi") != word_ref("Hi!") and " " not in word_ref("Hi")


def test_asked_which_word_a_student_sees_a_button_per_token_and_the_candidates_not_the_reasons(
        lesson: Class) -> None:
    student = lesson.student()
    ask_which(lesson)
    q = question(lesson)
    assert q.ask and q.which and not q.revealed and q.text == TEXT
    page = student.get(f"/class/{lesson.code}").text
    assert 'id="class-which"' in page and 'id="candidates"' in page and "␣Paris" in page
    buttons = re.findall(r'<button type="submit" form="guess-form" formaction="/class/\w+/decoder/tap" name="tap" '
                         r'value="(\d+)"\s+hx-post="[^"]+"[^>]*>([^<]*)</button>', page)
    assert buttons == [(str(i), t) for i, t in enumerate(TOKENS, 1)]
    assert f'<input type="hidden" id="which-about" name="about" value="{word_ref(TEXT)}" form="guess-form">' in page
    assert f'<form id="guess-form" method="post" action="/class/{lesson.code}/decoder/guess"' in page
    assert 'id="class-guess"' not in page  # no guess box: the question is another
    for answer in ('id="why"', 'id="saliency"', 'id="rollout"', 'id="class-results"', "which-counts", "★"):
        assert answer not in page, answer
    teacher = lesson.teacher.get(f"/class/{lesson.code}/decoder").text
    assert re.search(r'<input type="checkbox" name="which" value="on" checked> Ask which word made it', teacher)
    assert "The class is asked which word made it." in teacher and 'id="saliency"' in teacher
    # Unticked, the class is asked the next word again: the guess box, no buttons.
    ask_which(lesson, "")
    page = student.get(f"/class/{lesson.code}").text
    assert 'id="class-guess"' in page and 'id="class-which"' not in page and 'id="candidates"' not in page


def test_two_students_tap_and_the_teachers_panel_counts_them_as_they_come(lesson: Class) -> None:
    ann, bob = lesson.student(), lesson.student()
    first = ask_which(lesson).text
    state, version = lesson.room().state, lesson.room().version
    assert "0 of 2 students tapped" in first and said(first) == "No taps yet; gradient × input ranks “␣capital” first."
    for student, place in ((ann, "4"), (bob, "4"), (bob, "2")):  # a student's new tap replaces theirs
        sent = tap(student, lesson, place)
        assert sent.status_code == 200 and 'class="quiz-feedback sent"' in sent.text
        assert f"Sent: “{TOKENS[int(place) - 1]}”" in html.unescape(sent.text)
    assert "The class has sent 2 so far" in html.unescape(sent.text)
    seen = panel(lesson)
    assert "2 of 2 students tapped; they see gradient × input's shares once you reveal them." in html.unescape(seen)
    assert [(t, n) for t, n, _, _ in counts(seen)] == list(zip(TOKENS, [0, 1, 0, 1, 0], strict=True))
    assert said(seen) == ("The class's taps are tied between several tokens; “␣capital”, the one gradient × input "
                          "ranks first, is among them.")
    assert 'form="class-question" name="reveal" value="1"' in seen
    assert (lesson.room().state, lesson.room().version) == (state, version)  # taps never change the room


@pytest.mark.parametrize("place", ["", "0", "6", "two", "-1"])
def test_a_bad_tap_is_a_422_naming_it_and_nothing_is_kept(lesson: Class, place: str) -> None:
    student = lesson.student()
    ask_which(lesson)
    refused = tap(student, lesson, place)
    assert refused.status_code == 422
    assert 'data-field="tap"' in refused.text and "tap: choose one of the 5 pieces of the text" in refused.text
    page = student.post(f"/class/{lesson.code}/decoder/tap", data={"tap": place, "about": word_ref(TEXT)})
    assert page.status_code == 422 and "Back to the class" in page.text  # without JavaScript: a page
    assert [n for _, n, _, _ in counts(panel(lesson))] == [0] * 5


def test_a_tap_needs_the_question_the_rooms_text_and_a_student(lesson: Class) -> None:
    student = lesson.student()
    not_asked = tap(student, lesson, "2")  # asked the next word, not which word
    assert not_asked.status_code == 422 and "not asking which word" in not_asked.text
    ask_which(lesson)
    stale = tap(student, lesson, "2", about=word_ref(OTHER))
    assert stale.status_code == 422 and "changed the text" in stale.text
    guessed = tap(student, lesson, "2", about=guess_ref(TEXT))  # a guess's ref is not a tap's
    assert guessed.status_code == 422 and "changed the text" in guessed.text
    assert tap(TestClient(lesson.app, follow_redirects=False), lesson, "2").status_code == 403
    assert student.post(f"/class/{lesson.code}/decoder/question", data={"which": ""}).status_code == 403
    sent = student.post(f"/class/{lesson.code}/decoder/tap", data={"tap": "2", "about": word_ref(TEXT)})
    assert sent.status_code == 200 and "Sent: “␣capital”" in html.unescape(sent.text)  # without JavaScript
    back = lesson.teacher.post(f"/class/{lesson.code}/teach", data={"preset": "three-token"})
    assert back.status_code == 303
    gone = tap(student, lesson, "2")
    assert gone.status_code == 422 and "not showing the language model" in gone.text


def test_the_reveal_shows_the_taps_beside_the_apis_gradient_x_input_and_refuses_later_taps(lesson: Class) -> None:
    ann, bob, cat = lesson.student(), lesson.student(), lesson.student()
    ask_which(lesson)
    for student, place in ((ann, "4"), (bob, "4"), (cat, "2")):
        assert tap(student, lesson, place).status_code == 200
    revealed = lesson.teacher.post(f"/class/{lesson.code}/decoder/question", data={"reveal": "1"}, headers=HTMX)
    assert revealed.status_code == 200 and "Revealed to the class." in revealed.text
    assert question(lesson).revealed and question(lesson).asks_which
    api = lesson.teacher.post("/api/decoder/saliency", json={"text": TEXT})
    assert api.status_code == 200, api.text
    doc = api.json()
    assert doc["method"] == "gradient_x_input" and doc["target"]["token"] == "ĠParis"
    shares = [s["signed"] for s in doc["scores"]]
    best = max(range(len(shares)), key=shares.__getitem__)
    for student in (ann, cat):
        work = student.get(f"/class/{lesson.code}/workspace?page=decoder", headers=HTMX).text
        rows = counts(work)
        assert [(t, n) for t, n, _, _ in rows] == list(zip(TOKENS, [0, 1, 0, 2, 0], strict=True))
        assert [float(s.replace("−", "-")) for _, _, s, _ in rows] == [round(v, 2) for v in shares]
        assert [first for _, _, _, first in rows] == [i == best for i in range(len(TOKENS))]
        assert "Which word made it say “␣Paris”?" in work
        assert said(work) == ("The class's most tapped token is “␣France”, but gradient × input ranks “␣capital” "
                              "first.")
        assert 'id="class-which"' not in work and 'id="why"' in work and 'id="saliency"' in work
        assert "Reveal to the class" not in work and 'id="class-mode"' not in work  # the teacher's lines
    late = tap(bob, lesson, "2")
    assert late.status_code == 422 and "revealed" in late.text
    # Asked the next word instead, the question starts afresh: unrevealed, the text's guesses its own.
    ask_which(lesson, "")
    assert not question(lesson).revealed and not question(lesson).which
    assert 'id="class-guess"' in ann.get(f"/class/{lesson.code}").text


def test_the_teachers_next_text_asks_which_word_afresh_and_keeps_each_texts_taps(lesson: Class) -> None:
    student = lesson.student()
    ask_which(lesson)
    assert tap(student, lesson, "2").status_code == 200
    show(lesson, text=OTHER)
    assert question(lesson).asks_which and not question(lesson).revealed
    assert said(panel(lesson)).startswith("No taps yet;")
    page = student.get(f"/class/{lesson.code}").text
    assert f'name="about" value="{word_ref(OTHER)}"' in page
    show(lesson, text=TEXT)
    assert said(panel(lesson)) == "The class's most tapped token, “␣capital”, is the one gradient × input ranks first."
