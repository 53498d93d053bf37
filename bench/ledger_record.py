"""Ledger record throughput: batches through `record_batch`, and one transaction per call.

    .venv/bin/python bench/ledger_record.py
    .venv/bin/python bench/ledger_record.py --db postgresql://127.0.0.1:5432/test

Target (issue 15): at least 20,000 transactions/s recorded in batches on SQLite.

Every write runs the whole write path: validation, `log_verified` (today the log's full chain
verification), the quick checksum, the append, the automatic reconciliation. Two variants run
interleaved, round by round, each on a fresh store: `as shipped`, and `ledger only`, where
`log_verified` answers from a stub, which measures what the write path costs once the log's
incremental verification (issue 12) replaces the full one. Figures are medians of `--rounds`
rounds, CPU seconds beside wall seconds, with the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from plaudit import Plaudit
from plaudit.ledger import integrity, writing

CATS = ["successful_validation", "validation_failure", "pattern_reuse", "unused_variables"]


@contextmanager
def fresh_store(db: str | None, durability: str) -> Iterator[Plaudit]:
    if db and db.startswith("postgres"):
        import psycopg

        schema = f"bench_{uuid.uuid4().hex[:10]}"
        p = Plaudit.open(f"{db}{'&' if '?' in db else '?'}schema={schema}")
        try:
            yield p
        finally:
            p.close()
            with psycopg.connect(db, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        return
    with tempfile.TemporaryDirectory() as d:
        p = Plaudit.open(Path(d) / "bench.db", durability=durability)
        try:
            yield p
        finally:
            p.close()


def items(n: int, start: int = 0) -> list[dict[str, object]]:
    return [{"category": CATS[i % 4], "action": f"step {start + i}"} for i in range(n)]


@contextmanager
def stub_log_verified(active: bool) -> Iterator[None]:
    """Answer `log_verified` without reading the log (the `ledger only` variant)."""
    if not active:
        yield
        return

    def ok(p: Plaudit, *, full: bool = False) -> integrity.VerifyOutcome:
        return integrity.VerifyOutcome(ok=True, length=0, checked=0, head="")

    saved = writing.log_verified
    writing.log_verified = ok
    try:
        yield
    finally:
        writing.log_verified = saved


def timed(fn: Callable[[], int]) -> tuple[float, float, int]:
    c0, t0 = time.process_time(), time.perf_counter()
    n = fn()
    return time.perf_counter() - t0, time.process_time() - c0, n


def run_batched(p: Plaudit, n: int, batch: int) -> int:
    lg = p.ledger
    for k in range(0, n, batch):
        lg.record_batch(items(min(batch, n - k), k))
    return n


def run_single(p: Plaudit, n: int) -> int:
    lg = p.ledger
    for i in range(n):
        lg.record(CATS[i % 4], f"step {i}")
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=None, help="postgresql:// DSN (default: a temporary SQLite)")
    ap.add_argument("--single", type=int, default=500, help="transactions, one per call")
    ap.add_argument("--batched", type=int, default=100_000, help="transactions in batches")
    ap.add_argument("--batch", type=int, default=5_000, help="transactions per batch")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--durability", choices=["full", "normal"], default="full")
    a = ap.parse_args(argv)
    load0 = os.getloadavg()
    results: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    for _ in range(a.rounds):  # interleaved: every variant once per round
        for variant in ("as shipped", "ledger only"):
            for mode in ("batched", "single"):
                with (
                    fresh_store(a.db, a.durability) as p,
                    stub_log_verified(variant == "ledger only"),
                ):
                    if mode == "batched":
                        r = timed(lambda p=p: run_batched(p, a.batched, a.batch))
                    else:
                        r = timed(lambda p=p: run_single(p, a.single))
                results.setdefault((variant, mode), []).append(r)
    load1 = os.getloadavg()
    backend = "postgres" if a.db else f"sqlite (synchronous={a.durability})"
    print(f"backend: {backend}; median of {a.rounds} interleaved rounds")
    print(f"load average before {load0[0]:.2f}, after {load1[0]:.2f}")
    for (variant, mode), runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        n = runs[0][2]
        size = f"{a.batch}/batch, {n} per round" if mode == "batched" else f"{n} per round"
        print(
            f"{variant:<12} {mode:<8} {n / wall:>10,.0f} tx/s  wall {wall:6.2f} s  "
            f"cpu {cpu:6.2f} s  ({size})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
