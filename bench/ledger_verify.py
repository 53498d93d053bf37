"""Verify + recalculate time for a ledger of N transactions (default 1,000,000).

    .venv/bin/python bench/ledger_verify.py
    .venv/bin/python bench/ledger_verify.py --db postgresql://127.0.0.1:5432/test --n 200000

Fills a fresh store through `record_batch`, then times `Ledger.verify()`: the log's full hash
chain verification plus every total recalculated from the log and compared with the stored
totals and projected rows. Figures are medians over `--rounds` runs on the same store; the
parts (chain, recalculation) are timed separately as well.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from ledger_record import fresh_store, items
from plaudit.ledger.integrity import full_sums


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=None, help="postgresql:// DSN (default: a temporary SQLite)")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=5_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--full", action="store_true", help="recalculate from the start, ignoring checkpoints"
    )
    a = ap.parse_args(argv)
    with fresh_store(a.db, "normal") as p:
        lg = p.ledger
        t0 = time.perf_counter()
        for k in range(0, a.n, a.batch):
            lg.record_batch(items(min(a.batch, a.n - k), k))
        fill = time.perf_counter() - t0
        whole, full, chain, recalc = [], [], [], []
        for _ in range(a.rounds):
            t0 = time.perf_counter()
            report = lg.verify()
            whole.append(time.perf_counter() - t0)
            assert report["ok"], report
            t0 = time.perf_counter()
            report = lg.verify(full=True)
            full.append(time.perf_counter() - t0)
            assert report["ok"], report
            t0 = time.perf_counter()
            p.log.verify()
            chain.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            with p.backend.read() as tx:
                sums = full_sums(tx)
            recalc.append(time.perf_counter() - t0)
        assert sums["count"] == a.n
    backend = "postgres" if a.db else "sqlite"
    print(f"backend: {backend}, {a.n:,} transactions (filled in {fill:.1f}s), median of {a.rounds}")
    print(f"verify + recalculate (Ledger.verify):             {statistics.median(whole):.2f} s")
    print(f"verify + recalculate from the start (full=True):  {statistics.median(full):.2f} s")
    print(f"  log hash-chain verification alone:              {statistics.median(chain):.2f} s")
    print(f"  every total recalculated from the log alone:    {statistics.median(recalc):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
