"""SQL that reads ledger facts straight from the log's rows (not the projection), per dialect."""

from __future__ import annotations

from typing import Any

import msgspec

from plaudit.ledger import eventtypes as et
from plaudit.store.backend import Tx


def field(tx: Tx, name: str, cast: str = "int") -> str:
    """An expression extracting `payload.<name>` from a plaudit_events row."""
    if tx.dialect == "postgres":
        sql_type = "bigint" if cast == "int" else "text"
        # ::json (not ::jsonb) parses without building the binary form: twice as fast here.
        return f"(payload::json->>'{name}')::{sql_type}"
    sql_type = "INTEGER" if cast == "int" else "TEXT"
    return f"CAST(json_extract(payload, '$.{name}') AS {sql_type})"


def head_for_update(tx: Tx) -> tuple[int, bytes]:
    """Take the log's write lock before reading ledger state (PostgreSQL locks the head row;
    SQLite already holds BEGIN IMMEDIATE)."""
    sql = "SELECT seq, hash FROM plaudit_head WHERE one = 1"
    if tx.dialect == "postgres":
        sql += " FOR UPDATE"
    row = tx.fetchone(sql)
    assert row is not None
    return int(row[0]), bytes(row[1])


def sum_after(tx: Tx, after_seq: int) -> tuple[int, int]:
    """(sum of points, count) of transaction events after a log position."""
    row = tx.fetchone(
        f"SELECT COALESCE(SUM({field(tx, 'points')}), 0), COUNT(*) FROM plaudit_events"
        " WHERE type = ? AND seq > ?",
        (et.TRANSACTION, after_seq),
    )
    assert row is not None
    return int(row[0]), int(row[1])


def last_of(tx: Tx, event_type: str) -> tuple[int, dict[str, Any]] | None:
    row = tx.fetchone(
        "SELECT seq, payload FROM plaudit_events WHERE type = ? ORDER BY seq DESC LIMIT 1",
        (event_type,),
    )
    if row is None:
        return None
    try:
        payload = msgspec.json.decode(row[1])
    except msgspec.DecodeError:
        payload = {}
    return int(row[0]), payload if isinstance(payload, dict) else {}


def hash_at(tx: Tx, seq: int) -> str | None:
    h = tx.scalar("SELECT hash FROM plaudit_events WHERE seq = ?", (seq,))
    return None if h is None else bytes(h).hex()
