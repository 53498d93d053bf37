"""Off-policy evaluation checked against the simulator's hidden truth."""

from __future__ import annotations

import numpy as np

from plaudit.bandit import workloads
from plaudit.bandit.config import BanditConfig, merged
from plaudit.bandit.evaluate import LoggedRun, estimate
from plaudit.bandit.simulator import evaluation_check


def _coverage(seeds: range, runs: int, workload: str = "critical") -> tuple[int, list[float]]:
    sc = getattr(workloads, workload)()
    cand = merged(BanditConfig(), {"core_level": 0.6})
    covered, truths = 0, []
    for seed in seeds:
        res, truth = evaluation_check(sc, cand, runs, seed=seed, resamples=200)
        lo, hi = res["dr"]["recall_ci"]
        covered += lo <= truth <= hi
        truths.append(truth)
    return covered, truths


def test_doubly_robust_interval_covers_the_realised_recall_in_nine_of_ten_seeds() -> None:
    # The truth is the candidate's recall on the evaluated runs, from the needs the simulator
    # hid; the candidate leaves out more arms than the logging policy, so its misses fall on
    # arms the log observed only at the exploration floor, or never.
    covered, truths = _coverage(range(100, 110), 1000)
    assert covered >= 9, (covered, truths)
    assert min(truths) < 0.995  # the candidate does miss needed arms: the check has teeth


def test_doubly_robust_covers_on_the_stationary_and_drift_workloads_too() -> None:
    # stationary: the need model's pooled rate for the arms the log sees only at the floor
    # (the selection posterior over-predicted their needs); drift: runs before a context's
    # latest detected change are left out, as `evaluate` does
    for workload in ("stationary", "drift"):
        covered, truths = _coverage(range(100, 110), 1500, workload)
        assert covered >= 8, (workload, covered, truths)


def test_ips_is_exact_when_every_arm_was_logged_with_certainty() -> None:
    rng = np.random.default_rng(4)
    n_arms, runs = 6, 200
    pi = {0: np.array([1.0, 1.0, 0.5, 0.0, 0.25, 1.0])}
    model = {0: np.full(n_arms, 0.3)}
    need = rng.random((runs, n_arms)) < 0.3
    logged = [
        LoggedRun(0, np.arange(n_arms), need[r].astype(np.int64), np.ones(n_arms), 600)
        for r in range(runs)
    ]
    res = estimate(logged, pi, model, {0: np.full(n_arms, 100.0)}, resamples=50)
    truth = float((need * pi[0]).sum() / need.sum())
    for k in ("ips", "snips", "dr"):
        assert abs(res[k]["recall"] - truth) < 1e-12
    assert res["prompt_tokens_per_run"] == float(pi[0].sum() * 100.0)


def test_doubly_robust_counts_a_need_seen_below_the_switch_once() -> None:
    # Below the switch no observation is weighted up (IPS would count this one need 100
    # times), but the run that included the arm saw its need: it counts as itself, and the
    # model (0 here) speaks only for the runs that did not include the arm.
    pi = {0: np.array([1.0, 0.0])}
    model = {0: np.zeros(2)}
    logged = [LoggedRun(0, np.array([0, 1]), np.array([1, 1]), np.array([1.0, 0.01]), 200)]
    logged += [LoggedRun(0, np.array([0]), np.array([1]), np.array([1.0]), 200) for _ in range(9)]
    res = estimate(logged, pi, model, {0: np.full(2, 100.0)}, resamples=50)
    assert abs(res["dr"]["recall"] - 10 / 11) < 1e-12
    assert abs(res["dr"]["misses_per_run"] - 0.1) < 1e-12
    assert abs(res["ips"]["recall"] - 10 / 110) < 1e-12
