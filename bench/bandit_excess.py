"""Where plaudit's tokens and misses differ from the stationary optimum's on one fitting
workload, by arm role: the share of runs each role is included in where the optimum leaves it
out, and the tokens per run that costs (or saves), over the last quarter of the runs of
`--seeds` seeds. The learning suite gives the totals; this says which arms make them.

    .venv/bin/python bench/bandit_excess.py "dead weight"
    .venv/bin/python bench/bandit_excess.py "agent, background need 0.01" --seeds 5
"""

from __future__ import annotations

import argparse

import numpy as np

from plaudit.bandit import workloads
from plaudit.bandit.simulator import (
    OptimumPolicy,
    PlauditPolicy,
    Scenario,
    default_config,
    referenced_by,
)


def inclusion(sc: Scenario, runs: int, seeds: int) -> tuple[np.ndarray, np.ndarray]:
    """Per task type and arm, plaudit's inclusion rate over the last quarter of the runs
    (baseline runs left out), and each type's share of those runs."""
    types = len(sc.task_types)
    cfg = default_config(sc)
    total, count = np.zeros((types, sc.n)), np.zeros(types)
    for seed in range(seeds):
        # the same streams as `simulator.simulate`
        world = np.random.default_rng(seed)
        agent = np.random.default_rng(seed + 1_000_003)
        fetch = np.random.default_rng(seed + 2_000_003)
        learner = PlauditPolicy(sc, cfg, agent)
        for run in range(runs):
            task = (
                int(world.choice(types, p=sc.task_probs))
                if sc.task_probs is not None
                else int(world.integers(types))
            )
            needed = world.random(sc.n) < sc.need_at(run)[task]
            included = learner.choose(run, task)
            learner.learn(run, task, included, referenced_by(sc, fetch, needed, included))
            if run >= runs * 3 // 4 and not learner.last_baseline:
                total[task] += included
                count[task] += 1
    return total / np.maximum(count, 1.0)[:, None], count / count.sum()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload", choices=sorted(workloads.FITTING))
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args(argv)
    build, runs = workloads.FITTING[args.workload]
    sc = build()
    rate, share = inclusion(sc, runs, args.seeds)
    optimum = OptimumPolicy(sc, default_config(sc))
    want = np.array([optimum.choose(0, t) for t in range(len(sc.task_types))])
    need = sc.need_at(0)
    excess = ((sc.tokens * (rate - want)) * share[:, None]).sum(axis=0)
    extra_miss = ((need * (want - rate)) * share[:, None]).sum(axis=0)
    full = int(sc.tokens.sum())
    roles = np.array(sc.roles)
    print(f"{args.workload}: {args.seeds} seeds, last quarter of {runs:,} runs\n")
    print(
        "| role | arms | included where the optimum leaves it out | tokens per run against "
        "the optimum | points of savings | extra misses per run |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for role in sorted(set(sc.roles)):
        m = roles == role
        unwanted = float((rate * ~want)[:, m].mean())
        print(
            f"| {role} | {int(m.sum())} | {unwanted:.1%} | {excess[m].sum():+,.0f} | "
            f"{100 * excess[m].sum() / full:+.2f} | {extra_miss[m].sum():+.4f} |"
        )
    print(
        f"| all | {sc.n} | | {excess.sum():+,.0f} | {100 * excess.sum() / full:+.2f} | "
        f"{extra_miss.sum():+.4f} |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
