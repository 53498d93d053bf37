"""Benchmark: `plaudit signal evaluate` on a log of 60,000 router decisions.

    .venv/bin/python bench/signals_evaluate.py --decisions 60000 --runs 5 --coverage-seeds 100

The simulated router of `plaudit.signals.simulate` (every decision logged with its propensity)
writes a seq_mem file of --decisions decisions and their outcomes, which is imported into a
SQLite store (the `signals` projection kept current as it goes). Then, --runs times, each
variant runs once as a child process, one after the other (interleaved, so a slow stretch of a
shared machine hits every variant alike):

* log, table: `--db STORE --policy candidate.json` (1,000 bootstrap resamples, the default);
* log, table, no intervals: the same with `--bootstrap 0` (what the resamples cost);
* file, table: `--seq-mem FILE --policy candidate.json`;
* log, callable: `--policy bench_policy:route`, a Python function doing what the table does.

With --coverage-seeds N, it first checks the intervals in simulation: N fresh logs of
--coverage-decisions decisions each, evaluated in-process (table policy, 300 resamples), and
how often each estimator's 95% interval covers the candidate's exact value.

Figures are medians of wall and CPU time (user + system, from `wait4`) per variant, with the
load average before and after. Each run's estimates are checked to be the same across variants
(IPS from all four; DR from the table variants, since a callable's reward model has no key to
group by), and the DR interval against the simulation's exact value.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plaudit import Plaudit
from plaudit.seqmem import import_file
from plaudit.signals import simulate
from plaudit.signals.evaluate import evaluate_policy
from signals_common import median, plaudit_command, run_measured

START_MS = 1_790_000_000_000
POLICY_MODULE = """\
CANDIDATE = {candidate!r}


def route(decision):
    return CANDIDATE[decision["context"]["ci_status"]]
"""


def coverage(work: Path, seeds: int, decisions: int) -> None:
    sim = simulate.router()
    table = sim.table(simulate.CANDIDATE)
    truth = sim.value(simulate.CANDIDATE)
    covered = dict.fromkeys(("logging", "ips", "snips", "dr"), 0)
    widths: dict[str, list[float]] = {k: [] for k in covered}
    t, c = time.perf_counter(), time.process_time()
    for seed in range(seeds):
        path = work / "coverage.jsonl"
        with open(path, "w") as f:
            sim.write(f, decisions, seed=seed, start_ms=START_MS)
        res = evaluate_policy(
            table, seq_mem=path, now_ms=START_MS + decisions * 6_000, bootstrap=300, seed=seed
        )
        for name in covered:
            entry = res["logging"] if name == "logging" else res["estimates"][name]
            lo, hi = entry["ci"]
            target = sim.logging_value() if name == "logging" else truth
            covered[name] += lo <= target <= hi
            widths[name].append(hi - lo)
    print(
        f"coverage: {seeds} logs of {decisions} decisions, candidate value {truth:.4f}"
        f" (logging {sim.logging_value():.4f}); {time.perf_counter() - t:.1f} s wall,"
        f" {time.process_time() - c:.1f} s CPU\n"
    )
    print("| estimator | 95% interval covers the truth | median width |")
    print("|---|---:|---:|")
    for name, n in covered.items():
        print(f"| {name} | {n}/{seeds} | {median(widths[name]):.4f} |")
    print()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decisions", type=int, default=60_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workdir", help="where to put the inputs (default: a temp dir)")
    ap.add_argument("--coverage-seeds", type=int, default=0)
    ap.add_argument("--coverage-decisions", type=int, default=500)
    args = ap.parse_args()

    work = Path(args.workdir or tempfile.mkdtemp(prefix="plaudit-bench-evaluate-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.coverage_seeds:
        coverage(work, args.coverage_seeds, args.coverage_decisions)
    src, db = work / "seq_mem.jsonl", work / "store.db"
    for path in (src, db):
        if path.exists():
            path.unlink()
    sim = simulate.router()
    t = time.perf_counter()
    with open(src, "w") as f:
        lines = sim.write(f, args.decisions, seed=1, start_ms=START_MS)
    with Plaudit.open(db, durability="normal") as p:
        report = import_file(p.log, src)
    policy = work / "candidate.json"
    policy.write_text(json.dumps(sim.table(simulate.CANDIDATE)))
    (work / "bench_policy.py").write_text(POLICY_MODULE.format(candidate=simulate.CANDIDATE))
    print(
        f"setup: {lines} lines, {report.imported} events imported in {time.perf_counter() - t:.1f}s"
    )

    base = [*plaudit_command(), "signal", "evaluate", "--max-age-hours", "1000000", "--json"]
    log = [*base, "--db", str(db)]
    variants = {
        "log, table": [*log, "--policy", str(policy)],
        "log, table, --bootstrap 0": [*log, "--policy", str(policy), "--bootstrap", "0"],
        "file, table": [*base, "--seq-mem", str(src), "--policy", str(policy)],
        "log, callable": [*log, "--policy", "bench_policy:route"],
    }
    times: dict[str, dict[str, list[float]]] = {k: {"wall": [], "cpu": []} for k in variants}
    truth = sim.value(simulate.CANDIDATE)
    load_before = os.getloadavg()
    same = True
    covered = 0
    for run in range(args.runs):
        values = {}
        for name, cmd in variants.items():
            with open(work / "result.json", "w+b") as out:
                # PYTHONPATH: where `bench_policy:route` is found (as the current directory
                # would be for a user running the command next to their policy)
                wall, _, rc, cpu = run_measured(cmd, env={"PYTHONPATH": str(work)}, stdout=out)
                out.seek(0)
                res = json.loads(out.read())
            if rc != 0:
                print(f"{name} failed with exit status {rc}", file=sys.stderr)
                return 1
            times[name]["wall"].append(wall)
            times[name]["cpu"].append(cpu)
            est = res["estimates"]
            values[name] = (est["ips"]["value"], est["dr"]["value"] if "table" in name else None)
            if name == "log, table":
                lo, hi = res["estimates"]["dr"]["ci"]
                covered += lo <= truth <= hi
        same = same and len({round(v[0], 12) for v in values.values()}) == 1
        same = same and len({round(v[1], 12) for v in values.values() if v[1] is not None}) == 1
        print(f"run {run + 1}: " + ", ".join(f"{k} {v['wall'][-1]:.2f}s" for k, v in times.items()))
    load_after = os.getloadavg()
    print(
        f"\n{args.decisions} decisions; median of {args.runs} interleaved runs; load average"
        f" {load_before[0]:.1f} before, {load_after[0]:.1f} after"
        f" (5 min: {load_before[1]:.1f} / {load_after[1]:.1f})\n"
    )
    print("| variant | wall time (s) | CPU time (s) |")
    print("|---|---:|---:|")
    for name, r in times.items():
        print(f"| {name} | {median(r['wall']):.3f} | {median(r['cpu']):.3f} |")
    print(
        f"\nsame IPS estimate from every variant, and same DR from every table variant, in"
        f" every run: {same};"
        f" DR interval covered the true value {truth:.4f} in {covered} of {args.runs} runs"
        " (the same data each run)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
