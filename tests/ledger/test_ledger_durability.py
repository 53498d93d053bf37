"""Real processes: parallel writers keep totals exact; kill -9 loses nothing acknowledged."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from plaudit import Plaudit

WRITER = """
import sys
from plaudit import Plaudit
db, tag, n, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
cats = ["successful_validation", "validation_failure", "pattern_reuse", "unused_variables"]
with Plaudit.open(db) as p:
    for i in range(n):
        if batch > 1:
            items = [{"category": cats[(i + j) % 4], "action": f"{tag} {i}.{j}"}
                     for j in range(batch)]
            for t in p.ledger.record_batch(items):
                print(t.id, t.points, flush=True)
        else:
            t = p.ledger.record(cats[i % 4], f"{tag} {i}", key=f"{tag}-{i}")
            print(t.id, t.points, flush=True)
"""


def _spawn(db: str, tag: str, n: int, batch: int = 1) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, db, tag, str(n), str(batch)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _check_exact(p: Plaudit, acknowledged: dict[str, int]) -> None:
    txs = p.ledger.transactions(10_000)
    by_id = {t.id: t for t in txs}
    assert set(acknowledged) <= set(by_id)
    ordered = sorted(txs, key=lambda t: t.seq)
    total = 0
    for t in ordered:  # each running total was computed under the lock, in log order
        total += t.points
        assert t.running_total == total
    assert p.ledger.score()["total_score"] == total
    report = p.ledger.verify()
    assert report["ok"], report


def test_parallel_writers_keep_totals_exact(db_url: str) -> None:
    with Plaudit.open(db_url) as p:
        p.ledger  # noqa: B018 - create the projection before the race
    procs = [_spawn(db_url, f"w{k}", 25, batch=1 + (k % 2) * 4) for k in range(4)]
    acknowledged: dict[str, int] = {}
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
        for line in out.splitlines():
            id_, pts = line.split()
            acknowledged[id_] = int(pts)
    assert len(acknowledged) == 2 * 25 + 2 * 25 * 5
    with Plaudit.open(db_url) as p:
        _check_exact(p, acknowledged)
        assert p.ledger.score()["total_score"] == sum(acknowledged.values())


def test_kill_9_mid_record_loses_nothing_acknowledged(db_url: str) -> None:
    with Plaudit.open(db_url) as p:
        p.ledger  # noqa: B018
    victims = [_spawn(db_url, f"k{k}", 100_000) for k in range(2)]
    acknowledged: dict[str, int] = {}
    deadline = time.monotonic() + 120
    for proc in victims:
        assert proc.stdout is not None
        got = 0
        while got < 40 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            id_, pts = line.split()
            acknowledged[id_] = int(pts)
            got += 1
    for proc in victims:
        os.kill(proc.pid, signal.SIGKILL)
    for proc in victims:
        out, _ = proc.communicate(timeout=30)
        for line in out.splitlines():  # acknowledged before the kill landed
            parts = line.split()
            if len(parts) == 2:
                acknowledged[parts[0]] = int(parts[1])
        assert proc.returncode == -signal.SIGKILL
    assert len(acknowledged) >= 80
    with Plaudit.open(db_url) as p:
        _check_exact(p, acknowledged)
        # the store keeps working after the crash
        t = p.ledger.record("pattern_reuse", "after the crash")
        assert t.running_total == p.ledger.score()["total_score"]
