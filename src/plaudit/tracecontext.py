"""W3C trace context on events: which trace (and span) a fact belongs to.

An evaluation is only useful to a tracing backend (Langfuse, Phoenix, Tempo) when it names the
span it judges. So every event plaudit writes may carry a W3C `traceparent` (and `tracestate`)
in its `meta`: transport details, outside the content digest, so a retry under another trace
is still the same event.

The context travels beside the calls, not through their signatures: a context variable that
`make_event` copies into each new event's meta. Surfaces set it from where their callers put
it (HTTP: the `traceparent` header; the CLI: `--traceparent` or `$TRACEPARENT`, the
OpenTelemetry convention for environment carriers; MCP: a tool argument or `_meta`), the
Python API with :func:`trace_context`. Without one, the current OpenTelemetry span is used
when the OpenTelemetry API is loaded and a span is active.

This module is imported by `plaudit.events`, which shell hooks load: it keeps to `re` and
`contextvars` at import and looks OpenTelemetry up only if something else imported it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from plaudit.errors import ValidationError

TYPE_CHECKING = False  # typing costs a shell hook ~10 ms to import
if TYPE_CHECKING:
    from typing import Any, TypeVar

    T = TypeVar("T")

#: version-traceid-parentid-flags; a later version may append fields after another dash.
#: Patterns are compiled on first use (`re` caches them): shell hooks import this module.
_TRACEPARENT = r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$"
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
#: The spec's limit for tracestate: 32 list members of at most 256 characters each.
MAX_TRACESTATE = 32 * 257
_TRACESTATE_BAD = r"[^\x20-\x7e]"


class TraceContext:
    """One W3C trace context: the trace, the span (the caller's current span), its flags."""

    __slots__ = ("flags", "span_id", "trace_id", "tracestate")

    def __init__(
        self, trace_id: str, span_id: str, flags: str = "01", tracestate: str | None = None
    ) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.flags = flags
        self.tracestate = tracestate or None

    @property
    def traceparent(self) -> str:
        return f"00-{self.trace_id}-{self.span_id}-{self.flags}"

    @property
    def sampled(self) -> bool:
        return bool(int(self.flags, 16) & 1)

    def to_meta(self) -> dict[str, str]:
        """What an event's meta holds: the header values, as they would travel."""
        out = {"traceparent": self.traceparent}
        if self.tracestate:
            out["tracestate"] = self.tracestate
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TraceContext) and (
            self.trace_id,
            self.span_id,
            self.flags,
            self.tracestate,
        ) == (other.trace_id, other.span_id, other.flags, other.tracestate)

    def __hash__(self) -> int:
        return hash((self.trace_id, self.span_id, self.flags, self.tracestate))

    def __repr__(self) -> str:
        return f"TraceContext({self.traceparent!r})"


def parse_traceparent(
    value: Any, *, tracestate: Any = None, field: str = "traceparent"
) -> TraceContext:
    """Check a `traceparent` (and `tracestate`) value against the W3C format; errors name
    `field`. A version above 00 is read as 00, as the spec asks, when its first four fields
    have the 00 layout."""
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, got {type(value).__name__}")
    text = value.strip()
    m = re.match(_TRACEPARENT, text)
    if m is None:
        raise ValidationError(
            field,
            f"{value[:80]!r} is not a W3C traceparent: expected "
            "'00-<32 hex trace id>-<16 hex span id>-<2 hex flags>', lowercase",
        )
    version, trace_id, span_id, flags, rest = m.groups()
    if version == "ff":
        raise ValidationError(field, "version ff is not allowed")
    if version == "00" and rest:
        raise ValidationError(field, "version 00 has exactly four fields")
    if trace_id == _ZERO_TRACE:
        raise ValidationError(field, "the trace id is all zeros, which means no trace")
    if span_id == _ZERO_SPAN:
        raise ValidationError(field, "the span id is all zeros, which means no span")
    state = None
    if tracestate is not None:
        state_field = "tracestate" if field == "traceparent" else f"{field} tracestate"
        if not isinstance(tracestate, str):
            raise ValidationError(state_field, f"must be a string, got {type(tracestate).__name__}")
        if len(tracestate) > MAX_TRACESTATE or re.search(_TRACESTATE_BAD, tracestate):
            raise ValidationError(state_field, "must be printable ASCII of at most 32 list members")
        state = tracestate.strip() or None
    return TraceContext(trace_id, span_id, flags, state)


#: The context callers set. `NO_TRACE` says "explicitly none": OpenTelemetry is not asked.
_current: ContextVar[TraceContext | None] = ContextVar("plaudit_trace", default=None)
NO_TRACE = TraceContext(_ZERO_TRACE, _ZERO_SPAN, "00")


@contextmanager
def trace_context(
    traceparent: str | TraceContext | None = None,
    *,
    tracestate: str | None = None,
    field: str = "traceparent",
) -> Iterator[TraceContext | None]:
    """Events made inside this block carry `traceparent` (validated; errors name `field`).

    `traceparent=None` changes nothing, so a surface can pass an optional value straight in.
    Yields the context in force."""
    if traceparent is None:
        yield current_trace()
        return
    tc = (
        traceparent
        if isinstance(traceparent, TraceContext)
        else parse_traceparent(traceparent, tracestate=tracestate, field=field)
    )
    token = _current.set(tc)
    try:
        yield tc
    finally:
        _current.reset(token)


def current_trace() -> TraceContext | None:
    """The trace context new events get: the one set with :func:`trace_context`, else the
    current OpenTelemetry span's, when the OpenTelemetry API is loaded and a span is active."""
    tc = _current.get()
    if tc is not None:
        return None if tc is NO_TRACE else tc
    otel = sys.modules.get("opentelemetry.trace")
    if otel is None:
        return None
    try:
        sc = otel.get_current_span().get_span_context()
    except Exception:  # a broken or half-configured SDK must not stop a write
        return None
    if not sc.is_valid:
        return None
    state = sc.trace_state.to_header() if sc.trace_state else ""
    return TraceContext(
        f"{sc.trace_id:032x}", f"{sc.span_id:016x}", f"{int(sc.trace_flags):02x}", state or None
    )


def with_trace(meta: dict[str, Any]) -> dict[str, Any]:
    """`meta` plus the current trace context, unless it names one already (a restored or
    imported event keeps its own)."""
    if "traceparent" in meta:
        return meta
    tc = current_trace()
    if tc is not None:
        meta.update(tc.to_meta())
    return meta


def trace_of(meta: Any) -> TraceContext | None:
    """The trace context an event's meta carries, or None (also for a malformed one: meta
    written by another tool is read, never trusted)."""
    if not isinstance(meta, dict):
        return None
    value = meta.get("traceparent")
    if not isinstance(value, str):
        return None
    try:
        return parse_traceparent(value, tracestate=meta.get("tracestate"))
    except ValidationError:
        return None


__all__ = [
    "NO_TRACE",
    "TraceContext",
    "current_trace",
    "parse_traceparent",
    "trace_context",
    "trace_of",
    "with_trace",
]
