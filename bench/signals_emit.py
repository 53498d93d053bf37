"""Benchmark: wall time of one `plaudit signal emit decision ...` call (a shell hook's cost).

    python bench/signals_emit.py --reference PATH/TO/router_signal_emit.py

The reference emitter is `tools/router_signal_emit.py` in https://github.com/nikivdev/seq
(fetch it yourself; nothing here downloads it). Every call is a new process, as from a hook;
all write under one temp dir, with Python's bytecode cache on (as for an installed
package). Reports the median and p90 of --runs calls per variant. `--baseline-src DIR` adds
this tree and another one (say, the previous commit's `src`), both run the same way, to
measure a change's effect in one sitting. `--serve` adds the same call on a store a running
`plaudit serve` holds, which takes the event over its local socket
(`plaudit.signals.handoff`; needs the server extra). `--breakdown` adds child processes
that stop part of the way (the interpreter alone, the hook's own imports, msgspec, the
store's imports, opening the store), interleaved with the rest, so the differences of their
medians say where a direct emit's time goes.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from signals_common import median, p90, plaudit_command, run_measured


def decision_args(i: int) -> list[str]:
    return [
        "decision",
        "--decision-id", f"bench-{i}",
        "--chosen-task", "ai:flow/dev-check",
        "--confidence", "0.74",
        "--user-intent", "sample-intent",
        "--context-json", '{"changed_files": 3, "ci_status": "failing"}',
        "--session-id", "bench",
    ]  # fmt: skip


def from_src(src: str) -> list[str]:
    """Run `plaudit` from the tree at `src` rather than the installed one."""
    code = (
        f"import sys; sys.path.insert(0, {src!r}); from plaudit.cli import main; sys.exit(main())"
    )
    return [sys.executable, "-c", code]


#: The stages of a direct emit, each a process that stops there: what the hook imports (as
#: `plaudit.cli.main` does, before click), then msgspec as the store imports it, then the
#: store (`plaudit.core`), then opening (and closing) the store the full emit writes to.
_STAGES = (
    ("the interpreter alone (`python -c pass`)", ""),
    (
        "+ the hook's own imports (argparse, the contract, seq_mem file)",
        "import plaudit.cli.emit as e, plaudit.signals.emit, plaudit.signals.handoff,"
        " plaudit.config; e.build_parser()",
    ),
    ("+ msgspec", "e.import_without('msgspec', 'typing_extensions')"),
    ("+ the store's imports (`plaudit.core`)", "P = e._import_plaudit()"),
    ("+ opening and closing the store", "P.open({db!r}).close()"),
)


#: A floor for any emit that writes SQLite itself: the hook's imports, then one row of a
#: router event's size inserted into a scratch database (not a plaudit store) in WAL mode,
#: committed with `synchronous=FULL`. No hash chain, no projection, no msgspec.
_FLOOR = (
    "import sqlite3, os; c = sqlite3.connect({db!r}, isolation_level=None);"
    " c.execute('PRAGMA journal_mode=WAL'); c.execute('PRAGMA synchronous=FULL');"
    " c.execute('CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, body TEXT)');"
    " c.execute('BEGIN IMMEDIATE');"
    " c.execute('INSERT INTO t VALUES (?, ?)', (os.urandom(16).hex(), 'x' * 600));"
    " c.execute('COMMIT'); c.close()"
)


def breakdown(db: str, floor_db: str) -> dict[str, str]:
    out: dict[str, str] = {}
    code = ""
    for name, step in _STAGES:
        code = "; ".join(x for x in (code, step.format(db=db)) if x)
        out[f"stage: {name}"] = code or "pass"
    hook = _STAGES[1][1]
    out["floor: the hook's imports + one fsynced SQLite insert (no store)"] = (
        f"{hook}; {_FLOOR.format(db=floor_db)}"
    )
    return out


#: The direct emit when the log's time-based checkpoint is due: every call signs one, as
#: every call of a hook that fires more than a minute apart does with the default settings.
DUE = "plaudit (log + seq_mem), a signed checkpoint due"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--reference", help="path to router_signal_emit.py")
    ap.add_argument(
        "--baseline-src",
        help="also time another plaudit tree's `src` directory (e.g. from `git worktree add`), "
        "beside this one, both started as `python -c` with their `src` first on sys.path",
    )
    ap.add_argument(
        "--serve",
        action="store_true",
        help="also time the call while `plaudit serve` runs on its store (the local handoff)",
    )
    ap.add_argument(
        "--checkpoint-due",
        action="store_true",
        help="also time the direct emit when a signed checkpoint is due (as for a hook firing"
        " more than $PLAUDIT_CHECKPOINT_SECONDS, default 60, after the last one)",
    )
    ap.add_argument(
        "--breakdown",
        action="store_true",
        help="also time processes that stop part of the way through a direct emit",
    )
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="plaudit-bench-emit-"))
    cli = plaudit_command()
    variants = {
        "plaudit (log + seq_mem)": lambda i: [
            *cli, "--db", str(work / "p.db"), "signal", "emit", "--seq-mem",
            str(work / "p.jsonl"), *decision_args(i),
        ],
        "plaudit --no-log (seq_mem only)": lambda i: [
            *cli, "signal", "emit", "--no-log", "--seq-mem", str(work / "n.jsonl"),
            *decision_args(i),
        ],
    }  # fmt: skip
    if args.baseline_src:
        here = str(Path(__file__).resolve().parent.parent / "src")
        for tag, src in (("this", here), ("baseline", args.baseline_src)):
            variants[f"plaudit (log + seq_mem), {tag} tree, via -c"] = lambda i, s=src, t=tag: [
                *from_src(s), "--db", str(work / f"{t}.db"), "signal", "emit",
                "--seq-mem", str(work / f"{t}.jsonl"), *decision_args(i),
            ]  # fmt: skip
    if args.checkpoint_due:
        variants[DUE] = lambda i: [
            *cli, "--db", str(work / "due.db"), "signal", "emit", "--seq-mem",
            str(work / "due.jsonl"), *decision_args(i),
        ]  # fmt: skip
    if args.breakdown:
        for name, code in breakdown(str(work / "p.db"), str(work / "floor.db")).items():
            variants[name] = lambda i, c=code: [sys.executable, "-c", c]
    server = None
    if args.serve:
        served = work / "served.db"
        server = subprocess.Popen(
            [*cli, "--db", str(served), "serve", "--port", "0", "--log-level", "warning"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while not os.path.exists(f"{served}.sock"):
            if server.poll() is not None or time.monotonic() > deadline:
                print("plaudit serve did not start", file=sys.stderr)
                return 1
            time.sleep(0.1)
        variants["plaudit (log + seq_mem), plaudit serve running"] = lambda i: [
            *cli, "--db", str(served), "signal", "emit", "--seq-mem", str(work / "s.jsonl"),
            *decision_args(i),
        ]  # fmt: skip
    if args.reference:
        variants["reference"] = lambda i: [
            sys.executable, args.reference, "--seq-mem", str(work / "r.jsonl"), *decision_args(i),
        ]  # fmt: skip
    try:
        return measure(variants, args.runs)
    finally:
        if server is not None:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=30)


def measure(variants: dict, runs: int) -> int:
    times: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    # As installed for a hook: bytecode cached. The warm-up call writes it (even where the
    # environment says not to) and warms the page cache.
    env = {"PYTHONDONTWRITEBYTECODE": ""}
    due = {**env, "PLAUDIT_CHECKPOINT_SECONDS": "0.001"}
    for name, make in variants.items():
        run_measured(make(-1 - len(times[name])), env=due if name == DUE else env)
    for i in range(runs):
        for name, make in variants.items():  # interleaved
            wall, _, rc, cpu_s = run_measured(make(i), env=due if name == DUE else env)
            if rc != 0:
                print(f"{name} failed with exit status {rc}", file=sys.stderr)
                return 1
            times[name].append(wall * 1000)
            cpu[name].append(cpu_s * 1000)
    load = os.getloadavg()
    print(f"\none `emit decision` call, {runs} runs each; load average {load[0]:.1f}\n")
    print("| emitter | median (ms) | p90 (ms) | median CPU (ms) |")
    print("|---|---:|---:|---:|")
    for name, t in times.items():
        print(f"| {name} | {median(t):.1f} | {p90(t):.1f} | {median(cpu[name]):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
