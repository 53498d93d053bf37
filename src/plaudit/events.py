"""The event model: what every fact in the log looks like, and how it is checked on the way in.

Events are msgspec Structs rather than pydantic models because the append and import paths
validate hundreds of thousands of events a second and the emitter's start-up time matters.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from plaudit.errors import ValidationError
from plaudit.ids import now_ms, uuid7
from plaudit.store.chain import content_digest, event_body
from plaudit.tracecontext import with_trace

#: Largest canonical payload accepted, in bytes.
MAX_PAYLOAD_BYTES = 1 << 20
MAX_DEPTH = 64
MAX_ID_LEN = 200
MAX_NAME_LEN = 256
# Largest integer JSON consumers (and IEEE doubles) represent exactly.
MAX_SAFE_INT = 2**53 - 1

# Namespaced: at least two dot-separated segments. plaudit's own types end in `.vN`.
TYPE_RE = re.compile(r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)+$")
# Control characters, and lone surrogates (str that cannot be encoded as UTF-8).
_BAD_TEXT_RE = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")  # e.g. from argv bytes that are not UTF-8


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
_sha256 = hashlib.sha256


def encode_json(value: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, UTF-8. The hash chain depends on it."""
    return _encoder.encode(value).decode()


def _check_text(field: str, value: Any, *, max_len: int, allow_empty: bool, where: str | None):
    if type(value) is not str and not isinstance(value, str):
        raise ValidationError(field, f"must be a string, got {type(value).__name__}", where=where)
    if not value and not allow_empty:
        raise ValidationError(field, "must not be empty", where=where)
    if len(value) > max_len:
        raise ValidationError(field, f"longer than {max_len} characters", where=where)
    bad = _BAD_TEXT_RE.search(value)
    if bad is not None:
        if bad.group() >= "\ud800":
            raise ValidationError(field, "is not valid Unicode text", where=where)
        raise ValidationError(field, "contains a control character", where=where)
    return value


_SURROGATE_MESSAGE = (
    "is not valid Unicode text (a lone surrogate, e.g. from bytes that are not UTF-8)"
)


def _check_json(value: Any, path: str, depth: int, where: str | None) -> None:
    """Reject what JSON cannot carry faithfully (NaN, non-string keys, sets, ...)."""
    if depth > MAX_DEPTH:
        raise ValidationError(path, f"nested deeper than {MAX_DEPTH} levels", where=where)
    t = type(value)
    if t is str:
        if not value.isascii() and _SURROGATE_RE.search(value):
            raise ValidationError(path, _SURROGATE_MESSAGE, where=where)
        return
    if t is bool or value is None:
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
            if not k.isascii() and _SURROGATE_RE.search(k):
                raise ValidationError(path, f"an object key {_SURROGATE_MESSAGE}", where=where)
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
    if isinstance(value, str):
        _check_json(str(value), path, depth, where)
        return
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        if not -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
            raise ValidationError(path, "integer outside the JSON-safe range ±2^53", where=where)
        return
    raise ValidationError(path, f"{t.__name__} is not a JSON value", where=where)


# Maps digits to "0" and brackets to "[" so one C-level pass bounds integer size and depth.
_SCAN = bytes(
    ord("0") if chr(c).isdigit() and c < 128 else ord("[") if c in b"{[" else ord(" ")
    for c in range(256)
)
# An integer literal of 16+ digits may exceed 2^53-1 (which has 16); shorter ones cannot.
_LONG_DIGITS = b"0" * 16
_decode_any = msgspec.json.Decoder().decode
_ENCODE_ERRORS = (TypeError, msgspec.EncodeError, UnicodeEncodeError, OverflowError, RecursionError)


def _plain_json(obj: dict[str, Any], *, from_json: bool = False) -> bytes | None:
    """The canonical JSON of `obj` when checks in C are sure it is valid, else None.

    Encode, then one scan of the encoded bytes bounds nesting depth and integer size (fewer
    than 65 brackets, in structure or in strings, cannot nest deeper than 64; an integer beyond
    2^53 needs 16 digits in a row). An object just decoded from JSON text (the import) can hold
    nothing else; one built in Python must also decode back to itself, which rules out NaN and
    infinities (encoded as null), non-string keys and values JSON cannot carry (dates,
    bytes, ...).
    """
    try:
        data = _encoder.encode(obj)
    except _ENCODE_ERRORS:
        return None
    scan = data.translate(_SCAN)
    if (
        _LONG_DIGITS not in scan
        and scan.count(b"[") <= MAX_DEPTH
        and (from_json or _decode_any(data) == obj)
    ):
        return data
    return None


def _encode_object(name: str, obj: dict[str, Any], where: str | None, *, from_json: bool) -> bytes:
    """Canonical JSON of a payload or meta object, validated.

    Everything runs in C for a valid object (`_plain_json`). Only when that is not sure is the
    object walked in Python (`_check_json`), which accepts tuples and enum members and names
    the offending path otherwise.
    """
    data = _plain_json(obj, from_json=from_json)
    if data is not None:
        return data
    _check_json(obj, name, 0, where)
    try:
        return _encoder.encode(obj)
    except _ENCODE_ERRORS as exc:
        raise ValidationError(name, f"cannot be encoded as JSON: {exc}", where=where) from None


class Prepared(msgspec.Struct, frozen=True, gc=False):
    """An event checked and encoded for storage; what the log writes.

    Not tracked by the cycle collector (`gc=False`): a batch makes one per event, and tracking
    them doubled the collections a batch append sets off: ~1% of its time, ~10% when one turns
    into a full pass over the caller's heap. A Prepared is made after its event and nothing in
    the event refers to it, so it cannot be part of a reference cycle.
    """

    event: Event
    payload_text: str
    meta_text: str
    content_digest: bytes

    def body(self) -> bytes:
        """The bytes the hash chain covers (`plaudit.store.chain.event_body`)."""
        e = self.event
        return event_body(
            e.id, e.type, e.ts_ms, e.session_id, e.source, self.payload_text, self.meta_text
        )


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
    """Build an event with a generated time-ordered id and the current time where omitted.

    The current trace context (`plaudit.tracecontext`) goes into `meta` as `traceparent`,
    unless `meta` names one already."""
    return Event(
        id=id if id is not None else uuid7(),
        type=type,
        ts_ms=now_ms() if ts_ms is None else ts_ms,
        session_id=session_id,
        source=source,
        payload=dict(payload or {}),
        meta=with_trace(dict(meta or {})),
    )


#: Event types already seen to match TYPE_RE (a log has a handful; the regex costs more).
_GOOD_TYPES: set[str] = set()

_FIELDS = ("id", "type", "ts_ms", "session_id", "source", "payload", "meta")
_ALLOWED = frozenset((*_FIELDS, "seq", "hash"))


def coerce_event(value: Event | Mapping[str, Any], *, where: str | None = None) -> Event:
    """Accept an Event or a plain mapping (ids and timestamps are filled in when absent)."""
    if type(value) is not dict:  # exact-type checks first: ABC isinstance checks are slow
        if isinstance(value, Event):
            return value
        if not isinstance(value, Mapping):
            raise ValidationError(
                "event", f"must be an object, got {type(value).__name__}", where=where
            )
    if not value.keys() <= _ALLOWED:
        unknown = sorted(str(k) for k in value.keys() - _ALLOWED)
        raise ValidationError(
            unknown[0], f"unknown field (allowed: {', '.join(_FIELDS)})", where=where
        )
    get = value.get
    type_ = get("type")
    if type_ is None:
        raise ValidationError("type", "is required", where=where)
    payload = get("payload")
    if payload is None:
        payload = {}
    elif type(payload) is not dict and not isinstance(payload, Mapping):
        raise ValidationError(
            "payload", f"must be an object, got {type(payload).__name__}", where=where
        )
    id_ = get("id")
    ts = get("ts_ms")
    meta = get("meta")
    return Event(
        id=uuid7() if id_ is None else id_,
        type=type_,
        ts_ms=now_ms() if ts is None else ts,
        session_id=get("session_id", "default"),
        source=get("source", "plaudit"),
        payload=payload,
        meta={} if meta is None else meta,
    )


def _check_texts(e: Event, where: str | None) -> None:
    """id, session_id and source: strings of bounded length without control characters."""
    id_, session, source = e.id, e.session_id, e.source
    if (
        type(id_) is str
        and type(session) is str
        and type(source) is str
        and 0 < len(id_) <= MAX_ID_LEN
        and len(session) <= MAX_NAME_LEN
        and len(source) <= MAX_NAME_LEN
    ):
        joined = id_ + session + source
        # Printable ASCII is the common case; anything else gets the precise check.
        if joined.isascii() and joined.isprintable():
            return
    _check_text("id", id_, max_len=MAX_ID_LEN, allow_empty=False, where=where)
    _check_text("session_id", session, max_len=MAX_NAME_LEN, allow_empty=True, where=where)
    _check_text("source", source, max_len=MAX_NAME_LEN, allow_empty=True, where=where)


def prepare(
    value: Event | Mapping[str, Any],
    *,
    where: str | None = None,
    max_payload_bytes: int = MAX_PAYLOAD_BYTES,
    from_json: bool = False,
) -> Prepared:
    """Validate one event and compute its canonical encoding. Raises ValidationError.

    `from_json=True` says payload and meta were just decoded from JSON text (the import
    path), so they can hold nothing but JSON values and the round-trip comparison is skipped.
    """
    e = coerce_event(value, where=where)
    type_ = e.type
    if type(type_) is not str or type_ not in _GOOD_TYPES:
        if type(type_) is not str or len(type_) > MAX_NAME_LEN or TYPE_RE.match(type_) is None:
            _check_text("type", type_, max_len=MAX_NAME_LEN, allow_empty=False, where=where)
            raise ValidationError(
                "type",
                f"{type_!r} is not a namespaced name such as 'flow.router.decision.v1'",
                where=where,
            )
        if len(_GOOD_TYPES) < 10_000:  # a log has few distinct types; bound it anyway
            _GOOD_TYPES.add(type_)
    _check_texts(e, where)
    ts = e.ts_ms
    if type(ts) is not int:
        raise ValidationError(
            "ts_ms", f"must be an integer (ms since epoch), got {type(ts).__name__}", where=where
        )
    if not 0 <= ts <= MAX_SAFE_INT:
        raise ValidationError("ts_ms", "must be between 0 and 2^53-1", where=where)
    payload, meta = e.payload, e.meta
    if type(payload) is not dict or type(meta) is not dict:
        fixed: dict[str, Any] = {}
        for name, obj in (("payload", payload), ("meta", meta)):
            if type(obj) is not dict:
                if not isinstance(obj, Mapping):
                    raise ValidationError(
                        name, f"must be an object, got {type(obj).__name__}", where=where
                    )
                fixed[name] = dict(obj)
        e = msgspec.structs.replace(e, **fixed)
        payload, meta = e.payload, e.meta
    payload_bytes = _encode_object("payload", payload, where, from_json=from_json)
    if len(payload_bytes) > max_payload_bytes:
        raise ValidationError(
            "payload",
            f"{len(payload_bytes)} bytes exceeds the {max_payload_bytes}-byte limit",
            where=where,
        )
    meta_bytes = _encode_object("meta", meta, where, from_json=from_json) if meta else b"{}"
    if len(meta_bytes) > max_payload_bytes:
        raise ValidationError(
            "meta",
            f"{len(meta_bytes)} bytes exceeds the {max_payload_bytes}-byte limit",
            where=where,
        )
    # Identity for idempotency: what the event says, not when or how it travelled. A retry
    # with a new timestamp or different transport metadata is the same event.
    digest = content_digest(type_, e.session_id, e.source, payload_bytes)
    return Prepared(e, payload_bytes.decode(), meta_bytes.decode(), digest)


def prepare_batch(
    events: Iterable[Event | Mapping[str, Any]], *, max_payload_bytes: int = MAX_PAYLOAD_BYTES
) -> list[Prepared]:
    """`prepare` every event (errors name it `event[i]`), in one loop for speed.

    The batch append spends most of its Python time here. An event whose fields are all of the
    common kind (exact types, a known type name, printable ASCII texts, plain objects that
    encode and decode back to themselves) passes `prepare`'s own tests inlined here, which
    saves about 30% of it; any other event goes through `prepare` itself, so the
    results and errors, and which event fails first, are exactly those of `prepare` on each.
    """
    out: list[Prepared] = []
    append = out.append
    good_types = _GOOD_TYPES
    plain = _plain_json
    sha = _sha256
    for i, value in enumerate(events):
        e = value
        if type(e) is not Event:
            try:
                e = coerce_event(value)
            except ValidationError:  # `prepare` raises it again, naming the event
                append(prepare(value, where=f"event[{i}]", max_payload_bytes=max_payload_bytes))
                continue
        type_ = e.type
        id_ = e.id
        session = e.session_id
        source = e.source
        ts = e.ts_ms
        payload = e.payload
        meta = e.meta
        if (
            type(type_) is str
            and type_ in good_types
            and type(id_) is str
            and type(session) is str
            and type(source) is str
            and 0 < len(id_) <= MAX_ID_LEN
            and len(session) <= MAX_NAME_LEN
            and len(source) <= MAX_NAME_LEN
            and type(ts) is int
            and 0 <= ts <= MAX_SAFE_INT
            and type(payload) is dict
            and type(meta) is dict
        ):
            joined = id_ + session + source
            if joined.isascii() and joined.isprintable():
                data = plain(payload)
                meta_bytes = plain(meta) if meta else b"{}"
                if (
                    data is not None
                    and meta_bytes is not None
                    and len(data) <= max_payload_bytes
                    and len(meta_bytes) <= max_payload_bytes
                ):
                    # `chain.content_digest`, inlined (tests/test_chain_format.py holds them equal)
                    digest = sha(f"{type_}\x1f{session}\x1f{source}\x1f".encode() + data)
                    append(Prepared(e, data.decode(), meta_bytes.decode(), digest.digest()))
                    continue
        append(prepare(e, where=f"event[{i}]", max_payload_bytes=max_payload_bytes))
    return out
