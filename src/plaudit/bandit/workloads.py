"""The workload suite: hidden worlds on which the bandit and its peers are measured.

Each workload is a `Scenario`: arms with token costs, task types, and the probability that a
task of each type needs each arm, before and after an optional drift. They cover what an agent
meets: a stationary inventory that fits the budget, rarely needed but critical arms (cheap and
expensive), dead weight, arms retired and arms newly central, many sparse task types, and
inventories of 2,000 and 10,000 arms under a budget that binds.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from plaudit.bandit.simulator import TASK_TYPES, Scenario, _memory_text, default_scenario

_COST = {"tool": (150, 700), "skill": (400, 1500), "file": (600, 3500), "memory": (80, 400)}


class _Builder:
    def __init__(self, seed: int, types: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.t = types
        self.ids: list[str] = []
        self.roles: list[str] = []
        self.costs: list[int] = []
        self.need: list[np.ndarray] = []
        self.after: dict[int, np.ndarray] = {}
        self.contents: dict[str, str] = {}

    def add(self, arm_id: str, role: str, need: np.ndarray, cost: int | None = None) -> int:
        kind = arm_id.split(":", 1)[0]
        if cost is None:
            cost = int(self.rng.integers(*_COST.get(kind, (200, 900))))
        self.ids.append(arm_id)
        self.roles.append(role)
        self.costs.append(int(cost))
        self.need.append(np.asarray(need, dtype=float))
        if kind == "memory":
            self.contents[arm_id] = _memory_text(self.rng, arm_id)
        return len(self.ids) - 1

    def common(self, arm_id: str, home: int, noise: float = 0.01) -> int:
        need = self.rng.uniform(0.0, noise, self.t)
        need[home] = self.rng.uniform(0.35, 0.9)
        if self.rng.random() < 0.5:
            need[(home + 1 + self.rng.integers(self.t - 1)) % self.t] = self.rng.uniform(0.15, 0.4)
        return self.add(arm_id, "common", need)

    def sections(self) -> None:
        for name in ("instructions", "safety", "format"):
            self.add(f"section:system:{name}", "section", np.ones(self.t), None)

    def build(
        self,
        name: str,
        types: tuple[str, ...],
        budget: int | None = None,
        drift_at: int = 10**9,
    ) -> Scenario:
        need = np.array(self.need).T
        after = need.copy()
        for i, col in self.after.items():
            after[:, i] = col
        tokens = np.array(self.costs, dtype=np.int64)
        return Scenario(
            ids=self.ids,
            tokens=tokens,
            need=need,
            need_after=after,
            roles=self.roles,
            contents=self.contents,
            task_types=types,
            drift_at=drift_at,
            budget=budget if budget is not None else int(tokens.sum()) + 5000,
            name=name,
        )


_COMMON = [
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


def _base(seed: int) -> _Builder:
    b = _Builder(seed, len(TASK_TYPES))
    for arm_id, home in _COMMON:
        b.common(arm_id, home)
    b.sections()
    return b


def stationary(seed: int = 11) -> Scenario:
    """27 arms, 5 task types, nothing critical, nothing dead: everything fits the budget."""
    return _base(seed).build("stationary", TASK_TYPES)


def _critical(b: _Builder, p: float = 0.08) -> None:
    for arm_id, home, role, cost in (
        ("tool:web:WebSearch", 1, "critical-cheap", 300),
        ("memory:project:security-incident", 0, "critical-cheap", 220),
        ("file:workspace:docs/incident-runbook.md", 2, "critical-expensive", 1400),
        ("skill:legal:main", 3, "critical-expensive", 1200),
    ):
        need = np.zeros(b.t)
        need[home] = p
        need[(home + 2) % b.t] = p
        b.add(arm_id, role, need, cost)


def critical(seed: int = 12) -> Scenario:
    """The stationary inventory plus four arms needed in 8% of the runs of two task types (3.2%
    of all runs): two cheap (300, 220 tokens) and two expensive (1,400, 1,200 tokens)."""
    b = _base(seed)
    _critical(b)
    return b.build("critical", TASK_TYPES)


def dead_weight(seed: int = 13) -> Scenario:
    """The stationary inventory plus 30 arms no task needs: cheap memories and tools, and
    expensive files."""
    b = _base(seed)
    for i in range(10):
        b.add(f"memory:project:stale-{i}", "dead", np.zeros(b.t))
    for i in range(10):
        b.add(f"tool:misc:Unused{i}", "dead", np.zeros(b.t))
    for i in range(10):
        b.add(f"file:workspace:old/legacy{i}.py", "dead", np.zeros(b.t))
    return b.build("dead weight", TASK_TYPES)


def drift(seed: int = 14, drift_at: int = 1000) -> Scenario:
    """Critical and dead arms as above; at `drift_at` a tool used in every task type is
    retired (needed nowhere after) and a dead file becomes central to code tasks."""
    b = _base(seed)
    _critical(b)
    for i in range(4):
        b.add(f"file:workspace:old/legacy{i}.py", "dead", np.zeros(b.t))
    retired = b.add("tool:vcs:Svn", "retired", np.full(b.t, 0.6), 300)
    b.after[retired] = np.zeros(b.t)
    new = b.add("file:workspace:src/new_core.py", "new-central", np.zeros(b.t), 1400)
    col = np.zeros(b.t)
    col[0] = 0.8
    b.after[new] = col
    return b.build("drift", TASK_TYPES, drift_at=drift_at)


def sparse(seed: int = 15, types: int = 60, families: int = 6, noise: float = 0.002) -> Scenario:
    """60 task types in 6 families (about 30 runs each over 1,800 runs). Each family shares six
    arms; each type adds one or two of its own; generic tools serve every type.

    `noise` bounds how often an arm is needed outside its types. It is lower than the other
    workloads' 0.01 because there are five times as many such arms: with 0.01, a run needed
    0.7 unrelated arms (a tenth of its needs), and even the stationary optimum's recall was
    0.97. With 0.002 a run needs about 0.14, as in the other workloads."""
    b = _Builder(seed, types)
    rng = b.rng
    fam = np.arange(types) % families
    for f in range(families):
        for j in range(6):
            need = rng.uniform(0.0, noise, types)
            level = rng.uniform(0.4, 0.9) + rng.normal(0, 0.05, (fam == f).sum())
            need[fam == f] = np.clip(level, 0.05, 0.98)
            kind = ("tool", "skill", "file", "memory", "tool", "file")[j]
            name = f"fam{f}-{j}" if kind != "file" else f"fam{f}/part{j}.py"
            b.add(f"{kind}:f{f}:{name}", "common", need)
    for t in range(types):
        for j in range(1 + int(rng.random() < 0.5)):
            need = rng.uniform(0.0, noise, types)
            need[t] = rng.uniform(0.4, 0.85)
            b.add(f"file:types:t{t}/spec{j}.md", "common", need)
    for name in ("Bash", "Read", "Edit"):
        b.add(f"tool:generic:{name}", "common", rng.uniform(0.5, 0.8, types))
    for i in range(10):
        b.add(f"file:workspace:old/dead{i}.py", "dead", np.zeros(types))
    b.sections()
    return b.build("sparse task types", tuple(f"type{t}" for t in range(types)))


def large(
    n: int,
    seed: int = 16,
    types: int = 8,
    per_type: int = 15,
    budget: int = 30000,
    reveal: float = 0.0,
) -> Scenario:
    """`n` arms, `types` task types, and a budget far below the inventory. Each type needs
    `per_type` arms of its own (each in 30% to 90% of its runs); five generic arms serve every
    type; the critical arms are as in `critical`; the rest is dead weight. Discovering a type's
    arms means trying arms in that type's runs, so the runs per type bound what any learner can
    find: with 8 types, each sees about 375 of 3,000 runs.

    `reveal` is the chance that the agent fetches a needed arm it was not given (reads the
    file, finds the tool or the memory by search), so that its output references it: a miss
    the learner sees. With 0, a left-out arm is seen only when exploration includes it."""
    b = _Builder(seed, types)
    rng = b.rng
    b.sections()
    for name in ("Bash", "Read", "Edit", "Grep", "Write"):
        b.add(f"tool:generic:{name}", "common", rng.uniform(0.4, 0.9, types))
    kinds = ("tool", "skill", "file", "memory")
    for t in range(types):
        for j in range(per_type):
            need = np.zeros(types)
            need[t] = rng.uniform(0.3, 0.9)
            kind = kinds[j % 4]
            if kind == "skill":  # a skill's own category: an agent names a skill by it
                b.add(f"skill:t{t}-{j}:main", "common", need)
                continue
            name = f"t{t}-{j}" if kind != "file" else f"t{t}/m{j}.py"
            b.add(f"{kind}:c{t}:{name}", "common", need)
    _critical(b)
    i = 0
    while len(b.ids) < n:
        kind = kinds[i % 4]
        name = f"x{i}" if kind != "file" else f"junk/f{i}.py"
        b.add(f"{kind}:dead:{name}", "dead", np.zeros(types))
        i += 1
    name = f"{n:,} arms, budget binding" + (", misses fetched" if reveal else "")
    sc = b.build(name, tuple(f"type{t}" for t in range(types)), budget)
    sc.reveal = reveal
    return sc


#: the share of misses the agent fetches in the suite's "misses fetched" workloads: a modest
#: guess (one in four), well below what an agent with file and tool search would fetch
REVEAL = 0.25


#: name -> (builder, runs, summary window): the suite the benchmark and the tests run.
SUITE: dict[str, tuple[Callable[[], Scenario], int]] = {
    "stationary": (stationary, 2000),
    "critical": (critical, 2000),
    "dead weight": (dead_weight, 2000),
    "drift": (drift, 2000),
    "default (drift at 1,000)": (default_scenario, 2000),
    "sparse task types": (sparse, 1800),
    "2,000 arms, budget binding": (lambda: large(2000), 3000),
    "10,000 arms, budget binding": (lambda: large(10_000), 3000),
    "2,000 arms, budget binding, misses fetched": (lambda: large(2000, reveal=REVEAL), 3000),
    "10,000 arms, budget binding, misses fetched": (lambda: large(10_000, reveal=REVEAL), 3000),
}
