"""Who may talk to the server: the rules every embedding of `create_app` applies.

A server without a token trusts whoever reaches it, so it must only be reachable from this
machine. `check_serving` refuses, before anything is opened, an address other machines can
reach and a CORS setting that would let any web page write; `create_app` calls it, and
`plaudit serve` calls it first so a refusal leaves no store behind. An application that embeds
the app without saying where it listens still gets the same rule at request time: without a
token, `HostGuard` refuses clients that are not on this machine.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable
from urllib.parse import urlsplit

from plaudit.errors import ConfigError

log = logging.getLogger("plaudit.server")

ENV_TOKEN = "PLAUDIT_TOKEN"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def is_loopback(host: str) -> bool:
    """True only for addresses that other machines cannot reach."""
    name = host.strip().strip("[]").lower()
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
    return sorted({*LOOPBACK_NAMES, host.strip().strip("[]").lower()})


def normalize_token(token: str | None) -> str | None:
    """Surrounding whitespace is never part of a token (it is lost in a header anyway)."""
    token = (token or "").strip()
    if token and not token.isascii():
        log.warning(
            "the server's token has non-ASCII characters: many HTTP clients cannot send them "
            "in a header; such a client's writes will be refused (401)"
        )
    return token or None


def check_origins(origins: Iterable[str], token: str | None) -> list[str]:
    """CORS origins as browsers send them: `scheme://host[:port]`, nothing after it."""
    checked: list[str] = []
    for origin in origins:
        if origin == "*":
            if token is None:
                raise ConfigError(
                    "CORS origin '*' without a token would let any web page write to the log; "
                    f"set a token (--token or ${ENV_TOKEN}) or list the origins you trust"
                )
            checked.append(origin)
            continue
        parts = urlsplit(origin)
        if (
            parts.scheme not in ("http", "https")
            or not parts.netloc
            or parts.path
            or parts.query
            or parts.fragment
            or "@" in parts.netloc
        ):
            raise ConfigError(
                f"CORS origin {origin!r} must look like https://example.com or "
                "http://localhost:3000 (a scheme and a host, no path, no trailing slash)"
            )
        checked.append(origin)
    return checked


def check_serving(host: str | None, token: str | None, cors_origins: Iterable[str] = ()) -> None:
    """Refuse settings that would expose an unauthenticated log (`ConfigError`)."""
    if host is not None and not is_loopback(host) and token is None:
        raise ConfigError(
            f"refusing to listen on {host!r} without a token: anyone who can reach it could "
            f"write to the log. Pass --token or set ${ENV_TOKEN}, or use --host 127.0.0.1."
        )
    check_origins(cors_origins, token)


__all__ = [
    "ENV_TOKEN",
    "LOOPBACK_NAMES",
    "allowed_hosts",
    "check_origins",
    "check_serving",
    "is_loopback",
    "normalize_token",
]
