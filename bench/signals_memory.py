"""Benchmark: peak memory of `plaudit signal export` from the log, by log size.

    python bench/signals_memory.py --decisions 50000 200000 400000 --runs 5

For each size a seq_mem file is generated (`plaudit.signals.synth`, seed 1) and imported into
a SQLite store (the `signals` projection is kept current as it goes); then the export from
the log runs --runs times as a child process, each time into a new directory (so every row
is built: a re-export into the same directory copies unchanged hours instead, see
`plaudit.signals.reuse`). Peak RSS is the child's ru_maxrss from `wait4`; wall and CPU time
are reported beside it (medians). The first run also verifies the whole chain.

A child's ru_maxrss starts at what its parent held when it forked (Linux keeps the high-water
mark across exec), so this script keeps itself small: the stores are made by a child process
of their own, and nothing of plaudit is imported here.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from signals_common import median, plaudit_command, run_measured

MAKE_STORE = r"""
import sys
from plaudit import Plaudit
from plaudit.seqmem import import_file
from plaudit.signals import synth
n, src, db = int(sys.argv[1]), sys.argv[2], sys.argv[3]
with open(src, "w") as f:
    synth.write(f, n, seed=1)
with Plaudit.open(db, durability="normal") as p:
    import_file(p.log, src)
"""
EVENTS = r"""
import sys
from plaudit import Plaudit
with Plaudit.open(sys.argv[1], create=False) as p:
    print(p.log.head().length)
"""


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
            subprocess.run(
                [sys.executable, "-c", MAKE_STORE, str(n), str(src), str(db)], check=True
            )
            src.unlink()
        events = int(
            subprocess.run(
                [sys.executable, "-c", EVENTS, str(db)], check=True, capture_output=True, text=True
            ).stdout
        )
        rss, wall, cpu = [], [], []
        for _ in range(args.runs):
            cmd = [*plaudit_command(), "signal", "export", "--db", str(db),
                   "--output-dir", tempfile.mkdtemp(prefix=f"out_{n}_", dir=work),
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
