"""Who may open a class's room: codes naming no class are counted per browser and per address on every
class route (a browser or an address over its limit gets 429, even for a right code), and the room or the
teacher a route's path names, as FastAPI dependencies; and the short answers a class's routes give (a notice,
the feedback to a prediction or a guess)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response
from markupsafe import Markup

from app.classroom.store import Room, normal_code
from app.i18n import N_, local_number
from app.i18n import gettext as _
from app.web.class_hooks import STUDENT_COOKIE, client_address, client_id, conf, rooms, set_client, teacher_key
from app.web.respond import page_response


def notice(request: Request, status: int, title: str, message: str, code: str = "", back: str = "",
            extra: Markup | None = None) -> HTMLResponse:
    """A short page (or, for htmx, the message alone) for a class that cannot be shown."""
    headers = {"Retry-After": "60"} if status in (429, 503) else None
    return page_response(request, "class_notice.html", {"title": title, "message": message, "code": code, "back": back,
                                                "extra": extra or ""}, status=status, headers=headers)


RECONNECT_SECONDS = 5  # a class's page answered while the store does not answer loads itself again after this


def store_unreachable(request: Request) -> Response:
    """The 503 of a class's route when its store does not answer (Redis down or restarting) or took a change too
    late. A browser's page load gets a page in its language saying the class is reconnecting, which loads itself
    again (a GET: ``Refresh``); htmx, an event stream or a script gets the sentence as text."""
    headers = {"Retry-After": str(RECONNECT_SECONDS), "Cache-Control": "no-store"}
    if request.headers.get("HX-Request") == "true" or "text/html" not in request.headers.get("accept", ""):
        return PlainTextResponse(_("The class's storage does not answer: try again in a moment. A change you made "
                                   "just now did not reach the class."), status_code=503, headers=headers)
    reloads = request.method in ("GET", "HEAD")
    if reloads:
        headers["Refresh"] = str(RECONNECT_SECONDS)
    return page_response(request, "class_reconnecting.html", {
        "title": N_("The class is reconnecting"),
        "message": N_("The class's storage does not answer for a moment, as when it restarts; the class and its "
                      "predictions are kept."),
        "reloads": reloads, "seconds": local_number(str(RECONNECT_SECONDS)),
    }, status=503, headers=headers)


def feedback(request: Request, status: int, message: str, sent: bool = False, back: str | None = None, *,
             slot: str = "quiz-feedback", title: str = N_("Your prediction"), field: str = "") -> HTMLResponse:
    """The answer to a student's prediction or guess: for htmx its message alone, in the page's ``slot`` (with
    the ``field`` it names, if any); without JavaScript a page, with the way back to the class. ``title`` is
    English, marked with N_: translated here."""
    if request.headers.get("HX-Request") != "true":
        code = normal_code(request.path_params.get("code", ""))
        back = back if back is not None else (request.url_for("class_page", code=code).path if code else "")
        return page_response(request, "class_notice.html", {"title": _(title) if sent else _("Not sent"),
                                                            "message": message, "back": back}, status=status)
    return page_response(request, "partials/class_feedback.html",
                         {"message": message, "sent": sent, "slot": slot, "field": field}, status=status)


# --- codes naming no class: counted per browser and per address, on every class route ------------


def guessing_network(address: str) -> str:
    """Whose guesses count together: an IPv4 address, or an IPv6 address's /64 (one home or school
    network holds a whole /64, and would otherwise have 2⁶⁴ budgets)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        return str(ip.ipv4_mapped) if ip.ipv4_mapped else str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def failure_buckets(request: Request) -> list[tuple[str, int]]:
    """A browser's own small budget (its cookie), and its network's large one (a school behind one NAT
    shares it): one student's typos cost only that student, and cookies made anew gain a guesser nothing."""
    c = conf(request)
    found = [(f"fail-address:{guessing_network(client_address(request))}", c.class_failures_per_address)]
    if client_id(request):
        found.append((f"fail-client:{client_id(request)}", c.class_failures_per_client))
    return found


async def too_many_failures(request: Request) -> bool:
    """A browser or an address that named too many codes without a class this minute gets 429, even
    for a right one: a guess that hits cannot be told from one that misses."""
    store = rooms(request)
    for bucket, limit in failure_buckets(request):
        if not await store.allow(bucket, limit, peek=True):
            return True
    return False


async def count_failure(request: Request) -> bool:
    """Count a code naming no class (a browser without an id gets one); False when that was one too many."""
    client_id(request, new=True)
    store = rooms(request)
    allowed = True
    for bucket, limit in failure_buckets(request):
        allowed = await store.allow(bucket, limit) and allowed
    return allowed


async def failed_join(request: Request, code: str) -> HTMLResponse:
    """A code naming no class: counted, then 404 (or 429 when that was one too many)."""
    if not await count_failure(request):
        response = too_many(request)
        set_client(request, response)
        return response
    return await notice_failed(request, code)


def too_many(request: Request) -> HTMLResponse:
    c = conf(request)
    return notice(request, 429, _("Too many tries"),
                  _("More than {per_browser} codes without a class this minute from this browser (or {per_network} "
                    "from this network): wait a minute, then type the code again.").format(
                      per_browser=c.class_failures_per_client, per_network=c.class_failures_per_address))


async def open_room(request: Request, code: str) -> Room | int:
    """The room a class route names, or why not: 429 over the failures' limit, 404 for no room (a
    failure counted). A student or the teacher of the room, known by their cookie, is never refused."""
    store = rooms(request)
    normal = normal_code(code)
    room = await store.get(normal) if normal else None
    if room is not None:
        student = request.cookies.get(STUDENT_COOKIE, "")
        if student and await store.is_student(normal, student):
            return room
        key = teacher_key(request, normal)
        if key and await store.is_teacher(normal, key):
            return room
    if await too_many_failures(request):
        return 429
    if room is None:
        return 404 if await count_failure(request) else 429
    return room


def not_teacher(request: Request) -> HTMLResponse:
    return notice(request, 403, _("This teacher link does not open a class"),
                  _("The class has ended (rooms close after {minutes} minutes unused), or the link is not whole. "
                    "Start a new class from the page.").format(minutes=conf(request).class_idle_minutes))


async def notice_failed(request: Request, code: str) -> HTMLResponse:
    """The 404 for a code naming no class (the failure already counted)."""
    response = notice(request, 404, _("No class with this code"),
                      _("Check the code on the teacher's screen and type it again (letters and digits, as "
                        "KQ7M-4PXR)."),
                      code)
    set_client(request, response)
    return response


OpenRoom = Annotated[Room | int, Depends(open_room)]  # the room the path names, or 404 / 429


@dataclass(frozen=True)
class Teacher:
    code: str  # the room's, normalised
    key: str


async def teacher_of(request: Request, code: str) -> Teacher | None:
    """The teacher of the room the path names, known by the key in their cookie; None for anyone else."""
    normal = normal_code(code)
    key = teacher_key(request, normal)
    if not normal or not await rooms(request).is_teacher(normal, key):
        return None
    return Teacher(normal, key)


TeacherOf = Annotated[Teacher | None, Depends(teacher_of)]
