"""PostgreSQL's sequencer: two routes, the lease or the intake.

1. **The lease.** A group of calls (threads of this process, and the followers of this host's
   leader, `plaudit.store.hostgroup`) takes the sequencer lease if it is free and is written
   under it in one pipelined transaction: one round trip for the lease and the head, one for
   the writes and COMMIT. Pending intake is sequenced first, in the same transaction.
2. **The intake.** When another writer holds the lease, the calls' events are made durable in
   `plaudit_intake` instead: one statement each, idempotent by id, with no global lock, so
   these commits run concurrently and the server flushes them together. An `append` then waits
   until a sequencing pass has given its events positions; `enqueue` is acknowledged at once.
   Passes are run by a **pump** (one per store, in whichever process first had appends waiting)
   and by any writer that holds the lease; each publishes its results through the relay
   (`plaudit.store.relay`). A waiter that hears nothing looks its ids up, runs a pass itself if
   the lease is free, and gives up at the deadline with an error naming the lease holder.

Every pass validates each intake row again and recomputes its content digest: a row that fails
is quarantined with its reason, never sequenced, and never stops the other rows.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import msgspec

from plaudit.errors import ConflictError, IntegrityError, PlauditError, ValidationError
from plaudit.events import Event, Prepared, prepare
from plaudit.ids import now_ms
from plaudit.store import deadlines
from plaudit.store.idempotency import AppendResult, BatchResult, resolved, settle, settle_group
from plaudit.store.postgres import HeadMoved
from plaudit.store.postgres_ops import INTAKE_PENDING
from plaudit.store.relay import Pump, Relay, Result, Waiter, call_digest, encode_results
from plaudit.store.sequencer import GroupCommit, Sequencer, Ticket
from plaudit.store.sequencing import Leased, Request, Sequencing, deliver
from plaudit.store.view import LogView

if TYPE_CHECKING:
    from plaudit.store.hostgroup import HostGroup
    from plaudit.store.ops import HeadState
    from plaudit.store.postgres import PostgresBackend, Taken

#: Marks the token of an `enqueue` call, whose caller waits for no notification (a waiting
#: append's token is hex, so it never starts with this).
UNHEARD = "q"
#: Pending intake rows one sequencing pass takes at a time.
DRAIN_CHUNK = 5000
#: A process that queued events asks for a pump at most this often.
PUMP_ASK_S = 0.05
#: How long a waiter trusts the relay before it looks its ids up (and starts a pump).
RELAY_WAIT_S = 0.05


class _Intake:
    """One call taken into the intake: its token, what the statement found, its own ids."""

    __slots__ = ("found", "own", "request", "token")

    def __init__(self, request: Request, token: str) -> None:
        self.request = request
        self.token = token
        self.own: set[str] = set()
        self.found: dict[str, tuple[bytes, int | None]] = {}


class PostgresSequencer(Sequencer):
    def __init__(self, backend: PostgresBackend, core: Sequencing) -> None:
        super().__init__(core)
        self.backend = backend
        self.ops = backend.ops
        self._group = GroupCommit(self._write_group)
        self._relay = Relay(backend.listener, backend.channel, backend.deadline_s)
        self._pump = Pump(
            backend.claim_pump,
            backend.release_pump,
            self._pending,
            self._pump_pass,
            idle=self._idle_work,
            waited_on=lambda: self._pass_heard,
        )
        #: Whether the last pass published a result someone waits for.
        self._pass_heard = True
        #: The head this process's last write left, for the next group to go ahead on, and
        #: how many groups to write without it after misses (see `_under_lease`).
        self._expect: HeadState | None = None
        self._misses = 0
        self._skip = 0
        self._pump_asked = 0.0
        self._queued = False
        self.host: HostGroup | None = None
        from plaudit.store import hostgroup

        if hostgroup.enabled():
            self.host = hostgroup.HostGroup(
                backend.url, backend.deadline_s, _fingerprint, self._commit_calls
            )

    def _pending(self, conn: Any) -> bool:
        """Whether intake waits (on the pump's connection, or this thread's)."""
        conn = conn if conn is not None else self.backend.connection()
        return bool(conn.execute(f"SELECT {INTAKE_PENDING}").fetchone()[0])

    # -- submitting -----------------------------------------------------------------------
    def _submit(self, request: Request, *, enqueue: bool) -> Ticket:
        host = self.host
        # A host leader's group commit costs less than an intake row and a pass, and answers
        # with positions (a stronger acknowledgement than "queued"); a leader alone enqueues.
        if request.fn is None and host is not None and not (enqueue and host.alone):
            outcome = host.submit(request.prepared, request.on_conflict)
            if outcome is not None:
                if isinstance(outcome, BaseException):
                    request.error = outcome
                else:
                    request.result = outcome
                request.done = True
                return Ticket(request)
        if enqueue and request.fn is None:
            return self._enqueue(request)
        self._group.run([request])
        return Ticket(request)

    def _commit_calls(self, calls: list[tuple[list[Prepared], str]]) -> list[Any]:
        """The host leader's handler: write calls (followers' and this process's own) in one
        group commit; per call, its `BatchResult` or the exception it raised."""
        requests = [Request(p, c) for p, c in calls]  # type: ignore[arg-type]
        self._group.run(requests)
        return [r.error if r.error is not None else r.result for r in requests]

    def _write_group(self, group: list[Request]) -> None:
        if any(r.fn is not None for r in group) or (self.host is not None and self.host.grouping):
            # Functions read state, so they need the lease itself; a host leader waits for it
            # too: the few lease holders are the hosts' leaders, each with a whole group.
            self._under_lease(group, wait=True)
        elif (self._relay.busy() and not self._pump.claimed) or not self._under_lease(
            group, wait=False
        ):
            # Another process's pump ran a pass moments ago (a try would mostly fail), or
            # another process holds the lease (this process's threads take turns at it).
            self._take_in(group)

    def _under_lease(self, group: list[Request], *, wait: bool) -> bool:
        """Write the group under the lease (waiting for it, or False at once if it is taken).

        When this process wrote the head last, the group goes ahead on that head in one round
        trip (`PostgresBackend.lease(expect=...)`); if another writer moved it meanwhile, that
        attempt is rolled back whole and the group is written as usual. Misses make the next
        attempts wait (1, 2, 4 ... 64 groups), so writers that take turns stop guessing."""
        # Which of the group's ids the log holds comes with the lease, in one statement.
        ids = None
        if all(r.fn is None for r in group):
            ids = list({p.event.id: None for r in group for p in r.prepared})
            ids = ids if len(ids) <= 500 else None
        expect, self._expect = self._expect, None
        if expect is not None and ids is not None and self._skip == 0:
            try:
                if self._write(group, self.backend.lease(expect=expect, ids=ids), guessed=True):
                    return True
                if not wait:
                    return False  # another thread of this process kept its turn to the deadline
            except HeadMoved:
                self._misses = min(max(1, 2 * self._misses), 64)
                self._skip = self._misses
            except Exception:
                pass  # written as usual next: a request that raises is then undone alone
        elif self._skip:
            self._skip -= 1
        return self._write(group, self.backend.lease(wait=wait, ids=ids))

    def _write(self, group: list[Request], opening: Any, *, guessed: bool = False) -> bool:
        """Write the group in the transaction `opening` gives (False: the lease is taken).
        `guessed`: the implicit transaction of a guessed head, which has no savepoints."""
        try:
            with opening as lease:
                if lease is None:
                    return False
                leased = self.core.leased(lease.tx, lease.head, savepoints=not guessed)
                held = lease.held
                if lease.head.pending:
                    self._drain_all(leased)  # it may sequence some of the ids: look them up
                    held = None
                leased.run(group, held)
        except BaseException:
            self.core.undone()
            raise
        self.core.committed()  # every PostgreSQL commit is flushed
        self._expect, self._misses = leased.head, 0
        deliver(group)
        return True

    @contextmanager
    def leased(self) -> Iterator[Leased]:
        with self._leased() as (leased, _):
            yield leased

    @contextmanager
    def _leased(self) -> Iterator[tuple[Leased, int]]:
        """The lease for a block, pending intake sequenced first (how many: the second item).
        Not pipelined: the block reads as it goes (server-side cursors included)."""
        try:
            with self.backend.write() as tx:
                head = self.ops.head_pending(tx)
                leased = self.core.leased(tx, head)
                yield leased, self._drain_all(leased) if head.pending else 0
        except BaseException:
            self.core.undone()
            raise
        self.core.committed()

    def sequence_pending(self) -> int:
        with self._leased() as (_, drained):
            return drained

    # -- the intake -----------------------------------------------------------------------
    def _put(self, calls: Sequence[_Intake], *, relaxed: bool) -> None:
        """Take each call in with one statement. A call that meets another content under one
        of its ids gets its `ConflictError` if it is strict, and then takes nothing in (a
        strict call of several events runs in a transaction of its own, rolled back); `found`
        and `own` tell the rest."""
        for c in calls:
            r = c.request
            strict = r.on_conflict == "raise"
            try:
                with self.backend.intake(atomic=strict and len(r.prepared) > 1) as tx:
                    self._put_one(tx, c, strict, relaxed)
            except ConflictError as exc:
                c.own.clear()
                r.error, r.done = exc, True

    def _put_one(self, tx: Any, c: _Intake, strict: bool, relaxed: bool) -> None:
        r = c.request
        rows = [_intake_row(p, c.token, strict) for p in r.prepared]
        found = self.ops.intake_put(tx, rows, relaxed=relaxed)
        late = [f[0] for f in found if not f[4] and f[1] is None and f[3] is None]
        late_digests = self.ops.intake_digests(tx, late) if late else {}
        for id_, seq_digest, seq, pend_digest, inserted in found:
            if inserted:
                c.own.add(id_)
            elif seq_digest is not None:
                c.found[id_] = (seq_digest, int(seq))
            elif (theirs := pend_digest or late_digests.get(id_)) is not None:
                c.found[id_] = (theirs, None)
        settle(r.prepared, c.found, r.on_conflict, None)  # raises for a strict conflict

    def _enqueue(self, request: Request) -> Ticket:
        c = _Intake(request, UNHEARD + uuid.uuid4().hex)  # nobody waits on it: see `_drain`
        self._put([c], relaxed=False)  # acknowledged at the intake: flushed
        if request.done:
            return Ticket(request)
        settled = settle(request.prepared, c.found, request.on_conflict, None)
        receipt = self._receipt([p for p in request.prepared if p.event.id in c.own])
        request.result, request.done = BatchResult(settled.results, receipt), True
        if c.own:
            self._remember_queued()
        return Ticket(request, durable=True)

    def _receipt(self, queued: list[Prepared]) -> str | None:
        """The log's signed receipt for events taken in but not yet sequenced (None when
        there are none, or no key to sign with: the events are queued all the same)."""
        if not queued:
            return None
        from plaudit.store.receipts import sign_receipt

        try:
            key = self.core.checkpointer.current_key()
        except PlauditError:
            return None
        return sign_receipt(key, queued, now_ms())

    def pending_ids(self, ids: Sequence[str]) -> set[str]:
        with self.backend.intake() as tx:
            return self.ops.sequenced(tx, list(ids))[1]

    def _remember_queued(self) -> None:
        if not self._queued:
            self._queued = True
            import atexit
            import weakref

            ref = weakref.ref(self)
            atexit.register(lambda: (s := ref()) is not None and s._sequence_queued())
        if time.monotonic() - self._pump_asked > PUMP_ASK_S:
            self._pump_asked = time.monotonic()
            self._pump.want()

    def _sequence_queued(self) -> None:
        """On close, give positions to what this process queued (best effort: the intake
        keeps them durable, and any later writer sequences them anyway)."""
        if self._queued:
            self._queued = False
            self.sequence_pending()

    def _take_in(self, group: list[Request]) -> None:
        calls = [_Intake(r, uuid.uuid4().hex) for r in group]
        waiters = self._relay.expect([c.token for c in calls])
        try:
            self._put(calls, relaxed=True)
            waiting = [c for c in calls if not c.request.done]
            for c in waiting:
                if not c.own:  # every id was sequenced or pending already: nothing to hear
                    self._resolve_now(c)
            self._await([c for c in waiting if not c.request.done], {w.token: w for w in waiters})
        finally:
            self._relay.forget(waiters)

    def _resolve_now(self, c: _Intake) -> None:
        r = c.request
        if all(v[1] is not None for v in c.found.values()):
            r.result = BatchResult(settle(r.prepared, c.found, r.on_conflict, None).results)
            r.done = True

    def _await(self, waiting: list[_Intake], waiters: dict[str, Waiter]) -> None:
        """Wait for the relay to say where each call's events went; what it cannot say (or
        does not say in time) is looked up. Runs a pass here when the lease is free, and
        gives up at the deadline naming the lease holder."""
        if not waiting:
            return
        if not self._relay.busy():
            self._pump.want()
        deadline = time.monotonic() + self.backend.deadline_s
        while waiting:
            slice_end = time.monotonic() + RELAY_WAIT_S
            unresolved = []
            for c in waiting:
                w = waiters[c.token]
                if w.event.wait(max(0.0, slice_end - time.monotonic())) and self._heard(c, w):
                    continue
                unresolved.append(c)
            if not unresolved:
                return
            waiting = self._look_up(unresolved)
            if not waiting:
                return
            # Still pending: sequence them here if the lease is free (a pump that holds its
            # lock but is stuck must not stall us), and ask for a pump.
            self._pump_pass(None)
            self._pump.want()
            if time.monotonic() > deadline:
                raise self._not_sequenced()

    def _heard(self, c: _Intake, w: Waiter) -> bool:
        """Settle a call from its notification alone (all its events new, in its own rows);
        False: look it up. A pass that sequenced other content than this call sent means
        its intake rows were changed in the database: tampering."""
        r = c.request
        if w.seq is None or len(c.own) != len(r.prepared):
            return False
        if w.digest != call_digest(p.content_digest for p in r.prepared):
            r.error = _tampered([p.event.id for p in r.prepared], w.seq)
        else:
            r.result = BatchResult(
                [AppendResult(p.event.id, w.seq + i, "appended") for i, p in enumerate(r.prepared)]
            )
        r.done = True
        return True

    def _look_up(self, calls: list[_Intake]) -> list[_Intake]:
        """Settle the calls whose events are sequenced; returns those still pending."""
        ids = list({p.event.id: None for c in calls for p in c.request.prepared})
        with self.backend.intake() as tx:
            found, pending = self.ops.sequenced(tx, ids)
        waiting = []
        for c in calls:
            r = c.request
            if any(p.event.id in pending for p in r.prepared):
                waiting.append(c)
                continue
            try:
                r.result = resolved(r.prepared, found, r.on_conflict, c.own)
            except PlauditError as exc:
                r.error = exc
            r.done = True
        return waiting

    def _not_sequenced(self) -> Exception:
        try:
            with self.backend.read_statement() as tx:
                who = self.ops.lease_holder(tx)
        except Exception:
            who = "another session"
        return deadlines.waited(
            "a sequencing pass (the events are durable in the intake and will be sequenced)",
            self.backend.deadline_s,
            f"the sequencer lease: {who}",
            "retry the call (it is idempotent) to get the positions",
        )

    # -- sequencing passes ----------------------------------------------------------------
    def _pump_pass(self, conn: Any) -> int | None:
        """One pass: None when another writer holds the lease."""
        try:
            with self.backend.lease(wait=False, take=DRAIN_CHUNK, conn=conn) as lease:
                if lease is None:
                    return None
                n = self._drain(self.core.leased(lease.tx, lease.head), lease.taken)
        except BaseException:
            self.core.undone()
            raise
        self.core.committed()
        return n

    def _idle_work(self) -> bool:
        return bool(self.idle_work is not None and self.idle_work())

    def _drain_all(self, leased: Leased) -> int:
        """Sequence every pending intake row under the lease `leased` holds."""
        total = 0
        while True:
            rows, known = self.ops.take(leased.tx, DRAIN_CHUNK)
            if not rows:
                return total
            total += self._drain(leased, (rows, known))

    def _drain(self, leased: Leased, taken: Taken) -> int:
        """Sequence taken intake rows: each append call (`batch`) as a call of its own, by
        the idempotency rule, after validating every row again. Refused rows are quarantined
        with their reason; results go to the waiting appenders when this commits."""
        rows, known = taken
        if not rows:
            self._pass_heard = False
            return 0
        calls: list[tuple[list[Prepared], Any]] = []
        tokens: list[str] = []
        refused: list[tuple[tuple[Any, ...], str]] = []
        for batch in _by_batch(rows):
            prepared, bad = _checked_batch(batch)
            refused.extend(bad)
            token = batch[0][9]
            if prepared or not token.startswith(UNHEARD):
                calls.append((prepared, "raise" if batch[0][10] else "skip"))
                tokens.append(token)
        outcomes, new = settle_group(calls, dict(known), leased.head.seq + 1)
        if new:
            leased.head = leased.core.write_new(leased.tx, leased.head, new)
        published: list[Result] = []
        row_of = {r[1]: r for r in rows}
        for (prepared, _), token, out in zip(calls, tokens, outcomes, strict=True):
            if isinstance(out, ConflictError):
                why = f"append call refused whole: id {out.event_id!r} holds other content"
                refused.extend((row_of[p.event.id], why) for p in prepared)
            else:
                for p, res in zip(prepared, out.results, strict=True):
                    if res.status == "conflict":
                        refused.append(
                            (row_of[p.event.id], f"id {p.event.id!r} holds other content")
                        )
            if token.startswith(UNHEARD):
                continue  # an enqueued call was answered at the intake
            whole = (
                not isinstance(out, ConflictError)
                and bool(prepared)
                and all(res.status == "appended" for res in out.results)
            )
            if whole:
                first = out.results[0].seq
                published.append((token, first, call_digest(p.content_digest for p in prepared)))
            else:
                published.append((token, None, ""))
        if refused:
            _quarantine(leased, refused)
        if published:
            self.ops.notify(leased.tx, self.backend.channel(), encode_results(published))
        self._pass_heard = bool(published)
        return len(rows)

    def close(self) -> None:
        if self.host is not None:
            self.host.close()  # first: the leader answers what is under way
        self._sequence_queued()
        self._relay.close()
        self._pump.close()


def _fingerprint() -> str:
    from plaudit.store.projections import fingerprint

    return fingerprint()


def _intake_row(p: Prepared, token: str, strict: bool) -> tuple[Any, ...]:
    e = p.event
    return (
        e.id, e.type, e.ts_ms, e.session_id, e.source,
        p.payload_text, p.meta_text, p.content_digest, token, strict,
    )  # fmt: skip


def _checked(row: tuple[Any, ...]) -> Prepared:
    """An intake row validated again as a new event, its digest recomputed from its content:
    a row edited or inserted in the database behind plaudit fails here."""
    _, id_, type_, ts, session, source, payload, meta, digest = row[:9]
    event = Event(
        id=id_,
        type=type_,
        ts_ms=int(ts),
        session_id=session,
        source=source,
        payload=msgspec.json.decode(payload),
        meta=msgspec.json.decode(meta),
    )
    p = prepare(event)
    if p.content_digest != bytes(digest):
        raise ValidationError(
            "content_digest", "does not match the row's content (was it edited in the intake?)"
        )
    return p


def _checked_batch(
    batch: list[tuple[Any, ...]],
) -> tuple[list[Prepared], list[tuple[tuple[Any, ...], str]]]:
    """One append call's intake rows, each validated again (`_checked`), and the rows refused
    with their reasons: a strict call with a refused row is refused whole."""
    prepared: list[Prepared] = []
    refused: list[tuple[tuple[Any, ...], str]] = []
    for row in batch:
        try:
            prepared.append(_checked(row))
        except (ValidationError, msgspec.DecodeError, ValueError, TypeError) as exc:
            refused.append((row, f"refused at sequencing: {exc}"))
    if refused and batch[0][10]:
        bad = {r[1] for r, _ in refused}
        why = "append call refused whole: another of its rows was refused at sequencing"
        refused.extend((r, why) for r in batch if r[1] not in bad)
        prepared = []
    return prepared, refused


def _by_batch(rows: list[tuple[Any, ...]]) -> Iterator[list[tuple[Any, ...]]]:
    """Intake rows (sorted by intake number) grouped by the append call that made them, in
    the order their first rows arrived (concurrent calls' numbers interleave)."""
    groups: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        groups.setdefault(row[9], []).append(row)
    yield from groups.values()


def _quarantine(leased: Leased, refused: list[tuple[tuple[Any, ...], str]]) -> None:
    """Keep refused intake rows in the quarantine (file "plaudit_intake", line: the row's
    intake number): nothing taken in is ever dropped silently."""
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
                "payload": _embedded(payload),
                "meta": _embedded(meta),
            }
        )
        bad.append((int(n), why, raw))
    LogView(leased.tx).quarantine_add("plaudit_intake", bad, now_ms())


def _embedded(text: str) -> Any:
    """A stored JSON column as it was (a row that does not decode keeps its text)."""
    try:
        msgspec.json.decode(text)
    except msgspec.DecodeError:
        return text
    return msgspec.Raw(text.encode())


def _tampered(ids: list[str], seq: int) -> IntegrityError:
    return IntegrityError(
        f"the log holds other content from position {seq} than this append sent under id "
        f"{ids[0]!r}{f' (and {len(ids) - 1} more)' if len(ids) > 1 else ''}: its intake rows "
        "were changed in the database before they were sequenced (tampering); run "
        "`plaudit log verify` and check who can write the database"
    )


__all__ = ["PostgresSequencer"]
