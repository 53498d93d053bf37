"""`/mcp`: plaudit's MCP tools over streamable HTTP, behind the app's token and host guards.

The app's middleware (host guard, body limit, trace context) already wraps every route; the
token is checked here for every MCP request, since most tools write. Without the `mcp` extra
nothing is mounted and `/v1/health` lists why under `skipped_routes`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from plaudit.errors import MissingExtraError
from plaudit.server.deps import NEEDS_TOKEN, bearer_matches
from plaudit.server.responses import send_error

PATH = "/mcp"
MODULE = "plaudit.mcp"


class RequireToken:
    """Refuse requests without the server's bearer token (when it has one)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.token and scope["type"] == "http":
            header = next((v for k, v in scope.get("headers", ()) if k == b"authorization"), b"")
            if not bearer_matches(header, self.token):
                await send_error(
                    send,
                    401,
                    "Unauthorized",
                    NEEDS_TOKEN,
                    headers=((b"www-authenticate", b"Bearer"),),
                )
                return
        await self.app(scope, receive, send)


def mount_mcp(app: FastAPI, plaudit: Any, *, token: str | None, export_root: str | None) -> None:
    """Mount the MCP endpoint, or record in `app.state.skipped_routes` why not."""
    try:
        from plaudit.mcp import require_sdk

        require_sdk()
        from plaudit.mcp.server import http_app
    except MissingExtraError as exc:
        app.state.skipped_routes[MODULE] = str(exc)
        return
    asgi, run = http_app(plaudit, root=export_root)

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        async with run():
            yield

    app.include_router(APIRouter(lifespan=lifespan))
    endpoint = RequireToken(asgi, token)
    app.router.routes.append(Route(PATH, endpoint=endpoint, methods=["GET", "POST", "DELETE"]))


__all__ = ["PATH", "RequireToken", "mount_mcp"]
