"""Checking the log before exporting it: training data from a tampered log is refused.

The whole chain is recomputed the first time; after that, an export recomputes only what was
appended since the head the last verified export recorded (`signals_checkpoint`, a table of
this job's own), after checking that the log still holds that head's hash at its position.
That keeps a re-export's cost proportional to what changed. A change made to events before
that head without touching the stored hashes is found by `plaudit log verify` (the full
check), and by an export given `full=True`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plaudit.errors import IntegrityError

if TYPE_CHECKING:
    from plaudit.core import Plaudit

_CREATE = (
    "CREATE TABLE IF NOT EXISTS signals_checkpoint ("
    " one INTEGER PRIMARY KEY CHECK (one = 1), seq {bigint} NOT NULL, hash {blob} NOT NULL)"
)


def _checkpoint(plaudit: Plaudit) -> tuple[int, bytes] | None:
    with plaudit.log.writer() as w:  # created on first use; one short transaction
        w.tx.execute(w.tx.ddl(_CREATE))
        row = w.tx.fetchone("SELECT seq, hash FROM signals_checkpoint WHERE one = 1")
    return None if row is None else (int(row[0]), bytes(row[1]))


def _record(plaudit: Plaudit, seq: int, digest: bytes) -> None:
    with plaudit.log.writer() as w:
        w.tx.execute(
            "INSERT INTO signals_checkpoint (one, seq, hash) VALUES (1, ?, ?)"
            " ON CONFLICT (one) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
            (seq, w.tx.blob(digest)),
        )


def verify_for_export(plaudit: Plaudit, *, full: bool = False) -> dict[str, Any]:
    """{"ok", "checked_from", "length", "reason"}: whether the log verifies, checking from the
    last verified head on (or everything when `full` or when there is none)."""
    mark = None if full else _checkpoint(plaudit)
    with plaudit.log.reading() as view:
        length, head_hash = view.head()
        usable = mark is not None and mark[0] <= length and view.hash_at(mark[0]) == mark[1]
        if usable and mark is not None:
            start = mark[0]
            bad, reason, tip = (
                view.check_chain(start + 1, length, mark[1])
                if length > start
                else (None, None, mark[1])
            )
            if bad is None and tip != head_hash:
                bad, reason = max(length, 1), "the head does not match the last event"
            result = {"ok": bad is None, "checked_from": start + 1, "length": length}
            result["reason"] = None if bad is None else f"position {bad}: {reason}"
        else:
            usable = False
    if not usable:
        report = plaudit.log.verify()
        length = report.length
        result = {
            "ok": report.ok,
            "checked_from": 1,
            "length": length,
            "reason": None if report.ok else f"position {report.first_bad}: {report.reason}",
        }
        if report.ok:
            with plaudit.log.reading() as view:
                head_hash = (view.hash_at(length) or b"") if length else b""
    if result["ok"] and length and (mark is None or mark[0] != length):
        _record(plaudit, length, head_hash)
    return result


def open_existing(db: str | None) -> Plaudit:
    """Open a store that must already exist: exporting or auditing a mistyped path must not
    create an empty store and report an empty dataset (StoreNotFoundError, exit 2, names it)."""
    from plaudit.core import Plaudit

    return Plaudit.open(db, create=False)


def require_verified(
    plaudit: Plaudit, *, allow_unverified: bool, full: bool = False
) -> dict[str, Any]:
    """Verify the log for an export; a log that fails is refused unless `allow_unverified`."""
    result = verify_for_export(plaudit, full=full)
    if not result["ok"] and not allow_unverified:
        raise IntegrityError(
            f"the log fails verification at {result['reason']}; the export is refused"
            " (check it with `plaudit log verify`; pass --allow-unverified, or"
            " allow_unverified=true over HTTP, to export it anyway)"
        )
    return result
