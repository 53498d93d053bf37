"""Automatic reconciliation for long-running processes (the HTTP server): after every 10
transactions and every hour. The server calls `maybe_reconcile` after writes and may run
`start_reconcile_thread` for the hourly pass."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from plaudit.errors import PlauditError
from plaudit.ids import now_ms

if TYPE_CHECKING:
    from plaudit.core import Plaudit

EVERY_TX = 10
EVERY_MS = 3_600_000
log = logging.getLogger("plaudit.ledger")


def reconcile_due(
    state: dict[str, Any], now: int, *, every_tx: int = EVERY_TX, every_ms: int = EVERY_MS
) -> bool:
    if int(state["tx_count"]) - int(state["last_reconcile_count"] or 0) >= every_tx:
        return True
    last = state.get("last_reconcile_ms")
    return int(state["tx_count"]) > 0 and (last is None or now - int(last) >= every_ms)


def start_reconcile_thread(
    p: Plaudit, *, interval_s: float = 60.0, stop: threading.Event | None = None
) -> tuple[threading.Thread, threading.Event]:
    """A daemon thread that checks every `interval_s` and reconciles when due."""
    stop = stop or threading.Event()

    def run() -> None:
        while not stop.wait(interval_s):
            try:
                p.ledger.maybe_reconcile(now=now_ms())
            except PlauditError as exc:
                log.warning("ledger reconcile failed: %s", exc)
            except Exception:  # a database hiccup must not end the hourly pass for good
                log.exception("ledger reconcile failed unexpectedly")

    t = threading.Thread(target=run, name="plaudit-ledger-reconcile", daemon=True)
    t.start()
    return t, stop
