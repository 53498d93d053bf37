"""`plaudit serve --workers N`: processes sharing one port, each with its own store handle.

Real servers, real signals: writes through any worker see every write acknowledged before
them, a worker killed with SIGKILL is replaced, and SIGTERM stops them all.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Collection
from pathlib import Path

import httpx2
import pytest

from plaudit import Plaudit
from plaudit.cli import main

pytestmark = pytest.mark.skipif(
    not hasattr(os, "fork") or not Path("/proc/self/stat").exists(),
    reason="--workers needs fork, and these tests find the workers through /proc (Linux)",
)

RECORD = {"category": "validation_failure", "action": "broke the build"}


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def workers_of(pid: int) -> dict[int, float]:
    """The supervisor's live children and the CPU seconds each has used."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        if fields and int(fields[1]) == pid and fields[0] != "Z":
            found[int(entry.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return found


def wait_for_workers(pid: int, n: int, *, other_than: Collection[int] = ()) -> dict[int, float]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = workers_of(pid)
        if len(found) == n and not set(found).intersection(other_than):
            return found
        time.sleep(0.05)
    raise AssertionError(f"expected {n} workers, found {workers_of(pid)}")


def record_many(url: str, threads: int, each: int) -> list[int]:
    """POSTs from several threads, each on a new connection, so every worker takes some."""
    totals: list[int] = []
    failures: list[str] = []

    def run() -> None:
        for _ in range(each):
            r = httpx2.post(f"{url}/v1/ledger/record", json=RECORD, timeout=30)
            if r.status_code != 200:
                failures.append(r.text)
            else:
                totals.append(r.json()["running_total"])

    pool = [threading.Thread(target=run) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not failures, failures[:3]
    return totals


def test_workers_serve_one_port_and_every_write_sees_the_ones_before(
    serve_factory, db_url: str
) -> None:
    srv = serve_factory(db_url, "--workers", "2")
    before = wait_for_workers(srv.proc.pid, 2)
    first = httpx2.post(f"{srv.url}/v1/ledger/record", json=RECORD).json()
    step = first["running_total"]
    assert step != 0

    totals = record_many(srv.url, threads=8, each=25)

    # Each of the 200 writes, whichever process took it, was sequenced after every write
    # acknowledged before it: the running totals are exactly the next 200 multiples, once each.
    assert sorted(totals, key=abs) == [step * k for k in range(2, 202)]
    score = httpx2.get(f"{srv.url}/v1/ledger/score").json()
    assert score["total_score"] == step * 201 and score["verified"] is True
    after = workers_of(srv.proc.pid)
    assert set(after) == set(before)
    busy = [pid for pid in after if after[pid] - before[pid] > 0]
    assert len(busy) == 2, "both workers should have answered requests"

    # A select sees the observe acknowledged just before it, on a new connection each time.
    for i in range(6):
        sel = httpx2.post(
            f"{srv.url}/v1/bandit/select",
            json={"arms": [{"id": "tool:exec:Bash", "tokens": 10}], "seed": i},
        ).json()
        httpx2.post(
            f"{srv.url}/v1/bandit/observe",
            json={"run_id": sel["run_id"], "tool_calls": [{"name": "Bash"}]},
        ).raise_for_status()
        arm = httpx2.get(f"{srv.url}/v1/bandit/arms/tool:exec:Bash").json()
        assert arm["global"]["pulls"] == i + 1, arm

    srv.proc.send_signal(signal.SIGTERM)
    assert srv.proc.wait(30) == 0
    assert workers_of(srv.proc.pid) == {}
    assert main(["log", "verify", "--db", db_url]) == 0


def test_a_killed_worker_is_replaced_and_nothing_acknowledged_is_lost(
    serve_factory, db_url: str
) -> None:
    srv = serve_factory(db_url, "--workers", "2")
    first = wait_for_workers(srv.proc.pid, 2)
    acked: list[str] = []
    stop = threading.Event()

    def write() -> None:
        while not stop.is_set():
            try:
                r = httpx2.post(f"{srv.url}/v1/ledger/record", json=RECORD)
            except httpx2.HTTPError:
                continue  # the connection died with the worker: not acknowledged
            if r.status_code == 200:
                acked.append(r.json()["id"])

    writers = [threading.Thread(target=write) for _ in range(4)]
    for t in writers:
        t.start()
    time.sleep(1.0)
    victim = min(first)
    os.kill(victim, signal.SIGKILL)
    now = wait_for_workers(srv.proc.pid, 2, other_than={victim})
    time.sleep(1.0)
    stop.set()
    for t in writers:
        t.join()
    assert victim not in now
    out = srv.stop()
    assert srv.proc.returncode == 0
    assert "exited (status -9); starting it again" in out, out

    assert len(acked) >= 5
    with Plaudit.open(db_url, create=False) as p:
        txs = p.ledger.transactions(len(acked) + 100)
        ids = [t.id for t in txs]
        assert set(acked) <= set(ids)  # every acknowledged write is there
        assert len(ids) == len(set(ids))  # and once
        # The running totals are whole: each is the one before it plus its points.
        ordered = sorted(txs, key=lambda t: t.seq)
        assert [t.running_total for t in ordered] == [
            sum(t.points for t in ordered[: k + 1]) for k in range(len(ordered))
        ]
        assert p.log.verify().ok


def test_workers_that_keep_failing_to_start_stop_the_supervisor(capsys) -> None:
    from plaudit.server.workers import MAX_QUICK_EXITS, listen, run_workers

    def broken(index: int, sock: object) -> None:
        raise RuntimeError(f"worker {index} cannot open its store")

    sock = listen("127.0.0.1", 0)
    try:
        started = time.monotonic()
        status = run_workers(sock, 2, broken, log=print)
    finally:
        sock.close()
    assert status == 1
    assert time.monotonic() - started < 30
    out = capsys.readouterr().out
    assert f"exited {MAX_QUICK_EXITS} times within" in out
    assert "starting it again" in out  # it was given its chances first


def test_a_store_that_cannot_be_made_fails_before_any_worker_starts(tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code = main(["serve", "--db", str(blocker / "x.db"), "--port", "0", "--workers", "2"])
    err = capsys.readouterr().err
    assert code != 0
    assert "Traceback" not in err
    assert "workers on one port" not in err  # no worker was started
    assert blocker.read_text() == "not a directory"


def test_workers_out_of_range_are_refused(tmp_path: Path, capsys) -> None:
    code = main(["serve", "--db", str(tmp_path / "x.db"), "--workers", "0"])
    assert code == 2
    assert "--workers" in capsys.readouterr().err
    assert not (tmp_path / "x.db").exists()
