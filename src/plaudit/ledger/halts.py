"""Why recording stops, and the way forward from each halt.

Every halt names its kind, and every message that reports one ends with the command to run
next. docs/ledger.md ("Halts and the way forward") documents the same table; a test checks
that each kind's advice is there.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from plaudit.errors import IntegrityError
from plaudit.events import make_event
from plaudit.ledger import eventtypes as et
from plaudit.ledger.models import iso

if TYPE_CHECKING:
    from plaudit.core import Plaudit
    from plaudit.ledger.integrity import VerifyOutcome

log = logging.getLogger("plaudit.ledger")

#: kind -> the way forward, as printed in every message about that kind of halt.
WAY_FORWARD: dict[str, str] = {
    "checksum": (
        "run `plaudit ledger recover` (it rebuilds the stored totals from the log and lifts the "
        "halt once they agree) or `plaudit ledger audit`"
    ),
    "audit": "run `plaudit ledger audit` again to finish the interrupted audit",
    "reconcile": (
        "run `plaudit ledger reconcile` to see the mismatches; `plaudit ledger reconcile "
        "--recover` books what the ledger is missing, `--correct` reverses what it holds in "
        "excess or for deleted records, or fix the source files and `plaudit ledger "
        "import-sources DIR`; a reconciliation that comes out clean lifts the halt"
    ),
    "log_extra": (
        "rows were added behind plaudit's back, so nothing can be appended to this store: "
        "`plaudit ledger backup FILE` (it stops at the last position plaudit wrote), then "
        "`plaudit --db NEW ledger restore FILE` and carry on with NEW"
    ),
    "log": (
        "the log is append-only, so this store cannot verify again: `plaudit ledger backup "
        "FILE`, then `plaudit --db NEW ledger restore --rechain FILE` and `plaudit --db NEW "
        "ledger audit` (or restore an earlier backup into NEW); `plaudit log verify` shows "
        "the damage"
    ),
}


def log_kind(outcome: VerifyOutcome) -> str:
    """Rows beyond the head (added outside plaudit) need a different way forward."""
    return "log_extra" if outcome.first_bad == outcome.length + 1 else "log"


def way_forward(kind: str | None) -> str:
    return WAY_FORWARD.get(kind or "checksum", WAY_FORWARD["checksum"])


def halted_error(state: dict[str, Any]) -> IntegrityError:
    since = iso(int(state["halted_ms"])) if state.get("halted_ms") else "an earlier check"
    kind = state.get("halt_kind")
    return IntegrityError(
        f"recording is halted since {since}: {state.get('halt_reason') or 'unknown reason'}. "
        f"Next: {way_forward(kind)}."
    )


def log_failure_message(outcome: VerifyOutcome) -> str:
    return (
        f"recording halted: `plaudit log verify` fails at position {outcome.first_bad}: "
        f"{outcome.reason}. Nothing was recorded. Next: {way_forward(log_kind(outcome))}."
    )


def record_halt(p: Plaudit, kind: str, reason: str, detail: dict[str, Any]) -> bool:
    """Append a halt and its incident in a transaction of their own. A store that can take no
    append (rows added behind plaudit's back) still refuses every write, because the check
    that failed runs again on each one; so a halt that cannot be written is logged, not
    raised."""
    try:
        with p.log.writer() as w:
            w.append_batch(
                [
                    make_event(et.HALT, {"reason": reason, "kind": kind}, source="plaudit.ledger"),
                    make_event(
                        et.INCIDENT,
                        {"kind": kind if kind != "checksum" else "checksum_mismatch", **detail},
                        source="plaudit.ledger",
                    ),
                ]
            )
        return True
    except Exception as exc:
        log.warning("the ledger could not record its halt (%s): %s", kind, exc)
        return False
