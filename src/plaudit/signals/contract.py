"""The router signal contract: the three event types, their validation and their ids.

Payloads keep the reference emitter's subject layout (same keys, same order, same
`schema_version` values), so a row plaudit writes to seq_mem.jsonl is what existing readers
expect. This module stays free of heavy imports: the emit fast path loads it.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Mapping

from plaudit.errors import ValidationError
from plaudit.signals.redact import redact

#: `typing` costs a shell hook ~10 ms to import; annotations here are never evaluated.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DECISION = "flow.router.decision.v1"
OUTCOME = "flow.router.outcome.v1"
OVERRIDE = "flow.router.override.v1"
PREFIX = "flow.router."
EVENT_TYPES = (DECISION, OUTCOME, OVERRIDE)
OUTCOMES = ("success", "partial", "failure", "wasted")

DEFAULT_SESSION = "flow-router"
SESSION_ENV = "FLOW_ROUTER_SESSION_ID"
DEFAULT_SOURCE = "flow"

MAX_ID = 200
MAX_TEXT = 4096
MAX_INTENT = 64 * 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def resolve_session(session_id: str | None) -> str:
    """--session-id, else $FLOW_ROUTER_SESSION_ID, else "flow-router" (the reference's order)."""
    return session_id or os.environ.get(SESSION_ENV) or DEFAULT_SESSION


def event_id(event_type: str, decision_id: str, *extra: str) -> str:
    """Deterministic id, so a retried emit is acknowledged as already present."""
    key = "\x1f".join((event_type, decision_id, *extra))
    return "frs-" + hashlib.sha256(key.encode()).hexdigest()[:40]


def _text(
    field: str,
    value: Any,
    *,
    required: bool = False,
    max_len: int = MAX_TEXT,
    single_line: bool = True,
    where: str | None = None,
) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, got {type(value).__name__}", where=where)
    if required and not value.strip():
        raise ValidationError(field, "is required and must not be empty", where=where)
    if len(value) > max_len:
        raise ValidationError(field, f"longer than {max_len} characters", where=where)
    if single_line and _CONTROL.search(value):
        raise ValidationError(field, "contains a control character", where=where)
    if "\x00" in value:
        raise ValidationError(field, "contains a NUL character", where=where)
    return value


def _unit_float(field: str, value: Any, *, low_open: bool = False, where: str | None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(field, f"must be a number, got {type(value).__name__}", where=where)
    f = float(value)
    if not math.isfinite(f):
        raise ValidationError(field, f"must be a finite number, got {value!r}", where=where)
    if low_open and not 0.0 < f <= 1.0:
        raise ValidationError(field, f"must be in (0, 1], got {value!r}", where=where)
    if not 0.0 <= f <= 1.0:
        raise ValidationError(field, f"must be in [0, 1], got {value!r}", where=where)
    return f


def _obj(field: str, value: Any, *, where: str | None) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(
            field, f"must be a JSON object, got {type(value).__name__}", where=where
        )
    return dict(value)


def _list(field: str, value: Any, *, where: str | None) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise ValidationError(
            field, f"must be a JSON list, got {type(value).__name__}", where=where
        )
    return list(value)


def _ts(value: Any, *, where: str | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(
            "ts_ms", f"must be an integer, got {type(value).__name__}", where=where
        )
    if value <= 0:
        raise ValidationError(
            "ts_ms", f"must be positive (ms since epoch), got {value}", where=where
        )
    return value


class Emission:
    """A validated event ready for the log: type, id, session, source, timestamp, payload."""

    __slots__ = (
        "decision_id",
        "id",
        "ok",
        "payload",
        "redacted",
        "session_id",
        "source",
        "ts_ms",
        "type",
    )

    def __init__(
        self,
        type: str,
        id: str,
        payload: dict[str, Any],
        ts_ms: int | None,
        ok: bool,
        redacted: int = 0,
    ) -> None:
        self.type = type
        self.id = id
        self.payload = payload
        self.decision_id: str = payload["decision_id"]
        self.session_id: str = payload["session_id"]
        self.source: str = payload["source"]
        self.ts_ms = ts_ms
        self.ok = ok
        self.redacted = redacted


def build_decision(
    *,
    decision_id: Any,
    chosen_task: Any,
    confidence: Any,
    user_intent: Any,
    session_id: Any = None,
    candidates: Any = None,
    context: Any = None,
    project_fingerprint: Any = "",
    project_path: Any = "",
    git_branch: Any = "",
    git_commit: Any = "",
    user_hash: Any = "",
    source: Any = DEFAULT_SOURCE,
    ts_ms: Any = None,
    propensity: Any = None,
    where: str | None = None,
) -> Emission:
    """Validate a decision; `context` is redacted. Key order follows the reference subject."""
    w = where
    did = _text("decision_id", decision_id, required=True, max_len=MAX_ID, where=w)
    session = _text("session_id", resolve_session(session_id), required=True, where=w)
    ctx, n = redact(_obj("context", context, where=w))
    payload: dict[str, Any] = {
        "schema_version": "flow_router_decision_v1",
        "decision_id": did,
        "source": _text("source", source if source is not None else DEFAULT_SOURCE, where=w),
        "session_id": session,
        "user_hash": _text("user_hash", user_hash, where=w),
        "project_fingerprint": _text("project_fingerprint", project_fingerprint, where=w),
        "project_path": _text("project_path", project_path, where=w),
        "git_branch": _text("git_branch", git_branch, where=w),
        "git_commit": _text("git_commit", git_commit, where=w),
        "chosen_task": _text("chosen_task", chosen_task, required=True, where=w),
        "confidence": _unit_float("confidence", confidence, where=w),
        "user_intent": _text(
            "user_intent", user_intent, max_len=MAX_INTENT, single_line=False, where=w
        ),
        "candidates": _list("candidates", candidates, where=w),
        "context": ctx,
    }
    if propensity is not None:
        payload["propensity"] = _unit_float("propensity", propensity, low_open=True, where=w)
    return Emission(DECISION, event_id(DECISION, did), payload, _ts(ts_ms, where=w), True, n)


def build_outcome(
    *,
    decision_id: Any,
    outcome: Any,
    task_executed: Any,
    time_to_resolution_ms: Any = 0,
    manual_override_task: Any = "",
    error_kind: Any = "",
    extra: Any = None,
    session_id: Any = None,
    source: Any = DEFAULT_SOURCE,
    ts_ms: Any = None,
    where: str | None = None,
) -> Emission:
    w = where
    did = _text("decision_id", decision_id, required=True, max_len=MAX_ID, where=w)
    if outcome not in OUTCOMES:
        raise ValidationError(
            "outcome", f"{outcome!r} is not one of {', '.join(OUTCOMES)}", where=w
        )
    ttr = time_to_resolution_ms if time_to_resolution_ms is not None else 0
    if isinstance(ttr, bool) or not isinstance(ttr, int):
        raise ValidationError(
            "time_to_resolution_ms", f"must be an integer, got {type(ttr).__name__}", where=w
        )
    if not 0 <= ttr <= 2**53 - 1:
        raise ValidationError(
            "time_to_resolution_ms", f"must be between 0 and 2^53-1, got {ttr}", where=w
        )
    ex, n = redact(_obj("extra", extra, where=w))
    payload: dict[str, Any] = {
        "schema_version": "flow_router_outcome_v1",
        "decision_id": did,
        "source": _text("source", source if source is not None else DEFAULT_SOURCE, where=w),
        "session_id": _text("session_id", resolve_session(session_id), required=True, where=w),
        "outcome": outcome,
        "task_executed": _text("task_executed", task_executed, required=True, where=w),
        "time_to_resolution_ms": ttr,
        "manual_override_task": _text("manual_override_task", manual_override_task, where=w),
        "error_kind": _text("error_kind", error_kind, where=w),
        "extra": ex,
    }
    ok = outcome in ("success", "partial")
    return Emission(OUTCOME, event_id(OUTCOME, did), payload, _ts(ts_ms, where=w), ok, n)


def build_override(
    *,
    decision_id: Any,
    original_task: Any,
    override_task: Any,
    reason: Any = "",
    session_id: Any = None,
    source: Any = DEFAULT_SOURCE,
    ts_ms: Any = None,
    where: str | None = None,
) -> Emission:
    w = where
    did = _text("decision_id", decision_id, required=True, max_len=MAX_ID, where=w)
    original = _text("original_task", original_task, required=True, where=w)
    override = _text("override_task", override_task, required=True, where=w)
    payload: dict[str, Any] = {
        "schema_version": "flow_router_override_v1",
        "decision_id": did,
        "source": _text("source", source if source is not None else DEFAULT_SOURCE, where=w),
        "session_id": _text("session_id", resolve_session(session_id), required=True, where=w),
        "original_task": original,
        "override_task": override,
        "reason": _text("reason", reason, max_len=MAX_INTENT, single_line=False, where=w),
    }
    # A user may correct a decision more than once; each distinct correction is its own event.
    eid = event_id(OVERRIDE, did, original, override)
    return Emission(OVERRIDE, eid, payload, _ts(ts_ms, where=w), True, 0)
