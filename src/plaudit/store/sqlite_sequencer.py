"""SQLite's sequencer: one route. Every write takes the database's one write lock.

Threads of a process share a transaction (`GroupCommit`), processes queue on the lock file
with the store's deadline, and the group is written under the lock with one commit (and one
fsync). There is no intake: a second writer could only add a commit, never parallelism, so
`enqueue` is `append`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from plaudit.store.sequencer import GroupCommit, Sequencer, Ticket
from plaudit.store.sequencing import Leased, Request, Sequencing, deliver

if TYPE_CHECKING:
    from plaudit.store.sqlite import SqliteBackend


class SqliteSequencer(Sequencer):
    def __init__(self, backend: SqliteBackend, core: Sequencing) -> None:
        super().__init__(core)
        self.backend = backend
        self._group = GroupCommit(self._write_group)

    def _submit(self, request: Request, *, enqueue: bool) -> Ticket:
        self._group.run([request])
        return Ticket(request)

    def _write_group(self, group: list[Request]) -> None:
        flush = any(r.durable for r in group)
        try:
            with self.backend.write(flush=flush) as tx:
                self.core.leased(tx, self.core.ops.head(tx)).run(group)
        except BaseException:
            self.core.undone()
            raise
        self.core.committed(flushed=flush)
        deliver(group)

    @contextmanager
    def leased(self) -> Iterator[Leased]:
        try:
            with self.backend.write() as tx:
                yield self.core.leased(tx, self.core.ops.head(tx))
        except BaseException:
            self.core.undone()
            raise
        self.core.committed()
