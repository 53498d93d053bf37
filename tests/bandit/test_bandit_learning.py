"""The learning state: hierarchy sums, change detection, and the policy's proof and search."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plaudit.bandit import evidence, hierarchy, policy
from plaudit.bandit.config import BanditConfig
from plaudit.bandit.simulator import simulate

DS = BanditConfig().drift_settings()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 40), st.integers(0, 40)),
        min_size=1,
        max_size=30,
    )
)
def test_incremental_sums_equal_the_sums_recomputed_from_scratch(changes) -> None:
    # four contexts of one arm; each change sets one context's evidence to new counts
    s, f = np.zeros(4), np.zeros(4)
    sums = {k: np.zeros(1) for k in hierarchy.SUMS}
    for ctx, ns, nf in changes:
        sums = hierarchy.shift(sums, (s[ctx : ctx + 1], f[ctx : ctx + 1]), ([ns], [nf]))
        s[ctx], f[ctx] = ns, nf
    direct = [np.sum(t) for t in hierarchy.terms(s, f)]
    for k, want in zip(hierarchy.SUMS, direct, strict=True):
        assert abs(float(sums[k][0]) - want) < 1e-9


def _sums(s: list[float], f: list[float]) -> dict[str, np.ndarray]:
    return {
        k: np.array([np.sum(t)])
        for k, t in zip(hierarchy.SUMS, hierarchy.terms(np.array(s), np.array(f)), strict=True)
    }


def test_a_contexts_prior_ignores_its_own_runs() -> None:
    base_s, base_f = [30.0, 0.0, 1.0], [10.0, 40.0, 39.0]
    for own in ((0.0, 0.0), (5.0, 1.0), (0.0, 90.0)):
        sums = _sums([*base_s, own[0]], [*base_f, own[1]])
        m, kappa = hierarchy.context_prior(sums, [own[0]], [own[1]], np.array([0.5]), 2.0)
        alone = hierarchy.context_prior(_sums(base_s, base_f), [0.0], [0.0], np.array([0.5]), 2.0)
        assert np.allclose(m, alone[0]) and np.allclose(kappa, alone[1])


def test_alike_contexts_share_strongly_and_unlike_ones_weakly() -> None:
    alike = _sums([1.0] * 8, [99.0] * 8)  # an arm every task type ignores
    unlike = _sums([80.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [20.0] + [100.0] * 7)
    _, k_alike = hierarchy.context_prior(alike, [0.0], [0.0], np.array([0.5]), 2.0)
    _, k_unlike = hierarchy.context_prior(unlike, [0.0], [0.0], np.array([0.5]), 2.0)
    assert k_alike[0] > 10.0  # a new task type starts fairly sure the arm is useless
    assert k_unlike[0] < 1.0  # it learns this arm from its own runs


@settings(max_examples=60, deadline=None)
@given(tries=st.lists(st.integers(1, 400), min_size=1, max_size=8), hit=st.booleans())
def test_types_that_never_saw_an_arm_needed_bound_its_rate_not_zero_it(
    tries: list[int], hit: bool
) -> None:
    """Other task types' runs without a success put an arm's rate near ZERO_RATE / n, once
    each tried it ZERO_RATE_RUNS times or more; one success among them gives the plain mean
    of their rates, as before."""
    s = [1.0 if hit and i == 0 else 0.0 for i in range(len(tries))]
    f = [float(n) - si for n, si in zip(tries, s, strict=True)]
    m, _ = hierarchy.context_prior(_sums(s, f), [0.0], [0.0], np.array([0.5]), 2.0)
    inv_n = float(np.mean([1.0 / n for n in tries]))
    if hit:
        want = float(np.mean([si / n for si, n in zip(s, tries, strict=True)]))
    elif inv_n <= 1.0 / hierarchy.ZERO_RATE_RUNS:
        want = hierarchy.ZERO_RATE * inv_n
    else:
        want = 0.0  # too few tries to bound the rate: the mean of 0, clamped
    assert m[0] == pytest.approx(min(max(want, 1e-6), 1.0 - 1e-6), rel=1e-9)


def test_an_arm_a_few_types_seldom_need_is_not_shut_out_by_the_others_zeros() -> None:
    """Three task types ran an arm 40 times each and never needed it; the fourth needs it in
    3% of its runs. Its prior mean there is 0.25 / 40, not 0: above a cheap arm's bar of
    0.005."""
    s, f = [0.0, 0.0, 0.0], [40.0, 40.0, 40.0]
    m, kappa = hierarchy.context_prior(_sums(s, f), [0.0], [0.0], np.array([0.5]), 2.0)
    assert m[0] == pytest.approx(0.25 / 40)
    assert m[0] >= 0.005 and kappa[0] > 0.0


def _observe(st_: dict, outcomes: list[int], detect: bool = True) -> tuple[dict, list[bool]]:
    alarms = []
    for i, r in enumerate(outcomes):
        step = evidence.update(st_, float(r), DS, detect=detect, index=float(i + 1))
        st_ = step.state
        alarms.append(bool(step.changed))
    return st_, alarms


def test_a_retired_arm_keeps_only_its_failures_after_the_change() -> None:
    rng = np.random.default_rng(3)
    before = [int(x) for x in rng.random(120) < 0.6]
    state, alarms = _observe(evidence.fresh(), [*before, 1, *([0] * 35)])
    assert any(alarms[120:]) and not any(alarms[:120])
    assert float(state["s"]) == 0.0 and float(state["pw"]) == DS.reset_prior_weight
    assert float(state["drop_at"]) > 120  # a central drop: the arm was needed 60% of the time


def test_a_useful_arm_survives_a_short_run_of_misses_but_a_rise_is_quick() -> None:
    _, alarms = _observe(evidence.fresh(), [1] * 60 + [1, 1, 1, 0, 1, 1] * 5 + [0] * 4)
    assert not any(alarms)  # four misses of a 90% arm are luck, not a change (drop needs 18)
    dead, _ = _observe(evidence.fresh(), [0] * 80)
    woke, alarms = _observe(dead, [1] * 6)
    # the new segment: the last 8 outcomes (the shortest it may be), 6 of them hits
    assert any(alarms) and float(woke["s"]) / (float(woke["s"]) + float(woke["f"])) > 0.3


def test_the_global_scope_of_a_labelled_run_runs_no_detector() -> None:
    state, alarms = _observe(evidence.fresh(), [1] * 50 + [0] * 50, detect=False)
    assert not any(alarms) and (float(state["s"]), float(state["f"])) == (50.0, 50.0)


def _input(n: int = 3, **kw) -> policy.PolicyInput:
    """A policy input of `n` arms: what `kw` does not set is a hopeless, unprotected arm of
    500 tokens under a slack budget."""
    base = {
        "alpha": np.full(n, 0.02),
        "beta": np.full(n, 30.0),
        "tokens": np.full(n, 500, dtype=np.int64),
        "protected": np.zeros(n, dtype=bool),
        "underexplored": np.zeros(n, dtype=bool),
        "budget": 10_000,
        "bar": np.full(n, 0.05),
    }
    base.update(kw)
    return policy.PolicyInput(**base)


def test_own_runs_must_rule_an_arm_out_before_the_shared_prior_may() -> None:
    # the shared posterior (alpha 0.02) says "useless" for all three arms; arm 0 has 8 runs
    # of its own, arm 1 has 120, arm 2 is not under proof
    inp = _input(
        proof=np.array([True, True, False]),
        proof_s=np.array([0.0, 0.0, 0.0]),
        proof_f=np.array([8.0, 120.0, 8.0]),
    )
    assert policy.plan(inp).core.tolist() == [True, False, False]


def test_a_binding_budget_searches_untried_arms_first() -> None:
    n = 40
    tokens = np.full(n, 100, dtype=np.int64)
    inp = _input(
        n,
        alpha=np.full(n, 0.01),
        beta=np.full(n, 50.0),
        tokens=tokens,
        budget=1000,
        proof_s=np.zeros(n),
        proof_f=np.where(np.arange(n) < 20, 0.0, 6.0),  # arms 0-19 never tried here
    )
    p = policy.plan(inp).propensities
    assert p[:20].min() > 10 * p[20:].max()
    assert (p > 0).all()


def test_propensities_are_exact_with_a_slot_for_large_arms() -> None:
    rng = np.random.default_rng(5)
    n = 60
    tokens = np.where(np.arange(n) < 50, rng.integers(50, 200, n), 900).astype(np.int64)
    inp = _input(
        n,
        alpha=rng.uniform(0.2, 2, n),
        beta=rng.uniform(20, 60, n),
        tokens=tokens,
        bar=np.full(n, 0.2),
        budget=3000,
        proof_s=np.zeros(n),
        proof_f=rng.integers(0, 4, n).astype(float),
    )
    plan = policy.plan(inp)
    # the 900-token arms have slots of their own size class (a whole slot, or a share of one)
    big = [g for g in plan.slots if g.tokens >= 900 and (g.idx >= 50).any()]
    assert big and all(g.count + g.extra > 0 for g in big)
    assert (plan.propensities[50:] > 0).all()
    draws = np.mean([policy.draw(plan, rng) for _ in range(6000)], axis=0)
    assert np.abs(draws - plan.propensities).max() < 0.03
    for _ in range(200):
        chosen = policy.draw(plan, rng)
        assert int(tokens[chosen].sum()) <= inp.budget


def test_a_binding_budget_gives_no_core_place_to_an_arm_never_referenced() -> None:
    """Under a binding budget the prior alone (mean 0.75) would put every never-seen arm in the
    core; such arms are searched instead, and an arm some run referenced may be kept."""
    n = 40
    tokens = np.full(n, 100, dtype=np.int64)
    unseen = np.arange(n) >= 2
    inp = _input(
        n,
        alpha=np.full(n, 1.5),
        beta=np.full(n, 0.5),
        tokens=tokens,
        underexplored=np.ones(n, dtype=bool),
        budget=1000,
        proof_s=np.zeros(n),
        proof_f=np.zeros(n),
    )
    plain = policy.plan(inp)
    assert plain.core.sum() >= 8  # the prior fills the core ...
    seen = policy.plan(_replace(inp, unseen=unseen))
    assert seen.core[:2].all() and not seen.core[2:].any()  # ... unless nothing backs it
    assert (seen.propensities[2:] > 0).all()
    # when the inventory fits, the rule does not apply
    fits = _replace(inp, unseen=unseen, budget=10_000)
    assert policy.plan(fits).core.all()


def _replace(inp: policy.PolicyInput, **kw: object) -> policy.PolicyInput:
    import dataclasses

    return dataclasses.replace(inp, **kw)


def test_size_classes_try_cheap_arms_more_often_and_never_overrun_the_budget() -> None:
    """Under a binding budget the slots are grouped by size class and share the budget by
    search weight (equal tokens per unit of weight): a 100-token arm gets about ten times the
    tries of a 1,000-token one of the same weight, every arm that can be drawn has a
    propensity above 0, the propensities are the draws' frequencies, and no draw overruns the
    budget."""
    rng = np.random.default_rng(9)
    n = 200
    tokens = np.where(np.arange(n) < 100, 100, 1000).astype(np.int64)
    inp = _input(
        n,
        alpha=np.full(n, 0.01),
        beta=np.full(n, 50.0),
        tokens=tokens,
        budget=3000,
        explore_slots=16,
        proof_s=np.zeros(n),
        proof_f=np.zeros(n),
    )
    plan = policy.plan(inp)
    p = plan.propensities
    assert (p > 0).all()
    ratio = p[:100].mean() / p[100:].mean()
    assert 6.0 < ratio < 14.0, ratio
    draws = [policy.draw(plan, rng) for _ in range(6000)]
    assert np.abs(np.mean(draws, axis=0) - p).max() < 0.03
    assert max(int(tokens[d].sum()) for d in draws) <= inp.budget
    # the budget is used: on average most of it goes to the search (what may be held back is
    # room for the slots rounded up, here one 1,000-token slot of a 3,000-token budget)
    assert np.mean([int(tokens[d].sum()) for d in draws]) > 0.6 * inp.budget


@settings(max_examples=60, deadline=None)
@given(
    costs=st.lists(st.integers(0, 5000), min_size=2, max_size=80),
    budget=st.integers(1, 20000),
    seed=st.integers(0, 2**32 - 1),
)
def test_slots_never_overrun_the_budget_and_included_arms_have_propensities(
    costs: list[int], budget: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    n = len(costs)
    tokens = np.array(costs, dtype=np.int64)
    inp = _input(
        n,
        alpha=rng.uniform(0.01, 3, n),
        beta=rng.uniform(0.5, 50, n),
        tokens=tokens,
        budget=budget,
        proof_s=rng.integers(0, 2, n).astype(float),
        proof_f=rng.integers(0, 5, n).astype(float),
        unseen=rng.random(n) < 0.5,
        types=rng.integers(0, 5, n),
        tried=rng.random(n) < 0.5,
    )
    plan = policy.plan(inp)
    p = plan.propensities
    for _ in range(20):
        chosen = policy.draw(plan, rng)
        assert int(tokens[chosen].sum()) <= max(budget, int(tokens[plan.core].sum()))
        assert (p[chosen] > 0).all()


def test_the_search_tries_the_rest_of_a_type_whose_tried_arms_were_needed() -> None:
    """Type weights: once the one section tried was referenced, an untried section outweighs
    an untried tool when half the tried tools were never referenced anywhere."""
    types = np.array([4, 4, 0, 0, 0, 0, 0])  # two sections, five tools
    tried = np.array([True, False, True, True, True, True, False])
    found = np.array([True, False, True, False, False, False, False])
    w = policy.type_weight(types, tried, found)
    assert w[4] == 1.0 and w[0] < 0.6
    n = types.size
    inp = _input(
        n,
        alpha=np.full(n, 0.01),
        beta=np.full(n, 50.0),
        tokens=np.full(n, 100, dtype=np.int64),
        budget=300,
        proof_s=np.zeros(n),
        proof_f=np.zeros(n),
        unseen=~found,
        types=types,
        tried=tried,
    )
    p = policy.plan(inp).propensities
    assert p[1] > 1.5 * p[6]  # the untried section before the untried tool
    assert policy.plan(_replace(inp, types=None)).propensities[1] == pytest.approx(
        policy.plan(_replace(inp, types=None)).propensities[6]
    )


def test_sections_needed_in_every_run_are_found_within_300_runs_at_2000_arms() -> None:
    """With nothing fetched, an arm needed in every run of every task type that no run has
    tried (a section: it cannot be fetched) is found by the search alone. At 2,000 arms under
    a binding budget, all three sections are in every run from run 300 on, in each of three
    seeds. (Before the search weighed arms by their type, one seed first tried a section at
    run 541.)"""
    from plaudit.bandit import workloads
    from plaudit.bandit.simulator import PlauditPolicy, default_config

    sc = workloads.large(2000)
    sections = np.flatnonzero([r == "section" for r in sc.roles])

    class Watch(PlauditPolicy):
        late: list[bool]

        def choose(self, run: int, task: int | None) -> np.ndarray:
            chosen = super().choose(run, task)
            if run >= 300:
                self.late.append(bool(chosen[sections].all()))
            return chosen

    for seed in range(3):
        watch: list[Watch] = []

        def make(s, rng, watch=watch):
            w = Watch(s, default_config(s), rng)
            w.late = []
            watch.append(w)
            return w

        simulate(sc, make, 400, seed=seed)
        late = watch[0].late
        assert len(late) == 100 and all(late), (seed, sum(late))


def _settled(n: int, **kw) -> policy.PolicyInput:
    """A context with enough runs of its own that its evidence decides (`proof` is set)."""
    base = {"proof": np.zeros(n, dtype=bool), "proof_s": np.zeros(n), "proof_f": np.zeros(n)}
    return _input(n, **{**base, **kw})


def test_an_undeclared_rare_arm_is_judged_by_expected_cost_and_a_declared_one_is_kept() -> None:
    """The issue: an arm needed in 2.5% of a type's runs, at a bar of 4.6%, stayed in that
    type's core for hundreds of runs (the proof rule held every arm). Now only a critical
    arm is held until its own runs rule it out; the others go when their mean is below
    their bar."""
    from plaudit.bandit.config import merged

    # 6 needs in 250 runs: a mean near 2.5%, below the bar, but not ruled out at 2%
    kw = {
        "alpha": np.array([6.5]),
        "beta": np.array([244.5]),
        "bar": np.array([0.046]),
        "proof_s": np.array([6.0]),
        "proof_f": np.array([244.0]),
        "tokens": np.array([1460], dtype=np.int64),
    }
    assert not policy.plan(_settled(1, **kw)).core[0]
    held = _settled(1, **kw, proof=np.array([True]), critical=np.array([True]))
    assert policy.plan(held).core[0]
    # declaring a miss cost or a prior makes an arm critical; a critical arm with no miss
    # cost of its own has a bar of at most proof_bar, whatever its size
    cfg = merged(
        BanditConfig(), {"miss_costs": {"file": 90000}, "arm_priors": {"tool:web:*": [1, 1]}}
    )
    decl = policy.declared(cfg, ["file:ws:big.md", "tool:web:Search", "tool:fs:Read"])
    assert decl is not None and decl.critical.tolist() == [True, True, False]
    tokens = np.array([3000, 3000, 3000], dtype=np.int64)
    one = np.ones(3)
    inp = policy.from_config(
        cfg, one, one, tokens, np.zeros(3, bool), np.zeros(3, bool), 20000, decl=decl
    )
    assert inp.bar[0] == pytest.approx(3000 / 90000) and inp.bar[1] == cfg.proof_bar
    assert inp.bar[2] == pytest.approx(min(cfg.threshold, 3000 / 9000))


def test_a_left_out_arm_is_retried_by_its_evidence_and_again_as_it_ages() -> None:
    """The issue's stall: a file that became central was tried twice after the change, in
    runs that did not need it, and then only at the 0.005 floor. An arm a settled context
    left out is retried with probability explore_evidence x P(theta >= bar) under its own
    evidence: often while that evidence is thin, seldom once it rules the arm out, and more
    often again as it ages."""
    kw = {"alpha": np.full(3, 0.01), "beta": np.full(3, 80.0), "bar": np.full(3, 0.04)}
    fresh = _settled(3, **kw, proof_f=np.array([2.0, 20.0, 200.0]), explore_evidence=0.05)
    e = policy.plan(fresh).explore
    assert e[0] > e[1] > e[2] == 0.005  # thin evidence, some, ruled out: the floor
    assert e[0] > 0.02
    aged = _replace(fresh, stale=np.full(3, 1 / 16))  # four half-lives without a look
    assert (policy.plan(aged).explore > e).all()


def test_a_new_arm_nothing_announces_is_adopted_within_600_runs() -> None:
    """A dead file becomes needed in 80% of code tasks at run 1,000, and nothing else in that
    task type changes: no fetched misses, no other arm dropping. In this seed the floor alone
    first included it 860 runs later."""
    from plaudit.bandit import workloads

    sc = workloads.drift(retire=False)
    m = simulate(sc, "plaudit", 1800, seed=3)
    d = sc.drift_at
    assert m.inclusion("file:workspace:src/new_core.py", (d + 600, d + 700), {0}) >= 0.9


def test_few_false_alarms_in_a_stationary_stream() -> None:
    """The detectors watch every arm of a context, so each must alarm rarely: 30 arms at
    stationary rates from 1% to 90%, 10,000 observations each, raise at most one alarm (at
    the previous thresholds, 6 and 12, such streams raised about 25)."""
    rng = np.random.default_rng(11)
    rates = np.linspace(0.01, 0.9, 30)
    st_ = evidence.fresh(30)
    alarms = 0
    for i in range(10_000):
        step = evidence.update(st_, (rng.random(30) < rates).astype(float), DS, index=i + 1.0)
        alarms += int(step.changed.sum())
        st_ = step.state
    assert alarms <= 1


def test_an_arm_a_type_has_seen_needed_stays_and_is_searched_under_a_binding_budget() -> None:
    """At 2,000 arms a file needed in 84% of one type's runs, seen needed once and missed
    twice, was left out of 116 of the last 1,000 runs that needed it: the other types'
    evidence ("never") kept it out of the core, and the search gave it no weight once it had
    been referenced. Its own runs decide now."""
    n = 40
    own_s, own_f = np.zeros(n), np.zeros(n)
    own_s[0], own_f[0] = 1.0, 2.0
    inp = _input(
        n,
        alpha=np.full(n, 0.05),
        beta=np.full(n, 30.0),  # the shared posterior: hopeless
        tokens=np.full(n, 500, dtype=np.int64),
        bar=np.full(n, 0.12),
        budget=4000,
        proof_s=own_s,
        proof_f=own_f,
    )
    assert policy.plan(inp).core[0]
    from plaudit.bandit.search import discovery

    assert discovery(inp)[0] > 0.5


def test_modules_share_what_was_found_only_where_ids_predict_it() -> None:
    """One module whose tried arms were mostly needed: its untried siblings weigh more, and
    modules with nothing found less (within 1/4 and 4). Needs spread over modules at random:
    every weight is 1."""
    from plaudit.bandit.search import group_codes, module_of, module_weights

    assert module_of("file:workspace:src/auth/login.py") == "auth"
    assert module_of("tool:auth:Login") == "auth" and module_of("memory:project:x") == "project"
    ids = [f"file:workspace:src/m{k}/f{j}.py" for k in range(20) for j in range(20)]
    groups = group_codes(ids)
    s, f = np.zeros(400), np.zeros(400)
    tried = np.arange(400) % 20 < 10  # half of every module tried
    f[tried] = 1.0
    hit = tried & (groups == 3)
    s[hit], f[hit] = 1.0, 0.0  # module m3: every tried arm needed
    w = module_weights(groups, s, f)
    assert w[groups == 3].min() == 4.0 and w[groups != 3].max() < 1.0 and w.min() >= 0.25
    rng = np.random.default_rng(0)
    s, f = np.zeros(400), np.zeros(400)
    f[tried] = 1.0
    spread = tried & (rng.random(400) < 0.05)
    s[spread], f[spread] = 1.0, 0.0
    assert (module_weights(groups, s, f) == 1.0).all()


@settings(max_examples=60, deadline=None)
@given(
    modules=st.lists(st.integers(0, 6), min_size=2, max_size=60),
    seed=st.integers(0, 2**32 - 1),
)
def test_module_weights_stay_within_their_bounds(modules: list[int], seed: int) -> None:
    from plaudit.bandit.search import CLIP, module_weights

    rng = np.random.default_rng(seed)
    n = len(modules)
    f = rng.integers(0, 3, n).astype(float)
    s = (rng.random(n) < 0.3).astype(float)
    w = module_weights(np.array(modules, dtype=np.int64), s, f)
    assert w.shape == (n,) and (w >= 1 / CLIP - 1e-12).all() and (w <= CLIP + 1e-12).all()
