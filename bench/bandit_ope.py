"""Off-policy evaluation checked in simulation: does the interval cover the truth?

    .venv/bin/python bench/bandit_ope.py --seeds 20

For each seed, plaudit (default settings) runs `--runs` runs of a workload and logs what the
store would: included arms, rewards and exact propensities. A candidate configuration is
planned on the posteriors frozen at the halfway run and estimated (IPS, SNIPS, DR) on the
second half. The truth is the candidate's realised recall on those same runs, computed from
the hidden needs. The target: each interval covers the truth in >= 90% of seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from plaudit.bandit import workloads
from plaudit.bandit.config import BanditConfig, merged
from plaudit.bandit.evaluate import ESTIMATORS
from plaudit.bandit.simulator import evaluation_check


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--runs", type=int, default=1500)
    ap.add_argument("--workload", default="critical")
    ap.add_argument("--candidate", default='{"core_level": 0.6}')
    ap.add_argument(
        "--all-runs",
        action="store_true",
        help="evaluate every run of the second half, not only those after a detected change",
    )
    args = ap.parse_args(argv)
    sc = getattr(workloads, args.workload)()
    cand = merged(BanditConfig(), json.loads(args.candidate))
    load0, t0, c0 = os.getloadavg()[0], time.perf_counter(), time.process_time()
    cover = dict.fromkeys(ESTIMATORS, 0)
    widths: dict[str, list[float]] = {k: [] for k in ESTIMATORS}
    for seed in range(args.seeds):
        res, truth = evaluation_check(
            sc, cand, args.runs, seed=seed, resamples=300, all_runs=args.all_runs
        )
        for k in ESTIMATORS:
            lo, hi = res[k]["recall_ci"]
            cover[k] += lo <= truth <= hi
            widths[k].append(hi - lo)
        print(
            f"seed {seed}: truth {truth:.4f} "
            + " ".join(
                f"{k} {res[k]['recall']:.4f} [{res[k]['recall_ci'][0]:.4f}, "
                f"{res[k]['recall_ci'][1]:.4f}]"
                for k in ESTIMATORS
            ),
            file=sys.stderr,
        )
    print("| estimator | covers the truth | median interval width |\n|---|---:|---:|")
    for k in ESTIMATORS:
        print(f"| {k} | {cover[k]}/{args.seeds} | {np.median(widths[k]):.4f} |")
    print(
        f"\n{args.workload} workload, {args.runs} runs, candidate {args.candidate}; "
        f"{time.perf_counter() - t0:.0f} s wall, {time.process_time() - c0:.0f} s CPU, "
        f"load average {load0:.1f}"
    )
    return 0 if all(cover[k] >= 0.9 * args.seeds for k in ESTIMATORS) else 1


if __name__ == "__main__":
    sys.exit(main())
