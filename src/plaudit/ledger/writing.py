"""The write path: the seed's five steps under the log's write lock.

1. validate (done by `spec.parse_spec` before the lock), 2. compute the new total from the
stored state, 3. cross-reference the source, 4. append atomically, 5. validate the checksum.
Running totals are computed while holding the lock, so concurrent writers keep them exact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from msgspec import to_builtins

from plaudit.errors import ConflictError, IntegrityError, ValidationError
from plaudit.events import Event, make_event
from plaudit.ids import uuid7
from plaudit.ledger import eventtypes as et
from plaudit.ledger.checksum import quick_checksum
from plaudit.ledger.config import LedgerConfig
from plaudit.ledger.halts import (
    halted_error,
    log_failure_message,
    log_kind,
    record_halt,
    way_forward,
)
from plaudit.ledger.integrity import log_verified
from plaudit.ledger.models import TX_COLUMNS, Transaction, iso, tx_from_row
from plaudit.ledger.projection import read_state
from plaudit.ledger.sources import cross_reference, lookup
from plaudit.ledger.spec import Spec
from plaudit.store.backend import Tx
from plaudit.store.view import LogView

if TYPE_CHECKING:
    from plaudit.core import Plaudit
    from plaudit.store.log import Writer

_CHUNK = 500


@dataclass
class Pending:
    """A transaction to write: a checked spec, how it came about, and extra payload fields."""

    spec: Spec
    kind: str = "record"
    id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    verified: bool | None = None  # None: decided by the source cross-reference
    #: An import matches a committed transaction of the same id on category and points only
    #: (its action and source may be rewritten by the export it came from).
    loose: bool = False


Build = Callable[[Tx, dict[str, Any]], tuple[list[Pending], list[Event]]]


def system_spec(category: str, points: int, action: str, **kw: Any) -> Spec:
    return Spec(
        category=category,
        type="reward" if points >= 0 else "penalty",
        points=points,
        action=action,
        source=kw.get("source"),
        session=kw.get("session"),
        key=kw.get("key"),
        ts_ms=kw.get("ts_ms"),
    )


def _existing(tx: Tx, ids: list[str]) -> dict[str, tuple[Any, ...]]:
    """Committed transactions among `ids`, found through the log's id index (the projection
    keeps no index on ids, which makes bulk recording cheaper)."""
    found: dict[str, tuple[Any, ...]] = {}
    positions = list(LogView(tx).positions(ids).values())
    for i in range(0, len(positions), _CHUNK):
        seqs = positions[i : i + _CHUNK]
        marks = ",".join("?" * len(seqs))
        for row in tx.fetchall(f"SELECT {TX_COLUMNS} FROM ledger_tx WHERE seq IN ({marks})", seqs):
            found[row[1]] = row
    return found


def _check_sessions(tx: Tx, names: set[Any]) -> None:
    """Sessions are explicit: a transaction may only name a started session that is open."""
    for name in sorted(names):
        row = tx.fetchone(
            "SELECT started_ms, ended_ms FROM ledger_sessions WHERE session = ?", (name,)
        )
        if row is None or row[0] is None:
            raise ValidationError("session", f"{name!r} was never started (start it first)")
        if row[1] is not None:
            raise ValidationError("session", f"{name!r} has ended; its score is final")


def _open_session(tx: Tx, state: dict[str, Any]) -> str | None:
    sid = state.get("current_session")
    if sid is None:
        return None
    ended = tx.fetchone("SELECT ended_ms FROM ledger_sessions WHERE session = ?", (sid,))
    return sid if ended is not None and ended[0] is None else None


class LedgerWriter:
    def __init__(self, plaudit: Plaudit, config: LedgerConfig) -> None:
        self.p = plaudit
        self.config = config

    def commit(
        self,
        build: Build,
        *,
        check: bool = True,
        force: bool = False,
        force_checkpoint: bool = False,
        before: Callable[[Writer], None] | None = None,
    ) -> list[Transaction]:
        """Run `build` under the write lock and append what it returns, atomically.

        With `check`, nothing is written unless the log verifies (`log_verified`) and the
        stored totals pass the quick checksum; a failure records a halt (in a transaction of
        its own, after this one is rolled back) and raises with the way forward. `before`
        appends what the transactions refer to (source records), after the checks and in the
        same database transaction.

        The log is verified before the write lock is taken (only what is new since this
        process's last verify): every other writer would wait behind a verify done under it,
        and what another writer appends between the two is verified by the next write."""
        halt: tuple[str, str, str, dict[str, Any]] | None = None
        out: list[Transaction] = []
        outcome = log_verified(self.p) if check else None
        with self.p.log.writer() as w:
            tx = w.tx
            head_seq, _ = w.head()
            self.p.log.projections.ensure_named(tx, "ledger", head_seq)
            state = read_state(tx)
            if state is not None and state["halted"] and not force:
                raise halted_error(state)
            if outcome is not None:
                if not outcome.ok:
                    kind = log_kind(outcome)
                    halt = (
                        kind,
                        f"the log fails verification at position {outcome.first_bad}: "
                        f"{outcome.reason}",
                        log_failure_message(outcome),
                        {
                            "log": to_builtins(outcome),
                            # what was acknowledged, kept in case the damage took the tail
                            "stored": None
                            if state is None
                            else {"total": state["total"], "tx_count": state["tx_count"]},
                        },
                    )
                else:
                    chk = quick_checksum(tx, state)
                    if not chk.is_valid:
                        reason = f"checksum mismatch: {chk.reason}"
                        halt = (
                            "checksum",
                            reason,
                            f"recording halted on a {reason}. Nothing was recorded. Next: "
                            f"{way_forward('checksum')}.",
                            {"checksum": to_builtins(chk)},
                        )
            if halt is None:
                if before is not None:
                    before(w)
                state = read_state(tx) if before is not None else state or read_state(tx)
                assert state is not None
                pendings, extras = build(tx, state)
                out = self._append(w, state, pendings)
                if extras:
                    w.append_batch(extras)
                after = read_state(tx)
                assert after is not None
                expected = int(state["total"]) + sum(t.points for t in out if t.status != "present")
                if int(after["total"]) != expected:  # step 5, after the append
                    raise IntegrityError(
                        f"checksum failed after the append: stored {after['total']} != "
                        f"{expected}; the transaction was rolled back"
                    )
                if check or force_checkpoint:  # only a verified state becomes a checkpoint
                    self.maybe_checkpoint(w, after, force=force_checkpoint)
        if halt is not None:
            kind, reason, message, detail = halt
            record_halt(self.p, kind, reason, detail)
            raise IntegrityError(message)
        return out

    def _append(
        self, w: Writer, state: dict[str, Any], pendings: Sequence[Pending]
    ) -> list[Transaction]:
        if not pendings:
            return []
        tx = w.tx
        given: dict[str, int] = {}  # ids chosen by callers (fresh UUIDv7s cannot exist yet)
        for i, p in enumerate(pendings):
            if p.id is None and p.spec.key is None:
                p.id = uuid7()
                continue
            p.id = p.id or p.spec.key
            assert p.id is not None
            if p.id in given:
                raise ValidationError(
                    "key", f"{p.id!r} repeats transaction[{given[p.id]}]", where=f"[{i}]"
                )
            given[p.id] = i
        existing = _existing(tx, list(given)) if given else {}
        session_default = _open_session(tx, state)
        total = int(state["total"])
        out: list[Transaction | None] = [None] * len(pendings)
        events: list[Event] = []
        slots: list[int] = []
        src_cache: dict[tuple[str, str], Any] = {}
        _check_sessions(tx, {p.spec.session for p in pendings} - {None})
        for i, p in enumerate(pendings):
            s = p.spec
            assert p.id is not None
            row = existing.get(p.id)
            if row is not None:
                src = None if row[7] is None else (row[7], row[8])
                have = (row[4], int(row[5]), row[6], src)
                if have[: 2 if p.loose else 4] != s.intent()[: 2 if p.loose else 4]:
                    raise ConflictError(
                        p.id, f"transaction key {p.id!r} was already used for a different one"
                    )
                out[i] = tx_from_row(row, status="present")
                continue
            verified = p.verified
            if s.source is not None and verified is None:
                cat = self.config.categories.get(s.category)
                if s.source not in src_cache:
                    src_cache[s.source] = lookup(tx, *s.source)
                if cat is not None:
                    try:
                        cross_reference(cat, *s.source, src_cache[s.source])
                    except ValidationError as exc:
                        raise ValidationError(exc.field, exc.reason, where=f"[{i}]") from None
                verified = True
            total += s.points
            live = p.kind in ("record", "rule", "recovery")
            session = s.session or (session_default if live else None)
            payload: dict[str, Any] = {
                "category": s.category,
                "type": s.type,
                "points": s.points,
                "action": s.action,
                "source": None if s.source is None else {"kind": s.source[0], "id": s.source[1]},
                "session": session,
                "running_total": total,
                "verified": bool(verified),
                "kind": p.kind,
                **p.extra,
            }
            events.append(
                make_event(
                    et.TRANSACTION,
                    payload,
                    id=p.id,
                    session_id=session or "default",
                    source="plaudit.ledger",
                    ts_ms=s.ts_ms,
                )
            )
            slots.append(i)
        if events:
            results = w.append_batch(events).results
            for i, ev, r in zip(slots, events, results, strict=True):
                pl = ev.payload
                src = pl["source"]
                out[i] = Transaction(
                    id=ev.id,
                    seq=int(r.seq or 0),
                    timestamp=iso(ev.ts_ms),
                    ts_ms=ev.ts_ms,
                    type=pl["type"],
                    category=pl["category"],
                    points=pl["points"],
                    action=pl["action"],
                    source=None if src is None else f"{src['kind']}:{src['id']}",
                    session_id=pl["session"],
                    running_total=pl["running_total"],
                    verified=pl["verified"],
                    kind=pl["kind"],
                    status=r.status,
                )
        return [t for t in out if t is not None]

    def maybe_checkpoint(self, w: Writer, state: dict[str, Any], *, force: bool = False) -> bool:
        """A hashed checkpoint: totals plus the log head they were computed at."""
        due = int(state["tx_count"]) - int(state["last_checkpoint_count"])
        if not force and due < self.config.checkpoint_every:
            return False
        through, tip = w.head()
        head = tip.hex()
        w.append(
            make_event(
                et.CHECKPOINT,
                {
                    "through_seq": through,
                    "head_hash": head,
                    "total": int(state["total"]),
                    "tx_count": int(state["tx_count"]),
                    "rewards": int(state["rewards"]),
                    "penalties": int(state["penalties"]),
                },
                id=f"ledger-checkpoint:{through}:{head[:16]}",
                source="plaudit.ledger",
            )
        )
        return True
