"""Handing sequencing work and its results between processes that share one PostgreSQL log.

An append that finds the sequencer lease taken commits into the intake table and must then wait
until some sequencing pass has given its events positions. Waiting by asking the database
(block on the lease, then look the ids up) cost each such append two more statements and, on a
2-core machine, most of its CPU. Two pieces replace that:

* **The relay** (one listener connection per store and process): every sequencing pass that
  took intake publishes, with `pg_notify` in its own transaction, which appends it covered and
  at which positions. A notification is delivered only if that transaction commits, so a waiter
  that hears "your batch is at position 17" knows it is durable there. Batches whose outcome
  does not fit in a line (several events, a conflict, a duplicate) are published as "look it
  up", and the waiter asks the database once.
* **The pump**: a thread that, while intake keeps arriving, runs sequencing passes back to back
  in whichever process first found its appends waiting; an advisory lock of its own makes it one
  per store across hosts. It gives the lease back between passes, so `writer()` callers and
  direct appends interleave with it, and stops after a short idle spell. If it dies (kill -9),
  PostgreSQL releases its lock with its connection, the waiters' next timeout starts another,
  and the intake rows, already durable, are sequenced by it.

Notifications are only a shortcut: a waiter that hears nothing looks its ids up itself after a
timeout, so a lost notification costs latency, never an answer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any

#: A pass's results are published in notifications of at most this many bytes (limit 8000).
PAYLOAD_LIMIT = 7800
#: A process that heard a pass this recently assumes a pump is running and goes straight to
#: the intake instead of trying for the lease (a try that mostly fails costs a round trip).
BUSY_S = 0.1
#: The pump polls the intake this often while it has nothing to do...
POLL_S = 0.0005
#: ...and stops after this long without work.
LINGER_S = 0.25
#: Listener and pump threads with nothing to do for this long close their connections.
IDLE_CLOSE_S = 5.0
#: How long closing a store waits for its pump's pass or catch-up under way.
CLOSE_WAIT_S = 10.0
#: After a pass that carried only enqueued calls (nobody waits on them), the pump lets intake
#: gather this long before the next pass: fewer, larger passes cost less per event, and an
#: enqueued event is acknowledged already. An appender of this process that waits cuts the
#: pause short (`want`); one of another process waits at most this much longer.
PACE_S = 0.005


def encode_results(results: Sequence[tuple[str, int | None]]) -> list[str]:
    """Payloads for (batch token, position or None for "look it up") pairs."""
    out: list[str] = []
    line: list[str] = []
    size = 0
    for token, seq in results:
        item = f"{token}!" if seq is None else f"{token}:{seq}"
        if size + len(item) + 1 > PAYLOAD_LIMIT and line:
            out.append(" ".join(line))
            line, size = [], 0
        line.append(item)
        size += len(item) + 1
    if line:
        out.append(" ".join(line))
    return out


def decode_results(payload: str) -> list[tuple[str, int | None]]:
    out: list[tuple[str, int | None]] = []
    for item in payload.split():
        if item.endswith("!"):
            out.append((item[:-1], None))
        else:
            token, _, seq = item.partition(":")
            if seq.isdigit():
                out.append((token, int(seq)))
    return out


class Waiter:
    """One append call waiting for its positions."""

    __slots__ = ("event", "seq", "token")

    def __init__(self, token: str) -> None:
        self.token = token
        self.event = threading.Event()
        #: The position the relay heard for a one-event append; None: look it up.
        self.seq: int | None = None


class Relay:
    """Listens for sequencing passes on behalf of this process's waiting appenders."""

    def __init__(self, connect: Callable[[], Any], channel: Callable[[], str]) -> None:
        self._connect = connect
        self._channel = channel
        self._lock = threading.Lock()
        self._waiting: dict[str, Waiter] = {}
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._closed = False
        self.last_heard = 0.0

    def busy(self) -> bool:
        """Whether a pass published results moments ago (a pump is most likely running)."""
        return time.monotonic() - self.last_heard < BUSY_S

    def expect(self, tokens: Sequence[str]) -> list[Waiter]:
        """Register waiters. Call before the intake commit, so no result can be missed."""
        waiters = [Waiter(t) for t in tokens]
        with self._lock:
            for w in waiters:
                self._waiting[w.token] = w
            # Registered and checked under one lock: a listener deciding to close for want
            # of waiters either sees these or has already given up its place to a new one.
            if self._thread is None or not self._thread.is_alive():
                self._ready.clear()
                self._thread = threading.Thread(target=self._run, name="plaudit-relay", daemon=True)
                self._thread.start()
        # LISTEN must be in place before the caller's intake commits.
        self._ready.wait(10.0)
        return waiters

    def forget(self, waiters: Sequence[Waiter]) -> None:
        with self._lock:
            for w in waiters:
                self._waiting.pop(w.token, None)

    def _run(self) -> None:
        conn = None
        try:
            conn = self._connect()
            conn.execute(f'LISTEN "{self._channel()}"')
        except Exception:
            self._ready.set()  # waiters fall back to looking their ids up
            if conn is not None:
                with suppress(Exception):
                    conn.close()
            return
        self._ready.set()
        quiet_since = time.monotonic()
        try:
            while not self._closed:
                heard = False
                for note in conn.notifies(timeout=0.5):
                    heard = True
                    self._deliver(note.payload)
                now = time.monotonic()
                if heard:
                    quiet_since = now
                with self._lock:
                    idle = not self._waiting and now - quiet_since > IDLE_CLOSE_S
                    if idle or self._closed:
                        self._thread = None
                        break
        except Exception:
            with self._lock:
                self._thread = None
        finally:
            with suppress(Exception):
                conn.close()

    def _deliver(self, payload: str) -> None:
        self.last_heard = time.monotonic()
        results = decode_results(payload)
        with self._lock:
            hits = [(self._waiting.pop(t, None), seq) for t, seq in results]
        for w, seq in hits:
            if w is not None:
                w.seq = seq
                w.event.set()

    def close(self) -> None:
        self._closed = True


class Pump:
    """Runs sequencing passes back to back while intake keeps arriving (one per store)."""

    def __init__(
        self,
        claim: Callable[[], bool],
        release: Callable[[], None],
        pending: Callable[[], bool],
        sequence_once: Callable[[], int | None],
        idle: Callable[[], bool] | None = None,
        waited_on: Callable[[], bool] | None = None,
    ) -> None:
        self._claim = claim
        self._release = release
        self._pending = pending
        self._sequence_once = sequence_once
        # Work for the pump when the intake is empty (trailing projections catching up, one
        # short transaction a call); True when it did some.
        self._idle = idle
        # Whether the last pass carried a call that waits for its result (see PACE_S).
        self._waited_on = waited_on
        self._lock = threading.Lock()
        self._wanted = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False

    def want(self) -> None:
        """Some appends of this process wait: run a pump here unless one runs somewhere."""
        self._wanted.set()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="plaudit-pump", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        parked_since = time.monotonic()
        try:
            while not self._closed:
                if not self._wanted.wait(0.5):
                    if time.monotonic() - parked_since > IDLE_CLOSE_S:
                        break
                    continue
                self._wanted.clear()
                if self._claim():
                    try:
                        self._loop()
                    finally:
                        self._release()
                parked_since = time.monotonic()
        except Exception:
            pass  # waiters time out, look their ids up and start another pump
        finally:
            with self._lock:
                self._thread = None

    def _loop(self) -> None:
        idle_since = time.monotonic()
        busy = False  # the last pass sequenced something: more is likely, skip the check
        while not self._closed:
            if busy or self._pending():
                done = self._sequence_once()
                busy = bool(done)
                if done:
                    idle_since = time.monotonic()
                    if self._waited_on is not None and not self._waited_on():
                        self._wanted.clear()
                        self._wanted.wait(PACE_S)
                    continue
                if done == 0:
                    continue  # nothing was left after all: check before the next pass
                # None: another writer holds the lease right now; it sequences what is pending.
            elif self._idle is not None and self._idle():
                continue
            elif time.monotonic() - idle_since > LINGER_S:
                return
            time.sleep(POLL_S)

    def close(self) -> None:
        """Stop, and wait for the pass or catch-up under way: the store's connections close
        next, and work still running on one of them would fail (or hold locks) mid-way."""
        self._closed = True
        self._wanted.set()
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(CLOSE_WAIT_S)
