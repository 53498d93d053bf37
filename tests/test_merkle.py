"""The Merkle tree against an independent reference, and its proofs as properties."""

from __future__ import annotations

import hashlib
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plaudit.store.merkle import (
    EMPTY_ROOT,
    CompactRange,
    leaf_hash,
    leaf_hashes,
    root_of,
    verify_consistency,
    verify_inclusion,
)
from plaudit.store.tree import (
    MemorySource,
    consistency_proof,
    first_node_mismatch,
    frontier_at,
    inclusion_proof,
    root_at,
)


def ref_mth(entries: list[bytes]) -> bytes:
    """RFC 6962 section 2.1, written straight from the text: the reference the tree must match."""
    n = len(entries)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return hashlib.sha256(b"\x00" + entries[0]).digest()
    k = 1
    while k * 2 < n:
        k *= 2
    return hashlib.sha256(b"\x01" + ref_mth(entries[:k]) + ref_mth(entries[k:])).digest()


def entries_of(n: int) -> list[bytes]:
    return [hashlib.sha256(f"entry {i}".encode()).digest() for i in range(n)]


@pytest.mark.parametrize("n", [*range(1, 10), 16, 1024])
def test_root_matches_the_reference(n):
    e = entries_of(n)
    want = ref_mth(e)
    assert root_of(leaf_hashes(e)) == want
    assert MemorySource(e, store_level=2).range.root == want
    assert root_at(n, MemorySource(e, store_level=2), store_level=2) == want


def test_known_small_trees_by_hand():
    a, b, c = entries_of(3)
    la, lb, lc = (hashlib.sha256(b"\x00" + x).digest() for x in (a, b, c))
    ab = hashlib.sha256(b"\x01" + la + lb).digest()
    assert root_of([la]) == la
    assert root_of([la, lb]) == ab
    assert root_of([la, lb, lc]) == hashlib.sha256(b"\x01" + ab + lc).digest()
    assert root_of([]) == EMPTY_ROOT == hashlib.sha256(b"").digest()


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 600), cuts=st.lists(st.integers(0, 600), max_size=12), level=st.integers(1, 9)
)
def test_extension_in_any_batches_equals_the_reference(n, cuts, level):
    e = entries_of(n)
    bounds = sorted({0, n, *(c for c in cuts if c <= n)})
    rng = CompactRange.empty()
    stored: dict[tuple[int, int], bytes] = {}
    for lo, hi in itertools.pairwise(bounds):
        ext = rng.extend(leaf_hashes(e[lo:hi]), store_level=level)
        assert ext.range.size == hi
        assert ext.root == ref_mth(e[:hi])
        stored.update(((nd.level, nd.index), nd.hash) for nd in ext.nodes)
        rng = ext.range
    assert rng.root == ref_mth(e)
    # exactly the perfect subtrees at or above the store level were reported, each right
    expect = {(lv, i) for lv in range(level, n.bit_length()) for i in range(n >> lv)}
    assert set(stored) == expect
    for (lv, i), h in stored.items():
        assert h == ref_mth(e[i << lv : (i + 1) << lv])
    # the frontier rebuilt from stored nodes plus one tile is the one extension kept
    assert frontier_at(n, _Source(e, stored), store_level=level) == rng


class _Source:
    def __init__(self, entries: list[bytes], nodes: dict[tuple[int, int], bytes]) -> None:
        self.entries, self.nodes = entries, nodes

    def leaves(self, lo: int, hi: int) -> list[bytes]:
        return self.entries[lo:hi]

    def stored_node(self, level: int, index: int) -> bytes | None:
        return self.nodes.get((level, index))


@st.composite
def tree_and_index(draw):
    n = draw(st.integers(1, 700))
    return n, draw(st.integers(0, n - 1)), draw(st.integers(1, 8))


@settings(max_examples=150, deadline=None)
@given(tree_and_index())
def test_every_inclusion_proof_checks(args):
    n, i, level = args
    e = entries_of(n)
    src = MemorySource(e, store_level=level)
    root = ref_mth(e)
    path = inclusion_proof(i, n, src, store_level=level)
    assert verify_inclusion(i, n, leaf_hash(e[i]), path, root)
    # a different leaf, index or root does not check
    assert not verify_inclusion(i, n, leaf_hash(b"not" + e[i]), path, root)
    assert not verify_inclusion(i, n, leaf_hash(e[i]), path, hashlib.sha256(root).digest())
    if n > 1:
        assert not verify_inclusion((i + 1) % n, n, leaf_hash(e[i]), path, root)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 600), st.integers(0, 600), st.integers(1, 8))
def test_consistency_between_any_two_sizes_checks(a, b, level):
    old, new = min(a, b), max(a, b)
    e = entries_of(new)
    src = MemorySource(e, store_level=level)
    proof = consistency_proof(old, new, src, store_level=level)
    old_root, new_root = ref_mth(e[:old]), ref_mth(e)
    assert verify_consistency(old, new, old_root, new_root, proof)
    if 0 < old < new:
        # the proof is for these trees only: another old tree of that size does not pass
        other = ref_mth([hashlib.sha256(x).digest() for x in e[:old]])
        assert not verify_consistency(old, new, other, new_root, proof)
        assert not verify_consistency(old, new, old_root, hashlib.sha256(new_root).digest(), proof)


def _flip_one(proof: list[bytes], data) -> list[bytes]:
    """The proof with one byte of one hash changed (XOR with a non-zero value)."""
    j = data.draw(st.integers(0, len(proof) - 1))
    k = data.draw(st.integers(0, 31))
    x = data.draw(st.integers(1, 255))
    bad = [*proof]
    bad[j] = bad[j][:k] + bytes([bad[j][k] ^ x]) + bad[j][k + 1 :]
    return bad


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_flipping_any_byte_of_a_proof_fails(data):
    n = data.draw(st.integers(2, 300))
    e = entries_of(n)
    src = MemorySource(e, store_level=3)
    root = ref_mth(e)
    if data.draw(st.booleans()):
        i = data.draw(st.integers(0, n - 1))
        path = inclusion_proof(i, n, src, store_level=3)
        assert not verify_inclusion(i, n, leaf_hash(e[i]), _flip_one(path, data), root)
    else:
        old = data.draw(st.integers(1, n - 1))
        proof = consistency_proof(old, n, src, store_level=3)
        bad = _flip_one(proof, data)
        assert not verify_consistency(old, n, ref_mth(e[:old]), root, bad)


def test_proofs_read_stored_nodes_and_at_most_two_tiles():
    e = entries_of(5000)

    class Counting(MemorySource):
        reads: list[tuple[int, int]]

        def leaves(self, lo, hi):
            self.reads.append((lo, hi))
            return super().leaves(lo, hi)

    src = Counting(e)
    src.reads = []
    path = inclusion_proof(1234, 4999, src)
    assert verify_inclusion(1234, 4999, leaf_hash(e[1234]), path, ref_mth(e[:4999]))
    assert len(src.reads) <= 2 and all(hi - lo <= 256 for lo, hi in src.reads)


def test_a_tampered_stored_node_is_found_and_changes_proofs():
    e = entries_of(1000)
    src = MemorySource(e, store_level=4)
    ext = CompactRange.empty().extend(leaf_hashes(e), store_level=4)
    assert first_node_mismatch(ext.nodes, src) is None
    src.nodes[(6, 1)] = bytes(32)
    bad = first_node_mismatch(ext.nodes, src)
    assert bad is not None and (bad.level, bad.index) == (6, 1)
    path = inclusion_proof(0, 1000, src, store_level=4)
    assert not verify_inclusion(0, 1000, leaf_hash(e[0]), path, ref_mth(e))


def test_proof_arguments_are_checked():
    src = MemorySource(entries_of(4))
    with pytest.raises(ValueError, match="outside"):
        inclusion_proof(4, 4, src)
    with pytest.raises(ValueError, match="larger"):
        consistency_proof(5, 4, src)
    assert not verify_inclusion(-1, 4, b"x" * 32, [], b"y" * 32)
    assert not verify_consistency(3, 2, b"", b"", [])
