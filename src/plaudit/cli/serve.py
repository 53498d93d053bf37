"""`plaudit serve`: the HTTP API and the dashboard (`plaudit.server`), run by uvicorn."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from plaudit.cli._common import announce_created, db_option, resolve

#: The token's environment variable (the same name `plaudit.server.guards` reads; kept here so
#: that `plaudit serve --help` works, and says which extra is missing, without the server extra).
ENV_TOKEN = "PLAUDIT_TOKEN"

F = TypeVar("F", bound=Callable[..., Any])


def _timeout_option(name: str, default: float, text: str) -> Callable[[F], F]:
    return click.option(
        f"--{name}-timeout",
        default=default,
        show_default=True,
        type=click.FloatRange(0, 86_400, min_open=True),
        metavar="SECONDS",
        help=text,
    )


@click.command()
@db_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8377, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token",
    envvar=ENV_TOKEN,
    default=None,
    metavar="TOKEN",
    help=f"Bearer token required by write endpoints (default: ${ENV_TOKEN}). "
    "Mandatory when --host is not a loopback address.",
)
@click.option(
    "--cors-origin",
    "cors_origins",
    multiple=True,
    metavar="ORIGIN",
    help="Allow cross-origin requests from this origin (repeatable). Off by default.",
)
@click.option(
    "--max-body-bytes",
    default=None,
    type=click.IntRange(1, 1 << 30),
    help="Largest request body accepted (default: 2 MiB).",
)
@_timeout_option("header", 10.0, "A request's line and headers must arrive within this.")
@_timeout_option("body", 30.0, "A request's body must arrive within this, after its headers.")
@_timeout_option("idle", 5.0, "A connection with no request under way is closed after this.")
@click.option(
    "--export-root",
    default=None,
    metavar="DIR",
    help="The one directory HTTP exports and audits may use (default: $PLAUDIT_EXPORT_ROOT).",
)
@click.option(
    "--otel/--no-otel",
    default=False,
    show_default=True,
    help="Also send ledger, bandit and router results to OpenTelemetry (needs plaudit[otel]; "
    "configured by the OTEL_* variables).",
)
@click.option(
    "--durability",
    type=click.Choice(["full", "normal"]),
    default="full",
    show_default=True,
    help="SQLite only: 'normal' survives a killed process but not a power loss.",
)
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="info",
    show_default=True,
)
@click.option("--access-log/--no-access-log", default=False, show_default=True)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Server processes sharing the port (POSIX). One process uses about one core; on a "
    "busy server give it one per core.",
)
def serve(
    db: str | None,
    host: str,
    port: int,
    token: str | None,
    cors_origins: tuple[str, ...],
    max_body_bytes: int | None,
    header_timeout: float,
    body_timeout: float,
    idle_timeout: float,
    export_root: str | None,
    otel: bool,
    durability: str,
    log_level: str,
    access_log: bool,
    workers: int,
) -> None:
    """Serve the HTTP API (/v1/..., spec at /openapi.json) and the live dashboard at /."""
    from plaudit.extras import require

    require("server", "plaudit serve")
    from plaudit.core import Plaudit
    from plaudit.server.guards import check_serving, normalize_token
    from plaudit.server.timeouts import Timeouts

    token = normalize_token(token)
    check_serving(host, token, cors_origins)  # before the store is opened (or created)
    timeouts = Timeouts(headers=header_timeout, body=body_timeout, idle=idle_timeout)
    if otel:
        from plaudit.otel import require_sdk

        require_sdk()
    path = resolve(db)
    settings = _Settings(
        path=path,
        durability=durability,
        host=host,
        port=port,
        token=token,
        cors_origins=cors_origins,
        max_body_bytes=max_body_bytes,
        timeouts=timeouts,
        export_root=export_root,
        otel=otel,
        log_level=log_level,
        access_log=access_log,
    )
    from plaudit.server.workers import listen, run_workers

    # The address first: a port in use is one line (exit 7) before any store is opened or
    # created, and before anything says it is serving.
    sock = listen(host, port)
    try:
        if workers == 1:
            _run_one(settings, index=0, sock=sock)
            return
        # The store is made (or migrated) once, here, before any worker opens it; the
        # supervisor holds no connection across the forks.
        with Plaudit.open(path, durability=durability, create=True) as p:
            if p.created:
                announce_created(p)
        click.echo(
            f"plaudit: {workers} workers on one port (pid {os.getpid()} supervises)", err=True
        )
        status = run_workers(sock, workers, lambda i, s: _run_one(settings, index=i, sock=s))
    finally:
        sock.close()
    if status:
        raise SystemExit(status)


@dataclass(frozen=True)
class _Settings:
    path: str
    durability: str
    host: str
    port: int
    token: str | None
    cors_origins: tuple[str, ...]
    max_body_bytes: int | None
    timeouts: Any
    export_root: str | None
    otel: bool
    log_level: str
    access_log: bool


def _run_one(o: _Settings, *, index: int, sock: Any) -> None:
    """One server process: its own store handle, app and uvicorn loop. Worker 0 (the only
    one without --workers) also takes hooks' events and follows the log for OpenTelemetry,
    duties that one process per store must do."""
    from plaudit.core import Plaudit
    from plaudit.server.app import create_app
    from plaudit.server.limits import DEFAULT_MAX_BODY_BYTES
    from plaudit.server.run import run_server

    follower = None
    handoff = None
    # Agents write through the server, so it is a writer: a new store is made, and said so.
    p = Plaudit.open(o.path, durability=o.durability, create=True)
    try:
        if p.created:
            announce_created(p)
        app = create_app(
            p,
            token=o.token,
            host=o.host,
            cors_origins=o.cors_origins,
            max_body_bytes=o.max_body_bytes or DEFAULT_MAX_BODY_BYTES,
            body_timeout=o.timeouts.body,
            export_root=o.export_root,
        )
        if index == 0:
            for name, reason in app.state.skipped_routes.items():
                click.echo(f"warning: {name} not mounted: {reason}", err=True)
            if o.otel:
                from plaudit.otel import OtelExporter

                follower = OtelExporter(p).follow_in_background()
            if p.backend.dialect == "sqlite":
                # Shell hooks' `plaudit signal emit` hands its events over a socket beside the
                # store instead of starting the store itself (`plaudit.signals.handoff`).
                from plaudit.signals.handoff import serve as serve_handoff

                handoff, note = serve_handoff(p, p.backend.url)
                click.echo(f"plaudit: {note}", err=True)
            shown = f"[{o.host}]" if ":" in o.host else o.host
            bound = sock.getsockname()[1] if sock is not None else o.port  # --port 0: the real one
            click.echo(
                f"plaudit serving {p.backend.describe()} on http://{shown}:{bound}/ "
                f"(writes {'need the token' if o.token else 'are open'}"
                f"{'; results go to OpenTelemetry' if o.otel else ''}; Ctrl-C stops)",
                err=True,
            )
        run_server(
            app,
            host=o.host,
            port=o.port,
            timeouts=o.timeouts,
            log_level=o.log_level,
            access_log=o.access_log,
            sock=sock,
        )
    finally:
        if handoff is not None:
            handoff.close()
        if follower is not None:
            follower.stop()
        p.close()
