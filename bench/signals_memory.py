"""Benchmark: peak memory of `plaudit signal export` from the log, by log size.

    python bench/signals_memory.py --decisions 50000 200000 400000 --runs 5

For each size a seq_mem file is generated (`plaudit.signals.synth`, seed 1) and imported into
a SQLite store (the `signals` projection is kept current as it goes); then the export from
the log runs --runs times as a child process, each time into a new directory (so every row
is built: a re-export into the same directory copies unchanged hours instead, see
`plaudit.signals.reuse`). Peak RSS is the child's ru_maxrss from `wait4`; wall and CPU time
are reported beside it (medians). The first run also verifies the whole chain.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plaudit import Plaudit
from plaudit.seqmem import import_file
from plaudit.signals import synth
from signals_common import median, plaudit_command, run_measured


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decisions", type=int, nargs="+", default=[50_000, 200_000, 400_000])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workdir", help="where to put inputs and outputs (default: a temp dir)")
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="plaudit-bench-memory-"))
    work.mkdir(parents=True, exist_ok=True)
    print("| decisions | events | peak RSS (MiB) | wall time (s) | CPU time (s) |")
    print("|---:|---:|---:|---:|---:|")
    for n in args.decisions:
        src = work / f"seq_mem_{n}.jsonl"
        db = work / f"store_{n}.db"
        if not db.exists():
            with open(src, "w") as f:
                synth.write(f, n, seed=1)
            with Plaudit.open(db, durability="normal") as p:
                import_file(p.log, src)
            src.unlink()
        with Plaudit.open(db) as p:
            events = p.log.head().length
        rss, wall, cpu = [], [], []
        for run in range(args.runs):
            cmd = [*plaudit_command(), "signal", "export", "--db", str(db),
                   "--output-dir", str(work / f"out_{n}_{run}"),
                   "--max-age-hours", "100000"]  # fmt: skip
            # As installed: bytecode cached, whatever the environment says.
            w, r, rc, c = run_measured(cmd, env={"PYTHONDONTWRITEBYTECODE": ""})
            if rc != 0:
                return 1
            rss.append(r / 1024)
            wall.append(w)
            cpu.append(c)
        print(
            f"| {n:,} | {events:,} | {median(rss):.0f} | {median(wall):.2f} | {median(cpu):.2f} |"
        )
    load = os.getloadavg()
    print(f"\nload average at the end: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
