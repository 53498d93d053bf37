"""Request body size limit, enforced on the raw ASGI byte stream.

A `Content-Length` check alone is not enough: chunked uploads carry no length, and a client can
lie. The middleware therefore reads the body itself, counting bytes as they arrive, and answers
413 as soon as the count passes the limit, before any route (or JSON parser) sees a byte. Bodies
under the limit are replayed to the app unchanged.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from plaudit.server.responses import error_body, json_bytes

DEFAULT_MAX_BODY_BYTES = 2 * 1024 * 1024


async def _send_413(send: Send, limit: int, seen: int | None) -> None:
    how = f"{seen} bytes" if seen is not None else "more bytes"
    body = json_bytes(
        error_body(
            "PayloadTooLarge",
            f"request body has {how}; this server accepts at most {limit} bytes",
            limit=limit,
        )
    )
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodySizeLimit:
    """Reject HTTP requests whose body exceeds `max_bytes` with a JSON 413."""

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        self.app = app
        self.max_bytes = max_bytes

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


__all__ = ["DEFAULT_MAX_BODY_BYTES", "BodySizeLimit"]
