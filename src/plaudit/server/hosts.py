"""Answer only requests addressed to this server by a name we expect (DNS-rebinding guard).

A server on 127.0.0.1 without a token trusts whoever can reach it, i.e. local processes. A web
page on another origin can reach it too if its DNS name is rebound to 127.0.0.1; the browser
then sends that name in `Host`, which this guard refuses.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from plaudit.server.responses import error_body, json_bytes


def host_name(header: str) -> str:
    """`example.com:80` -> `example.com`; `[::1]:8377` -> `::1`."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.partition(":")[0]


class HostGuard:
    def __init__(self, app: ASGIApp, allowed: Iterable[str]) -> None:
        self.app = app
        self.allowed = frozenset(host_name(h) if h.startswith("[") else h.lower() for h in allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        header = ""
        for name, value in scope.get("headers", ()):
            if name == b"host":
                header = value.decode("latin-1")
                break
        name = host_name(header)
        if name in self.allowed:
            await self.app(scope, receive, send)
            return
        body = json_bytes(
            error_body(
                "BadHost",
                f"Host {header!r} is not one this server answers to "
                f"(expected one of: {', '.join(sorted(self.allowed))})",
            )
        )
        await send(
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


__all__ = ["HostGuard", "host_name"]
