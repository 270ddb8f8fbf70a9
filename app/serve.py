"""Serve the app with uvicorn as the ATTENTION_* settings say: ``python -m app.serve``.

This is the container's command. uvicorn stops gracefully on SIGTERM (``docker stop``): it stops
accepting connections, lets requests in flight finish for up to GRACEFUL_STOP_SECONDS, stops its
workers and exits 0. ``python -m app.serve --check`` is the container's HEALTHCHECK.
"""

from __future__ import annotations

import argparse
import urllib.request

from app.config import Settings, settings

GRACEFUL_STOP_SECONDS = 5  # well inside the 10 s that docker stop waits before it kills
HEALTH_TIMEOUT_SECONDS = 2.0


def serve(config: Settings = settings) -> None:
    """Run uvicorn with ``config.workers`` processes. Proxy headers (X-Forwarded-For, -Proto) are
    believed only from ``config.forwarded_allow_ips``; the root path is applied by the app itself."""
    import uvicorn  # here, not above: the HEALTHCHECK, run every few seconds, does not need it

    if config.workers > 1 and not config.redis_url:
        raise SystemExit(refusal(config))

    uvicorn.run(
        "app.main:app",
        host=config.host,
        port=config.port,
        workers=config.workers,
        proxy_headers=True,
        forwarded_allow_ips=config.forwarded_allow_ips,
        timeout_graceful_shutdown=GRACEFUL_STOP_SECONDS,
    )


def refusal(config: Settings) -> str:
    """Why the server will not start with several workers and no Redis: each worker would keep class
    rooms of its own, and a student sent to another worker than the teacher's would find no room."""
    return (f"ATTENTION_WORKERS={config.workers} needs REDIS_URL: live class rooms are kept in the worker "
            "process without Redis, so several workers would each have their own. Set REDIS_URL "
            "(such as redis://127.0.0.1:6379/0) or use one worker (ATTENTION_WORKERS=1).")


def health_url(config: Settings = settings) -> str:
    """Where the server answers /healthz from inside its own machine or container."""
    host = config.host
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{config.port}/healthz"


def healthy(config: Settings = settings) -> bool:
    """True when /healthz answers 200. Any HTTP proxy in the environment is bypassed."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(health_url(config), timeout=HEALTH_TIMEOUT_SECONDS) as response:
            return response.status == 200
    except (OSError, ValueError):  # refused, timed out, an HTTP error status
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.serve", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 0 if the running server is healthy, else 1")
    args = parser.parse_args(argv)
    if args.check:
        return 0 if healthy() else 1
    serve()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
