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
    from plaudit.store.rotation import KeyTimeline

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
    #: The newest checkpoint this check confirmed, to start from next time.
    confirmed: Checkpoint | None


def verified_start(
    tx: Tx, head_seq: int, keys: KeyTimeline | None, confirmed: Checkpoint
) -> Start | None:
    """Where a verify may begin: the checkpoint this user's verifier confirmed earlier (from
    its state file, outside the database), if it still checks out here; else None (then verify
    starts from the beginning). The database is never asked which checkpoint was confirmed."""
    if keys is None or confirmed.size > head_seq or confirmed.size == 0:
        return None
    try:
        confirmed.verify(keys.key_at(confirmed.size))
    except PlauditError:
        return None  # a damaged starting point: check everything instead
    src = TxSource(tx)
    try:
        rng = frontier_at(confirmed.size, src)
    except PlauditError:
        return None
    if rng.root != confirmed.root:
        return None
    prev = LogView(tx).hash_at(confirmed.size)
    if prev is None:
        return None
    last = confirmed.size - 1
    path = inclusion_proof(last, confirmed.size, src)
    if not verify_inclusion(last, confirmed.size, leaf_hash(prev), path, confirmed.root):
        return None
    return Start(confirmed.size, rng, prev)


def check_head(tx: Tx, head: HeadState) -> tuple[int, str] | None:
    """The head row's fields besides the position and hash (which the chain checks): the tree
    it says it covers, and the newest checkpoint it names. (position, reason) when one is
    wrong: an edited `tree_size` would otherwise make the next appends store wrong nodes."""
    fresh = head.tree_size == 0 and not head.frontier  # written before the tree, not since
    if head.tree_size != head.seq and not fresh:
        return max(min(head.tree_size, head.seq), 1), (
            f"the head's tree_size says {head.tree_size} events but the log has {head.seq}: "
            "the head row was edited"
        )
    row = tx.fetchone("SELECT size, time_ms FROM plaudit_checkpoints ORDER BY size DESC LIMIT 1")
    size, time_ms = (0, None) if row is None else (int(row[0]), int(row[1]))
    if head.checkpoint_size != size or (time_ms is not None and head.checkpoint_ms != time_ms):
        return max(size, head.checkpoint_size, 1), (
            f"the head names its newest checkpoint as size {head.checkpoint_size} at "
            f"{head.checkpoint_ms} ms, but the newest stored is size {size}"
            + (f" at {time_ms} ms" if time_ms is not None else "")
            + ": the head row or the checkpoints were edited"
        )
    return None


def check_tree(
    tx: Tx,
    head: HeadState,
    start: Start | None,
    keys: KeyTimeline | None,
    witnesses: Sequence[Path],
    pinned: Checkpoint | None = None,
) -> TreeCheck:
    """Recompute the tree from `start` (or empty) to the head and compare it with what is
    stored and signed (every field of every checkpoint row after `start`), and with `pinned`
    (the checkpoint this verifier confirmed earlier, when verify could not start from it);
    then check every witness."""
    # From the start on; checking everything, every row, whatever its size column says.
    after = -(2**63) if start is None else start.size
    rows = tx.fetchall(
        "SELECT size, root, time_ms, note FROM plaudit_checkpoints WHERE size > ? ORDER BY size",
        (after,),
    )
    checkpoints, bad = _checkpoint_rows(rows, head.seq)
    if bad is not None:
        return TreeCheck(bad[0], bad[1], len(rows), [], None)
    if pinned is not None and pinned.size > head.seq:
        return TreeCheck(
            head.seq + 1,
            f"the log has {head.seq} events but this verifier confirmed a checkpoint of "
            f"{pinned.size} earlier: events were removed",
            0,
            [],
            None,
        )
    pins = {pinned.size} if pinned is not None else set()
    bounds = sorted({c.size for c in checkpoints} | {head.seq} | pins)
    roots, rng, bad = _roots(tx, start, bounds)
    if bad is not None:
        return TreeCheck(bad[0], bad[1], 0, [], None)
    if pinned is not None and roots.get(pinned.size) != pinned.root:
        return TreeCheck(
            max(pinned.size, 1),
            f"the log's tree at {pinned.size} events differs from the checkpoint this verifier "
            "confirmed earlier (its state, outside the database): history was rewritten",
            0,
            [],
            None,
        )
    if head.tree_size == head.seq and head.compact_range() != rng:
        return TreeCheck(head.seq, "the head's stored tree does not match the events", 0, [], None)
    confirmed: Checkpoint | None = None
    for ck in checkpoints:
        problem = None
        if keys is not None:
            try:
                ck.verify(keys.key_at(ck.size))
            except PlauditError as exc:
                problem = str(exc)
        if problem is None and roots.get(ck.size) != ck.root:
            problem = f"the checkpoint of size {ck.size} does not match the log's tree at that size"
        if problem is not None:
            return TreeCheck(max(ck.size, 1), problem, len(checkpoints), [], None)
        confirmed = ck
    src = TxSource(tx)
    results: list[dict[str, Any]] = []
    for d in witnesses:
        outcome = _check_witness(d, head.seq, roots, src, keys)
        results.append(outcome)
        if outcome["problem"] is not None:
            return TreeCheck(
                outcome["first_bad"], outcome["problem"], len(checkpoints), results, None
            )
    return TreeCheck(None, None, len(checkpoints), results, confirmed)


def _checkpoint_rows(
    rows: list[tuple[Any, ...]], head_seq: int
) -> tuple[list[Checkpoint], tuple[int, str] | None]:
    """Every checkpoint row read whole: its note must parse, and its size, root and time
    columns must be the note's. A malformed row is reported, never skipped."""
    from plaudit.store.checkpoints import parse_checkpoint

    out: list[Checkpoint] = []
    for size, root, time_ms, note in rows:
        size = int(size)
        where = max(min(size, head_seq), 1)
        try:
            ck = parse_checkpoint(note, where=f"plaudit_checkpoints row of size {size}")
        except PlauditError as exc:
            return out, (where, f"a checkpoint row is malformed: {exc}")
        if (ck.size, ck.root, ck.time_ms) != (size, bytes(root), int(time_ms)):
            return out, (
                where,
                f"the checkpoint row of size {size} does not match its own signed note "
                "(its size, root or time column was edited)",
            )
        if size > head_seq:
            return out, (
                head_seq + 1,
                f"a checkpoint covers {size} events but the log has {head_seq}: events were "
                "removed",
            )
        out.append(ck)
    return out, None


def _roots(
    tx: Tx, start: Start | None, bounds: list[int]
) -> tuple[dict[int, bytes], CompactRange, tuple[int, str] | None]:
    """The tree's root at each size in `bounds`, from the chain hashes after `start`, and the
    compact range at the last; or the first stored node that disagrees."""
    rng = CompactRange.empty() if start is None else start.range
    done = 0 if start is None else start.size
    src = TxSource(tx)
    view = LogView(tx)
    roots: dict[int, bytes] = {}
    for edge in bounds:
        while done < edge:
            hi = min(done + _CHUNK, edge)
            ext = rng.extend(leaf_hashes([h for _, h in view.hashes(done + 1, hi)]))
            bad = first_node_mismatch(ext.nodes, src)
            if bad is not None:
                first, last = bad.index << bad.level, (bad.index + 1) << bad.level
                return (
                    roots,
                    rng,
                    (
                        first + 1,
                        f"the Merkle tree's stored node (level {bad.level}, index "
                        f"{bad.index}) does not match the events at positions "
                        f"{first + 1}..{last}",
                    ),
                )
            rng, done = ext.range, hi
        roots[edge] = rng.root
    return roots, rng, None


def _check_witness(
    directory: Path,
    size: int,
    roots: dict[int, bytes],
    src: TxSource,
    keys: KeyTimeline | None,
) -> dict[str, Any]:
    """One witness: its newest checkpoint of this log must be one the log still has. A
    directory that is missing (an unmounted share) or a log whose key is unknown cannot be
    checked: a warning naming it, never a failure, which only tampering causes."""
    from plaudit.errors import ConfigError
    from plaudit.store.tree import root_at
    from plaudit.store.witness import newest_checkpoint

    out: dict[str, Any] = {"directory": str(directory), "size": None, "problem": None}
    if keys is None:
        out["warnings"] = [f"witness {directory} not checked: no signing key is known"]
        return out
    try:
        read = None
        for log in keys.fingerprints:  # the current key's first, then those it replaced
            read = newest_checkpoint(directory, log)
            if read.checkpoint is not None:
                break
        assert read is not None
    except ConfigError as exc:
        out["warnings"] = [f"witness {directory} not checked: {exc} (not mounted?)"]
        return out
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
        ck.verify(keys.key_at(ck.size))
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
