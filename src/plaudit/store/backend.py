"""What the log needs from a database, behind one small interface (as httpx does with transports).

SQL is written once with `?` placeholders and a few `{dialect}` words; each backend translates.
"""

from __future__ import annotations

import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from plaudit.store.checkpointing import HeadState

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


class HeadMoved(Exception):
    """A transaction that went ahead on the head this process last wrote found it had moved
    (or the lease taken, intake pending, an id held): it was rolled back, nothing written.
    Internal to the log, which then reads the head and tries again."""


def _head_state(row: Sequence[Any], pending: bool) -> HeadState:
    from plaudit.store.checkpointing import HeadState

    seq, h, tree_size, frontier, ck_size, ck_ms = row
    return HeadState(
        int(seq),
        bytes(h),
        pending,
        int(tree_size),
        b"" if frontier is None else bytes(frontier),
        int(ck_size),
        int(ck_ms),
    )


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
    #: The head as this transaction's last sequenced write left it (see `EventLog._finish`),
    #: so the next write in the same transaction need not read it; None: read it.
    head_cache: HeadState | None = None
    #: Ids looked up with the lease (`EventLog.run(..., ids=)`) and which of them the log holds,
    #: id -> (content_digest, seq), kept current as this transaction appends; a write of only
    #: these ids needs no look-up of its own. None: look up.
    looked_up: tuple[frozenset[str], dict[str, tuple[bytes, int]]] | None = None

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

    #: The head row as the sequencer needs it (see `HeadState`).
    HEAD_SQL = (
        "SELECT seq, hash, tree_size, frontier, checkpoint_size, checkpoint_ms FROM plaudit_head "
        "WHERE one = 1"
    )

    def held(self, ids: Sequence[str]) -> list[tuple[Any, ...]]:
        """(id, content_digest, seq) of the events holding `ids` (at most 500), by the id
        index: the backend words it so its planner cannot choose a scan of the log."""
        marks = ",".join("?" * len(ids))
        return self.fetchall(
            f"SELECT id, content_digest, seq FROM plaudit_events WHERE id IN ({marks})", ids
        )

    def head_state(self) -> HeadState:
        """The head row as this transaction sees it (no lock; nothing pending is reported)."""
        row = self.fetchone(self.HEAD_SQL)
        assert row is not None
        return _head_state(row, False)

    def head_for_sequencing(self, ids: Sequence[str] | None = None) -> HeadState:
        """The head row under the lease, with whether intake is pending (and, on backends
        that save a round trip by it, which of `ids` are committed)."""
        return self.head_state()

    def current_head(self) -> HeadState:
        """The head for the next sequenced write of this transaction."""
        cached = self.head_cache
        return cached if cached is not None else self.head_for_sequencing()

    def insert_events(
        self,
        rows: list[Sequence[Any]],
        head: Sequence[Any],
        marks: Mapping[str, tuple[int, int]] | None = None,
    ) -> bool:
        """Insert sequenced event rows, move the head row to `head` (seq, hash, tree_size,
        frontier) and record `marks`, the projections' states after these events (name ->
        (version, applied_seq)); returns whether intake is pending now (never, without an
        intake)."""
        from plaudit.store.schema import EVENT_COLUMNS

        self.copy_rows("plaudit_events", EVENT_COLUMNS, rows)
        self.move_head(head)
        if marks:
            self.write_marks(marks)
        return False

    def write_marks(self, marks: Mapping[str, tuple[int, int]]) -> None:
        """Record projections' states: name -> (version, applied_seq)."""
        self.upsert(
            "plaudit_projections",
            MARK_COLUMNS,
            MARK_TYPES,
            [(name, ver, applied) for name, (ver, applied) in marks.items()],
            key=("name",),
        )

    def move_head(self, head: Sequence[Any]) -> None:
        self.execute(
            "UPDATE plaudit_head SET seq = ?, hash = ?, tree_size = ?, frontier = ? WHERE one = 1",
            head,
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

    def __init__(self) -> None:
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

    #: True when appends that find the write lock taken can be made durable in the intake
    #: table and sequenced by whoever holds it (see docs/log.md, "How an append flows").
    has_intake: bool = False

    @abstractmethod
    @contextmanager
    def write(self) -> Iterator[Tx]:
        """A transaction holding the log's write lock (the sequencer lease) from its first
        statement, across threads, processes and hosts; commits on success."""

    @contextmanager
    def write_unflushed(self) -> Iterator[Tx]:
        """`write()`, but its commit may return before it reaches stable storage, as long as
        the next flushed commit makes it durable too (a log synced in order) and a killed
        process keeps it. A backend that cannot do this safely gives a plain `write()`."""
        with self.write() as tx:
            yield tx

    @contextmanager
    def try_write(self) -> Iterator[Tx | None]:
        """`write()` if the lease is free right now, else None (and no transaction)."""
        with self.write() as tx:
            yield tx

    @abstractmethod
    def in_write(self) -> bool:
        """True while this thread is inside a write transaction of this backend."""

    @contextmanager
    def intake(self, *, single: bool = False, relaxed: bool = False) -> Iterator[Tx]:
        """A plain write transaction without the lease, for the intake table (`single`: the
        caller runs one statement, which may then be its own transaction)."""
        raise NotImplementedError(f"{self.dialect} has no intake")
        yield  # pragma: no cover

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
