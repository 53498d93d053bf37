"""`plaudit serve`: the HTTP API and the dashboard, run by uvicorn."""

from __future__ import annotations

import gc
import ipaddress

import click

from plaudit.cli._common import announce_created, db_option, fail, resolve

ENV_TOKEN = "PLAUDIT_TOKEN"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def is_loopback(host: str) -> bool:
    """True only for addresses that other machines cannot reach."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve to anything


def allowed_hosts(host: str) -> list[str] | None:
    """Host names a loopback server answers to (no DNS rebinding); None means any."""
    if not is_loopback(host):
        return None
    return sorted({*LOOPBACK_NAMES, host.strip("[]").lower()})


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
    durability: str,
    log_level: str,
    access_log: bool,
) -> None:
    """Serve the HTTP API (/v1/..., spec at /openapi.json) and the live dashboard at /."""
    token = (token or "").strip() or None
    if not is_loopback(host) and token is None:
        raise fail(
            f"refusing to listen on {host!r} without a token: anyone who can reach it could "
            f"write to the log. Pass --token or set ${ENV_TOKEN}, or use --host 127.0.0.1.",
            2,
        )
    for origin in cors_origins:
        if origin != "*" and not origin.startswith(("http://", "https://")):
            raise fail(f"--cors-origin {origin!r} must look like https://example.com", 2)

    from plaudit.extras import require

    require("server", "plaudit serve")
    import uvicorn

    from plaudit.core import Plaudit
    from plaudit.server.app import create_app
    from plaudit.server.limits import DEFAULT_MAX_BODY_BYTES

    # Agents write through the server, so it is a writer: a new store is made, and said so.
    p = Plaudit.open(resolve(db), durability=durability, create=True)
    try:
        if p.created:
            announce_created(p)
        app = create_app(
            p,
            token=token,
            cors_origins=cors_origins,
            max_body_bytes=max_body_bytes or DEFAULT_MAX_BODY_BYTES,
            allowed_hosts=allowed_hosts(host),
        )
        for name, reason in app.state.skipped_routes.items():
            click.echo(f"warning: {name} not mounted: {reason}", err=True)
        # Everything loaded so far lives as long as the server: move it out of the collector's
        # way, so a full collection walks only what requests create (shorter pauses in p99).
        gc.collect()
        gc.freeze()
        shown = f"[{host}]" if ":" in host else host
        click.echo(
            f"plaudit serving {p.backend.describe()} on http://{shown}:{port}/ "
            f"(writes {'need the token' if token else 'are open'}; Ctrl-C stops)",
            err=True,
        )
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level=log_level,
            access_log=access_log,
            server_header=False,
            timeout_graceful_shutdown=5,
        )
    finally:
        p.close()


__all__ = ["allowed_hosts", "is_loopback", "serve"]
