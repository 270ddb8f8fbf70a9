"""The language of each request (app.i18n): chosen once, before any route runs, and kept in a cookie.

``?lang=fr`` opens a page in French and keeps French for the next visits (the cookie); without it the cookie
decides, and the first time the browser's Accept-Language does. A shared permalink carries no ``lang``, so it
opens in each reader's own language. The JSON API (``/api/``) and /healthz always speak English, as APIs do.
"""

from __future__ import annotations

from http.cookies import SimpleCookie
from urllib.parse import parse_qsl

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.i18n import COOKIE, COOKIE_MAX_AGE, DEFAULT, LANGUAGES, pick_language, speaking

ENGLISH_ONLY = ("/api/", "/healthz", "/openapi.json", "/static/")


def _cookie(headers: list[tuple[bytes, bytes]]) -> str | None:
    for name, value in headers:
        if name == b"cookie":
            try:
                jar = SimpleCookie(value.decode("latin-1"))
            except Exception:  # noqa: BLE001 (a malformed cookie header is no language)
                continue
            if COOKIE in jar:
                return jar[COOKIE].value
    return None


def _query_language(query: bytes) -> str | None:
    if b"lang=" not in query:
        return None
    for name, value in parse_qsl(query.decode("latin-1"), max_num_fields=200):
        if name == "lang":
            return value
    return None


class LanguageMiddleware:
    """Sets the request's language (app.i18n's context variable) and answers with ``Vary`` on what chose it;
    a ``?lang=`` that names one of the languages is kept in the ``lang`` cookie."""

    def __init__(self, app: ASGIApp, secure: bool = False) -> None:
        self.app = app
        self.secure = secure

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        root_path, path = scope.get("root_path", ""), scope["path"]
        if root_path and path.startswith(root_path):
            path = path[len(root_path):]
        if path.startswith(ENGLISH_ONLY):
            with speaking(DEFAULT):
                await self.app(scope, receive, send)
            return
        headers = scope.get("headers", [])
        asked = _query_language(scope.get("query_string", b""))
        accept = next((v.decode("latin-1") for k, v in headers if k == b"accept-language"), None)
        lang = pick_language(asked, _cookie(headers), accept)
        keep = asked in LANGUAGES and asked != _cookie(headers)
        root = root_path or "/"

        async def send_with_language(message: Message) -> None:
            if message["type"] == "http.response.start":
                out = MutableHeaders(scope=message)
                out.add_vary_header("Accept-Language")
                out.add_vary_header("Cookie")
                if keep:
                    out.append("set-cookie", f"{COOKIE}={asked}; Path={root}; Max-Age={COOKIE_MAX_AGE}; SameSite=Lax"
                               + ("; Secure" if self.secure else ""))
            await send(message)

        with speaking(lang):
            await self.app(scope, receive, send_with_language)
