"""PostgreSQL backend (psycopg 3) so many agent hosts can share one log.

The write lock is a row lock on the log's head row, so it is scoped to the schema in use.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import lru_cache
from typing import Any

from plaudit.errors import BackendUnavailableError, ConfigError, StoreNotFoundError
from plaudit.store.backend import Backend, Tx

_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


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

    def copy_rows(self, table: str, columns: Sequence[str], rows: list[Sequence[Any]]) -> None:
        with self.cur.copy(f"COPY {table} ({','.join(columns)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)


class PostgresBackend(Backend):
    dialect = "postgres"

    def __init__(self, dsn: str, *, schema: str | None = None, create: bool = True) -> None:
        super().__init__()
        #: False: open only an existing store; never create a schema or a table.
        self.create = create
        if schema is not None and not _SCHEMA_RE.match(schema):
            raise ConfigError(f"schema {schema!r} must match {_SCHEMA_RE.pattern}")
        self.dsn = dsn
        self.schema = schema
        self.url = dsn if schema is None else f"{dsn} (schema {schema})"

    def _connect(self) -> Any:
        import psycopg
        import psycopg.errors

        try:
            conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=10)
        except psycopg.OperationalError as exc:
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BackendUnavailableError(f"cannot connect to PostgreSQL: {msg}") from None
        if self.schema and self.create:
            # Concurrent first connections race on CREATE SCHEMA IF NOT EXISTS (PostgreSQL
            # checks, then inserts); the loser's error just means the schema now exists.
            with suppress(psycopg.errors.UniqueViolation, psycopg.errors.DuplicateSchema):
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
        if self.schema:
            conn.execute(f'SET search_path TO "{self.schema}"')
        if not self.create:
            self._require_store(conn)
        # Transactions are explicit (BEGIN/COMMIT below), never psycopg's implicit ones.
        return conn

    def _require_store(self, conn: Any) -> None:
        from plaudit.config import describe_store, redact_dsn

        schema, tables = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = current_schema()), "
            "to_regclass('plaudit_events') IS NOT NULL"
        ).fetchone()
        if tables:
            return
        conn.close()
        shown = redact_dsn(self.dsn)
        where = describe_store(self)
        why = "no such schema" if self.schema and not schema else "no plaudit tables there"
        dsn = (
            shown
            if self.schema is None
            else f"{shown}{'&' if '?' in shown else '?'}schema={self.schema}"
        )
        raise StoreNotFoundError.at(where, why=why, db=dsn)

    @contextmanager
    def write(self) -> Iterator[PostgresTx]:
        conn = self.connection()
        conn.execute("BEGIN")
        self._local.in_write = True
        try:
            yield PostgresTx(conn)
        except BaseException:
            self._end(conn, "ROLLBACK")
            raise
        else:
            conn.execute("COMMIT")
        finally:
            self._local.in_write = False

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

    def body_sql(self) -> str:
        cols = ("id", "type", "ts_ms::text", "session_id", "source", "payload", "meta")
        return "convert_to(" + " || chr(31) || ".join(cols) + ", 'UTF8')"

    def drop_schema(self) -> None:
        """Remove the whole schema; used by tests and `plaudit` tooling to clean up."""
        if not self.schema:
            raise ConfigError("drop_schema needs an explicit schema")
        self.connection().execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
