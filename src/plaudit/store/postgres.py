"""PostgreSQL backend (psycopg 3) so many agent hosts can share one log.

The write lock (the sequencer lease) is a transaction-level advisory lock scoped to the schema
in use, taken by a transaction's first statement. Appends that find it taken go to the intake
table instead, whose commits need no lock and run concurrently; the lease holder sequences them
(see docs/log.md). The head row is still read `FOR UPDATE` under the lease, which keeps a
process of an older plaudit, that knows only that lock, in line.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import lru_cache
from typing import Any, Literal

from plaudit.errors import BackendUnavailableError, ConfigError
from plaudit.store.backend import Backend, Tx
from plaudit.store.schema import INTAKE_COLUMNS

_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

#: The sequencer lease: one advisory lock per schema, released when its transaction ends.
_LEASE_KEY = "hashtext('plaudit.sequencer'), hashtext(current_schema())"
LEASE_SQL = f"SELECT 1 FROM (SELECT pg_advisory_xact_lock({_LEASE_KEY})) lease"
TRY_LEASE_SQL = f"SELECT pg_try_advisory_xact_lock({_LEASE_KEY})"


@lru_cache(maxsize=1024)
def _translate(sql: str) -> str:
    # `?` placeholders become psycopg's `%s`; a literal % must be doubled.
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresTx(Tx):
    dialect = "postgres"

    def __init__(self, conn: Any) -> None:
        import psycopg.errors

        self.conn = conn
        self.cur = conn.cursor()
        self.unique_violation = (psycopg.errors.UniqueViolation,)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        cur = self.conn.cursor()
        cur.execute(_translate(sql), params or None)
        return cur

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = list(rows)
        if rows:
            self.cur.executemany(_translate(sql), rows)

    def iterate(
        self, sql: str, params: Sequence[Any] = (), *, size: int = 5000
    ) -> Iterator[tuple[Any, ...]]:
        # A server-side cursor keeps memory flat for full-log scans.
        with self.conn.cursor(name=f"plaudit_iter_{id(self)}") as cur:
            cur.itersize = size
            cur.execute(_translate(sql), params or None)
            yield from cur

    def chunks(
        self, sql: str, params: Sequence[Any] = (), *, size: int = 4096
    ) -> Iterator[list[tuple[Any, ...]]]:
        with self.conn.cursor(name=f"plaudit_chunks_{id(self)}") as cur:
            cur.execute(_translate(sql), params or None)
            while True:
                rows = cur.fetchmany(size)
                if not rows:
                    return
                yield rows

    def table_exists(self, name: str) -> bool:
        return self.scalar("SELECT to_regclass(?) IS NOT NULL", (name,)) is True

    def json_field(self, column: str, name: str, cast: Literal["int", "text"] = "int") -> str:
        # ::json (not ::jsonb) parses without building the binary form: twice as fast here.
        return f"({column}::json->>'{name}')::{'bigint' if cast == 'int' else 'text'}"

    # -- the intake table (see plaudit.store.log) -----------------------------------------
    def intake_put(self, rows: list[tuple[Any, ...]]) -> set[str]:
        """Insert intake rows (INTAKE_COLUMNS order) unless their id is pending; returns the
        ids inserted. One statement whatever the batch size."""
        if not rows:
            return set()
        cols = list(zip(*rows, strict=True))
        sql = (
            f"INSERT INTO plaudit_intake ({', '.join(INTAKE_COLUMNS)}) SELECT * FROM unnest("
            "%s::text[], %s::text[], %s::bigint[], %s::text[], %s::text[], %s::text[], "
            "%s::text[], %s::bytea[], %s::text[], %s::boolean[]) "
            "ON CONFLICT (id) DO NOTHING RETURNING id"
        )
        cur = self.conn.cursor()
        cur.execute(sql, [list(c) for c in cols])
        return {r[0] for r in cur.fetchall()}

    def intake_digests(self, ids: list[str]) -> dict[str, bytes]:
        cur = self.conn.cursor()
        cur.execute("SELECT id, content_digest FROM plaudit_intake WHERE id = ANY(%s)", (ids,))
        return {r[0]: bytes(r[1]) for r in cur.fetchall()}

    def intake_take(self, limit: int) -> list[tuple[Any, ...]]:
        """Remove and return up to `limit` pending rows, oldest first: (n, *INTAKE_COLUMNS).

        One statement, so a row committed while it runs is either taken whole or left for
        the next call; the caller's transaction puts them back if it does not commit."""
        cur = self.conn.cursor()
        # Whole append calls only (`batch`), so a strict batch is never split between passes.
        cur.execute(
            "DELETE FROM plaudit_intake WHERE batch IN "
            "(SELECT batch FROM plaudit_intake ORDER BY n LIMIT %s) "
            f"RETURNING n, {', '.join(INTAKE_COLUMNS)}",
            (limit,),
        )
        return sorted(cur.fetchall())

    def copy_rows(self, table: str, columns: Sequence[str], rows: list[Sequence[Any]]) -> None:
        with self.cur.copy(f"COPY {table} ({','.join(columns)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)


class PostgresBackend(Backend):
    dialect = "postgres"

    def __init__(self, dsn: str, *, schema: str | None = None) -> None:
        super().__init__()
        if schema is not None and not _SCHEMA_RE.match(schema):
            raise ConfigError(f"schema {schema!r} must match {_SCHEMA_RE.pattern}")
        self.dsn = dsn
        self.schema = schema
        self.url = dsn if schema is None else f"{dsn} (schema {schema})"
        # Sequencing passes NOTIFY this channel; one listener thread per backend wakes waiters.
        self._channel = f"plaudit_seq_{schema or 'public'}"
        self._seq_cond = threading.Condition()
        self._seq_gen = 0
        self._listener: Any = None
        self._closing = False

    def _connect(self) -> Any:
        import psycopg
        import psycopg.errors

        try:
            conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=10)
        except psycopg.OperationalError as exc:
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BackendUnavailableError(f"cannot connect to PostgreSQL: {msg}") from None
        if self.schema:
            # Concurrent first connections race on CREATE SCHEMA IF NOT EXISTS (PostgreSQL
            # checks, then inserts); the loser's error just means the schema now exists.
            with suppress(psycopg.errors.UniqueViolation, psycopg.errors.DuplicateSchema):
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            conn.execute(f'SET search_path TO "{self.schema}"')
        # Transactions are explicit (BEGIN/COMMIT below), never psycopg's implicit ones.
        return conn

    has_intake = True

    @contextmanager
    def write(self) -> Iterator[PostgresTx]:
        with self._transaction(LEASE_SQL) as (tx, _):
            yield tx

    @contextmanager
    def try_write(self) -> Iterator[PostgresTx | None]:
        with self._transaction(TRY_LEASE_SQL) as (tx, got):
            yield tx if got else None

    @contextmanager
    def intake(self) -> Iterator[PostgresTx]:
        with self._transaction(None) as (tx, _):
            yield tx

    @contextmanager
    def _transaction(self, lease_sql: str | None) -> Iterator[tuple[PostgresTx, bool]]:
        conn = self.connection()
        conn.execute("BEGIN")
        self._local.in_write = True
        try:
            got = True
            if lease_sql is not None:
                got = bool(conn.execute(lease_sql).fetchone()[0])
            tx = PostgresTx(conn)
            yield tx, got
        except BaseException:
            self._end(conn, "ROLLBACK")
            raise
        else:
            conn.execute("COMMIT")
        finally:
            self._local.in_write = False

    def notify_sequenced(self, tx: Tx) -> None:
        tx.execute(f'NOTIFY "{self._channel}"')

    def sequenced_mark(self) -> int:
        if self._listener is None:
            self._start_listener()
        return self._seq_gen

    def wait_sequenced(self, mark: int, timeout: float) -> None:
        with self._seq_cond:
            self._seq_cond.wait_for(lambda: self._seq_gen != mark, timeout)

    def _start_listener(self) -> None:
        """LISTEN before the caller checks anything (so no pass can slip between), then wake
        waiters from a daemon thread. Should it fail, waiters still poll."""
        with self._seq_cond:
            if self._listener is not None:
                return
            try:
                conn = self._connect()
                conn.execute(f'LISTEN "{self._channel}"')
            except Exception:
                self._listener = False
                return

            def listen() -> None:
                try:
                    while not self._closing:
                        for _ in conn.notifies(timeout=1.0):
                            with self._seq_cond:
                                self._seq_gen += 1
                                self._seq_cond.notify_all()
                except Exception:
                    pass
                finally:
                    with suppress(Exception):
                        conn.close()

            self._listener = threading.Thread(
                target=listen, name="plaudit-sequenced-listener", daemon=True
            )
            self._listener.start()

    def close(self) -> None:
        self._closing = True
        listener, self._listener = self._listener, None
        super().close()
        if isinstance(listener, threading.Thread):
            listener.join(timeout=2.0)
        self._closing = False

    @staticmethod
    def _end(conn: Any, word: str) -> None:
        with suppress(Exception):
            conn.execute(word)

    @contextmanager
    def read(self) -> Iterator[PostgresTx]:
        conn = self.connection()
        if getattr(self._local, "in_write", False):  # nested inside a write: reuse its view
            yield PostgresTx(conn)
            return
        with self._read_on(conn) as tx:
            yield tx

    @contextmanager
    def _read_on(self, conn: Any) -> Iterator[PostgresTx]:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            yield PostgresTx(conn)
        finally:
            self._end(conn, "ROLLBACK")

    def drop_schema(self) -> None:
        """Remove the whole schema; used by tests and `plaudit` tooling to clean up."""
        if not self.schema:
            raise ConfigError("drop_schema needs an explicit schema")
        self.connection().execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
