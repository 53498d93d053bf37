"""A lock file that writers of many processes queue on, waited for with a deadline.

SQLite's writers queue here (an exclusive `flock` of `<db>.lock`) rather than in SQLite's busy
handler, which sleeps in growing steps and lets a late waker-up overtake older waiters; the
kernel hands a free lock over at once (docs/benchmarks.md, "Log: appends and writers").

`flock` itself has no timeout, so a waiter blocks in a thread of its own while the caller
waits for it with the deadline. A caller that reaches the deadline gets a `DeadlineError`
naming the holder: whoever takes the lock writes its pid and host into the file. Its wait
stays queued in the kernel, so the next call of this process resumes it rather than queueing
anew; a wait that nobody resumes lets go of the lock the moment it gets it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading

from plaudit.store import deadlines
from plaudit.store.perms import open_private

_HOLDER_BYTES = 128


class FileLock:
    """An exclusive lock of one file for this process (threads serialise before it)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._cv = threading.Condition()
        #: A thread blocked in `flock` for this process, and whether a caller still wants it.
        self._waiting = False
        self._wanted = False
        self._granted = False
        self._me = b""
        #: The holder a wait last ran out of time on: if it is still stopped, the next call
        #: is told at once instead of waiting the whole deadline again.
        self._stalled_by: tuple[int, str] | None = None

    def _descriptor(self) -> int:
        if self._fd is None:
            self._fd = open_private(self.path, os.O_RDWR)
        return self._fd

    def acquire(self, deadline_s: float) -> None:
        """Take the lock, waiting at most `deadline_s` (then `DeadlineError`)."""
        fd = self._descriptor()
        with self._cv:
            if not self._waiting:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    self._waiting, self._granted = True, False
                    threading.Thread(target=self._wait, args=(fd,), daemon=True).start()
                else:
                    self._mark(fd)
                    return
            self._wanted = True
            stalled = self._stalled_by
            if (
                stalled is not None
                and self._identity() == stalled
                and deadlines.process_state(stalled[0]) == "stopped"
            ):
                self._wanted = False
                raise self._waited(0.0)
            got = self._cv.wait_for(lambda: self._granted, timeout=deadline_s)
            if got:
                self._granted = self._waiting = self._wanted = False
                self._stalled_by = None
                self._mark(fd)
                return
            self._wanted = False
            self._stalled_by = self._identity()
        raise self._waited(deadline_s)

    def _waited(self, seconds: float) -> Exception:
        return deadlines.waited(
            f"the write lock of {self.path[: -len('.lock')]}",
            seconds,
            self.holder(),
            "a writer that stops inside a transaction keeps every other waiting; resume or "
            "end that process, then retry (a retried append is idempotent)",
        )

    def _wait(self, fd: int) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # the store was closed under the wait
            with self._cv:
                self._waiting = False
            return
        with self._cv:
            if self._wanted:
                self._granted = True
                self._cv.notify_all()
                return
            self._waiting = False  # nobody wants it any more: hand it straight back
        with contextlib.suppress(OSError):  # the store may have closed meanwhile
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _mark(self, fd: int) -> None:
        """Say who holds the lock, for waiters that reach their deadline."""
        if not self._me or not self._me.startswith(f"{os.getpid()} ".encode()):
            self._me = f"{os.getpid()} {deadlines.host()}\n".encode().ljust(_HOLDER_BYTES)
        # A read-only file still locks; waiters then cannot name us.
        with contextlib.suppress(OSError):
            os.pwrite(fd, self._me, 0)

    def _identity(self) -> tuple[int, str] | None:
        """(pid, host) the holder wrote into the file, if it could be read."""
        try:
            text = os.pread(self._descriptor(), _HOLDER_BYTES, 0).decode(errors="replace")
            pid, host = text.split()[:2]
            return int(pid), host
        except (OSError, ValueError):
            return None

    def holder(self) -> str:
        who = self._identity()
        return "another process" if who is None else deadlines.holder(*who)

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
