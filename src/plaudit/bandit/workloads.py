"""The workload suite: hidden worlds on which the bandit and its peers are measured.

Each workload is a `Scenario`: arms with token costs, task types, and the probability that a
task of each type needs each arm, before and after an optional drift. They cover what an agent
meets: a stationary inventory that fits the budget, rarely needed but critical arms (cheap and
expensive), dead weight, arms retired and arms newly central, many sparse task types, and
inventories of 2,000 and 10,000 arms under a budget that binds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
        #: what the inventory's user declares (`Scenario.settings`)
        self.settings: dict[str, Any] = {}

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
            settings=dict(self.settings),
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


#: How the suite's user declares its critical arms: the cheap ones by a prior of their own, the
#: expensive ones by a miss cost (a miss of such an arm costs far more than a retry), both ways
#: the settings allow (`BanditConfig.is_critical`).
CRITICAL_SETTINGS: dict[str, Any] = {
    "arm_priors": {"tool:web:WebSearch": [1, 1], "memory:project:security-incident": [1, 1]},
    "miss_costs": {"file:workspace:docs/incident-runbook.md": 60000, "skill:legal:main": 60000},
}


def _critical(b: _Builder, p: float = 0.08, *, declared: bool = True) -> None:
    if declared:
        for key, value in CRITICAL_SETTINGS.items():
            b.settings.setdefault(key, {}).update(value)
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


def critical(seed: int = 12, *, declared: bool = True) -> Scenario:
    """The stationary inventory plus four arms needed in 8% of the runs of two task types (3.2%
    of all runs): two cheap (300, 220 tokens) and two expensive (1,400, 1,200 tokens), which
    the user declares critical (`CRITICAL_SETTINGS`) unless `declared` is False (then they are
    judged by expected cost like any other arm)."""
    b = _base(seed)
    _critical(b, declared=declared)
    return b.build("critical" if declared else "critical, undeclared", TASK_TYPES)


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


def drift(
    seed: int = 14,
    drift_at: int = 1000,
    *,
    retire: bool = True,
    arrive: bool = True,
    reveal: float = 0.0,
) -> Scenario:
    """Critical and dead arms as above; at `drift_at` a tool used in every task type is
    retired (needed nowhere after) and a dead file becomes central to code tasks. `retire` or
    `arrive` False leaves that change out (the other then happens alone: a new file with no
    other sign that the task type's workflow changed); `reveal` as in `large`."""
    b = _base(seed)
    _critical(b)
    for i in range(4):
        b.add(f"file:workspace:old/legacy{i}.py", "dead", np.zeros(b.t))
    retired = b.add("tool:vcs:Svn", "retired", np.full(b.t, 0.6), 300)
    if retire:
        b.after[retired] = np.zeros(b.t)
    new = b.add("file:workspace:src/new_core.py", "new-central", np.zeros(b.t), 1400)
    if arrive:
        col = np.zeros(b.t)
        col[0] = 0.8
        b.after[new] = col
    name = (
        "drift"
        if retire and arrive
        else "drift, a new arm alone"
        if arrive
        else "drift, a retired arm alone"
    )
    sc = b.build(name + (", misses fetched" if reveal else ""), TASK_TYPES, drift_at=drift_at)
    sc.reveal = reveal
    return sc


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
    names: str = "typed",
) -> Scenario:
    """`n` arms, `types` task types, and a budget far below the inventory. Each type needs
    `per_type` arms of its own (each in 30% to 90% of its runs); five generic arms serve every
    type; the critical arms are as in `critical`; the rest is dead weight. Discovering a type's
    arms means trying arms in that type's runs, so the runs per type bound what any learner can
    find: with 8 types, each sees about 375 of 3,000 runs.

    `reveal` is the chance that the agent fetches a needed arm it was not given (reads the
    file, finds the tool or the memory by search), so that its output references it: a miss
    the learner sees. With 0, a left-out arm is seen only when exploration includes it.

    `names` says what the ids tell about the world (the needs are the same whatever it is):

    * "typed": each type's arms share a category named after it (`tool:c3:t3-0`, files under
      `file:c3:t3/`), and the dead weight has one of its own (`tool:dead:x5`);
    * "structured": as an inventory is organised, by module: each type's tools and memories
      share a category and its files a directory (`tool:billing:b7`,
      `file:workspace:src/billing/f9.py`), but so does dead weight, spread over those and 60
      other modules, so most of a needed arm's siblings are not needed;
    * "random": every category and directory is one of the same 68 modules drawn at random,
      whatever the arm's role: ids that say nothing about need."""
    b = _Builder(seed, types)
    rng = b.rng
    b.sections()
    for name in ("Bash", "Read", "Edit", "Grep", "Write"):
        b.add(f"tool:generic:{name}", "common", rng.uniform(0.4, 0.9, types))
    kinds = ("tool", "skill", "file", "memory")
    spots = _modules(names, types, np.random.default_rng(seed + 7919))
    for t in range(types):
        for j in range(per_type):
            need = np.zeros(types)
            need[t] = rng.uniform(0.3, 0.9)
            kind = kinds[j % 4]
            b.add(spots(kind, t, f"t{t}-{j}"), "common", need)
    _critical(b)
    i = 0
    while len(b.ids) < n:
        kind = kinds[i % 4]
        b.add(spots(kind, None, f"x{i}"), "dead", np.zeros(types))
        i += 1
    label = f"{n:,} arms, budget binding" + (", misses fetched" if reveal else "")
    if names != "typed":
        label += f", {names} ids"
    sc = b.build(label, tuple(f"type{t}" for t in range(types)), budget)
    sc.reveal = reveal
    return sc


_MODULES = 68


def _modules(names: str, types: int, rng: np.random.Generator):
    """Ids for `large`'s arms by kind, owning type (None: dead weight) and serial."""
    mods = [f"{w}{k}" for k in range(3) for w in _WORDS][:_MODULES]
    home = rng.permutation(_MODULES)[:types]
    # names that do not say which arms are needed: serial numbers in a random order
    numbers = iter(rng.permutation(1_000_000))

    def where(kind: str, owner: int | None, serial: str) -> str:
        if names == "typed":
            if kind == "skill":  # a skill's own category: an agent names a skill by it
                return f"skill:{serial}:main" if owner is not None else f"skill:dead:{serial}"
            cat = "dead" if owner is None else f"c{owner}"
            if kind == "file":
                tail = serial.split("-")[1] if owner is not None else serial[1:]
                return f"file:{cat}:" + (
                    f"t{owner}/m{tail}.py" if owner is not None else f"junk/f{tail}.py"
                )
            return f"{kind}:{cat}:{serial}"
        number = f"a{next(numbers)}"
        if kind == "skill":  # named by a category of its own, as skills are
            return f"skill:s{number[1:]}:main"
        if names == "structured" and owner is not None:
            m = mods[int(home[owner])]
        else:
            m = mods[int(rng.integers(_MODULES))]
        if kind == "file":
            return f"file:workspace:src/{m}/{number}.py"
        return f"{kind}:{m}:{number}"

    return where


_KINDS = ("tool", "skill", "file", "memory")
_WORDS = (
    "auth",
    "billing",
    "search",
    "deploy",
    "cache",
    "report",
    "ingest",
    "alerts",
    "schema",
    "export",
    "render",
    "queue",
    "audit",
    "backup",
    "routing",
    "metrics",
    "invoice",
    "session",
    "upload",
    "profile",
    "ledger",
    "notify",
    "index",
    "policy",
)


def _random_word(rng: np.random.Generator, size: int = 6) -> str:
    return "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), size))


def _namer(rng: np.random.Generator, names: str, types: int):
    """Arm ids by kind, home task type and serial: *plain* ids as an agent's inventory names
    them, with no word that says which task type needs the arm (`tool:ops:q2`,
    `file:workspace:src/render/m7.py`), or *random* ids whose category and name are random
    letters (`tool:kxqzv:wbyrla`); neither tells a learner which task type uses the arm."""
    seen: set[str] = set()

    def make(kind: str, j: int) -> str:
        while True:
            if names == "random":
                cat, name = _random_word(rng, 5), _random_word(rng)
                if kind == "file":
                    name = f"{_random_word(rng, 4)}/{name}.py"
            else:
                word = _WORDS[int(rng.integers(len(_WORDS)))]
                cat = {"tool": "ops", "skill": word, "file": "workspace", "memory": "project"}[kind]
                name = {
                    "tool": f"{word.capitalize()}{j}",
                    "skill": "main",
                    "file": f"src/{word}/m{j}.py",
                    "memory": f"{word}-{j}",
                }[kind]
            arm_id = f"{kind}:{cat}:{name}"
            if arm_id not in seen:
                seen.add(arm_id)
                return arm_id

    return make


def agent(
    seed: int = 21,
    types: int = 8,
    names: str = "plain",
    occasional_tokens: int | None = None,
    occasional_need: tuple[float, float] = (0.01, 0.05),
    noise: float = 0.004,
) -> Scenario:
    """A stationary agent inventory of about 45 arms over `types` task types that fits the
    budget, generated afresh per seed, for measuring on worlds the policy was not tuned on:
    three sections; six generic tools, each needed in half the types (30% to 90%) and seldom
    in the rest; three arms of each type's own (35% to 90%, some also needed by a second type);
    six *occasional* arms, needed in `occasional_need` of the runs of two or three types (of
    `occasional_tokens` each when given: 1,400 makes them expensive); six arms nobody needs.
    Every arm is needed in up to `noise` of the other types' runs (at 0.004 a simple sampler's
    recall is about 0.99, as on the worlds the issue measured; at 0.01 even the stationary
    optimum's is 0.985). `names`: see `_namer`."""
    b = _Builder(seed, types)
    rng = b.rng
    make = _namer(np.random.default_rng(seed + 7919), names, types)
    b.sections()
    for j in range(6):
        need = rng.uniform(0.0, noise, types)
        on = rng.random(types) < 0.5
        need[on] = rng.uniform(0.3, 0.9, int(on.sum()))
        b.add(make("tool", j), "common", need)
    serial = 6
    for t in range(types):
        for _ in range(3):
            need = rng.uniform(0.0, noise, types)
            need[t] = rng.uniform(0.35, 0.9)
            if rng.random() < 0.4:
                need[(t + 1 + int(rng.integers(types - 1))) % types] = rng.uniform(0.1, 0.4)
            b.add(make(_KINDS[int(rng.integers(4))], serial), "common", need)
            serial += 1
    for j in range(6):
        need = np.zeros(types)
        home = rng.choice(types, int(rng.integers(2, 4)), replace=False)
        need[home] = rng.uniform(*occasional_need, home.size)
        b.add(make(_KINDS[j % 4], serial + j), "occasional", need, occasional_tokens)
    for j in range(6):
        b.add(make(_KINDS[j % 4], serial + 6 + j), "dead", np.zeros(types))
    label = "agent" + (", random ids" if names == "random" else "")
    if occasional_tokens:
        label += f", occasional arms of {occasional_tokens:,} tokens"
    if noise != 0.004:
        label += f", background need {noise:g}"
    return b.build(f"{label} (seed {seed})", tuple(f"type{t}" for t in range(types)))


#: the share of misses the agent fetches in the suite's "misses fetched" workloads: a modest
#: guess (one in four), well below what an agent with file and tool search would fetch
REVEAL = 0.25


#: Stationary workloads whose inventory fits the budget: name -> (builder, runs). The agent
#: worlds are generated afresh (the policy was not tuned on them), one world seed each.
FITTING: dict[str, tuple[Callable[[], Scenario], int]] = {
    "stationary": (stationary, 2000),
    "critical": (critical, 2000),
    "critical, undeclared": (lambda: critical(declared=False), 2000),
    "dead weight": (dead_weight, 2000),
    "sparse task types": (sparse, 1800),
    "agent": (lambda: agent(21), 2000),
    "agent, random ids": (lambda: agent(22, names="random"), 2000),
    "agent, expensive occasional arms": (
        lambda: agent(23, occasional_tokens=1400, occasional_need=(0.02, 0.04)),
        2000,
    ),
    "agent, background need 0.01": (lambda: agent(24, noise=0.01), 2000),
}

#: Workloads whose needs change at run 1,000.
DRIFT: dict[str, tuple[Callable[[], Scenario], int]] = {
    "drift": (drift, 2000),
    "drift, a new arm alone": (lambda: drift(retire=False), 2000),
    "drift, misses fetched": (lambda: drift(reveal=REVEAL), 2000),
    "drift, a new arm alone, misses fetched": (lambda: drift(retire=False, reveal=REVEAL), 2000),
    "default (drift at 1,000)": (default_scenario, 2000),
}

#: Inventories of 2,000 and 10,000 arms under a binding budget: name -> (builder, runs), the
#: runs being the horizon the targets are set at (6,000 and 12,000 without fetched misses).
LARGE: dict[str, tuple[Callable[[], Scenario], int]] = {
    "2,000 arms, structured ids": (lambda: large(2000, names="structured"), 6000),
    "2,000 arms, random ids": (lambda: large(2000, names="random"), 6000),
    "10,000 arms, structured ids": (lambda: large(10_000, names="structured"), 12000),
    "10,000 arms, random ids": (lambda: large(10_000, names="random"), 12000),
    "2,000 arms, random ids, misses fetched": (
        lambda: large(2000, names="random", reveal=REVEAL),
        3000,
    ),
    "10,000 arms, random ids, misses fetched": (
        lambda: large(10_000, names="random", reveal=REVEAL),
        3000,
    ),
}

#: Every workload of the suite.
SUITE: dict[str, tuple[Callable[[], Scenario], int]] = {**FITTING, **DRIFT, **LARGE}
