"""Security headers on every response, cross-site posts refused, and the API docs served from this
app's own files.

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

SWAGGER_UI = "vendor/swagger-ui-5.35.0"  # from the npm package swagger-ui-dist, unchanged

_COMMON = ("default-src 'self'", "script-src 'self'", "img-src 'self' data:", "font-src 'self'", "connect-src 'self'",
           "object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'", "form-action 'self'")
PAGE_POLICY = "; ".join((*_COMMON, "style-src 'self'"))
DOCS_POLICY = "; ".join((*_COMMON, "style-src 'self' 'unsafe-inline'"))

HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=(), interest-cohort=()"),
)


class SecurityHeadersMiddleware:
    """Adds the headers above and the page's Content-Security-Policy to every HTTP response,
    unless the response set its own policy (the docs); a 500 from an unexpected error too."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [(name, value) for name, value in HEADERS if name not in present]
                if b"content-security-policy" not in present:
                    headers.append((b"content-security-policy", PAGE_POLICY.encode()))
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


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CROSS_SITE = "A request from another site cannot change anything here: open the page itself and try again."


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
        body = CROSS_SITE.encode()
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
