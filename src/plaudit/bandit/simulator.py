"""An agent-workload simulator for the context bandit.

A scenario is an inventory of arms with token costs, several task types, and a hidden
probability that each arm is *needed* by a task of each type. Some arms are needed often in one
task type, some are rarely needed but critical, some are dead weight, sections are always
needed, and at `drift_at` some needs move (a tool changes task type, a dead file comes alive).
The simulated model references an included arm exactly when the task needs it. A needed arm
that was left out is a miss; with `Scenario.reveal` > 0 the agent fetches it anyway with that
probability (reads the file, searches for the tool or the memory) and the output references it:
a *revealed miss*, which a learner may learn from like the real `observe` does.

Strategies run in memory (fast, for benchmarks) through the same `policy` module the library
uses; `run_store` drives a real store through `Plaudit.bandit` with synthetic output text and
tool calls, which also exercises reference detection (the demo uses it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from plaudit.bandit import policy
from plaudit.bandit.config import KIND_PRIORS, BanditConfig
from plaudit.bandit.memory import MemoryLearner

if TYPE_CHECKING:
    from plaudit.core import Plaudit

TASK_TYPES: tuple[str, ...] = ("code", "research", "ops", "writing", "data")


@dataclass
class Scenario:
    """The hidden world: arms, costs, need probabilities before and after drift."""

    ids: list[str]
    tokens: np.ndarray  # (n,)
    need: np.ndarray  # (task types, n) before drift
    need_after: np.ndarray  # (task types, n) after drift
    roles: list[str]  # "common", "rare-critical", "dead", "section", "drift"
    contents: dict[str, str]
    task_types: tuple[str, ...] = TASK_TYPES
    drift_at: int = 1000
    budget: int = 40000
    name: str = "default"
    #: probability of each task type (None: uniform)
    task_probs: np.ndarray | None = None
    #: probability that a needed arm the run left out is fetched by the agent anyway, so that
    #: its output references it (a revealed miss); 0: a left-out arm is never seen
    reveal: float = 0.0
    #: what the user of this inventory declares (settings such as `miss_costs` for the arms
    #: a miss of which is worse than a retry): every strategy run with plaudit's settings uses
    #: them (`default_config`)
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def revealable(self) -> np.ndarray:
        """Arms whose fetch `observe` can tell apart: not sections, and not a skill whose
        category word other skills share (see `detect.InventoryIndex`)."""
        cats = [i.split(":", 2)[1].lower() if i.startswith("skill:") else None for i in self.ids]
        count: dict[str, int] = {}
        for c in cats:
            if c is not None:
                count[c] = count.get(c, 0) + 1
        return np.array(
            [
                not i.startswith("section:") and (c is None or count[c] == 1)
                for i, c in zip(self.ids, cats, strict=True)
            ]
        )

    @property
    def n(self) -> int:
        return len(self.ids)

    def need_at(self, run: int) -> np.ndarray:
        return self.need if run < self.drift_at else self.need_after


def default_scenario(seed: int = 7, *, budget: int = 40000, drift_at: int = 1000) -> Scenario:
    """40 arms over 5 task types: 24 common, 4 rare-but-critical, 8 dead, 3 sections, and 1
    tool whose need moves between task types at `drift_at`."""
    rng = np.random.default_rng(seed)
    t = len(TASK_TYPES)
    ids: list[str] = []
    roles: list[str] = []
    costs: list[int] = []
    contents: dict[str, str] = {}
    need_rows: list[np.ndarray] = []

    def add(arm_id: str, role: str, cost: int, need: np.ndarray, content: str | None = None):
        ids.append(arm_id)
        roles.append(role)
        costs.append(cost)
        need_rows.append(need)
        if content is not None:
            contents[arm_id] = content

    common = [
        ("tool:exec:Bash", 0),
        ("tool:fs:Read", 0),
        ("tool:fs:Edit", 0),
        ("tool:fs:Grep", 0),
        ("tool:exec:Python", 4),
        ("tool:web:Fetch", 1),
        ("tool:ops:Kubectl", 2),
        ("tool:ops:Terraform", 2),
        ("tool:doc:Outline", 3),
        ("tool:data:Sql", 4),
        ("skill:debugging:main", 0),
        ("skill:citation:main", 1),
        ("skill:incident:main", 2),
        ("skill:style:main", 3),
        ("skill:statistics:main", 4),
        ("file:workspace:README.md", 0),
        ("file:workspace:src/app.py", 0),
        ("file:workspace:docs/runbook.md", 2),
        ("file:workspace:notes/outline.md", 3),
        ("file:workspace:data/schema.sql", 4),
        ("memory:project:conventions", 0),
        ("memory:project:sources", 1),
        ("memory:project:oncall", 2),
        ("memory:project:voice", 3),
    ]
    for arm_id, home in common:
        need = rng.uniform(0.0, 0.02, t)
        need[home] = rng.uniform(0.35, 0.9)
        if rng.random() < 0.5:  # a secondary task type
            need[(home + 1 + rng.integers(t - 1)) % t] = rng.uniform(0.15, 0.4)
        kind = arm_id.split(":", 1)[0]
        cost = int(
            rng.integers(
                *{
                    "tool": (150, 700),
                    "skill": (400, 1500),
                    "file": (600, 3500),
                    "memory": (80, 400),
                }[kind]
            )
        )
        add(arm_id, "common", cost, need, _memory_text(rng, arm_id) if kind == "memory" else None)
    rare = [
        ("tool:web:WebSearch", 1, 0.06),
        ("tool:ops:Rollback", 2, 0.04),
        ("memory:project:security-incident", 0, 0.04),
        ("skill:legal:main", 3, 0.05),
    ]
    for arm_id, home, p in rare:
        need = np.zeros(t)
        need[home] = p
        need[(home + 2) % t] = p / 2
        kind = arm_id.split(":", 1)[0]
        add(
            arm_id,
            "rare-critical",
            int(rng.integers(150, 500)),
            need,
            _memory_text(rng, arm_id) if kind == "memory" else None,
        )
    dead = [
        "tool:misc:Calendar",
        "tool:misc:Weather",
        "skill:poetry:main",
        "file:workspace:LICENSE",
        "file:workspace:CHANGELOG.md",
        "file:workspace:old/legacy.py",
        "memory:project:old-roadmap",
        "tool:misc:Translate",
    ]
    for arm_id in dead:
        kind = arm_id.split(":", 1)[0]
        add(
            arm_id,
            "dead",
            int(rng.integers(200, 2500)),
            np.zeros(t),
            _memory_text(rng, arm_id) if kind == "memory" else None,
        )
    for arm_id in ("section:system:instructions", "section:system:safety", "section:system:format"):
        add(arm_id, "section", int(rng.integers(200, 900)), np.ones(t))
    need_before = np.array(need_rows).T  # (t, n)
    add("tool:vcs:Git", "drift", 300, np.zeros(t))
    need_before = np.column_stack([need_before, np.zeros(t)])
    need_before[0, -1] = 0.7  # Git is needed in code tasks ...
    need_after = need_before.copy()
    need_after[:, -1] = 0.0
    need_after[2, -1] = 0.7  # ... and after drift in ops tasks instead
    legacy = ids.index("file:workspace:old/legacy.py")
    need_after[0, legacy] = 0.5  # a dead file comes alive
    roles[legacy] = "drift"
    return Scenario(
        ids=ids,
        tokens=np.array(costs, dtype=np.int64),
        need=need_before,
        need_after=need_after,
        roles=roles,
        contents=contents,
        drift_at=drift_at,
        budget=budget,
    )


_LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))


def _memory_text(rng: np.random.Generator, arm_id: str) -> str:
    """Random pseudo-words: no 20-character run of one memory occurs in another by chance."""
    return " ".join("".join(rng.choice(_LETTERS, 6)) for _ in range(12))


# -- strategies ------------------------------------------------------------------------------
@dataclass
class Metrics:
    """Per-run records; summaries are computed over any window of runs."""

    tokens: list[int] = field(default_factory=list)
    oracle_tokens: list[int] = field(default_factory=list)
    full_tokens: list[int] = field(default_factory=list)
    needed: list[int] = field(default_factory=list)
    hit: list[int] = field(default_factory=list)
    rare_needed: list[int] = field(default_factory=list)
    rare_hit: list[int] = field(default_factory=list)
    cheap_needed: list[int] = field(default_factory=list)
    cheap_hit: list[int] = field(default_factory=list)
    dear_needed: list[int] = field(default_factory=list)
    dear_hit: list[int] = field(default_factory=list)
    task: list[int] = field(default_factory=list)
    baseline: list[bool] = field(default_factory=list)
    #: inclusion of each tracked (drifting) arm, per run
    tracked: dict[str, list[bool]] = field(default_factory=dict)
    select_ns: list[int] = field(default_factory=list)

    def summary(
        self,
        last: int | None = None,
        miss_penalty: float = 5000.0,
        *,
        window: tuple[int, int] | None = None,
    ) -> dict[str, Any]:
        """Metrics over the last `last` runs, or over runs [start, stop) given as `window`."""
        sl = slice(*window) if window else slice(-last, None) if last else slice(None)
        tok = np.asarray(self.tokens[sl], dtype=float)
        full = np.asarray(self.full_tokens[sl], dtype=float)
        orc = np.asarray(self.oracle_tokens[sl], dtype=float)
        needed, hit = sum(self.needed[sl]), sum(self.hit[sl])
        misses = needed - hit

        def ratio(h: list[int], n: list[int]) -> float | None:
            d = sum(n[sl])
            return sum(h[sl]) / d if d else None

        return {
            "runs": int(tok.size),
            "savings_percent": float((1 - tok.sum() / full.sum()) * 100),
            "recall": hit / needed if needed else 1.0,
            "rare_recall": ratio(self.rare_hit, self.rare_needed),
            "critical_cheap_recall": ratio(self.cheap_hit, self.cheap_needed),
            "critical_expensive_recall": ratio(self.dear_hit, self.dear_needed),
            "avg_tokens": float(tok.mean()),
            "excess_tokens_per_run": float((tok - orc).mean()),
            "misses_per_run": misses / max(tok.size, 1),
            "regret_per_run": float(((tok - orc).sum() + miss_penalty * misses) / max(tok.size, 1)),
            "select_p50_us": float(np.median(self.select_ns[sl]) / 1e3) if self.select_ns else None,
        }

    def inclusion(self, arm_id: str, window: tuple[int, int], tasks: set[int] | None) -> float:
        """Share of selected (non-baseline) runs in `window` that included `arm_id`, counting
        only runs of `tasks` when given."""
        inc = self.tracked[arm_id]
        hits = n = 0
        for i in range(*window):
            skip = tasks is not None and self.task[i] not in tasks
            if i >= len(inc) or self.baseline[i] or skip:
                continue
            n += 1
            hits += inc[i]
        return hits / n if n else float("nan")


class Learner(Protocol):
    """A strategy: choose the arms for a run, then learn from what the run referenced."""

    def choose(self, run: int, task: int) -> np.ndarray: ...

    def learn(self, run: int, task: int, included: np.ndarray, referenced: np.ndarray) -> None:
        """`referenced` may hold excluded arms too: revealed misses (see `Scenario.reveal`)."""
        ...


class PlauditPolicy:
    """plaudit's policy on an in-memory learner: the same `policy`, `fold` and `hierarchy`
    arithmetic as the store's projection and cache."""

    def __init__(self, sc: Scenario, cfg: BanditConfig, rng: np.random.Generator) -> None:
        self.sc, self.cfg, self.rng = sc, cfg, rng
        kinds = ["learned" if i.startswith("file:") else "curated" for i in sc.ids]
        self.memory = MemoryLearner(sc.ids, kinds, cfg)
        for t in range(len(sc.task_types)):
            self.memory._row(t)
        self.protected = np.array([cfg.is_protected(i) for i in sc.ids])
        self.rate = cfg.rate_for(sc.n)
        self.last_baseline = False
        self.last_p: np.ndarray | None = None

    def posterior(self, task: int | None) -> tuple[np.ndarray, np.ndarray]:
        return self.memory.posterior(task)

    def policy_input(self, task: int | None, cfg: BanditConfig | None = None) -> Any:
        return self.memory.policy_input(task, self.sc.tokens, self.protected, self.sc.budget, cfg)

    def choose(self, run: int, task: int | None) -> np.ndarray:
        inp = self.policy_input(task)
        self.last_baseline = bool(self.rng.random() < self.rate)
        if self.last_baseline:
            chosen = policy.baseline(inp, self.rng)
            fits = int(self.sc.tokens.sum()) <= self.sc.budget
            self.last_p = np.ones(self.sc.n) if fits else None
            return chosen
        plan = policy.plan(inp)
        self.last_p = plan.propensities
        return policy.draw(plan, self.rng)

    def candidate(self, cfg: BanditConfig, task: int | None) -> np.ndarray:
        """Inclusion probabilities of another configuration on the current posteriors."""
        return policy.plan(self.policy_input(task, cfg)).propensities

    def learn(
        self, run: int, task: int | None, included: np.ndarray, referenced: np.ndarray
    ) -> None:
        # A revealed miss is evidence the run needed the arm, exactly as `observe` treats a
        # reference to an excluded arm: a success in its scopes.
        seen = included | referenced if self.cfg.learn_from_misses else included
        idx = np.flatnonzero(seen)
        self.memory.learn(task, idx, referenced[idx].astype(np.float64))


class OriginalPolicy:
    """The seed's original: greedy Thompson sampling into the budget, one global posterior,
    no threshold, no contexts, the same priors and a 10% baseline rate."""

    def __init__(self, sc: Scenario, rng: np.random.Generator, baseline_rate: float = 0.10):
        self.sc, self.rng, self.rate = sc, rng, baseline_rate
        prior = np.array(
            [KIND_PRIORS["learned" if i.startswith("file:") else "curated"] for i in sc.ids]
        )
        self.a, self.b = prior[:, 0].copy(), prior[:, 1].copy()
        self.last_baseline = False

    def choose(self, run: int, task: int) -> np.ndarray:
        self.last_baseline = bool(self.rng.random() < self.rate)
        if self.last_baseline:
            order = np.arange(self.sc.n)
        else:
            order = np.argsort(-self.rng.beta(self.a, self.b), kind="stable")
        return _greedy(order, self.sc.tokens, self.sc.budget)

    def learn(self, run: int, task: int, included: np.ndarray, referenced: np.ndarray) -> None:
        r = referenced[included].astype(float)
        self.a[included] += r
        self.b[included] += 1 - r


def _greedy(order: np.ndarray, tokens: np.ndarray, budget: int) -> np.ndarray:
    chosen = np.zeros(tokens.shape[0], dtype=bool)
    left = budget
    for i in order:
        if tokens[i] <= left:
            chosen[i] = True
            left -= int(tokens[i])
    return chosen


class OptimumPolicy:
    """The stationary optimum: knows each arm's true need probability per task type (before
    drift) and includes exactly the arms whose expected miss cost reaches their tokens."""

    def __init__(self, sc: Scenario, cfg: BanditConfig) -> None:
        self.sc = sc
        n = sc.n
        none = np.zeros(n, dtype=bool)
        self.protected = np.array([cfg.is_protected(i) for i in sc.ids], dtype=bool)
        decl = policy.declared(cfg, sc.ids)
        self.bar = policy.from_config(
            cfg, np.ones(n), np.ones(n), sc.tokens, none, none, sc.budget, decl=decl
        ).bar
        self.last_baseline = False

    def choose(self, run: int, task: int) -> np.ndarray:
        p = self.sc.need_at(run)[task]
        want = (p >= self.bar) | self.protected
        key = np.where(want, p / np.maximum(self.bar, 1e-12), -1.0) + 1e12 * self.protected
        return want & _greedy(np.argsort(-key), np.where(want, self.sc.tokens, 0), self.sc.budget)

    def learn(self, run: int, task: int, included: np.ndarray, referenced: np.ndarray) -> None:
        return None


def simulate(
    sc: Scenario,
    strategy: str | Callable[[Scenario, np.random.Generator], Learner],
    runs: int = 2000,
    *,
    seed: int = 0,
    config: BanditConfig | None = None,
    contexts: bool = True,
    timed: bool = False,
) -> Metrics:
    """Run one strategy: "full", "original", "plaudit", "optimum", "oracle", or a factory
    `(scenario, rng) -> Learner` (the benchmark's peers). The task stream and the needs depend
    only on `seed`, so every strategy faces the same workload. `contexts=False` hides the task
    type from the learner (one global posterior), for ablation."""
    world = np.random.default_rng(seed)
    agent = np.random.default_rng(seed + 1_000_003)
    # its own stream, so that every strategy meets the same needs whatever it reveals
    fetch = np.random.default_rng(seed + 2_000_003)
    roles = np.array(sc.roles)
    rare = np.isin(roles, ("rare-critical", "critical-cheap", "critical-expensive"))
    cheap, dear = roles == "critical-cheap", roles == "critical-expensive"
    tracked = [i for i, r in enumerate(sc.roles) if r in ("retired", "new-central", "drift")]
    learner: Any = None
    if callable(strategy):
        learner = strategy(sc, agent)
    elif strategy == "plaudit":
        learner = PlauditPolicy(sc, config or default_config(sc), agent)
    elif strategy == "original":
        learner = OriginalPolicy(sc, agent)
    elif strategy == "optimum":
        learner = OptimumPolicy(sc, config or default_config(sc))
    elif strategy not in ("full", "oracle"):
        raise ValueError(f"unknown strategy {strategy!r}")
    m = Metrics(tracked={sc.ids[i]: [] for i in tracked})
    full_tokens = counterfactual_tokens(sc)
    probs = sc.task_probs
    for run in range(runs):
        task = (
            int(world.choice(len(sc.task_types), p=probs))
            if probs is not None
            else int(world.integers(len(sc.task_types)))
        )
        needed = world.random(sc.n) < sc.need_at(run)[task]
        is_base = False
        if strategy == "full":
            included = np.ones(sc.n, dtype=bool)
        elif strategy == "oracle":
            included = needed.copy()
        else:
            label = task if contexts else None
            t0 = time.perf_counter_ns()
            included = learner.choose(run, label)
            if timed:
                m.select_ns.append(time.perf_counter_ns() - t0)
            is_base = bool(getattr(learner, "last_baseline", False))
            learner.learn(run, label, included, referenced_by(sc, fetch, needed, included))
        m.tokens.append(int(sc.tokens[included].sum()))
        m.oracle_tokens.append(int(sc.tokens[needed].sum()))
        m.full_tokens.append(full_tokens)
        m.needed.append(int(needed.sum()))
        m.hit.append(int((needed & included).sum()))
        m.rare_needed.append(int((needed & rare).sum()))
        m.rare_hit.append(int((needed & included & rare).sum()))
        m.cheap_needed.append(int((needed & cheap).sum()))
        m.cheap_hit.append(int((needed & included & cheap).sum()))
        m.dear_needed.append(int((needed & dear).sum()))
        m.dear_hit.append(int((needed & included & dear).sum()))
        m.task.append(task)
        m.baseline.append(is_base)
        for i in tracked:
            m.tracked[sc.ids[i]].append(bool(included[i]))
    return m


def referenced_by(
    sc: Scenario, fetch: np.random.Generator, needed: np.ndarray, included: np.ndarray
) -> np.ndarray:
    """What the run's output references: the needed arms it was given, and each needed arm it
    was not given with probability `sc.reveal` (the agent fetched it; it is still a miss),
    if `observe` could tell that fetch apart (`Scenario.revealable`)."""
    seen = needed & included
    if sc.reveal > 0:
        seen |= needed & ~included & sc.revealable & (fetch.random(sc.n) < sc.reveal)
    return seen


def counterfactual_tokens(sc: Scenario, fills: int = 64) -> int:
    """What a run would send without the bandit: the whole inventory when it fits the budget,
    otherwise a random-order fill of the budget (the counterfactual `savings` reports use),
    averaged over `fills` orders."""
    total = int(sc.tokens.sum())
    if total <= sc.budget:
        return total
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
    return int(np.mean([int(sc.tokens[policy.baseline(inp, rng)].sum()) for _ in range(fills)]))


def default_config(sc: Scenario | None = None) -> BanditConfig:
    """The settings plaudit ships with (the simulator measures these, not tuned extras), plus
    what the scenario's user declares (`Scenario.settings`)."""
    if sc is None or not sc.settings:
        return BanditConfig()
    from plaudit.bandit.config import merged

    return merged(BanditConfig(), sc.settings)


# -- against a real store --------------------------------------------------------------------
def synthetic_output(sc: Scenario, referenced: np.ndarray) -> tuple[str, list[dict[str, Any]]]:
    """Output text and tool calls that reference exactly the given arms, per detection rule."""
    lines = ["Working on the task."]
    calls: list[dict[str, Any]] = []
    for i in np.flatnonzero(referenced):
        arm_id = sc.ids[i]
        type_, category, name = arm_id.split(":", 2)
        if type_ == "tool":
            calls.append({"name": name, "arguments": {}})
        elif type_ == "skill":
            lines.append(f"Applying {category} here.")
        elif type_ == "file":
            lines.append(f"See {name} for details.")
        elif type_ == "memory":
            text = sc.contents[arm_id]
            lines.append(f"As noted: {text[7:35]}.")
    return "\n".join(lines), calls


def scenario_arms(sc: Scenario) -> list[dict[str, Any]]:
    return [
        {"id": i, "tokens": int(t), **({"content": sc.contents[i]} if i in sc.contents else {})}
        for i, t in zip(sc.ids, sc.tokens, strict=True)
    ]


@dataclass(frozen=True)
class RunDetail:
    """What the hidden world knew about one run: handed to `run_store`'s callback."""

    task: str
    needed: list[str]
    missed: list[str]
    rare_missed: int


def run_store(
    p: Plaudit,
    sc: Scenario,
    runs: int,
    *,
    seed: int = 0,
    session_id: str = "simulator",
    on_run: Callable[[int, Any, Any, RunDetail], None] | None = None,
) -> Metrics:
    """Drive `p.bandit` for `runs` runs: select, simulate the model, observe."""
    world = np.random.default_rng(seed)
    rare = np.array([r == "rare-critical" for r in sc.roles])
    index = {arm_id: i for i, arm_id in enumerate(sc.ids)}
    p.bandit.register(scenario_arms(sc))
    if sc.settings:
        p.bandit.configure(**sc.settings)
    m = Metrics()
    full_tokens = int(sc.tokens.sum())
    for run in range(runs):
        task = int(world.integers(len(sc.task_types)))
        needed = world.random(sc.n) < sc.need_at(run)[task]
        sel = p.bandit.select(
            None,
            token_budget=sc.budget,
            context=sc.task_types[task],
            seed=int(world.integers(2**53)),
            session_id=session_id,
        )
        included = np.zeros(sc.n, dtype=bool)
        included[[index[a] for a in sel.included]] = True
        text, calls = synthetic_output(sc, needed & included)
        used = int(sc.tokens[included].sum())
        obs = p.bandit.observe(sel.run_id, text, calls, usage_tokens=used + 500, duration_ms=1000.0)
        if on_run is not None:
            on_run(
                run,
                sel,
                obs,
                RunDetail(
                    task=sc.task_types[task],
                    needed=[sc.ids[i] for i in np.flatnonzero(needed)],
                    missed=[sc.ids[i] for i in np.flatnonzero(needed & ~included)],
                    rare_missed=int((needed & ~included & rare).sum()),
                ),
            )
        m.tokens.append(used)
        m.oracle_tokens.append(int(sc.tokens[needed].sum()))
        m.full_tokens.append(full_tokens)
        m.needed.append(int(needed.sum()))
        m.hit.append(int((needed & included).sum()))
        m.rare_needed.append(int((needed & rare).sum()))
        m.rare_hit.append(int((needed & included & rare).sum()))
    return m
