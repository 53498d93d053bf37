"""Group commit across the processes of one host (plaudit.store.hostgroup), on the real
PostgreSQL server: followers' calls are answered as a local write would be, several processes'
events share commits, and nothing is lost or doubled when the leader goes away, by `close` or
SIGKILL. (Whether grouping pays is `bench/log_scale.py`'s question, not these tests'.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from plaudit import ConflictError, Plaudit
from plaudit.events import prepare
from plaudit.store import hostgroup

TYPE = "test.hostgroup.v1"


def event(id_: str, value: int = 0) -> dict[str, Any]:
    return {
        "id": id_,
        "type": TYPE,
        "ts_ms": 1,
        "session_id": "s",
        "source": "t",
        "payload": {"v": value},
    }


def assert_whole(p: Plaudit, ids: set[str]) -> None:
    """Every id in `ids` once, positions dense, the chain verifies."""
    with p.log.reading() as view:
        rows = list(view.tx.iterate("SELECT seq, id FROM plaudit_events ORDER BY seq"))
    seqs = [int(r[0]) for r in rows]
    assert seqs == list(range(1, len(seqs) + 1))
    counts = Counter(r[1] for r in rows)
    assert all(counts[i] == 1 for i in ids), [i for i in ids if counts[i] != 1][:5]
    assert p.log.verify().ok


def test_a_followers_calls_are_answered_as_local_writes(pg_url: str) -> None:
    leader = Plaudit.open(pg_url)
    follower = Plaudit.open(pg_url)
    try:
        assert leader.log.append(event("first")).seq == 1
        assert _leader_pid(pg_url) == os.getpid()  # the first handle to write leads
        results = [follower.log.append(event(f"f{i}", i)) for i in range(20)]
        assert [r.seq for r in results] == list(range(2, 22))
        assert {r.status for r in results} == {"appended"}
        # Idempotent through the leader too, and a batch keeps its order.
        assert follower.log.append(event("f3", 3)).status == "present"
        batch = follower.log.append_batch([event("b1"), event("f4", 4), event("b2")])
        assert [(r.status, r.seq) for r in batch.results] == [
            ("appended", 22),
            ("present", 6),
            ("appended", 23),
        ]
        # The caller reads its own write at once, on its own connection.
        got = follower.log.get("b2")
        assert got is not None and got.seq == 23
        # enqueue goes the same way and is answered with a position.
        assert follower.log.enqueue(event("q1")).seq == 24
        assert_whole(leader, {"first", "b1", "b2", "q1", *(f"f{i}" for i in range(20))})
    finally:
        follower.close()
        leader.close()


def test_conflicts_reach_the_follower_as_they_would_locally(pg_url: str) -> None:
    with Plaudit.open(pg_url) as leader, Plaudit.open(pg_url) as follower:
        leader.log.append(event("x", 1))
        with pytest.raises(ConflictError) as err:
            follower.log.append(event("x", 2))
        assert err.value.event_id == "x"
        # A strict batch with a conflict takes nothing in; a lenient one reports it.
        with pytest.raises(ConflictError):
            follower.log.append_batch([event("y1"), event("x", 2)])
        assert follower.log.get("y1") is None
        lenient = follower.log.append_batch([event("y2"), event("x", 2)], on_conflict="skip")
        assert [r.status for r in lenient.results] == ["appended", "conflict"]
        assert leader.log.verify().ok


def test_a_group_keeps_each_calls_outcome_apart() -> None:
    """One group, many calls (`settle_group`, what a leader applies to the calls it writes
    together): a conflicting strict call is left out whole, the others land, duplicates
    across calls come back `present` at the first one's position."""
    from plaudit.store.idempotency import settle_group

    calls: list[Any] = [
        ([prepare(event("a")), prepare(event("b"))], "raise"),
        ([prepare(event("c")), prepare(event("old", 2))], "raise"),  # conflicts: out whole
        ([prepare(event("a")), prepare(event("d"))], "raise"),  # "a" from the first call
        ([prepare(event("old", 2)), prepare(event("e"))], "skip"),
    ]
    old = prepare(event("old", 1))
    out, new = settle_group(calls, {"old": (old.content_digest, 1)}, 2)
    assert [(r.status, r.seq) for r in out[0].results] == [("appended", 2), ("appended", 3)]
    assert isinstance(out[1], ConflictError) and out[1].event_id == "old"
    assert [(r.status, r.seq) for r in out[2].results] == [("present", 2), ("appended", 4)]
    assert [(r.status, r.seq) for r in out[3].results] == [("conflict", 1), ("appended", 5)]
    assert [p.event.id for p in new] == ["a", "b", "d", "e"]


def test_a_follower_with_other_projections_writes_for_itself(pg_url: str) -> None:
    """A leader applies its own projections; a process that registered others must not hand
    it events (the handshake compares them), so it keeps writing itself."""
    with Plaudit.open(pg_url) as leader:
        leader.log.append(event("l"))
        other = hostgroup.HostGroup(leader.backend.url, 5.0, lambda: "another set", lambda c: [])
        try:
            assert other.submit([prepare(event("o"))], "raise") is None  # write it yourself
            assert other.submit([prepare(event("o"))], "raise") is None  # and from then on
            assert not other.leading
        finally:
            other.close()
        assert leader.log.get("o") is None


def test_when_the_leader_closes_a_follower_carries_on(pg_url: str) -> None:
    leader = Plaudit.open(pg_url)
    follower = Plaudit.open(pg_url)
    try:
        leader.log.append(event("l0"))
        follower.log.append(event("f0"))
        leader.close()
        for i in range(1, 6):
            follower.log.append(event(f"f{i}"))
            time.sleep(hostgroup.RETRY_S / 2)
        assert _leader_pid(pg_url) == os.getpid()  # the follower took the lead
        assert_whole(follower, {"l0", *(f"f{i}" for i in range(6))})
    finally:
        follower.close()
        leader.close()


def test_it_can_be_turned_off(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAUDIT_HOST_GROUP", "0")
    with Plaudit.open(pg_url) as p:
        assert p.log.append(event("a")).seq == 1
        assert _leader_pid(pg_url) is None  # nobody took the host's lock


WRITER = r"""
import os, sys, time
from plaudit import Plaudit
url, name, acks, gate = sys.argv[1:5]
p = Plaudit.open(url)
with open(acks, "a", buffering=1) as out:
    while not os.path.exists(gate):
        time.sleep(0.002)
    i = 0
    deadline = time.monotonic() + float(sys.argv[5])
    while time.monotonic() < deadline:
        ev = {"id": f"{name}-{i}", "type": "test.hostgroup.v1", "ts_ms": 1,
              "session_id": "s", "source": "t", "payload": {"v": i}}
        r = p.log.append(ev) if i % 3 else p.log.enqueue(ev)
        assert r.seq is not None or (i % 3 == 0 and r.status == "queued"), r
        out.write(f"{r.id}\n")
        i += 1
print(os.getpid(), flush=True)
p.close()
"""


def _leader_pid(url: str) -> int | None:
    """The pid holding the host lock of this store (from /proc/locks), if any."""
    with Plaudit.open(url, create=False) as p:
        lock = hostgroup.lock_path(p.backend.url)
    if not lock.exists():
        return None
    inode = lock.stat().st_ino
    for line in Path("/proc/locks").read_text().splitlines():
        parts = line.split()
        # "1: POSIX  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
        if len(parts) >= 6 and parts[1] == "POSIX" and parts[5].endswith(f":{inode}"):
            return int(parts[4])
    return None


def test_processes_share_commits_and_survive_their_leader_being_killed(
    pg_url: str, tmp_path: Path
) -> None:
    """Four writer processes: the leader is SIGKILLed mid-stream; the others carry on
    (writing for themselves, then under a new leader). Every acknowledged event is there
    exactly once, positions are dense, the chain verifies; transactions carried several
    processes' events (they shared commits)."""
    with Plaudit.open(pg_url) as p:
        p.log.append(event("start"))
    gate = tmp_path / "go"
    acks = [tmp_path / f"ack-{k}" for k in range(4)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, pg_url, f"w{k}", str(acks[k]), str(gate), "4"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(4)
    ]
    gate.touch()
    deadline = time.monotonic() + 20
    leader = None
    while leader is None and time.monotonic() < deadline:
        time.sleep(0.2)
        leader = _leader_pid(pg_url)
    assert leader is not None and leader in {pr.pid for pr in procs}
    time.sleep(0.5)
    os.kill(leader, signal.SIGKILL)
    outputs = {pr.pid: pr.communicate(timeout=120) for pr in procs}
    acked = {x for a in acks if a.exists() for x in a.read_text().split("\n") if x}
    survivors = [pr for pr in procs if pr.pid != leader]
    for pr in survivors:
        assert pr.returncode == 0, outputs[pr.pid][1][-2000:]
    with Plaudit.open(pg_url) as p:
        p.log.sequence()
        assert_whole(p, acked | {"start"})
        with p.log.reading() as view:  # one commit, several writers: xmin is the transaction
            shared = view.tx.scalar(
                "SELECT count(*) FROM (SELECT xmin::text FROM plaudit_events GROUP BY xmin::text "
                "HAVING count(DISTINCT split_part(id, '-', 1)) > 1) t"
            )
        assert shared > 0
    assert len(acked) > 100
