"""One write at a time per server process on SQLite, queued on a lock instead of SQLite's sleep.

SQLite has a single writer. When two of the server's worker threads try to write at once, the
loser is put to sleep by SQLite's busy handler in growing steps (1, 2, 5, 10 ... 100 ms), and
nobody takes the free lock until a sleeper wakes up. Under steady load that collapses
throughput: the measured p50 went to seconds. Queueing on a `threading.Lock` hands the write
over as soon as it is free.

It is a router-level dependency rather than middleware so the lock is held only around the
endpoint's work, not while a client uploads its body. It is a plain `def`, so FastAPI runs it in
a worker thread and a waiting request blocks that thread, never the event loop. Reads (`GET`)
pass straight through: WAL readers never block. Other processes writing the same file still
meet SQLite's own lock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from fastapi import Request

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class WriteGate:
    def __init__(self) -> None:
        # A Lock, not an RLock: FastAPI may run a dependency's exit in another worker thread.
        self._lock = threading.Lock()

    def __call__(self, request: Request) -> Iterator[None]:
        if request.method not in WRITE_METHODS:
            yield
            return
        self._lock.acquire()
        try:
            yield
        finally:
            self._lock.release()


__all__ = ["WRITE_METHODS", "WriteGate"]
