"""Which log events become OpenTelemetry events, and with which attributes.

Each result plaudit records is an *evaluation* in the sense of the GenAI semantic conventions:
something judged an agent's work and gave it a score. So each becomes a `gen_ai.evaluation.result`
event, whose attributes are the convention's (`gen_ai.evaluation.name`, `.score.value`,
`.score.label`, `.explanation`, and `gen_ai.conversation.id` for the session), plus
`plaudit.*` attributes that keep what the convention has no word for:

- `plaudit.ledger.transaction.v1`: one per transaction, named `plaudit.ledger.<category>`,
  valued at its points, labelled `reward` or `penalty`, explained by its action;
- `plaudit.bandit.observation.v1`: one per arm the run rewarded, named
  `plaudit.bandit.arm_referenced`, valued 0 or 1, labelled `referenced` or `not_referenced`;
- `flow.router.outcome.v1`: one per outcome, named `plaudit.router.outcome`, labelled with the
  outcome and valued at the reward the signals export gives it (success 1.0 ... wasted -0.2).

Each record carries the trace and span ids of the event's W3C trace context (`traceparent` in
its meta, see `plaudit.tracecontext`), so a tracing backend attaches the evaluation to the span
it judges. An event without one gives a record without ids.

This module only computes; `plaudit.otel.exporter` hands the results to the SDK. Keeping it free
of OpenTelemetry imports lets every mapping rule be tested without the extra installed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from plaudit.events import StoredEvent
from plaudit.signals.join import REWARDS
from plaudit.tracecontext import trace_of

EVALUATION_EVENT = "gen_ai.evaluation.result"

LEDGER_TRANSACTION = "plaudit.ledger.transaction.v1"
BANDIT_OBSERVATION = "plaudit.bandit.observation.v1"
ROUTER_OUTCOME = "flow.router.outcome.v1"
#: The log types the exporter follows (exact types, used as replay prefixes).
TYPES: tuple[str, ...] = (LEDGER_TRANSACTION, BANDIT_OBSERVATION, ROUTER_OUTCOME)

#: Longest free text sent in one attribute; telemetry backends cut or refuse longer values.
MAX_TEXT = 4096

Scalar = str | bool | int | float


@dataclass(frozen=True)
class Record:
    """One OpenTelemetry event: its name, when it happened (ns since the epoch), attributes."""

    name: str
    timestamp_ns: int
    attributes: dict[str, Scalar] = field(default_factory=dict)
    #: The W3C trace context's ids (0: none) and flags.
    trace_id: int = 0
    span_id: int = 0
    trace_flags: int = 0


def _text(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    return value if len(value) <= MAX_TEXT else value[: MAX_TEXT - 3] + "..."


def _number(value: Any) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _attributes(event: StoredEvent, session: Any, **values: Any) -> dict[str, Scalar]:
    """Common attributes first, then `values`; None (absent) is left out, as OTel requires."""
    out: dict[str, Scalar] = {
        "plaudit.event.id": event.id,
        "plaudit.event.seq": event.seq,
        "plaudit.event.type": event.type,
    }
    conversation = _text(session) or _text(event.session_id)
    if conversation:
        out["gen_ai.conversation.id"] = conversation
    for key, value in values.items():
        if value is not None:
            out[key] = value
    return out


def _ledger(event: StoredEvent, payload: Mapping[str, Any]) -> list[Record]:
    category = _text(payload.get("category")) or "unknown"
    points = _number(payload.get("points"))
    source = payload.get("source")
    attrs = _attributes(
        event,
        payload.get("session"),
        **{
            "gen_ai.evaluation.name": f"plaudit.ledger.{category}",
            "gen_ai.evaluation.score.value": None if points is None else float(points),
            "gen_ai.evaluation.score.label": _text(payload.get("type")),
            "gen_ai.evaluation.explanation": _text(payload.get("action")),
            "plaudit.ledger.category": category,
            "plaudit.ledger.running_total": _number(payload.get("running_total")),
            "plaudit.ledger.verified": payload.get("verified")
            if isinstance(payload.get("verified"), bool)
            else None,
            "plaudit.ledger.kind": _text(payload.get("kind")),
            "plaudit.ledger.source": _text(source) if isinstance(source, str) else None,
        },
    )
    return [Record(EVALUATION_EVENT, event.ts_ms * 1_000_000, attrs)]


def _bandit_rewards(payload: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The rewards by arm id: the payload's `rewards`, or its compact form (`arms`, the ids
    joined by newlines, and `hits`, one "0" or "1" each; see docs/bandit.md)."""
    rewards = payload.get("rewards")
    if isinstance(rewards, Mapping):
        return rewards
    arms, hits = payload.get("arms"), payload.get("hits")
    if not isinstance(arms, str) or not isinstance(hits, str):
        return None
    ids = arms.split("\n") if arms else []
    if len(ids) != len(hits):
        return None
    return {a: 1 if h == "1" else 0 for a, h in zip(ids, hits, strict=True)}


def _bandit(event: StoredEvent, payload: Mapping[str, Any]) -> list[Record]:
    rewards = _bandit_rewards(payload)
    if rewards is None:
        return []
    records = []
    for arm_id in sorted(rewards):
        reward = _number(rewards[arm_id])
        if reward is None:
            continue
        attrs = _attributes(
            event,
            None,
            **{
                "gen_ai.evaluation.name": "plaudit.bandit.arm_referenced",
                "gen_ai.evaluation.score.value": float(reward),
                "gen_ai.evaluation.score.label": "referenced" if reward > 0 else "not_referenced",
                "plaudit.bandit.arm.id": str(arm_id),
                "plaudit.bandit.run.id": _text(payload.get("run_id")),
                "plaudit.bandit.context": _text(payload.get("context")),
                "plaudit.bandit.updates_posterior": payload.get("updates")
                if isinstance(payload.get("updates"), bool)
                else None,
                "plaudit.bandit.run.usage_tokens": _number(payload.get("usage_tokens")),
                "plaudit.bandit.run.duration_ms": _number(payload.get("duration_ms")),
                "plaudit.bandit.run.error": _text(payload.get("error")),
            },
        )
        records.append(Record(EVALUATION_EVENT, event.ts_ms * 1_000_000, attrs))
    return records


def _router(event: StoredEvent, payload: Mapping[str, Any]) -> list[Record]:
    outcome = _text(payload.get("outcome")) or "unknown"
    attrs = _attributes(
        event,
        payload.get("session_id"),
        **{
            "gen_ai.evaluation.name": "plaudit.router.outcome",
            "gen_ai.evaluation.score.value": REWARDS.get(outcome),
            "gen_ai.evaluation.score.label": outcome,
            "plaudit.router.decision_id": _text(payload.get("decision_id")),
            "plaudit.router.task_executed": _text(payload.get("task_executed")),
            "plaudit.router.manual_override_task": _text(payload.get("manual_override_task")),
            "plaudit.router.error_kind": _text(payload.get("error_kind")),
            "plaudit.router.time_to_resolution_ms": _number(payload.get("time_to_resolution_ms")),
        },
    )
    return [Record(EVALUATION_EVENT, event.ts_ms * 1_000_000, attrs)]


_MAPPERS = {LEDGER_TRANSACTION: _ledger, BANDIT_OBSERVATION: _bandit, ROUTER_OUTCOME: _router}


def records(event: StoredEvent) -> list[Record]:
    """The OpenTelemetry events for one log event; none for a type (or payload) not mapped."""
    mapper = _MAPPERS.get(event.type)
    payload = event.payload
    if mapper is None or not isinstance(payload, Mapping):
        return []
    out = mapper(event, payload)
    tc = trace_of(event.meta)
    if tc is None:
        return out
    ids = {
        "trace_id": int(tc.trace_id, 16),
        "span_id": int(tc.span_id, 16),
        "trace_flags": int(tc.flags, 16),
    }
    return [replace(r, **ids) for r in out]


__all__ = ["EVALUATION_EVENT", "TYPES", "Record", "records"]
