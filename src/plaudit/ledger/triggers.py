"""What a memory-bank record's trigger books when it is imported (seed 003's cross-file table).

A mistake's `penalty` is a penalty under its own category, a pattern's `reward_accumulated` a
constitutional-compliance reward, each "Pattern successfully applied" observation of a memory
entity a +20 pattern reuse, a logged MCP chain a +10 MCP integration: booked as what they are,
with the trigger as the action and the record's own date, referencing the record.

Each version of a record is booked once (the transaction ids derive from the version's event
id), and only for what the ledger does not hold for the record yet (what it declares minus what
transactions referencing it already hold), so a record booked by hand is not booked again and
reconciliation stays the check that nothing is missing or in excess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from plaudit.errors import NotFoundError, ValidationError
from plaudit.events import Event
from plaudit.ledger.config import LedgerConfig, SourceKind
from plaudit.ledger.sources import (
    cross_reference,
    declared_points,
    kind_sign,
    record_date,
    recovery_category,
)
from plaudit.ledger.spec import MAX_ACTION_LEN, MAX_POINTS, Spec
from plaudit.ledger.writing import Pending, system_spec
from plaudit.store.backend import Tx
from plaudit.store.view import LogView

_TEXT_FIELDS = ("description", "name", "summary", "title", "error", "message")


@dataclass
class Plan:
    pendings: list[Pending]
    not_booked: list[dict[str, Any]]


def _held(tx: Tx, kind: str, key: str, sign: int) -> int:
    row = tx.fetchone(
        "SELECT pos, neg, corr FROM ledger_source_sums WHERE kind = ? AND key = ?", (kind, key)
    )
    pos, neg, corr = (int(v) for v in row) if row else (0, 0, 0)
    return (neg if sign < 0 else pos) + corr


def _units(sk: SourceKind, record: dict[str, Any]) -> list[str]:
    """The trigger's own occurrences, each worth the category's points: the matching
    observations of an entity, the one chain of calls of an MCP chain."""
    if sk.trigger_observation:
        obs = record.get("observations")
        if isinstance(obs, list):
            return [o for o in obs if isinstance(o, str) and sk.trigger_observation in o]
    for field in sk.trigger_calls:
        calls = record.get(field)
        if isinstance(calls, list) and calls:
            return ["calls " + ", ".join(str(c) for c in calls)]
    return []


def _text(sk: SourceKind, record: dict[str, Any], points: int) -> str:
    for field in _TEXT_FIELDS:
        value = record.get(field)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return f"{sk.declared or 'trigger'} {points:+d}"


def _pieces(
    sk: SourceKind, record: dict[str, Any], amount: int, unit: int
) -> list[tuple[int, str]]:
    """The transactions a missing amount is booked as: one per trigger occurrence when the
    amount is a whole number of them (the newest ones), else one for the whole amount."""
    units = _units(sk, record)
    if unit and amount % unit == 0 and 0 < amount // unit <= len(units):
        return [(unit, text) for text in units[len(units) - amount // unit :]]
    if units:
        return [(amount, "; ".join(units))]
    return [(amount, _text(sk, record, amount))]


def plan(tx: Tx, cfg: LedgerConfig, events: list[Event], ts_ms: int) -> Plan:
    """The transactions the triggers of these (just imported) records book, and the records
    whose trigger cannot be booked, with why."""
    out = Plan([], [])
    for ev in events:
        kind, key, record = ev.payload["kind"], ev.payload["key"], ev.payload["record"]
        sk = cfg.sources.get(kind)
        declared = declared_points(cfg, kind, record)
        if sk is None or declared is None:
            continue
        sign = -1 if declared < 0 else kind_sign(cfg, kind)
        diff = declared - _held(tx, kind, key, sign)
        if diff == 0 or (diff < 0) != (sign < 0):
            continue  # nothing missing (an excess is reconciliation's to report)
        base = f"trigger:{ev.id}"[:190]
        try:
            category = cfg.categories[recovery_category(cfg, kind, record, diff)]
            cross_reference(category, kind, key, record)
            if abs(diff) > MAX_POINTS:
                raise ValidationError("points", f"{diff:+d} is beyond ±{MAX_POINTS}")
        except (ValidationError, NotFoundError) as exc:
            out.not_booked.append({"source": f"{kind}:{key}", "points": diff, "reason": str(exc)})
            continue
        pieces = _pieces(sk, record, diff, category.points)
        ids = [f"{base}:{n}" for n in range(len(pieces))]
        if LogView(tx).positions(ids):
            continue  # this version of the record was booked before
        when = record_date(record, sk.date_field) or ts_ms
        for id_, (points, text) in zip(ids, pieces, strict=True):
            spec = system_spec(
                category.name,
                points,
                f"{sk.file} {key}: {text}"[:MAX_ACTION_LEN],
                source=(kind, key),
                ts_ms=when,
            )
            spec = Spec(**{**spec.__dict__, "type": category.type})
            out.pendings.append(Pending(spec, kind="import", id=id_, verified=True))
    return out
