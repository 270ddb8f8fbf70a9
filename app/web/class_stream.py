"""A live class's event stream (GET /class/{code}/events): one render per change, the same bytes to every student.

A following student's page asks for the stream with ``?workspace=<page>`` ("" for a toy scenario, "model", "decoder":
the kind of page it shows). Each "state" event it gets then carries the room's workspace for that page, rendered once
per change, language and root path on this worker, gzip-compressed once and base64-encoded into the event's data::

    id: 7
    event: state
    data: 7 H4sIAAAAAAAC/+1d63LbOJb+7afA…

so a class of 300 costs one render, one compression and 300 writes of the same bytes, never 300 requests. The page
inflates it with the browser's DecompressionStream and swaps it in (static/class.js). When the teacher has moved the
class to another kind of page (from a toy scenario to "Next word", and back), the event carries the whole class page
for the new kind instead, the one a following student's GET of /class/{code} gets, marked as a page::

    data: 8 page H4sIAAAAAAAC/+x9a3PbOJbo9/kVKN…

which the page writes over itself as a reload would, without the reload's requests. A page whose script predates the
mark fails to inflate "page" and fetches, as does a browser without a DecompressionStream and an event without a
payload (a workspace or page that could not be made, or one over MAX_CARRIED_BYTES): /class/{code}/workspace, which
sends a page on another kind of page to the class's page. The stream itself is not compressed again
(app.web.compression): its payloads already are, and compressing each stream would cost per student what the payload
saves.

Each stream's mailbox (app.classroom.store.Mailbox) keeps only the latest event of each kind, so a slow student's
stream holds one step at most and skips to the newest; a step that a newer one overtook while its workspace was
being made is not sent. A stream that connects (or reconnects, with ``Last-Event-ID``) says the room's version at
once, with the workspace (or the page) when the page's version (``?v=`` or ``Last-Event-ID``) is not the room's.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable

from fastapi import Request
from fastapi.responses import Response, StreamingResponse

from app.classroom.lesson import REAL_PAGES, real_page
from app.classroom.store import Event, Room, Rooms, RoomsFull
from app.i18n import language
from app.serving.byte_cache import ByteCache
from app.web.class_hooks import KEEPALIVE_SECONDS, RETRY_MS, app_root, client_address

log = logging.getLogger(__name__)

PACK_LEVEL = 9  # once per change, so the smallest gzip: 40 KB of workspace → about 7 KB, 9 KB in base64
MAX_CARRIED_BYTES = 4 * 1024 * 1024  # a larger workspace or page (64 tokens × 64 dimensions, all stages) is fetched
CARRIED_BUDGET = 48 * 1024 * 1024  # this worker's events kept, by version, page, root path and language
FOLLOWING_PAGES = frozenset(("", *REAL_PAGES))  # the kinds of page that follow: a toy scenario's, a real model's

Workspace = Callable[[Request, Room], Awaitable[Response]]  # the room's workspace for a following student
PageHtml = Callable[[Request, Room], Awaitable[str]]  # and the class's whole page, for one left on another kind

_carried: ByteCache[bytes] = ByteCache(CARRIED_BUDGET)
_making: dict[Hashable, asyncio.Future[bytes]] = {}


CLOSED = b"event: closed\ndata: 0\n\n"  # the room has gone: the stream ends
UNREACHABLE = b"event: unreachable\ndata: 0\n\n"  # the store does not answer: the page says the class is reconnecting


def state_event(version: int, packed: bytes = b"") -> bytes:
    """A "state" event: the room's version, and the packed workspace when there is one."""
    head = f"id: {version}\nevent: state\ndata: {version}".encode()
    return head + (b" " + packed if packed else b"") + b"\n\n"


def page_event(version: int, packed: bytes) -> bytes:
    """A "state" event that carries the class's whole page (the class moved to another kind of page): marked "page",
    so that no page swaps it in as a workspace."""
    return f"id: {version}\nevent: state\ndata: {version} page ".encode() + packed + b"\n\n"


def pack(html: bytes) -> bytes:
    """What an event carries: the workspace gzip-compressed, then base64 (an event's data is text on one line)."""
    return base64.b64encode(gzip.compress(html, PACK_LEVEL, mtime=0))


async def _carrying(request: Request, store: Rooms, code: str, version: int, page: str,
                    workspace: Workspace, whole_page: PageHtml) -> bytes:
    """The "state" event of ``version`` with its workspace, or with the class's page when the room shows another
    kind of page than ``page``; without either when the room has moved on or its workspace is not a following
    student's swap (an error, a redirect)."""
    room = await store.get(code)
    if room is None or room.version != version:  # moved on: the newer version's event follows
        return state_event(version)
    if _page_of(room) != page:
        return await _page_carried(request, room, whole_page)
    try:
        response = await workspace(request, room)
    except Exception:  # the page fetches the workspace instead, and its route says what is wrong
        log.exception("the workspace of class %s at version %d could not be made", code, version)
        return state_event(version)
    if response.status_code != 200 or "HX-Redirect" in response.headers or len(response.body) > MAX_CARRIED_BYTES:
        return state_event(version)
    return state_event(version, await asyncio.to_thread(pack, bytes(response.body)))


async def _page_carried(request: Request, room: Room, whole_page: PageHtml) -> bytes:
    """The "state" event of the room's version with the class's whole page, or without it when it cannot be made or
    is too large to carry (the page fetches, and is sent to the class's page)."""
    try:
        html = (await whole_page(request, room)).encode()
    except Exception:
        log.exception("the page of class %s at version %d could not be made", room.code, room.version)
        return state_event(room.version)
    if len(html) > MAX_CARRIED_BYTES:
        return state_event(room.version)
    return page_event(room.version, await asyncio.to_thread(pack, html))


async def carried_event(request: Request, store: Rooms, code: str, version: int, page: str,
                        workspace: Workspace, whole_page: PageHtml) -> bytes:
    """The "state" event of ``version`` for a following student's ``page``: made once per key on this worker,
    however many streams ask at once (the first one's request makes it; the others wait for its bytes). A class that
    moved to another kind of page makes one event per kind the students' pages showed, with one render of the page
    (app.classroom.lesson.rendered, shared with GET /class/{code})."""
    key = (code, version, page, app_root(request), language())
    found = _carried.get(key)
    if found is not None:
        return found
    making = _making.get(key)
    if making is None:
        making = _making[key] = asyncio.ensure_future(_carrying(request, store, code, version, page, workspace,
                                                                whole_page))

        def done(task: asyncio.Future[bytes]) -> None:
            _making.pop(key, None)
            if not task.cancelled() and task.exception() is None:
                _carried.put(key, task.result(), len(task.result()))

        making.add_done_callback(done)
    try:
        return await asyncio.shield(making)  # a stream that goes away does not cancel the others' event
    except asyncio.CancelledError:
        raise
    except Exception:
        return state_event(version)


def known_version(request: Request) -> int | None:
    """The version the page shows: ``Last-Event-ID`` on a reconnect, else the page's ``?v=``."""
    for text in (request.headers.get("last-event-id", ""), request.query_params.get("v", "")):
        if text.isdigit() and len(text) < 12:
            return int(text)
    return None


def event_stream(request: Request, store: Rooms, room: Room, workspace: Workspace, whole_page: PageHtml) -> Response:
    """The room's events as server-sent events for one page (the routes' checks done). The first tells the current
    version at once (with its ``id:``, so a reconnected stream starts from the room as it is); a comment every
    KEEPALIVE_SECONDS keeps proxies from closing the stream, and a room that has gone says "closed" and ends it. A
    store that stops answering (a restart of Redis, told by the store or found at a keep-alive) says "unreachable"
    and the stream stays open: once the store answers again it says the room's version (with its workspace when
    newer than the page's), which the page takes as the class being back. A store that does not answer as the
    stream begins says "unreachable" and ends it: the page connects again."""
    code, address = room.code, client_address(request)
    page = request.query_params.get("workspace")  # None: a page that does not follow (the teacher's)
    if page not in FOLLOWING_PAGES:  # no such page (each would be packed a page of its own): the version alone
        page = None
    known = known_version(request)

    async def state(version: int) -> bytes:
        if page is None:  # a page that does not follow: the version alone
            return state_event(version)
        return await carried_event(request, store, code, version, page, workspace, whole_page)

    async def events() -> AsyncIterator[bytes]:
        # The stream is registered here, in the body, so it is always let go when the body ends:
        # at a disconnect Starlette cancels this generator inside the ``async with``.
        try:
            async with store.listen(code, address) as box:
                now = await store.get(code)
                if now is None:
                    yield CLOSED
                    return
                first = state_event(now.version) if known == now.version else await state(now.version)
                box.sent = now.version
                yield f"retry: {RETRY_MS}\n".encode() + first
                while True:
                    try:
                        event = await asyncio.wait_for(box.get(), KEEPALIVE_SECONDS)
                    except TimeoutError:
                        try:
                            now = await store.get(code)
                        except store.errors:
                            event = Event("unreachable", 0)
                        else:
                            if now is None:
                                yield CLOSED
                                return
                            if not box.warned:
                                yield b": keep-alive\n\n"
                                continue
                            event = Event("state", now.version)  # the store answers again: the page says so
                    if event.kind == "unreachable":  # the page says so, and the stream stays open for the return
                        box.warned = True
                        yield UNREACHABLE
                        continue
                    if event.kind != "state":
                        yield f"event: {event.kind}\ndata: {event.version} {event.count}\n\n".encode()
                        continue
                    if event.version <= box.sent:  # nothing new (a catch-up after the store's return): the version
                        box.warned = False
                        yield state_event(box.sent)
                        continue
                    made = await state(event.version)
                    newer = box.latest.get("state")
                    if newer is not None and newer.version > event.version:
                        continue  # overtaken while it was made: the newest goes next
                    box.sent, box.warned = event.version, False
                    yield made
        except RoomsFull:  # another stream took the last place since the routes' check
            yield CLOSED
        except store.errors:  # the store did not answer as the stream began: the page says so, and tries again
            yield UNREACHABLE

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


def _page_of(room: Room) -> str:
    """The kind of page a room shows: "" for a toy scenario, else the real model's ("model", "decoder")."""
    real = real_page(room.state)
    return real[0] if real else ""

