"""Rules turn other events (e.g. a router outcome `failure`) into ledger transactions.

A rule's transaction id is derived from the rule and the source event's id, so re-running the
rules never counts an event twice; a cursor event records how far the log has been scanned.
"""

from __future__ import annotations

from typing import Any

from plaudit.events import Event, StoredEvent, make_event
from plaudit.ledger.config import LedgerConfig, Rule
from plaudit.ledger.spec import MAX_ACTION_LEN, Spec
from plaudit.ledger.writing import Pending
from plaudit.store.backend import Tx
from plaudit.store.projections import scan
from plaudit.store.view import LogView

RULES_CURSOR = "plaudit.ledger.rules.cursor.v1"


class _Missing(dict):
    def __missing__(self, key: str) -> str:
        return "?"


_ABSENT = object()


def _get(payload: dict[str, Any], dotted: str) -> Any:
    cur: Any = payload
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return _ABSENT
        cur = cur[part]
    return cur


def matches(rule: Rule, ev: StoredEvent) -> bool:
    return ev.type == rule.type and all(_get(ev.payload, k) == v for k, v in rule.match.items())


def pending_for(rule: Rule, ev: StoredEvent, cfg: LedgerConfig) -> Pending:
    cat = cfg.categories[rule.category]
    flat = {k: v for k, v in ev.payload.items() if isinstance(v, str | int | float)}
    try:
        action = rule.action.format_map(_Missing(flat))
    except (ValueError, IndexError, AttributeError):
        action = rule.action
    spec = Spec(
        category=cat.name,
        type=cat.type,
        points=rule.points if rule.points is not None else cat.points,
        action=action[:MAX_ACTION_LEN] or rule.name,
        source=None,
        session=None,
        key=None,
        ts_ms=ev.ts_ms,
    )
    return Pending(
        spec,
        kind="rule",
        id=f"rule:{rule.name}:{ev.id}"[:200],
        extra={"origin": {"seq": ev.seq, "id": ev.id, "type": ev.type, "rule": rule.name}},
        verified=False,
    )


def build_rules(
    cfg: LedgerConfig, tx: Tx, head_seq: int, limit: int | None = None
) -> tuple[list[Pending], list[Event], dict[str, Any]]:
    last = LogView(tx).last_payload(RULES_CURSOR)
    cursor = 0 if last is None else int(last[1].get("seq", 0) or 0)
    types = sorted({r.type for r in cfg.rules})
    pendings: list[Pending] = []
    scanned = 0
    upto = cursor
    if types:
        for ev in scan(tx, after=cursor, until=head_seq, prefixes=types):
            scanned += 1
            upto = ev.seq
            for rule in cfg.rules:
                if matches(rule, ev):
                    pendings.append(pending_for(rule, ev, cfg))
                    break  # first matching rule wins: one transaction per source event
            if limit is not None and len(pendings) >= limit:
                break
    if limit is None or len(pendings) < limit:
        upto = max(upto, head_seq)
    extras: list[Event] = []
    if upto > cursor:
        extras.append(make_event(RULES_CURSOR, {"seq": upto}, source="plaudit.ledger"))
    return pendings, extras, {"cursor_before": cursor, "cursor_after": upto, "scanned": scanned}
