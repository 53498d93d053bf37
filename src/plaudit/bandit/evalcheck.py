"""Off-policy evaluation checked against the simulator's hidden truth: what `plaudit bandit
evaluate` estimates, next to what the world, which knows every run's needs, says.

plaudit logs `runs` runs of a workload (the included arms, their rewards and exact
propensities, as the store does). A configuration is planned on the posteriors frozen at the
halfway run and estimated on the second half, as `evaluate.from_log` does with a real log.
Its *on-policy truth* on those runs comes from the needs the world hid: its recall, the share
of the needed arms its inclusion probabilities would have given the runs, and its net
savings, its prompt tokens plus a retry (`miss_cost`) for each need it would have missed,
against the full counterfactual. The check covers the current configuration and a candidate.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

from plaudit.bandit.config import BanditConfig
from plaudit.bandit.evaluate import SWITCH, LoggedRun, estimate, since_change
from plaudit.bandit.simulator import PlauditPolicy, Scenario, default_config


@dataclass(frozen=True)
class Truth:
    """A configuration's on-policy figures on the evaluated runs."""

    recall: float
    net_savings_percent: float


def logged_runs(
    sc: Scenario,
    runs: int,
    *,
    seed: int = 0,
    config: BanditConfig | None = None,
    split: int | None = None,
) -> tuple[PlauditPolicy, list[LoggedRun], np.ndarray, PlauditPolicy]:
    """Run plaudit and keep what its log would hold for evaluation: per run the task, the
    included arms, their rewards and logged propensities; plus the hidden needs (runs x arms)
    that off-policy estimates are checked against. With `split`, the first learner returned is
    a copy frozen at that run and only the runs from `split` on are returned, so a candidate
    built on those posteriors is evaluated on runs it has not learned from; the last is the
    learner after every run (what `evaluate` fits its need model on)."""
    world = np.random.default_rng(seed)
    learner = PlauditPolicy(sc, config or default_config(sc), np.random.default_rng(seed + 7))
    logged: list[LoggedRun] = []
    needs = []
    total = int(sc.tokens.sum())
    frozen = learner
    for run in range(runs):
        if run == split:
            frozen = copy.deepcopy(learner)
        task = int(world.integers(len(sc.task_types)))
        needed = world.random(sc.n) < sc.need_at(run)[task]
        included = learner.choose(run, task)
        learner.learn(run, task, included, needed & included)
        if learner.last_p is None or (split is not None and run < split):
            continue
        idx = np.flatnonzero(included)
        logged.append(
            LoggedRun(task, idx, needed[idx].astype(np.int64), learner.last_p[idx], total)
        )
        needs.append(needed)
    return frozen, logged, np.array(needs), learner


def evaluation_check(
    sc: Scenario,
    candidate: BanditConfig,
    runs: int,
    *,
    seed: int = 0,
    resamples: int = 300,
    all_runs: bool = False,
    config: BanditConfig | None = None,
) -> dict[str, tuple[dict[str, Any], Truth]]:
    """Off-policy evaluation against the hidden truth, as `plaudit bandit evaluate` does it,
    for the current configuration ("current": `config`, default the workload's) and
    `candidate` ("candidate"): each one's
    estimates (`evaluate.estimate`) and its on-policy truth on the evaluated runs (from each
    context's latest detected change on, unless `all_runs`)."""
    split = runs // 2
    learner, logged, needs, final = logged_runs(sc, runs, seed=seed, split=split, config=config)
    tasks = range(len(sc.task_types))
    model, model_ab = {}, {}
    for t in tasks:
        low = final.candidate(final.cfg, t) < SWITCH
        a, b = final.memory.background_model(t, low, *final.posterior(t))
        model[t], model_ab[t] = a / (a + b), (a, b)
    if not all_runs:
        index = range(split + 1, split + 1 + len(logged))
        keep = since_change([r.context for r in logged], index, final.memory.changed_at)
        logged, needs = [r for r, k in zip(logged, keep, strict=True) if k], needs[keep]
    toks = {t: sc.tokens.astype(float) for t in tasks}
    miss = candidate.miss_cost(int(sc.tokens.sum()), sc.budget)
    ctx = np.array([r.context for r in logged])
    inventory = float(sum(r.inventory_tokens for r in logged))
    out: dict[str, tuple[dict[str, Any], Truth]] = {}
    for name, cfg in (("current", learner.cfg), ("candidate", candidate)):
        pi = {t: learner.candidate(cfg, t) for t in tasks}
        res = estimate(
            logged,
            pi,
            model,
            toks,
            miss_cost=miss,
            resamples=resamples,
            seed=seed,
            model_ab=model_ab,
        )
        p = np.stack([pi[t] for t in ctx])
        tokens = float((p * sc.tokens[None, :]).sum())
        missed = float(((1.0 - p) * needs).sum())
        truth = Truth(
            recall=float((p * needs).sum() / needs.sum()),
            net_savings_percent=(1.0 - (tokens + (miss or 0.0) * missed) / inventory) * 100.0,
        )
        out[name] = (res, truth)
    return out
