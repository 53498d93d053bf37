"""The append-only, hash-chained event log: the single source of truth.

Each committed event at position `seq` stores ``hash = sha256(hash[seq-1] || body)``, where
`body` is the event's columns joined by a separator (see `plaudit.events.Prepared.body`).
Verification rebuilds `body` from the columns in SQL, so editing any column, deleting,
inserting or reordering rows breaks the chain at the first affected position. A head digest
(`length:hash`) given out earlier proves later that nothing before it changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import msgspec

from plaudit.errors import ConflictError, ValidationError
from plaudit.events import Event, Prepared, StoredEvent, prepare
from plaudit.store.backend import Backend, Tx
from plaudit.store.projections import EVENT_SELECT, ProjectionManager, _row_to_event, scan
from plaudit.store.schema import EVENT_COLUMNS, GENESIS, create_schema

Status = Literal["appended", "present", "conflict"]
OnConflict = Literal["raise", "skip"]

_ID_CHUNK = 500


class AppendResult(msgspec.Struct, frozen=True):
    id: str
    seq: int | None
    status: Status


class BatchResult(msgspec.Struct):
    results: list[AppendResult]

    @property
    def appended(self) -> int:
        return sum(r.status == "appended" for r in self.results)

    @property
    def present(self) -> int:
        return sum(r.status == "present" for r in self.results)

    @property
    def conflicts(self) -> list[str]:
        return [r.id for r in self.results if r.status == "conflict"]


class Head(msgspec.Struct, frozen=True):
    length: int
    hash: str

    @property
    def digest(self) -> str:
        return f"{self.length}:{self.hash}"

    @classmethod
    def parse(cls, digest: str) -> Head:
        length, sep, h = digest.strip().partition(":")
        try:
            n = int(length)
            bytes.fromhex(h)
        except ValueError:
            n = -1
        if not sep or n < 0 or len(h) != 64:
            raise ValidationError(
                "against", f"{digest!r} is not a head digest such as '42:<64 hex digits>'"
            )
        return cls(n, h.lower())


class VerifyReport(msgspec.Struct):
    ok: bool
    length: int
    checked: int
    head: str
    first_bad: int | None = None
    reason: str | None = None
    against: str | None = None


class LogStats(msgspec.Struct):
    backend: str
    length: int
    head: str
    sessions: int
    first_ts_ms: int | None
    last_ts_ms: int | None
    by_type: dict[str, int]
    projections: dict[str, int]
    quarantined: int


def _chunks(seq: Sequence[Any], n: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(seq), n):
        yield seq[i : i + n]


class Writer:
    """The log inside one write transaction: read state, then append, atomically."""

    def __init__(self, log: EventLog, tx: Tx) -> None:
        self.log = log
        self.tx = tx

    def append(self, event: Event | Mapping[str, Any]) -> AppendResult:
        return self.append_batch([event]).results[0]

    def append_batch(
        self, events: Iterable[Event | Mapping[str, Any]], *, on_conflict: OnConflict = "raise"
    ) -> BatchResult:
        prepared = self.log.prepare_all(events)
        return self.log._write(self.tx, prepared, on_conflict)

    def append_prepared(
        self, prepared: list[Prepared], *, on_conflict: OnConflict = "raise"
    ) -> BatchResult:
        return self.log._write(self.tx, prepared, on_conflict)


class EventLog:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.projections = ProjectionManager()
        self._head_sql = "SELECT seq, hash FROM plaudit_head WHERE one = 1" + (
            " FOR UPDATE" if backend.dialect == "postgres" else ""
        )

    # -- set-up -------------------------------------------------------------------------
    def init(self) -> None:
        with self.backend.write() as tx:
            create_schema(tx)

    # -- writing ------------------------------------------------------------------------
    @staticmethod
    def prepare_all(events: Iterable[Event | Mapping[str, Any]]) -> list[Prepared]:
        out = []
        for i, ev in enumerate(events):
            out.append(prepare(ev, where=f"event[{i}]"))
        return out

    @contextmanager
    def writer(self) -> Iterator[Writer]:
        """Hold the write lock: what you read here cannot change before your append commits."""
        with self.backend.write() as tx:
            yield Writer(self, tx)

    def append(self, event: Event | Mapping[str, Any]) -> AppendResult:
        """Append one event; returns once it is durable. Idempotent by id."""
        prepared = [prepare(event)]
        with self.backend.write() as tx:
            return self._write(tx, prepared, "raise").results[0]

    def append_batch(
        self, events: Iterable[Event | Mapping[str, Any]], *, on_conflict: OnConflict = "raise"
    ) -> BatchResult:
        """Append events atomically: all of them or, on a validation error, none."""
        prepared = self.prepare_all(events)
        if not prepared:
            return BatchResult([])
        with self.backend.write() as tx:
            return self._write(tx, prepared, on_conflict)

    def _existing(self, tx: Tx, ids: list[str]) -> dict[str, tuple[bytes, int]]:
        found: dict[str, tuple[bytes, int]] = {}
        for chunk in _chunks(ids, _ID_CHUNK):
            marks = ",".join("?" * len(chunk))
            for id_, digest, seq in tx.fetchall(
                f"SELECT id, content_digest, seq FROM plaudit_events WHERE id IN ({marks})", chunk
            ):
                found[id_] = (bytes(digest), seq)
        return found

    def _write(self, tx: Tx, prepared: list[Prepared], on_conflict: OnConflict) -> BatchResult:
        head_seq, prev = tx.fetchone(self._head_sql)  # takes the lock on PostgreSQL
        prev = bytes(prev)
        existing = self._existing(tx, list({p.event.id for p in prepared}))
        results: list[AppendResult] = []
        rows: list[tuple[Any, ...]] = []
        stored: list[StoredEvent] = []
        seq = head_seq
        sha = hashlib.sha256
        matching_cache: dict[str, bool] = {}
        for p in prepared:
            e = p.event
            hit = existing.get(e.id)
            if hit is not None:
                if hit[0] == p.content_digest:
                    results.append(AppendResult(e.id, hit[1], "present"))
                    continue
                if on_conflict == "raise":
                    raise ConflictError(e.id)
                results.append(AppendResult(e.id, hit[1], "conflict"))
                continue
            seq += 1
            h = sha(prev + p.body()).digest()
            prev = h
            existing[e.id] = (p.content_digest, seq)
            rows.append(
                (
                    seq,
                    e.id,
                    e.type,
                    e.ts_ms,
                    e.session_id,
                    e.source,
                    p.payload_text,
                    p.meta_text,
                    p.content_digest,
                    h,
                )
            )
            results.append(AppendResult(e.id, seq, "appended"))
            m = matching_cache.get(e.type)
            if m is None:
                m = matching_cache[e.type] = bool(self.projections.matching(e.type))
            if m:
                stored.append(
                    StoredEvent(
                        seq=seq,
                        id=e.id,
                        type=e.type,
                        ts_ms=e.ts_ms,
                        session_id=e.session_id,
                        source=e.source,
                        payload=e.payload,
                        meta=e.meta,
                        hash=h.hex(),
                    )
                )
        if rows:
            tx.copy_rows("plaudit_events", EVENT_COLUMNS, rows)
            tx.execute("UPDATE plaudit_head SET seq = ?, hash = ? WHERE one = 1", (seq, prev))
            self.projections.apply(tx, stored)
        return BatchResult(results)

    # -- reading ------------------------------------------------------------------------
    def head(self) -> Head:
        with self.backend.read() as tx:
            seq, h = tx.fetchone("SELECT seq, hash FROM plaudit_head WHERE one = 1")
        return Head(int(seq), bytes(h).hex())

    def __len__(self) -> int:
        return self.head().length

    def get(self, event_id: str) -> StoredEvent | None:
        with self.backend.read() as tx:
            row = tx.fetchone(f"{EVENT_SELECT} WHERE id = ?", (event_id,))
        return None if row is None else _row_to_event(row)

    def replay(
        self,
        after_seq: int = 0,
        *,
        types: Sequence[str] | None = None,
        until_seq: int | None = None,
    ) -> Iterator[StoredEvent]:
        """Stream committed events in log order; `types` are type prefixes."""
        with self.backend.read() as tx:
            yield from scan(tx, after=after_seq, until=until_seq, prefixes=types)

    def tail(self, n: int = 10, *, types: Sequence[str] | None = None) -> list[StoredEvent]:
        """The last `n` events, oldest first."""
        with self.backend.read() as tx:
            if types:
                cond = " OR ".join("type LIKE ?" for _ in types)
                rows = tx.fetchall(
                    f"{EVENT_SELECT} WHERE {cond} ORDER BY seq DESC LIMIT ?",
                    [*(t.replace("%", "") + "%" for t in types), n],
                )
            else:
                rows = tx.fetchall(f"{EVENT_SELECT} ORDER BY seq DESC LIMIT ?", (n,))
        return [_row_to_event(r) for r in reversed(rows)]

    def stats(self) -> LogStats:
        with self.backend.read() as tx:
            seq, h = tx.fetchone("SELECT seq, hash FROM plaudit_head WHERE one = 1")
            by_type = {
                t: int(n)
                for t, n in tx.fetchall(
                    "SELECT type, COUNT(*) FROM plaudit_events GROUP BY type ORDER BY type"
                )
            }
            sessions, first, last = tx.fetchone(
                "SELECT COUNT(DISTINCT session_id), MIN(ts_ms), MAX(ts_ms) FROM plaudit_events"
            )
            projections = {
                n: int(a)
                for n, a in tx.fetchall(
                    "SELECT name, applied_seq FROM plaudit_projections ORDER BY name"
                )
            }
            quarantined = int(tx.scalar("SELECT COUNT(*) FROM plaudit_quarantine"))
        return LogStats(
            backend=self.backend.dialect,
            length=int(seq),
            head=Head(int(seq), bytes(h).hex()).digest,
            sessions=int(sessions),
            first_ts_ms=first,
            last_ts_ms=last,
            by_type=by_type,
            projections=projections,
            quarantined=quarantined,
        )

    # -- verification -------------------------------------------------------------------
    def verify(self, against: str | Head | None = None) -> VerifyReport:
        """Recompute the whole chain; report the first position that does not check out."""
        anchor = Head.parse(against) if isinstance(against, str) else against
        sql = f"SELECT seq, {self.backend.body_sql()}, hash FROM plaudit_events ORDER BY seq"
        sha = hashlib.sha256
        prev = GENESIS
        expect = 1
        first_bad: int | None = None
        reason: str | None = None
        anchor_hash: bytes | None = None
        with self.backend.read() as tx:
            head_seq, head_hash = tx.fetchone("SELECT seq, hash FROM plaudit_head WHERE one = 1")
            head_hash = bytes(head_hash)
            for seq, body, stored in tx.iterate(sql):
                if seq != expect:
                    first_bad = expect
                    reason = (
                        f"position {expect} is missing (deleted or renumbered; next is {seq})"
                        if seq > expect
                        else f"position {seq} appears out of order"
                    )
                    break
                stored = bytes(stored)
                if sha(prev + bytes(body)).digest() != stored:
                    first_bad = seq
                    reason = (
                        f"position {seq} does not match the chain: the event was modified, "
                        "inserted or moved"
                    )
                    break
                if anchor is not None and seq == anchor.length:
                    anchor_hash = stored
                prev = stored
                expect += 1
        checked = expect - 1
        if first_bad is None:
            if checked < head_seq:
                first_bad, reason = (
                    checked + 1,
                    (
                        f"the log ends at position {checked} but its head says {head_seq}: "
                        "events were deleted from the end"
                    ),
                )
            elif checked > head_seq or prev != head_hash:
                first_bad, reason = (
                    head_seq + 1,
                    (
                        f"position {head_seq + 1} onwards was added outside plaudit "
                        "(the head does not cover it)"
                        if checked > head_seq
                        else "the head does not match the last event"
                    ),
                )
        if first_bad is None and anchor is not None:
            if anchor.length > checked:
                first_bad, reason = (
                    checked + 1,
                    (f"the earlier head covers {anchor.length} events but the log has {checked}"),
                )
            else:
                expected = GENESIS if anchor.length == 0 else anchor_hash
                if expected is None or expected.hex() != anchor.hash:
                    first_bad, reason = (
                        max(anchor.length, 1),
                        (
                            f"the log no longer extends the head {anchor.digest}: "
                            "history before it was rewritten"
                        ),
                    )
        return VerifyReport(
            ok=first_bad is None,
            length=int(head_seq),
            checked=checked,
            head=Head(int(head_seq), head_hash.hex()).digest,
            first_bad=first_bad,
            reason=reason,
            against=None if anchor is None else anchor.digest,
        )

    # -- projections --------------------------------------------------------------------
    def rebuild(self, names: Sequence[str] | None = None) -> dict[str, int]:
        """Drop every projection and replay the log into it; the result is identical state."""
        with self.backend.write() as tx:
            head_seq, _ = tx.fetchone(self._head_sql)
            return self.projections.rebuild(tx, int(head_seq), names)

    def ensure_projection(self, name: str) -> None:
        """Create a projection's tables and catch it up, before a module reads them."""
        with self.backend.write() as tx:
            head_seq, _ = tx.fetchone(self._head_sql)
            self.projections.ensure_named(tx, name, int(head_seq))
