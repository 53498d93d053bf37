"""The log's named read operations, inside one transaction.

Jobs never write SQL against the log's own tables: they ask a `LogView` (from
`EventLog.reading()`, `EventLog.writer()` or `LogView(tx)` inside a transaction they already
hold, e.g. a projection's). That keeps the tables private to `plaudit.store`, so their layout
and indexes can change without touching a job, and each backend keeps its dialect's SQL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import msgspec

from plaudit.events import StoredEvent
from plaudit.store.backend import Tx
from plaudit.store.projections import EVENT_SELECT, _row_to_event, scan, type_condition
from plaudit.store.schema import EVENT_COLUMNS

_ID_CHUNK = 500
#: Raw columns `scan_columns` may return.
COLUMNS = frozenset(EVENT_COLUMNS)
#: How much of a quarantined line is kept.
RAW_KEEP = 64 * 1024


class Sums(NamedTuple):
    """Sums of one integer payload field over events of one type."""

    total: int
    positive: int
    negative: int
    count: int


class QuarantinedLine(msgspec.Struct, frozen=True):
    file: str
    line_no: int
    reason: str
    raw: str
    ts_ms: int


def _chunks(seq: Sequence[Any], n: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(seq), n):
        yield seq[i : i + n]


class LogView:
    """Read operations on the log as `tx` sees it."""

    __slots__ = ("tx",)

    def __init__(self, tx: Tx) -> None:
        self.tx = tx

    # -- positions and hashes -----------------------------------------------------------
    def head(self) -> tuple[int, bytes]:
        """(length, hash of the last event) as the head row records them."""
        row = self.tx.fetchone("SELECT seq, hash FROM plaudit_head WHERE one = 1")
        if row is None:
            return 0, b""
        return int(row[0]), bytes(row[1])

    def hash_at(self, seq: int) -> bytes | None:
        h = self.tx.scalar("SELECT hash FROM plaudit_events WHERE seq = ?", (seq,))
        return None if h is None else bytes(h)

    def hashes(self, lo: int, hi: int) -> list[tuple[int, bytes]]:
        """(seq, chain hash) of positions lo..hi, in order."""
        return [
            (int(s), bytes(h))
            for s, h in self.tx.fetchall(
                "SELECT seq, hash FROM plaudit_events WHERE seq >= ? AND seq <= ? ORDER BY seq",
                (lo, hi),
            )
        ]

    def check_chain(self, lo: int, hi: int, prev: bytes) -> tuple[int | None, str | None, bytes]:
        """Recompute the chain over positions lo..hi from `prev`, the hash before `lo`:
        (first bad position or None, why, the hash at `hi`). For readers that verify only
        what was appended since a head they checked before (the signals export)."""
        from plaudit.store.chain import check_rows, range_sql

        return check_rows(self.tx.chunks(range_sql(self.tx.dialect), (lo, hi)), lo, hi, prev)

    def bounds(self) -> tuple[int | None, int | None]:
        """The lowest and highest stored positions (what verify compares with the head)."""
        # Two queries, not one: SQLite answers MIN or MAX alone from the primary key, but
        # scans the whole table for both together (about 100 ms at 1M events).
        low = self.tx.scalar("SELECT MIN(seq) FROM plaudit_events")
        high = self.tx.scalar("SELECT MAX(seq) FROM plaudit_events")
        return (None if low is None else int(low)), (None if high is None else int(high))

    # -- events -------------------------------------------------------------------------
    def get(self, event_id: str) -> StoredEvent | None:
        if not isinstance(event_id, str) or "\x00" in event_id:
            return None  # no committed id can hold it (and PostgreSQL refuses NUL in text)
        row = self.tx.fetchone(f"{EVENT_SELECT} WHERE id = ?", (event_id,))
        return None if row is None else _row_to_event(row)

    def event_at(self, seq: int) -> StoredEvent | None:
        row = self.tx.fetchone(f"{EVENT_SELECT} WHERE seq = ?", (seq,))
        return None if row is None else _row_to_event(row)

    def identity_at(self, seq: int) -> tuple[str, str] | None:
        """(id, type) at a position, without decoding the payload (which may be damaged)."""
        row = self.tx.fetchone("SELECT id, type FROM plaudit_events WHERE seq = ?", (seq,))
        return None if row is None else (row[0], row[1])

    def existing(self, ids: Iterable[str]) -> dict[str, tuple[bytes, int]]:
        """Committed ids among `ids`: id -> (content_digest, seq)."""
        from plaudit.store.ops import for_dialect

        wanted = [i for i in dict.fromkeys(ids) if isinstance(i, str) and "\x00" not in i]
        return for_dialect(self.tx.dialect).held(self.tx, wanted)

    def positions(self, ids: Iterable[str]) -> dict[str, int]:
        """Committed ids among `ids`: id -> seq."""
        return {k: v[1] for k, v in self.existing(ids).items()}

    def scan(
        self,
        *,
        after: int = 0,
        until: int | None = None,
        types: Sequence[str] | None = None,
    ) -> Iterator[StoredEvent]:
        """Committed events in log order; `types` are type prefixes."""
        return scan(self.tx, after=after, until=until, prefixes=types)

    def tail(self, n: int, *, types: Sequence[str] | None = None) -> list[tuple[Any, ...]]:
        """The last `n` events as raw rows (EVENT_SELECT's columns), newest first."""
        if types:
            cond, params = type_condition(types)
            return self.tx.fetchall(
                f"{EVENT_SELECT} WHERE {cond} ORDER BY seq DESC LIMIT ?", [*params, n]
            )
        return self.tx.fetchall(f"{EVENT_SELECT} ORDER BY seq DESC LIMIT ?", (n,))

    def scan_columns(
        self,
        columns: Sequence[str],
        *,
        types: Sequence[str] | None = None,
        after: int = 0,
        until: int | None = None,
    ) -> Iterator[tuple[Any, ...]]:
        """Chosen raw columns of committed events in log order, streamed (payload as text).

        For readers that decode only what they need (the signals export reads millions of
        rows): no event object per row.
        """
        unknown = [c for c in columns if c not in COLUMNS]
        if unknown or not columns:
            raise ValueError(f"unknown log columns {unknown}; choose from {sorted(COLUMNS)}")
        where, params = self._where(types, after, until)
        sql = f"SELECT {', '.join(columns)} FROM plaudit_events WHERE {where} ORDER BY seq"
        return self.tx.iterate(sql, params)

    def payload_ints(
        self, event_type: str, fields: Sequence[str], *, after: int = 0
    ) -> Iterator[tuple[Any, ...]]:
        """(seq, id, *integer payload fields) of events of one type after a position."""
        exprs = ", ".join(self.tx.json_field("payload", f) for f in fields)
        return self.tx.iterate(
            f"SELECT seq, id, {exprs} FROM plaudit_events WHERE type = ? AND seq > ? ORDER BY seq",
            (event_type, after),
        )

    def payload_sums(self, event_type: str, field: str, *, after: int = 0) -> Sums:
        """Sum (and positive, negative parts and count) of an integer payload field, computed
        in the database: the ledger recalculates 1M transactions without decoding them."""
        pt = self.tx.json_field("payload", field)
        row = self.tx.fetchone(
            "SELECT COALESCE(SUM(pt), 0), COALESCE(SUM(CASE WHEN pt > 0 THEN pt END), 0),"
            " COALESCE(SUM(CASE WHEN pt < 0 THEN pt END), 0), COUNT(*)"
            f" FROM (SELECT {pt} AS pt FROM plaudit_events WHERE type = ? AND seq > ?) s",
            (event_type, after),
        )
        assert row is not None
        return Sums(int(row[0]), int(row[1]), int(row[2]), int(row[3]))

    def count(self, types: Sequence[str] | None = None, *, after: int = 0) -> int:
        where, params = self._where(types, after, None)
        return int(self.tx.scalar(f"SELECT COUNT(*) FROM plaudit_events WHERE {where}", params))

    def last_payload(self, event_type: str) -> tuple[int, dict[str, Any]] | None:
        """(seq, payload) of the newest event of a type; a payload that does not decode to an
        object reads as {} (verify reports the damage; readers must not crash on it)."""
        row = self.tx.fetchone(
            "SELECT seq, payload FROM plaudit_events WHERE type = ? ORDER BY seq DESC LIMIT 1",
            (event_type,),
        )
        return None if row is None else (int(row[0]), _decode_object(row[1]))

    def payloads_newest_first(self, event_type: str) -> Iterator[tuple[int, dict[str, Any]]]:
        """(seq, payload) of every event of a type, newest first (payloads as `last_payload`)."""
        for seq, payload in self.tx.iterate(
            "SELECT seq, payload FROM plaudit_events WHERE type = ? ORDER BY seq DESC",
            (event_type,),
        ):
            yield int(seq), _decode_object(payload)

    def type_counts(self) -> dict[str, int]:
        return {
            t: int(n)
            for t, n in self.tx.fetchall(
                "SELECT type, COUNT(*) FROM plaudit_events GROUP BY type ORDER BY type"
            )
        }

    def span(self) -> tuple[int, int | None, int | None]:
        """(distinct sessions, first ts_ms, last ts_ms)."""
        sessions, first, last = self.tx.fetchone(
            "SELECT COUNT(DISTINCT session_id), MIN(ts_ms), MAX(ts_ms) FROM plaudit_events"
        ) or (0, None, None)
        return int(sessions), first, last

    def projection_positions(self) -> dict[str, int]:
        return {
            n: int(a)
            for n, a in self.tx.fetchall(
                "SELECT name, applied_seq FROM plaudit_projections ORDER BY name"
            )
        }

    # -- quarantine ---------------------------------------------------------------------
    def quarantine_add(self, file: str, bad: Sequence[tuple[int, str, bytes]], ts_ms: int) -> None:
        """Keep rejected input lines (line number, reason, raw bytes), once each."""
        if not bad:
            return
        self.tx.executemany(
            "INSERT INTO plaudit_quarantine (file, line_no, reason, raw, raw_digest, ts_ms) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (file, line_no, raw_digest) DO NOTHING",
            [
                (file, line_no, reason, raw[:RAW_KEEP], hashlib.sha256(raw).digest(), ts_ms)
                for line_no, reason, raw in bad
            ],
        )

    def quarantined(self, *, file: str | None = None, limit: int = 100) -> list[QuarantinedLine]:
        """The newest `limit` quarantined lines (of one file), oldest first."""
        sql = "SELECT file, line_no, reason, raw, ts_ms FROM plaudit_quarantine"
        params: list[Any] = []
        if file is not None and "\x00" in file:
            return []  # no file name holds NUL (and PostgreSQL refuses it in text)
        if file is not None:
            sql += " WHERE file = ?"
            params.append(file)
        sql += " ORDER BY qid DESC LIMIT ?"
        params.append(limit)
        return [
            QuarantinedLine(f, int(n), r, bytes(raw).decode("utf-8", "backslashreplace"), int(ts))
            for f, n, r, raw, ts in reversed(self.tx.fetchall(sql, params))
        ]

    def quarantine_count(self) -> int:
        return int(self.tx.scalar("SELECT COUNT(*) FROM plaudit_quarantine"))

    # -- helpers ------------------------------------------------------------------------
    @staticmethod
    def _where(types: Sequence[str] | None, after: int, until: int | None) -> tuple[str, list[Any]]:
        where = ["seq > ?"]
        params: list[Any] = [after]
        if until is not None:
            where.append("seq <= ?")
            params.append(until)
        if types:
            cond, cond_params = type_condition(types)
            where.append(cond)
            params.extend(cond_params)
        return " AND ".join(where), params


def _decode_object(text: Any) -> dict[str, Any]:
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return {}
    return value if isinstance(value, dict) else {}
