"""What PostgreSQL's head guess is worth: one writer's appends with it and without, same run.

Issue 27 keeps a shortcut only while a benchmark shows it is worth at least 1.3x on the
workload it exists for. The head guess exists for a writer that wrote the head last (an
uncontended writer): it sends its group on that head in one round trip instead of reading
the head first. Each run appends `--n` router decisions one at a time from one process with
no host leader (`PLAUDIT_HOST_GROUP=0`) to a fresh schema, the guess on or off (off: the
child forgets the head it wrote after every write, so every group reads it first); runs
alternate. Reported: medians over runs of p50 and p99, the writer's CPU per append, and the
PostgreSQL server's CPU per append (its backends' utime + stime from /proc, this machine only).

    .venv/bin/python bench/log_shortcuts.py --runs 5 --n 1000
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
from common import median, router_events, table

BENCH = Path(__file__).resolve().parent

PG_DSN = os.environ.get("PLAUDIT_BENCH_PG", "postgresql://127.0.0.1:5432/test")

CHILD = r"""
import json, os, sys, time
os.environ["PLAUDIT_HOST_GROUP"] = "0"
url, guess = sys.argv[1], sys.argv[2] == "on"
if not guess:  # forget the head this process wrote: every group reads it first
    from plaudit.store import postgres_sequencer as ps
    original = ps.PostgresSequencer._write
    def _write(self, *a, **k):
        try:
            return original(self, *a, **k)
        finally:
            self._expect = None
    ps.PostgresSequencer._write = _write
from plaudit import Plaudit
events = json.loads(sys.stdin.read())
p = Plaudit.open(url)
for e in events[:50]:
    p.log.append(e)
sys.path.insert(0, sys.argv[3])
from common import proc_cpu
def server_cpu():  # this process's PostgreSQL backends (named by `application_name`)
    with p.backend.connection().cursor() as cur:
        cur.execute("SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s",
                    (f"plaudit {os.getpid()}@%",))
        return sum(proc_cpu(r[0]) for r in cur.fetchall())
lat = []
s0, c0 = server_cpu(), time.process_time()
for e in events[50:]:
    t = time.perf_counter()
    p.log.append(e)
    lat.append((time.perf_counter() - t) * 1000)
cpu = (time.process_time() - c0) * 1000 / len(lat)
server = (server_cpu() - s0) * 1000 / len(lat)
p.close()
lat.sort()
print(json.dumps({"p50": lat[len(lat) // 2], "p99": lat[int(len(lat) * 0.99)], "cpu": cpu,
                  "server": server}))
"""


def one(guess: str, n: int) -> dict[str, float]:
    import psycopg

    schema = f"shortcut_{uuid.uuid4().hex[:10]}"
    try:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, f"{PG_DSN}?schema={schema}", guess, str(BENCH)],
            input=json.dumps(router_events(n + 50, prefix=uuid.uuid4().hex[:6])),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--n", type=int, default=1000, help="appends per run")
    args = ap.parse_args()
    results: dict[str, list[dict[str, float]]] = {"on": [], "off": []}
    load = []
    for r in range(args.runs):
        for guess in ("on", "off"):
            load.append(os.getloadavg()[0])
            res = one(guess, args.n)
            results[guess].append(res)
            print(f"run {r + 1} head guess {guess}: {res}", file=sys.stderr)
    rows = []
    for guess, rs in results.items():
        m = {k: median([x[k] for x in rs]) for k in ("p50", "p99", "cpu", "server")}
        rows.append(
            [
                guess,
                f"{m['p50']:.3f}",
                f"{m['p99']:.3f}",
                f"{m['cpu']:.3f}",
                f"{m['server']:.3f}",
                f"{m['cpu'] + m['server']:.3f}",
            ]
        )
    print(
        table(
            ["head guess", "p50 ms", "p99 ms", "writer CPU ms", "server CPU ms", "CPU ms/append"],
            rows,
        )
    )
    on, off = (median([x["cpu"] + x["server"] for x in results[g]]) for g in ("on", "off"))
    p50 = median([x["p50"] for x in results["off"]]) / median([x["p50"] for x in results["on"]])
    print(f"\nwithout the guess: {off / on:.2f}x the CPU per append, {p50:.2f}x the p50")
    print(f"load average {min(load):.1f} to {max(load):.1f}")


if __name__ == "__main__":
    main()
