"""OTLP trace payloads (an `ExportTraceServiceRequest`) in, plain `Span`s out.

Both encodings OTLP/HTTP uses: JSON (decoded with msgspec into typed structs, so a field of the
wrong type is refused with its path) and protobuf (the `opentelemetry-proto` messages that the
`otel` extra installs). A whole payload is checked before any span is returned: one malformed
span refuses it all, naming where it is.
"""

from __future__ import annotations

import base64
import re
import zlib
from dataclasses import dataclass, field
from typing import Any

import msgspec

from plaudit.errors import ValidationError

#: Largest payload read, after decompression (a compressed bomb stops here).
MAX_PAYLOAD_BYTES = 64 << 20
SPAN_KIND_CLIENT = 3
_HEX32 = re.compile(r"^[0-9a-fA-F]{32}$")
_HEX16 = re.compile(r"^[0-9a-fA-F]{16}$")


class TracePayloadError(ValidationError):
    """A trace payload that cannot be read; OTLP/HTTP answers it with 400."""

    http_status = 400


@dataclass(slots=True)
class Span:
    """What plaudit reads of one span. Attribute values are plain: str, bool, int, float,
    lists and dicts (OTLP's arrays and key-value lists)."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: int
    start_ns: int
    end_ns: int
    #: The status message (or "error") when the span's status is ERROR, else None.
    error: str | None
    attributes: dict[str, Any] = field(default_factory=dict)
    #: (name, attributes) of each span event, in order.
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    service: str | None = None

    @property
    def start_ms(self) -> int:
        return self.start_ns // 1_000_000

    @property
    def duration_ms(self) -> float:
        return max(self.end_ns - self.start_ns, 0) / 1e6


# -- JSON -------------------------------------------------------------------------------------


class _AnyValue(msgspec.Struct, rename="camel", omit_defaults=True):
    string_value: str | None = None
    bool_value: bool | None = None
    int_value: int | str | None = None
    double_value: float | int | str | None = None
    array_value: _Array | None = None
    kvlist_value: _KvList | None = None
    bytes_value: str | None = None


class _KeyValue(msgspec.Struct, rename="camel"):
    key: str
    value: _AnyValue | None = None


class _Array(msgspec.Struct, rename="camel"):
    values: list[_AnyValue] = []


class _KvList(msgspec.Struct, rename="camel"):
    values: list[_KeyValue] = []


class _Status(msgspec.Struct, rename="camel"):
    message: str = ""
    code: int | str = 0


class _Event(msgspec.Struct, rename="camel"):
    name: str = ""
    attributes: list[_KeyValue] = []


class _Span(msgspec.Struct, rename="camel"):
    trace_id: str
    span_id: str
    parent_span_id: str = ""
    name: str = ""
    kind: int | str = 0
    start_time_unix_nano: int | str = 0
    end_time_unix_nano: int | str = 0
    attributes: list[_KeyValue] = []
    events: list[_Event] = []
    status: _Status | None = None


class _ScopeSpans(msgspec.Struct, rename="camel"):
    spans: list[_Span] = []


class _Resource(msgspec.Struct, rename="camel"):
    attributes: list[_KeyValue] = []


class _ResourceSpans(msgspec.Struct, rename="camel"):
    resource: _Resource | None = None
    scope_spans: list[_ScopeSpans] = []


class _Request(msgspec.Struct, rename="camel"):
    resource_spans: list[_ResourceSpans] = []


_decode_request = msgspec.json.Decoder(_Request).decode
_STATUS_ERROR = {2, "2", "STATUS_CODE_ERROR"}
_KINDS = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}


def _json_value(v: _AnyValue | None, where: str) -> Any:
    if v is None:
        return None
    if v.string_value is not None:
        return v.string_value
    if v.bool_value is not None:
        return v.bool_value
    if v.int_value is not None:
        return _int(v.int_value, where)
    if v.double_value is not None:
        try:
            return float(v.double_value)
        except ValueError:
            raise TracePayloadError(where, "doubleValue is not a number") from None
    if v.array_value is not None:
        return [_json_value(x, f"{where}[{i}]") for i, x in enumerate(v.array_value.values)]
    if v.kvlist_value is not None:
        return _json_attrs(v.kvlist_value.values, where)
    if v.bytes_value is not None:
        return v.bytes_value
    return None


def _json_attrs(items: list[_KeyValue], where: str) -> dict[str, Any]:
    return {kv.key: _json_value(kv.value, f"{where}.{kv.key}") for kv in items}


def _int(value: int | str, where: str) -> int:
    if isinstance(value, int):
        return value
    if not value.isascii() or not value.lstrip("-").isdigit():
        raise TracePayloadError(where, f"{value[:40]!r} is not an integer")
    return int(value)


def _id(value: str, pattern: re.Pattern[str], where: str, *, empty: bool = False) -> str:
    if empty and not value:
        return ""
    if pattern.match(value) is None or not value.strip("0"):
        size = 32 if pattern is _HEX32 else 16
        raise TracePayloadError(where, f"{value[:40]!r} is not {size} hex digits (nonzero)")
    return value.lower()


def decode_json(body: bytes) -> list[Span]:
    """An OTLP/JSON `ExportTraceServiceRequest` (trace and span ids in hex, as OTLP says)."""
    try:
        request = _decode_request(body)
    except msgspec.ValidationError as exc:
        raise TracePayloadError("body", f"not an OTLP trace request: {exc}") from None
    except msgspec.DecodeError as exc:
        raise TracePayloadError("body", f"malformed JSON: {exc}") from None
    spans: list[Span] = []
    for i, rs in enumerate(request.resource_spans):
        resource = _json_attrs(rs.resource.attributes, "resource") if rs.resource else {}
        service = resource.get("service.name")
        for j, ss in enumerate(rs.scope_spans):
            for k, s in enumerate(ss.spans):
                at = f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}]"
                status = s.status
                error = None
                if status is not None and status.code in _STATUS_ERROR:
                    error = status.message or "error"
                kind = _KINDS.get(s.kind, 0) if isinstance(s.kind, str) else s.kind
                spans.append(
                    Span(
                        trace_id=_id(s.trace_id, _HEX32, f"{at}.traceId"),
                        span_id=_id(s.span_id, _HEX16, f"{at}.spanId"),
                        parent_id=_id(s.parent_span_id, _HEX16, f"{at}.parentSpanId", empty=True),
                        name=s.name,
                        kind=kind,
                        start_ns=_int(s.start_time_unix_nano, f"{at}.startTimeUnixNano"),
                        end_ns=_int(s.end_time_unix_nano, f"{at}.endTimeUnixNano"),
                        error=error,
                        attributes=_json_attrs(s.attributes, f"{at}.attributes"),
                        events=[
                            (e.name, _json_attrs(e.attributes, f"{at}.events[{n}]"))
                            for n, e in enumerate(s.events)
                        ],
                        service=service if isinstance(service, str) else None,
                    )
                )
    return spans


# -- protobuf ----------------------------------------------------------------------------------


def _pb_value(v: Any) -> Any:
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_pb_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return _pb_attrs(v.kvlist_value.values)
    if which == "bytes_value":
        return base64.b64encode(v.bytes_value).decode()
    return getattr(v, which)


def _pb_attrs(items: Any) -> dict[str, Any]:
    return {kv.key: _pb_value(kv.value) for kv in items}


def decode_protobuf(body: bytes) -> list[Span]:
    """An OTLP/protobuf `ExportTraceServiceRequest` (needs the otel extra)."""
    from plaudit.extras import need

    need("opentelemetry.proto", extra="otel", feature="reading OTLP protobuf traces")
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    try:
        request = ExportTraceServiceRequest.FromString(body)
    except (DecodeError, ValueError) as exc:
        raise TracePayloadError("body", f"not an OTLP protobuf trace request: {exc}") from None
    spans: list[Span] = []
    for i, rs in enumerate(request.resource_spans):
        service = _pb_attrs(rs.resource.attributes).get("service.name")
        for j, ss in enumerate(rs.scope_spans):
            for k, s in enumerate(ss.spans):
                at = f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}]"
                spans.append(
                    Span(
                        trace_id=_id(s.trace_id.hex(), _HEX32, f"{at}.traceId"),
                        span_id=_id(s.span_id.hex(), _HEX16, f"{at}.spanId"),
                        parent_id=_id(
                            s.parent_span_id.hex(), _HEX16, f"{at}.parentSpanId", empty=True
                        ),
                        name=s.name,
                        kind=int(s.kind),
                        start_ns=int(s.start_time_unix_nano),
                        end_ns=int(s.end_time_unix_nano),
                        error=(s.status.message or "error") if s.status.code == 2 else None,
                        attributes=_pb_attrs(s.attributes),
                        events=[(e.name, _pb_attrs(e.attributes)) for e in s.events],
                        service=service if isinstance(service, str) else None,
                    )
                )
    return spans


# -- bodies ------------------------------------------------------------------------------------


def inflate(body: bytes, encoding: str | None) -> bytes:
    """The body without its Content-Encoding (gzip or deflate), bounded in size."""
    encoding = (encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        data = body
    elif encoding in ("gzip", "deflate"):
        wbits = 31 if encoding == "gzip" else 15
        d = zlib.decompressobj(wbits)
        try:
            data = d.decompress(body, MAX_PAYLOAD_BYTES + 1)
        except zlib.error as exc:
            raise TracePayloadError("body", f"is not valid {encoding}: {exc}") from None
    else:
        raise TracePayloadError("Content-Encoding", f"{encoding!r} is not gzip or identity")
    if len(data) > MAX_PAYLOAD_BYTES:
        raise TracePayloadError("body", f"larger than {MAX_PAYLOAD_BYTES} bytes decompressed")
    return data


def decode(body: bytes, content_type: str | None = None) -> list[Span]:
    """A trace payload in either encoding: protobuf unless `content_type` says JSON (or, with
    no content type, the body looks like JSON)."""
    kind = (content_type or "").split(";")[0].strip().lower()
    if kind == "application/json" or (not kind and body.lstrip()[:1] in (b"{", b"[")):
        return decode_json(body)
    if kind in ("", "application/x-protobuf", "application/protobuf", "application/octet-stream"):
        return decode_protobuf(body)
    raise TracePayloadError(
        "Content-Type", f"{kind!r} is not application/x-protobuf or application/json"
    )


def decode_file(data: bytes) -> list[Span]:
    """An exported trace file: one OTLP/JSON request, JSON Lines of them (what the
    OpenTelemetry Collector's file exporter writes), or one protobuf request; gzip allowed."""
    if data[:2] == b"\x1f\x8b":
        data = inflate(data, "gzip")
    stripped = data.lstrip()
    if stripped[:1] != b"{":
        return decode_protobuf(data)
    try:
        return decode_json(data)
    except TracePayloadError:
        lines = [ln for ln in data.splitlines() if ln.strip()]
        if len(lines) < 2:
            raise
    spans: list[Span] = []
    for n, line in enumerate(lines, 1):
        try:
            spans += decode_json(line)
        except TracePayloadError as exc:
            raise TracePayloadError(exc.field, exc.reason, where=f"line {n}") from None
    return spans


__all__ = [
    "MAX_PAYLOAD_BYTES",
    "SPAN_KIND_CLIENT",
    "Span",
    "TracePayloadError",
    "decode",
    "decode_file",
    "decode_json",
    "decode_protobuf",
    "inflate",
]
