"""Request body limits, in size and in time, enforced on the raw ASGI byte stream.

A `Content-Length` check alone is not enough: chunked uploads carry no length, and a client can
lie. The middleware therefore reads the body itself, counting bytes as they arrive, and answers
413 as soon as the count passes the limit, before any route (or JSON parser) sees a byte. Bodies
under the limit are replayed to the app unchanged.

The whole body must also arrive within `timeout` seconds of the headers, or the client gets a
408 and the connection is closed: a client dripping a byte now and then would otherwise hold a
connection, and a worker's memory, for as long as it likes. This is the only slow-client limit
an ASGI app can enforce by itself; the header and idle limits belong to the server
(`plaudit.server.timeouts`).
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from plaudit.server.responses import send_error

DEFAULT_MAX_BODY_BYTES = 2 * 1024 * 1024
DEFAULT_BODY_TIMEOUT = 30.0


async def _send_413(send: Send, limit: int, seen: int | None) -> None:
    how = f"{seen} bytes" if seen is not None else "more bytes"
    message = f"request body has {how}; this server accepts at most {limit} bytes"
    await send_error(send, 413, "PayloadTooLarge", message, limit=limit)


async def _send_408(send: Send, timeout: float, seen: int) -> None:
    message = (
        f"the request body did not arrive within {timeout:g} s ({seen} bytes came); "
        "send the whole body promptly"
    )
    await send_error(send, 408, "RequestTimeout", message, limit=timeout)


class BodySizeLimit:
    """Reject HTTP requests whose body exceeds `max_bytes` (a JSON 413) or takes longer than
    `timeout` seconds to arrive (a JSON 408); `timeout=None` waits for ever."""

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int = DEFAULT_MAX_BODY_BYTES,
        timeout: float | None = DEFAULT_BODY_TIMEOUT,
    ) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        if timeout is not None and not timeout > 0:
            raise ValueError("timeout must be a positive number of seconds, or None")
        self.app = app
        self.max_bytes = max_bytes
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await _send_413(send, self.max_bytes, declared)
            return
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.timeout):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":  # client went away: nothing to answer
                        return
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.max_bytes:
                        await _send_413(send, self.max_bytes, None)
                        return
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            await _send_408(send, self.timeout or 0.0, size)
            return
        await self.app(scope, _replay(b"".join(chunks), receive), send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # later calls wait for the disconnect, as the app expects

    return replay


__all__ = ["DEFAULT_BODY_TIMEOUT", "DEFAULT_MAX_BODY_BYTES", "BodySizeLimit"]
