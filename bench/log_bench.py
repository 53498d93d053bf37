"""Benchmarks of the event log: batch append, single-append latency, verify, seq_mem import.

    .venv/bin/python bench/log_bench.py                 # everything, medians of several runs
    .venv/bin/python bench/log_bench.py --only import   # one section (append, latency,
                                                        # verify, import; comma-separated)
    .venv/bin/python bench/log_bench.py --quick         # smaller sizes, for a smoke run

Prints Markdown tables. PostgreSQL runs use a fresh schema on $PLAUDIT_BENCH_PG (default
postgresql://127.0.0.1:5432/test), dropped afterwards; they are skipped when no server answers.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import median, percentile, router_events, run_child, table, write_seq_mem
from plaudit import Plaudit
from plaudit.events import Event, coerce_event

PG = os.environ.get("PLAUDIT_BENCH_PG", "postgresql://127.0.0.1:5432/test")

IMPORT_CHILD = r"""
import json, resource, sys, time
from plaudit import Plaudit
from plaudit.seqmem import import_file
db, path = sys.argv[1], sys.argv[2]
t = time.perf_counter()
with Plaudit.open(db) as p:
    r = import_file(p.log, path)
wall = time.perf_counter() - t
# ru_maxrss survives exec on Linux, so a child of a big parent starts with the parent's peak;
# VmHWM is this process image's own high-water mark. Report both; the table uses VmHWM.
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall": wall, "imported": r.imported, "quarantined": r.quarantined,
                  "cpu": ru.ru_utime + ru.ru_stime, "peak_rss_mb": hwm / 1024,
                  "ru_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def pg_available() -> bool:
    try:
        import psycopg

        with psycopg.connect(PG, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
        return True
    except Exception:  # any failure means "no server here"
        return False


@contextmanager
def store(kind: str, tmp: Path, **kw: Any) -> Iterator[Plaudit]:
    """A fresh store of `kind` ("sqlite" or "postgres"), removed afterwards."""
    if kind == "sqlite":
        path = tmp / f"{uuid.uuid4().hex}.db"
        with Plaudit.open(path, **kw) as p:
            yield p
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    sep = "&" if "?" in PG else "?"
    p = Plaudit.open(f"{PG}{sep}schema={schema}")
    try:
        yield p
    finally:
        p.close()
        import psycopg

        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def built_events(n: int, prefix: str) -> list[Event]:
    """Events as a library caller holds them (built with `make_event` or from a dict)."""
    return [coerce_event(e) for e in router_events(n, prefix=prefix)]


def bench_append(kinds: list[str], n: int, runs: int, tmp: Path) -> str:
    rows = []
    for kind, kw in kinds_with_durability(kinds):
        rates, cpu_rates = [], []
        for r in range(runs):
            events = built_events(n, f"r{r}")
            with store(kind, tmp, **kw) as p:
                t, c = time.perf_counter(), time.process_time()
                for i in range(0, n, 1000):
                    p.log.append_batch(events[i : i + 1000])
                rates.append(n / (time.perf_counter() - t))
                cpu_rates.append(n / (time.process_time() - c))
                assert len(p.log) == n
        label = f"{kind} ({kw.get('durability', 'full')})" if kind == "sqlite" else kind
        # SQLite works in this process, so its CPU time is all of the work: events per
        # CPU-second is what one free core would sustain, whatever else the machine runs.
        cpu = f"{median(cpu_rates):,.0f}" if kind == "sqlite" else "n/a (server)"
        span = f"{min(rates):,.0f}–{max(rates):,.0f}"
        rows.append((label, f"{n:,}", runs, f"{median(rates):,.0f}", span, cpu))
    headers = ["backend", "events/run", "runs", "median events/s", "range", "events per CPU-s"]
    return table(headers, rows)


def kinds_with_durability(kinds: list[str]) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for k in kinds:
        if k == "sqlite":
            out += [("sqlite", {}), ("sqlite", {"durability": "normal"})]
        else:
            out.append((k, {}))
    return out


def bench_latency(kinds: list[str], n: int, runs: int, tmp: Path) -> str:
    rows = []
    for kind, kw in kinds_with_durability(kinds):
        p50s, p99s = [], []
        for r in range(runs):
            events = built_events(n, f"l{r}")
            with store(kind, tmp, **kw) as p:
                lat = []
                for e in events:
                    t = time.perf_counter()
                    p.log.append(e)
                    lat.append((time.perf_counter() - t) * 1000)
            p50s.append(percentile(lat, 50))
            p99s.append(percentile(lat, 99))
        label = f"{kind} ({kw.get('durability', 'full')})" if kind == "sqlite" else kind
        rows.append((label, f"{n:,}", runs, f"{median(p50s):.3f}", f"{median(p99s):.3f}"))
    return table(["backend", "appends/run", "runs", "p50 ms (median)", "p99 ms (median)"], rows)


def timed(f: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def bench_verify(db: Path | None, kinds: list[str], n: int, runs: int, tmp: Path) -> str:
    rows = []
    if "sqlite" in kinds:
        owned = db is None
        if db is None:
            db = tmp / "verify.db"
            with Plaudit.open(db, durability="normal") as p:
                events = built_events(n, "v")
                for i in range(0, n, 5000):
                    p.log.append_batch(events[i : i + 5000])
        with Plaudit.open(db) as p:
            length = len(p.log)
            for workers in (1, 2):
                rates, cpu_rates = [], []
                for _ in range(runs):
                    c = time.process_time()
                    dt, report = timed(lambda w=workers: p.log.verify(workers=w))
                    cpu_rates.append(length / (time.process_time() - c))
                    assert report.ok, report
                    rates.append(length / dt)
                # With a worker process, this process's CPU time is only part of the work.
                cpu = f"{median(cpu_rates):,.0f}" if workers == 1 else "n/a (2 processes)"
                rows.append((*row_for("sqlite", workers, length, runs, rates), cpu))
        if owned:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
    if "postgres" in kinds:
        pg_n = min(n, 200_000)
        with store("postgres", tmp) as p:
            events = built_events(pg_n, "v")
            for i in range(0, pg_n, 5000):
                p.log.append_batch(events[i : i + 5000])
            for workers in (1, 2):
                rates = []
                for _ in range(runs):
                    dt, report = timed(lambda w=workers: p.log.verify(workers=w))
                    assert report.ok, report
                    rates.append(pg_n / dt)
                rows.append((*row_for("postgres", workers, pg_n, runs, rates), "n/a (server)"))
    headers = ["backend", "workers", "events", "runs", "median events/s", "range"]
    return table([*headers, "events per CPU-s"], rows)


def row_for(kind: str, workers: int, n: int, runs: int, rates: list[float]) -> tuple[Any, ...]:
    span = f"{min(rates):,.0f}–{max(rates):,.0f}"
    return (kind, workers, f"{n:,}", runs, f"{median(rates):,.0f}", span)


def bench_import(lines: int, runs: int, tmp: Path) -> tuple[str, Path]:
    src = write_seq_mem(tmp / "seq_mem.jsonl", lines)
    size_mb = src.stat().st_size / 1e6
    walls, rss, cpus = [], [], []
    keep = tmp / "import-keep.db"
    for r in range(runs):
        db = keep if r == runs - 1 else tmp / f"import-{r}.db"
        result = run_child(IMPORT_CHILD, str(db), str(src))
        assert result["imported"] == lines and result["quarantined"] == 0, result
        walls.append(result["wall"])
        rss.append(result["peak_rss_mb"])
        cpus.append(result["cpu"])
        if db != keep:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
    src.unlink()
    out = table(
        [
            "lines",
            "file MB",
            "runs",
            "median wall s",
            "range s",
            "median CPU s",
            "median peak RSS MB",
            "lines/s",
        ],
        [
            (
                f"{lines:,}",
                f"{size_mb:,.0f}",
                runs,
                f"{median(walls):.2f}",
                f"{min(walls):.2f}–{max(walls):.2f}",
                f"{median(cpus):.2f}",
                f"{median(rss):.0f}",
                f"{lines / median(walls):,.0f}",
            )
        ],
    )
    return out, keep


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--only", default="append,latency,import,verify")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    ap.add_argument("--no-pg", action="store_true", help="SQLite only")
    args = ap.parse_args()
    only = set(args.only.split(","))
    kinds = ["sqlite"] + ([] if args.no_pg or not pg_available() else ["postgres"])
    n_append = 20_000 if args.quick else 100_000
    n_latency = 200 if args.quick else 1_000
    n_import = 20_000 if args.quick else 1_000_000
    import_runs = min(args.runs, 3)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, backends {kinds}")
    print(f"load average at start: {load}\n")
    with tempfile.TemporaryDirectory(prefix="plaudit-bench-", dir=os.environ.get("TMPDIR")) as d:
        tmp = Path(d)
        if "append" in only:
            res = bench_append(kinds, n_append, args.runs, tmp)
            print(f"## Batch append (batches of 1,000)\n\n{res}\n")
        if "latency" in only:
            res = bench_latency(kinds, n_latency, args.runs, tmp)
            print(f"## Single-event append latency\n\n{res}\n")
        imported: Path | None = None
        if "import" in only:
            text, imported = bench_import(n_import, import_runs, tmp)
            title = "seq_mem.jsonl import (in a child process; peak RSS = its VmHWM)"
            print(f"## {title}\n\n{text}\n")
        if "verify" in only:
            note = "the imported log" if imported else f"{n_import:,} appended events"
            res = bench_verify(imported, kinds, n_import, args.runs, tmp)
            print(f"## Verify ({note})\n\n{res}\n")
    print(f"load average at end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
