"""The selection policy: the core, exploration, the budget, and exact propensities."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from plaudit.bandit import policy


def make(n: int, **kw) -> policy.PolicyInput:
    base = {
        "alpha": np.full(n, 5.0),
        "beta": np.full(n, 5.0),
        "tokens": np.full(n, 100, dtype=np.int64),
        "protected": np.zeros(n, dtype=bool),
        "underexplored": np.zeros(n, dtype=bool),
        "budget": 100 * n,
        "bar": np.full(n, 0.2),
    }
    base.update(kw)
    return policy.PolicyInput(**base)


def test_useful_arms_are_in_the_core_and_useless_ones_mostly_out() -> None:
    # arm 0 clearly useful, arm 1 clearly useless (mean 0.01, tight), arm 2 protected useless
    inp = make(
        3,
        alpha=np.array([90.0, 2.0, 1.0]),
        beta=np.array([10.0, 198.0, 99.0]),
        protected=np.array([False, False, True]),
    )
    plan = policy.plan(inp)
    assert plan.core.tolist() == [True, False, True]
    assert plan.propensities[0] == 1.0 and plan.propensities[2] == 1.0
    assert 0 < plan.propensities[1] <= 0.02  # just the floor: nothing left to learn there
    freq = np.mean([policy.draw(plan, np.random.default_rng(s))[1] for s in range(3000)])
    assert abs(freq - plan.propensities[1]) < 0.01


def test_protected_arms_are_never_excluded_even_past_the_budget() -> None:
    inp = make(3, protected=np.array([True, True, False]), budget=150)
    for seed in range(20):
        inc = policy.draw(policy.plan(inp), np.random.default_rng(seed))
        assert inc[0] and inc[1]


def test_underexplored_arms_are_tried_when_the_inventory_fits() -> None:
    inp = make(
        2,
        alpha=np.array([1.0, 1.0]),
        beta=np.array([99.0, 99.0]),
        underexplored=np.array([True, False]),
    )
    assert policy.plan(inp).core.tolist() == [True, False]


def test_greedy_fill_skips_an_arm_that_does_not_fit_and_continues() -> None:
    tokens = np.array([60, 50, 30], dtype=np.int64)
    inp = make(3, tokens=tokens, alpha=np.array([9.0, 8.0, 7.0]), beta=np.ones(3), budget=100)
    plan = policy.plan(inp)
    # 90 tokens for the core (10% kept for exploration): 60 fits, 50 does not, 30 still does
    assert plan.core.tolist() == [True, False, True]


def test_seed_reproduces_the_selection() -> None:
    inp = make(40, alpha=np.linspace(1, 9, 40), beta=np.linspace(9, 1, 40))
    a = policy.select(inp, np.random.default_rng(42))[0]
    b = policy.select(inp, np.random.default_rng(42))[0]
    assert (a == b).all()


@st.composite
def inputs(draw) -> policy.PolicyInput:
    n = draw(st.integers(1, 30))
    floats = st.floats(0.05, 50.0)
    tokens = np.array(draw(st.lists(st.integers(0, 500), min_size=n, max_size=n)), dtype=np.int64)
    return make(
        n,
        alpha=np.array(draw(st.lists(floats, min_size=n, max_size=n))),
        beta=np.array(draw(st.lists(floats, min_size=n, max_size=n))),
        tokens=tokens,
        protected=np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))),
        underexplored=np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))),
        budget=draw(st.integers(0, 8000)),
        bar=np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n))),
    )


@settings(max_examples=150, deadline=None)
@given(inputs(), st.integers(0, 2**32 - 1))
def test_budget_is_kept_and_every_included_arm_has_a_positive_propensity(
    inp: policy.PolicyInput, seed: int
) -> None:
    included, p = policy.select(inp, np.random.default_rng(seed))
    free = included & ~inp.protected
    room = max(inp.budget - int(inp.tokens[inp.protected].sum()), 0)
    assert int(inp.tokens[free].sum()) <= room
    assert (p[included] > 0).all()
    assert ((p >= 0) & (p <= 1)).all()
    base = policy.baseline(inp, np.random.default_rng(seed))
    assert int(inp.tokens[base & ~inp.protected].sum()) <= room and base[inp.protected].all()


def _empirical(inp: policy.PolicyInput, runs: int) -> np.ndarray:
    plan = policy.plan(inp)
    rng = np.random.default_rng(9)
    return np.mean([policy.draw(plan, rng) for _ in range(runs)], axis=0)


def test_propensities_are_exact_when_everything_fits() -> None:
    rng = np.random.default_rng(3)
    inp = make(30, alpha=rng.uniform(0.2, 5, 30), beta=rng.uniform(1, 60, 30))
    plan = policy.plan(inp)
    assert not plan.binding
    freq = _empirical(inp, 6000)
    assert np.abs(freq - plan.propensities).max() < 0.03


def test_propensities_are_exact_when_the_budget_binds() -> None:
    rng = np.random.default_rng(4)
    n = 60
    inp = make(
        n,
        alpha=rng.uniform(0.2, 5, n),
        beta=rng.uniform(1, 40, n),
        tokens=rng.integers(50, 400, n).astype(np.int64),
        budget=3000,
    )
    plan = policy.plan(inp)
    assert plan.binding and plan.slot_q.sum() > 0
    freq = _empirical(inp, 6000)
    assert np.abs(freq - plan.propensities).max() < 0.03


def test_binding_baseline_is_a_random_fill_not_the_first_arms() -> None:
    inp = make(50, budget=1000)  # ten of fifty 100-token arms fit
    counts = np.zeros(50)
    for seed in range(400):
        b = policy.baseline(inp, np.random.default_rng(seed))
        assert b.sum() == 10
        counts += b
    assert counts.min() > 30  # every arm gets its turn (expected 80)
