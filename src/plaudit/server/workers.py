"""Several server processes on one listening socket: `plaudit serve --workers N`.

A Python process runs its request handling and its store work under one interpreter lock, so
one process uses about one core, however many the machine has; on a busy server the HTTP
layer and the store's work then queue for that lock. Workers are separate processes, forked
from a supervisor that binds the socket first; the kernel hands each new connection to one
worker. Each worker opens its own store handle after the fork (a database connection must
never cross a fork), so every guarantee a process gives is the log's, which already holds for
writers in many processes: a write acknowledged by one worker is seen by the next request,
whichever worker answers it (`tests/server/test_http_workers.py`).

The supervisor does no request work. It restarts a worker that dies (a crash, a kill), stops
restarting one that keeps dying at start (a broken store would otherwise make it spin), and on
SIGTERM or SIGINT stops every worker and waits for them. fork is POSIX-only, and so is this.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from plaudit.errors import ConfigError, ListenError

#: A worker that exits this soon after it started counts as failing to start.
QUICK_EXIT_S = 2.0
#: After this many quick exits in a row the supervisor stops everything and reports it.
MAX_QUICK_EXITS = 3
#: How long stopping workers may take before they are killed.
STOP_GRACE_S = 10.0


def listen(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """The socket the server accepts on, bound before the store is opened and before any
    worker exists (so a port in use is one error, not N, creates nothing, and workers never
    race to bind). A failure is a `ListenError` (exit 7)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host, port), family=family, backlog=backlog)
    except OSError as exc:
        raise ListenError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; nothing was started or "
            "created (choose another --port, or stop what holds this one)"
        ) from exc
    sock.set_inheritable(True)
    return sock


def run_workers(
    sock: socket.socket,
    workers: int,
    worker: Callable[[int, socket.socket], None],
    *,
    log: Callable[[str], None] = lambda text: print(text, file=sys.stderr, flush=True),
) -> int:
    """Run `worker(index, sock)` in `workers` forked processes until told to stop; return the
    exit status for the supervisor's process (0 after a requested stop).

    `worker` runs in the child and must not return until its server stops; the child exits
    with 0 when it returns, 1 when it raises.
    """
    if not hasattr(os, "fork"):
        raise ConfigError("--workers above 1 needs fork (POSIX); run one process per port instead")
    if not 1 <= workers <= 256:
        raise ConfigError(f"workers must be between 1 and 256, not {workers}")
    children: dict[int, tuple[int, float]] = {}  # pid -> (index, started)
    stopping = False
    quick_exits = 0
    status = 0

    def spawn(index: int) -> None:
        pid = os.fork()
        if pid == 0:  # the worker
            code = 1
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                worker(index, sock)
                code = 0
            except KeyboardInterrupt:
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        children[pid] = (index, time.monotonic())

    def stop(signum: int, _frame: Any) -> None:
        nonlocal stopping
        if stopping and signum == signal.SIGINT:
            for pid in list(children):  # a second Ctrl-C: no more waiting
                _kill(pid, signal.SIGKILL)
        stopping = True
        for pid in list(children):
            _kill(pid, signal.SIGTERM)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        for index in range(workers):
            spawn(index)
        stop_deadline: float | None = None
        while children:
            if stopping and stop_deadline is None:
                stop_deadline = time.monotonic() + STOP_GRACE_S
            pid, wait_status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                if stop_deadline is not None and time.monotonic() > stop_deadline:
                    for left in list(children):
                        _kill(left, signal.SIGKILL)
                    stop_deadline = float("inf")
                time.sleep(0.05)
                continue
            if pid not in children:
                continue
            index, started = children.pop(pid)
            if stopping:
                continue
            code = os.waitstatus_to_exitcode(wait_status)
            quick = time.monotonic() - started < QUICK_EXIT_S
            quick_exits = quick_exits + 1 if quick else 0
            if quick_exits >= MAX_QUICK_EXITS:
                log(
                    f"plaudit: worker {index} exited {quick_exits} times within "
                    f"{QUICK_EXIT_S:g} s of starting (last status {code}); stopping"
                )
                status = 1
                stop(signal.SIGTERM, None)
                continue
            log(f"plaudit: worker {index} exited (status {code}); starting it again")
            spawn(index)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return status


def _kill(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


__all__ = ["listen", "run_workers"]
