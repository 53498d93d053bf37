"""The trailing checkpoint: pending observations folded after the observe, not inside it.

An observation is recorded as a pending row; folding a set of them into the posterior rows (a
checkpoint, `projection.py`) reads and rewrites every row they touched. On PostgreSQL, done
inside the observation that completed a set of 16, that observe took 21 to 32 ms served at
40 arms and 50 req/s, against a 7 ms median, so the checkpoints alone set a served p99 at
every rate. There an observer that leaves `CHECKPOINT_EVERY` pending wakes one thread per
store handle, which checkpoints in a write transaction of its own once the observe has
returned. (On SQLite the observation checkpoints itself: see `projection.py` for why.)

The checkpoint holds the log's write lock while it runs, as any append does, so a write that
arrives meanwhile waits for it; between an agent's observe and its next select there is
usually time enough. If the thread is slow or gone, the observation that makes
`CHECKPOINT_LIMIT` pending checkpoints in its own transaction.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING

from plaudit.bandit import projection

if TYPE_CHECKING:
    from plaudit.store.log import EventLog

_log = logging.getLogger("plaudit.bandit")


class Trailing:
    """One thread per store handle that checkpoints when asked (`request`)."""

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._closed = False
        #: checkpoints this thread has made (for tests and diagnostics)
        self.runs = 0

    def request(self) -> None:
        """Ask for a checkpoint soon; starts the thread on first use (again after a fork)."""
        if self._closed:
            return
        with self._lock:
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                self._pid = os.getpid()
                self._thread = threading.Thread(
                    target=self._run, name="plaudit-bandit-checkpoint", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._closed:
                return
            try:
                with self.log.writer() as w:
                    if projection.checkpoint_pending(w.tx):
                        self.runs += 1
            except Exception as exc:  # the observation at the limit checkpoints instead
                if self._closed:
                    return
                _log.warning("trailing bandit checkpoint failed: %s", exc)

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread, letting a checkpoint under way finish (its transaction is whole)."""
        self._closed = True
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
