"""Off-policy estimators: checked against a simulated router whose true values are known, and
against invariants that hold for any logged data."""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plaudit.signals import ope, simulate
from plaudit.signals.evaluate import evaluate_policy

START_MS = 1_790_000_000_000


def _logged(
    rng: np.random.Generator, logging: np.ndarray, candidate: np.ndarray, n: int
) -> ope.Logged:
    """n decisions drawn from a (context x task) logging table, rewards in {0, 0.55, 1}."""
    contexts, tasks = logging.shape
    group = rng.integers(0, contexts, n)
    action = np.array([rng.choice(tasks, p=logging[g]) for g in group], dtype=np.int64)
    reward = rng.choice([0.0, 0.55, 1.0], size=n)
    rows = np.repeat(np.arange(n), tasks)
    pi_tasks = np.tile(np.arange(tasks), n)
    return ope.Logged(
        reward=reward,
        propensity=logging[group, action],
        action=action,
        group=group,
        pi_rows=rows,
        pi_tasks=pi_tasks,
        pi_probs=candidate[group].ravel(),
        n_tasks=tasks,
    )


def _table(draw: st.DrawFn, contexts: int, tasks: int) -> np.ndarray:
    raw = np.array([[draw(st.floats(0.05, 1.0)) for _ in range(tasks)] for _ in range(contexts)])
    return raw / raw.sum(axis=1, keepdims=True)


@st.composite
def problems(draw: st.DrawFn) -> tuple[np.ndarray, int, int]:
    contexts = draw(st.integers(1, 4))
    tasks = draw(st.integers(1, 5))
    return _table(draw, contexts, tasks), draw(st.integers(1, 300)), draw(st.integers(0, 2**32))


@settings(max_examples=60, deadline=None)
@given(problems())
def test_the_logging_policy_evaluated_on_its_own_log_is_its_mean(problem) -> None:
    logging, n, seed = problem
    rng = np.random.default_rng(seed)
    res = ope.estimate(_logged(rng, logging, logging, n), bootstrap=50, seed=seed)
    mean = res["logging"]["value"]
    assert res["effective_sample_size"] == pytest.approx(n, rel=1e-12)
    assert res["ips"]["value"] == pytest.approx(mean, abs=1e-12)
    assert res["snips"]["value"] == pytest.approx(mean, abs=1e-12)
    # every weight is 1, so each resample's IPS is that resample's mean: a zero-width difference
    assert res["ips"]["difference_ci"] == pytest.approx([0.0, 0.0], abs=1e-12)
    assert res["weights"]["mean"] == pytest.approx(1.0)
    assert 0.0 <= res["unlogged_mass"] < 1.0  # the chosen tasks at least were logged


@settings(max_examples=60, deadline=None)
@given(problems(), st.data())
def test_invariants_for_any_candidate(problem, data) -> None:
    logging, n, seed = problem
    candidate = _table(data.draw, *logging.shape)
    rng = np.random.default_rng(seed)
    logged = _logged(rng, logging, candidate, n)
    res = ope.estimate(logged, bootstrap=40, seed=seed)
    assert 0.0 < res["effective_sample_size"] <= n * (1 + 1e-12)
    lo, hi = float(logged.reward.min()), float(logged.reward.max())
    assert lo - 1e-12 <= res["snips"]["value"] <= hi + 1e-12  # self-normalised: a weighted mean
    for name in ope.ESTIMATORS:
        ci = res[name]["ci"]
        if ci is not None:
            assert ci[0] <= ci[1]
    # the same seed gives the same numbers
    again = ope.estimate(logged, bootstrap=40, seed=seed)
    assert again["dr"] == res["dr"] and again["ips"]["ci"] == res["ips"]["ci"]


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 200), st.integers(0, 2**32), st.integers(2, 6))
def test_cross_fitting_keeps_a_decisions_own_reward_out_of_its_prediction(n, seed, folds) -> None:
    rng = np.random.default_rng(seed)
    action = rng.integers(0, 3, n)
    group = rng.integers(0, 2, n)
    reward = rng.random(n)
    fold, k = ope.deal_folds(n, folds, np.random.default_rng(seed))
    before = ope.RewardModel(reward, action, group, 3, fold, k, 5.0).predict(
        np.arange(n), group, action
    )
    i = int(rng.integers(0, n))
    changed = reward.copy()
    changed[i] += 100.0
    after = ope.RewardModel(changed, action, group, 3, fold, k, 5.0).predict(
        np.arange(n), group, action
    )
    assert after[i] == pytest.approx(before[i], abs=1e-9)
    others = fold != fold[i]  # decisions in other folds do see it (through some cell or mean)
    assert np.all(after[others] >= before[others] - 1e-9)


def test_the_reward_model_shrinks_towards_the_task_and_the_overall_mean() -> None:
    # One fold: the model fitted on everything, easy to compute by hand.
    reward = np.array([1.0] * 95 + [0.0] * 5 + [0.0] * 2)
    action = np.array([0] * 100 + [1] * 2)
    group = np.array([0] * 100 + [1] * 2)
    model = ope.RewardModel(reward, action, group, 2, np.zeros(102, dtype=np.int64), 1, 5.0)
    q = model.predict(np.zeros(4, dtype=np.int64), np.array([0, 1, 1, 0]), np.array([0, 1, 0, 1]))
    grand = 95 / 102
    task0 = (95 + 5 * grand) / (100 + 5)
    task1 = (0 + 5 * grand) / (2 + 5)
    assert q[0] == pytest.approx((95 + 5 * task0) / (100 + 5))  # well seen: near its mean
    assert q[1] == pytest.approx((0 + 5 * task1) / (2 + 5))  # seen twice: pulled up
    assert q[2] == pytest.approx(task0)  # never seen in group 1: the task's mean
    assert q[3] == pytest.approx(task1)


def test_a_candidate_that_never_picks_a_logged_task_has_no_snips() -> None:
    n = 50
    logged = ope.Logged(
        reward=np.ones(n),
        propensity=np.ones(n),
        action=np.zeros(n, dtype=np.int64),
        group=np.zeros(n, dtype=np.int64),
        pi_rows=np.arange(n),
        pi_tasks=np.ones(n, dtype=np.int64),
        pi_probs=np.ones(n),
        n_tasks=2,
    )
    res = ope.estimate(logged, bootstrap=20)
    assert res["snips"]["value"] is None and res["effective_sample_size"] == 0.0
    assert res["ips"]["value"] == 0.0
    assert res["unlogged_mass"] == 1.0  # task 1 was never logged anywhere
    assert res["weights"]["zero_share"] == 1.0


def test_propensities_outside_zero_one_are_refused_by_the_arrays() -> None:
    with pytest.raises(ValueError, match="propensities"):
        ope.Logged(np.ones(1), np.zeros(1), np.zeros(1), np.zeros(1), [], [], [], 1)


def test_doubly_robust_interval_covers_the_true_value_in_simulation(tmp_path: Path) -> None:
    """The simulated router's candidate has an exactly known value; over 40 seeds (each a
    fresh log of 400 decisions read from a seq_mem file, as real data is), the DR 95%
    interval must cover it in at least 90% of them, and the estimates must centre on it."""
    sim = simulate.router()
    table = sim.table(simulate.CANDIDATE)
    truth = sim.value(simulate.CANDIDATE)
    assert truth > sim.logging_value() + 0.1  # the candidate is clearly better: a real test
    n, seeds = 400, 40
    covered = 0
    estimates = []
    for seed in range(seeds):
        path = tmp_path / f"seq_mem-{seed}.jsonl"
        with open(path, "w") as f:
            sim.write(f, n, seed=seed, start_ms=START_MS)
        res = evaluate_policy(
            table, seq_mem=path, now_ms=START_MS + n * 6_000, bootstrap=300, seed=seed
        )
        assert res["counts"]["evaluated"] == n
        dr = res["estimates"]["dr"]
        covered += dr["ci"][0] <= truth <= dr["ci"][1]
        estimates.append(dr["value"])
    assert covered >= 0.9 * seeds, f"DR covered the truth in {covered} of {seeds} seeds"
    spread = statistics.stdev(estimates) / seeds**0.5
    assert abs(statistics.mean(estimates) - truth) < 4 * spread
