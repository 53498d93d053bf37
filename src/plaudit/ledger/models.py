"""What the ledger hands back: plain msgspec structs that encode straight to JSON."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import msgspec


@lru_cache(maxsize=4096)  # a batch shares a handful of milliseconds
def iso(ts_ms: int) -> str:
    return datetime.fromtimestamp(ts_ms / 1000, UTC).isoformat(timespec="milliseconds")


class Transaction(msgspec.Struct, kw_only=True):
    id: str
    seq: int
    timestamp: str
    ts_ms: int
    type: str
    category: str
    points: int
    action: str
    source: str | None
    session_id: str | None
    running_total: int
    verified: bool
    kind: str
    status: str = "appended"

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


TX_COLUMNS = (
    "seq, id, ts_ms, type, category, points, action, source_kind, source_id, session,"
    " running_total, verified, kind"
)


def tx_from_row(row: tuple[Any, ...], status: str = "appended") -> Transaction:
    seq, id_, ts, ttype, cat, pts, action, skind, sid, sess, rt, ver, kind = row
    return Transaction(
        id=id_,
        seq=int(seq),
        timestamp=iso(int(ts)),
        ts_ms=int(ts),
        type=ttype,
        category=cat,
        points=int(pts),
        action=action,
        source=None if skind is None else f"{skind}:{sid}",
        session_id=sess,
        running_total=int(rt),
        verified=bool(ver),
        kind=kind,
        status=status,
    )


class Checksum(msgspec.Struct, kw_only=True):
    """Stored total (the projection) against the total recalculated from the log."""

    calculated_total: int
    stored_total: int | None
    is_valid: bool
    tx_count: int
    checkpoint_seq: int | None
    reason: str | None = None
    last_validated: str = ""
