"""SQLite backend: one file in WAL mode; `BEGIN IMMEDIATE` is the log's write lock."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from plaudit.errors import BackendUnavailableError
from plaudit.store.backend import Backend, Tx

Durability = Literal["full", "normal"]


class SqliteTx(Tx):
    dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)

    def table_exists(self, name: str) -> bool:
        return (
            self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)
            ).fetchone()
            is not None
        )


class SqliteBackend(Backend):
    dialect = "sqlite"

    def __init__(self, path: str | os.PathLike[str], *, durability: Durability = "full") -> None:
        super().__init__()
        self.path = Path(path)
        self.url = str(self.path)
        if durability not in ("full", "normal"):
            raise ValueError("durability must be 'full' or 'normal'")
        # FULL syncs the WAL on every commit, so an acknowledged append survives power loss;
        # NORMAL survives a killed process but may lose the last commits on power loss.
        self.synchronous = "FULL" if durability == "full" else "NORMAL"

    def _connect(self) -> sqlite3.Connection:
        if str(self.path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(
                str(self.path), isolation_level=None, timeout=60.0, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            conn.execute("PRAGMA busy_timeout=60000")
            conn.execute("PRAGMA cache_size=-65536")
            conn.execute("PRAGMA temp_store=MEMORY")
        except sqlite3.DatabaseError as exc:
            raise BackendUnavailableError(
                f"cannot open SQLite database {self.path}: {exc}"
            ) from None
        return conn

    @contextmanager
    def write(self) -> Iterator[SqliteTx]:
        conn = self.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield SqliteTx(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextmanager
    def read(self) -> Iterator[SqliteTx]:
        conn = self.connection()
        if conn.in_transaction:  # nested inside a write: reuse its view
            yield SqliteTx(conn)
            return
        conn.execute("BEGIN DEFERRED")
        try:
            yield SqliteTx(conn)
        finally:
            conn.execute("ROLLBACK")

    def body_sql(self) -> str:
        sep = "char(31)"
        cols = ("id", "type", "ts_ms", "session_id", "source", "payload", "meta")
        return "CAST(" + f" || {sep} || ".join(cols) + " AS BLOB)"
