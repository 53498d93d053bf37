"""The seam every write goes through: `Sequencer.submit`, one implementation per backend.

`submit(prepared, on_conflict)` hands one call to the backend's sequencer and returns a
`Ticket`, the call's future. `EventLog.append` waits on it for the events' positions;
`EventLog.enqueue` for their durability (at the intake, where the backend has one, so a
position may come later). `fn=` runs a function under the lease instead (`EventLog.run`), and
`leased()` holds the lease for a block (`EventLog.writer`).

What is behind the seam is the backend's business: SQLite takes its one write lock
(`plaudit.store.sqlite_sequencer`); PostgreSQL writes directly when the lease is free and
through its durable intake when it is not (`plaudit.store.postgres_sequencer`). Both meet in
`plaudit.store.sequencing`, the one place events get positions, and in front of both, threads
of one process that submit at the same moment share one transaction (`GroupCommit`).
"""

from __future__ import annotations

import contextvars
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from plaudit.events import Prepared
from plaudit.store.idempotency import BatchResult, OnConflict
from plaudit.store.sequencing import Leased, Request, Sequencing, Writer


class Ticket:
    """The future of one submitted call. `result()` is the call's outcome (a `BatchResult`,
    or what its function returned) or raises its error; `durable` says whether the outcome
    was acknowledged at the intake (positions to come) rather than at its position."""

    __slots__ = ("_request", "durable")

    def __init__(self, request: Request, *, durable: bool = False) -> None:
        self._request = request
        self.durable = durable

    def result(self) -> Any:
        r = self._request
        if r.error is not None:
            raise r.error
        return r.result


class GroupCommit:
    """Threads of one process that submit at the same moment share one transaction: whoever
    holds the leader lock writes every request queued so far, with `write_group`, which sets
    each request's result or error (and raises only when the whole transaction failed)."""

    def __init__(self, write_group: Callable[[list[Request]], None]) -> None:
        self._write_group = write_group
        self._queue: list[Request] = []
        self._queue_lock = threading.Lock()
        self._leader = threading.Lock()

    def run(self, requests: Sequence[Request]) -> None:
        """Queue `requests` and see them written (by this thread or the group's leader).
        `write_group` marks each request `done` once its transaction committed; a request the
        group left undone gets the exception the group raised."""
        with self._queue_lock:
            self._queue.extend(requests)
        with self._leader:
            if all(r.done for r in requests):
                return
            with self._queue_lock:
                group, self._queue = self._queue, []
            try:
                self._write_group(group)
            except BaseException as exc:
                for r in group:
                    if not r.done:
                        r.result, r.error, r.done = None, exc, True
                if not isinstance(exc, Exception):
                    raise


class Sequencer(ABC):
    """The backend's way of giving events positions (see the module)."""

    def __init__(self, core: Sequencing) -> None:
        self.core = core
        #: Work for idle time (the log's trailing projections catching up): a callable that
        #: returns whether it did some. Run by a PostgreSQL pump with no intake to sequence.
        self.idle_work: Callable[[], bool] | None = None

    def submit(
        self,
        prepared: list[Prepared],
        on_conflict: OnConflict = "raise",
        *,
        fn: Callable[[Writer], Any] | None = None,
        durable: bool = True,
        enqueue: bool = False,
    ) -> Ticket:
        """Hand one call over. `enqueue`: the ticket may resolve once the events are durable,
        before they have positions. `durable=False` (with `fn`): the commit may return before
        it reaches the disk (see `EventLog.run`). A function runs in whichever thread leads
        its group, but with its caller's context variables (the trace context its events
        carry, say)."""
        if fn is not None:
            context = contextvars.copy_context()
            call = fn
            fn = lambda writer: context.run(call, writer)  # noqa: E731
        request = Request(prepared, on_conflict, fn, durable)
        return self._submit(request, enqueue=enqueue)

    @abstractmethod
    def _submit(self, request: Request, *, enqueue: bool) -> Ticket: ...

    @abstractmethod
    @contextmanager
    def leased(self) -> Iterator[Leased]:
        """The lease from the first line of the block to its commit, with every event
        acknowledged so far sequenced (pending intake first): `EventLog.writer`."""

    def sequence_pending(self) -> int:
        """Give positions to events that are durable but wait for them; returns how many."""
        return 0

    def close(self) -> None:
        """Stop this sequencer's threads (the store's connections close next)."""
        return None


def batch_of(ticket: Ticket) -> BatchResult:
    result = ticket.result()
    assert isinstance(result, BatchResult)
    return result
