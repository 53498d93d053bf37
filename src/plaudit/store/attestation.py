"""What `verify` checks beyond the hash chain: the Merkle tree, signed checkpoints, witnesses.

Incremental verify starts from the newest checkpoint an earlier verify confirmed (m events,
root r): the stored tree must still give root r at size m, and the chain hash at m must be
leaf m-1 of that tree (an inclusion proof), so the chain can be checked from m+1 alone. The
tree is then extended by the chain hashes after m, and every checkpoint and stored node in
that stretch must match what the events give. A witness's newest checkpoint must be a tree
this log still has: a log truncated, or rewritten with its own checkpoints deleted, fails
here even though its chain is self-consistent. `--full` does the same from the empty tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from plaudit.errors import PlauditError
from plaudit.store.merkle import CompactRange, leaf_hash, leaf_hashes, verify_inclusion
from plaudit.store.tree import TxSource, first_node_mismatch, frontier_at, inclusion_proof
from plaudit.store.view import LogView

if TYPE_CHECKING:
    from plaudit.store.backend import Tx
    from plaudit.store.checkpoints import Checkpoint
    from plaudit.store.ops import HeadState

#: Chain hashes read per query while the tree is recomputed.
_CHUNK = 20_000


class Start(NamedTuple):
    """Where an incremental verify may begin: a confirmed checkpoint and its tree."""

    size: int
    range: CompactRange
    prev: bytes


class TreeCheck(NamedTuple):
    first_bad: int | None
    reason: str | None
    checkpoints: int
    witnesses: list[dict[str, Any]]
    #: The newest checkpoint (size) this check confirmed, to start from next time.
    confirmed: int | None


def verified_start(tx: Tx, head_seq: int, public_key: bytes | None) -> Start | None:
    """The newest checkpoint an earlier verify confirmed that still checks out here, or None
    (then verify starts from the beginning)."""
    if public_key is None:
        return None
    from plaudit.store.checkpoints import parse_checkpoint

    row = tx.fetchone(
        "SELECT note FROM plaudit_checkpoints WHERE verified_ms IS NOT NULL AND size <= ? "
        "ORDER BY size DESC LIMIT 1",
        (head_seq,),
    )
    if row is None:
        return None
    try:
        ck = parse_checkpoint(row[0], where="plaudit_checkpoints")
        ck.verify(public_key)
    except PlauditError:
        return None  # a damaged starting point: check everything instead
    src = TxSource(tx)
    try:
        rng = frontier_at(ck.size, src)
    except PlauditError:
        return None
    if rng.root != ck.root:
        return None
    prev = LogView(tx).hash_at(ck.size)
    if prev is None:
        return None
    path = inclusion_proof(ck.size - 1, ck.size, src)
    if not verify_inclusion(ck.size - 1, ck.size, leaf_hash(prev), path, ck.root):
        return None
    return Start(ck.size, rng, prev)


def check_tree(
    tx: Tx,
    head: HeadState,
    start: Start | None,
    public_key: bytes | None,
    fingerprint: str | None,
    witnesses: Sequence[Path],
) -> TreeCheck:
    """Recompute the tree from `start` (or empty) to the head and compare it with what is
    stored and signed; then check every witness."""
    from plaudit.store.checkpointing import stored_checkpoints

    base = 0 if start is None else start.size
    rng = CompactRange.empty() if start is None else start.range
    src = TxSource(tx)
    view = LogView(tx)
    checkpoints = stored_checkpoints(tx, after=base, upto=head.seq)
    bounds = sorted({c.size for c in checkpoints} | {head.seq})
    roots: dict[int, bytes] = {}
    done = base
    for edge in bounds:
        while done < edge:
            hi = min(done + _CHUNK, edge)
            hashes = [h for _, h in view.hashes(done + 1, hi)]
            ext = rng.extend(leaf_hashes(hashes))
            bad = first_node_mismatch(ext.nodes, src)
            if bad is not None:
                first, last = bad.index << bad.level, (bad.index + 1) << bad.level
                return TreeCheck(
                    first + 1,
                    f"the Merkle tree's stored node (level {bad.level}, index {bad.index}) does "
                    f"not match the events at positions {first + 1}..{last}",
                    0,
                    [],
                    None,
                )
            rng, done = ext.range, hi
        roots[edge] = rng.root
    if head.tree_size == head.seq and head.compact_range() != rng:
        return TreeCheck(head.seq, "the head's stored tree does not match the events", 0, [], None)
    confirmed: int | None = None
    for ck in checkpoints:
        problem = None
        if public_key is not None:
            try:
                ck.verify(public_key)
            except PlauditError as exc:
                problem = str(exc)
        if problem is None and roots.get(ck.size) != ck.root:
            problem = f"the checkpoint of size {ck.size} does not match the log's tree at that size"
        if problem is not None:
            return TreeCheck(max(ck.size, 1), problem, len(checkpoints), [], None)
        confirmed = ck.size
    results: list[dict[str, Any]] = []
    for d in witnesses:
        outcome = _check_witness(d, head.seq, roots, src, public_key, fingerprint)
        results.append(outcome)
        if outcome["problem"] is not None:
            return TreeCheck(
                outcome["first_bad"], outcome["problem"], len(checkpoints), results, None
            )
    return TreeCheck(None, None, len(checkpoints), results, confirmed)


def _check_witness(
    directory: Path,
    size: int,
    roots: dict[int, bytes],
    src: TxSource,
    public_key: bytes | None,
    fingerprint: str | None,
) -> dict[str, Any]:
    from plaudit.store.tree import root_at
    from plaudit.store.witness import newest_checkpoint

    out: dict[str, Any] = {"directory": str(directory), "size": None, "problem": None}
    if fingerprint is None or public_key is None:
        out["problem"] = (
            "no signing key is known, so witness checkpoints cannot be checked "
            "(set $PLAUDIT_SIGNING_KEY, or keep the key beside the SQLite store)"
        )
        out["first_bad"] = 1
        return out
    try:
        read = newest_checkpoint(directory, fingerprint)
    except PlauditError as exc:
        out["problem"], out["first_bad"] = f"witness {directory}: {exc}", 1
        return out
    out["warnings"] = read.warnings
    ck: Checkpoint | None = read.checkpoint
    if ck is None:
        if read.other_logs:
            out["problem"] = (
                f"witness {directory} holds checkpoints of another log "
                f"({', '.join(read.other_logs)}) and none of this one: was the key replaced?"
            )
            out["first_bad"] = 1
        return out
    out["size"] = ck.size
    try:
        ck.verify(public_key)
    except PlauditError as exc:
        out["problem"], out["first_bad"] = f"witness {directory}: {exc}", max(ck.size, 1)
        return out
    if ck.size > size:
        out["problem"] = (
            f"witness {directory} holds a checkpoint of {ck.size} events but the log has "
            f"{size}: events were removed"
        )
        out["first_bad"] = size + 1
        return out
    root = roots.get(ck.size)
    if root is None:
        try:
            root = root_at(ck.size, src)
        except PlauditError:
            root = None
    if root != ck.root:
        out["problem"] = (
            f"the log is not consistent with witness {directory}: its tree at {ck.size} events "
            "differs from the signed checkpoint there (history was rewritten)"
        )
        out["first_bad"] = max(ck.size, 1)
    return out
