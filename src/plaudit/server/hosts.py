"""Answer only requests that come from, and are addressed to, where we expect.

Two guards in one middleware, both about a server without a token trusting whoever reaches it:

- **Host names** (DNS rebinding). A web page on another origin can reach 127.0.0.1 if its DNS
  name is rebound to it; the browser then sends that name in `Host`, which is refused.
- **Peers** (`local_only`). An app embedded without a token and served on a public address must
  not take requests from other machines, whatever its ASGI server was told.

Both judge network clients. A client the ASGI server does not report as an IP address is an
in-process transport (a test client): no browser and no other machine can be behind it, so
only host names given explicitly are checked for it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from functools import lru_cache

from starlette.types import ASGIApp, Receive, Scope, Send

from plaudit.server.guards import LOOPBACK_NAMES
from plaudit.server.responses import send_error


def host_name(header: str) -> str:
    """`example.com:80` -> `example.com`; `[::1]:8377` -> `::1`."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.partition(":")[0]


def peer_kind(scope: Scope) -> str:
    """'loopback', 'remote', 'socket' (a unix socket: no address) or 'in-process'."""
    client = scope.get("client")
    if not client:
        return "socket"
    return _address_kind(str(client[0]))


@lru_cache(maxsize=4096)  # a server sees the same few peers over and over
def _address_kind(host: str) -> str:
    try:
        address = ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return "in-process"
    if address.is_loopback:
        return "loopback"
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 on a dual-stack socket
    return "loopback" if mapped is not None and mapped.is_loopback else "remote"


class HostGuard:
    def __init__(
        self, app: ASGIApp, allowed: Iterable[str] | None = None, *, local_only: bool = False
    ) -> None:
        self.app = app
        self.explicit = allowed is not None
        names = LOOPBACK_NAMES if allowed is None else allowed
        self.allowed = frozenset(host_name(h) if h.startswith("[") else h.lower() for h in names)
        self.local_only = local_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the app has no websocket routes; lifespan passes
            await self.app(scope, receive, send)
            return
        kind = peer_kind(scope)
        if self.local_only and kind == "remote":
            await send_error(
                send,
                403,
                "NotLocal",
                "this server has no token, so it answers only to clients on its own machine; "
                "give it a token (create_app(token=...), plaudit serve --token or $PLAUDIT_TOKEN)",
            )
            return
        if self.explicit or (self.local_only and kind != "in-process"):
            header = ""
            for name, value in scope.get("headers", ()):
                if name == b"host":
                    header = value.decode("latin-1")
                    break
            if host_name(header) not in self.allowed:
                await send_error(
                    send,
                    400,
                    "BadHost",
                    f"Host {header!r} is not one this server answers to "
                    f"(expected one of: {', '.join(sorted(self.allowed))})",
                )
                return
        await self.app(scope, receive, send)


__all__ = ["HostGuard", "host_name", "peer_kind"]
