"""Projections: derived tables kept current in the same transaction as every append.

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
        """Fold committed events, in log order, into the tables. Must be deterministic."""


class _Entry:
    # A plain class, not a dataclass: importing dataclasses costs every shell hook ~1 ms.
    __slots__ = ("name", "prefixes", "target")

    def __init__(self, name: str, prefixes: tuple[str, ...], target: str | Projection) -> None:
        self.name = name
        self.prefixes = prefixes
        self.target = target

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
    projection: Projection | str, *, name: str | None = None, prefixes: Sequence[str] = ()
) -> None:
    """Register a projection globally. Import strings need `name` and `prefixes` up front."""
    if isinstance(projection, str):
        if not name or not prefixes:
            raise ConfigError("a projection given as an import string needs name and prefixes")
        _REGISTRY[name] = _Entry(name, tuple(prefixes), projection)
    else:
        _REGISTRY[projection.name] = _Entry(projection.name, tuple(projection.prefixes), projection)


def unregister_projection(name: str) -> None:
    _REGISTRY.pop(name, None)


def registered() -> list[str]:
    return sorted(_REGISTRY)


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
    """Applies the registered projections to one store."""

    def matching(self, event_type: str) -> list[_Entry]:
        return [e for e in _REGISTRY.values() if event_type.startswith(e.prefixes)]

    def _state(self, tx: Tx, name: str) -> tuple[int, int] | None:
        row = tx.fetchone(
            "SELECT version, applied_seq FROM plaudit_projections WHERE name = ?", (name,)
        )
        return None if row is None else (int(row[0]), int(row[1]))

    def _set(self, tx: Tx, name: str, version: int, applied: int) -> None:
        tx.execute(
            "INSERT INTO plaudit_projections (name, version, applied_seq) VALUES (?, ?, ?) "
            "ON CONFLICT (name) DO UPDATE SET version = excluded.version, "
            "applied_seq = excluded.applied_seq",
            (name, version, applied),
        )

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

    def ensure(self, tx: Tx, entry: _Entry, upto: int) -> Projection:
        """Make the projection's tables exist, at its current version, applied through `upto`."""
        proj = entry.load()
        state = self._state(tx, proj.name)
        if state is None or state[0] != proj.version:
            if state is not None:
                self._drop(tx, proj)
            proj.create(tx)
            applied = 0
        else:
            applied = state[1]
        if applied < upto:
            self._replay_into(tx, proj, applied, upto)
        if state is None or state != (proj.version, upto):
            self._set(tx, proj.name, proj.version, max(applied, upto))
        return proj

    def apply(self, tx: Tx, events: Sequence[StoredEvent]) -> None:
        """Called by the log inside the append transaction, after the rows are inserted."""
        if not events:
            return
        groups: dict[str, tuple[_Entry, list[StoredEvent]]] = {}
        for ev in events:
            for entry in self.matching(ev.type):
                groups.setdefault(entry.name, (entry, []))[1].append(ev)
        first = events[0].seq
        last = events[-1].seq
        for entry, evs in groups.values():
            proj = self.ensure(tx, entry, first - 1)
            proj.apply(tx, evs)
            self._set(tx, proj.name, proj.version, last)

    def ensure_named(self, tx: Tx, name: str, head: int) -> Projection:
        return self.ensure(tx, self._entry(name), head)

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
            proj.create(tx)
            out[name] = self._replay_into(tx, proj, 0, head)
            self._set(tx, name, proj.version, head)
        return out
