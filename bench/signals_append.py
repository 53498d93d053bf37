"""Benchmark: appending router events, which the `signals` projection folds in as they come.

    python bench/signals_append.py --runs 5 [--baseline-src PATH/TO/other/src] [--pg]

Batch append: --events router decisions, outcomes and overrides (`common.router_events`, as in
`log_bench.py`) appended in batches of 1,000 to a fresh SQLite store (`synchronous=FULL`);
reports events/s, events per CPU-second, and the CPU time the projection's `apply` took per
event. Single appends (`--pg`: also on PostgreSQL at $PLAUDIT_BENCH_PG): --single events one
`append` at a time, p50 and p99 latency. Each run is a child process; with --baseline-src the
same runs are made from another tree's `src` (say, the branch point's), interleaved.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PG = os.environ.get("PLAUDIT_BENCH_PG", "postgresql://127.0.0.1:5432/test")

CHILD = r"""
import json, sys, tempfile, time, uuid
src, bench, mode, backend, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
sys.path[:0] = [src, bench]
from common import router_events
from plaudit import Plaudit
from plaudit.events import coerce_event
import plaudit.builtins  # registers the projections
import plaudit.signals.projection as sp

spent = [0.0]
apply = sp.SignalsProjection.apply
def timed(self, tx, events):
    c = time.process_time()
    try:
        return apply(self, tx, events)
    finally:
        spent[0] += time.process_time() - c
sp.SignalsProjection.apply = timed
events = [coerce_event(e) for e in router_events(n, prefix=uuid.uuid4().hex[:8])]
schema = None
if backend == "sqlite":
    where = tempfile.mkdtemp(prefix="plaudit-bench-append-") + "/s.db"
else:
    schema = "bench_" + uuid.uuid4().hex[:10]
    where = backend + ("&" if "?" in backend else "?") + "schema=" + schema
out = {}
try:
    with Plaudit.open(where) as p:
        if mode == "batch":
            t, c = time.perf_counter(), time.process_time()
            for i in range(0, n, 1000):
                p.log.append_batch(events[i:i + 1000])
            wall, cpu = time.perf_counter() - t, time.process_time() - c
            out = {"rate": n / wall, "cpu_rate": n / cpu, "apply_us": spent[0] / n * 1e6}
        else:
            lat = []
            for e in events:
                t = time.perf_counter()
                p.log.append(e)
                lat.append((time.perf_counter() - t) * 1000)
            lat.sort()
            out = {"p50": lat[len(lat) // 2], "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
                   "apply_us": spent[0] / n * 1e6}
finally:
    if schema is not None:
        import psycopg
        with psycopg.connect(backend, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
print(json.dumps(out))
"""


def child(src: str, mode: str, backend: str, n: int) -> dict[str, float]:
    r = subprocess.run(
        [sys.executable, "-c", CHILD, src, str(HERE), mode, backend, str(n)],
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        raise SystemExit(f"run failed ({src}, {mode}, {backend}):\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--single", type=int, default=1_000)
    ap.add_argument("--baseline-src", help="another tree's src directory, run the same way")
    ap.add_argument("--pg", action="store_true", help="also single appends on PostgreSQL")
    args = ap.parse_args()
    trees = {"this tree": str(HERE.parent / "src")}
    if args.baseline_src:
        trees["baseline"] = str(Path(args.baseline_src).resolve())
    cases = [("batch", "sqlite", args.events), ("single", "sqlite", args.single)]
    if args.pg:
        cases.append(("single", PG, args.single))
    results: dict[tuple[str, str, str], list[dict[str, float]]] = {}
    for _ in range(args.runs):
        for mode, backend, n in cases:
            for tag, src in trees.items():  # interleaved
                results.setdefault((tag, mode, backend), []).append(child(src, mode, backend, n))
    load = os.getloadavg()
    print(f"\nmedians of {args.runs} runs; load average at the end {load[0]:.1f}\n")
    print("| tree | case | events/s | events per CPU-s | p50 ms | p99 ms | apply CPU µs/event |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for (tag, mode, backend), runs in results.items():

        def med(key: str, runs: list[dict[str, float]] = runs) -> float | None:
            values = [r[key] for r in runs if key in r]
            return statistics.median(values) if values else None

        name = "sqlite" if backend == "sqlite" else "postgres"
        cells = [f"{v:,.0f}" if v is not None else "" for v in (med("rate"), med("cpu_rate"))] + [
            f"{v:.3f}" if v is not None else "" for v in (med("p50"), med("p99"))
        ]
        print(f"| {tag} | {mode} {name} | {' | '.join(cells)} | {med('apply_us'):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
