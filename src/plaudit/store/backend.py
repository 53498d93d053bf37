"""What the log needs from a database, behind one small interface (as httpx does with transports).

SQL is written once with `?` placeholders and a few `{dialect}` words; each backend translates.
"""

from __future__ import annotations

import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from plaudit.store.ops import LogOps
    from plaudit.store.sequencer import Sequencer
    from plaudit.store.sequencing import Sequencing

Dialect = Literal["sqlite", "postgres"]

#: Words that differ between the two dialects; projections may use them in their DDL too.
DIALECT_WORDS: dict[str, dict[str, str]] = {
    "sqlite": {
        "blob": "BLOB",
        "bigint": "INTEGER",
        "seq_pk": "INTEGER PRIMARY KEY",
        "autoinc_pk": "INTEGER PRIMARY KEY AUTOINCREMENT",
        "double": "REAL",
        "sep": "char(31)",
    },
    "postgres": {
        "blob": "BYTEA",
        "bigint": "BIGINT",
        "seq_pk": "BIGINT PRIMARY KEY",
        "autoinc_pk": "BIGSERIAL PRIMARY KEY",
        "double": "DOUBLE PRECISION",
        "sep": "chr(31)",
    },
}


#: A projection's stored state (`plaudit_projections`), as `Tx.upsert` takes it.
MARK_COLUMNS = ("name", "version", "applied_seq")
MARK_TYPES = ("text", "{bigint}", "{bigint}")


@lru_cache(maxsize=64)
def _upsert_sql(
    table: str, columns: tuple[str, ...], key: tuple[str, ...], update: bool, n: int
) -> str:
    one = "(" + ", ".join("?" * len(columns)) + ")"
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
        + ", ".join([one] * n)
        + upsert_clause(columns, key, update)
    )


def upsert_clause(columns: Sequence[str], key: Sequence[str], update: bool) -> str:
    if not update:
        return f" ON CONFLICT ({', '.join(key)}) DO NOTHING"
    rest = [c for c in columns if c not in key]
    return f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET " + ", ".join(
        f"{c} = excluded.{c}" for c in rest
    )


class Tx(ABC):
    """A transaction handed to the log's writers and to projections."""

    dialect: Dialect
    #: What the driver raises when a unique index refuses a row.
    unique_violation: tuple[type[BaseException], ...] = ()
    #: Turns bytes into the parameter the driver binds to a blob column fastest.
    blob: Callable[[bytes], Any] = bytes
    #: Whether one statement of many rows beats `executemany` of a one-row statement. Yes on
    #: SQLite (a statement step per row saved). No on PostgreSQL: psycopg parses a statement
    #: of over 4 KB or 50 parameters afresh on every call, while `executemany` pipelines one
    #: prepared statement (with the one-statement read, a bandit checkpoint went from 27.7 to
    #: 19.4 ms: bench/bandit_checkpoint.py).
    multi_row_statements: bool = True
    #: Whether one statement may write several tables (`WITH a AS (UPDATE ...) INSERT ...`):
    #: PostgreSQL, where psycopg sends every statement on its own while holding the
    #: interpreter lock, so writes joined into one cost one send. Not SQLite.
    writes_with: bool = False

    def sync(self) -> None:
        """Make every statement sent so far have run (and raise its error, if any): a no-op
        except where statements are pipelined."""
        return None

    @abstractmethod
    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

    @abstractmethod
    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...

    def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self.execute(sql, params).fetchall())

    def fetchone(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        return self.execute(sql, params).fetchone()

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        row = self.fetchone(sql, params)
        return None if row is None else row[0]

    def iterate(
        self, sql: str, params: Sequence[Any] = (), *, size: int = 5000
    ) -> Iterator[tuple[Any, ...]]:
        """Stream a large result without holding it all in memory."""
        cur = self.execute(sql, params)
        while True:
            rows = cur.fetchmany(size)
            if not rows:
                return
            yield from rows

    def chunks(
        self, sql: str, params: Sequence[Any] = (), *, size: int = 4096
    ) -> Iterator[list[tuple[Any, ...]]]:
        """Stream a large result as lists of rows (cheaper per row than `iterate`)."""
        cur = self.execute(sql, params)
        while True:
            rows = cur.fetchmany(size)
            if not rows:
                return
            yield rows

    def ddl(self, sql: str) -> str:
        """Fill `{blob}`, `{bigint}`, ... with this dialect's words."""
        return sql.format(**DIALECT_WORDS[self.dialect])

    @abstractmethod
    def table_exists(self, name: str) -> bool: ...

    def copy_rows(self, table: str, columns: Sequence[str], rows: list[Sequence[Any]]) -> None:
        """Bulk insert; backends override with their fastest path."""
        marks = ",".join("?" * len(columns))
        self.executemany(f"INSERT INTO {table} ({','.join(columns)}) VALUES ({marks})", rows)

    def upsert(
        self,
        table: str,
        columns: Sequence[str],
        types: Sequence[str],
        rows: Sequence[Sequence[Any]],
        *,
        key: Sequence[str],
        update: bool = True,
    ) -> None:
        """Insert `rows`; a row whose `key` is taken replaces the other columns (`update`) or
        is left out. `types` are the columns' types in `ddl` words (`text`, `{bigint}`,
        `{double}`), for backends that send rows as typed arrays. Keys must not repeat
        within `rows` when `update` is set. SQLite: multi-row statements (a statement step
        per row saved), each under its oldest limit of 999 parameters."""
        if not rows:
            return
        step = max(1, 999 // len(columns))
        whole = len(rows) - len(rows) % step
        for i in range(0, whole, step):
            chunk = rows[i : i + step]
            self.execute(
                _upsert_sql(table, tuple(columns), tuple(key), update, len(chunk)),
                [v for row in chunk for v in row],
            )
        if whole < len(rows):
            self.executemany(
                _upsert_sql(table, tuple(columns), tuple(key), update, 1), rows[whole:]
            )

    @abstractmethod
    def columns(self, table: str) -> set[str]:
        """The column names of a table of the log's schema."""

    @abstractmethod
    def json_field(self, column: str, name: str, cast: Literal["int", "text"] = "int") -> str:
        """SQL for the top-level field `name` of the JSON text in `column`, as int or text."""


class _Holder:
    """Lives in a thread's locals beside its connection, to learn when the thread ended."""

    __slots__ = ("__weakref__",)


class Backend(ABC):
    """A connection factory with one connection per thread.

    A thread's connection outlives the thread: when the thread ends, its connection goes back
    to a spare list that the next new thread takes from. A server's worker threads come and go
    (anyio retires idle ones), and opening a PostgreSQL connection costs a new thread's first
    request 10 to 20 ms; keeping every dead thread's connection open would exhaust the
    server's connections instead. `warm(n)` opens spares ahead of the first requests."""

    dialect: Dialect
    url: str
    #: The statements the sequencer runs, in this dialect's words.
    ops: LogOps

    def __init__(self, deadline_s: float | None = None) -> None:
        from plaudit.store.deadlines import deadline_from

        #: The longest any wait of this store lasts (`plaudit.store.deadlines`).
        self.deadline_s = deadline_from(deadline_s)
        self._local = threading.local()
        self._all: list[Any] = []
        self._spare: list[Any] = []
        self._all_lock = threading.Lock()
        #: Called first by `close()` (threads the log started for this store stop there).
        self.on_close: list[Callable[[], None]] = []

    @abstractmethod
    def _connect(self) -> Any: ...

    def _idle(self, conn: Any) -> bool:
        """Whether a connection is between transactions, so another thread may use it."""
        return True

    def connection(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            with self._all_lock:
                conn = self._spare.pop() if self._spare else None
            if conn is None:
                conn = self._connect()
                with self._all_lock:
                    self._all.append(conn)
            self._local.conn = conn
            # Dropped with the thread's locals when the thread ends: the connection goes back.
            holder = self._local.holder = _Holder()
            weakref.finalize(holder, self._give_back, conn)
        return conn

    def _discard(self, conn: Any) -> None:
        """Close this thread's connection and forget it (the next use opens another): for a
        connection whose driver state can no longer be trusted."""
        with self._all_lock:  # first: dropping the holder gives the connection back
            self._all = [c for c in self._all if c is not conn]
            self._spare = [c for c in self._spare if c is not conn]
        if getattr(self._local, "conn", None) is conn:
            self._local.conn = None
            self._local.holder = None
        with suppress(Exception):
            conn.close()

    def _give_back(self, conn: Any) -> None:
        """The thread that used `conn` ended: keep it for the next new thread if it is idle."""
        with self._all_lock:
            if not any(c is conn for c in self._all):
                return  # the store was closed meanwhile, and the connection with it
            if self._idle(conn):
                self._spare.append(conn)
                return
            self._all = [c for c in self._all if c is not conn]
        with suppress(Exception):
            conn.close()

    def warm(self, n: int) -> int:
        """Open connections up to `n` spares, in parallel (a server calls this before its
        first request); returns how many are spare now."""
        with self._all_lock:
            missing = max(0, n - len(self._spare))
        opened: list[Any] = []

        def one() -> None:
            with suppress(Exception):  # a failure shows on first use, with its message
                opened.append(self._connect())

        threads = [threading.Thread(target=one) for _ in range(missing)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with self._all_lock:
            self._all.extend(opened)
            self._spare.extend(opened)
            return len(self._spare)

    @abstractmethod
    @contextmanager
    def write(self, *, flush: bool = True) -> Iterator[Tx]:
        """A transaction holding the log's write lock (the sequencer lease) from its first
        statement, across threads, processes and hosts; commits on success. `flush=False`: the
        commit may return before it reaches stable storage, as long as the next flushed commit
        makes it durable too and a killed process keeps it (SQLite's WAL, synced in order);
        a backend that cannot do that safely flushes anyway. Waits at most the deadline."""

    @abstractmethod
    def in_write(self) -> bool:
        """True while this thread is inside a write transaction of this backend."""

    def file(self) -> str | None:
        """The database file, for a process of its own to read (None: there is none)."""
        return None

    def make_durable(self) -> None:
        """Make every commit so far durable (after unflushed ones); a no-op where every commit
        is flushed."""
        return None

    @abstractmethod
    def sequencer(self, core: Sequencing) -> Sequencer:
        """This backend's implementation of the seam every write goes through."""

    @abstractmethod
    @contextmanager
    def read(self) -> Iterator[Tx]:
        """A consistent read-only snapshot."""

    @contextmanager
    def read_statement(self) -> Iterator[Tx]:
        """A snapshot for one statement. Where a snapshot of several costs round trips of its
        own (PostgreSQL: BEGIN and ROLLBACK), the statement runs alone, as its own
        transaction, and a second statement raises; elsewhere this is `read()`. For a reader
        that usually needs one statement (is my cache current?) and opens `read()` when not."""
        with self.read() as tx:
            yield tx

    @contextmanager
    def read_elsewhere(self) -> Iterator[Tx]:
        """A read snapshot on a new connection of its own, for work in another thread."""
        conn = self._connect()
        try:
            with self._read_on(conn) as tx:
                yield tx
        finally:
            with suppress(Exception):
                conn.close()

    @abstractmethod
    @contextmanager
    def _read_on(self, conn: Any) -> Iterator[Tx]:
        """A read-only snapshot on `conn`."""

    def close(self) -> None:
        for hook in self.on_close:
            with suppress(Exception):
                hook()
        with self._all_lock:
            conns, self._all, self._spare = self._all, [], []
        for c in conns:
            with suppress(Exception):
                c.close()
        self._local = threading.local()

    def describe(self) -> str:
        return self.url
