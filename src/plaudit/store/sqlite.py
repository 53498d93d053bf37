"""SQLite backend: one file in WAL mode; `BEGIN IMMEDIATE` is the log's write lock.

Writers queue for it in the kernel, not in SQLite's busy handler: threads of one process on a
lock, processes on an exclusive `flock` of the sidecar file `<db>.lock` (`FileLock`). SQLite's
handler sleeps in growing steps (up to 100 ms) and lets a waker-up take the lock ahead of older
waiters, so with four writing processes the slowest append waited 7.4 s and the shares were
unfair; a kernel lock hands over as soon as it is free (bench/log_scale.py). Every one of these
waits ends at the store's deadline with an error naming the holder (`plaudit.store.deadlines`).

The database, its WAL and its lock file are created private to their owner
(`plaudit.store.perms`): SQLite gives the WAL and shared-memory files the database's mode.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import lru_cache
from itertools import chain
from typing import TYPE_CHECKING, Any, Literal

from plaudit.errors import BackendUnavailableError, ConfigError, StoreNotFoundError
from plaudit.store import deadlines, perms
from plaudit.store.backend import Backend, Tx
from plaudit.store.filelock import FileLock
from plaudit.store.ops import for_dialect

if TYPE_CHECKING:
    from pathlib import Path

    from plaudit.store.sequencer import Sequencer
    from plaudit.store.sequencing import Sequencing

Durability = Literal["full", "normal"]

#: Rows per multi-row INSERT (fewer where SQLite's bound-parameter limit is lower; it was 999
#: before 3.32). 200-500 measured alike; 250 divides the usual batch of 1,000.
ROWS_PER_INSERT = 250


@lru_cache(maxsize=16)
def _multi_insert_sql(table: str, columns: tuple[str, ...], rows: int) -> str:
    one = "(" + ",".join("?" * len(columns)) + ")"
    return f"INSERT INTO {table} ({','.join(columns)}) VALUES " + ",".join([one] * rows)


class SqliteTx(Tx):
    dialect = "sqlite"
    unique_violation = (sqlite3.IntegrityError,)
    # sqlite3 binds a bytearray directly; bytes first go through its adapter lookup, which
    # costs ~0.4 us per value (two blobs per event row). The column stores the same BLOB.
    blob = bytearray

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)

    def copy_rows(self, table: str, columns: Sequence[str], rows: list[Sequence[Any]]) -> None:
        """Insert rows `ROWS_PER_INSERT` at a time in one multi-row INSERT, the rest one by one.

        Per row, a multi-row statement saves executemany's statement reset and step (and the
        GIL round trip around it): about 0.6 us of the ~3 us an event row costs. A failing
        row fails its statement as a whole, which changes nothing: the caller undoes the batch.
        """
        n = len(rows)
        limit = self.conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        per = min(ROWS_PER_INSERT, limit // max(len(columns), 1))
        whole = n - n % per if per > 1 else 0
        if whole:
            sql = _multi_insert_sql(table, tuple(columns), per)
            execute = self.conn.execute
            for i in range(0, whole, per):
                execute(sql, list(chain.from_iterable(rows[i : i + per])))
        if whole < n:
            self.conn.executemany(_multi_insert_sql(table, tuple(columns), 1), rows[whole:])

    def json_field(self, column: str, name: str, cast: Literal["int", "text"] = "int") -> str:
        return (
            f"CAST(json_extract({column}, '$.{name}') AS {'INTEGER' if cast == 'int' else 'TEXT'})"
        )

    def columns(self, table: str) -> set[str]:
        return {r[1] for r in self.conn.execute(f"PRAGMA table_info({table})")}

    def table_exists(self, name: str) -> bool:
        return (
            self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)
            ).fetchone()
            is not None
        )


#: How long opening a store keeps asking for WAL mode while other processes open it too.
WAL_SWITCH_S = 60.0


def _to_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL mode. Processes that open a new file at the same moment race for the
    switch, and SQLite answers the loser "database is locked" at once, without its busy
    handler (waiting could deadlock on the lock upgrade), so ask again until it settles."""
    deadline = time.monotonic() + WAL_SWITCH_S
    pause = 0.001
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


class SqliteBackend(Backend):
    dialect = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: Durability = "full",
        create: bool = True,
        deadline_s: float | None = None,
    ) -> None:
        super().__init__(deadline_s)
        #: False: open only an existing store; never make a file, a directory or a table.
        self.create = create
        # A str inside: pathlib costs a shell hook's `signal emit` ~3 ms to import.
        self.url = os.fspath(path)
        if not self.url:  # sqlite3 would quietly open a temporary database
            raise ConfigError("the SQLite database path is empty")
        self._write_turn = threading.RLock()
        self._file_lock: FileLock | None = None
        self.ops = for_dialect("sqlite")
        if durability not in ("full", "normal"):
            raise ConfigError(f"durability must be 'full' or 'normal', not {durability!r}")
        # FULL syncs the WAL on every commit, so an acknowledged append survives power loss;
        # NORMAL survives a killed process but may lose the last commits on power loss.
        self.synchronous = "FULL" if durability == "full" else "NORMAL"

    @property
    def path(self) -> Path:
        from pathlib import Path

        return Path(self.url)

    def _idle(self, conn: sqlite3.Connection) -> bool:
        return not conn.in_transaction

    def _connect(self) -> sqlite3.Connection:
        if self.create and self.url != ":memory:" and not self.url.startswith("file:"):
            parent = os.path.dirname(self.url)
            try:
                if parent:
                    perms.make_dirs(parent)
            except OSError as exc:
                raise self._unopenable(f"cannot create its directory {parent!r}", exc) from None
            try:
                # Before SQLite makes it: SQLite would give the file (and its WAL) the umask's
                # mode, readable by every local user.
                perms.create_file(self.url)
            except OSError as exc:
                raise self._unopenable("cannot create it", exc) from None
        busy_ms = int(self.deadline_s * 1000)
        try:
            conn = sqlite3.connect(
                self.url if self.create else self._existing_uri(),
                isolation_level=None,
                timeout=self.deadline_s,
                check_same_thread=False,
                uri=not self.create,
            )
            if not self.create:
                self._require_store(conn)  # before any PRAGMA: a foreign file stays as it was
            # Takes effect only when the file is created: events are ~0.5 KB rows, and 8 KiB
            # pages cut B-tree work per insert and per verify scan (see docs/benchmarks.md).
            conn.execute("PRAGMA page_size=8192")
            _to_wal(conn)
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            conn.execute(f"PRAGMA busy_timeout={busy_ms}")
            conn.execute("PRAGMA cache_size=-65536")
            conn.execute("PRAGMA temp_store=MEMORY")
        except sqlite3.DatabaseError as exc:
            raise BackendUnavailableError(
                f"cannot open SQLite database {self.url}: {exc}"
            ) from None
        return conn

    def _unopenable(self, what: str, exc: OSError) -> BackendUnavailableError:
        why = (
            "a file is in the way"
            if isinstance(exc, FileExistsError | NotADirectoryError)
            else exc.strerror or exc
        )
        return BackendUnavailableError(f"cannot open SQLite database {self.url}: {what}: {why}")

    def _process_lock(self) -> FileLock | None:
        """The sidecar lock file (None for an in-memory store, or where it cannot be made)."""
        if self._file_lock is None and self.url != ":memory:" and not self.url.startswith("file:"):
            lock = FileLock(self.url + ".lock")
            try:
                lock._descriptor()
            except OSError:
                return None  # e.g. a read-only directory: SQLite's own lock still serialises
            self._file_lock = lock
        return self._file_lock

    def _existing_uri(self) -> str:
        """A `mode=rw` URI: SQLite opens the file only if it exists, and never creates it."""
        from urllib.parse import quote

        if self.url == ":memory:" or not os.path.isfile(self.url):
            raise StoreNotFoundError.at(self.url)
        return "file:" + quote(os.path.abspath(self.url)) + "?mode=rw"

    def _require_store(self, conn: sqlite3.Connection) -> None:
        sql = "SELECT 1 FROM sqlite_master WHERE type='table' AND name='plaudit_events'"
        if conn.execute(sql).fetchone() is None:
            conn.close()
            raise StoreNotFoundError.at(self.url, why="the file holds no plaudit tables")

    @contextmanager
    def write(self, *, flush: bool = True) -> Iterator[SqliteTx]:
        # Threads of this process queue here first. Left to SQLite's busy handler, a losing
        # writer sleeps in growing steps and nobody takes the free lock until a sleeper wakes:
        # with 40 writing threads p99 was 229 ms, against 42 ms queued here
        # (bench/http_sqlite_writers.py). Processes queue on the sidecar lock likewise.
        if not self._write_turn.acquire(timeout=self.deadline_s):
            raise deadlines.waited(
                f"the write lock of {self.url}",
                self.deadline_s,
                f"another thread of this process (pid {os.getpid()})",
                "a write in this process has not finished (a long rebuild or import?); retry",
            )
        try:
            lock = self._process_lock()
            if lock is not None:
                lock.acquire(self.deadline_s)
            try:
                with self._transaction(flush) as tx:
                    yield tx
            finally:
                if lock is not None:
                    lock.release()
        finally:
            self._write_turn.release()

    @contextmanager
    def _transaction(self, flush: bool) -> Iterator[SqliteTx]:
        conn = self.connection()
        # In WAL mode NORMAL appends the commit's frames without an fsync; the WAL is one file
        # written in order, so the next FULL commit's fsync makes these frames durable too.
        # SQLite refuses to change the level inside a transaction: set it around the write.
        relax = not flush and self.synchronous != "NORMAL"
        if relax:
            conn.execute("PRAGMA synchronous=NORMAL")
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield SqliteTx(conn)
                conn.execute("COMMIT")
            except BaseException:
                # SQLite may already have rolled back (e.g. on a full disk); never mask the
                # cause.
                if conn.in_transaction:
                    with suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise
        finally:
            if relax:
                conn.execute(f"PRAGMA synchronous={self.synchronous}")

    def file(self) -> str | None:
        return None if self.url == ":memory:" or self.url.startswith("file:") else self.url

    def make_durable(self) -> None:
        """Make every committed write durable, flushed or not: fsync the WAL, which holds them
        in commit order. Checkpoints are published to witnesses only after this."""
        wal = self.url + "-wal"
        try:
            fd = os.open(wal, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return  # no WAL: everything is in the database file, synced at checkpoint
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        super().close()
        if self._file_lock is not None:
            self._file_lock.close()
            self._file_lock = None

    def in_write(self) -> bool:
        conn = getattr(self._local, "conn", None)
        return conn is not None and conn.in_transaction and self._write_turn._is_owned()  # type: ignore[attr-defined]

    @contextmanager
    def read(self) -> Iterator[SqliteTx]:
        conn = self.connection()
        if conn.in_transaction:  # nested inside a write: reuse its view
            yield SqliteTx(conn)
            return
        with self._read_on(conn) as tx:
            yield tx

    @contextmanager
    def _read_on(self, conn: sqlite3.Connection) -> Iterator[SqliteTx]:
        conn.execute("BEGIN DEFERRED")
        try:
            yield SqliteTx(conn)
        finally:
            if conn.in_transaction:
                with suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")

    def sequencer(self, core: Sequencing) -> Sequencer:
        from plaudit.store.sqlite_sequencer import SqliteSequencer

        return SqliteSequencer(self, core)
