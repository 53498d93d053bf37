"""The append-only, hash-chained event log: the single source of truth.

`EventLog` is a façade. Every write goes through one seam, the backend's `Sequencer`
(`plaudit.store.sequencer`): `append` waits for positions, `enqueue` for durability, `run` and
`writer` hold the lease. Events get positions in one place (`plaudit.store.sequencing`), under
one idempotency rule (`plaudit.store.idempotency`). Reads go through `LogView`; verification
lives in `plaudit.store.verify`, proofs in `plaudit.store.proving`. docs/architecture.md shows
the whole flow on one page.

Readers see sequenced events only; pending intake is invisible until a pass sequences it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from plaudit.events import Event, Prepared, StoredEvent, prepare, prepare_batch
from plaudit.store.backend import Backend
from plaudit.store.checkpointing import Checkpointer
from plaudit.store.idempotency import (
    AppendResult,
    BatchResult,
    OnConflict,
    Status,
    check_on_conflict,
)
from plaudit.store.projections import ProjectionManager, _row_to_event, trailing_projections
from plaudit.store.schema import create_schema, schema_current
from plaudit.store.sequencer import batch_of
from plaudit.store.sequencing import Sequencing, Writer
from plaudit.store.verify import Head, Verifier, VerifyReport
from plaudit.store.view import LogView

if TYPE_CHECKING:
    from plaudit.store.writers import WriterKey

T = TypeVar("T")

#: Log positions a trailing projection applies per write transaction when it catches up.
CATCH_UP_CHUNK = 5_000
#: Events for trailing projections a process must have appended before closing its store
#: catches them up (see `EventLog._settle`).
SETTLE_MIN = 64


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


class EventLog:
    def __init__(
        self,
        backend: Backend,
        checkpointer: Checkpointer | None = None,
        writer_key: WriterKey | None = None,
    ) -> None:
        self.backend = backend
        self.projections = ProjectionManager()
        self.checkpointer = checkpointer or Checkpointer(backend)
        self.core = Sequencing(backend.ops, self.projections, self.checkpointer, writer_key)
        self.sequencer = backend.sequencer(self.core)
        self.sequencer.idle_work = lambda: self.catch_up(budget_s=0.0) > 0
        self._verifier = Verifier(backend, self.checkpointer)
        # First: whoever waits on this process (a host's followers) is answered, and what it
        # queued is sequenced, while the connections still work.
        backend.on_close.insert(0, self.sequencer.close)
        backend.on_close.append(self._settle)

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
        return prepare_batch(events)  # the sequencer adds the writer's signature

    @contextmanager
    def writer(self) -> Iterator[Writer]:
        """Hold the write lock from the first line: nothing you read here can change before
        your appends commit, on any backend. Pending intake is sequenced first, so the
        writer sees every acknowledged event. The block must not stay idle for long: on
        PostgreSQL a transaction idle for half the deadline loses the lease (docs/log.md)."""
        with self.sequencer.leased() as leased:
            yield Writer(leased)

    @contextmanager
    def reading(self) -> Iterator[LogView]:
        """A consistent read-only view of the sequenced log."""
        with self.backend.read() as tx:
            yield LogView(tx)

    def append(self, event: Event | Mapping[str, Any]) -> AppendResult:
        """Append one event; returns once it is durable and sequenced. Idempotent by id."""
        return batch_of(self.sequencer.submit([prepare(event)])).results[0]

    def append_batch(
        self, events: Iterable[Event | Mapping[str, Any]], *, on_conflict: OnConflict = "raise"
    ) -> BatchResult:
        """Append events atomically: all of them or, on a validation error, none."""
        on_conflict = check_on_conflict(on_conflict)
        prepared = self.prepare_all(events)
        if not prepared:
            return BatchResult([])
        return batch_of(self.sequencer.submit(prepared, on_conflict))

    def enqueue(self, event: Event | Mapping[str, Any]) -> AppendResult:
        """Append one event, acknowledged once it is durable: on a backend with an intake
        (PostgreSQL) that may be before it has a position, so the result is "queued" with no
        seq (or "present" with one, for an id the log already holds). See `enqueue_batch`."""
        return self.enqueue_batch([event]).results[0]

    def enqueue_batch(
        self, events: Iterable[Event | Mapping[str, Any]], *, on_conflict: OnConflict = "raise"
    ) -> BatchResult:
        """Append events atomically, acknowledged once durable, without waiting for positions.

        For writers that need throughput more than positions (router decisions, telemetry
        from many hosts): on PostgreSQL the call costs one statement and no lock, and a
        sequencing pass gives the events positions moments later, in batches. Until then
        readers do not see them (`reading()` shows the sequenced log only); `sequence()` or
        any `writer()` sequences them at once. Idempotency and conflicts work as in
        `append_batch`: a strict batch with an id the log or the intake holds with other
        content raises `ConflictError` and takes nothing in. Where positions come as cheaply
        (SQLite, or a host leader's group commit), the events are appended."""
        on_conflict = check_on_conflict(on_conflict)
        prepared = self.prepare_all(events)
        if not prepared:
            return BatchResult([])
        return batch_of(self.sequencer.submit(prepared, on_conflict, enqueue=True))

    def sequence(self) -> int:
        """Give positions to pending intake now (appends that were durable but whose appender
        died before they were sequenced); returns how many. Any writer does this too."""
        return self.sequencer.sequence_pending()

    def run(self, fn: Callable[[Writer], T], *, durable: bool = True) -> T:
        """Run `fn(writer)` under the lease and commit, like `with writer() as w: fn(w)`, but
        group-committed: functions and appends that threads of this process submit at the same
        moment share one transaction (and one fsync), each under its own savepoint, so one that
        raises is undone alone. `fn` runs in whichever thread leads the group, so it must only
        use the writer it is given.

        `durable=False` lets the commit return without waiting for the disk (SQLite: no fsync
        of the WAL for that commit). What it wrote survives a killed process at once, and power
        loss from the next durable commit on: the WAL is synced in order, so that commit's sync
        covers it. Use it for a write whose loss is harmless until a later write depends on it
        (a bandit run before its observation). A group with any durable request is synced."""
        result: T = self.sequencer.submit([], fn=fn, durable=durable).result()
        return result

    # -- reading ------------------------------------------------------------------------
    def head(self) -> Head:
        """The log's length and last hash: one statement (on PostgreSQL without a BEGIN and
        ROLLBACK of its own, 3 of an append request's 5 statements when it was a snapshot)."""
        with self.backend.read_statement() as tx:
            seq, h = LogView(tx).head()
        return Head(seq, h.hex())

    def __len__(self) -> int:
        return self.head().length

    def get(self, event_id: str) -> StoredEvent | None:
        with self.reading() as view:
            return view.get(event_id)

    def replay(
        self,
        after_seq: int = 0,
        *,
        types: Sequence[str] | None = None,
        until_seq: int | None = None,
    ) -> Iterator[StoredEvent]:
        """Stream committed events in log order; `types` are type prefixes."""
        with self.reading() as view:
            yield from view.scan(after=after_seq, until=until_seq, types=types)

    def tail(self, n: int = 10, *, types: Sequence[str] | None = None) -> list[StoredEvent]:
        """The last `n` events, oldest first."""
        with self.reading() as view:
            rows = view.tail(n, types=types)
        return [_row_to_event(r) for r in reversed(rows)]

    def stats(self) -> LogStats:
        with self.reading() as view:
            seq, h = view.head()
            by_type = view.type_counts()
            sessions, first, last = view.span()
            projections = view.projection_positions()
            quarantined = view.quarantine_count()
        return LogStats(
            backend=self.backend.dialect,
            length=seq,
            head=Head(seq, h.hex()).digest,
            sessions=sessions,
            first_ts_ms=first,
            last_ts_ms=last,
            by_type=by_type,
            projections=projections,
            quarantined=quarantined,
        )

    # -- verification, checkpoints and proofs -------------------------------------------
    def verify(
        self,
        against: str | Head | None = None,
        *,
        workers: int | None = None,
        full: bool = False,
        witness: Sequence[str | os.PathLike[str]] = (),
        writers: bool = False,
        new_only: bool = False,
    ) -> VerifyReport:
        """Check the chain, the Merkle tree, the signed checkpoints and the witnesses; report
        the first position that does not check out (see `plaudit.store.verify`). `writers`:
        also every event's writer signature (`plaudit.store.writers`). `new_only`: only what
        came after this process's last verify."""
        return self._verifier.verify(
            against,
            workers=workers,
            full=full,
            witness=witness,
            writers=writers,
            new_only=new_only,
        )

    def register_writer(self, verifier_key: str) -> AppendResult:
        """Register a writer (its C2SP verifier key string): events it signs pass
        `verify(writers=True)`."""
        from plaudit.events import make_event
        from plaudit.store.signed_note import parse_verifier_key
        from plaudit.store.writers import WRITER_TYPE

        key = parse_verifier_key(verifier_key, where="writer key")
        return self.append(make_event(WRITER_TYPE, {"key": str(key)}, id=f"writer-{key.label}"))

    def key_info(self) -> Any:
        """The public key that signs this log's checkpoints, and its fingerprint."""
        from plaudit.store.proving import key_info

        return key_info(self)

    def rotate_key(self) -> Any:
        """Replace the signing key: a rotation event signed by the old key and a checkpoint
        of the new one, in one transaction (see `plaudit.store.rotation`)."""
        from plaudit.store.proving import rotate_key

        return rotate_key(self)

    def check_receipt(self, note: str | bytes) -> Any:
        """What became of the events of an `enqueue` receipt: a `ReceiptReport` saying, per
        event, sequenced (with the content received), pending, changed or dropped."""
        from plaudit.store.proving import check_receipt

        return check_receipt(self, note)

    def checkpoint(self) -> Any:
        """Sign a checkpoint of the log as it is now; it also goes to every witness."""
        from plaudit.store.proving import checkpoint_now

        return checkpoint_now(self)

    def latest_checkpoint(self) -> Any:
        """The newest stored checkpoint, or None."""
        from plaudit.store.proving import newest_checkpoint

        with self.reading() as view:
            return newest_checkpoint(view.tx)

    def prove(self, event_id: str, *, sign: bool = True) -> bytes:
        """A self-contained inclusion proof bundle (JSON bytes) for one event. With no signed
        checkpoint covering it yet, one is signed now (`sign=False`: NotFoundError instead)."""
        from plaudit.store.proving import prove

        return prove(self, event_id, sign=sign)

    def consistency(
        self, from_size: int, old_root: bytes | None = None, *, sign: bool = True
    ) -> bytes:
        """A bundle proving that the log extends its tree of `from_size` events."""
        from plaudit.store.proving import consistency_from

        return consistency_from(self, from_size, old_root, sign=sign)

    # -- projections --------------------------------------------------------------------
    def rebuild(self, names: Sequence[str] | None = None) -> dict[str, int]:
        """Drop every projection and replay the log into it; the result is identical state."""
        with self.writer() as w:
            head_seq, _ = w.head()
            return self.projections.rebuild(w.tx, head_seq, names)

    def ensure_projection(self, name: str) -> None:
        """Create a projection's tables and catch it up to the head, before a module reads
        them. A long catch-up (a trailing projection after many appends, a new version) runs
        in transactions of `CATCH_UP_CHUNK` positions, so appends go on meanwhile; what the
        caller then reads is the state as of a position at or after the head it asked at."""
        with self.reading() as view:  # the usual case: nothing to do, so no write lock
            target, _ = view.head()
            if self.projections.is_current(view.tx, name, target):
                return
        while self._catch_up_once(name, target) < target:
            pass

    def catch_up(self, *, budget_s: float | None = None, max_lag: int | None = None) -> int:
        """Apply what the trailing projections have not seen yet; returns how many log
        positions that covered, summed over those projections. With `budget_s`, stops after
        the first chunk that ends past it (an idle pump's work); with `max_lag`, leaves alone
        a projection further behind than that."""
        names = trailing_projections()
        if not names:
            return 0
        started = time.monotonic()
        covered = 0
        with self.reading() as view:
            target, _ = view.head()
            behind = {n: self.projections.applied(view.tx, n) for n in names}
        for name in names:
            at = behind[name] or 0
            if max_lag is not None and target - at > max_lag:
                continue
            while at < target:
                now = self._catch_up_once(name, target)
                covered += now - at
                at = now
                if budget_s is not None and time.monotonic() - started > budget_s:
                    return covered
        return covered

    def _settle(self) -> None:
        """On close: a process that appended a batch's worth of events for a trailing
        projection brings it up to date if little is left (one chunk), so the rows are current
        soon after the events arrive and the next reader has nothing to do. A bulk import's
        backlog is left to the readers, and so are a few events (a shell hook's one emit
        should not pay a second commit)."""
        if self.core.trail_pending >= SETTLE_MIN:
            self.core.trail_pending = 0
            self.catch_up(max_lag=CATCH_UP_CHUNK)

    def _catch_up_once(self, name: str, target: int) -> int:
        with self.writer() as w:
            return self.projections.catch_up(w.tx, name, target, CATCH_UP_CHUNK)


__all__ = [
    "AppendResult",
    "BatchResult",
    "EventLog",
    "Head",
    "LogStats",
    "Status",
    "VerifyReport",
    "Writer",
]
