"""The append-only, hash-chained event log: the single source of truth.

Each committed event at position `seq` stores ``hash = sha256(hash[seq-1] || body)``, where
`body` is the event's columns joined by a separator (see `plaudit.events.Prepared.body`).
Verification rebuilds `body` from the columns in SQL, so editing any column, deleting,
inserting or reordering rows breaks the chain at the first affected position. A head digest
(`length:hash`) given out earlier proves later that nothing before it changed.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from plaudit.errors import ConflictError, IntegrityError, ValidationError
from plaudit.events import Event, Prepared, StoredEvent, prepare, prepare_batch
from plaudit.store import chain
from plaudit.store.backend import Backend, Tx
from plaudit.store.chain import GENESIS, RangeResult, check_rows, range_sql
from plaudit.store.projections import (
    EVENT_SELECT,
    ProjectionManager,
    _row_to_event,
    scan,
    type_condition,
)
from plaudit.store.schema import EVENT_COLUMNS, create_schema, schema_current

if TYPE_CHECKING:
    import subprocess

Status = Literal["appended", "present", "conflict"]
OnConflict = Literal["raise", "skip"]

_ID_CHUNK = 500
_ROW_ID = itemgetter(1)  # a row's id column (see EVENT_COLUMNS)
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
#: Logs shorter than this are verified in one pass: a worker costs more than it saves.
PARALLEL_VERIFY_MIN = 200_000


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Stop a verify worker whose result is no longer wanted (e.g. verify raised)."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def _split(length: int, parts: int) -> list[tuple[int, int]]:
    """Positions 1..length as `parts` contiguous (lo, hi) ranges."""
    if length <= 0:
        return []
    step = -(-length // parts)
    return [(lo, min(lo + step - 1, length)) for lo in range(1, length + 1, step)]


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
        n = int(length) if length.isascii() and length.isdigit() else -1
        if not sep or n < 0 or _HEX64.fullmatch(h) is None:
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
        # In-process SQLite statements cost microseconds, so the savepoint is cheaper than the
        # id lookup; on PostgreSQL each is a round trip and the lookup (one) beats two.
        self._try_optimistic = backend.dialect == "sqlite"
        self._optimistic = self._try_optimistic
        self._head_sql = "SELECT seq, hash FROM plaudit_head WHERE one = 1" + (
            " FOR UPDATE" if backend.dialect == "postgres" else ""
        )

    # -- set-up -------------------------------------------------------------------------
    def init(self) -> None:
        # Every open (every CLI call, every shell-hook emit) gets here: check with a read
        # first, so opening an existing log never waits for the write lock.
        with self.backend.read() as tx:
            if schema_current(tx):
                return
        with self.backend.write() as tx:
            create_schema(tx)

    # -- writing ------------------------------------------------------------------------
    @staticmethod
    def prepare_all(events: Iterable[Event | Mapping[str, Any]]) -> list[Prepared]:
        return prepare_batch(events)

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
        head_seq, prev = int(head_seq), bytes(prev)
        # Optimistic path: most batches are all new, so skip looking their ids up and let the
        # unique index object if one is not. On that (rare) objection, undo to the savepoint
        # and redo the batch with the lookup; stay careful until a batch is all new again.
        # A repeated id within the batch is left to the index too: the careful path sorts it out.
        if self._optimistic and prepared:
            rows, stored, results, seq, tip = self._chain_new(prepared, head_seq, prev, tx.blob)
            tx.execute("SAVEPOINT plaudit_append")
            try:
                tx.copy_rows("plaudit_events", EVENT_COLUMNS, rows)
            except tx.unique_violation:
                tx.execute("ROLLBACK TO SAVEPOINT plaudit_append")
                tx.execute("RELEASE SAVEPOINT plaudit_append")
                self._optimistic = False
            else:
                tx.execute("RELEASE SAVEPOINT plaudit_append")
                return self._finish(tx, rows, stored, results, seq, tip)
        existing = self._existing(tx, list({p.event.id for p in prepared}))
        self._optimistic = self._try_optimistic and not existing
        rows, stored, results, seq, tip = self._chain(
            prepared, existing, head_seq, prev, on_conflict, tx.blob
        )
        if not rows:
            return BatchResult(results)
        try:
            tx.copy_rows("plaudit_events", EVENT_COLUMNS, rows)
        except tx.unique_violation:
            # Not an id (those were looked up): a position is taken, so the head is behind.
            raise IntegrityError(
                f"position {head_seq + 1} is already taken but the log's head says {head_seq}: "
                "rows were added outside plaudit; run `plaudit log verify`"
            ) from None
        return self._finish(tx, rows, stored, results, seq, tip)

    def _finish(
        self,
        tx: Tx,
        rows: list[tuple[Any, ...]],
        stored: list[StoredEvent],
        results: list[AppendResult],
        seq: int,
        tip: bytes,
    ) -> BatchResult:
        tx.execute("UPDATE plaudit_head SET seq = ?, hash = ? WHERE one = 1", (seq, tip))
        self.projections.apply(tx, stored)
        return BatchResult(results)

    def _chain_new(
        self, prepared: list[Prepared], seq: int, prev: bytes, blob: Callable[[bytes], Any]
    ) -> tuple[list[tuple[Any, ...]], list[StoredEvent], list[AppendResult], int, bytes]:
        """`_chain` for a batch taken to be all new, distinct ids: the same rows, less work.

        The batch append's hot loop, so `Prepared.body` is inlined (a test holds the two
        equal). If an id is not new after all, the unique index refuses the insert and the
        batch goes through `_chain`.
        """
        rows: list[tuple[Any, ...]] = []
        add = rows.append
        stored: list[StoredEvent] = []
        sha = hashlib.sha256
        first = seq + 1
        matching_cache: dict[str, bool] = {}
        matching = self.projections.matching
        for p in prepared:
            e = p.event
            id_, type_, ts, session, source = e.id, e.type, e.ts_ms, e.session_id, e.source
            payload_text, meta_text = p.payload_text, p.meta_text
            seq += 1
            body = (
                f"{id_}\x1f{type_}\x1f{ts}\x1f{session}\x1f{source}"
                f"\x1f{payload_text}\x1f{meta_text}"
            ).encode()
            prev = sha(prev + body).digest()
            add(
                (
                    seq,
                    id_,
                    type_,
                    ts,
                    session,
                    source,
                    payload_text,
                    meta_text,
                    blob(p.content_digest),
                    blob(prev),
                )
            )
            m = matching_cache.get(type_)
            if m is None:
                m = matching_cache[type_] = bool(matching(type_))
            if m:
                stored.append(
                    StoredEvent(
                        seq=seq,
                        id=id_,
                        type=type_,
                        ts_ms=ts,
                        session_id=session,
                        source=source,
                        payload=e.payload,
                        meta=e.meta,
                        hash=prev.hex(),
                    )
                )
        results = list(
            map(AppendResult, map(_ROW_ID, rows), range(first, seq + 1), repeat("appended"))
        )
        return rows, stored, results, seq, prev

    def _chain(
        self,
        prepared: list[Prepared],
        existing: dict[str, tuple[bytes, int]],
        seq: int,
        prev: bytes,
        on_conflict: OnConflict,
        blob: Callable[[bytes], Any],
    ) -> tuple[list[tuple[Any, ...]], list[StoredEvent], list[AppendResult], int, bytes]:
        """Number and hash the new events; sort out the ones already committed."""
        results: list[AppendResult] = []
        rows: list[tuple[Any, ...]] = []
        stored: list[StoredEvent] = []
        sha = hashlib.sha256
        matching_cache: dict[str, bool] = {}
        matching = self.projections.matching
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
                    blob(p.content_digest),
                    blob(h),
                )
            )
            results.append(AppendResult(e.id, seq, "appended"))
            m = matching_cache.get(e.type)
            if m is None:
                m = matching_cache[e.type] = bool(matching(e.type))
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
        return rows, stored, results, seq, prev

    # -- reading ------------------------------------------------------------------------
    def head(self) -> Head:
        with self.backend.read() as tx:
            seq, h = tx.fetchone("SELECT seq, hash FROM plaudit_head WHERE one = 1")
        return Head(int(seq), bytes(h).hex())

    def __len__(self) -> int:
        return self.head().length

    def get(self, event_id: str) -> StoredEvent | None:
        if not isinstance(event_id, str) or "\x00" in event_id:
            return None  # no committed id can hold it (and PostgreSQL refuses NUL in text)
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
                cond, params = type_condition(types)
                rows = tx.fetchall(
                    f"{EVENT_SELECT} WHERE {cond} ORDER BY seq DESC LIMIT ?", [*params, n]
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
    def verify(
        self, against: str | Head | None = None, *, workers: int | None = None
    ) -> VerifyReport:
        """Recompute the whole chain; report the first position that does not check out.

        A long log is checked in position ranges in parallel (`workers`, default: up to two,
        one per CPU). Each range chains from the stored hash before it, which the previous
        range checks, so the result is the same as one sequential pass.
        """
        anchor = Head.parse(against) if isinstance(against, str) else against
        with ExitStack() as cleanup, self.backend.read() as tx:
            head_seq, head_hash = tx.fetchone("SELECT seq, hash FROM plaudit_head WHERE one = 1")
            head_seq, head_hash = int(head_seq), bytes(head_hash)
            low, high = tx.fetchone("SELECT MIN(seq), MAX(seq) FROM plaudit_events")
            ranges = _split(head_seq, self._verify_workers(head_seq, workers))
            futures = [self._verify_remote(lo, hi, cleanup) for lo, hi in ranges[1:]]
            results: list[RangeResult] = []
            if ranges:
                lo, hi = ranges[0]
                results.append(self._verify_local(tx, lo, hi, GENESIS))
            for (lo, hi), fut in zip(ranges[1:], futures, strict=True):
                results.append(fut(tx, lo, hi))
            anchor_hash: bytes | None = None
            if anchor is not None and 0 < anchor.length <= head_seq:
                h = tx.scalar("SELECT hash FROM plaudit_events WHERE seq = ?", (anchor.length,))
                anchor_hash = None if h is None else bytes(h)
        first_bad: int | None = None
        reason: str | None = None
        checked = 0
        last = GENESIS
        if low is not None and int(low) < 1:
            first_bad, reason = 1, f"a row at position {low} was inserted before the log"
        else:
            for (_, hi), (bad, why, tip) in zip(ranges, results, strict=True):
                if bad is not None:
                    first_bad, reason, checked = bad, why, bad - 1
                    if high is None or bad > int(high):
                        reason = (
                            f"the log ends at position {checked} but its head says {head_seq}: "
                            "events were deleted from the end"
                        )
                    break
                checked, last = hi, tip
        if first_bad is None:
            if high is not None and int(high) > head_seq:
                first_bad, reason = (
                    head_seq + 1,
                    f"position {head_seq + 1} onwards was added outside plaudit "
                    "(the head does not cover it)",
                )
            elif last != head_hash:
                first_bad, reason = max(head_seq, 1), "the head does not match the last event"
        if first_bad is None and anchor is not None:
            if anchor.length > checked:
                first_bad, reason = (
                    checked + 1,
                    f"the earlier head covers {anchor.length} events but the log has {checked}",
                )
            else:
                expected = GENESIS if anchor.length == 0 else anchor_hash
                if expected is None or expected.hex() != anchor.hash:
                    first_bad, reason = (
                        max(anchor.length, 1),
                        f"the log no longer extends the head {anchor.digest}: "
                        "history before it was rewritten",
                    )
        return VerifyReport(
            ok=first_bad is None,
            length=head_seq,
            checked=checked,
            head=Head(head_seq, head_hash.hex()).digest,
            first_bad=first_bad,
            reason=reason,
            against=None if anchor is None else anchor.digest,
        )

    def _verify_workers(self, length: int, workers: int | None) -> int:
        if workers is None:
            if length < PARALLEL_VERIFY_MIN:
                return 1
            workers = min(2, os.cpu_count() or 1)
        return max(1, min(int(workers), length))

    def _verify_local(self, tx: Tx, lo: int, hi: int, prev: bytes | None) -> RangeResult:
        if prev is None:
            h = tx.scalar("SELECT hash FROM plaudit_events WHERE seq = ?", (lo - 1,))
            if h is None:
                return lo - 1, f"position {lo - 1} is missing (deleted from the log)", b""
            prev = bytes(h)
        sql = range_sql(self.backend.body_sql())
        return check_rows(tx.chunks(sql, (lo, hi)), lo, hi, prev)

    def _verify_remote(
        self, lo: int, hi: int, cleanup: ExitStack
    ) -> Callable[[Tx, int, int], RangeResult]:
        """Start checking lo..hi elsewhere; the returned callable waits for the result.

        Whatever goes wrong with the worker (not with the log) falls back to checking the
        range in this process, so a worker can only ever make verify faster, never weaker.
        """
        # Imported here: the append path (and a shell hook's emit) never needs them.
        import json
        import subprocess
        import sys
        from concurrent.futures import ThreadPoolExecutor

        backend = self.backend
        path = getattr(backend, "path", None)
        if backend.dialect == "sqlite" and path is not None and str(path) != ":memory:":
            # A separate process: SQLite reading and hashing then use the other core fully.
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-I", chain.__file__, str(path), str(lo), str(hi)],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                )
            except OSError:
                return lambda tx, lo, hi: self._verify_local(tx, lo, hi, None)
            cleanup.callback(_reap, proc)

            def wait(tx: Tx, lo: int, hi: int) -> RangeResult:
                out, _ = proc.communicate()
                try:
                    if proc.returncode != 0:
                        raise ValueError(proc.returncode)
                    r = json.loads(out)
                    return r["first_bad"], r["reason"], bytes.fromhex(r["last"])
                except (ValueError, KeyError, TypeError):
                    # The worker failed (not the log): check the range here instead.
                    return self._verify_local(tx, lo, hi, None)

            return wait
        # PostgreSQL does the body rebuilding server-side: a second connection in a thread.
        pool = ThreadPoolExecutor(1)

        def work() -> RangeResult:
            with backend.read_elsewhere() as tx:
                return self._verify_local(tx, lo, hi, None)

        future = pool.submit(work)
        pool.shutdown(wait=False)

        def result(tx: Tx, lo: int, hi: int) -> RangeResult:
            try:
                return future.result()
            except Exception:  # the second connection failed: do the range here
                return self._verify_local(tx, lo, hi, None)

        return result

    # -- projections --------------------------------------------------------------------
    def rebuild(self, names: Sequence[str] | None = None) -> dict[str, int]:
        """Drop every projection and replay the log into it; the result is identical state."""
        with self.backend.write() as tx:
            head_seq, _ = tx.fetchone(self._head_sql)
            return self.projections.rebuild(tx, int(head_seq), names)

    def ensure_projection(self, name: str) -> None:
        """Create a projection's tables and catch it up, before a module reads them."""
        with self.backend.read() as tx:  # the usual case: nothing to do, so no write lock
            head_seq = int(tx.scalar("SELECT seq FROM plaudit_head WHERE one = 1"))
            if self.projections.is_current(tx, name, head_seq):
                return
        with self.backend.write() as tx:
            head_seq, _ = tx.fetchone(self._head_sql)
            self.projections.ensure_named(tx, name, int(head_seq))
