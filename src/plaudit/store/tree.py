"""Proofs over the log's Merkle tree, from whatever holds its leaves and upper nodes.

The store keeps the tree's perfect subtrees at levels >= `STORE_LEVEL` (about N/128 rows) and
nothing below: those are recomputed from the chain hashes of one tile of 2**STORE_LEVEL events,
which the log already holds. Every function here reads through a `NodeSource`, so the same code
serves SQLite, PostgreSQL (`TxSource` over a `Tx`) and memory (`MemorySource`, for tests and
for checking a tree built elsewhere).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from plaudit.errors import IntegrityError
from plaudit.store.merkle import (
    STORE_LEVEL,
    CompactRange,
    Node,
    leaf_hashes,
    node_hash,
    root_of,
    split_point,
)

if TYPE_CHECKING:
    from plaudit.store.backend import Tx

#: The table of stored nodes; `{bigint}` and `{blob}` are filled per dialect by `Tx.ddl`.
#: Rows are immutable once written: a node covers leaves that can no longer change.
TREE_NODES_DDL = """CREATE TABLE IF NOT EXISTS plaudit_tree_nodes (
    level INTEGER NOT NULL,
    idx {bigint} NOT NULL,
    hash {blob} NOT NULL,
    PRIMARY KEY (level, idx)
)"""
#: Inserting the nodes an extension completed; a repeat of the same batch (a retried
#: transaction) is a no-op rather than an error.
INSERT_NODES_SQL = (
    "INSERT INTO plaudit_tree_nodes (level, idx, hash) VALUES (?, ?, ?) "
    "ON CONFLICT (level, idx) DO NOTHING"
)
_SELECT_NODE_SQL = "SELECT hash FROM plaudit_tree_nodes WHERE level = ? AND idx = ?"
#: Chain hashes of leaves lo..hi-1 (positions lo+1..hi).
_SELECT_LEAVES_SQL = "SELECT hash FROM plaudit_events WHERE seq > ? AND seq <= ? ORDER BY seq"


class NodeSource(Protocol):
    """Where proofs read the tree from."""

    def leaves(self, lo: int, hi: int) -> list[bytes]:
        """The chain hashes (leaf entries) of leaves lo..hi-1; fewer if the log is shorter."""
        ...

    def stored_node(self, level: int, index: int) -> bytes | None:
        """A stored perfect-subtree hash (level >= STORE_LEVEL), or None when not stored."""
        ...


class MemorySource:
    """A tree held in memory: the entries, and the nodes the extensions reported."""

    def __init__(self, entries: Iterable[bytes] = (), *, store_level: int = STORE_LEVEL) -> None:
        self.entries: list[bytes] = []
        self.nodes: dict[tuple[int, int], bytes] = {}
        self.range = CompactRange.empty()
        self.store_level = store_level
        self.append(list(entries))

    def append(self, entries: Sequence[bytes]) -> bytes:
        """Add leaf entries; returns the new root."""
        ext = self.range.extend(leaf_hashes(entries), store_level=self.store_level)
        self.entries.extend(entries)
        self.nodes.update(((n.level, n.index), n.hash) for n in ext.nodes)
        self.range = ext.range
        return ext.root

    def leaves(self, lo: int, hi: int) -> list[bytes]:
        return self.entries[lo:hi]

    def stored_node(self, level: int, index: int) -> bytes | None:
        return self.nodes.get((level, index))


class TxSource:
    """A tree read from the log's tables in one transaction (either backend)."""

    def __init__(self, tx: Tx) -> None:
        self.tx = tx

    def leaves(self, lo: int, hi: int) -> list[bytes]:
        rows = self.tx.fetchall(_SELECT_LEAVES_SQL, (lo, hi))
        return [bytes(r[0]) for r in rows]

    def stored_node(self, level: int, index: int) -> bytes | None:
        h = self.tx.scalar(_SELECT_NODE_SQL, (level, index))
        return None if h is None else bytes(h)


def store_nodes(tx: Tx, nodes: Sequence[Node]) -> None:
    """Write the nodes an `extend` completed, in the transaction that sequences their leaves."""
    if nodes:
        blob = tx.blob
        tx.executemany(INSERT_NODES_SQL, [(n.level, n.index, blob(n.hash)) for n in nodes])


class _Reader:
    """Subtree hashes of one tree size, reading each tile of leaves at most once."""

    def __init__(self, source: NodeSource, size: int, store_level: int) -> None:
        self.source = source
        self.size = size
        self.level = store_level
        self.tiles: dict[int, list[bytes]] = {}

    def _tile(self, t: int) -> list[bytes]:
        hashes = self.tiles.get(t)
        if hashes is None:
            width = 1 << self.level
            lo = t * width
            hi = min(lo + width, self.size)
            entries = self.source.leaves(lo, hi)
            if len(entries) != hi - lo:
                raise IntegrityError(
                    f"the tree of {self.size} leaves needs leaves {lo}..{hi - 1}, "
                    f"but the log holds only {len(entries)} of them"
                )
            hashes = self.tiles[t] = leaf_hashes(entries)
        return hashes

    def perfect(self, level: int, index: int) -> bytes:
        """The root of the perfect subtree (level, index)."""
        if level >= self.level:
            h = self.source.stored_node(level, index)
            if h is not None:
                return h
            # Not stored (a source that keeps no nodes, or one not written yet): build it.
            return node_hash(
                self.perfect(level - 1, 2 * index), self.perfect(level - 1, 2 * index + 1)
            )
        width = 1 << level
        lo = index * width
        t = lo >> self.level
        off = lo - (t << self.level)
        return root_of(self._tile(t)[off : off + width])

    def subtree(self, lo: int, hi: int) -> bytes:
        """MTH of leaves lo..hi-1, where lo is aligned to a power of two >= hi - lo."""
        n = hi - lo
        if n & (n - 1) == 0:
            level = n.bit_length() - 1
            return self.perfect(level, lo >> level)
        k = split_point(n)
        return node_hash(self.subtree(lo, lo + k), self.subtree(lo + k, hi))


def _check_size(size: int, what: str) -> None:
    if type(size) is not int or size < 0:
        raise ValueError(f"{what} must be a non-negative integer, got {size!r}")


def root_at(size: int, source: NodeSource, *, store_level: int = STORE_LEVEL) -> bytes:
    """The tree root at `size` leaves, read from stored nodes and at most one tile."""
    _check_size(size, "size")
    return frontier_at(size, source, store_level=store_level).root


def frontier_at(size: int, source: NodeSource, *, store_level: int = STORE_LEVEL) -> CompactRange:
    """The compact range of the first `size` leaves: what a sequencer resumes from.

    Nothing but stored nodes and the last partial tile is read, so a restart costs
    milliseconds however long the log is.
    """
    _check_size(size, "size")
    reader = _Reader(source, size, store_level)
    hashes = []
    lo = 0
    for level in range(size.bit_length() - 1, -1, -1):
        if size >> level & 1:
            hashes.append(reader.perfect(level, lo >> level))
            lo += 1 << level
    return CompactRange(size, hashes)


def inclusion_proof(
    index: int, size: int, source: NodeSource, *, store_level: int = STORE_LEVEL
) -> list[bytes]:
    """The audit path of leaf `index` in the tree of `size` leaves (RFC 9162 2.1.3.1)."""
    _check_size(size, "size")
    if type(index) is not int or not 0 <= index < size:
        raise ValueError(f"leaf index {index!r} is outside a tree of {size} leaves")
    reader = _Reader(source, size, store_level)
    path: list[bytes] = []
    lo, hi = 0, size
    while hi - lo > 1:  # walk down, collecting siblings top first; the path lists them bottom up
        k = split_point(hi - lo)
        if index < lo + k:
            path.append(reader.subtree(lo + k, hi))
            hi = lo + k
        else:
            path.append(reader.subtree(lo, lo + k))
            lo += k
    path.reverse()
    return path


def consistency_proof(
    old_size: int, new_size: int, source: NodeSource, *, store_level: int = STORE_LEVEL
) -> list[bytes]:
    """The proof that the tree of new_size extends that of old_size (RFC 9162 2.1.4.1)."""
    _check_size(old_size, "old size")
    _check_size(new_size, "new size")
    if old_size > new_size:
        raise ValueError(f"old size {old_size} is larger than new size {new_size}")
    if old_size in (0, new_size):
        return []
    reader = _Reader(source, new_size, store_level)
    proof: list[bytes] = []
    lo, hi, m, whole = 0, new_size, old_size, True
    while m != hi - lo:  # SUBPROOF(m, D[lo:hi], whole), iteratively
        k = split_point(hi - lo)
        if m <= k:
            proof.append(reader.subtree(lo + k, hi))
            hi = lo + k
        else:
            proof.append(reader.subtree(lo, lo + k))
            lo += k
            m -= k
            whole = False
    if not whole:
        proof.append(reader.subtree(lo, hi))
    proof.reverse()
    return proof


def first_node_mismatch(nodes: Iterable[Node], source: NodeSource) -> Node | None:
    """The first recomputed node whose stored copy differs or is missing (for verify)."""
    for n in nodes:
        if source.stored_node(n.level, n.index) != n.hash:
            return n
    return None


__all__ = [
    "INSERT_NODES_SQL",
    "TREE_NODES_DDL",
    "MemorySource",
    "NodeSource",
    "TxSource",
    "consistency_proof",
    "first_node_mismatch",
    "frontier_at",
    "inclusion_proof",
    "root_at",
    "store_nodes",
]
