"""The selection policy as pure numpy: no store, no clock, so it is fast, seedable and shared by
the library, the simulator and the benchmarks.

Order of inclusion: protected arms (always, even past the budget), then underexplored arms
(pulls < min_pulls), then the rest by Thompson-sampled usefulness, filled greedily into what is
left of the token budget (an arm that does not fit is skipped and smaller ones after it may
still fit). Sampled usefulness below `threshold`
is excluded even when everything would fit, which is where savings come from.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from plaudit.bandit.stats import beta_sf_array

FloatArr = NDArray[np.float64]
BoolArr = NDArray[np.bool_]
IntArr = NDArray[np.int64]

#: Added to the sort key of underexplored arms so they come before any sampled value in [0, 1].
_UNDEREXPLORED = 2.0


@dataclass(frozen=True)
class PolicyInput:
    """Everything the policy needs, as aligned arrays (one entry per considered arm)."""

    alpha: FloatArr
    beta: FloatArr
    tokens: IntArr
    protected: BoolArr
    underexplored: BoolArr
    budget: int
    threshold: FloatArr | float  # per arm, or one bar for all


def _fill(
    order: IntArr, tokens: IntArr, eligible: BoolArr, budget: int, protected: BoolArr
) -> BoolArr:
    """Protected arms always; then eligible arms greedily in `order`, skipping any that no
    longer fit (smaller ones after it may still fit)."""
    chosen = protected.copy()
    remaining = budget - int(tokens[protected].sum())
    cand = order[(eligible & ~protected)[order]]
    if cand.size == 0:
        return chosen
    costs = tokens[cand]
    if int(costs.sum()) <= remaining:  # the common case: everything eligible fits
        chosen[cand] = True
        return chosen
    keep = costs <= max(remaining, 0)
    cand, costs = cand[keep], costs[keep]
    while cand.size:
        csum = np.cumsum(costs)
        k = int(np.searchsorted(csum, remaining, side="right"))
        chosen[cand[:k]] = True
        if k:
            remaining -= int(csum[k - 1])
        # cand[k] does not fit: drop it and keep filling with what comes after it
        cand, costs = cand[k + 1 :], costs[k + 1 :]
        keep = costs <= remaining
        cand, costs = cand[keep], costs[keep]
    return chosen


def baseline(inp: PolicyInput) -> BoolArr:
    """The counterfactual: every arm, protected first then inventory order, up to the budget."""
    n = len(inp.tokens)
    order = np.arange(n, dtype=np.int64)
    return _fill(order, inp.tokens, np.ones(n, dtype=bool), inp.budget, inp.protected)


def select(inp: PolicyInput, rng: np.random.Generator) -> tuple[BoolArr, FloatArr]:
    """One Thompson-sampling selection; returns (included mask, sampled usefulness)."""
    theta = rng.beta(inp.alpha, inp.beta)
    key = theta + _UNDEREXPLORED * inp.underexplored
    order = np.argsort(-key, kind="stable").astype(np.int64)
    eligible = inp.underexplored | (theta >= inp.threshold)
    return _fill(order, inp.tokens, eligible, inp.budget, inp.protected), theta


def inclusion_probabilities(
    inp: PolicyInput, baseline_rate: float, rng: np.random.Generator, samples: int = 256
) -> FloatArr:
    """Each arm's probability of being included by this policy, for off-policy evaluation.

    When the whole inventory fits the budget, arms do not compete and P(in | selected) is exact:
    1 for protected and underexplored arms, else P(theta >= bar) from the Beta survival
    function. Otherwise Monte-Carlo: draw `samples` posterior samples at once and replay the
    selection rule on each (vectorised over samples; the greedy skip only loops when a draw
    overflows the budget); the standard error is then at most 0.5 / sqrt(samples).
    Either way p = rate * P(in | baseline) + (1 - rate) * P(in | selected).
    """
    n = len(inp.tokens)
    if n == 0:
        return np.zeros(0)
    free = ~inp.protected
    remaining0 = inp.budget - int(inp.tokens[inp.protected].sum())
    p_base = baseline(inp).astype(np.float64)
    if int(inp.tokens[free].sum()) <= remaining0:
        # The budget cannot bind, so arms are independent: P(in) = P(theta >= bar), exactly.
        bar = np.broadcast_to(np.asarray(inp.threshold, dtype=np.float64), (n,))
        p_sel = np.where(
            inp.protected | inp.underexplored, 1.0, beta_sf_array(bar, inp.alpha, inp.beta)
        )
        return baseline_rate * p_base + (1.0 - baseline_rate) * p_sel
    theta = rng.beta(inp.alpha, inp.beta, size=(samples, n))
    eligible = free & (inp.underexplored | (theta >= inp.threshold))
    fits_all = np.where(eligible, inp.tokens, 0).sum(axis=1) <= remaining0
    chosen = eligible | inp.protected
    overflow = np.flatnonzero(~fits_all)
    if overflow.size:
        key = theta[overflow] + _UNDEREXPLORED * inp.underexplored
        order = np.argsort(-key, axis=1)  # ties have probability zero: any sort will do
        elig_sorted = np.take_along_axis(eligible[overflow], order, axis=1)
        tok_sorted = np.take_along_axis(
            np.broadcast_to(inp.tokens, (overflow.size, n)), order, axis=1
        )
        remaining = np.full(overflow.size, remaining0, dtype=np.int64)
        picked = np.zeros((overflow.size, n), dtype=bool)
        for j in range(n):
            take = elig_sorted[:, j] & (tok_sorted[:, j] <= remaining)
            remaining -= np.where(take, tok_sorted[:, j], 0)
            picked[:, j] = take
        back = np.zeros_like(picked)
        np.put_along_axis(back, order, picked, axis=1)
        chosen[overflow] = back | inp.protected
    p_selected = chosen.mean(axis=0)
    return baseline_rate * p_base + (1.0 - baseline_rate) * p_selected
