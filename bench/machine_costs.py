"""What this machine charges for the primitives a served request is made of.

The served select+observe benchmark spends most of its CPU outside plaudit's own arithmetic:
hand-offs between threads (the event loop and the request's worker thread), round trips to
PostgreSQL (another process to wake), and commits that wait for the disk. Their price depends
on the machine (a virtual CPU woken from another one costs far more than a core of a bare
machine), so a per-request figure from one machine does not carry to another. This script
prices each primitive, so two machines can be compared before their benchmark figures are.

    .venv/bin/python bench/machine_costs.py
    .venv/bin/python bench/machine_costs.py --db postgresql://127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import os
import queue
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable


def timed(fn: Callable[[], None], n: int, rounds: int = 5) -> tuple[float, float]:
    """Median over `rounds` of (wall, CPU) microseconds per call."""
    walls, cpus = [], []
    for _ in range(rounds):
        w, c = time.perf_counter(), time.process_time()
        for _ in range(n):
            fn()
        walls.append((time.perf_counter() - w) / n * 1e6)
        cpus.append((time.process_time() - c) / n * 1e6)
    return statistics.median(walls), statistics.median(cpus)


def python_loop() -> tuple[float, float]:
    return timed(lambda: sum(range(100_000)), 20)


def thread_round_trip() -> tuple[float, float]:
    """One request handed to another thread and its answer handed back."""
    ask: queue.SimpleQueue[int] = queue.SimpleQueue()
    answer: queue.SimpleQueue[int] = queue.SimpleQueue()

    def serve() -> None:
        while (x := ask.get()) >= 0:
            answer.put(x)

    t = threading.Thread(target=serve, daemon=True)
    t.start()

    def one() -> None:
        ask.put(1)
        answer.get()

    result = timed(one, 2000)
    ask.put(-1)
    t.join()
    return result


def anyio_hop() -> tuple[float, float]:
    """What a plain `def` route costs to reach its worker thread and come back."""
    import anyio.to_thread

    n = 2000

    async def main() -> tuple[float, float]:
        for _ in range(100):
            await anyio.to_thread.run_sync(int)
        walls, cpus = [], []
        for _ in range(5):
            w, c = time.perf_counter(), time.process_time()
            for _ in range(n):
                await anyio.to_thread.run_sync(int)
            walls.append((time.perf_counter() - w) / n * 1e6)
            cpus.append((time.process_time() - c) / n * 1e6)
        return statistics.median(walls), statistics.median(cpus)

    return asyncio.run(main())


def fsync_commit() -> tuple[float, float]:
    import sqlite3

    with tempfile.TemporaryDirectory() as d:
        conn = sqlite3.connect(os.path.join(d, "f.db"), isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE t (x INTEGER)")

        def one() -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t VALUES (1)")
            conn.execute("COMMIT")

        result = timed(one, 200)
        conn.close()
        return result


def pg_round_trip(dsn: str) -> tuple[float, float]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(200):
            conn.execute("SELECT 1").fetchone()
        return timed(lambda: conn.execute("SELECT 1").fetchone(), 2000)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default=None, help="a PostgreSQL DSN to price a round trip on")
    args = ap.parse_args()
    rows = [
        ("Python loop: sum(range(100,000))", python_loop()),
        ("thread round trip (two hand-offs, SimpleQueue)", thread_round_trip()),
        ("anyio worker-thread hop (a `def` route's)", anyio_hop()),
        ("SQLite WAL commit, synchronous=FULL (one fsync)", fsync_commit()),
    ]
    if args.db:
        rows.append(("PostgreSQL round trip (SELECT 1, autocommit)", pg_round_trip(args.db)))
    print("| primitive | wall us | CPU us (this process) |")
    print("|---|---:|---:|")
    for name, (wall, cpu) in rows:
        print(f"| {name} | {wall:,.1f} | {cpu:,.1f} |")
    print(f"\nmedian of 5 rounds each; load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
