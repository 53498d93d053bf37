"""Checking a transaction request before anything is written (step 1 of the seed's five)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from plaudit.errors import ValidationError
from plaudit.events import MAX_ID_LEN, MAX_NAME_LEN
from plaudit.ledger.config import LedgerConfig

MAX_ACTION_LEN = 2000
MAX_POINTS = 10**9
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_FIELDS = ("category", "action", "points", "source", "session", "key", "ts_ms")


@dataclass(frozen=True)
class Spec:
    category: str
    type: str
    points: int
    action: str
    source: tuple[str, str] | None
    session: str | None
    key: str | None
    ts_ms: int | None

    def intent(self) -> tuple[Any, ...]:
        """What a retry with the same key must repeat to count as the same transaction."""
        return (self.category, self.points, self.action, self.source)


def _text(value: Any, field: str, where: str | None, max_len: int) -> str:
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, got {type(value).__name__}", where=where)
    if not value.strip():
        raise ValidationError(field, "must not be empty", where=where)
    if len(value) > max_len:
        raise ValidationError(field, f"longer than {max_len} characters", where=where)
    if _CONTROL.search(value):
        raise ValidationError(field, "contains a control character", where=where)
    return value


def parse_source(cfg: LedgerConfig, value: Any, where: str | None = None) -> tuple[str, str]:
    """`KIND:ID` (or `FILE:ID`, e.g. `mistakes.json:m-3`) or {"kind": ..., "id": ...}."""
    if isinstance(value, Mapping):
        kind, sid = value.get("kind"), value.get("id")
    elif isinstance(value, str):
        kind, sep, sid = value.partition(":")
        if not sep:
            raise ValidationError(
                "source", f"{value!r} is not KIND:ID, e.g. 'mistake:m-12'", where=where
            )
    else:
        raise ValidationError(
            "source", f"must be 'KIND:ID' or an object, got {type(value).__name__}", where=where
        )
    kind = _text(kind, "source.kind", where, MAX_NAME_LEN)
    sid = _text(sid, "source.id", where, MAX_ID_LEN)
    return cfg.source_kind(kind).name, sid


def parse_spec(cfg: LedgerConfig, raw: Mapping[str, Any], where: str | None = None) -> Spec:
    if not isinstance(raw, Mapping):
        raise ValidationError(
            "transaction", f"must be an object, got {type(raw).__name__}", where=where
        )
    unknown = sorted(set(raw) - set(_FIELDS))
    if unknown:
        raise ValidationError(
            unknown[0], f"unknown field (allowed: {', '.join(_FIELDS)})", where=where
        )
    if "category" not in raw:
        raise ValidationError("category", "is required", where=where)
    try:
        cat = cfg.category(raw["category"])
    except ValidationError as exc:
        raise ValidationError("category", exc.reason, where=where) from None
    action = _text(raw.get("action"), "action", where, MAX_ACTION_LEN)
    points = raw.get("points")
    if points is None:
        points = cat.points
    elif type(points) is not int:
        raise ValidationError(
            "points", f"must be an integer, got {type(points).__name__}", where=where
        )
    if abs(points) > MAX_POINTS:
        raise ValidationError("points", f"must be within ±{MAX_POINTS}", where=where)
    if cat.type == "reward" and points <= 0:
        raise ValidationError(
            "points", f"{points} must be positive for reward category {cat.name}", where=where
        )
    if cat.type == "penalty" and points >= 0:
        raise ValidationError(
            "points", f"{points} must be negative for penalty category {cat.name}", where=where
        )
    source = None
    if raw.get("source") not in (None, ""):
        source = parse_source(cfg, raw["source"], where)
        if cat.source is not None and source[0] != cat.source:
            raise ValidationError(
                "source",
                f"category {cat.name} is cross-referenced with {cat.source} records, "
                f"not {source[0]}",
                where=where,
            )
    session = raw.get("session")
    if session is not None:
        session = _text(session, "session", where, MAX_NAME_LEN)
    key = raw.get("key")
    if key is not None:
        key = _text(key, "key", where, MAX_ID_LEN)
    ts = raw.get("ts_ms")
    if ts is not None and (type(ts) is not int or not 0 <= ts <= 2**53 - 1):
        raise ValidationError("ts_ms", "must be an integer of milliseconds since 1970", where=where)
    return Spec(cat.name, cat.type, points, action, source, session, key, ts)
