"""`ledger score` at N transactions (default 1,000,000), with no session ever started.

    .venv/bin/python bench/ledger_score.py
    .venv/bin/python bench/ledger_score.py --db postgresql://127.0.0.1:5432/test --n 200000

Target (issue 15): `ledger score` in at most 50 ms at 1M transactions. `Ledger.score()` asks
`log_verified` for its `verified` flag, which today verifies the whole chain; the other parts
(totals, metrics, session, the 200-point trend, the quick checksum) are timed on their own as
`score without the log check`, which is what `score()` costs once the log's incremental
verification (issue 12) answers that question. Medians of `--rounds` interleaved runs, CPU
beside wall, with the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from ledger_record import fresh_store, items
from plaudit.ledger import integrity, queries


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=None, help="postgresql:// DSN (default: a temporary SQLite)")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args(argv)
    with fresh_store(a.db, "normal") as p:
        lg = p.ledger
        t0 = time.perf_counter()
        for k in range(0, a.n, a.batch):
            lg.record_batch(items(min(a.batch, a.n - k), k))
        fill = time.perf_counter() - t0
        ok = integrity.VerifyOutcome(ok=True, length=0, checked=0, head="")

        def rest() -> dict:
            with p.backend.read() as tx:
                return queries.score(tx, lg.config, ok)

        variants = {
            "score() as shipped": lg.score,
            "score without the log check": rest,
            "log_verified alone": lambda: integrity.log_verified(p),
        }
        runs: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
        load0 = os.getloadavg()
        for _ in range(a.rounds):
            for name, fn in variants.items():
                c0, w0 = time.process_time(), time.perf_counter()
                out = fn()
                runs[name].append((time.perf_counter() - w0, time.process_time() - c0))
                if isinstance(out, dict):
                    assert out["transactions"] == a.n and len(out["trend"]) <= 200
        load1 = os.getloadavg()
    backend = "postgres" if a.db else "sqlite"
    print(f"backend: {backend}, {a.n:,} transactions (filled in {fill:.0f}s), no session")
    print(f"median of {a.rounds} interleaved runs; load average {load0[0]:.2f} -> {load1[0]:.2f}")
    for name, r in runs.items():
        wall = statistics.median(x[0] for x in r) * 1000
        cpu = statistics.median(x[1] for x in r) * 1000
        print(f"{name:<30} wall {wall:9.1f} ms  cpu {cpu:9.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
