"""An agent-workload simulator for the context bandit.

A scenario is an inventory of arms with token costs, several task types, and a hidden
probability that each arm is *needed* by a task of each type. Some arms are needed often in one
task type, some are rarely needed but critical, some are dead weight, sections are always
needed, and at `drift_at` some needs move (a tool changes task type, a dead file comes alive).
The simulated model references an included arm exactly when the task needs it.

Strategies run in memory (fast, for benchmarks) through the same `policy` module the library
uses; `run_store` drives a real store through `Plaudit.bandit` with synthetic output text and
tool calls, which also exercises reference detection (the demo uses it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from plaudit.bandit import policy
from plaudit.bandit.config import KIND_PRIORS, BanditConfig

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
        rn, rh = sum(self.rare_needed[sl]), sum(self.rare_hit[sl])
        misses = needed - hit
        return {
            "runs": int(tok.size),
            "savings_percent": float((1 - tok.sum() / full.sum()) * 100),
            "recall": hit / needed if needed else 1.0,
            "rare_recall": rh / rn if rn else None,
            "avg_tokens": float(tok.mean()),
            "excess_tokens_per_run": float((tok - orc).mean()),
            "misses_per_run": misses / max(tok.size, 1),
            "regret_per_run": float(((tok - orc).sum() + miss_penalty * misses) / max(tok.size, 1)),
        }


Chooser = Callable[[int, int, np.ndarray], np.ndarray]  # (run, task, needed) -> included mask
Learner = Callable[[int, int, np.ndarray, np.ndarray], None]


class PlauditPolicy:
    """plaudit's policy with in-memory posteriors: the same arithmetic as the store's
    projection (prior + discounted evidence, contexts shrunk towards global)."""

    def __init__(self, sc: Scenario, cfg: BanditConfig, rng: np.random.Generator) -> None:
        self.sc, self.cfg, self.rng = sc, cfg, rng
        kinds = ["learned" if i.startswith("file:") else "curated" for i in sc.ids]
        prior = np.array([cfg.prior(i, k) for i, k in zip(sc.ids, kinds, strict=True)])
        self.a0, self.b0 = prior[:, 0], prior[:, 1]
        t = len(sc.task_types)
        self.gs, self.gf = np.zeros(sc.n), np.zeros(sc.n)
        self.cs, self.cf = np.zeros((t, sc.n)), np.zeros((t, sc.n))
        self.pulls = np.zeros(sc.n, dtype=np.int64)
        self.protected = np.array([cfg.is_protected(i) for i in sc.ids])
        self.rate = cfg.rate_for(sc.n)
        self.thresholds = cfg.thresholds(sc.tokens)
        self.decay = 0.5 ** (1 / cfg.half_life_runs) if cfg.half_life_runs else 1.0

    def posterior(self, task: int) -> tuple[np.ndarray, np.ndarray]:
        total = self.gs + self.gf
        w = np.where(
            total > 0,
            np.minimum(1.0, self.cfg.context_pseudo_count / np.maximum(total, 1e-12)),
            0.0,
        )
        return self.a0 + self.cs[task] + w * self.gs, self.b0 + self.cf[task] + w * self.gf

    def choose(self, run: int, task: int, needed: np.ndarray) -> np.ndarray:
        a, b = self.posterior(task)
        inp = policy.PolicyInput(
            alpha=a,
            beta=b,
            tokens=self.sc.tokens,
            protected=self.protected,
            underexplored=self.pulls < self.cfg.min_pulls,
            budget=self.sc.budget,
            threshold=self.thresholds,
        )
        if self.rng.random() < self.rate:
            return policy.baseline(inp)
        return policy.select(inp, self.rng)[0]

    def learn(self, run: int, task: int, included: np.ndarray, referenced: np.ndarray) -> None:
        d = self.decay
        if d != 1.0:  # every observation ages all evidence, as the projection does lazily
            self.gs *= d
            self.gf *= d
            self.cs *= d
            self.cf *= d
        r = referenced[included].astype(float)
        self.gs[included] += r
        self.gf[included] += 1 - r
        self.cs[task, included] += r
        self.cf[task, included] += 1 - r
        self.pulls[included] += 1


class OriginalPolicy:
    """The seed's original: greedy Thompson sampling into the budget, one global posterior,
    no threshold, no contexts, the same priors and baseline rate."""

    def __init__(self, sc: Scenario, rng: np.random.Generator, baseline_rate: float = 0.10):
        self.sc, self.rng, self.rate = sc, rng, baseline_rate
        prior = np.array(
            [KIND_PRIORS["learned" if i.startswith("file:") else "curated"] for i in sc.ids]
        )
        self.a, self.b = prior[:, 0].copy(), prior[:, 1].copy()

    def choose(self, run: int, task: int, needed: np.ndarray) -> np.ndarray:
        n = self.sc.n
        inp = policy.PolicyInput(
            alpha=self.a,
            beta=self.b,
            tokens=self.sc.tokens,
            protected=np.zeros(n, bool),
            underexplored=np.zeros(n, bool),
            budget=self.sc.budget,
            threshold=0.0,
        )
        if self.rng.random() < self.rate:
            return policy.baseline(inp)
        return policy.select(inp, self.rng)[0]

    def learn(self, run: int, task: int, included: np.ndarray, referenced: np.ndarray) -> None:
        r = referenced[included].astype(float)
        self.a[included] += r
        self.b[included] += 1 - r


def simulate(
    sc: Scenario,
    strategy: str,
    runs: int = 2000,
    *,
    seed: int = 0,
    config: BanditConfig | None = None,
    contexts: bool = True,
) -> Metrics:
    """Run one strategy: "full", "original", "plaudit" or "oracle". The task stream and the
    needs depend only on `seed`, so every strategy faces the same workload. `contexts=False`
    hides the task type from plaudit (one global posterior), for ablation."""
    world = np.random.default_rng(seed)
    agent = np.random.default_rng(seed + 1_000_003)
    rare = np.array([r == "rare-critical" for r in sc.roles])
    learner: Any = None
    if strategy == "plaudit":
        learner = PlauditPolicy(sc, config or default_config(sc), agent)
    elif strategy == "original":
        learner = OriginalPolicy(sc, agent)
    elif strategy not in ("full", "oracle"):
        raise ValueError(f"unknown strategy {strategy!r}")
    m = Metrics()
    full_tokens = int(sc.tokens.sum())
    for run in range(runs):
        task = int(world.integers(len(sc.task_types)))
        needed = world.random(sc.n) < sc.need_at(run)[task]
        if strategy == "full":
            included = np.ones(sc.n, dtype=bool)
        elif strategy == "oracle":
            included = needed.copy()
        else:
            label = task if contexts or strategy != "plaudit" else 0
            included = learner.choose(run, label, needed)
            learner.learn(run, label, included, needed)
        m.tokens.append(int(sc.tokens[included].sum()))
        m.oracle_tokens.append(int(sc.tokens[needed].sum()))
        m.full_tokens.append(full_tokens)
        m.needed.append(int(needed.sum()))
        m.hit.append(int((needed & included).sum()))
        m.rare_needed.append(int((needed & rare).sum()))
        m.rare_hit.append(int((needed & included & rare).sum()))
    return m


def default_config(sc: Scenario | None = None) -> BanditConfig:
    """The settings plaudit ships with (the simulator measures these, not tuned extras)."""
    return BanditConfig()


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
