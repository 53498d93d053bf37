"""Off-policy evaluation checked in simulation: does the interval cover the on-policy truth?

    .venv/bin/python bench/bandit_ope.py --seeds 20
    .venv/bin/python bench/bandit_ope.py --workload drift --candidate '{"explore_evidence": 0}'

For each seed, plaudit (default settings) runs `--runs` runs of a workload and logs what the
store would: included arms, rewards and exact propensities. The current configuration and a
candidate are planned on the posteriors frozen at the halfway run and estimated (IPS, SNIPS,
DR) on the second half (`plaudit.bandit.evalcheck`). The truth of each is its on-policy
figure on those same runs, from the hidden needs: recall, and net savings (prompt tokens plus
a retry for each miss). The target: the doubly robust 95% interval covers the truth in >= 90%
of seeds, for both configurations, on recall and on net savings. IPS and SNIPS are reported
with how often `evaluate` flagged them untrusted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from plaudit.bandit import workloads
from plaudit.bandit.config import merged
from plaudit.bandit.evalcheck import evaluation_check
from plaudit.bandit.evaluate import ESTIMATORS
from plaudit.bandit.simulator import default_config

#: a candidate that leaves out more than the logging policy: a miss costs a third of a retry
CANDIDATE = '{"miss_cost_tokens": 8000}'


def coverage(workload: str, seeds: range, runs: int, candidate: str, all_runs: bool) -> dict:
    """Per configuration and estimator: seeds covered on recall and on net savings, interval
    widths, and the share of seeds IPS/SNIPS were flagged untrusted."""
    sc = getattr(workloads, workload)()
    cand = merged(default_config(sc), json.loads(candidate))
    out: dict = {}
    for seed in seeds:
        res = evaluation_check(sc, cand, runs, seed=seed, resamples=300, all_runs=all_runs)
        for name, (est, truth) in res.items():
            for k in ESTIMATORS:
                row = out.setdefault((name, k), {"recall": 0, "net": 0, "w": [], "untrusted": 0})
                lo, hi = est[k]["recall_ci"]
                row["recall"] += lo is not None and lo <= truth.recall <= hi
                nlo, nhi = est[k]["net_savings_ci"]
                row["net"] += nlo is not None and nlo <= truth.net_savings_percent <= nhi
                row["w"].append((hi or 0) - (lo or 0))
                row["untrusted"] += not est[k].get("trusted", True)
            print(
                f"seed {seed} {name}: truth {truth.recall:.4f} / {truth.net_savings_percent:.1f}%"
                + "".join(
                    f"  {k} [{est[k]['recall_ci'][0]:.4f}, {est[k]['recall_ci'][1]:.4f}]"
                    f" [{est[k]['net_savings_ci'][0]:.1f}, {est[k]['net_savings_ci'][1]:.1f}]"
                    for k in ESTIMATORS
                ),
                file=sys.stderr,
                flush=True,
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--runs", type=int, default=1500)
    ap.add_argument("--workload", default="critical")
    ap.add_argument("--candidate", default=CANDIDATE)
    ap.add_argument(
        "--all-runs",
        action="store_true",
        help="evaluate every run of the second half, not only those after a detected change",
    )
    args = ap.parse_args(argv)
    load0, t0, c0 = os.getloadavg()[0], time.perf_counter(), time.process_time()
    out = coverage(args.workload, range(args.seeds), args.runs, args.candidate, args.all_runs)
    n = args.seeds
    print(
        "| configuration | estimator | covers recall | covers net savings | "
        "median recall interval width | flagged untrusted |\n|---|---|---:|---:|---:|---:|"
    )
    for (name, k), row in out.items():
        flag = "-" if k == "dr" else f"{row['untrusted']}/{n}"
        print(
            f"| {name} | {k} | {row['recall']}/{n} | {row['net']}/{n} | "
            f"{np.median(row['w']):.4f} | {flag} |"
        )
    print(
        f"\n{args.workload} workload, {args.runs} runs, candidate {args.candidate}; "
        f"{time.perf_counter() - t0:.0f} s wall, {time.process_time() - c0:.0f} s CPU, "
        f"load average {load0:.1f}"
    )
    ok = all(
        row["recall"] >= 0.9 * n and row["net"] >= 0.9 * n
        for (name, k), row in out.items()
        if k == "dr"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
