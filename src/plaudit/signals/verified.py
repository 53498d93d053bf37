"""Checking the log before exporting it: training data from a tampered log is refused.

The export asks the log's own verify (`EventLog.verify`), as the ledger does
(`plaudit.ledger.log_verified`): it starts from the newest signed checkpoint an earlier verify
confirmed, so a re-export checks what was appended since then, not the whole chain. There is
no mark of the export's own any more: stores that have one from an earlier version
(`signals_checkpoint`) lose it when the `signals` projection is rebuilt at its new version;
their first export then verifies in full, or from a checkpoint `plaudit log verify`
confirmed. A change made before that checkpoint without touching the stored hashes is found
by `plaudit log verify --full`, and by an export given `full=True` (`--verify-full`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plaudit.errors import IntegrityError

if TYPE_CHECKING:
    from plaudit.core import Plaudit


def verify_for_export(plaudit: Plaudit, *, full: bool = False) -> dict[str, Any]:
    """{"ok", "mode", "checked_from", "length", "reason"}: whether the log verifies, and from
    which position this check recomputed it (1 for a full check)."""
    report = plaudit.log.verify(full=full)
    start = report.from_checkpoint if report.mode == "incremental" else None
    return {
        "ok": report.ok,
        "mode": report.mode,
        "checked_from": (start or 0) + 1,
        "length": report.length,
        "reason": None if report.ok else f"position {report.first_bad}: {report.reason}",
    }


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
