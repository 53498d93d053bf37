"""Many threads appending to one SQLite store: SQLite's busy handler vs plaudit's write queue.

This is the situation inside `plaudit serve`: up to 40 worker threads, one SQLite writer. Each
thread appends as fast as it can for a few seconds; the script reports appends per second and
the p50/p99 latency of one append, for a backend left to SQLite's busy handler (threads
that find the lock taken are put to sleep by SQLite) and for plaudit's `SqliteBackend`, whose
threads queue on an in-process lock first. Medians over `--runs`, alternating the two.

    python bench/http_sqlite_writers.py --threads 40 --seconds 4 --runs 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from contextlib import nullcontext
from pathlib import Path

from plaudit import Plaudit, make_event
from plaudit.store.sqlite import SqliteBackend


class BusyHandlerBackend(SqliteBackend):
    """plaudit's SQLite backend without its in-process write queue."""

    def __init__(self, path: Path, *, durability: str = "full") -> None:
        super().__init__(path, durability=durability)  # type: ignore[arg-type]
        self._write_turn = nullcontext()  # type: ignore[assignment]


def one_run(serialized: bool, threads: int, seconds: float, durability: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        cls = SqliteBackend if serialized else BusyHandlerBackend
        p = Plaudit(cls(path, durability=durability))  # type: ignore[arg-type]
        latencies: list[float] = []
        lock = threading.Lock()
        stop = time.perf_counter() + seconds

        def writer() -> None:
            mine = []
            while time.perf_counter() < stop:
                t = time.perf_counter()
                p.log.append(make_event("bench.writer.v1", {"a": 1}))
                mine.append(time.perf_counter() - t)
            with lock:
                latencies.extend(mine)

        pool = [threading.Thread(target=writer) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        p.close()
    latencies.sort()
    return {
        "appends_per_s": len(latencies) / seconds,
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=40)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--durability", choices=["full", "normal"], default="full")
    args = ap.parse_args()
    results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for _ in range(args.runs):
        for serialized in (False, True):
            results[serialized].append(
                one_run(serialized, args.threads, args.seconds, args.durability)
            )
    print("| writers | threads | appends/s | p50 ms | p99 ms |")
    print("|---|---:|---:|---:|---:|")
    for serialized, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        name = "in-process lock (plaudit serve)" if serialized else "SQLite busy handler"
        print(
            f"| {name} | {args.threads} | {med['appends_per_s']:.0f} "
            f"| {med['p50_ms']:.2f} | {med['p99_ms']:.1f} |"
        )


if __name__ == "__main__":
    main()
