"""A school behind one NAT address against a guesser, with the rooms in memory and in a real Redis.

Mistyped codes count per browser (its ``attention_client`` cookie, set by the first answer it gets) and
per network, the network's budget a school's worth: 30 students who each mistype a code a few times and
then join see no 429; one browser guessing is refused after its own budget; browsers made anew from one
address, guessing hundreds of codes, are refused at the network's; and the code space makes that
budget useless for finding a class.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

from app.classroom.store import CODE_ALPHABET, CODE_LENGTH
from app.config import Settings
from app.main import create_app
from app.state.page import preset_page
from app.state.permalink import state_query
from app.web.class_access import guessing_network
from tests.redis_server import RedisServer

SCHOOL = ("198.51.100.7", 40000)  # every browser of the class behind this one address
SETTINGS = Settings()
PER_CLIENT = SETTINGS.class_failures_per_client
PER_ADDRESS = SETTINGS.class_failures_per_address


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["memory", "redis"])
async def app(request: pytest.FixtureRequest) -> AsyncIterator:  # noqa: ANN201
    if request.param == "memory":
        made = create_app(Settings())
    else:
        redis_db: RedisServer = request.getfixturevalue("redis_db")
        made = create_app(Settings(redis_url=redis_db.url()))
    try:
        yield made
    finally:
        await made.state.rooms.close()


def browser(app, address: tuple[str, int] = SCHOOL) -> httpx.AsyncClient:  # noqa: ANN001
    """A browser of its own (its own cookies) at ``address``."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=address), base_url="http://class.test")


async def start(app) -> str:  # noqa: ANN001
    """A teacher at the school starts a class: its code."""
    sc, view = preset_page("three-token")
    async with browser(app) as teacher:
        r = await teacher.post("/class", data={**dict(state_query(sc, view)), "action": "start_class"})
        assert r.status_code == 303, r.text[:300]
        link = r.headers["location"]
        assert dict(parse_qsl(urlsplit(link).query))["key"]
        return re.fullmatch(rf"/class/([A-Z0-9]{{{CODE_LENGTH}}})/teach\?key=.+", link)[1]


def wrong_codes(code: str, n: int) -> list[str]:
    """``n`` codes that name no class (valid codes all the same: counted as guesses)."""
    rest = "2345679"[: CODE_LENGTH - 2]
    found = [a + b + rest for a in CODE_ALPHABET for b in CODE_ALPHABET if a + b + rest != code]
    assert len(found) >= n
    return found[:n]


pytestmark = [pytest.mark.anyio, pytest.mark.server]


async def test_a_class_of_30_behind_one_nat_mistyping_then_joining_never_sees_a_429(app) -> None:  # noqa: ANN001
    """10 unknown codes from the school's address locked the whole class out for a minute."""
    code = await start(app)
    wrong = iter(wrong_codes(code, 90))
    answers: list[int] = []
    for n in range(30):
        async with browser(app) as student:
            assert not student.cookies.get("attention_client")  # the first answer gives the browser its id
            for _ in range(3):  # three typos each: 90 from one address, 9 times the browser's budget
                answers.append((await student.get("/class", params={"code": next(wrong)})).status_code)
                assert student.cookies.get("attention_client")
            r = await student.get("/class", params={"code": code.lower()[:4] + "-" + code[4:]})
            assert r.status_code == 303, (n, r.status_code)
            page = await student.get(r.headers["location"])
            assert page.status_code == 200 and "Following the teacher" in page.text, (n, page.status_code)
            assert (await student.get(f"/class/{code}/workspace")).status_code == 200
    assert answers == [404] * 90
    assert (await app.state.rooms.get(code)).students == 30


async def test_one_browser_guessing_is_refused_after_its_own_budget(app) -> None:  # noqa: ANN001
    code = await start(app)
    async with browser(app) as guesser:
        answers = [(await guesser.get("/class", params={"code": g})).status_code
                   for g in wrong_codes(code, PER_CLIENT + 2)]
        assert answers == [404] * PER_CLIENT + [429, 429]
        r = await guesser.get("/class", params={"code": code})
        assert r.status_code == 429 and r.headers["Retry-After"] == "60"  # a hit looks like a miss
        assert "this browser" in r.text
    async with browser(app) as classmate:  # the same address: the rest of the class still joins
        assert (await classmate.get("/class", params={"code": code})).status_code == 303
        assert (await classmate.get(f"/class/{code}")).status_code == 200


async def test_new_browsers_from_one_address_are_refused_at_the_networks_budget(app) -> None:  # noqa: ANN001
    """A guesser who drops its cookie (or keeps a new one for each few guesses) gains nothing past the
    address's budget: hundreds of codes, then 429 on every class route, even for a right code."""
    code = await start(app)
    guesses = wrong_codes(code, PER_ADDRESS + 20)
    answers = []
    for start_at in range(0, len(guesses), PER_CLIENT // 2):  # a fresh browser every 5 guesses
        async with browser(app, ("203.0.113.77", 1)) as guesser:
            for g in guesses[start_at:start_at + PER_CLIENT // 2]:
                answers.append((await guesser.get(f"/class/{g}")).status_code)
    assert answers == [404] * PER_ADDRESS + [429] * 20
    async with browser(app, ("203.0.113.77", 1)) as guesser:
        for path in (f"/class/{code}", f"/class/{code}/workspace", f"/class?code={code}"):
            assert (await guesser.get(path)).status_code == 429, path
    async with browser(app) as student:  # the school's address is not the guesser's
        assert (await student.get(f"/class/{code}")).status_code == 200


def test_an_ipv6_network_is_one_guesser() -> None:
    """Each address of an IPv6 /64 would otherwise have a budget of its own."""
    assert guessing_network("2001:db8:7:1::1") == guessing_network("2001:db8:7:1:ffff::9") == "2001:db8:7:1::/64"
    assert guessing_network("2001:db8:7:2::1") != guessing_network("2001:db8:7:1::1")
    assert guessing_network("::ffff:198.51.100.7") == guessing_network("198.51.100.7") == "198.51.100.7"


def test_the_networks_budget_finds_no_class() -> None:
    """docs/security.md's figure: at the address's budget, the expected time to name any one of the
    server's live classes by guessing."""
    codes = len(CODE_ALPHABET) ** CODE_LENGTH
    per_day = PER_ADDRESS * 60 * 24
    years = codes / SETTINGS.class_max_rooms / per_day / 365
    assert codes > 8.5e11 and PER_ADDRESS >= 30 * 3 and years > 25, years
    assert PER_CLIENT <= 10
