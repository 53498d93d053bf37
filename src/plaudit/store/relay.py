"""Handing sequencing work and its results between processes that share one PostgreSQL log.

An append that finds the sequencer lease taken commits into the intake table and must then wait
until some sequencing pass has given its events positions. Waiting by asking the database
(block on the lease, then look the ids up) cost each such append two more statements and, on a
2-core machine, most of its CPU. Two pieces replace that:

* **The relay** (one listener connection per store and process): every sequencing pass that
  took intake publishes, with `pg_notify` in its own transaction, which appends it covered, at
  which positions, and 64 bits of a hash of the content it sequenced for each (`call_digest`). A
  notification is delivered only if that transaction commits, so a waiter that hears "your
  batch is at position 17, with this content" knows it is durable there, and that what was
  sequenced is what it sent (an intake row edited in the database is reported as tampering).
  Calls whose outcome does not fit in a line (a conflict, a duplicate) are published as "look
  it up", and the waiter asks the database once.
* **The pump**: a thread that, while intake keeps arriving, runs sequencing passes back to back
  in whichever process first found its appends waiting; an advisory lock of its own makes it one
  per store across hosts. It gives the lease back between passes, so `writer()` callers and
  direct appends interleave with it, and stops after a short idle spell. If it dies (kill -9),
  PostgreSQL releases its lock with its connection, the waiters' next timeout starts another,
  and the intake rows, already durable, are sequenced by it. If it stops (SIGSTOP), the server
  ends its idle session after half the store's deadline, which releases the lock too.

Notifications are only a shortcut: a waiter that hears nothing looks its ids up itself after a
timeout, so a lost notification costs latency, never an answer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from typing import Any

#: A pass's results are published in notifications of at most this many bytes (limit 8000).
PAYLOAD_LIMIT = 7800
#: A process that heard a pass this recently assumes a pump is running and goes straight to
#: the intake instead of trying for the lease (a try that mostly fails costs a round trip).
BUSY_S = 0.1
#: The pump polls the intake this often right after work, doubling each empty poll up to
#: POLL_MAX_S (an appender of this process wakes it at once; one of another process finds its
#: events taken within POLL_MAX_S, or runs a pass itself after `RELAY_WAIT_S`)...
POLL_S = 0.0005
POLL_MAX_S = 0.008
#: ...and stops after this long without work.
LINGER_S = 0.25
#: Idle work (trailing projections catching up) runs at most this often: each run takes the
#: lease, and an appender that finds it taken goes the longer way through the intake.
IDLE_WORK_S = 0.2
#: Listener and pump threads with nothing to do for this long close their connections.
IDLE_CLOSE_S = 5.0
#: A process whose pump found the pump's lock taken asks again this often while intake waits
#: (the holder may be stopped: the server ends its session within half the deadline).
RECLAIM_S = 0.25
#: How long closing a store waits for its pump's pass or catch-up under way.
CLOSE_WAIT_S = 10.0
#: After a pass that carried only enqueued calls (nobody waits on them), the pump lets intake
#: gather this long before the next pass: fewer, larger passes cost less per event, and an
#: enqueued event is acknowledged already. An appender of this process that waits cuts the
#: pause short (`want`); one of another process waits at most this much longer.
PACE_S = 0.005


#: One pass result: (batch token, first position or None for "look it up", `call_digest`).
Result = tuple[str, int | None, str]


def call_digest(content_digests: Iterable[bytes]) -> str:
    """What a pass says it sequenced for one call: 64 bits of a hash of its events' content
    digests, in order. A waiter compares it with its own call's."""
    import hashlib

    return hashlib.sha256(b"".join(content_digests)).hexdigest()[:16]


def encode_results(results: Sequence[Result]) -> list[str]:
    """Payloads for a pass's results: `token:seq:digest` or `token!`."""
    out: list[str] = []
    line: list[str] = []
    size = 0
    for token, seq, digest in results:
        item = f"{token}!" if seq is None else f"{token}:{seq}:{digest}"
        if size + len(item) + 1 > PAYLOAD_LIMIT and line:
            out.append(" ".join(line))
            line, size = [], 0
        line.append(item)
        size += len(item) + 1
    if line:
        out.append(" ".join(line))
    return out


def decode_results(payload: str) -> list[Result]:
    out: list[Result] = []
    for item in payload.split():
        if item.endswith("!"):
            out.append((item[:-1], None, ""))
        else:
            token, _, rest = item.partition(":")
            seq, _, digest = rest.partition(":")
            if seq.isdigit():
                out.append((token, int(seq), digest))
    return out


class Waiter:
    """One append call waiting for its positions."""

    __slots__ = ("digest", "event", "seq", "token")

    def __init__(self, token: str) -> None:
        self.token = token
        self.event = threading.Event()
        #: The first position the relay heard for the call; None: look it up.
        self.seq: int | None = None
        #: `call_digest` of what was sequenced there.
        self.digest = ""


class Relay:
    """Listens for sequencing passes on behalf of this process's waiting appenders."""

    def __init__(
        self, connect: Callable[[], Any], channel: Callable[[], str], deadline_s: float
    ) -> None:
        self._connect = connect
        self._deadline_s = deadline_s
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
        # LISTEN must be in place before the caller's intake commits; a listener that cannot
        # connect in time only makes the waiters look their ids up.
        self._ready.wait(self._deadline_s)
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
            hits = [(self._waiting.pop(t, None), seq, d) for t, seq, d in results]
        for w, seq, digest in hits:
            if w is not None:
                w.seq, w.digest = seq, digest
                w.event.set()

    def close(self) -> None:
        self._closed = True


class Pump:
    """Runs sequencing passes back to back while intake keeps arriving (one per store)."""

    def __init__(
        self,
        claim: Callable[[], Any | None],
        release: Callable[[Any], None],
        pending: Callable[[Any], bool],
        sequence_once: Callable[[Any], int | None],
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
        #: Whether this process's pump holds the pump's lock: the passes its appenders hear
        #: are then their own process's, which take turns with them at the lease.
        self.claimed = False

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
                conn = self._claim()  # the pump's lock, on a connection of its own
                if conn is None:
                    # Another pump holds it: it runs passes, or it is stopped and the server
                    # ends its idle session within half the deadline. Ask again while work
                    # waits, so enqueued events never wait on a stopped pump for longer.
                    time.sleep(RECLAIM_S)
                    if self._pending(None):
                        self._wanted.set()
                    continue
                try:
                    self.claimed = True
                    self._loop(conn)
                finally:
                    self.claimed = False
                    self._release(conn)
                parked_since = time.monotonic()
        except Exception:
            pass  # waiters time out, look their ids up and start another pump
        finally:
            with self._lock:
                self._thread = None

    def _loop(self, conn: Any) -> None:
        idle_since = time.monotonic()
        idle_work_at = 0.0
        poll = POLL_S
        busy = False  # the last pass sequenced something: more is likely, skip the check
        while not self._closed:
            if busy or self._pending(conn):
                done = self._sequence_once(conn)
                busy = bool(done)
                if done:
                    idle_since, poll = time.monotonic(), POLL_S
                    if self._waited_on is not None and not self._waited_on():
                        self._wanted.clear()
                        self._wanted.wait(PACE_S)
                    continue
                if done == 0:
                    continue  # nothing was left after all: check before the next pass
                # None: another writer holds the lease right now; it sequences what is pending.
            elif self._idle is not None and time.monotonic() - idle_work_at > IDLE_WORK_S:
                idle_work_at = time.monotonic()
                if self._idle():
                    continue
            if time.monotonic() - idle_since > LINGER_S:
                return
            if self._wanted.wait(poll):  # an appender of this process put intake
                self._wanted.clear()
                poll = POLL_S
            else:
                poll = min(2 * poll, POLL_MAX_S)

    def close(self) -> None:
        """Stop, and wait for the pass or catch-up under way: the store's connections close
        next, and work still running on one of them would fail (or hold locks) mid-way."""
        self._closed = True
        self._wanted.set()
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(CLOSE_WAIT_S)
