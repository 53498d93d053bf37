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
from plaudit.store import chain
from plaudit.store.chain import GENESIS, RangeResult, check_rows, range_sql
from plaudit.store.view import LogView

if TYPE_CHECKING:
    import subprocess
    from pathlib import Path

    from plaudit.store.backend import Backend, Tx
    from plaudit.store.checkpointing import Checkpointer
    from plaudit.store.ops import HeadState

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
    #: Whose signatures were checked ("key <fingerprint> from <where>"), or why none were.
    signatures: str = ""
    #: What did not stop the check but needs a person: a witness directory that is missing
    #: (not mounted?), a key kept beside the database, a verifier state set aside.
    warnings: list[str] = msgspec.field(default_factory=list)
    #: With `writers=True`: events no registered writer signed (`plaudit.store.writers`).
    writers: dict[str, Any] | None = None


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


def _writers(tx: Tx, run: _Run) -> Any:
    """Every event's writer signature checked; the first unsigned one fails the verify."""
    from plaudit.store.writers import check_writers

    view = LogView(tx)
    rows = view.scan_columns(("seq", "id", "meta", "content_digest"))
    signed = check_writers(view, rows)
    if signed.unsigned:
        first = signed.first[0]
        run.fail(
            first["seq"],
            f"{signed.unsigned} of {signed.checked} events are not signed by a registered "
            f"writer; the first, {first['id']!r}: {first['why']}",
        )
    return signed


def _timeline(tx: Tx, public: bytes | None) -> tuple[Any, tuple[int, str] | None]:
    """The keys in force over the log (`plaudit.store.rotation`), and a rotation that does
    not check out, as (position, reason)."""
    if public is None:
        return None, None
    from plaudit.store.rotation import KeyTimeline, RotationError, timeline

    try:
        return timeline(tx, public), None
    except RotationError as exc:
        return KeyTimeline([(0, public)]), (exc.position, str(exc))


class _Run:
    """One verify's findings, in the order it makes them (see `Verifier.verify`)."""

    def __init__(self, state: HeadState, start: Any) -> None:
        self.state = state
        self.start = start
        self.ranges: list[tuple[int, int]] = []
        self.results: list[RangeResult] = []
        self.checked, self.last = 0, GENESIS
        self.anchor_hash: bytes | None = None
        self.head_problem: tuple[int, str] | None = None
        self.tree: Any = None
        self.first_bad: int | None = None
        self.reason: str | None = None

    def progress(self) -> Any:
        """Where the next verify of this process may start: the head just checked."""
        from plaudit.store.attestation import Start

        state = self.state
        if state.tree_size != state.seq or self.tree is None:
            return None
        return Start(state.seq, state.compact_range(), state.hash)

    def fail(self, position: int, reason: str) -> None:
        if self.first_bad is None:
            self.first_bad, self.reason = position, reason

    def settle_chain(self, low: int | None, high: int | None) -> None:
        """The chain's verdict, then the head's, then the tree's: the first wins."""
        seq = self.state.seq
        if low is not None and low < 1:
            self.fail(1, f"a row at position {low} was inserted before the log")
            return
        for (_, hi), (bad, why, tip) in zip(self.ranges, self.results, strict=True):
            if bad is not None:
                self.checked = bad - 1
                if high is None or bad > high:
                    why = (
                        f"the log ends at position {self.checked} but its head says {seq}: "
                        "events were deleted from the end"
                    )
                self.fail(bad, why or "")
                return
            self.checked, self.last = hi, tip
        if high is not None and high > seq:
            self.fail(seq + 1, f"position {seq + 1} onwards was added outside plaudit "
                      "(the head does not cover it)")  # fmt: skip
        elif self.last != self.state.hash:
            self.fail(max(seq, 1), "the head does not match the last event")
        elif self.head_problem is not None:
            self.fail(*self.head_problem)
        elif self.tree is not None and self.tree.first_bad is not None:
            self.fail(self.tree.first_bad, self.tree.reason)
            self.checked = min(self.checked, self.tree.first_bad - 1)

    def report(self, anchor: Head | None, signatures: str, warnings: list[str]) -> VerifyReport:
        if self.first_bad is None and anchor is not None:
            self._against(anchor)
        seq = self.state.seq
        return VerifyReport(
            ok=self.first_bad is None,
            length=seq,
            checked=self.checked,
            head=Head(seq, self.state.hash.hex()).digest,
            first_bad=self.first_bad,
            reason=self.reason,
            against=None if anchor is None else anchor.digest,
            mode="full" if self.start is None else "incremental",
            from_checkpoint=None if self.start is None else self.start.size,
            checkpoints=0 if self.tree is None else self.tree.checkpoints,
            witnesses=[] if self.tree is None else self.tree.witnesses,
            signatures=signatures,
            warnings=list(dict.fromkeys(warnings)),
        )

    def _against(self, anchor: Head) -> None:
        if anchor.length > self.checked:
            self.fail(
                self.checked + 1,
                f"the earlier head covers {anchor.length} events but the log has {self.checked}",
            )
            return
        expected = GENESIS if anchor.length == 0 else self.anchor_hash
        if expected is None or expected.hex() != anchor.hash:
            self.fail(
                max(anchor.length, 1),
                f"the log no longer extends the head {anchor.digest}: history before it was "
                "rewritten",
            )


class Verifier:
    """Verification of one store's log (`EventLog.verify`)."""

    def __init__(self, backend: Backend, checkpointer: Checkpointer) -> None:
        self.backend = backend
        self.checkpointer = checkpointer
        #: How far a verify of this process has checked the log (a `Start`): a verify with
        #: `new_only` checks only what came after, so a read that asks "does the log verify?"
        #: (the ledger's score) costs what is new.
        self._progress: Any = None
        #: The checkpoint last written to (or read from) the verifier's state file.
        self._saved: Any = None

    def verify(
        self,
        against: str | Head | None = None,
        *,
        workers: int | None = None,
        full: bool = False,
        witness: Sequence[str | os.PathLike[str]] = (),
        writers: bool = False,
        new_only: bool = False,
    ) -> VerifyReport:
        """Check the chain, the Merkle tree, every stored field of the head and of each
        checkpoint, the signatures and the witnesses; report the first position that does not
        check out.

        By default the check starts from the newest checkpoint an earlier verify confirmed,
        as this user's verifier state remembers it (`plaudit.store.verifier_state`, outside
        the database), so its cost follows what is new; `full=True`, or no state, checks
        everything. A long full check runs in position ranges in parallel (`workers`).
        Witness directories are `witness` plus the store's own (`$PLAUDIT_WITNESS`).
        `new_only`: start where this process's last verify left off, so that only what came
        after is checked (the ledger asks this on every record and score read)."""
        from plaudit.store import verifier_state

        anchor = Head.parse(against) if isinstance(against, str) else against
        warnings: list[str] = []
        key, signatures = self._key(warnings)
        public = None if key is None else key.public_key
        confirmed = None
        use_progress = new_only and not full and self._progress is not None
        if not full and key is not None and not use_progress:
            confirmed, problem = verifier_state.load(self.backend, key.fingerprint)
            warnings += [problem] if problem else []
            self._saved = confirmed
        witnesses = list(dict.fromkeys([*self.checkpointer.witnesses, *_paths(witness)]))
        with ExitStack() as cleanup, self.backend.read() as tx:
            keys, rotation_problem = _timeline(tx, public)
            progress = self._progress if use_progress else None
            run = self._check(tx, cleanup, keys, confirmed, witnesses, workers, anchor, progress)
            if rotation_problem is not None:
                run.fail(*rotation_problem)
            signed = _writers(tx, run) if writers else None
        if run.tree is not None:
            warnings += [w for out in run.tree.witnesses for w in out.get("warnings", [])]
        self._progress = run.progress() if run.first_bad is None else None
        new = None if run.tree is None else run.tree.confirmed
        if run.first_bad is None and new is not None and new != self._saved:
            problem = verifier_state.save(self.backend, new)
            warnings += [problem] if problem else []
            self._saved = new
        report = run.report(anchor, signatures, warnings)
        if signed is not None:
            report.writers = msgspec.to_builtins(signed)
        return report

    def _key(self, warnings: list[str]) -> tuple[Any, str]:
        """The log's key, if one can be found, and what the report says of signatures."""
        try:
            key = self.checkpointer.existing_key()
        except PlauditError as exc:
            return None, f"not checked: the signing key cannot be read ({exc})"
        if key is None:
            where = ", ".join(self.checkpointer.key_locations())
            return None, f"not checked: no signing key found (looked in {where})"
        if key.origin.endswith(".key") and self.backend.file() is not None:
            legacy = f"{self.backend.file()}.key"
            if key.origin == legacy:
                warnings.append(
                    f"the signing key sits beside the database ({legacy}), where whoever has "
                    "the file usually has the key: move it out (docs/proofs.md, 'Where the key "
                    "lives')"
                )
        return key, f"checked with key {key.fingerprint[:16]}... from {key.origin}"

    def _check(
        self,
        tx: Tx,
        cleanup: ExitStack,
        keys: Any,
        confirmed: Any,
        witnesses: list[Path],
        workers: int | None,
        anchor: Head | None,
        progress: Any = None,
    ) -> _Run:
        from plaudit.store.attestation import check_head, check_tree, verified_start

        view = LogView(tx)
        state = self.backend.ops.head(tx)
        low, high = view.bounds()
        start = None
        if (
            progress is not None
            and progress.size <= state.seq
            and (progress.size == 0 or view.hash_at(progress.size) == progress.prev)
        ):
            start = progress  # this process checked up to here: only what is new
        if start is None and confirmed is not None:
            start = verified_start(tx, state.seq, keys, confirmed)
        run = _Run(state, start)
        if start is not None:
            run.ranges = [(start.size + 1, state.seq)] if start.size < state.seq else []
            run.results = [self._verify_local(tx, lo, hi, start.prev) for lo, hi in run.ranges]
            run.checked, run.last = start.size, start.prev
        else:
            run.ranges = _split(state.seq, self._verify_workers(state.seq, workers))
            futures = [self._verify_remote(lo, hi, cleanup) for lo, hi in run.ranges[1:]]
            if run.ranges:
                lo, hi = run.ranges[0]
                run.results.append(self._verify_local(tx, lo, hi, GENESIS))
            for (lo, hi), fut in zip(run.ranges[1:], futures, strict=True):
                run.results.append(fut(tx, lo, hi))
        if anchor is not None and 0 < anchor.length <= state.seq:
            run.anchor_hash = view.hash_at(anchor.length)
        chain_ok = (low is None or low >= 1) and all(r[0] is None for r in run.results)
        if chain_ok and (high is None or high <= state.seq):
            run.head_problem = check_head(tx, state)
            if run.head_problem is None:
                pinned = confirmed if start is None else None
                run.tree = check_tree(tx, state, start, keys, witnesses, pinned)
        run.settle_chain(low, high)
        return run

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
