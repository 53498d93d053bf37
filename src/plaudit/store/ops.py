"""The statements the sequencer runs against the log's own tables, written once.

A backend whose dialect does better words some of them its own way (PostgreSQL probes the id
index row by row and joins the head move into the insert: `plaudit.store.postgres_ops`).
`Tx` keeps only SQL; what the log does with it lives here and in `plaudit.store.sequencing`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from plaudit.store.backend import MARK_COLUMNS, MARK_TYPES, Tx
from plaudit.store.merkle import CompactRange
from plaudit.store.schema import EVENT_COLUMNS

#: The head row's columns as `HeadState` holds them.
HEAD_COLUMNS = "seq, hash, tree_size, frontier, checkpoint_size, checkpoint_ms"
HEAD_SQL = f"SELECT {HEAD_COLUMNS} FROM plaudit_head WHERE one = 1"
#: Ids per look-up statement (SQLite's oldest limit of bound parameters is 999).
ID_CHUNK = 500


class HeadState(NamedTuple):
    """The head row: the last position and hash, the Merkle tree's size and compact range, and
    the newest checkpoint's size and time; `pending`: intake waits to be sequenced."""

    seq: int
    hash: bytes
    tree_size: int
    frontier: bytes
    checkpoint_size: int
    checkpoint_ms: int
    pending: bool = False

    @classmethod
    def from_row(cls, row: Sequence[Any], pending: bool = False) -> HeadState:
        seq, h, tree_size, frontier, ck_size, ck_ms = row[:6]
        return cls(
            int(seq),
            bytes(h),
            int(tree_size),
            b"" if frontier is None else bytes(frontier),
            int(ck_size),
            int(ck_ms),
            pending,
        )

    def compact_range(self) -> CompactRange:
        f = self.frontier
        return CompactRange(self.tree_size, [f[i : i + 32] for i in range(0, len(f), 32)])


class LogOps:
    """The sequencer's statements in the SQL both dialects accept."""

    def head(self, tx: Tx) -> HeadState:
        """The head row as `tx` sees it (under the lease: current)."""
        row = tx.fetchone(HEAD_SQL)
        assert row is not None, "the log's head row is missing"
        return HeadState.from_row(row)

    def held(self, tx: Tx, ids: Iterable[str]) -> dict[str, tuple[bytes, int]]:
        """id -> (content digest, position) of the given ids the log holds."""
        wanted = list(dict.fromkeys(ids))
        out: dict[str, tuple[bytes, int]] = {}
        for i in range(0, len(wanted), ID_CHUNK):
            chunk = wanted[i : i + ID_CHUNK]
            marks = ",".join("?" * len(chunk))
            for id_, digest, seq in tx.fetchall(
                f"SELECT id, content_digest, seq FROM plaudit_events WHERE id IN ({marks})", chunk
            ):
                out[id_] = (bytes(digest), int(seq))
        return out

    def insert_events(
        self,
        tx: Tx,
        rows: list[tuple[Any, ...]],
        head: HeadState,
        marks: Mapping[str, tuple[int, int]] | None,
    ) -> None:
        """Insert sequenced rows, move the head row to `head` and record `marks`, the
        projections' states after these events (name -> (version, applied position))."""
        tx.copy_rows("plaudit_events", EVENT_COLUMNS, rows)
        self.move_head(tx, head)
        if marks:
            self.write_marks(tx, marks)

    def move_head(self, tx: Tx, head: HeadState) -> None:
        tx.execute(
            "UPDATE plaudit_head SET seq = ?, hash = ?, tree_size = ?, frontier = ? WHERE one = 1",
            (head.seq, tx.blob(head.hash), head.tree_size, tx.blob(head.frontier)),
        )

    def write_marks(self, tx: Tx, marks: Mapping[str, tuple[int, int]]) -> None:
        tx.upsert(
            "plaudit_projections",
            MARK_COLUMNS,
            MARK_TYPES,
            [(name, ver, applied) for name, (ver, applied) in marks.items()],
            key=("name",),
        )


_OPS: dict[str, LogOps] = {}


def for_dialect(dialect: str) -> LogOps:
    """The statements of a dialect (one instance each: they hold no state)."""
    ops = _OPS.get(dialect)
    if ops is None:
        if dialect == "postgres":
            from plaudit.store.postgres_ops import PostgresOps

            ops = PostgresOps()
        else:
            ops = LogOps()
        _OPS[dialect] = ops
    return ops
