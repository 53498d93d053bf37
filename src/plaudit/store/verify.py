"""`verify`: the hash chain, the Merkle tree, signed checkpoints and witnesses, checked from
what is stored.

The chain check rebuilds each event's body from its columns in SQL, so it sees exactly what is
on disk. A long full check runs in position ranges in parallel: each range chains from the
stored hash before it, which the previous range checks, so together they prove exactly what one
pass proves (a second process for SQLite, whose stdlib-only worker `store/chain.py` starts in
milliseconds; a second connection for PostgreSQL). A worker that fails is replaced by checking
its range in this process: a worker can only make verify faster, never weaker.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import msgspec

from plaudit.errors import PlauditError, ValidationError
from plaudit.ids import now_ms
from plaudit.store import chain
from plaudit.store.chain import GENESIS, RangeResult, check_rows, range_sql
from plaudit.store.view import LogView

if TYPE_CHECKING:
    import subprocess
    from pathlib import Path

    from plaudit.store.backend import Backend, Tx
    from plaudit.store.checkpointing import Checkpointer

_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
#: Logs shorter than this are verified in one pass: a worker costs more than it saves.
PARALLEL_VERIFY_MIN = 200_000


class Head(msgspec.Struct, frozen=True):
    length: int
    hash: str

    @property
    def digest(self) -> str:
        return f"{self.length}:{self.hash}"

    @classmethod
    def parse(cls, digest: str) -> Head:
        length, sep, h = digest.strip().partition(":")
        n = int(length) if length.isascii() and length.isdigit() else -1
        if not sep or n < 0 or _HEX64.fullmatch(h) is None:
            raise ValidationError(
                "against", f"{digest!r} is not a head digest such as '42:<64 hex digits>'"
            )
        return cls(n, h.lower())


class VerifyReport(msgspec.Struct):
    ok: bool
    length: int
    checked: int
    head: str
    first_bad: int | None = None
    reason: str | None = None
    against: str | None = None
    #: "incremental" (from `from_checkpoint`, confirmed by an earlier verify) or "full".
    mode: str = "full"
    from_checkpoint: int | None = None
    #: Signed checkpoints checked against the tree, and each witness's outcome.
    checkpoints: int = 0
    witnesses: list[dict[str, Any]] = msgspec.field(default_factory=list)


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Stop a verify worker whose result is no longer wanted (e.g. verify raised)."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def _paths(values: Sequence[str | os.PathLike[str]]) -> list[Path]:
    from pathlib import Path

    return [Path(v).expanduser() for v in values]


def _split(length: int, parts: int) -> list[tuple[int, int]]:
    """Positions 1..length as `parts` contiguous (lo, hi) ranges."""
    if length <= 0:
        return []
    step = -(-length // parts)
    return [(lo, min(lo + step - 1, length)) for lo in range(1, length + 1, step)]


class Verifier:
    """Verification of one store's log (`EventLog.verify`)."""

    def __init__(self, backend: Backend, checkpointer: Checkpointer) -> None:
        self.backend = backend
        self.checkpointer = checkpointer

    def verify(
        self,
        against: str | Head | None = None,
        *,
        workers: int | None = None,
        full: bool = False,
        witness: Sequence[str | os.PathLike[str]] = (),
    ) -> VerifyReport:
        """Check the chain, the Merkle tree, the signed checkpoints and the witnesses; report
        the first position that does not check out.

        By default the check starts from the newest checkpoint an earlier verify confirmed,
        so its cost follows what is new (`plaudit.store.attestation`); `full=True` checks
        everything. A long full check runs in position ranges in parallel (`workers`): each
        range chains from the stored hash before it, which the previous range checks.
        Witness directories are `witness` plus the store's own (`$PLAUDIT_WITNESS`).
        """
        from plaudit.store.attestation import check_tree, verified_start

        anchor = Head.parse(against) if isinstance(against, str) else against
        key = self.checkpointer.existing_key()
        public = None if key is None else key.public_key
        witnesses = list(dict.fromkeys([*self.checkpointer.witnesses, *_paths(witness)]))
        tree = None
        with ExitStack() as cleanup, self.backend.read() as tx:
            view = LogView(tx)
            state = self.backend.ops.head(tx)
            head_seq, head_hash = state.seq, state.hash
            low, high = view.bounds()
            start = None if full else verified_start(tx, head_seq, public)
            if start is not None:
                ranges = [(start.size + 1, head_seq)] if start.size < head_seq else []
                results = [self._verify_local(tx, lo, hi, start.prev) for lo, hi in ranges]
                first_last = (start.size, start.prev)
            else:
                ranges = _split(head_seq, self._verify_workers(head_seq, workers))
                futures = [self._verify_remote(lo, hi, cleanup) for lo, hi in ranges[1:]]
                results = []
                if ranges:
                    lo, hi = ranges[0]
                    results.append(self._verify_local(tx, lo, hi, GENESIS))
                for (lo, hi), fut in zip(ranges[1:], futures, strict=True):
                    results.append(fut(tx, lo, hi))
                first_last = (0, GENESIS)
            anchor_hash: bytes | None = None
            if anchor is not None and 0 < anchor.length <= head_seq:
                anchor_hash = view.hash_at(anchor.length)
            chain_ok = (low is None or low >= 1) and all(r[0] is None for r in results)
            if chain_ok and (high is None or high <= head_seq):
                fp = None if key is None else key.fingerprint
                tree = check_tree(tx, state, start, public, fp, witnesses)
        first_bad: int | None = None
        reason: str | None = None
        checked, last = first_last
        if low is not None and low < 1:
            first_bad, reason = 1, f"a row at position {low} was inserted before the log"
        else:
            for (_, hi), (bad, why, tip) in zip(ranges, results, strict=True):
                if bad is not None:
                    first_bad, reason, checked = bad, why, bad - 1
                    if high is None or bad > high:
                        reason = (
                            f"the log ends at position {checked} but its head says {head_seq}: "
                            "events were deleted from the end"
                        )
                    break
                checked, last = hi, tip
        if first_bad is None:
            if high is not None and high > head_seq:
                first_bad, reason = (
                    head_seq + 1,
                    f"position {head_seq + 1} onwards was added outside plaudit "
                    "(the head does not cover it)",
                )
            elif last != head_hash:
                first_bad, reason = max(head_seq, 1), "the head does not match the last event"
            elif tree is not None and tree.first_bad is not None:
                first_bad, reason = tree.first_bad, tree.reason
                checked = min(checked, tree.first_bad - 1)
        if first_bad is None and anchor is not None:
            if anchor.length > checked:
                first_bad, reason = (
                    checked + 1,
                    f"the earlier head covers {anchor.length} events but the log has {checked}",
                )
            else:
                expected = GENESIS if anchor.length == 0 else anchor_hash
                if expected is None or expected.hex() != anchor.hash:
                    first_bad, reason = (
                        max(anchor.length, 1),
                        f"the log no longer extends the head {anchor.digest}: "
                        "history before it was rewritten",
                    )
        if first_bad is None and tree is not None and tree.confirmed is not None:
            self._confirm(tree.confirmed)
        return VerifyReport(
            ok=first_bad is None,
            length=head_seq,
            checked=checked,
            head=Head(head_seq, head_hash.hex()).digest,
            first_bad=first_bad,
            reason=reason,
            against=None if anchor is None else anchor.digest,
            mode="full" if start is None else "incremental",
            from_checkpoint=None if start is None else start.size,
            checkpoints=0 if tree is None else tree.checkpoints,
            witnesses=[] if tree is None else tree.witnesses,
        )

    def _confirm(self, size: int) -> None:
        """Remember that the checkpoint of `size` events checked out, so the next verify can
        start there. A store this process cannot write to just verifies in full next time."""
        sql = "UPDATE plaudit_checkpoints SET verified_ms = ? WHERE size = ?"
        try:
            if self.backend.in_write():
                # Verify ran inside a writer (the ledger's write path): mark it there.
                with self.backend.read() as tx:
                    tx.execute(sql, (now_ms(), size))
                return
            with self.backend.write() as tx:
                tx.execute(sql, (now_ms(), size))
        except PlauditError:
            pass

    def _verify_workers(self, length: int, workers: int | None) -> int:
        if workers is None:
            if length < PARALLEL_VERIFY_MIN:
                return 1
            workers = min(2, os.cpu_count() or 1)
        return max(1, min(int(workers), length))

    def _verify_local(self, tx: Tx, lo: int, hi: int, prev: bytes | None) -> RangeResult:
        if prev is None:
            prev = LogView(tx).hash_at(lo - 1)
            if prev is None:
                return lo - 1, f"position {lo - 1} is missing (deleted from the log)", b""
        return check_rows(tx.chunks(range_sql(tx.dialect), (lo, hi)), lo, hi, prev)

    def _verify_remote(
        self, lo: int, hi: int, cleanup: ExitStack
    ) -> Callable[[Tx, int, int], RangeResult]:
        """Start checking lo..hi elsewhere; the returned callable waits for the result.

        Whatever goes wrong with the worker (not with the log) falls back to checking the
        range in this process, so a worker can only ever make verify faster, never weaker.
        """
        # Imported here: the append path (and a shell hook's emit) never needs them.
        import json
        import subprocess
        import sys
        from concurrent.futures import ThreadPoolExecutor

        backend = self.backend
        path = backend.file()
        if path is not None:
            # A separate process: SQLite reading and hashing then use the other core fully.
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-I", chain.__file__, str(path), str(lo), str(hi)],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                )
            except OSError:
                return lambda tx, lo, hi: self._verify_local(tx, lo, hi, None)
            cleanup.callback(_reap, proc)

            def wait(tx: Tx, lo: int, hi: int) -> RangeResult:
                out, _ = proc.communicate()
                try:
                    if proc.returncode != 0:
                        raise ValueError(proc.returncode)
                    r = json.loads(out)
                    return r["first_bad"], r["reason"], bytes.fromhex(r["last"])
                except (ValueError, KeyError, TypeError):
                    # The worker failed (not the log): check the range here instead.
                    return self._verify_local(tx, lo, hi, None)

            return wait
        # PostgreSQL does the body rebuilding server-side: a second connection in a thread.
        pool = ThreadPoolExecutor(1)

        def work() -> RangeResult:
            with backend.read_elsewhere() as tx:
                return self._verify_local(tx, lo, hi, None)

        future = pool.submit(work)
        pool.shutdown(wait=False)

        def result(tx: Tx, lo: int, hi: int) -> RangeResult:
            try:
                return future.result()
            except Exception:  # the second connection failed: do the range here
                return self._verify_local(tx, lo, hi, None)

        return result
