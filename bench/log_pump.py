"""Writers each on their own on PostgreSQL (as on separate hosts): the pump's passes, measured.

    .venv/bin/python bench/log_pump.py --writers 8 --runs 5
    .venv/bin/python bench/log_pump.py --writers 2 --runs 1 --seconds 3 --statements
    PYTHONPATH=<other tree>/src .venv/bin/python bench/log_pump.py ...

Each of `--writers` processes opens the store with `PLAUDIT_HOST_GROUP=0` and appends single
events through `log.append` for `--seconds`. Appends that find the lease taken go through the
intake, and whichever process runs the pump gives them positions in passes. In every process
`PostgresSequencer._pump_pass` is wrapped to time each pass (wall and the pump thread's CPU)
and count the events it took; with `--statements`, psycopg's `Cursor.execute` is wrapped too,
to count the statements sent, by kind: the pump thread's per pass that took events (an empty
pass's statements count towards the next), and every thread's per second, summed over the
processes (the writers' statements are "appender"; a new connection shows as its `CREATE SCHEMA
IF NOT EXISTS`).

Reported per run, and as medians over `--runs`: appends a second, the writers' CPU per append,
passes, a pass's median wall and CPU time, events per pass, and the load average.
`bench/log_scale.py` is the benchmark against plain inserts; this one looks inside the passes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import median
from http_serve import drop_pg_schema

CHILD = r"""
import json, os, resource, sys, threading, time, collections, statistics
os.environ["PLAUDIT_HOST_GROUP"] = "0"
url, seconds, name = sys.argv[1], float(sys.argv[2]), sys.argv[3]
count_statements = sys.argv[4] == "1"
import psycopg
from plaudit import Plaudit
from plaudit.store import postgres_sequencer as seq_mod

KINDS = (
    ("CREATE SCHEMA IF NOT EXISTS", "new connection"),
    ("INSERT INTO plaudit_intake", "intake insert"),
    ("SELECT set_config('lock_timeout'", "deadlines"),
    ("SELECT ((SELECT n FROM plaudit_intake", "pending check"),
    ("SELECT seq, id, type", "read events"),
    ("SELECT h.seq, h.hash", "try for the lease"),
    ("BEGIN; SELECT 1 FROM (SELECT pg_advisory_xact_lock", "wait for the lease"),
    ("BEGIN ISOLATION LEVEL REPEATABLE READ", "read snapshot"),
    ("SELECT version, applied_seq FROM plaudit_projections", "projection state read"),
    ("WITH h AS", "take with the lease"),
    ("WITH t AS (DELETE FROM plaudit_intake", "take again"),
    ("SELECT seq, hash, tree_size", "head row read"),
    ("WITH ins AS (INSERT INTO plaudit_events", "insert events"),
    ("SELECT pg_notify", "notify"),
    ("BEGIN", "BEGIN"),
    ("COMMIT", "COMMIT"),
    ("ROLLBACK", "ROLLBACK"),
)
statements = collections.Counter()
if count_statements:
    execute = psycopg.Cursor.execute
    def counted(self, query, *a, **k):
        role = "pump" if threading.current_thread().name == "plaudit-pump" else "appender"
        text = str(query)
        kind = next((kind for h, kind in KINDS if text.startswith(h)), "other")
        statements[role + ": " + kind] += 1
        return execute(self, query, *a, **k)
    psycopg.Cursor.execute = counted

passes = []
original = seq_mod.PostgresSequencer._pump_pass
def timed(self, conn):
    t, c = time.perf_counter(), time.thread_time()
    n = original(self, conn)
    passes.append((time.perf_counter() - t, time.thread_time() - c, n or 0))
    return n
seq_mod.PostgresSequencer._pump_pass = timed

p = Plaudit.open(url)
p.log.append({"type": "bench.pump.v1", "id": name + "-warm", "payload": {}})
print("ready", flush=True)
sys.stdin.readline()
statements.clear()
passes.clear()
r0 = resource.getrusage(resource.RUSAGE_SELF)
start = time.perf_counter()
i = 0
while time.perf_counter() - start < seconds:
    p.log.append({"type": "bench.pump.v1", "id": f"{name}-{i}", "session_id": "s",
                  "payload": {"task": "t" * 40, "route": "x", "i": i}})
    i += 1
r1 = resource.getrusage(resource.RUSAGE_SELF)
took = [x for x in passes if x[2]]
print(json.dumps({
    "n": i,
    "cpu": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
    "passes": len(took),
    "events": sum(x[2] for x in took),
    "pass_wall": statistics.median(x[0] for x in took) if took else None,
    "pass_cpu": statistics.median(x[1] for x in took) if took else None,
    "statements": dict(statements),
}), flush=True)
p.close()
"""


def one_run(dsn: str, writers: int, seconds: float, counting: bool) -> dict[str, float]:
    schema = f"bench_pump_{uuid.uuid4().hex[:8]}"
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = f"{dsn}?schema={schema}"
    try:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", CHILD, url, str(seconds), f"w{k}", str(int(counting))],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for k in range(writers)
        ]
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        got = [json.loads(proc.communicate()[0].strip().splitlines()[-1]) for proc in procs]
    finally:
        drop_pg_schema(url)
    pump = max(got, key=lambda g: g["passes"])  # the process whose pump ran the passes
    n = sum(g["n"] for g in got)
    out = {
        "appends_per_s": n / seconds,
        "cpu_ms_per_append": sum(g["cpu"] for g in got) / n * 1000,
        "passes": pump["passes"],
        "pass_wall_ms": (pump["pass_wall"] or 0) * 1000,
        "pass_cpu_ms": (pump["pass_cpu"] or 0) * 1000,
        "events_per_pass": pump["events"] / pump["passes"] if pump["passes"] else 0.0,
        "load": os.getloadavg()[0],
    }
    for kind, count in pump["statements"].items():
        if kind.startswith("pump: ") and pump["passes"]:
            out[f"per pass, {kind}"] = count / pump["passes"]
    for kind in {k for g in got for k in g["statements"]}:
        out[f"per second, {kind}"] = sum(g["statements"].get(kind, 0) for g in got) / seconds
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--db", default=os.environ.get("PLAUDIT_BENCH_PG", "postgresql://127.0.0.1:5432/test")
    )
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--statements", action="store_true", help="count the pump's statements")
    args = ap.parse_args()
    runs = []
    for r in range(args.runs):
        got = one_run(args.db, args.writers, args.seconds, args.statements)
        runs.append(got)
        print(f"run {r + 1}: " + ", ".join(f"{k} {v:,.3f}" for k, v in got.items()), flush=True)
    keys = sorted({k for run in runs for k in run})
    print(f"\n{args.writers} writers each alone, medians of {len(runs)} runs, {args.seconds:g} s:")
    for key in keys:
        print(f"  {key}: {median([run.get(key, 0.0) for run in runs]):,.3f}")


if __name__ == "__main__":
    main()
