"""The `traceparent` header: each request's events carry the caller's W3C trace context.

One middleware reads `traceparent` (and `tracestate`) and sets the library's trace context
(`plaudit.tracecontext`) for the rest of the request; route handlers, which run in worker
threads, inherit it. A malformed header is answered 422 naming it, before any route runs.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from plaudit.errors import ValidationError
from plaudit.server.responses import send_error
from plaudit.tracecontext import trace_context


def header_context(scope: Scope) -> tuple[str | None, str | None]:
    """The request's `traceparent` and `tracestate` header values (None when absent)."""
    parent = state = None
    for name, value in scope.get("headers", ()):
        if name == b"traceparent":
            parent = value.decode("latin-1")
        elif name == b"tracestate":
            state = value.decode("latin-1") if state is None else f"{state},{value.decode()}"
    return parent, state


class TraceContextMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        parent, state = header_context(scope)
        if parent is None:
            await self.app(scope, receive, send)
            return
        try:
            context = trace_context(parent, tracestate=state, field="traceparent header")
            context.__enter__()
        except ValidationError as exc:
            await send_error(send, 422, "ValidationError", str(exc), field=exc.field)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            context.__exit__(None, None, None)


__all__ = ["TraceContextMiddleware", "header_context"]
