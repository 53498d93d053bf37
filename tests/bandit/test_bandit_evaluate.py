"""Off-policy evaluation checked against the simulator's hidden truth."""

from __future__ import annotations

import numpy as np

from plaudit.bandit import workloads
from plaudit.bandit.config import merged
from plaudit.bandit.evalcheck import evaluation_check
from plaudit.bandit.evaluate import LoggedRun, estimate, weight_diagnostics
from plaudit.bandit.simulator import default_config

#: leaves out more than the logging policy: a miss costs about a third of a retry
CANDIDATE = {"miss_cost_tokens": 8000}


def _coverage(seeds: range, runs: int, workload: str = "critical") -> dict[str, list[bool]]:
    """Per configuration and figure, whether the doubly robust interval covered the truth."""
    sc = getattr(workloads, workload)()
    cand = merged(default_config(sc), CANDIDATE)
    out: dict[str, list[bool]] = {}
    for seed in seeds:
        for name, (est, truth) in evaluation_check(
            sc, cand, runs, seed=seed, resamples=200
        ).items():
            lo, hi = est["dr"]["recall_ci"]
            out.setdefault(f"{name} recall", []).append(lo <= truth.recall <= hi)
            nlo, nhi = est["dr"]["net_savings_ci"]
            out.setdefault(f"{name} net savings", []).append(
                nlo <= truth.net_savings_percent <= nhi
            )
    return out


def test_doubly_robust_covers_the_current_and_a_candidate_in_nine_of_ten_seeds() -> None:
    # The truth is each configuration's recall and net savings on the evaluated runs, from
    # the needs the simulator hid; the candidate leaves out more arms than the logging policy,
    # so its misses fall on arms the log explored at small propensities, or never.
    for what, covered in _coverage(range(100, 110), 1000).items():
        assert sum(covered) >= 9, (what, covered)


def test_doubly_robust_covers_on_the_stationary_and_drift_workloads_too() -> None:
    # drift: runs before a context's latest detected change are left out, as `evaluate` does
    for workload in ("stationary", "drift"):
        for what, covered in _coverage(range(100, 108), 1500, workload).items():
            assert sum(covered) >= 7, (workload, what, covered)


def test_ips_and_snips_say_when_they_cannot_be_trusted() -> None:
    pi = {0: np.array([1.0, 0.5])}
    sure = [LoggedRun(0, np.array([0, 1]), np.array([1, 0]), np.array([1.0, 0.5]), 200)] * 50
    assert weight_diagnostics(sure, pi)["trusted"]
    # one observation at the exploration floor weighs 100 times the others
    floor = [*sure, LoggedRun(0, np.array([1]), np.array([1]), np.array([0.005]), 200)]
    got = weight_diagnostics(floor, pi)
    assert not got["trusted"] and got["weight_range"][1] == 100.0 and "weighs 100" in got["why"]
    res = estimate(floor, pi, {0: np.full(2, 0.3)}, {0: np.full(2, 10.0)}, resamples=30)
    assert res["ips"]["trusted"] is False and res["snips"]["trusted"] is False
    assert "trusted" not in res["dr"]


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
    # Below the switch no observation is weighted up (IPS would count this one need 200
    # times), but the run that included the arm saw its need: it counts as itself, and the
    # model (0 here) speaks only for the runs that did not include the arm.
    pi = {0: np.array([1.0, 0.0])}
    model = {0: np.zeros(2)}
    logged = [LoggedRun(0, np.array([0, 1]), np.array([1, 1]), np.array([1.0, 0.005]), 200)]
    logged += [LoggedRun(0, np.array([0]), np.array([1]), np.array([1.0]), 200) for _ in range(9)]
    res = estimate(logged, pi, model, {0: np.full(2, 100.0)}, resamples=50)
    assert abs(res["dr"]["recall"] - 10 / 11) < 1e-12
    assert abs(res["dr"]["misses_per_run"] - 0.1) < 1e-12
    assert abs(res["ips"]["recall"] - 10 / 210) < 1e-12
