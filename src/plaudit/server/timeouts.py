"""Slow and idle clients are cut off: three deadlines on every connection.

uvicorn closes a kept-alive connection that sits idle after a response, but nothing else: a
connection that never sends a byte, or sends its headers one byte every few seconds, is held
open for ever, and a few hundred of them exhaust the server's file descriptors. An ASGI app
cannot help, since it is only called once the headers are complete. So `plaudit serve` runs
uvicorn with its own HTTP protocol classes, the stock ones plus three deadlines:

- **idle**: a connection with no request under way (just opened, or after a response) is
  closed after `idle` seconds (uvicorn's keep-alive timeout covers the after-a-response case);
- **headers**: from the first byte of a request, its request line and headers must be
  complete within `headers` seconds (a total, so dripping bytes does not reset it); else the
  client gets a 408 and the connection is closed;
- **body**: from the end of the headers, the body must be complete within `body` seconds. The
  app answers that with a JSON 408 (`plaudit.server.limits`); the protocol closes the
  connection a second later should the app not have.

The deadlines watch uvicorn's per-request state (`cycle`: a new one once the headers are parsed,
its `more_body` false once the body is in) in both of its HTTP implementations, httptools and
h11; `tests/server/test_http_timeouts.py` drives both with real sockets.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Any

from plaudit.errors import ConfigError
from plaudit.server.limits import DEFAULT_BODY_TIMEOUT
from plaudit.server.responses import error_body, json_bytes

#: How much later than the app's own body deadline the protocol closes the connection itself.
BODY_GRACE = 1.0


@dataclass(frozen=True)
class Timeouts:
    """Seconds a client may take; see the module's docstring for when each one runs."""

    headers: float = 10.0
    body: float = DEFAULT_BODY_TIMEOUT
    idle: float = 5.0

    def __post_init__(self) -> None:
        for name in ("headers", "body", "idle"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or not 0 < value <= 86_400
            ):
                raise ConfigError(
                    f"timeout {name!r} must be a number of seconds above 0 and at most 86400, "
                    f"not {value!r}"
                )


def _timeout_response() -> bytes:
    body = json_bytes(
        error_body("RequestTimeout", "the request headers did not arrive in time; send them whole")
    )
    head = (
        "HTTP/1.1 408 Request Timeout\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class _Deadlines:
    """Mixed in before one of uvicorn's HTTP protocol classes (which give the attributes used
    here: `loop`, `transport`, `cycle`)."""

    timeouts: Timeouts = Timeouts()
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: Any

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._deadline: asyncio.TimerHandle | None = None
        self._deadline_for: str | None = None
        self._seen_cycle: Any = None
        self._arm("idle", self.timeouts.idle)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is not None and cycle is not self._seen_cycle:  # a request's headers are in
            self._seen_cycle = cycle
            self._cancel()
        if cycle is None or cycle.response_complete or cycle is not self._seen_cycle:
            # Bytes with no request under way: the start of the next request (or the rest of a
            # body the app answered without reading, which never completes a header block).
            if self._deadline_for != "headers":
                self._arm("headers", self.timeouts.headers)
        elif cycle.more_body:
            if self._deadline_for != "body":
                self._arm("body", self.timeouts.body + BODY_GRACE)
        else:
            self._cancel()  # the request is in; the app's time is not the client's

    def on_response_complete(self) -> None:
        self._cancel()  # idle from here on: uvicorn's keep-alive timer (= timeouts.idle)
        super().on_response_complete()  # type: ignore[misc]

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)  # type: ignore[misc]

    def _arm(self, what: str, seconds: float) -> None:
        self._cancel()
        self._deadline_for = what
        self._deadline = self.loop.call_later(seconds, self._expire)

    def _cancel(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = None
        self._deadline_for = None

    def _expire(self) -> None:
        what, self._deadline, self._deadline_for = self._deadline_for, None, None
        if self.transport.is_closing():
            return
        if what == "headers":
            self.transport.write(_timeout_response())
        self.transport.close()


def protocol_class(timeouts: Timeouts, implementation: str = "auto") -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (`httptools` when installed, else `h11`) with the deadlines."""
    base: type[Any]
    if implementation in ("auto", "httptools"):
        try:
            from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base
        except ImportError:
            if implementation == "httptools":
                raise
            from uvicorn.protocols.http.h11_impl import H11Protocol as base
    elif implementation == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol as base
    else:
        raise ConfigError(f"unknown HTTP implementation {implementation!r} (auto, httptools, h11)")
    return type(f"Deadline{base.__name__}", (_Deadlines, base), {"timeouts": timeouts})


__all__ = ["Timeouts", "protocol_class"]
