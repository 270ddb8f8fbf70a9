"""The application factory: middleware, error handlers, static files and the routers."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from anyio import to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette_compress import CompressMiddleware

from app.classroom.memory import MemoryRooms
from app.classroom.redis_store import RedisRooms
from app.classroom.store import Rooms, StoreUnavailable
from app.config import Settings, settings
from app.i18n import load_catalogues
from app.serving.real_models import language_model, sentence_model, translator
from app.serving.shared import SharedAnswers
from app.web import (
    api,
    class_decoder,
    class_model,
    class_translate,
    classroom,
    decoder_api,
    decoder_pages,
    embed,
    export,
    figures,
    handout,
    model_api,
    model_pages,
    pages,
    patching_pages,
    translate_api,
    translate_pages,
    why_api,
)
from app.web.class_access import store_unreachable
from app.web.compression import MIDDLEWARE_OPTIONS
from app.web.lanes import Lanes
from app.web.language import LanguageMiddleware
from app.web.respond import compile_templates
from app.web.security import SameOriginMiddleware, SecurityHeadersMiddleware, docs_router
from app.web.static_files import PrecompressedStatic

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
server_log = logging.getLogger("uvicorn.error")  # the server's own log, beside its access lines
SWITCH_SECONDS = 0.0005  # the interpreter's switch interval in a server (Python's default: 0.005)


class BodyLimitMiddleware:
    """Answer 413 to a request body over ``limit`` bytes, declared or streamed, before it is read, and
    408 to one that has not all arrived ``timeout`` seconds after the request began to be read. A
    client that leaves before its body is whole is logged in one line: the app never sees that request."""

    def __init__(self, app: ASGIApp, limit: int, timeout: float) -> None:
        self.app = app
        self.limit = limit
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await _refuse(send, 413, f"request body larger than {self.limit} bytes")
            return
        # Read the body here, at most limit bytes, so a streamed body over it is refused before
        # the app sees any of it; the app then reads the buffered messages.
        messages: list[Message] = []
        received = 0
        more = True
        try:
            async with asyncio.timeout(self.timeout):  # one deadline for the whole body, however it trickles
                while more:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        _left_early(scope, received, declared)
                        return
                    messages.append(message)
                    received += len(message.get("body", b""))
                    if received > self.limit:
                        await _refuse(send, 413, f"request body larger than {self.limit} bytes")
                        return
                    more = message.get("more_body", False)
        except TimeoutError:
            await _refuse(send, 408, f"the request body did not arrive within {self.timeout:g} s")
            return

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


def _left_early(scope: Scope, received: int, declared: bytes | None) -> None:
    """One line, as uvicorn's access log writes a request: not the app's traceback of ClientDisconnect."""
    client = "{}:{} - ".format(*scope["client"]) if scope.get("client") else ""
    of = f" of {declared.decode()}" if declared is not None else ""
    server_log.info('%s"%s %s HTTP/%s": the client left after %d%s bytes of its body', client, scope["method"],
                    scope.get("root_path", "") + scope["path"], scope.get("http_version", "1.1"), received, of)


async def _refuse(send: Send, status: int, detail: str) -> None:
    # The rest of the body is never read, so the connection cannot carry another request.
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


class RootPathMiddleware:
    """Serve under ``root_path`` (such as /attention) behind a reverse proxy, whether the proxy strips
    the prefix or passes it on: the path is made to start with it, as uvicorn's --root-path does, and
    every URL the app builds (url_for, permalinks) carries it. Direct requests (the HEALTHCHECK's
    /healthz) are answered too."""

    def __init__(self, app: ASGIApp, root_path: str) -> None:
        self.app = app
        self.root_path = root_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            root, path = self.root_path, scope["path"]
            scope = dict(scope, root_path=root)
            if path != root and not path.startswith(root + "/"):
                scope["path"] = root + path
                scope["raw_path"] = root.encode() + (scope.get("raw_path") or path.encode())
        await self.app(scope, receive, send)


def field_path(loc: tuple) -> str:
    """('body', 'x', 1, 2) → 'x[1][2]'; ('body', 'weights', 'w_q') → 'weights.w_q'."""
    path = ""
    for part in loc[1:] if loc and loc[0] == "body" else loc:
        if isinstance(part, str) and ("[" in part or "(" in part):
            continue  # a union member's tag, such as "literal['none','causal']"
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "body"


async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 naming each offending field. The input is not echoed: it may hold NaN or Infinity,
    which JSON cannot carry, and FastAPI's default handler would fail on it with a 500."""
    detail = []
    for err in exc.errors():
        loc = tuple(err.get("loc", ()))
        ctx = err.get("ctx") or {}
        field = "body" if err.get("type") == "json_invalid" else ctx.get("field") or field_path(loc)
        msg = str(ctx.get("message") or err.get("msg", "invalid")).removeprefix("Value error, ")
        detail.append({"loc": list(map(str, loc)), "field": field,
                       "msg": f"{field}: {msg}",
                       "type": err.get("type", "value_error")})
    return JSONResponse({"detail": detail}, status_code=422)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async def warm() -> None:
        # The heavy lane's process first (a process start cannot be cut short, so a heavy page waits for it),
        # then the sentence encoder's 91 MB; /healthz answers all along.
        await app.state.lanes.start(pages.warm)
        await to_thread.run_sync(encoder.files)
        await to_thread.run_sync(app.state.static.warm)  # the static files at their smallest (a second or so)
        await to_thread.run_sync(compile_templates)  # every template compiled before its first page needs it
        # Then the language model: 98 MB of 4-bit weights de-quantised to 540 MB of float32, in about 4 s, and
        # what its heads do (about 2 s of forward passes in a thread, outside the lanes): the page's first
        # answer chooses its head from it. Then what the encoder's heads do (a second): measured first, it held
        # the heavy lane's first pages back by seconds.
        if app.state.config.preload_language_model:
            await decoder.start()
        await encoder.start()
        await translator_model.start()  # both directions, a third of a second each, and the seeds' two banks
        # What start made stays for the server's life (modules, templates, the models' tokenizers and catalogues):
        # the collector need not walk it again at every full collection, a pause of every thread, the event
        # loop's too (a /healthz waited 150 ms behind one under a hall's load).
        gc.freeze()

    # The event loop takes the GIL back from a model's thread (rendering a page is pure Python) within half a
    # millisecond rather than five: /healthz, the event streams and the toy page's edits wait that much less.
    sys.setswitchinterval(SWITCH_SECONDS)
    decoder, encoder, translator_model = language_model(), sentence_model(), translator()
    shared = None
    if app.state.config.redis_url:  # finished answers shared with the other servers (app.serving.shared)
        shared = SharedAnswers(app.state.config.redis_url, budget=app.state.config.shared_answer_bytes,
                               seconds=app.state.config.shared_answer_seconds)
    for service in (decoder, encoder, translator_model):
        service.share(shared)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(warm)
        yield
        tasks.cancel_scope.cancel()
    for service in (decoder, encoder):
        service.share(None)
    if shared is not None:
        await shared.close()
    await app.state.rooms.close()  # Redis's connections, and this worker's subscription


async def store_unavailable(request: Request, exc: Exception) -> Response:
    """Redis does not answer (down, frozen, restarting) or took a change too late: a class's request
    says so within the store's timeout, never a bare 500 nor a hang (app.web.class_access)."""
    return store_unreachable(request)


def make_rooms(config: Settings) -> Rooms:
    """The live class's rooms: in this process, or in Redis with REDIS_URL."""
    bounds = dict(max_rooms=config.class_max_rooms, max_students=config.class_max_students,
                  max_streams=config.class_max_streams, idle_seconds=config.class_idle_minutes * 60.0,
                  seats_per_address=config.class_seats_per_address, rooms_per_address=config.class_rooms_per_address,
                  streams_per_address=config.class_streams_per_address)
    if config.redis_url:
        return RedisRooms(config.redis_url, timeout=config.redis_timeout_seconds, **bounds)
    return MemoryRooms(**bounds)


def create_app(config: Settings = settings) -> FastAPI:
    load_catalogues()  # a missing or broken language's catalogue stops the app here, naming its file
    app = FastAPI(
        lifespan=lifespan,
        title="Attention, step by step",
        summary="Every intermediate matrix of multi-head scaled dot-product attention.",
        version="0.1.0",
        docs_url=None,  # served by app.web.security from /static, under its own policy
        redoc_url=None,
    )
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StoreUnavailable, store_unavailable)
    app.state.lanes = Lanes(config.heavy_requests, config.heavy_operations, config.heavy_processes,
                            config.heavy_waiting, config.heavy_seconds)
    app.state.config = config
    app.state.rooms = make_rooms(config)  # live class rooms: in this process, or in Redis with REDIS_URL
    if config.redis_url:
        app.add_exception_handler(RedisConnectionError, store_unavailable)
        app.add_exception_handler(RedisTimeoutError, store_unavailable)
    app.add_middleware(CompressMiddleware, **MIDDLEWARE_OPTIONS)  # zstd, Brotli or gzip (app.web.compression)
    app.add_middleware(BodyLimitMiddleware, limit=config.max_body_bytes, timeout=config.body_timeout_seconds)
    app.add_middleware(SameOriginMiddleware)  # before the body is read: a cross-site post costs nothing
    # Outside the body limit: its 413 gets them too. The embeddable views may be framed by embed_origins.
    app.add_middleware(SecurityHeadersMiddleware, embed_origins=config.frame_origins)
    app.add_middleware(LanguageMiddleware)  # the request's language (app.i18n), before any route runs
    app.state.static = PrecompressedStatic(directory=STATIC_DIR)  # each file compressed once (app.web.static_files)
    app.mount("/static", app.state.static, name="static")
    app.include_router(api.router)
    app.include_router(model_api.router)
    app.include_router(decoder_api.router)
    app.include_router(why_api.router)
    app.include_router(translate_api.router)
    app.include_router(translate_pages.router)
    app.include_router(decoder_pages.router)
    app.include_router(patching_pages.router)
    app.include_router(model_pages.router)
    app.include_router(pages.router)
    app.include_router(classroom.router)
    app.include_router(class_model.router)
    app.include_router(class_decoder.router)
    app.include_router(class_translate.router)
    app.include_router(export.router)
    app.include_router(embed.router)
    app.include_router(figures.router)
    app.include_router(handout.router)
    app.include_router(docs_router)
    if config.root_path:
        app.add_middleware(RootPathMiddleware, root_path=config.root_path)  # outermost: every route sees it
    return app


app = create_app()
