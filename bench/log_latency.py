"""Single-process append latency, this tree against an earlier one, in the same run.

Issue 11 asks that log v2 keep "single-process append latency no worse than today's". Each
run appends `--n` router decisions one at a time (`Plaudit.open(...).log.append`) to a fresh
store, in a child process whose `PYTHONPATH` is this tree's `src/` or the baseline's; runs
alternate between the two trees so both see the same load. Reported per backend: medians over
runs of each run's p50 and p99 (ms) and of the CPU milliseconds per append.

    git worktree add ../plaudit-base COMMIT
    .venv/bin/python bench/log_latency.py --baseline-src ../plaudit-base/src --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median, router_events, table

REPO = Path(__file__).resolve().parent.parent
PG_DSN = os.environ.get("PLAUDIT_BENCH_PG", "postgresql://127.0.0.1:5432/test")

CHILD = r"""
import json, sys, time
from plaudit import Plaudit
url, kw = sys.argv[1], json.loads(sys.argv[2])
events = json.loads(sys.stdin.read())
p = Plaudit.open(url, **kw)
for e in events[:50]:  # warm: imports, prepared statements, the first checkpoint policy read
    p.log.append(e)
lat = []
c0 = time.process_time()
for e in events[50:]:
    t = time.perf_counter()
    p.log.append(e)
    lat.append((time.perf_counter() - t) * 1000)
cpu = (time.process_time() - c0) * 1000 / len(lat)
p.close()
lat.sort()
print(json.dumps({"p50": lat[len(lat) // 2], "p99": lat[int(len(lat) * 0.99)], "cpu": cpu}))
"""


def one(src: Path, backend: str, n: int, tmp: Path) -> dict[str, float]:
    kw: dict[str, Any] = {}
    schema = None
    if backend == "postgres":
        schema = f"lat_{uuid.uuid4().hex[:10]}"
        url = f"{PG_DSN}?schema={schema}"
    else:
        url = str(tmp / f"{uuid.uuid4().hex[:8]}.db")
        if backend == "sqlite-normal":
            kw["durability"] = "normal"
    env = dict(os.environ, PYTHONPATH=str(src))
    try:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, url, json.dumps(kw)],
            input=json.dumps(router_events(n + 50, prefix=uuid.uuid4().hex[:6])),
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout
    finally:
        if schema is not None:
            import psycopg

            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline-src", type=Path, required=True, help="an earlier tree's src/")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--n", type=int, default=500, help="appends per run")
    ap.add_argument("--backends", default="sqlite,sqlite-normal,postgres")
    args = ap.parse_args()
    trees = {"this tree": REPO / "src", "baseline": args.baseline_src.resolve()}
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    load = []
    with tempfile.TemporaryDirectory() as td:
        for r in range(args.runs):
            for backend in args.backends.split(","):
                for name, src in trees.items():
                    load.append(os.getloadavg()[0])
                    res = one(src, backend, args.n, Path(td))
                    results.setdefault((backend, name), []).append(res)
                    print(f"run {r + 1} {backend} {name}: {res}", file=sys.stderr)
    rows = []
    for (backend, name), rs in results.items():
        rows.append(
            [
                backend,
                name,
                f"{median([x['p50'] for x in rs]):.3f}",
                f"{median([x['p99'] for x in rs]):.3f}",
                f"{median([x['cpu'] for x in rs]):.3f}",
            ]
        )
    print(table(["backend", "tree", "p50 ms", "p99 ms", "CPU ms/append"], rows))
    print(f"\nload average {min(load):.1f} to {max(load):.1f}")


if __name__ == "__main__":
    main()
