"""The event model: what every fact in the log looks like, and how it is checked on the way in.

Events are msgspec Structs rather than pydantic models because the append and import paths
validate hundreds of thousands of events a second and the emitter's start-up time matters.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from typing import Any

import msgspec

from plaudit.errors import ValidationError
from plaudit.ids import now_ms, uuid7

#: Largest canonical payload accepted, in bytes.
MAX_PAYLOAD_BYTES = 1 << 20
MAX_DEPTH = 64
MAX_ID_LEN = 200
MAX_NAME_LEN = 256
# Largest integer JSON consumers (and IEEE doubles) represent exactly.
MAX_SAFE_INT = 2**53 - 1

# Namespaced: at least two dot-separated segments. plaudit's own types end in `.vN`.
TYPE_RE = re.compile(r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)+$")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")

SEP = "\x1f"  # unit separator: cannot occur in validated text fields or in encoded JSON


class Event(msgspec.Struct, frozen=True, kw_only=True):
    """One fact. `meta` carries transport details (e.g. seq_mem's dur_us) outside the payload."""

    id: str
    type: str
    ts_ms: int
    session_id: str
    source: str
    payload: dict[str, Any]
    meta: dict[str, Any] = msgspec.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return msgspec.structs.asdict(self)


class StoredEvent(Event, frozen=True, kw_only=True):
    """An event as committed: its position in the log and its chain hash."""

    seq: int
    hash: str = ""


_encoder = msgspec.json.Encoder(order="sorted")


def encode_json(value: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, UTF-8. The hash chain depends on it."""
    return _encoder.encode(value).decode()


def _check_text(field: str, value: Any, *, max_len: int, allow_empty: bool, where: str | None):
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, got {type(value).__name__}", where=where)
    if not value and not allow_empty:
        raise ValidationError(field, "must not be empty", where=where)
    if len(value) > max_len:
        raise ValidationError(field, f"longer than {max_len} characters", where=where)
    if _CONTROL_RE.search(value):
        raise ValidationError(field, "contains a control character", where=where)
    try:
        value.encode()
    except UnicodeEncodeError:
        raise ValidationError(field, "is not valid Unicode text", where=where) from None
    return value


def _check_json(value: Any, path: str, depth: int, where: str | None) -> None:
    """Reject what JSON cannot carry faithfully (NaN, non-string keys, sets, ...)."""
    if depth > MAX_DEPTH:
        raise ValidationError(path, f"nested deeper than {MAX_DEPTH} levels", where=where)
    t = type(value)
    if t is str or t is bool or value is None:
        return
    if t is int:
        if not -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
            raise ValidationError(path, "integer outside the JSON-safe range ±2^53", where=where)
        return
    if t is float:
        if not math.isfinite(value):
            raise ValidationError(path, f"{value!r} is not valid JSON", where=where)
        return
    if t is dict:
        for k, v in value.items():
            if type(k) is not str:
                raise ValidationError(path, f"object key {k!r} must be a string", where=where)
            _check_json(v, f"{path}.{k}", depth + 1, where)
        return
    if t is list or t is tuple:
        for i, v in enumerate(value):
            _check_json(v, f"{path}[{i}]", depth + 1, where)
        return
    if isinstance(value, float):  # subclasses of the JSON scalars, e.g. IntEnum or StrEnum
        if not math.isfinite(value):
            raise ValidationError(path, f"{value!r} is not valid JSON", where=where)
        return
    if isinstance(value, bool | int | str):
        return
    raise ValidationError(path, f"{t.__name__} is not a JSON value", where=where)


class Prepared(msgspec.Struct, frozen=True):
    """An event checked and encoded for storage; what the log writes."""

    event: Event
    payload_text: str
    meta_text: str
    content_digest: bytes

    def body(self) -> bytes:
        """The bytes the hash chain covers. The store rebuilds them in SQL to verify."""
        e = self.event
        return SEP.join(
            (e.id, e.type, str(e.ts_ms), e.session_id, e.source, self.payload_text, self.meta_text)
        ).encode()


def make_event(
    type: str,
    payload: Mapping[str, Any] | None = None,
    *,
    id: str | None = None,
    session_id: str = "default",
    source: str = "plaudit",
    ts_ms: int | None = None,
    meta: Mapping[str, Any] | None = None,
) -> Event:
    """Build an event with a generated time-ordered id and the current time where omitted."""
    return Event(
        id=id if id is not None else uuid7(),
        type=type,
        ts_ms=now_ms() if ts_ms is None else ts_ms,
        session_id=session_id,
        source=source,
        payload=dict(payload or {}),
        meta=dict(meta or {}),
    )


_FIELDS = ("id", "type", "ts_ms", "session_id", "source", "payload", "meta")


def coerce_event(value: Event | Mapping[str, Any], *, where: str | None = None) -> Event:
    """Accept an Event or a plain mapping (ids and timestamps are filled in when absent)."""
    if isinstance(value, Event):
        return value
    if not isinstance(value, Mapping):
        raise ValidationError(
            "event", f"must be an object, got {type(value).__name__}", where=where
        )
    unknown = set(value) - set(_FIELDS) - {"seq", "hash"}
    if unknown:
        raise ValidationError(
            sorted(unknown)[0], f"unknown field (allowed: {', '.join(_FIELDS)})", where=where
        )
    if "type" not in value:
        raise ValidationError("type", "is required", where=where)
    if "payload" in value and not isinstance(value["payload"], Mapping):
        raise ValidationError(
            "payload", f"must be an object, got {type(value['payload']).__name__}", where=where
        )
    return Event(
        id=value["id"] if value.get("id") is not None else uuid7(),
        type=value["type"],
        ts_ms=value["ts_ms"] if value.get("ts_ms") is not None else now_ms(),
        session_id=value.get("session_id", "default"),
        source=value.get("source", "plaudit"),
        payload=value.get("payload") or {},
        meta=value.get("meta") or {},
    )


def prepare(
    value: Event | Mapping[str, Any],
    *,
    where: str | None = None,
    max_payload_bytes: int = MAX_PAYLOAD_BYTES,
) -> Prepared:
    """Validate one event and compute its canonical encoding. Raises ValidationError."""
    e = coerce_event(value, where=where)
    _check_text("id", e.id, max_len=MAX_ID_LEN, allow_empty=False, where=where)
    _check_text("type", e.type, max_len=MAX_NAME_LEN, allow_empty=False, where=where)
    if not TYPE_RE.match(e.type):
        raise ValidationError(
            "type",
            f"{e.type!r} is not a namespaced name such as 'flow.router.decision.v1'",
            where=where,
        )
    if type(e.ts_ms) is not int:
        raise ValidationError(
            "ts_ms",
            f"must be an integer (ms since epoch), got {type(e.ts_ms).__name__}",
            where=where,
        )
    if not 0 <= e.ts_ms <= MAX_SAFE_INT:
        raise ValidationError("ts_ms", "must be between 0 and 2^53-1", where=where)
    _check_text("session_id", e.session_id, max_len=MAX_NAME_LEN, allow_empty=True, where=where)
    _check_text("source", e.source, max_len=MAX_NAME_LEN, allow_empty=True, where=where)
    for name in ("payload", "meta"):
        obj = getattr(e, name)
        if type(obj) is not dict:
            if not isinstance(obj, Mapping):
                raise ValidationError(
                    name, f"must be an object, got {type(obj).__name__}", where=where
                )
            obj = dict(obj)
            e = msgspec.structs.replace(e, **{name: obj})
        _check_json(obj, name, 0, where)
    try:
        payload_text = encode_json(e.payload)
        meta_text = encode_json(e.meta)
    except (TypeError, msgspec.EncodeError, UnicodeEncodeError) as exc:
        raise ValidationError("payload", f"cannot be encoded as JSON: {exc}", where=where) from None
    if len(payload_text) > max_payload_bytes:
        raise ValidationError(
            "payload",
            f"{len(payload_text)} bytes exceeds the {max_payload_bytes}-byte limit",
            where=where,
        )
    # Identity for idempotency: what the event says, not when or how it travelled. A retry
    # with a new timestamp or different transport metadata is the same event.
    digest = hashlib.sha256(
        SEP.join((e.type, e.session_id, e.source, payload_text)).encode()
    ).digest()
    return Prepared(e, payload_text, meta_text, digest)
