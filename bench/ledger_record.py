"""Ledger record throughput: one transaction per call, and batches through `record_batch`.

    .venv/bin/python bench/ledger_record.py
    .venv/bin/python bench/ledger_record.py --db postgresql://127.0.0.1:5432/test

Each figure is the median over `--rounds` rounds, each on a fresh store (SQLite in a temporary
directory; PostgreSQL in a fresh schema, dropped afterwards).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from plaudit import Plaudit

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


def run_single(p: Plaudit, n: int) -> float:
    lg = p.ledger
    t0 = time.perf_counter()
    for i in range(n):
        lg.record(CATS[i % 4], f"step {i}")
    return n / (time.perf_counter() - t0)


def run_batched(p: Plaudit, n: int, batch: int) -> float:
    lg = p.ledger
    chunks = [items(batch, k) for k in range(0, n, batch)]
    t0 = time.perf_counter()
    for chunk in chunks:
        lg.record_batch(chunk)
    return n / (time.perf_counter() - t0)


def median_of(
    rounds: int, db: str | None, durability: str, fn: Callable[[Plaudit], float]
) -> float:
    rates = []
    for _ in range(rounds):
        with fresh_store(db, durability) as p:
            rates.append(fn(p))
    return statistics.median(rates)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=None, help="postgresql:// DSN (default: a temporary SQLite)")
    ap.add_argument("--single", type=int, default=2_000, help="transactions, one per call")
    ap.add_argument("--batched", type=int, default=100_000, help="transactions in batches")
    ap.add_argument("--batch", type=int, default=1_000, help="transactions per batch")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--durability", choices=["full", "normal"], default="full")
    a = ap.parse_args(argv)
    backend = "postgres" if a.db else f"sqlite (synchronous={a.durability})"
    single = median_of(a.rounds, a.db, a.durability, lambda p: run_single(p, a.single))
    batched = median_of(a.rounds, a.db, a.durability, lambda p: run_batched(p, a.batched, a.batch))
    print(f"backend: {backend}, median of {a.rounds} rounds")
    print(f"record, one per call:        {single:>10,.0f} transactions/s ({a.single} per round)")
    print(
        f"record_batch ({a.batch}/batch): {batched:>10,.0f} transactions/s ({a.batched} per round)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
