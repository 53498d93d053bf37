"""The one place events get positions: the write under the sequencer lease.

Every route an append takes ends here, in a transaction that holds the lease: the events are
settled against what the log holds (`idempotency.settle`), numbered after the head, hashed into
the chain, added to the Merkle tree, inserted with the head's move, applied to the
write-path projections and, when one is due, covered by a signed checkpoint; all of it commits
or none of it does. `Leased` is such a transaction with the head as its own writes left it, so
a second write in it never reads the head row again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from plaudit.errors import ConflictError, IntegrityError
from plaudit.events import Event, Prepared, StoredEvent, prepare_batch
from plaudit.ids import now_ms
from plaudit.store.chain import chain_new_rows
from plaudit.store.idempotency import (
    AppendResult,
    BatchResult,
    OnConflict,
    settle,
    settle_group,
)
from plaudit.store.merkle import CompactRange, leaf_hashes
from plaudit.store.ops import HeadState, LogOps
from plaudit.store.tree import store_nodes
from plaudit.store.view import LogView

if TYPE_CHECKING:
    from plaudit.store.backend import Tx
    from plaudit.store.checkpointing import Checkpointer
    from plaudit.store.projections import ProjectionManager


class Request:
    """One submitted call: an append (`prepared`) or a function run under the lease (`fn`)."""

    __slots__ = ("done", "durable", "error", "fn", "on_conflict", "prepared", "result")

    def __init__(
        self,
        prepared: list[Prepared],
        on_conflict: OnConflict = "raise",
        fn: Callable[[Writer], Any] | None = None,
        durable: bool = True,
    ) -> None:
        self.prepared = prepared
        self.on_conflict = on_conflict
        self.fn = fn
        #: False: may be acknowledged before its commit reaches the disk (`EventLog.run`).
        self.durable = durable
        self.result: Any = None
        self.error: BaseException | None = None
        #: Set once the outcome is final: the transaction committed, or the call failed.
        self.done = False


def deliver(group: Sequence[Request]) -> None:
    """The group's transaction committed: every request's outcome is final."""
    for r in group:
        r.done = True


class Sequencing:
    """Numbers, chains, inserts and projects events under the lease (see the module)."""

    def __init__(
        self, ops: LogOps, projections: ProjectionManager, checkpointer: Checkpointer
    ) -> None:
        self.ops = ops
        self.projections = projections
        self.checkpointer = checkpointer
        #: Events for trailing projections appended by this process (see `EventLog._settle`).
        self.trail_pending = 0

    def leased(self, tx: Tx, head: HeadState, *, savepoints: bool = True) -> Leased:
        return Leased(self, tx, head, savepoints=savepoints)

    def committed(self, *, flushed: bool = True) -> None:
        """The transaction committed: promote the projections' staged states and publish its
        checkpoints (only once the prefix they cover is on disk: see `Checkpointer.flush`)."""
        self.projections.committed()
        self.checkpointer.flush(flushed=flushed)

    def undone(self) -> None:
        self.projections.discard()
        self.checkpointer.discard()

    # -- the write ----------------------------------------------------------------------
    def write_new(self, tx: Tx, head: HeadState, new: Sequence[Prepared]) -> HeadState:
        """Give `new` (settled: none of their ids is in the log) the positions after `head`,
        and return the head they leave."""
        rows, seq, tip = chain_new_rows(new, head.seq, head.hash, tx.blob)
        rng = self.tree_at(tx, head)
        ext = rng.extend(leaf_hashes([row[9] for row in rows]))
        store_nodes(tx, ext.nodes)
        after = head._replace(
            seq=seq, hash=tip, tree_size=seq, frontier=b"".join(ext.range.hashes), pending=False
        )
        stored = self._stored(new, rows)
        marks = self.projections.marks(stored)
        try:
            self.ops.insert_events(tx, rows, after, marks)
        except tx.unique_violation:
            # Not an id (those were settled under the lease): the position is taken, so the
            # head is behind rows added outside plaudit.
            raise IntegrityError.position_taken(head.seq) from None
        self.projections.apply(tx, stored, marked=marks is not None)
        signed = self.checkpointer.maybe_sign(tx, head, seq, ext.root, now_ms())
        if signed is not None:
            after = after._replace(checkpoint_size=signed[0], checkpoint_ms=signed[1])
        return after

    def tree_at(self, tx: Tx, head: HeadState) -> CompactRange:
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

    def _stored(
        self, prepared: Sequence[Prepared], rows: list[tuple[Any, ...]]
    ) -> list[StoredEvent]:
        """The committed events the write-path projections consume (only types one wants)."""
        stored: list[StoredEvent] = []
        wanted: dict[str, tuple[bool, bool]] = {}
        projections = self.projections
        for p, row in zip(prepared, rows, strict=True):
            e = p.event
            hit = wanted.get(e.type)
            if hit is None:
                hit = wanted[e.type] = (
                    bool(projections.matching(e.type)),
                    projections.trails(e.type),
                )
            if hit[1]:
                self.trail_pending += 1
            if hit[0]:
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


class Leased:
    """A transaction that holds the lease, with the head as its own writes left it.
    `savepoints` is False in a transaction that has none (PostgreSQL's implicit pipeline
    transaction): a group written there stands or falls whole."""

    __slots__ = ("core", "head", "savepoints", "tx")

    def __init__(self, core: Sequencing, tx: Tx, head: HeadState, *, savepoints: bool = True):
        self.core = core
        self.tx = tx
        self.head = head
        self.savepoints = savepoints

    def append(
        self,
        prepared: Sequence[Prepared],
        on_conflict: OnConflict,
        held: Mapping[str, Any] | None = None,
    ) -> BatchResult:
        """Write one call: settle it against the log (`held`, when the caller looked its ids
        up already), then give its new events positions."""
        if held is None:
            held = self.core.ops.held(self.tx, (p.event.id for p in prepared))
        s = settle(prepared, held, on_conflict, self.head.seq + 1)
        if s.new:
            self.head = self.core.write_new(self.tx, self.head, s.new)
        return BatchResult(s.results)

    def append_calls(
        self,
        calls: Sequence[tuple[Sequence[Prepared], OnConflict]],
        held: Mapping[str, Any] | None = None,
    ) -> list[BatchResult | ConflictError]:
        """Several calls as one write, with one look-up of all their ids (none when the caller
        has it: `held`): a strict call that conflicts is left out whole (`settle_group`),
        with no savepoint per call."""
        if held is None:
            held = self.core.ops.held(self.tx, (p.event.id for c in calls for p in c[0]))
        outcomes, new = settle_group(calls, held, self.head.seq + 1)
        if new:
            self.head = self.core.write_new(self.tx, self.head, new)
        return outcomes

    def run(self, group: Sequence[Request], held: Mapping[str, Any] | None = None) -> None:
        """Write every request of a group commit, setting each one's result or error.

        A lone request's error is raised (its transaction rolls back). In a group, plain
        append calls go together (`append_calls`), under one savepoint; a group with
        functions, or one whose joint write raised (a projection refusing an event), runs
        each request under a savepoint of its own, so one that raises is undone alone. If even
        the undo fails, the transaction itself is broken and the error is raised. `held`: what
        the log holds of the plain calls' ids, when the caller read it with the lease."""
        for r in group:  # a group written again (after a refused attempt) starts afresh
            r.result, r.error = None, None
        if len(group) == 1:
            self._one(group[0], held)
            return
        if not self.savepoints:  # one write, no undo of a part: an error fails the group
            self._deliver(
                group, self.append_calls([(r.prepared, r.on_conflict) for r in group], held)
            )
            return
        if all(r.fn is None for r in group) and self._together(group, held):
            return
        for r in group:
            self.tx.execute("SAVEPOINT plaudit_request")
            head = self.head
            try:
                self._one(r)
                self.tx.sync()  # a pipelined statement's error belongs to this request
            except Exception as exc:
                self.core.projections.discard()
                self.head = head
                try:
                    self.tx.execute("ROLLBACK TO SAVEPOINT plaudit_request")
                except Exception:
                    raise exc from None
                r.result, r.error = None, exc
            self.tx.execute("RELEASE SAVEPOINT plaudit_request")

    def _together(self, group: Sequence[Request], held: Mapping[str, Any] | None) -> bool:
        """Write plain append calls as one; False (nothing written) when that raised."""
        head = self.head
        self.tx.execute("SAVEPOINT plaudit_group")
        try:
            outcomes = self.append_calls([(r.prepared, r.on_conflict) for r in group], held)
        except Exception:
            self.core.projections.discard()
            self.head = head
            self.tx.execute("ROLLBACK TO SAVEPOINT plaudit_group")
            return False
        self.tx.execute("RELEASE SAVEPOINT plaudit_group")
        self._deliver(group, outcomes)
        return True

    @staticmethod
    def _deliver(group: Sequence[Request], outcomes: Sequence[BatchResult | ConflictError]) -> None:
        for r, out in zip(group, outcomes, strict=True):
            if isinstance(out, ConflictError):
                r.error = out
            else:
                r.result = out

    def _one(self, r: Request, held: Mapping[str, Any] | None = None) -> None:
        if r.fn is not None:
            r.result = r.fn(Writer(self))
        else:
            r.result = self.append(r.prepared, r.on_conflict, held)


class Writer(LogView):
    """The log inside one write transaction, under the lease: read state, then append,
    atomically. Every read operation of `LogView` is available and sees this transaction's
    own appends."""

    __slots__ = ("leased",)

    def __init__(self, leased: Leased) -> None:
        super().__init__(leased.tx)
        self.leased = leased

    def append(self, event: Event | Mapping[str, Any]) -> AppendResult:
        return self.append_batch([event]).results[0]

    def append_batch(
        self, events: Iterable[Event | Mapping[str, Any]], *, on_conflict: OnConflict = "raise"
    ) -> BatchResult:
        return self.append_prepared(prepare_batch(events), on_conflict=on_conflict)

    def append_prepared(
        self, prepared: list[Prepared], *, on_conflict: OnConflict = "raise"
    ) -> BatchResult:
        if not prepared:
            return BatchResult([])
        return self.leased.append(prepared, on_conflict)
