"""The selection policy in isolation: order, threshold, budget, baseline, propensities."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from plaudit.bandit import policy


def make(n: int, **kw) -> policy.PolicyInput:
    base = dict(
        alpha=np.full(n, 3.0),
        beta=np.full(n, 1.0),
        tokens=np.full(n, 100, dtype=np.int64),
        protected=np.zeros(n, bool),
        underexplored=np.zeros(n, bool),
        budget=10**6,
        threshold=0.2,
    )
    base.update(kw)
    return policy.PolicyInput(**base)


def test_useless_arms_are_excluded_even_when_everything_fits() -> None:
    alpha = np.array([100.0, 1.0, 50.0])
    beta = np.array([1.0, 200.0, 50.0])
    inp = make(3, alpha=alpha, beta=beta)
    included, _ = policy.select(inp, np.random.default_rng(1))
    assert included.tolist() == [True, False, True]


def test_protected_arms_are_never_excluded_even_past_the_budget() -> None:
    inp = make(
        3,
        alpha=np.array([1.0, 1.0, 100.0]),
        beta=np.array([500.0, 500.0, 1.0]),
        tokens=np.array([600, 600, 100], dtype=np.int64),
        protected=np.array([True, True, False]),
        budget=1000,
    )
    included, _ = policy.select(inp, np.random.default_rng(0))
    assert included.tolist() == [True, True, False]
    assert policy.baseline(inp).tolist() == [True, True, False]


def test_underexplored_arms_come_before_sampled_ones() -> None:
    inp = make(
        3,
        alpha=np.array([1.0, 100.0, 100.0]),
        beta=np.array([500.0, 1.0, 1.0]),
        tokens=np.array([100, 100, 100], dtype=np.int64),
        underexplored=np.array([True, False, False]),
        budget=200,
    )
    included, _ = policy.select(inp, np.random.default_rng(0))
    assert included[0] and included.sum() == 2


def test_greedy_fill_skips_an_arm_that_does_not_fit_and_continues() -> None:
    inp = make(
        3,
        alpha=np.array([1000.0, 900.0, 800.0]),
        beta=np.array([1.0, 100.0, 200.0]),
        tokens=np.array([500, 800, 400], dtype=np.int64),
        budget=1000,
    )
    included, _ = policy.select(inp, np.random.default_rng(0))
    assert included.tolist() == [True, False, True]


def test_seed_reproduces_the_selection() -> None:
    inp = make(50, alpha=np.linspace(0.5, 5, 50), beta=np.linspace(5, 0.5, 50), budget=2500)
    a = policy.select(inp, np.random.default_rng(42))[0]
    b = policy.select(inp, np.random.default_rng(42))[0]
    assert (a == b).all()


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 30),
    data=st.data(),
    budget=st.integers(0, 3000),
    seed=st.integers(0, 2**32 - 1),
)
def test_never_exceeds_the_budget_beyond_protected_arms(n, data, budget, seed) -> None:
    tokens = data.draw(hnp.arrays(np.int64, n, elements=st.integers(0, 800)))
    protected = data.draw(hnp.arrays(bool, n))
    under = data.draw(hnp.arrays(bool, n))
    inp = make(
        n,
        alpha=data.draw(hnp.arrays(float, n, elements=st.floats(0.1, 50))),
        beta=data.draw(hnp.arrays(float, n, elements=st.floats(0.1, 50))),
        tokens=tokens,
        protected=protected,
        underexplored=under,
        budget=budget,
    )
    for included in (policy.select(inp, np.random.default_rng(seed))[0], policy.baseline(inp)):
        assert included[protected].all()
        extra = int(tokens[included & ~protected].sum())
        assert extra <= max(0, budget - int(tokens[protected].sum()))
        # greedy: every left-out eligible arm really did not fit
        left = budget - int(tokens[included].sum())
        assert all(tokens[i] > left for i in np.flatnonzero(~included & under))


def test_inclusion_probabilities_match_the_empirical_frequency() -> None:
    rng = np.random.default_rng(3)
    n = 12
    inp = make(
        n,
        alpha=rng.uniform(0.5, 6, n),
        beta=rng.uniform(0.5, 6, n),
        tokens=rng.integers(50, 400, n),
        protected=np.eye(n, dtype=bool)[0],
        budget=1200,  # binding: exercises the overflow path
    )
    rate = 0.1
    est = policy.inclusion_probabilities(inp, rate, np.random.default_rng(5), samples=4000)
    freq = np.zeros(n)
    trials = 4000
    r = np.random.default_rng(9)
    for _ in range(trials):
        freq += policy.baseline(inp) if r.random() < rate else policy.select(inp, r)[0]
    assert est[0] == 1.0
    assert np.abs(est - freq / trials).max() < 0.04


def test_exact_probabilities_when_the_budget_cannot_bind() -> None:
    rng = np.random.default_rng(4)
    n = 10
    inp = make(
        n,
        alpha=rng.uniform(0.5, 8, n),
        beta=rng.uniform(0.5, 8, n),
        threshold=rng.uniform(0.01, 0.4, n),
        underexplored=np.eye(n, dtype=bool)[1],
        protected=np.eye(n, dtype=bool)[2],
    )
    est = policy.inclusion_probabilities(inp, 0.2, np.random.default_rng(0))
    draws = rng.beta(inp.alpha, inp.beta, size=(200_000, n)) >= inp.threshold
    expect = 0.2 + 0.8 * draws.mean(axis=0)
    expect[[1, 2]] = 1.0
    assert np.abs(est - expect).max() < 0.005
