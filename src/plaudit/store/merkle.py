"""The log's Merkle tree, hashed as in RFC 6962 / RFC 9162, with nothing but the standard library.

Leaves are the log's events in position order; a leaf's entry is the event's 32-byte chain hash,
which binds its body and everything before it. Distinct prefixes for leaves (0x00) and interior
nodes (0x01) keep a leaf from ever passing for a node (the second-preimage attack on plain
Merkle trees).

A `CompactRange` is what an appender keeps between batches: the right frontier of perfect
subtrees, one hash per set bit of the tree size. Extending it costs about two SHA-256 calls
per leaf, and it reports the perfect subtrees it completes so the store can keep the upper
levels of the tree (see `plaudit.store.tree`).

The two verifiers follow RFC 9162 sections 2.1.3.2 and 2.1.4.2 step by step, so that anyone
holding a proof can check it against that text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import NamedTuple

LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"
#: MTH({}) = SHA-256 of the empty string (RFC 6962 section 2.1).
EMPTY_ROOT = hashlib.sha256(b"").digest()
#: Perfect subtrees at this level and above are stored; below it they are recomputed from the
#: leaf entries of one tile of 2**STORE_LEVEL events. At 8 the store keeps one row per 128
#: leaves (N/256 + N/512 + ... ~= N/128), and a proof reads at most two tiles of 256 chain hashes
#: (8 KiB each) and recomputes at most ~1,000 hashes: well under a millisecond. Lower levels
#: would multiply the rows (level 4: N/8) for little gain; higher ones make every proof hash
#: and read more (level 12: 4,096 hashes per tile).
STORE_LEVEL = 8

_sha256 = hashlib.sha256


def leaf_hash(entry: bytes) -> bytes:
    """SHA-256(0x00 || entry)."""
    return _sha256(LEAF_PREFIX + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right)."""
    return _sha256(NODE_PREFIX + left + right).digest()


def leaf_hashes(entries: Sequence[bytes]) -> list[bytes]:
    sha = _sha256
    return [sha(b"\x00" + e).digest() for e in entries]


def split_point(n: int) -> int:
    """The largest power of two smaller than n (n > 1): where RFC 6962 splits a tree of n."""
    return 1 << ((n - 1).bit_length() - 1)


def root_of(hashes: Sequence[bytes]) -> bytes:
    """MTH of a run of leaf hashes (not entries), for any count."""
    if not hashes:
        return EMPTY_ROOT
    return CompactRange.empty().extend(hashes, store_level=64).root


class Node(NamedTuple):
    """A perfect subtree: level 0 is a leaf; covers leaves index*2^level .. (index+1)*2^level-1."""

    level: int
    index: int
    hash: bytes


class Extension(NamedTuple):
    range: CompactRange
    root: bytes
    #: The perfect subtrees this extension completed at levels >= the store level, lowest first.
    nodes: list[Node]


class CompactRange:
    """The right frontier of the tree of `size` leaves: its perfect-subtree roots, largest first.

    Immutable: `extend` returns a new range, so a failed transaction can keep the old one.
    """

    __slots__ = ("hashes", "size")

    def __init__(self, size: int, hashes: Sequence[bytes]) -> None:
        if size < 0 or len(hashes) != size.bit_count():
            raise ValueError(f"a compact range of {size} leaves holds {size.bit_count()} hashes")
        self.size = size
        self.hashes: tuple[bytes, ...] = tuple(hashes)

    @classmethod
    def empty(cls) -> CompactRange:
        return cls(0, ())

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, CompactRange)
            and self.size == other.size
            and self.hashes == other.hashes
        )

    def __hash__(self) -> int:
        return hash((self.size, self.hashes))

    def __repr__(self) -> str:
        return f"CompactRange(size={self.size}, hashes={len(self.hashes)})"

    def levels(self) -> list[int]:
        """The level of each hash in `hashes` (the set bits of size, highest first)."""
        return [b for b in range(self.size.bit_length() - 1, -1, -1) if self.size >> b & 1]

    @property
    def root(self) -> bytes:
        """MTH of the whole tree: the frontier folded from the right (RFC 6962's split rule)."""
        if not self.hashes:
            return EMPTY_ROOT
        it = reversed(self.hashes)
        r = next(it)
        sha = _sha256
        for h in it:
            r = sha(b"\x01" + h + r).digest()
        return r

    def extend(self, hashes: Sequence[bytes], *, store_level: int = STORE_LEVEL) -> Extension:
        """Append leaf hashes (see `leaf_hashes`); one pass per level, pairing whole lists.

        Working level by level rather than leaf by leaf keeps the Python overhead to a few
        list operations per level, so the cost is close to that of the hashing itself.
        """
        sha = _sha256
        by_level = dict(zip(self.levels(), self.hashes, strict=True))
        row = list(hashes)
        start = self.size  # index, at this level, of row[0]
        level = 0
        nodes: list[Node] = []
        while row:
            if start & 1:  # row[0] is a right child: its left sibling waits on the frontier
                row = [by_level.pop(level), *row]
                start -= 1
            if len(row) & 1:  # the last node has no sibling yet: it joins the frontier
                by_level[level] = row.pop()
            row = [sha(b"\x01" + a + b).digest() for a, b in zip(row[::2], row[1::2], strict=True)]
            start >>= 1
            level += 1
            if level >= store_level and row:
                nodes.extend(Node(level, start + i, h) for i, h in enumerate(row))
        size = self.size + len(hashes)
        new = CompactRange(size, [by_level[lv] for lv in sorted(by_level, reverse=True)])
        return Extension(new, new.root, nodes)


def inclusion_path_length(leaf_index: int, tree_size: int) -> int:
    """How many hashes the audit path of `leaf_index` in a tree of `tree_size` holds."""
    n, lo, hi = 0, 0, tree_size
    while hi - lo > 1:
        k = split_point(hi - lo)
        if leaf_index < lo + k:
            hi = lo + k
        else:
            lo += k
        n += 1
    return n


def _lsb(x: int) -> int:
    return x & 1


def verify_inclusion(
    leaf_index: int, tree_size: int, leaf: bytes, path: Sequence[bytes], root: bytes
) -> bool:
    """RFC 9162 section 2.1.3.2: does `path` prove the leaf hash `leaf` at `leaf_index`?"""
    if not 0 <= leaf_index < tree_size:
        return False
    fn, sn = leaf_index, tree_size - 1
    r = leaf
    for p in path:
        if sn == 0:
            return False
        if _lsb(fn) or fn == sn:
            r = node_hash(p, r)
            if not _lsb(fn):
                while not _lsb(fn) and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """RFC 9162 section 2.1.4.2: does `proof` show the tree of new_size extends old_size?

    The RFC defines proofs for 0 < old_size < new_size. At the edges: equal sizes need an empty
    proof and equal roots; an empty old tree (its root `EMPTY_ROOT`) is extended by any tree,
    with an empty proof.
    """
    if not 0 <= old_size <= new_size:
        return False
    if old_size == new_size:
        return not proof and old_root == new_root
    if old_size == 0:
        return not proof and old_root == EMPTY_ROOT
    if not proof:
        return False
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # an exact power of two: the old root is a node here
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while _lsb(fn):
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if _lsb(fn) or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not _lsb(fn):
                while not _lsb(fn) and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return fr == old_root and sr == new_root and sn == 0


__all__ = [
    "EMPTY_ROOT",
    "LEAF_PREFIX",
    "NODE_PREFIX",
    "STORE_LEVEL",
    "CompactRange",
    "Extension",
    "Node",
    "inclusion_path_length",
    "leaf_hash",
    "leaf_hashes",
    "node_hash",
    "root_of",
    "split_point",
    "verify_consistency",
    "verify_inclusion",
]
