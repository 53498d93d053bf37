"""The append-only, hash-chained event log: the single source of truth.

How an append flows (docs/log.md has the whole story and each guarantee's test):

1. The events are validated and encoded (`plaudit.events.prepare_batch`).
2. Appenders of one process meet in a group commit: whoever holds the leader lock writes
   every request queued so far in one transaction, each under its own savepoint.
3. That transaction asks for the sequencer lease (`Backend.try_write`). With it, the writer
   first sequences any pending intake, then gives its own events positions, extends the hash
   chain, applies the projections and commits: one commit, as with a single writer.
4. Without it (PostgreSQL, when another host holds the lease), the events are made durable in
   the intake table instead: one plain commit, idempotent by id, no global lock. The appender
   then waits, taking the lease itself whenever it is free, until a sequencing pass has given
   them positions, and only then returns, so a caller always reads its own write.

Readers see sequenced events only; pending intake is invisible until a pass sequences it.
The chain format lives in `plaudit.store.chain`.
"""

from __future__ import annotations

import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import msgspec

from plaudit.errors import ConflictError, IntegrityError, PlauditError, ValidationError
from plaudit.events import Event, Prepared, StoredEvent, prepare, prepare_batch
from plaudit.ids import now_ms
from plaudit.store import chain
from plaudit.store.backend import Backend, HeadMoved, Tx
from plaudit.store.chain import GENESIS, RangeResult, chain_new_rows, check_rows, range_sql
from plaudit.store.checkpointing import Checkpointer, HeadState
from plaudit.store.merkle import CompactRange, leaf_hashes
from plaudit.store.projections import ProjectionManager, _row_to_event, fingerprint
from plaudit.store.relay import Pump, Relay, Waiter, encode_results
from plaudit.store.schema import EVENT_COLUMNS, create_schema, schema_current
from plaudit.store.tree import store_nodes
from plaudit.store.view import LogView

if TYPE_CHECKING:
    import subprocess
    from pathlib import Path

    from plaudit.store import hostgroup

#: "queued": durable in the intake, its position not given yet (see `EventLog.enqueue`).
Status = Literal["appended", "present", "conflict", "queued"]
T = TypeVar("T")
OnConflict = Literal["raise", "skip"]

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


def _paths(values: Sequence[str | os.PathLike[str]]) -> list[Path]:
    from pathlib import Path

    return [Path(v).expanduser() for v in values]


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
    def queued(self) -> int:
        return sum(r.status == "queued" for r in self.results)

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
    #: "incremental" (from `from_checkpoint`, confirmed by an earlier verify) or "full".
    mode: str = "full"
    from_checkpoint: int | None = None
    #: Signed checkpoints checked against the tree, and each witness's outcome.
    checkpoints: int = 0
    witnesses: list[dict[str, Any]] = msgspec.field(default_factory=list)


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


def _by_batch(rows: list[tuple[Any, ...]]) -> Iterator[list[tuple[Any, ...]]]:
    """Intake rows (sorted by intake number) grouped by the append call that made them, in
    the order their first rows arrived (concurrent calls' numbers interleave)."""
    groups: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        groups.setdefault(row[9], []).append(row)
    yield from groups.values()


class Writer(LogView):
    """The log inside one write transaction, under the lease: read state, then append, atomically.

    Every read operation of `LogView` is available and sees this transaction's own appends.
    """

    __slots__ = ("log",)

    def __init__(self, log: EventLog, tx: Tx) -> None:
        super().__init__(tx)
        self.log = log

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


class _Request:
    """One append call, or one `run` function, waiting for its turn in a group commit."""

    __slots__ = (
        "batch",
        "done",
        "durable",
        "error",
        "fn",
        "found",
        "ids",
        "on_conflict",
        "own",
        "prepared",
        "present",
        "result",
    )

    def __init__(
        self,
        prepared: list[Prepared],
        on_conflict: OnConflict,
        fn: Callable[[Writer], Any] | None = None,
        durable: bool = True,
        ids: Sequence[str] = (),
    ) -> None:
        self.prepared = prepared
        self.on_conflict = on_conflict
        self.fn = fn
        #: Ids `fn` may append, looked up with the lease (see `EventLog.run`).
        self.ids = ids
        #: False: this request may be acknowledged before its commit reaches disk.
        self.durable = durable
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False
        self.batch = ""
        self.present: dict[str, int] = {}
        #: Every event waits on an intake row of this request's own (not another appender's).
        self.own = False
        #: What the intake statement found per id: (sequenced digest, seq, pending digest).
        self.found: dict[str, tuple[bytes | None, int | None, bytes | None]] = {}


#: Marks the intake token of an `enqueue` call, whose caller waits for no notification (a
#: waiting append's token is hex, so it never starts with this).
UNHEARD = "q"
#: Pending intake rows one sequencing pass takes at a time.
DRAIN_CHUNK = 5000
#: Log positions a trailing projection applies per write transaction when it catches up.
CATCH_UP_CHUNK = 5_000
#: Events for trailing projections a process must have appended before closing its store
#: catches them up (see `EventLog._settle`).
SETTLE_MIN = 64
#: A process that queued events asks for a pump at most this often (a pump elsewhere may
#: hold the pump lock; asking costs a statement).
PUMP_ASK_S = 0.05
#: How long a waiter trusts the relay before it looks its ids up (and starts a pump).
RELAY_WAIT_S = 0.05
#: Give up waiting for a sequencer after this long (a stuck lease holder, not a slow one).
WAIT_LIMIT_S = 120.0


class EventLog:
    #: How many events for trailing projections this process appended (see `_settle`).
    _trail_pending = 0

    def __init__(self, backend: Backend, checkpointer: Checkpointer | None = None) -> None:
        self.backend = backend
        self.projections = ProjectionManager()
        self.checkpointer = checkpointer or Checkpointer(backend)
        # In-process SQLite statements cost microseconds, so the savepoint is cheaper than the
        # id lookup; on PostgreSQL each is a round trip and the lookup (one) beats two.
        self._try_optimistic = backend.dialect == "sqlite"
        self._optimistic = self._try_optimistic
        # Set by a sequenced write that saw intake arrive while it held the lease.
        self._intake_seen = False
        # The head as this process's last group left it, for the next to go ahead on (see
        # `_try_group`), and how many groups to write without it after misses.
        self._expect: HeadState | None = None
        self._expect_misses = 0
        self._expect_skip = 0
        # Group commit: appenders of this process queue here; one leader writes them all.
        self._queue: list[_Request] = []
        self._queue_lock = threading.Lock()
        self._leader = threading.Lock()
        # Appends that wait on the intake hear their results from the relay; the pump keeps
        # sequencing while intake arrives (see plaudit.store.relay). Started when first needed.
        self._relay: Relay | None = None
        self._pump: Pump | None = None
        #: Group commit with the other processes of this host (see plaudit.store.hostgroup).
        self._host: hostgroup.HostGroup | None = None
        if backend.has_intake:
            # Imported here: the SQLite shell-hook path must not pay for sockets and paths.
            from plaudit.store import hostgroup

            if hostgroup.enabled():
                self._host = hostgroup.HostGroup(backend.url, fingerprint, self._commit_calls)
                # First: the leader answers what is under way while its connections work.
                backend.on_close.insert(0, self._host.close)
            b: Any = backend
            self._relay = Relay(b.listener, b.channel)
            self._pump = Pump(
                b.claim_pump,
                b.release_pump,
                b.intake_pending,
                self._pump_pass,
                idle=lambda: self.catch_up(budget_s=0.0) > 0,
                waited_on=lambda: self._pass_heard,
            )
            #: Whether the last pass published a result someone waits for.
            self._pass_heard = True
            backend.on_close.append(self._sequence_queued)
            backend.on_close.append(self._relay.close)
            backend.on_close.append(self._pump.close)
        # Events this process queued (`enqueue`) that may still wait for positions.
        self._queued = False
        backend.on_close.append(self._settle)
        self._pump_asked = 0.0

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
        """Hold the write lock from the first line: nothing you read here can change before
        your appends commit, on any backend. Pending intake is sequenced first, so the
        writer sees every acknowledged event."""
        try:
            with self.backend.write() as tx:
                if tx.head_for_sequencing().pending:
                    self._drain(tx)
                yield Writer(self, tx)
        except BaseException:
            self._undone()
            raise
        self._committed()

    @contextmanager
    def reading(self) -> Iterator[LogView]:
        """A consistent read-only view of the sequenced log."""
        with self.backend.read() as tx:
            yield LogView(tx)

    def append(self, event: Event | Mapping[str, Any]) -> AppendResult:
        """Append one event; returns once it is durable and sequenced. Idempotent by id."""
        return self._submit([prepare(event)], "raise").results[0]

    def append_batch(
        self, events: Iterable[Event | Mapping[str, Any]], *, on_conflict: OnConflict = "raise"
    ) -> BatchResult:
        """Append events atomically: all of them or, on a validation error, none."""
        prepared = self.prepare_all(events)
        if not prepared:
            return BatchResult([])
        return self._submit(prepared, on_conflict)

    def enqueue(self, event: Event | Mapping[str, Any]) -> AppendResult:
        """Append one event, acknowledged once it is durable: on a backend with an intake
        (PostgreSQL) that is before it has a position, so the result is "queued" with no seq
        (or "present" with one, for an id the log already holds). See `enqueue_batch`."""
        return self.enqueue_batch([event]).results[0]

    def enqueue_batch(
        self, events: Iterable[Event | Mapping[str, Any]], *, on_conflict: OnConflict = "raise"
    ) -> BatchResult:
        """Append events atomically, acknowledged once durable, without waiting for positions.

        For writers that need throughput more than positions (router decisions, telemetry
        from many hosts): the call costs one statement and no lock, and a sequencing pass
        (this process's pump, or any writer's) gives the events positions moments later, in
        batches. Until then readers do not see them (`reading()` shows the sequenced log
        only); `sequence()` or any `writer()` sequences them at once. Idempotency and
        conflicts work as in `append_batch`: a strict batch with an id the log or the intake
        holds with other content raises `ConflictError` and takes nothing in. On backends
        without an intake (SQLite) this is `append_batch`."""
        prepared = self.prepare_all(events)
        if not prepared:
            return BatchResult([])
        if self._pump is None:
            return self._submit(prepared, on_conflict)  # type: ignore[no-any-return]
        host = self._host
        if host is not None:
            # A host leader's group commit costs less than an intake row and a pass, and it
            # answers with positions (a stronger acknowledgement than "queued").
            if host.grouping:
                return self._submit(prepared, on_conflict)  # type: ignore[no-any-return]
            forwarded = self._forward(host, prepared, on_conflict)
            if forwarded is not None:
                return forwarded
        r = _Request(prepared, on_conflict)
        r.batch = UNHEARD + uuid.uuid4().hex  # nobody waits on it: see `_drain`
        self._enqueue([r], acknowledged=True)
        if r.error is not None:
            raise r.error
        if r.done:  # every id was sequenced already
            return r.result  # type: ignore[no-any-return]
        if not self._queued:
            self._queued = True
            import atexit
            import weakref

            ref = weakref.ref(self)
            atexit.register(lambda: (log := ref()) is not None and log._sequence_queued())
        if time.monotonic() - self._pump_asked > PUMP_ASK_S:
            self._pump_asked = time.monotonic()
            self._pump.want()
        results: list[AppendResult] = []
        mine = {p.event.id: p.content_digest for p in prepared}
        for p in prepared:
            id_ = p.event.id
            seq_digest, seq, theirs = r.found.get(id_, (None, None, None))
            if seq_digest is not None:
                status: Status = "present" if seq_digest == mine[id_] else "conflict"
                results.append(AppendResult(id_, seq, status))
            elif theirs is not None and theirs != mine[id_]:
                results.append(AppendResult(id_, None, "conflict"))
            else:
                results.append(AppendResult(id_, None, "queued"))
        return BatchResult(results)

    def sequence(self) -> int:
        """Give positions to pending intake now (appends that were durable but whose appender
        died before they were sequenced); returns how many. Any append does this too."""
        if not self.backend.has_intake:
            return 0
        with self.backend.write() as tx:
            return self._drain(tx)

    def run(self, fn: Callable[[Writer], T], *, durable: bool = True, ids: Sequence[str] = ()) -> T:
        """Run `fn(writer)` under the lease and commit, like `with writer() as w: fn(w)`, but
        group-committed: functions and appends that threads of this process submit at the same
        moment share one transaction (and one fsync), each under its own savepoint, so one that
        raises is undone alone. `fn` runs in whichever thread leads the group, so it must only
        use the writer it is given.

        `durable=False` lets the commit return without waiting for the disk (SQLite: no fsync
        of the WAL for that commit). What it wrote survives a killed process at once, and power
        loss from the next durable commit on: the WAL is synced in order, so that commit's sync
        covers it. Use it for a write whose loss is harmless until a later write depends on it
        (a bandit run before its observation). A group with any durable request is synced.

        `ids`: the event ids `fn` expects to append, when it knows them before it runs. Which
        of them the log holds is then read with the lease, in the statement that takes it, so
        appending them needs no look-up of its own (on PostgreSQL, a round trip fewer). An
        append of other ids is looked up as usual."""
        return self._submit([], "raise", fn, durable=durable, ids=ids)  # type: ignore[no-any-return]

    def _committed(self) -> None:
        self.projections.committed()
        self.checkpointer.flush()

    def _undone(self) -> None:
        self.projections.discard()
        self.checkpointer.discard()

    @staticmethod
    def _forward(
        host: hostgroup.HostGroup, prepared: list[Prepared], on_conflict: OnConflict
    ) -> BatchResult | None:
        """The host leader's answer to this call, or None: write it here."""
        triples = host.forward(prepared, on_conflict)
        if triples is None:
            return None
        return BatchResult([AppendResult(i, s, st) for i, s, st in triples])

    def _commit_calls(self, calls: list[tuple[list[Prepared], str]]) -> list[Any]:
        """The host leader's handler: write calls (followers' and this process's own) in one
        group commit; per call, its `BatchResult` or the exception it raised."""
        reqs = [_Request(prepared, on_conflict) for prepared, on_conflict in calls]  # type: ignore[arg-type]
        self._submit_many(reqs)
        return [r.error if r.error is not None else r.result for r in reqs]

    def _submit(
        self,
        prepared: list[Prepared],
        on_conflict: OnConflict,
        fn: Callable[[Writer], Any] | None = None,
        *,
        durable: bool = True,
        ids: Sequence[str] = (),
    ) -> Any:
        """Group commit: whoever holds the leader lock writes every queued request at once.
        On PostgreSQL, a plain append call of a follower process goes to its host's leader."""
        if fn is None and self._host is not None:
            host = self._host
            forwarded = self._forward(host, prepared, on_conflict)
            if forwarded is not None:
                return forwarded
            if host.leading:
                outcome = host.submit_local(prepared, on_conflict)
                if isinstance(outcome, BaseException):
                    raise outcome
                if outcome is not None:
                    return outcome
        req = _Request(prepared, on_conflict, fn, durable, ids)
        self._submit_many([req])
        if req.error is not None:
            raise req.error
        return req.result

    def _submit_many(self, reqs: list[_Request]) -> None:
        """Queue requests and see them written (by this thread or the group's leader); each
        ends with its `result` or its `error` set."""
        with self._queue_lock:
            self._queue.extend(reqs)
        with self._leader:
            if not all(r.done for r in reqs):
                with self._queue_lock:
                    group, self._queue = self._queue, []
                try:
                    self._commit_group(group)
                except BaseException as exc:
                    self._undone()
                    for r in group:
                        if not r.done:
                            r.error, r.done = exc, True
                    if not isinstance(exc, Exception):
                        raise
                else:
                    self._committed()

    def _commit_group(self, group: list[_Request]) -> None:
        # A host leader writing its followers' calls waits for the lease rather than taking
        # the intake: the few lease holders are the hosts' leaders, each with a whole group.
        leads = self._host is not None and self._host.grouping
        if not self.backend.has_intake or any(r.fn is not None for r in group):
            self._commit_waiting(group)
            return
        relay = self._relay
        if relay is not None and relay.busy() and not leads:
            # A pump ran a pass moments ago: the lease is mostly taken, and a try that fails
            # costs a round trip, so go straight to the intake.
            self._take_in(group)
            return
        # Which of the group's ids the log holds comes with the lease, in one statement.
        ids = [p.event.id for r in group for p in r.prepared]
        if len(ids) > 500:
            ids = None
        if self._try_group(group, ids):
            return
        if leads:
            # Try again shortly rather than block on the lease: a blocked statement holds its
            # table locks while it waits, and a lease holder's DDL (a projection created on
            # first use) could then wait for them.
            pause, deadline = 0.0005, time.monotonic() + WAIT_LIMIT_S
            while time.monotonic() < deadline:
                time.sleep(pause)
                if self._try_group(group, ids):
                    return
                pause = min(pause * 2, 0.005)
        # The lease is busy: make the requests durable in the intake table, then wait until
        # the lease holder (or this process, once it gets the lease) has sequenced them.
        self._take_in(group)

    def _try_group(self, group: list[_Request], ids: list[str] | None) -> bool:
        """Write the group if the lease is free (with pending intake first); False if not.

        When this process wrote the head last, the group goes ahead on that head in one
        round trip (`try_sequence(expect=...)`); if another writer moved it meanwhile, that
        attempt is rolled back whole and the group is written as usual. Misses make the
        next attempts wait (1, 2, 4 ... 64 groups), so writers that take turns stop guessing."""
        expect, self._expect = self._expect, None
        if expect is not None and ids is not None and self._expect_skip == 0:
            try:
                with self._try_sequence(ids, expect=expect) as got:
                    assert got is not None  # an expected head raises, never answers None
                    outcomes, after = self._sequence_group(got[0], got[1], group)
            except HeadMoved:
                self._undone()
                self._expect_misses = min(max(1, 2 * self._expect_misses), 64)
                self._expect_skip = self._expect_misses
            else:
                self._expect, self._expect_misses = after, 0
                self._deliver(group, outcomes)
                return True
        elif self._expect_skip:
            self._expect_skip -= 1
        with self._try_sequence(ids) as got:
            if got is not None:
                outcomes, after = self._sequence_group(got[0], got[1], group)
        if got is None:
            return False
        self._expect = after
        self._deliver(group, outcomes)
        return True

    def _sequence_group(
        self, tx: Tx, head: HeadState, group: list[_Request]
    ) -> tuple[list[tuple[Any, BaseException | None]], HeadState | None]:
        """The group's writes under the lease, and the head they leave (None: unknown)."""
        if head.pending:
            self._drain(tx)  # it moves the head: the group reads it afresh
        self._intake_seen = False
        outcomes = self._run_group(tx, group, None if head.pending else head)
        if self._intake_seen:
            # Intake arrived while this group held the lease: sequence it in the same
            # commit, so its appenders need not wait for another pass.
            self._drain(tx)
        return outcomes, tx.head_cache

    def _commit_waiting(self, group: list[_Request]) -> None:
        """Wait for the lease and write the group under it (functions read state, so they
        need the lease itself, not the intake)."""
        flush = any(r.durable for r in group)
        ids = list(dict.fromkeys(i for r in group for i in r.ids))
        with self._sequencing(flush=flush, ids=ids if 0 < len(ids) <= 500 else None) as (
            tx,
            head,
        ):
            if head.pending:
                self._drain(tx)  # it may sequence some of `ids`: look them up after all
            else:
                if head.known is not None:
                    tx.looked_up = (frozenset(ids), dict(head.known))
                    head = head._replace(known=None)
                tx.head_cache = head
            outcomes = self._run_group(tx, group)
        self._deliver(group, outcomes)

    def _take_in(self, group: list[_Request]) -> None:
        relay = self._relay
        assert relay is not None  # every backend with an intake has a relay
        for r in group:
            r.batch = uuid.uuid4().hex
        waiters = relay.expect([r.batch for r in group])
        try:
            waiting = self._enqueue(group)
            if waiting:
                self._await_relayed(waiting, {w.token: w for w in waiters})
        finally:
            relay.forget(waiters)

    def _await_relayed(self, waiting: list[_Request], waiters: dict[str, Waiter]) -> None:
        """Wait for the relay to say where each request's events went; what it cannot say
        (or does not say in time) is looked up. Starts a pump here when none seems to run."""
        assert self._relay is not None and self._pump is not None
        if not self._relay.busy():
            self._pump.want()
        deadline = time.monotonic() + WAIT_LIMIT_S
        while waiting:
            slice_end = time.monotonic() + RELAY_WAIT_S
            unresolved: list[_Request] = []
            for r in waiting:
                w = waiters[r.batch]
                heard = w.event.wait(max(0.0, slice_end - time.monotonic()))
                if heard and w.seq is not None and r.own and len(r.prepared) == 1:
                    only = r.prepared[0].event.id
                    r.result = BatchResult([AppendResult(only, w.seq, "appended")])
                    r.done = True
                else:
                    unresolved.append(r)
            if not unresolved:
                return
            ids = list({p.event.id: None for r in unresolved for p in r.prepared})
            with self.backend.intake(single=True) as rtx:
                found, pending = rtx.sequenced(ids)  # type: ignore[attr-defined]
            waiting = []
            for r in unresolved:
                if any(p.event.id in pending for p in r.prepared):
                    waiting.append(r)
                else:
                    r.result = self._resolve_from(r, found, r.present)
                    r.done = True
            if not waiting:
                return
            # Still pending after a wait: sequence them here if the lease is free (a pump
            # that holds its lock but is stuck, e.g. a stopped process, must not stall us),
            # and ask for a pump.
            self._pump_pass()
            self._pump.want()
            if time.monotonic() > deadline:
                raise IntegrityError(
                    f"appended events were taken in but not sequenced within "
                    f"{WAIT_LIMIT_S:.0f} s: the lease holder is stuck; they stay durable and "
                    "the next append sequences them"
                )

    @contextmanager
    def _try_sequence(
        self, ids: Sequence[str] | None, expect: HeadState | None = None
    ) -> Iterator[tuple[Tx, HeadState] | None]:
        """The lease and the head (with which of `ids` are committed) if the lease is free;
        with `expect`, that head taken on trust (see `_try_group`; PostgreSQL only)."""
        b: Any = self.backend
        if hasattr(b, "try_sequence"):
            with b.try_sequence(ids, expect=expect) as got:
                yield got
            return
        with self.backend.try_write() as tx:
            yield None if tx is None else (tx, tx.head_for_sequencing(ids))

    def _sequence_queued(self) -> None:
        """On close, give positions to what this process queued (best effort: the intake
        keeps them durable, and any later writer sequences them anyway)."""
        if self._queued:
            self._queued = False
            self.sequence()

    @contextmanager
    def _sequencing(
        self, *, flush: bool = True, ids: Sequence[str] | None = None
    ) -> Iterator[tuple[Tx, HeadState]]:
        """The lease (waiting for it) and the head read under it; `flush=False`: the commit
        need not wait for the disk (see `run`). Where the lease is taken by a statement (not
        SQLite), which of `ids` the log holds comes with it, in `known`."""
        b: Any = self.backend
        if hasattr(b, "try_sequence"):
            with b.try_sequence(wait=True, ids=ids) as got:
                yield got
            return
        with self.backend.write() if flush else self.backend.write_unflushed() as tx:
            yield tx, tx.head_for_sequencing()

    def _pump_pass(self) -> int | None:
        """One sequencing pass for the pump: None when another writer holds the lease."""
        b: Any = self.backend
        try:
            with b.try_sequence(take=DRAIN_CHUNK) as got:
                n = None if got is None else self._drain(got[0], got[1], once=True)
        except BaseException:
            self._undone()
            raise
        self._committed()
        return n

    @staticmethod
    def _deliver(group: list[_Request], outcomes: list[tuple[Any, BaseException | None]]) -> None:
        for r, (result, error) in zip(group, outcomes, strict=True):
            r.result, r.error, r.done = result, error, True

    def _run_group(
        self, tx: Tx, group: list[_Request], head: HeadState | None = None
    ) -> list[tuple[Any, BaseException | None]]:
        """Write each request in turn; one that fails is undone alone (a savepoint each)."""
        if len(group) > 1 and self.backend.has_intake and all(r.fn is None for r in group):
            return self._write_group(tx, group, head)
        if len(group) == 1:
            r = group[0]
            if r.fn is not None:
                return [(r.fn(Writer(self, tx)), None)]
            return [(self._write(tx, r.prepared, r.on_conflict, head), None)]
        out: list[tuple[Any, BaseException | None]] = []
        for r in group:
            tx.execute("SAVEPOINT plaudit_request")
            try:
                if r.fn is not None:
                    result = r.fn(Writer(self, tx))
                else:
                    result = self._write(tx, r.prepared, r.on_conflict)
                tx.sync()  # a pipelined statement's error belongs to this request
                out.append((result, None))
            except Exception as exc:
                # Undo this request alone. If even that fails, the transaction itself is
                # broken (a full disk, a lost connection): every request gets the error.
                self.projections.discard()
                tx.head_cache = None
                tx.looked_up = None  # what it appended is undone
                try:
                    tx.execute("ROLLBACK TO SAVEPOINT plaudit_request")
                except Exception:
                    raise exc from None
                out.append((None, exc))
            tx.execute("RELEASE SAVEPOINT plaudit_request")
        return out

    def _write_group(
        self, tx: Tx, group: list[_Request], head: HeadState | None
    ) -> list[tuple[Any, BaseException | None]]:
        """Several append calls as one write, without a savepoint each (on PostgreSQL each is
        a statement): which ids the log holds is known before anything is written, so a
        strict call that conflicts (with the log, or with an earlier call of the group) is
        left out whole in Python, as `_drain` does with intake batches."""
        if head is None:
            head = tx.current_head()
        if head.known is not None:
            known = dict(head.known)
        else:
            known = LogView(tx).existing(p.event.id for r in group for p in r.prepared)
        new: list[Prepared] = []
        out: list[tuple[Any, BaseException | None]] = []
        for r in group:
            strict = r.on_conflict == "raise"
            staged: list[Prepared] = []
            mine: dict[str, tuple[bytes, int]] = {}
            results: list[AppendResult] = []
            bad: str | None = None
            for p in r.prepared:
                id_ = p.event.id
                hit = mine.get(id_) or known.get(id_)
                if hit is not None:
                    if hit[0] == p.content_digest:
                        results.append(AppendResult(id_, hit[1], "present"))
                    elif strict:
                        bad = id_
                        break
                    else:
                        results.append(AppendResult(id_, hit[1], "conflict"))
                    continue
                seq = head.seq + len(new) + len(staged) + 1
                mine[id_] = (p.content_digest, seq)
                staged.append(p)
                results.append(AppendResult(id_, seq, "appended"))
            if bad is not None:
                out.append((None, ConflictError(bad)))
                continue
            new.extend(staged)
            known.update(mine)
            out.append((BatchResult(results), None))
        if new:
            rows, last, tip = chain_new_rows(new, head.seq, head.hash, tx.blob)
            self._finish(tx, head, rows, self._stored(new, rows), [], last, tip, inserted=False)
        return out

    # -- the intake path (backends with `has_intake`) -------------------------------------
    def _enqueue(self, group: list[_Request], *, acknowledged: bool = False) -> list[_Request]:
        """Insert the group's new events into the intake table in one commit; returns the
        requests that now wait for sequencing (the others are done: all present, or refused).
        `acknowledged`: the caller answers once this commits (`enqueue`), so it must be
        durable by itself; otherwise the sequencing pass's commit makes it durable."""
        waiting: list[_Request] = []
        # A lone request whose single statement cannot be half done needs no transaction.
        single = len(group) == 1 and (len(group[0].prepared) == 1 or group[0].on_conflict == "skip")
        with self.backend.intake(single=single, relaxed=not acknowledged) as tx:
            for r in group:
                try:
                    if self._enqueue_one(tx, r):
                        waiting.append(r)
                except PlauditError as exc:
                    r.error, r.done = exc, True
        return waiting

    def _enqueue_one(self, tx: Any, r: _Request) -> bool:
        """Take one request in: one statement that skips ids already sequenced or pending and
        reports what it found for each. A strict request that meets a conflict is undone
        (savepoint) and raises; returns whether the request must wait for sequencing."""
        strict = r.on_conflict == "raise"
        if not r.batch:
            r.batch = uuid.uuid4().hex
        rows = [
            (
                p.event.id,
                p.event.type,
                p.event.ts_ms,
                p.event.session_id,
                p.event.source,
                p.payload_text,
                p.meta_text,
                p.content_digest,
                r.batch,
                strict,
            )
            for p in r.prepared
        ]
        savepoint = strict and len(rows) > 1
        if savepoint:
            tx.execute("SAVEPOINT plaudit_intake")
        found = tx.intake_put(rows)
        mine = {p.event.id: p.content_digest for p in reversed(r.prepared)}
        committed: dict[str, tuple[bytes, int]] = {}
        unknown = [f[0] for f in found if not f[4] and f[1] is None and f[3] is None]
        late = tx.intake_digests(unknown) if unknown else {}
        waits = False
        r.own = all(f[4] for f in found)
        for id_, seq_digest, seq, pend_digest, inserted in found:
            if seq_digest is not None:
                committed[id_] = (seq_digest, int(seq))
                r.present[id_] = int(seq)
            theirs = seq_digest if seq_digest is not None else pend_digest
            if theirs is None and not inserted:
                theirs = late.get(id_)
            if inserted or (seq_digest is None and theirs is not None):
                waits = True
            r.found[id_] = (seq_digest, seq, None if inserted else theirs)
            if strict and theirs is not None and not inserted and theirs != mine[id_]:
                if savepoint:
                    tx.execute("ROLLBACK TO SAVEPOINT plaudit_intake")
                    tx.execute("RELEASE SAVEPOINT plaudit_intake")
                raise ConflictError(id_)
        if savepoint:
            tx.execute("RELEASE SAVEPOINT plaudit_intake")
        if not waits:  # everything was sequenced already: the results are known now
            r.result = self._resolve_from(r, committed, r.present)
            r.done = True
        return waits

    @staticmethod
    def _resolve_from(
        r: _Request, found: dict[str, tuple[bytes, int]], present: dict[str, int]
    ) -> BatchResult | None:
        """The results of a request whose events are sequenced (or refused as a batch)."""
        results: list[AppendResult] = []
        seen: set[str] = set()
        for p in r.prepared:
            id_ = p.event.id
            hit = found.get(id_)
            if hit is None:
                # A strict batch the sequencer refused whole: another of its ids conflicted.
                bad = next(
                    (
                        q.event.id
                        for q in r.prepared
                        if q.event.id in found and found[q.event.id][0] != q.content_digest
                    ),
                    id_,
                )
                r.error = ConflictError(bad)
                return None
            if hit[0] != p.content_digest:
                if r.on_conflict == "raise":
                    r.error = ConflictError(id_)
                    return None
                results.append(AppendResult(id_, hit[1], "conflict"))
                continue
            status: Status = "present" if (id_ in present or id_ in seen) else "appended"
            seen.add(id_)
            results.append(AppendResult(id_, hit[1], status))
        return BatchResult(results)

    def _drain(self, tx: Tx, head: HeadState | None = None, *, once: bool = False) -> int:
        """Sequence pending intake under the lease, oldest first, in one write per pass.

        Conflicts are settled here, in Python, before anything is written: a strict batch
        with any conflict (with the log or with an earlier batch of this pass) is dropped
        whole, and its appender finds out by looking its ids up. Where each append went is
        published to the waiting appenders (see plaudit.store.relay) when this commits."""
        if not self.backend.has_intake:
            return 0
        total = 0
        published: list[tuple[str, int | None]] = []
        # Intake rows a pass refuses (conflicts): never dropped silently, see `_quarantine`.
        refused: list[tuple[tuple[Any, ...], str]] = []
        while True:
            taken = getattr(tx, "taken", None)
            if taken is not None:  # the first chunk came with the lease (`take_if_leased`)
                rows, committed = taken
                tx.taken = None  # type: ignore[attr-defined]
            else:
                rows, committed = tx.intake_take_known(DRAIN_CHUNK)  # type: ignore[attr-defined]
            if not rows:
                break
            total += len(rows)
            last = once and len(rows) < DRAIN_CHUNK
            known = {k: v[0] for k, v in committed.items()}
            accepted: list[Prepared] = []
            # Batches of one event accepted here: (token, index in `accepted`).
            singles: list[tuple[str, int]] = []
            for batch in _by_batch(rows):
                token = batch[0][9]
                # An enqueued call was answered at the intake: publishing its result would
                # only wake every listening process for nothing.
                heard = not token.startswith(UNHEARD)
                strict = bool(batch[0][10])
                if strict and any(known.get(r[1], r[8]) != bytes(r[8]) for r in batch):
                    bad = next(r[1] for r in batch if known.get(r[1], r[8]) != bytes(r[8]))
                    why = f"append call refused whole: id {bad!r} holds other content"
                    refused.extend((r, why) for r in batch)
                    if heard:
                        published.append((token, None))
                    continue
                before = len(accepted)
                for row in batch:
                    _, id_, type_, ts, session, source, payload, meta, digest, _, _ = row
                    digest = bytes(digest)
                    if known.setdefault(id_, digest) != digest:
                        # A lenient batch's conflict: a waiting appender reports it; the row
                        # is kept in quarantine either way (an enqueued one has no one else).
                        refused.append((row, f"id {id_!r} holds other content"))
                        continue
                    accepted.append(
                        Prepared(
                            Event(
                                id=id_,
                                type=type_,
                                ts_ms=int(ts),
                                session_id=session,
                                source=source,
                                payload=msgspec.json.decode(payload),
                                meta=msgspec.json.decode(meta),
                            ),
                            payload,
                            meta,
                            digest,
                        )
                    )
                if not heard:
                    pass
                elif len(batch) == 1 and len(accepted) > before:
                    singles.append((token, before))
                else:
                    published.append((token, None))
            results: list[AppendResult] = []
            if accepted:
                # The head read under the lease is current for the first chunk only; after a
                # chunk this transaction wrote, the head it left is known without a read.
                at = head if head is not None and total == len(rows) else tx.current_head()
                at = at._replace(known=committed)
                results = self._write(tx, accepted, "skip", at).results
            for token, i in singles:
                hit = results[i] if i < len(results) else None
                ok = hit is not None and hit.status == "appended"
                published.append((token, hit.seq if ok and hit is not None else None))
            if last:
                break
        if refused:
            self._quarantine(tx, refused)
        if published and self._relay is not None:
            tx.notify(self.backend.channel(), encode_results(published))  # type: ignore[attr-defined]
        self._pass_heard = bool(published)
        return total

    @staticmethod
    def _quarantine(tx: Tx, refused: list[tuple[tuple[Any, ...], str]]) -> None:
        """Keep refused intake rows in the quarantine (file "plaudit_intake", line: the row's
        intake number): an `enqueue` caller was told "queued" before a conflict that only the
        pass could see (an id being sequenced at that moment) was found."""
        enc = msgspec.json.Encoder()
        bad = []
        for row, why in refused:
            n, id_, type_, ts, session, source, payload, meta = row[:8]
            raw = enc.encode(
                {
                    "id": id_,
                    "type": type_,
                    "ts_ms": int(ts),
                    "session_id": session,
                    "source": source,
                    "payload": msgspec.Raw(payload.encode()),
                    "meta": msgspec.Raw(meta.encode()),
                }
            )
            bad.append((int(n), why, raw))
        LogView(tx).quarantine_add("plaudit_intake", bad, now_ms())

    # -- the sequenced write (under the lease) --------------------------------------------
    def _write(
        self,
        tx: Tx,
        prepared: list[Prepared],
        on_conflict: OnConflict,
        head: HeadState | None = None,
    ) -> BatchResult:
        if head is None:
            head = tx.current_head()
        head_seq, prev = head.seq, head.hash
        # Optimistic path: most batches are all new, so skip looking their ids up and let the
        # unique index object if one is not. On that (rare) objection, undo to the savepoint
        # and redo the batch with the lookup; stay careful until a batch is all new again.
        # A repeated id within the batch is left to the index too: the careful path sorts it out.
        if self._optimistic and prepared:
            rows, seq, tip = chain_new_rows(prepared, head_seq, prev, tx.blob)
            tx.execute("SAVEPOINT plaudit_append")
            try:
                tx.copy_rows("plaudit_events", EVENT_COLUMNS, rows)
            except tx.unique_violation:
                tx.execute("ROLLBACK TO SAVEPOINT plaudit_append")
                tx.execute("RELEASE SAVEPOINT plaudit_append")
                self._optimistic = False
            else:
                tx.execute("RELEASE SAVEPOINT plaudit_append")
                stored = self._stored(prepared, rows)
                results = list(
                    map(
                        AppendResult,
                        map(_ROW_ID, rows),
                        range(head_seq + 1, seq + 1),
                        repeat("appended"),
                    )
                )
                return self._finish(tx, head, rows, stored, results, seq, tip, inserted=True)
        looked_up = tx.looked_up
        if head.known is not None:
            existing = head.known
        elif looked_up is not None and looked_up[0].issuperset(p.event.id for p in prepared):
            held = looked_up[1]
            existing = {p.event.id: held[p.event.id] for p in prepared if p.event.id in held}
        else:
            existing = LogView(tx).existing(p.event.id for p in prepared)
        self._optimistic = self._try_optimistic and not existing
        rows, stored, results, seq, tip = self._chain(
            prepared, existing, head_seq, prev, on_conflict, tx.blob
        )
        if not rows:
            return BatchResult(results)
        if looked_up is not None:
            # the rows this write adds are held from now on, for this transaction's later writes
            wanted, held = looked_up
            for p, r in zip(prepared, results, strict=True):
                if r.status == "appended" and p.event.id in wanted:
                    held[p.event.id] = (p.content_digest, r.seq)
        return self._finish(tx, head, rows, stored, results, seq, tip, inserted=False)

    def _finish(
        self,
        tx: Tx,
        head: HeadState,
        rows: list[tuple[Any, ...]],
        stored: list[StoredEvent],
        results: list[AppendResult],
        seq: int,
        tip: bytes,
        *,
        inserted: bool,
    ) -> BatchResult:
        """Extend the tree by the new chain hashes, insert the rows (unless `inserted`), move
        the head, apply the projections and, when one is due, sign a checkpoint: all in the
        sequencing transaction."""
        rng = self._tree_at(tx, head)
        ext = rng.extend(leaf_hashes([row[9] for row in rows]))
        store_nodes(tx, ext.nodes)
        new_head = (seq, tx.blob(tip), seq, tx.blob(b"".join(ext.range.hashes)))
        pending = False
        marks = None
        if inserted:
            tx.move_head(new_head)
        else:
            marks = self.projections.marks(stored)
            try:
                pending = tx.insert_events(rows, new_head, marks)
            except tx.unique_violation:
                # Not an id (those were looked up): a position is taken, so the head is behind.
                raise IntegrityError.position_taken(head.seq) from None
        self.projections.apply(tx, stored, marked=marks is not None)
        tx.head_cache = head._replace(
            seq=seq,
            hash=tip,
            pending=False,
            tree_size=seq,
            frontier=b"".join(ext.range.hashes),
            known=None,
        )
        self.checkpointer.maybe_sign(tx, head, seq, ext.root, now_ms())
        self._intake_seen = pending
        return BatchResult(results)

    def _tree_at(self, tx: Tx, head: HeadState) -> CompactRange:
        """The tree's compact range at the head. The head row keeps it; a log that an older
        plaudit wrote (or extended) catches up from its chain hashes, once."""
        if head.tree_size == head.seq:
            return head.compact_range()
        if head.tree_size > head.seq:
            raise IntegrityError(
                f"the tree covers {head.tree_size} events but the log's head says {head.seq}: "
                "events were removed outside plaudit; run `plaudit log verify`"
            )
        rng = head.compact_range()
        view = LogView(tx)
        done = head.tree_size
        while done < head.seq:
            hi = min(done + 50_000, head.seq)
            hashes = [h for _, h in view.hashes(done + 1, hi)]
            if len(hashes) != hi - done:
                raise IntegrityError(
                    f"positions {done + 1}..{hi} are not all in the log: run `plaudit log verify`"
                )
            ext = rng.extend(leaf_hashes(hashes))
            store_nodes(tx, ext.nodes)
            rng, done = ext.range, hi
        return rng

    def _stored(self, prepared: list[Prepared], rows: list[tuple[Any, ...]]) -> list[StoredEvent]:
        """The committed events the projections consume (only types some projection wants)."""
        stored: list[StoredEvent] = []
        cache: dict[str, bool] = {}
        trails: dict[str, bool] = {}
        matching = self.projections.matching
        for p, row in zip(prepared, rows, strict=True):
            e = p.event
            m = cache.get(e.type)
            if m is None:
                m = cache[e.type] = bool(matching(e.type))
                trails[e.type] = self.projections.trails(e.type)
            if trails[e.type]:
                self._trail_pending += 1
            if m:
                stored.append(
                    StoredEvent(
                        seq=row[0],
                        id=e.id,
                        type=e.type,
                        ts_ms=e.ts_ms,
                        session_id=e.session_id,
                        source=e.source,
                        payload=e.payload,
                        meta=e.meta,
                        hash=bytes(row[9]).hex(),
                    )
                )
        return stored

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
        new: list[Prepared] = []
        existing = dict(existing)
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
            existing[e.id] = (p.content_digest, seq + len(new) + 1)
            results.append(AppendResult(e.id, seq + len(new) + 1, "appended"))
            new.append(p)
        rows, last, tip = chain_new_rows(new, seq, prev, blob)
        return rows, self._stored(new, rows), results, last, tip

    # -- reading ------------------------------------------------------------------------
    def head(self) -> Head:
        with self.reading() as view:
            seq, h = view.head()
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

    # -- verification -------------------------------------------------------------------
    def verify(
        self,
        against: str | Head | None = None,
        *,
        workers: int | None = None,
        full: bool = False,
        witness: Sequence[str | os.PathLike[str]] = (),
    ) -> VerifyReport:
        """Check the chain, the Merkle tree, the signed checkpoints and the witnesses; report
        the first position that does not check out.

        By default the check starts from the newest checkpoint an earlier verify confirmed,
        so its cost follows what is new (`plaudit.store.attestation`); `full=True` checks
        everything. A long full check runs in position ranges in parallel (`workers`): each
        range chains from the stored hash before it, which the previous range checks.
        Witness directories are `witness` plus the store's own (`$PLAUDIT_WITNESS`).
        """
        from plaudit.store.attestation import check_tree, verified_start

        anchor = Head.parse(against) if isinstance(against, str) else against
        key = self.checkpointer.existing_key()
        public = None if key is None else key.public_key
        witnesses = list(dict.fromkeys([*self.checkpointer.witnesses, *_paths(witness)]))
        tree = None
        with ExitStack() as cleanup, self.backend.read() as tx:
            view = LogView(tx)
            state = tx.head_state()
            head_seq, head_hash = state.seq, state.hash
            low, high = view.bounds()
            start = None if full else verified_start(tx, head_seq, public)
            if start is not None:
                ranges = [(start.size + 1, head_seq)] if start.size < head_seq else []
                results = [self._verify_local(tx, lo, hi, start.prev) for lo, hi in ranges]
                first_last = (start.size, start.prev)
            else:
                ranges = _split(head_seq, self._verify_workers(head_seq, workers))
                futures = [self._verify_remote(lo, hi, cleanup) for lo, hi in ranges[1:]]
                results = []
                if ranges:
                    lo, hi = ranges[0]
                    results.append(self._verify_local(tx, lo, hi, GENESIS))
                for (lo, hi), fut in zip(ranges[1:], futures, strict=True):
                    results.append(fut(tx, lo, hi))
                first_last = (0, GENESIS)
            anchor_hash: bytes | None = None
            if anchor is not None and 0 < anchor.length <= head_seq:
                anchor_hash = view.hash_at(anchor.length)
            chain_ok = (low is None or low >= 1) and all(r[0] is None for r in results)
            if chain_ok and (high is None or high <= head_seq):
                fp = None if key is None else key.fingerprint
                tree = check_tree(tx, state, start, public, fp, witnesses)
        first_bad: int | None = None
        reason: str | None = None
        checked, last = first_last
        if low is not None and low < 1:
            first_bad, reason = 1, f"a row at position {low} was inserted before the log"
        else:
            for (_, hi), (bad, why, tip) in zip(ranges, results, strict=True):
                if bad is not None:
                    first_bad, reason, checked = bad, why, bad - 1
                    if high is None or bad > high:
                        reason = (
                            f"the log ends at position {checked} but its head says {head_seq}: "
                            "events were deleted from the end"
                        )
                    break
                checked, last = hi, tip
        if first_bad is None:
            if high is not None and high > head_seq:
                first_bad, reason = (
                    head_seq + 1,
                    f"position {head_seq + 1} onwards was added outside plaudit "
                    "(the head does not cover it)",
                )
            elif last != head_hash:
                first_bad, reason = max(head_seq, 1), "the head does not match the last event"
            elif tree is not None and tree.first_bad is not None:
                first_bad, reason = tree.first_bad, tree.reason
                checked = min(checked, tree.first_bad - 1)
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
        if first_bad is None and tree is not None and tree.confirmed is not None:
            self._confirm(tree.confirmed)
        return VerifyReport(
            ok=first_bad is None,
            length=head_seq,
            checked=checked,
            head=Head(head_seq, head_hash.hex()).digest,
            first_bad=first_bad,
            reason=reason,
            against=None if anchor is None else anchor.digest,
            mode="full" if start is None else "incremental",
            from_checkpoint=None if start is None else start.size,
            checkpoints=0 if tree is None else tree.checkpoints,
            witnesses=[] if tree is None else tree.witnesses,
        )

    def _confirm(self, size: int) -> None:
        """Remember that the checkpoint of `size` events checked out, so the next verify can
        start there. A store this process cannot write to just verifies in full next time."""
        sql = "UPDATE plaudit_checkpoints SET verified_ms = ? WHERE size = ?"
        try:
            if self.backend.in_write():
                # Verify ran inside a writer (the ledger's write path): mark it there.
                with self.backend.read() as tx:
                    tx.execute(sql, (now_ms(), size))
                return
            with self.backend.write() as tx:
                tx.execute(sql, (now_ms(), size))
        except PlauditError:
            pass

    def _verify_workers(self, length: int, workers: int | None) -> int:
        if workers is None:
            if length < PARALLEL_VERIFY_MIN:
                return 1
            workers = min(2, os.cpu_count() or 1)
        return max(1, min(int(workers), length))

    def _verify_local(self, tx: Tx, lo: int, hi: int, prev: bytes | None) -> RangeResult:
        if prev is None:
            prev = LogView(tx).hash_at(lo - 1)
            if prev is None:
                return lo - 1, f"position {lo - 1} is missing (deleted from the log)", b""
        return check_rows(tx.chunks(range_sql(tx.dialect), (lo, hi)), lo, hi, prev)

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

    # -- checkpoints and proofs (plaudit.store.proving) ---------------------------------------
    def key_info(self) -> Any:
        """The public key that signs this log's checkpoints, and its fingerprint (created next
        to a SQLite store on first use)."""
        from plaudit.store.proving import key_info

        return key_info(self)

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
        """Apply what the trailing projections have not seen yet (see
        plaudit.store.projections); returns how many log positions that covered, summed over
        those projections. With
        `budget_s`, stops after the first chunk that ends past it (the pump's idle work); with
        `max_lag`, leaves alone a projection further behind than that."""
        from plaudit.store.projections import trailing_projections

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
        if self._trail_pending >= SETTLE_MIN:
            self._trail_pending = 0
            self.catch_up(max_lag=CATCH_UP_CHUNK)

    def _catch_up_once(self, name: str, target: int) -> int:
        with self.writer() as w:
            return self.projections.catch_up(w.tx, name, target, CATCH_UP_CHUNK)
