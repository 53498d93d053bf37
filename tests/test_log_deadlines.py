"""Every wait has a deadline: a stopped peer (SIGSTOP) costs the others at most the store's
deadline and a clear message naming it, never a hang, and nothing it acknowledged is lost.

Each test stops a real process in turn: a SQLite writer inside its transaction, the holder of
PostgreSQL's sequencer lease, a host leader, and a pump. The deadline is set low (1 s) so the
tests stay quick; `bench/log_stall.py` measures the same at the default.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from plaudit import Plaudit
from plaudit.errors import BackendUnavailableError, DeadlineError

DEADLINE = 1.0


def event(id_: str, value: int = 0) -> dict[str, Any]:
    return {"id": id_, "type": "test.stall.v1", "session_id": "s", "source": "t",
            "payload": {"v": value}}  # fmt: skip


HOLD_WRITER = r"""
import sys
from plaudit import Plaudit
p = Plaudit.open(sys.argv[1], deadline_s=float(sys.argv[2]))
p.log.append({"id": "before-stop", "type": "test.stall.v1", "payload": {}})
with p.log.writer() as w:
    w.append({"id": "inside-stop", "type": "test.stall.v1", "payload": {}})
    print("holding", flush=True)
    sys.stdin.readline()  # stopped here by the test; resumed, it goes on and commits
print("done", flush=True)
"""


@contextmanager
def stopped(script: str, *args: str, env: dict[str, str] | None = None) -> Iterator[int]:
    """Run `script`, wait until it prints its first line, SIGSTOP it; yields its pid.
    Afterwards it is resumed and must exit."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip(), proc.stderr.read() if proc.stderr else ""
        os.kill(proc.pid, signal.SIGSTOP)
        yield proc.pid
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        with __import__("contextlib").suppress(Exception):
            assert proc.stdin is not None
            proc.stdin.write("\n")
            proc.stdin.flush()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_stopped_sqlite_writer_costs_others_the_deadline_and_is_named(tmp_path: Any) -> None:
    db = str(tmp_path / "s.db")
    with Plaudit.open(db):
        pass
    with stopped(HOLD_WRITER, db, str(DEADLINE)) as pid, Plaudit.open(db, deadline_s=DEADLINE) as p:
        start = time.monotonic()
        with pytest.raises(DeadlineError) as err:
            p.log.append(event("blocked"))
        waited = time.monotonic() - start
        assert DEADLINE * 0.9 <= waited < DEADLINE + 1.5
        assert f"pid {pid}" in str(err.value) and "stopped" in str(err.value)
        assert "retry" in str(err.value)
    with Plaudit.open(db) as p:  # the holder resumed and committed; a retry goes through
        assert p.log.append(event("blocked")).status == "appended"
        assert {e.id for e in p.log.replay()} == {"before-stop", "inside-stop", "blocked"}
        assert p.log.verify().ok


@pytest.mark.postgres
def test_a_stopped_lease_holder_loses_the_lease_within_the_deadline(pg_url: str) -> None:
    """PostgreSQL ends the stopped holder's idle session (half the deadline), so the others'
    appends and `writer()` calls go through within the deadline; what the holder had
    acknowledged stays, what it had not committed is gone."""
    with Plaudit.open(pg_url):
        pass
    env = {"PLAUDIT_HOST_GROUP": "0"}
    with (
        stopped(HOLD_WRITER, pg_url, str(DEADLINE), env=env),
        Plaudit.open(pg_url, deadline_s=DEADLINE) as p,
    ):
        start = time.monotonic()
        assert p.log.append(event("through")).status == "appended"
        with p.log.writer() as w:
            w.append(event("through-writer"))
        assert time.monotonic() - start < DEADLINE + 0.5
        ids = {e.id for e in p.log.replay()}
        assert {"before-stop", "through", "through-writer"} <= ids
        assert "inside-stop" not in ids
        assert p.log.verify().ok


HOLD_WRITER_BUSY = r"""
import sys, time
from plaudit import Plaudit
p = Plaudit.open(sys.argv[1], deadline_s=float(sys.argv[2]))
with p.log.writer() as w:
    print("holding", flush=True)
    t = time.monotonic()
    while time.monotonic() - t < 3 * float(sys.argv[2]):  # busy, not idle: keeps the lease
        w.head()
        time.sleep(0.01)
"""


@pytest.mark.postgres
def test_a_busy_lease_holder_is_named_at_the_deadline(pg_url: str) -> None:
    """A holder that is working (not stopped) keeps the lease: a `writer()` waiting for it
    gets a `DeadlineError` naming the holder's process and what to do."""
    with Plaudit.open(pg_url):
        pass
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITER_BUSY, pg_url, str(DEADLINE)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "holding"
        with Plaudit.open(pg_url, deadline_s=DEADLINE) as p:
            start = time.monotonic()
            with pytest.raises(DeadlineError) as err, p.log.writer():
                pass
            assert time.monotonic() - start < DEADLINE + 1.0
        assert f"pid {proc.pid}" in str(err.value), str(err.value)
    finally:
        proc.wait(30)


@pytest.mark.postgres
def test_threads_of_one_process_take_turns_at_the_lease_with_a_deadline(pg_url: str) -> None:
    """Threads of one process wait for each other's turn at the lease rather than failing
    over to the intake: appends from other threads while one thread holds a `writer()` block
    are written after it, in order, with positions; a `writer()` that waits past the deadline
    gets a `DeadlineError` naming this process's other thread."""
    import threading

    with Plaudit.open(pg_url, deadline_s=DEADLINE) as p:
        holding, release = threading.Event(), threading.Event()
        lost: list[BaseException] = []

        def hold() -> None:
            try:
                with p.log.writer() as w:
                    w.append(event(f"held-{len(lost)}"))
                    holding.set()
                    release.wait(10)
            except BackendUnavailableError as exc:
                lost.append(exc)  # idle in its transaction past half the deadline

        holder = threading.Thread(target=hold)
        holder.start()
        assert holding.wait(10)
        got: list[Any] = []
        appender = threading.Thread(target=lambda: got.append(p.log.append(event("after-0"))))
        appender.start()
        time.sleep(0.1)  # well inside the holder's idle allowance (half the deadline)
        assert not got  # waiting for the holder's turn, not written around it
        release.set()
        holder.join(10)
        appender.join(10)
        assert got and got[0].status == "appended"
        assert [e.id for e in p.log.tail(2)] == ["held-0", "after-0"]

        release.clear()
        holding.clear()
        holder = threading.Thread(target=hold)
        holder.start()
        assert holding.wait(10)
        try:
            start = time.monotonic()
            with pytest.raises(DeadlineError) as err, p.log.writer():
                pass
            assert DEADLINE - 0.1 <= time.monotonic() - start < DEADLINE + 1.0
            assert f"another thread of this process (pid {os.getpid()})" in str(err.value)
        finally:
            release.set()
            holder.join(10)
        assert lost, "a writer() block idle for half the deadline loses its session"
        assert [e.id for e in p.log.tail(2)] == ["held-0", "after-0"]  # nothing of it kept
        assert p.log.verify().ok


LEADER = r"""
import sys
from plaudit import Plaudit
p = Plaudit.open(sys.argv[1], deadline_s=float(sys.argv[2]))
p.log.append({"id": "leader-0", "type": "test.stall.v1", "payload": {}})
print("leading", flush=True)
sys.stdin.readline()
p.close()
"""


@pytest.mark.postgres
def test_a_stopped_host_leader_costs_a_follower_the_deadline_once(pg_url: str) -> None:
    with Plaudit.open(pg_url):
        pass
    with stopped(LEADER, pg_url, str(DEADLINE)), Plaudit.open(pg_url, deadline_s=DEADLINE) as p:
        times = []
        for i in range(6):
            start = time.monotonic()
            assert p.log.append(event(f"follower-{i}")).status == "appended"
            times.append(time.monotonic() - start)
        assert times[0] < DEADLINE + 1.0  # at most one wait for the stopped leader...
        assert sum(t > DEADLINE / 2 for t in times) <= 1, times  # ...and only once
        assert p.log.verify().ok


HOLD_PUMP = r"""
import sys
from plaudit import Plaudit
p = Plaudit.open(sys.argv[1], deadline_s=float(sys.argv[2]))
conn = p.backend.claim_pump()
assert conn is not None
print("holding", flush=True)
sys.stdin.readline()
"""


@pytest.mark.postgres
def test_a_stopped_pump_hands_over_within_the_deadline(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Enqueued events are sequenced although the pump's lock is held by a stopped process:
    the server ends its idle session and a pump of this process takes over."""
    with Plaudit.open(pg_url):
        pass
    monkeypatch.setenv("PLAUDIT_HOST_GROUP", "0")
    with stopped(HOLD_PUMP, pg_url, str(DEADLINE)), Plaudit.open(pg_url, deadline_s=DEADLINE) as p:
        for i in range(5):
            assert p.log.enqueue(event(f"q{i}")).status == "queued"
        start = time.monotonic()
        while len(p.log) < 5:
            assert time.monotonic() - start < DEADLINE + 2, len(p.log)
            time.sleep(0.02)
