"""The library API on both backends: select, observe, rewards, contexts, discount, savings."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plaudit import Plaudit
from plaudit.bandit import Selection
from plaudit.bandit.projection import (
    OBSERVATION_V1,
    RUN_V2,
    compact_rewards,
    reward_pairs,
    rewards_of,
)
from plaudit.errors import ConflictError, NotFoundError, ValidationError
from plaudit.events import make_event

OUTPUT = "Read README.md; deploys go through the canary stage, then I debugged it."


def test_select_records_a_run_with_propensities(pl: Plaudit, arms) -> None:
    sel = pl.bandit.select(arms, token_budget=8000, context="code", seed=7)
    assert isinstance(sel, Selection)
    assert sorted(sel.included + sel.excluded) == sorted(a["id"] for a in arms)
    ev = pl.log.get(sel.run_id)
    assert ev is not None and ev.type == RUN_V2
    p = ev.payload
    assert p["context"] == "code" and p["budget"] == 8000
    assert p["is_baseline"] == sel.is_baseline
    # the arms considered are recorded once, as a set the run names, and read back whole
    assert "arms" not in p and p["arm_set"]
    assert pl.bandit.considered(sel.run_id) == {a["id"]: a["tokens"] for a in arms}
    assert {a: t for a, t in pl.bandit.run(sel.run_id)["arms"]} == {
        a["id"]: a["tokens"] for a in arms
    }
    assert p["included"] == sel.included and len(p["p"]) == len(sel.included)
    assert all(0.0 < x <= 1.0 for x in p["p"])
    assert p["inventory_tokens"] == sum(a["tokens"] for a in arms)
    assert sel.used_tokens == sum(a["tokens"] for a in arms if a["id"] in sel.included)
    # fresh arms are underexplored, so every arm is included with probability 1
    assert all(v == 1.0 for v in sel.probabilities.values())


def test_same_seed_same_selection(pl: Plaudit, arms) -> None:
    pl.bandit.configure(min_pulls=0)
    a = pl.bandit.select(arms, token_budget=2500, seed=11)
    b = pl.bandit.select(arms, token_budget=2500, seed=11)
    assert (a.included, a.is_baseline) == (b.included, b.is_baseline)
    assert a.run_id != b.run_id


def test_rewards_follow_reference_detection(pl: Plaudit, arms) -> None:
    sel = pl.bandit.select(arms, token_budget=100_000, seed=1)
    obs = pl.bandit.observe(
        sel.run_id, OUTPUT, tool_calls=[{"name": "Bash"}], usage_tokens=5000, duration_ms=900
    )
    assert obs.rewards == {
        "section:system:instructions": 1,
        "tool:exec:Bash": 1,
        "tool:web:WebSearch": 0,
        "skill:debugging:main": 0,  # "debugged" is not the word "debugging"
        "file:workspace:README.md": 1,
        "memory:project:deploys": 1,
    }
    post = {s.id: s for s in pl.bandit.posteriors()}
    # curated prior Beta(0.75, 0.25), learned Beta(0.5, 0.5), plus one observation each
    assert (post["tool:exec:Bash"].alpha, post["tool:exec:Bash"].beta) == (1.75, 0.25)
    assert (post["tool:web:WebSearch"].alpha, post["tool:web:WebSearch"].beta) == (0.75, 1.25)
    assert (post["file:workspace:README.md"].alpha, post["file:workspace:README.md"].beta) == (
        1.5,
        0.5,
    )
    assert post["tool:exec:Bash"].pulls == 1 and post["tool:exec:Bash"].confidence == "low"


def test_excluded_arms_get_no_update(pl: Plaudit, arms) -> None:
    pl.bandit.configure(
        min_pulls=0,
        threshold=1.0,
        miss_cost_tokens=None,
        baseline_rate=0.0,
        explore_max=1e-6,
        explore_floor=1e-6,
    )
    pl.bandit.configure(protected=["tool:exec:Bash"])
    sel = pl.bandit.select(arms, token_budget=100_000, seed=3)
    assert sel.included == ["tool:exec:Bash"]  # threshold 1 leaves out all but the protected
    pl.bandit.observe(sel.run_id, "nothing", tool_calls=[])
    post = {s.id: s for s in pl.bandit.posteriors()}
    assert post["tool:exec:Bash"].pulls == 1
    assert all(post[a["id"]].pulls == 0 for a in arms if a["id"] != "tool:exec:Bash")


def test_unknown_run_and_idempotent_or_conflicting_observations(pl: Plaudit, arms) -> None:
    with pytest.raises(NotFoundError, match="no bandit run"):
        pl.bandit.observe("01234567-no-such-run", "x")
    sel = pl.bandit.select(arms, seed=1)
    first = pl.bandit.observe(sel.run_id, OUTPUT, tool_calls=[{"name": "Bash"}])
    again = pl.bandit.observe(sel.run_id, OUTPUT, tool_calls=[{"name": "Bash"}])
    assert first.status == "appended" and again.status == "present"
    assert again.rewards == first.rewards
    before = pl.bandit.posteriors()
    with pytest.raises(ConflictError, match="already observed with a different outcome"):
        pl.bandit.observe(sel.run_id, "a different output")
    assert pl.bandit.posteriors() == before
    assert pl.log.stats().by_type[OBSERVATION_V1] == 1


def test_observations_are_recorded_compactly_and_read_back_by_id(pl: Plaudit, arms) -> None:
    """`observe` records the included arms and their rewards as two strings (`arms`, `hits`);
    `run` and an idempotent repeat give the rewards by id, as before."""
    sel = pl.bandit.select(arms, token_budget=100_000, seed=1)
    obs = pl.bandit.observe(sel.run_id, OUTPUT, tool_calls=[{"name": "Bash"}])
    stored = pl.log.get(f"obs:{sel.run_id}")
    assert stored is not None and "rewards" not in stored.payload
    assert stored.payload["arms"].split("\n") == sorted(sel.included)  # in id order
    assert rewards_of(stored.payload) == obs.rewards
    assert pl.bandit.run(sel.run_id)["observation"]["rewards"] == obs.rewards
    assert "hits" not in pl.bandit.run(sel.run_id)["observation"]
    again = pl.bandit.observe(sel.run_id, OUTPUT, tool_calls=[{"name": "Bash"}])
    assert again.status == "present" and again.rewards == obs.rewards


def test_a_run_observed_by_an_older_version_is_still_idempotent(pl: Plaudit, arms) -> None:
    """A run whose observation an older version recorded (rewards by id): observing it again
    with the same outcome is `present`, with another outcome a conflict, and nothing is
    appended either way."""
    sel = pl.bandit.select(arms, token_budget=100_000, seed=1)
    # what `observe` records for the same outcome, rewritten in the first form
    other = pl.bandit.select(arms, token_budget=100_000, seed=1)
    ref = pl.bandit.observe(other.run_id, OUTPUT, tool_calls=[{"name": "Bash"}])
    stored = pl.log.get(f"obs:{other.run_id}")
    assert stored is not None
    old = {k: v for k, v in stored.payload.items() if k not in ("arms", "hits")}
    old["run_id"] = sel.run_id
    old["rewards"] = dict(ref.rewards)
    pl.log.append(make_event(OBSERVATION_V1, old, id=f"obs:{sel.run_id}", source="bandit"))
    length, before = len(pl.log), pl.bandit.posteriors()
    again = pl.bandit.observe(sel.run_id, OUTPUT, tool_calls=[{"name": "Bash"}])
    assert again.status == "present" and again.rewards == ref.rewards
    with pytest.raises(ConflictError, match="already observed with a different outcome"):
        pl.bandit.observe(sel.run_id, "a different output")
    assert len(pl.log) == length and pl.bandit.posteriors() == before


@settings(max_examples=200, deadline=None)
@given(
    rewards=st.dictionaries(
        st.from_regex(
            r"(tool|file|skill|memory):[a-z0-9_.-]{1,6}:[^\x00-\x1f\x7f]{1,12}", fullmatch=True
        ),
        st.sampled_from([0, 1]),
        max_size=40,
    )
)
def test_the_compact_form_decodes_to_the_same_rewards(rewards: dict[str, int]) -> None:
    """Whatever the arm ids (their names may hold colons, slashes, spaces, any printable
    character) and rewards, `arms` and `hits` give back exactly the rewards by id, in order;
    and the first form reads the same."""
    hits = "".join(str(v) for v in rewards.values())
    compact = compact_rewards(list(rewards), hits)
    assert reward_pairs(compact) == (list(rewards), hits)
    assert rewards_of(compact) == rewards and list(rewards_of(compact)) == list(rewards)
    assert rewards_of({"rewards": rewards}) == rewards
    assert reward_pairs({"rewards": rewards}) == (list(rewards), hits)


@pytest.mark.parametrize(
    "payload",
    [
        {"arms": "a:b:c\nd:e:f", "hits": "1"},  # one reward for two arms
        {"arms": "a:b:c", "hits": "2"},
        {"arms": "a:b:c\na:b:c", "hits": "10"},  # an arm twice
        {"arms": "a:b:c", "hits": "1", "rewards": {"a:b:c": 1}},  # both forms
        {"arms": "a:b:c"},
        {},
    ],
)
def test_a_malformed_compact_observation_is_refused(payload: dict) -> None:
    with pytest.raises(ValueError):
        reward_pairs(payload)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"output_text": 5}, "output_text"),
        ({"tool_calls": [{"args": 1}]}, "tool_calls"),
        ({"tool_calls": "Bash"}, "tool_calls"),
        ({"usage_tokens": -1}, "usage_tokens"),
        ({"usage_tokens": "10"}, "usage_tokens"),
        ({"duration_ms": float("nan")}, "duration_ms"),
        ({"error": 3}, "error"),
    ],
)
def test_bad_observations_write_nothing(pl: Plaudit, arms, kwargs, field) -> None:
    sel = pl.bandit.select(arms, seed=1)
    length = len(pl.log)
    with pytest.raises(ValidationError) as exc:
        pl.bandit.observe(sel.run_id, **kwargs)
    assert exc.value.field == field
    assert len(pl.log) == length


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"token_budget": -1}, "token_budget"),
        ({"token_budget": "8000"}, "token_budget"),
        ({"context": ""}, "context"),
        ({"context": "a\nb"}, "context"),
        ({"seed": -3}, "seed"),
        ({"arms": [{"id": "tool:exec:Bash", "tokens": -5}]}, "tokens"),
        ({"arms": [{"id": "Bash", "tokens": 5}]}, "id"),
    ],
)
def test_bad_selections_write_nothing(pl: Plaudit, arms, kwargs, field) -> None:
    length = len(pl.log)
    kwargs.setdefault("arms", arms)
    with pytest.raises(ValidationError) as exc:
        pl.bandit.select(**kwargs)
    assert exc.value.field == field
    assert len(pl.log) == length


def test_select_without_arms_uses_the_registered_inventory(pl: Plaudit, arms) -> None:
    with pytest.raises(ValidationError, match="none given and none registered"):
        pl.bandit.select()
    pl.bandit.register(arms)
    length = len(pl.log)
    pl.bandit.register(arms)  # unchanged: nothing written
    assert len(pl.log) == length
    sel = pl.bandit.select(seed=2)
    assert len(sel.included) + len(sel.excluded) == len(arms)
    assert {a.id for a in pl.bandit.arms()} == {a["id"] for a in arms}
    mem = pl.bandit.arm("memory:project:deploys")
    assert mem["arm"]["content"].startswith("Deploys go through")
    with pytest.raises(NotFoundError):
        pl.bandit.arm("tool:exec:Nope")


def test_passive_phase_includes_everything_and_learns_nothing(pl: Plaudit, arms) -> None:
    pl.bandit.configure(phase="passive")
    sel = pl.bandit.select(arms, seed=1)
    assert sel.phase == "passive" and not sel.excluded
    obs = pl.bandit.observe(sel.run_id, OUTPUT)
    assert not obs.updated
    assert all(s.pulls == 0 for s in pl.bandit.posteriors())
    assert pl.bandit.savings()["selected_runs"] == 0  # passive runs are not part of savings


def test_errored_runs_are_recorded_and_update_only_if_configured(pl: Plaudit, arms) -> None:
    sel = pl.bandit.select(arms, seed=1)
    assert not pl.bandit.observe(sel.run_id, OUTPUT, error="timeout").updated
    assert all(s.pulls == 0 for s in pl.bandit.posteriors())
    assert pl.bandit.run(sel.run_id)["observation"]["error"] == "timeout"
    pl.bandit.configure(update_on_error=True)
    sel = pl.bandit.select(arms, seed=2)
    assert pl.bandit.observe(sel.run_id, OUTPUT, error="timeout").updated
    assert {s.pulls for s in pl.bandit.posteriors() if s.id in sel.included} == {1}


def _observe_many(pl: Plaudit, arms, n: int, context: str | None, output: str) -> None:
    for i in range(n):
        sel = pl.bandit.select(arms, token_budget=100_000, context=context, seed=i)
        pl.bandit.observe(sel.run_id, output)


def test_a_contexts_prior_comes_from_the_other_contexts(pl: Plaudit, arms) -> None:
    # include everything, so every arm gets each update; no change detection, to check sums
    pl.bandit.configure(baseline_rate=1.0, drift="off")
    for i in range(20):  # Bash is called in every "always" run
        sel = pl.bandit.select(arms, token_budget=100_000, context="always", seed=i)
        pl.bandit.observe(sel.run_id, "ran it", tool_calls=[{"name": "Bash"}])
    _observe_many(pl, arms, 20, "never", "nothing referenced")
    g = {s.id: s for s in pl.bandit.posteriors()}["tool:exec:Bash"]
    assert (g.alpha, g.beta) == (20.75, 20.25)  # the global scope pools both
    # A new context: the two others' rates are 1 and 0, so m = 0.5 and their spread, less the
    # binomial noise of 20 runs each, is far wider than a Beta(2m, 2(1 - m)) would give: the
    # prior is weak (kappa = 0.25 / tau^2 - 1, clipped at 0.3), so the new type learns from its
    # own runs.
    spread = 0.25
    tau_hat = (1.0 + 0.0 - 2 * 0.25) - spread * (1 / 20 + 1 / 20)
    tau2 = (2 * spread / 3 + tau_hat) / 3
    kappa = max(spread / tau2 - 1.0, 0.3)
    fresh = {s.id: s for s in pl.bandit.posteriors("brand-new")}["tool:exec:Bash"]
    assert fresh.alpha == pytest.approx(kappa * 0.5) and fresh.beta == pytest.approx(kappa * 0.5)
    assert fresh.pulls == 0
    # A context's prior leaves its own runs out: "always" sees only "never" (one context: the
    # prior strength k0 = 2), whose 20 runs without Bash bound its rate there near 0.25 / 20
    # rather than at 0, and adds its own 20 successes.
    m = 0.25 / 20
    a = {s.id: s for s in pl.bandit.posteriors("always")}["tool:exec:Bash"]
    assert a.alpha == pytest.approx(2 * m + 20.0) and a.beta == pytest.approx(2 * (1 - m))


def test_discount_by_runs_is_deterministic_and_survives_rebuild(
    pl: Plaudit, arms, posterior_table
) -> None:
    pl.bandit.configure(baseline_rate=1.0, half_life_runs=4, drift="off")
    _observe_many(pl, arms, 8, None, "nothing")
    s = {x.id: x for x in pl.bandit.posteriors()}["tool:exec:Bash"]
    # 8 misses, each worth half as much 4 observations later: sum_{k=0..7} 0.5^(k/4)
    expected = sum(0.5 ** (k / 4) for k in range(8))
    assert s.beta == pytest.approx(0.25 + expected)
    assert s.pulls == 8
    before = posterior_table(pl)
    pl.rebuild()
    assert posterior_table(pl) == before


def test_rebuild_reproduces_identical_state(pl: Plaudit, arms, posterior_table) -> None:
    pl.bandit.configure(half_life_days=1.5)
    for i in range(25):
        ctx = ["code", "research", None][i % 3]
        sel = pl.bandit.select(arms, token_budget=3000, context=ctx, seed=i)
        pl.bandit.observe(sel.run_id, OUTPUT if i % 2 else "no", tool_calls=[{"name": "Bash"}])
    before = (posterior_table(pl), pl.bandit.savings(), pl.bandit.history())
    counts = pl.rebuild()
    assert counts["bandit"] == len(list(pl.log.replay(types=["plaudit.bandit."])))
    assert (posterior_table(pl), pl.bandit.savings(), pl.bandit.history()) == before


def test_savings_compare_baseline_and_selected_runs(pl: Plaudit, arms) -> None:
    pl.bandit.configure(baseline_rate=0.5, min_pulls=0, threshold=0.2, miss_cost_tokens=None)
    for i in range(60):
        sel = pl.bandit.select(arms, token_budget=100_000, seed=i)
        pl.bandit.observe(
            sel.run_id,
            "only Bash" if i % 7 else OUTPUT,
            tool_calls=[{"name": "Bash"}],
            duration_ms=100.0 if sel.is_baseline else 80.0,
            error="boom" if i % 10 == 0 else None,
        )
    s = pl.bandit.savings()
    full = sum(a["tokens"] for a in arms)
    assert s["baseline_runs"] + s["selected_runs"] == 60
    assert s["baseline_avg_tokens"] == full
    pct = (full - s["selected_avg_tokens"]) / full * 100
    assert s["token_savings_percent"] == pytest.approx(pct)
    assert s["ci_low"] < s["token_savings_percent"] < s["ci_high"]
    assert s["token_savings_percent"] > 0
    assert s["baseline_avg_duration_ms"] == 100.0 and s["selected_avg_duration_ms"] == 80.0
    assert s["baseline_error_rate"] + s["selected_error_rate"] > 0
    h = s["history"]
    assert len(h) == 60 and h[-1]["run"] == 60
    assert h[-1]["baseline_avg_tokens"] == s["baseline_avg_tokens"]


def test_convergence_history_moves_over_time(pl: Plaudit, arms) -> None:
    pl.bandit.configure(baseline_rate=1.0, drift="off")
    for i in range(12):
        sel = pl.bandit.select(arms, seed=i)
        pl.bandit.observe(sel.run_id, "x", tool_calls=[{"name": "Bash"}] if i < 6 else [])
    series = pl.bandit.history("tool:exec:Bash")["tool:exec:Bash"]
    means = [p["mean"] for p in series]
    assert len(means) == 12
    assert means[5] == pytest.approx(6.75 / 7) and means[-1] == pytest.approx(6.75 / 13)
    assert max(means) > means[-1]  # not today's value repeated
    assert len(pl.bandit.history(points=5)["tool:exec:Bash"]) == 5


def test_config_is_an_event_and_applies_in_log_order(pl: Plaudit) -> None:
    cfg = pl.bandit.configure(threshold=0.3, protected=["tool:web:*"])
    assert cfg.threshold == 0.3 and cfg.protected == ["tool:web:*"]
    events = list(pl.log.replay(types=["plaudit.bandit.config"]))
    assert len(events) == 1 and events[0].payload == {
        "changes": {"threshold": 0.3, "protected": ["tool:web:*"]}
    }
    with pytest.raises(ValidationError):
        pl.bandit.configure(threshold=-1)
    assert pl.bandit.config.threshold == 0.3


@pytest.mark.parametrize(
    ("type_", "payload"),
    [
        (RUN_V2, {"budget": 1}),
        (RUN_V2, {"budget": 1, "used_tokens": 0, "arms": [{"id": "a", "tokens": "x"}]}),
        (OBSERVATION_V1, {"run_id": "r", "rewards": {"tool:exec:Bash": 7}}),
        (OBSERVATION_V1, {"run_id": "r", "rewards": [], "usage_tokens": 1}),
        (OBSERVATION_V1, {"run_id": "r", "arms": "tool:exec:Bash", "hits": "10"}),
        (OBSERVATION_V1, {"run_id": "r", "arms": "tool:exec:Bash", "hits": "x"}),
        (OBSERVATION_V1, {"run_id": "r"}),
        ("plaudit.bandit.config.v1", {"changes": {"threshold": "x"}}),
        ("plaudit.bandit.arms.v1", {"arms": [{"id": "nope", "tokens": 1}]}),
    ],
)
def test_malformed_bandit_event_appended_directly_is_rejected(
    pl: Plaudit, type_: str, payload: dict
) -> None:
    length = len(pl.log)
    with pytest.raises(ValidationError):
        pl.log.append({"type": type_, "payload": payload})
    assert len(pl.log) == length
    assert pl.log.verify().ok


def test_selection_struct_serialises(pl: Plaudit, arms) -> None:
    sel = pl.bandit.select(arms, seed=1)
    data = msgspec.json.decode(msgspec.json.encode(sel))
    assert data["run_id"] == sel.run_id and data["included"] == sel.included


def test_savings_follow_every_run_another_handle_writes(pl: Plaudit, db_url: str, arms) -> None:
    """A repeated read answers as a fresh handle would: runs written by another handle (or
    process) count at once, and changing the returned dict changes nothing else."""
    pl.bandit.configure(min_pulls=0, threshold=0.2, miss_cost_tokens=None)
    first = pl.bandit.savings()
    first["runs"] = -1
    assert pl.bandit.savings()["runs"] == 0
    with Plaudit.open(db_url) as other:
        for i in range(3):
            sel = other.bandit.select(arms, token_budget=100_000, seed=i)
            other.bandit.observe(sel.run_id, "only Bash")
        fresh = other.bandit.savings()
    got = pl.bandit.savings()
    assert got["runs"] == 3 and got == fresh
    with Plaudit.open(db_url) as again:
        assert again.bandit.savings() == pl.bandit.savings()


def test_savings_are_net_of_baseline_runs_and_match_the_simulator_under_a_binding_budget(
    pl: Plaudit,
) -> None:
    """A budget far below the inventory: the counterfactual is a random-order fill of the
    budget, and the reported prompt saving's interval holds the saving the simulator measures
    against its own random fills."""
    import numpy as np

    from plaudit.bandit import policy
    from plaudit.bandit.simulator import run_store
    from plaudit.bandit.workloads import stationary

    sc = stationary()
    sc.budget = 9000  # the inventory holds about 22,700 tokens
    pl.bandit.configure(baseline_rate=0.1)
    m = run_store(pl, sc, 150, seed=4)
    s = pl.bandit.savings()
    assert s["counterfactual"] == "random-order fill up to the budget"
    rng = np.random.default_rng(0)
    inp = policy.PolicyInput(
        alpha=np.ones(sc.n),
        beta=np.ones(sc.n),
        tokens=sc.tokens,
        protected=np.zeros(sc.n, dtype=bool),
        underexplored=np.zeros(sc.n, dtype=bool),
        budget=sc.budget,
        bar=np.zeros(sc.n),
    )
    fills = [int(sc.tokens[policy.baseline(inp, rng)].sum()) for _ in range(150)]
    measured = (1 - sum(m.tokens) / sum(fills)) * 100
    assert s["prompt_ci_low"] <= measured <= s["prompt_ci_high"]
    assert s["prompt_savings_percent"] > 0
    # against everything registered the saving is larger still: most of it cannot fit
    assert s["inventory_savings_percent"] > 55
    # net of baseline runs is below the gross figure: baseline runs save nothing
    assert s["net_savings_percent"] < s["token_savings_percent"]


def _miss_text(arm_id: str) -> tuple[str, list[dict]]:
    """An output that references `arm_id` by its own rule."""
    type_, category, name = arm_id.split(":", 2)
    if type_ == "tool":
        return "", [{"name": name}]
    if type_ == "file":
        return f"I read {name} myself.", []
    if type_ == "skill":
        return f"This needs {category}.", []
    return "As noted: Deploys go through the canary stage and need two approvals.", []


def test_a_referenced_excluded_arm_is_learned_as_a_miss(pl: Plaudit, arms, posterior_table) -> None:
    """An arm the run left out but the output references (the agent fetched it) counts as a
    success in the run's context and globally; sections never do; rebuild agrees."""
    pl.bandit.register(arms)
    sel = pl.bandit.select(None, token_budget=500, context="code", seed=3)
    missed = [a for a in sel.excluded if not a.startswith("section:")]
    assert missed, sel
    target = missed[0]
    text, calls = _miss_text(target)
    before = {s.id: (s.alpha, s.beta) for s in pl.bandit.posteriors(context="code")}
    obs = pl.bandit.observe(sel.run_id, text, calls)
    assert target in obs.missed and target not in obs.rewards
    assert not any(a.startswith("section:") for a in obs.missed)
    assert set(obs.missed).isdisjoint(sel.included)
    after = {s.id: (s.alpha, s.beta) for s in pl.bandit.posteriors(context="code")}

    def mean(ab: tuple[float, float]) -> float:
        return ab[0] / (ab[0] + ab[1])

    assert mean(after[target]) > mean(before[target])
    others = [a for a in before if a != target and a not in obs.rewards]
    assert all(after[a] == before[a] for a in others if a not in obs.missed)
    glob = {s.id: s for s in pl.bandit.posteriors()}
    assert glob[target].pulls == 1
    ev = pl.log.get(_observation_event_id(pl, sel.run_id))
    assert ev is not None and target in ev.payload["missed"]
    # the same observation again is a no-op that reports the same misses
    again = pl.bandit.observe(sel.run_id, text, calls)
    assert again.status == "present" and again.missed == obs.missed
    state = posterior_table(pl)
    pl.rebuild()
    assert posterior_table(pl) == state


def test_learn_from_misses_off_leaves_excluded_arms_alone(pl: Plaudit, arms) -> None:
    pl.bandit.register(arms)
    pl.bandit.configure(learn_from_misses=False)
    sel = pl.bandit.select(None, token_budget=500, context="code", seed=3)
    target = next(a for a in sel.excluded if not a.startswith("section:"))
    obs = pl.bandit.observe(sel.run_id, *_miss_text(target))
    assert obs.missed == []
    assert {s.id: s for s in pl.bandit.posteriors()}[target].pulls == 0


def _observation_event_id(pl: Plaudit, run_id: str) -> str:
    for ev in pl.log.replay(types=[OBSERVATION_V1]):
        if ev.payload["run_id"] == run_id:
            return ev.id
    raise AssertionError("no observation event")


def test_a_settings_change_from_another_handle_applies_to_the_next_observe(
    db_url: str, arms
) -> None:
    """`observe` keeps the parsed settings between calls, keyed by the settings' position in
    the log: a change made through another handle (or process) must apply at once."""
    with Plaudit.open(db_url) as a, Plaudit.open(db_url) as b:
        a.bandit.register(arms)
        first = a.bandit.select(token_budget=8000, seed=1)
        assert not a.bandit.observe(first.run_id, OUTPUT, error="boom").updated  # cached now
        b.bandit.configure(update_on_error=True)
        second = a.bandit.select(token_budget=8000, seed=2)
        assert a.bandit.observe(second.run_id, OUTPUT, error="boom").updated
        a.bandit.configure(update_on_error=False)
        third = b.bandit.select(token_budget=8000, seed=3)
        assert not b.bandit.observe(third.run_id, OUTPUT, error="boom").updated
        b.bandit.configure(phase="passive")
        fourth = a.bandit.select(token_budget=8000, seed=4)
        assert fourth.phase == "passive"
        assert not a.bandit.observe(fourth.run_id, OUTPUT).updated


def test_an_observe_after_the_registry_changed_uses_the_new_positions(pl: Plaudit) -> None:
    """A select's included arms and their registry positions are remembered for its
    observe; when arms registered in between move every position (a new id sorting first),
    observe reads the run's arms again, and its rewards are the per-arm rules' answer."""
    from plaudit.bandit.detect import referenced_arms

    ids = [f"file:ws:f{i:03d}.md" for i in range(100)]
    pl.bandit.register([{"id": a, "tokens": 10} for a in ids])
    sel = pl.bandit.select(token_budget=100_000, seed=1)
    assert len(sel.included) > 64
    pl.bandit.register([{"id": "file:aa:first.md", "tokens": 10}])
    pl.bandit.posteriors()  # the handle's cache now holds the new registry
    text = "read f001.md, f050.md and f099.md"
    obs = pl.bandit.observe(sel.run_id, text)
    want = referenced_arms(dict.fromkeys(sel.included), text, [])
    assert obs.rewards == {a: int(v) for a, v in want.items()}
    assert sorted(obs.referenced) == ["file:ws:f001.md", "file:ws:f050.md", "file:ws:f099.md"]
