"""The store as `plaudit serve` opens it: SQLite writes queued in-process, not by SQLite.

SQLite has one writer. When the server's worker threads (up to 40) write at once, each loser
is put to sleep by SQLite's busy handler in growing steps (1, 2, 5, 10 ... 100 ms), and nobody
takes the free lock until a sleeper wakes, so the unlucky writes wait far longer than the
queue ahead of them (bench/http_sqlite_writers.py: p99 229 ms with SQLite's handler, 42 ms
with this lock, 40 threads). Queueing on an in-process lock first hands the write over in
order, the moment it is free. Reads are not affected (WAL readers never wait), and other
processes writing the same file still meet SQLite's own lock.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from plaudit.config import is_postgres, resolve_db
from plaudit.core import Plaudit
from plaudit.store.sqlite import SqliteBackend, SqliteTx


class SerializedSqliteBackend(SqliteBackend):
    """A SqliteBackend whose threads take turns at the write lock in arrival order."""

    def __init__(self, path: str | os.PathLike[str], *, durability: str = "full") -> None:
        super().__init__(path, durability=durability)  # type: ignore[arg-type]
        self._write_turn = threading.RLock()

    @contextmanager
    def write(self) -> Iterator[SqliteTx]:
        with self._write_turn, super().write() as tx:
            yield tx


def open_for_serving(db: str | None, *, durability: str = "full") -> Plaudit:
    """`Plaudit.open`, with SQLite writes serialized in-process for a many-threaded server."""
    url = resolve_db(db)
    if is_postgres(url):  # row lock waits in PostgreSQL are queued by the server already
        return Plaudit.open(url, durability=durability)
    from plaudit import builtins  # noqa: F401 - registers the built-in projections, as open() does

    return Plaudit(SerializedSqliteBackend(url, durability=durability))


__all__ = ["SerializedSqliteBackend", "open_for_serving"]
