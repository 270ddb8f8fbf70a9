"""Security headers on every response, cross-site posts refused, and the API docs served from this
app's own files.

No page may be shown in another site's frame (frame-ancestors 'none', X-Frame-Options: DENY), except the
embeddable views (app.web.embed, every path under /embed): this app's own pages and the origins of
ATTENTION_EMBED_ORIGINS may frame them. X-Frame-Options cannot name an origin, so those views send
SAMEORIGIN when no origin is configured and none at all otherwise (every current browser obeys the
policy's frame-ancestors, which then takes precedence anyway).

The page runs no inline script or style and no eval (htmx is configured with allowEval false and
includeIndicatorStyles false; heatmap colours are classes), so its policy is strict: everything
from this origin only. Swagger UI sets style attributes as it renders, so /docs gets the same
policy with inline styles allowed — still no inline or foreign script.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from markupsafe import escape
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.i18n import N_, gettext

SWAGGER_UI = "vendor/swagger-ui-5.35.0"  # from the npm package swagger-ui-dist, unchanged

_SOURCES = ("default-src 'self'", "script-src 'self'", "img-src 'self' data:", "font-src 'self'", "connect-src 'self'",
            "object-src 'none'", "base-uri 'none'")
_COMMON = (*_SOURCES, "frame-ancestors 'none'", "form-action 'self'")
PAGE_POLICY = "; ".join((*_COMMON, "style-src 'self'"))
DOCS_POLICY = "; ".join((*_COMMON, "style-src 'self' 'unsafe-inline'"))
EMBED_PREFIX = "/embed"  # app.web.embed's routes: /embed, /embed/stages, /embed/model


def embed_policy(origins: tuple[str, ...] = ()) -> str:
    """The page's policy for the embeddable views: framed by this app's pages and by ``origins``."""
    return "; ".join((*_SOURCES, " ".join(("frame-ancestors 'self'", *origins)), "form-action 'self'",
                      "style-src 'self'"))

HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=(), interest-cohort=()"),
)


class SecurityHeadersMiddleware:
    """Adds the headers above and the page's Content-Security-Policy to every HTTP response,
    unless the response set its own policy (the docs); a 500 from an unexpected error too. The
    embeddable views get embed_policy(``embed_origins``) and the X-Frame-Options that goes with it."""

    def __init__(self, app: ASGIApp, embed_origins: tuple[str, ...] = ()) -> None:
        self.app = app
        self.embed_policy = embed_policy(embed_origins).encode()
        # X-Frame-Options names no origin: SAMEORIGIN says what the policy says when only this app may frame
        # the views; with other origins none is sent, since DENY or SAMEORIGIN would refuse them.
        self.embed_headers = tuple((name, b"SAMEORIGIN" if name == b"x-frame-options" else value)
                                   for name, value in HEADERS if name != b"x-frame-options" or not embed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        started = False
        embed = is_embed(scope)
        extra, policy = (self.embed_headers, self.embed_policy) if embed else (HEADERS, PAGE_POLICY.encode())

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [(name, value) for name, value in extra if name not in present]
                if b"content-security-policy" not in present:
                    headers.append((b"content-security-policy", policy))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception:
            # A bug: answer 500 here, with the headers, before Starlette's error layer (outside
            # this one) would answer without them; then let it log the exception.
            if not started:
                await send_with_headers({"type": "http.response.start", "status": 500,
                                         "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
                await send_with_headers({"type": "http.response.body", "body": b"Internal Server Error"})
            raise


def is_embed(scope: Scope) -> bool:
    """The request is for an embeddable view: /embed or a path under it, past the root path."""
    path = scope["path"].removeprefix(scope.get("root_path", ""))
    return path == EMBED_PREFIX or path.startswith(EMBED_PREFIX + "/")


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CROSS_SITE = N_("A request from another site cannot change anything here: open the page itself and try again.")


class SameOriginMiddleware:
    """Refuse (403) a state-changing request that a browser says comes from another site: its
    Sec-Fetch-Site is cross-site, or its Origin is not this host. A request with neither header
    (curl, an API client, a test client) passes: only browsers send them, and browsers cannot be
    made to leave them out. So a page elsewhere cannot post to the class's routes with a teacher's
    cookie, nor make a visitor's browser post large forms here."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in SAFE_METHODS or same_origin(scope):
            await self.app(scope, receive, send)
            return
        body = gettext(CROSS_SITE).encode()
        await send({"type": "http.response.start", "status": 403,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def same_origin(scope: Scope) -> bool:
    """False when the request's headers say a browser sent it from another site."""
    headers = dict(scope.get("headers", []))
    site = headers.get(b"sec-fetch-site", b"").decode("latin-1").lower()
    if site in ("same-origin", "none"):  # every current browser sends it: no need to trust the Host header
        return True
    if site in ("cross-site", "same-site"):  # same-site is another origin of the site (a sibling subdomain)
        return False
    origin = headers.get(b"origin")  # an older browser: its Origin must name this host
    if origin is None:
        return True
    host = headers.get(b"host", b"").decode("latin-1").lower()
    netloc = urlsplit(origin.decode("latin-1")).netloc.lower()
    return bool(host) and netloc == host


docs_router = APIRouter()


@docs_router.get("/docs", response_class=HTMLResponse, include_in_schema=False, name="swagger_ui_html")
def swagger_ui(request: Request) -> HTMLResponse:
    """Swagger UI from /static (works offline), started by static/docs.js (no inline script)."""
    css = request.url_for("static", path=f"{SWAGGER_UI}/swagger-ui.css").path
    bundle = request.url_for("static", path=f"{SWAGGER_UI}/swagger-ui-bundle.js").path
    start = request.url_for("static", path="docs.js").path
    openapi = escape(request.scope.get("root_path", "") + request.app.openapi_url)
    html = f"""<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Attention, step by step — JSON API</title>
  <link rel="icon" href="{request.url_for("static", path="favicon.svg").path}" type="image/svg+xml">
  <link rel="stylesheet" href="{css}">
</head>
<body>
  <main id="swagger-ui" data-openapi="{openapi}"></main>
  <script src="{bundle}"></script>
  <script src="{start}"></script>
</body>
</html>"""
    return HTMLResponse(html, headers={"Content-Security-Policy": DOCS_POLICY})
