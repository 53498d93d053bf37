"""Where each OpenTelemetry exporter stopped: a log position per exporter name, in the store.

Kept in the store (table `otel_cursor`, owned by this module) rather than in a file so that
exporters on several hosts sharing one PostgreSQL database see one another's progress, and so
that the position travels with a copied SQLite file.
"""

from __future__ import annotations

import time

from plaudit.core import Plaudit

TABLE = "otel_cursor"
_CREATE = (
    "CREATE TABLE IF NOT EXISTS otel_cursor (name TEXT PRIMARY KEY, "
    "seq {bigint} NOT NULL, updated_ms {bigint} NOT NULL)"
)


def read(p: Plaudit, name: str) -> int | None:
    """The last position exported under `name`, or None for a name never used."""
    with p.backend.read() as tx:
        if not tx.table_exists(TABLE):
            return None
        value = tx.scalar("SELECT seq FROM otel_cursor WHERE name = ?", (name,))
    return None if value is None else int(value)


def advance(p: Plaudit, name: str, seq: int) -> int:
    """Move `name` forward to `seq` (never back: another exporter may be further on)."""
    with p.backend.write() as tx:
        tx.execute(tx.ddl(_CREATE))
        current = tx.scalar("SELECT seq FROM otel_cursor WHERE name = ?", (name,))
        now = int(time.time() * 1000)
        if current is None:
            tx.execute(
                "INSERT INTO otel_cursor (name, seq, updated_ms) VALUES (?, ?, ?)", (name, seq, now)
            )
            return seq
        if int(current) >= seq:
            return int(current)
        tx.execute(
            "UPDATE otel_cursor SET seq = ?, updated_ms = ? WHERE name = ?", (seq, now, name)
        )
        return seq


__all__ = ["TABLE", "advance", "read"]
