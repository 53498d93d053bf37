"""No lost updates: concurrent observers in threads and in processes, on both backends, and
acknowledged observations survive kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from plaudit import Plaudit

RUNS = 40

WORKER = textwrap.dedent(
    """
    import sys
    from plaudit import Plaudit

    db, *run_ids = sys.argv[1:]
    with Plaudit.open(db) as p:
        for run_id in run_ids:
            p.bandit.observe(run_id, "ran it", tool_calls=[{"name": "Bash"}])
    """
)

KILLED = textwrap.dedent(
    """
    import sys
    from plaudit import Plaudit

    arms = [{"id": "tool:exec:Bash", "tokens": 100}, {"id": "tool:fs:Read", "tokens": 200}]
    with Plaudit.open(sys.argv[1]) as p:
        i = 0
        while True:
            sel = p.bandit.select(arms, seed=i, context="c" + str(i % 3))
            p.bandit.observe(sel.run_id, "x", tool_calls=[{"name": "Bash"}])
            print(sel.run_id, flush=True)  # acknowledged: both events committed
            i += 1
    """
)


SELECTS = textwrap.dedent(
    """
    import sys
    from plaudit import Plaudit

    arms = [{"id": "tool:exec:Bash", "tokens": 100}, {"id": "tool:fs:Read", "tokens": 200}]
    with Plaudit.open(sys.argv[1]) as p:
        i = 0
        while True:
            sel = p.bandit.select(arms, seed=i, context="c" + str(i % 3))
            print(sel.run_id, flush=True)  # acknowledged: its (unflushed) commit returned
            i += 1
    """
)


def _prepare(p: Plaudit, arms: list[dict]) -> list[str]:
    p.bandit.configure(baseline_rate=1.0)  # every run includes every arm
    return [p.bandit.select(arms, seed=i, context="ctx").run_id for i in range(RUNS)]


def _check_no_lost_updates(p: Plaudit, arms: list[dict]) -> None:
    for scope in (None, "ctx"):
        post = {s.id: s for s in p.bandit.posteriors(scope)}
        for a in arms:
            assert post[a["id"]].pulls == RUNS, (scope, a["id"])
    g = {s.id: s for s in p.bandit.posteriors()}
    assert (g["tool:exec:Bash"].alpha, g["tool:exec:Bash"].beta) == (0.75 + RUNS, 0.25)
    assert (g["tool:web:WebSearch"].alpha, g["tool:web:WebSearch"].beta) == (0.75, 0.25 + RUNS)
    assert p.log.verify().ok


def test_threads_never_lose_updates(db_url: str, arms) -> None:
    with Plaudit.open(db_url) as p:
        run_ids = _prepare(p, arms)
        errors: list[BaseException] = []
        barrier = threading.Barrier(4)

        def work(chunk: list[str]) -> None:
            try:
                barrier.wait()
                for rid in chunk:
                    p.bandit.observe(rid, "ran it", tool_calls=[{"name": "Bash"}])
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(run_ids[i::4],)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        _check_no_lost_updates(p, arms)


def test_processes_never_lose_updates(db_url: str, arms, tmp_path: Path) -> None:
    with Plaudit.open(db_url) as p:
        run_ids = _prepare(p, arms)
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    procs = [
        subprocess.Popen([sys.executable, str(script), db_url, *run_ids[i::4]]) for i in range(4)
    ]
    assert [proc.wait(timeout=120) for proc in procs] == [0, 0, 0, 0]
    with Plaudit.open(db_url) as p:
        _check_no_lost_updates(p, arms)


def test_same_run_observed_concurrently_counts_once(db_url: str, arms) -> None:
    with Plaudit.open(db_url) as p:
        run_ids = _prepare(p, arms)[:1]
        results: list[str] = []

        def work() -> None:
            results.append(
                p.bandit.observe(run_ids[0], "ran", tool_calls=[{"name": "Bash"}]).status
            )

        threads = [threading.Thread(target=work) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results) == ["appended"] + ["present"] * 5
        assert {s.id: s for s in p.bandit.posteriors()}["tool:exec:Bash"].pulls == 1


def test_kill_9_loses_no_acknowledged_observation(db_url: str, tmp_path: Path, posterior_table):
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    proc = subprocess.Popen(
        [sys.executable, str(script), db_url], stdout=subprocess.PIPE, text=True
    )
    acked: list[str] = []
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while len(acked) < 25 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        acked.append(line.strip())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert len(acked) >= 25
    with Plaudit.open(db_url) as p:
        assert p.log.verify().ok
        for rid in acked:
            assert p.bandit.run(rid)["observation"] is not None
        bash = {s.id: s for s in p.bandit.posteriors()}["tool:exec:Bash"]
        observed = sum(1 for _ in p.log.replay(types=["plaudit.bandit.observation"]))
        assert bash.pulls == observed >= len(acked)
        before = posterior_table(p)
        p.rebuild()
        assert posterior_table(p) == before


def test_kill_9_loses_no_acknowledged_select(db_url: str, tmp_path: Path) -> None:
    """A select's run commits without an fsync of its own (docs/bandit.md, "Durability"), but
    a killed process still keeps every acknowledged run, and each can then be observed."""
    script = tmp_path / "selects.py"
    script.write_text(SELECTS)
    proc = subprocess.Popen(
        [sys.executable, str(script), db_url], stdout=subprocess.PIPE, text=True
    )
    acked: list[str] = []
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while len(acked) < 40 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        acked.append(line.strip())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert len(acked) >= 40
    with Plaudit.open(db_url) as p:
        assert p.log.verify().ok
        for rid in acked:
            assert p.bandit.run(rid)["observation"] is None
            assert p.bandit.observe(rid, "x", tool_calls=[{"name": "Bash"}]).updated


def test_a_reading_process_stays_exact_while_others_observe(db_url: str, arms, tmp_path: Path):
    """A long-lived reader folds pending observations and takes checkpoints that other
    processes write, while they write: what it ends with equals a fresh reader's view, and
    no update is lost."""
    with Plaudit.open(db_url) as p:
        run_ids = _prepare(p, arms)
        script = tmp_path / "worker.py"
        script.write_text(WORKER)
        procs = [
            subprocess.Popen([sys.executable, str(script), db_url, *run_ids[i::3]])
            for i in range(3)
        ]
        reads = 0
        while any(proc.poll() is None for proc in procs):
            p.bandit.posteriors("ctx")
            p.bandit.posteriors()
            reads += 1
        assert [proc.wait(timeout=120) for proc in procs] == [0, 0, 0]
        assert reads > 0
        _check_no_lost_updates(p, arms)
        mine = {c: p.bandit.posteriors(c) for c in (None, "ctx")}
        with Plaudit.open(db_url) as fresh:
            assert {c: fresh.bandit.posteriors(c) for c in (None, "ctx")} == mine
