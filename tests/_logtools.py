"""Test helpers for the log suites: raw database access as an attacker has it, and event makers."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from plaudit import make_event
from plaudit.config import is_postgres, split_schema
from plaudit.events import Event


def ev(i: int, *, kind: str = "test.thing.v1", session: str = "s1", **payload: Any) -> Event:
    """A small deterministic event with id `e<i>`."""
    return make_event(
        kind, {"i": i, **payload}, id=f"e{i}", session_id=session, ts_ms=1_700_000_000_000 + i
    )


class Raw:
    """A direct connection that bypasses plaudit, with `?` placeholders on both backends."""

    def __init__(self, conn: Any, dialect: str) -> None:
        self.conn = conn
        self.dialect = dialect

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if self.dialect == "postgres":
            sql = sql.replace("?", "%s")
        cur = self.conn.execute(sql, tuple(params))
        try:
            return [tuple(r) for r in cur.fetchall()]
        except Exception:  # statements without a result set
            return []

    def rows(self) -> list[tuple[Any, ...]]:
        return self.execute(
            "SELECT seq, id, type, ts_ms, session_id, source, payload, meta, hash "
            "FROM plaudit_events ORDER BY seq"
        )

    def rehash_from(self, start: int) -> None:
        """Recompute every hash and content digest from `start`, and the head, as a careful
        attacker would."""
        from plaudit.store.chain import GENESIS

        prev = GENESIS
        last = 0
        for seq, id_, type_, ts, sess, src, payload, meta, h in self.rows():
            if seq >= start:
                body = "\x1f".join((id_, type_, str(ts), sess, src, payload, meta)).encode()
                h = hashlib.sha256(prev + body).digest()
                digest = hashlib.sha256("\x1f".join((type_, sess, src, payload)).encode())
                self.execute(
                    "UPDATE plaudit_events SET hash = ?, content_digest = ? WHERE seq = ?",
                    (h, digest.digest(), seq),
                )
            prev, last = bytes(h), seq
        self.execute("UPDATE plaudit_head SET seq = ?, hash = ? WHERE one = 1", (last, prev))
        self.retree()

    def retree(self) -> None:
        """Rebuild the Merkle tree from the stored chain hashes and delete every signed
        checkpoint: a rewrite that nothing inside the database can tell from the real log."""
        from plaudit.store.merkle import CompactRange, leaf_hashes

        hashes = [bytes(r[0]) for r in self.execute("SELECT hash FROM plaudit_events ORDER BY seq")]
        ext = CompactRange.empty().extend(leaf_hashes(hashes))
        self.execute("DELETE FROM plaudit_tree_nodes")
        for n in ext.nodes:
            self.execute(
                "INSERT INTO plaudit_tree_nodes (level, idx, hash) VALUES (?, ?, ?)",
                (n.level, n.index, n.hash),
            )
        self.execute("DELETE FROM plaudit_checkpoints")
        self.execute(
            "UPDATE plaudit_head SET tree_size = ?, frontier = ?, checkpoint_size = 0, "
            "checkpoint_ms = 0 WHERE one = 1",
            (len(hashes), b"".join(ext.range.hashes)),
        )


@contextmanager
def attacker(db_url: str) -> Iterator[Raw]:
    """Open the store's database directly and drop plaudit's append-only triggers first."""
    if is_postgres(db_url):
        import psycopg

        dsn, schema = split_schema(db_url)
        conn = psycopg.connect(dsn, autocommit=True)
        try:
            conn.execute(f'SET search_path TO "{schema}"')
            conn.execute("DROP TRIGGER IF EXISTS plaudit_events_append_only ON plaudit_events")
            yield Raw(conn, "postgres")
        finally:
            conn.close()
        return
    conn = sqlite3.connect(db_url, isolation_level=None)
    try:
        conn.execute("DROP TRIGGER IF EXISTS plaudit_events_no_update")
        conn.execute("DROP TRIGGER IF EXISTS plaudit_events_no_delete")
        yield Raw(conn, "sqlite")
    finally:
        conn.close()


def table_dump(p: Any, table: str, order: str) -> list[tuple[Any, ...]]:
    """Every row of a table, in a stable order, with bytes normalised."""
    with p.backend.read() as tx:
        rows = tx.fetchall(f"SELECT * FROM {table} ORDER BY {order}")
    return [tuple(bytes(c) if isinstance(c, memoryview) else c for c in r) for r in rows]
