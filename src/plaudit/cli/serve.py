"""`plaudit serve`: the HTTP API and the dashboard (`plaudit.server`), run by uvicorn."""

from __future__ import annotations

from collections.abc import Callable
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
) -> None:
    """Serve the HTTP API (/v1/..., spec at /openapi.json) and the live dashboard at /."""
    from plaudit.extras import require

    require("server", "plaudit serve")
    from plaudit.core import Plaudit
    from plaudit.server.app import create_app
    from plaudit.server.guards import check_serving, normalize_token
    from plaudit.server.limits import DEFAULT_MAX_BODY_BYTES
    from plaudit.server.run import run_server
    from plaudit.server.timeouts import Timeouts

    token = normalize_token(token)
    check_serving(host, token, cors_origins)  # before the store is opened (or created)
    timeouts = Timeouts(headers=header_timeout, body=body_timeout, idle=idle_timeout)
    follower = None
    handoff = None
    if otel:
        from plaudit.otel import require_sdk

        require_sdk()
    # Agents write through the server, so it is a writer: a new store is made, and said so.
    p = Plaudit.open(resolve(db), durability=durability, create=True)
    try:
        if p.created:
            announce_created(p)
        app = create_app(
            p,
            token=token,
            host=host,
            cors_origins=cors_origins,
            max_body_bytes=max_body_bytes or DEFAULT_MAX_BODY_BYTES,
            body_timeout=timeouts.body,
            export_root=export_root,
        )
        for name, reason in app.state.skipped_routes.items():
            click.echo(f"warning: {name} not mounted: {reason}", err=True)
        if otel:
            from plaudit.otel import OtelExporter

            follower = OtelExporter(p).follow_in_background()
        if p.backend.dialect == "sqlite":
            # Shell hooks' `plaudit signal emit` hands its events over a socket beside the
            # store instead of starting the store itself (`plaudit.signals.handoff`).
            from plaudit.signals.handoff import serve as serve_handoff

            handoff, note = serve_handoff(p, p.backend.url)
            click.echo(f"plaudit: {note}", err=True)
        shown = f"[{host}]" if ":" in host else host
        click.echo(
            f"plaudit serving {p.backend.describe()} on http://{shown}:{port}/ "
            f"(writes {'need the token' if token else 'are open'}"
            f"{'; results go to OpenTelemetry' if otel else ''}; Ctrl-C stops)",
            err=True,
        )
        run_server(
            app,
            host=host,
            port=port,
            timeouts=timeouts,
            log_level=log_level,
            access_log=access_log,
        )
    finally:
        if handoff is not None:
            handoff.close()
        if follower is not None:
            follower.stop()
        p.close()


__all__ = ["serve"]
