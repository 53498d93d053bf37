"""`plaudit mcp`: plaudit's tools for agents over the Model Context Protocol, on stdio."""

from __future__ import annotations

import click

from plaudit.cli._common import db_option, open_store


@click.command("mcp")
@db_option
def mcp(db: str | None) -> None:
    """Serve plaudit's MCP tools and resources over stdin/stdout, for agent hosts that start a
    command (needs plaudit[mcp]). Over HTTP, `plaudit serve` has them at /mcp."""
    from plaudit.mcp import require_sdk

    require_sdk()
    import anyio

    from plaudit.mcp.server import serve_stdio

    with open_store(db, create=True) as p:  # a new store is announced on stderr, never stdout
        anyio.run(serve_stdio, p)
