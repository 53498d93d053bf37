"""Run an app with uvicorn, hardened: slow clients time out (`Timeouts`), no Server header.

`plaudit serve` is this plus option parsing; an application embedding `create_app` can call
`run_server` too, to get the same connection limits its own ASGI server may not offer.
"""

from __future__ import annotations

import contextlib
import gc
import logging
from typing import Any

from plaudit.server.guards import check_serving
from plaudit.server.timeouts import Timeouts, protocol_class

_log = logging.getLogger("plaudit.server")

#: Spare store connections opened before the first request (the worker threads of a few
#: concurrent requests; more are opened as needed and kept when their threads retire).
WARM_CONNECTIONS = 8
#: The exit status when uvicorn did not start although the address was bound: the app's own
#: start-up failed, which is a bug to report (a port in use is a `ListenError` before this).
STARTUP_FAILURE = 70


def _best_effort(fn: Any, what: str) -> None:
    """Warming up only moves work before the first request: if it fails, the server still
    starts, and the request that needs the same work meets the same error, with its message."""
    try:
        fn()
    except Exception as exc:
        _log.warning("warming up before serving (%s) failed: %s", what, exc)


def warm_routes(app: Any) -> int:
    """Send the app, in process, one request for a path no route serves; returns its status
    (404). FastAPI builds each route's handler when a request is first matched against it,
    and finding no route matches them all; done before serving, the first requests do not
    pay for it (about 90 ms served, with every request behind them waiting)."""
    import asyncio

    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/.plaudit-warm-up",
        "raw_path": b"/.plaudit-warm-up",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 0),
        "server": ("127.0.0.1", 0),
    }
    asyncio.run(app(scope, receive, send))
    return next((int(m["status"]) for m in sent if m["type"] == "http.response.start"), 0)


def run_server(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8377,
    timeouts: Timeouts | None = None,
    log_level: str = "info",
    access_log: bool = False,
    http: str = "auto",
    sock: Any = None,
) -> None:
    """Serve `app` until interrupted. A public `host` needs an app built with a token.

    `sock` is a socket already listening (`plaudit serve` binds it before opening the store);
    `host` and `port` then only describe it. Without one, the address is bound here, first: a
    port in use is a `ListenError` (exit 7) before any warming up.
    """
    import uvicorn

    from plaudit.server.workers import listen

    timeouts = timeouts or Timeouts()
    state = getattr(app, "state", None)
    check_serving(host, getattr(state, "token", None) if state is not None else None)
    own_sock = sock is None
    if own_sock:
        sock = listen(host, port)
    plaudit = getattr(state, "plaudit", None) if state is not None else None
    if plaudit is not None:
        # Connections for the first requests' worker threads, opened now rather than by them.
        plaudit.backend.warm(WARM_CONNECTIONS)
        # The signing key, loaded before the first request rather than by the append that
        # signs the first checkpoint.
        plaudit.log.checkpointer.prepare()
        # The jobs' caches, loaded before the first request rather than by it.
        _best_effort(plaudit.warm, "loading the jobs' caches")
    _best_effort(lambda: warm_routes(app), "building the routes")
    # Everything loaded so far lives as long as the server: move it out of the collector's
    # way, so a full collection walks only what requests create (shorter pauses in p99).
    gc.collect()
    gc.freeze()
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol_class(timeouts, http),
        timeout_keep_alive=timeouts.idle,  # type: ignore[arg-type]  # a float works
        log_level=log_level,
        access_log=access_log,
        server_header=False,
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            server.run(sockets=[sock])
    finally:
        if own_sock:
            sock.close()
    if not server.started:  # uvicorn has said why
        raise SystemExit(STARTUP_FAILURE)


__all__ = ["run_server"]
