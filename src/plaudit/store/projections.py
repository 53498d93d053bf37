"""Projections: derived tables kept current from the log.

Most projections apply in the same transaction as every append, so a caller reads its own
write (a ledger record's running total, a bandit select after its observe). A projection
that only batch readers use can declare itself *trailing*: the write path skips it, and it
applies the events it has not seen in large batches, before anyone reads it
(`EventLog.ensure_projection`) and when a PostgreSQL pump is idle. Its tables are then always
a consistent state as of the position it applied, which is never behind the log's head at
the moment a reader asked for it. See docs/log.md, "Trailing projections".

A projection declares which event types it consumes (by prefix), the tables it owns, how to
create them and how to apply a batch of committed events. plaudit records, per projection,
the version it was built with and the last log position it applied, so that

* a projection registered later, or a new version of one, catches up from the log by itself;
* a writer that did not know a projection (an older process, a plugin) leaves a gap that the
  next writer fills before applying its own events;
* `plaudit rebuild` can drop every table and replay the log into an identical state.

Register one with :func:`register_projection`, either as an object or as an import string
(``"package.module:attr"``) so that modules are only imported when their events appear.
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import msgspec

from plaudit.errors import ConfigError
from plaudit.events import StoredEvent
from plaudit.store.backend import Tx

REPLAY_CHUNK = 5000


@runtime_checkable
class Projection(Protocol):
    name: str
    version: int
    prefixes: tuple[str, ...]
    tables: tuple[str, ...]

    def create(self, tx: Tx) -> None:
        """Create the tables (idempotently)."""

    def apply(self, tx: Tx, events: Sequence[StoredEvent]) -> None:
        """Fold committed events, in log order, into the tables. Must be deterministic.

        A trailing projection (class attribute ``trailing = True``) must also give the same
        state however the events are split into calls: it is applied in batches that do not
        follow the appends' batches."""


class _Entry:
    # A plain class, not a dataclass: importing dataclasses costs every shell hook ~1 ms.
    __slots__ = ("name", "prefixes", "target", "trailing")

    def __init__(
        self,
        name: str,
        prefixes: tuple[str, ...],
        target: str | Projection,
        trailing: bool = False,
    ) -> None:
        self.name = name
        self.prefixes = prefixes
        self.target = target
        self.trailing = trailing

    def load(self) -> Projection:
        if isinstance(self.target, str):
            module, _, attr = self.target.partition(":")
            obj: Any = getattr(importlib.import_module(module), attr)
            self.target = obj() if isinstance(obj, type) else obj
        proj = self.target
        assert not isinstance(proj, str)
        if proj.name != self.name:
            raise ConfigError(
                f"projection {self.target!r} is named {proj.name!r}, not {self.name!r}"
            )
        return proj


_REGISTRY: dict[str, _Entry] = {}


def register_projection(
    projection: Projection | str,
    *,
    name: str | None = None,
    prefixes: Sequence[str] = (),
    trailing: bool | None = None,
) -> None:
    """Register a projection globally. Import strings need `name` and `prefixes` up front.

    `trailing` (default: the projection's own ``trailing`` attribute, else False) takes the
    projection off the write path: see the module's docstring."""
    if isinstance(projection, str):
        if not name or not prefixes:
            raise ConfigError("a projection given as an import string needs name and prefixes")
        _REGISTRY[name] = _Entry(name, tuple(prefixes), projection, bool(trailing))
    else:
        if trailing is None:
            trailing = bool(getattr(projection, "trailing", False))
        _REGISTRY[projection.name] = _Entry(
            projection.name, tuple(projection.prefixes), projection, trailing
        )


def trailing_projections() -> list[str]:
    """The registered projections that apply off the write path."""
    return sorted(n for n, e in _REGISTRY.items() if e.trailing)


def unregister_projection(name: str) -> None:
    _REGISTRY.pop(name, None)


def registered() -> list[str]:
    return sorted(_REGISTRY)


def fingerprint() -> str:
    """What this process would apply to an event, for comparing with another process's."""
    return "|".join(
        f"{n}:{','.join(e.prefixes)}:{int(e.trailing)}" for n, e in sorted(_REGISTRY.items())
    )


def _upper(prefix: str) -> str:
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


# Characters an event type may contain (see `plaudit.events.TYPE_RE`).
_TYPE_CHARS = re.compile(r"[A-Za-z0-9_.\-]*")


def type_condition(prefixes: Sequence[str]) -> tuple[str, list[Any]]:
    """SQL for "type starts with one of `prefixes`", as a range so `_` and `%` are literal.

    A prefix with a character no type can hold matches nothing (and is never sent to the
    database, which may refuse it, e.g. PostgreSQL and NUL); an empty one matches everything.
    """
    usable = [p for p in prefixes if isinstance(p, str) and _TYPE_CHARS.fullmatch(p)]
    if "" in usable:
        return "1 = 1", []
    if not usable:
        return "1 = 0", []
    params: list[Any] = []
    for p in usable:
        params.extend((p, _upper(p)))
    return "(" + " OR ".join("(type >= ? AND type < ?)" for _ in usable) + ")", params


def _row_to_event(row: Sequence[Any]) -> StoredEvent:
    seq, id_, type_, ts, sess, src, payload, meta, h = row
    return StoredEvent(
        seq=seq,
        id=id_,
        type=type_,
        ts_ms=ts,
        session_id=sess,
        source=src,
        payload=msgspec.json.decode(payload),
        meta=msgspec.json.decode(meta),
        hash=bytes(h).hex(),
    )


EVENT_SELECT = (
    "SELECT seq, id, type, ts_ms, session_id, source, payload, meta, hash FROM plaudit_events"
)


def scan(
    tx: Tx,
    *,
    after: int = 0,
    until: int | None = None,
    prefixes: Sequence[str] | None = None,
    chunk: int = REPLAY_CHUNK,
) -> Iterator[StoredEvent]:
    """Committed events in log order, optionally only those whose type starts with a prefix."""
    where = ["seq > ?"]
    params: list[Any] = []
    if until is not None:
        where.append("seq <= ?")
        params.append(until)
    if prefixes:
        cond, cond_params = type_condition(prefixes)
        where.append(cond)
        params.extend(cond_params)
    sql = f"{EVENT_SELECT} WHERE {' AND '.join(where)} ORDER BY seq LIMIT {int(chunk)}"
    last = after
    while True:
        rows = tx.fetchall(sql, [last, *params])
        if not rows:
            return
        for row in rows:
            yield _row_to_event(row)
        last = rows[-1][0]
        if len(rows) < chunk:
            return


class ProjectionManager:
    """Applies the registered projections to one store.

    Each projection's (version, applied position) lives in `plaudit_projections`, so writers
    that do not know a projection leave a gap the next one fills. Reading and rewriting that
    row for every projection on every append cost two statements each, the largest share of a
    small append on PostgreSQL; so the states this process last committed are remembered with
    the head they were committed at. While the log's head is still there (nobody committed
    events since), they are exactly what the table holds and need not be read; all states a
    batch moves are written in one statement.
    """

    def __init__(self) -> None:
        # The states as of `_known_head`, confirmed committed by this process (see `committed`).
        self._known: dict[str, tuple[int, int]] = {}
        self._known_head = -1
        # Per thread (a pump thread sequences beside the appenders): what the transaction in
        # flight will have committed, promoted by `committed()`.
        self._local = threading.local()

    def committed(self) -> None:
        """This thread's transaction committed: what it staged is what the table holds."""
        staged = getattr(self._local, "staged", None)
        if staged is not None:
            self._known_head, self._known = staged
            self._local.staged = None

    def discard(self) -> None:
        """A transaction (or a savepoint of it) was undone: forget everything remembered."""
        self._local.staged = None
        self._known = {}
        self._known_head = -1

    def matching(self, event_type: str) -> list[_Entry]:
        """The projections the write path applies to an event of this type (trailing ones
        catch up later, see `catch_up`)."""
        return [
            e for e in _REGISTRY.values() if not e.trailing and event_type.startswith(e.prefixes)
        ]

    def trails(self, event_type: str) -> bool:
        """Whether a trailing projection wants events of this type."""
        return any(e.trailing and event_type.startswith(e.prefixes) for e in _REGISTRY.values())

    def _state(self, tx: Tx, name: str) -> tuple[int, int] | None:
        row = tx.fetchone(
            "SELECT version, applied_seq FROM plaudit_projections WHERE name = ?", (name,)
        )
        return None if row is None else (int(row[0]), int(row[1]))

    def _states(self, tx: Tx) -> dict[str, tuple[int, int]]:
        rows = tx.fetchall("SELECT name, version, applied_seq FROM plaudit_projections")
        return {str(r[0]): (int(r[1]), int(r[2])) for r in rows}

    def _set_many(self, tx: Tx, states: dict[str, tuple[int, int]]) -> None:
        if states:
            from plaudit.store.ops import for_dialect

            for_dialect(tx.dialect).write_marks(tx, states)

    def _set(self, tx: Tx, name: str, version: int, applied: int) -> None:
        self._set_many(tx, {name: (version, applied)})
        self.discard()

    def _replay_into(self, tx: Tx, proj: Projection, after: int, until: int) -> int:
        n = 0
        batch: list[StoredEvent] = []
        for ev in scan(tx, after=after, until=until, prefixes=proj.prefixes):
            batch.append(ev)
            if len(batch) >= REPLAY_CHUNK:
                proj.apply(tx, batch)
                n += len(batch)
                batch = []
        if batch:
            proj.apply(tx, batch)
            n += len(batch)
        return n

    def _drop(self, tx: Tx, proj: Projection) -> None:
        for table in proj.tables:
            tx.execute(f"DROP TABLE IF EXISTS {table}")

    def _catch_up(
        self, tx: Tx, entry: _Entry, state: tuple[int, int] | None, upto: int
    ) -> tuple[Projection, bool]:
        """Make the projection's tables exist, at its current version, applied through `upto`;
        returns it and whether its stored state must be rewritten."""
        proj = entry.load()
        if state is None or state[0] != proj.version:
            if state is not None:
                self._drop(tx, proj)
            proj.create(tx)
            applied = 0
        else:
            applied = state[1]
        if applied < upto:
            self._replay_into(tx, proj, applied, upto)
        return proj, state != (proj.version, upto)

    def ensure(self, tx: Tx, entry: _Entry, upto: int) -> Projection:
        """Make the projection's tables exist, at its current version, applied through `upto`."""
        state = self._state(tx, entry.name)
        proj, moved = self._catch_up(tx, entry, state, upto)
        if moved:
            self._set(tx, proj.name, proj.version, upto)
        return proj

    def marks(self, events: Sequence[StoredEvent]) -> dict[str, tuple[int, int]] | None:
        """The state (version, applied_seq) each projection that `events` concern will have
        once `apply` has applied them, for the log to write with the events' rows in one
        statement (then it tells `apply`: `marked`). None when `apply` will have to read the
        stored states first (they are not known as of the events' start): written before
        that read, the marks would be taken for the states before the events."""
        if not events:
            return {}
        first, last = events[0].seq, events[-1].seq
        out: dict[str, tuple[int, int]] = {}
        for ev in events:
            for entry in self.matching(ev.type):
                if entry.name not in out:
                    out[entry.name] = (entry.load().version, last)
        if out and not (self._known_head == first - 1 and all(n in self._known for n in out)):
            return None
        return out

    def apply(self, tx: Tx, events: Sequence[StoredEvent], *, marked: bool = False) -> None:
        """Called by the log inside the append transaction, after the rows are inserted;
        `marked`: with the projections' `marks`, so they need not be written here."""
        if not events:
            return
        groups: dict[str, tuple[_Entry, list[StoredEvent]]] = {}
        for ev in events:
            for entry in self.matching(ev.type):
                groups.setdefault(entry.name, (entry, []))[1].append(ev)
        if not groups:
            return
        first = events[0].seq
        last = events[-1].seq
        if self._known_head == first - 1 and all(n in self._known for n in groups):
            states = self._known
        else:
            states = self._states(tx)
        after = dict(states)
        for entry, evs in groups.values():
            proj, _ = self._catch_up(tx, entry, states.get(entry.name), first - 1)
            proj.apply(tx, evs)
            after[proj.name] = (proj.version, last)
        # Projections no event of this batch matched keep their state (and their gap).
        if not marked:
            self._set_many(tx, {n: after[n] for n in groups})
        self._local.staged = (last, after)

    def ensure_named(self, tx: Tx, name: str, head: int) -> Projection:
        return self.ensure(tx, self._entry(name), head)

    def applied(self, tx: Tx, name: str) -> int | None:
        """The position a projection applied through at its current version (None: it must
        be built from the start)."""
        proj = self._entry(name).load()
        state = self._state(tx, proj.name)
        return None if state is None or state[0] != proj.version else state[1]

    def catch_up(self, tx: Tx, name: str, head: int, chunk: int) -> int:
        """Apply at most `chunk` more positions of the log to a projection (a version change
        rebuilds it from the start); returns the position it now stands at. Callers run this
        in short write transactions so that sequencing interleaves with a long catch-up."""
        start = self.applied(tx, name)
        if start is not None and start >= head:
            return start  # others caught it up meanwhile: never move a state back
        upto = min(head, (start or 0) + max(1, chunk))
        self.ensure_named(tx, name, upto)
        return upto

    def is_current(self, tx: Tx, name: str, head: int) -> bool:
        """True when the projection exists at its version and has applied the whole log."""
        proj = self._entry(name).load()
        return self._state(tx, proj.name) == (proj.version, head)

    @staticmethod
    def _entry(name: str) -> _Entry:
        entry = _REGISTRY.get(name)
        if entry is None:
            raise ConfigError(f"no projection named {name!r} is registered")
        return entry

    def rebuild(self, tx: Tx, head: int, names: Sequence[str] | None = None) -> dict[str, int]:
        """Drop and replay; returns how many events each projection consumed."""
        out: dict[str, int] = {}
        for name in names or sorted(_REGISTRY):
            entry = _REGISTRY.get(name)
            if entry is None:
                raise ConfigError(f"no projection named {name!r} is registered")
            proj = entry.load()
            self._drop(tx, proj)
            tx.execute("DELETE FROM plaudit_projections WHERE name = ?", (name,))
            self.discard()
            proj.create(tx)
            out[name] = self._replay_into(tx, proj, 0, head)
            self._set(tx, name, proj.version, head)
        return out
