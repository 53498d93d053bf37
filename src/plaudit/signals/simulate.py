"""A simulated router whose truth is known, for checking off-policy evaluation and learning.

Contexts arrive with known probabilities, each with its context fields (`context.ci_status`,
and more in richer scenarios); each (context, task) has known outcome probabilities, so its
expected reward under the export's reward map is exact; the logging policy draws the task with
known probabilities and logs that probability as the decision's `propensity`. A user may
override a task that is not the context's best (`override_rate`), and the outcome then follows
the task that ran. Fields that do not matter (`noise`) can be added to every context, to see
whether a learner is fooled by them.

The value of a candidate given as a (context x task) table is computed exactly, with no
sampling (`value`); the value of any policy object (`policy_value`) is the mean, over fresh
decisions drawn as the log draws them, of each decision's exact expected reward under the
policy's distribution, so only the contexts are sampled, never the outcomes.

Rows are built with the router contract and written as seq_mem rows, as a real router's hook
would write them, so the evaluation reads them through the same path as real data.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from plaudit.signals.contract import OUTCOMES, build_decision, build_outcome, build_override
from plaudit.signals.join import REWARDS
from plaudit.signals.seqmem_file import safe_json, seq_mem_row

if TYPE_CHECKING:
    from plaudit.signals.policy import Policy

CONTEXT_KEY = "context.ci_status"
#: Decisions of a session shown in `event_history`, as the export shows them by default.
HISTORY = 3


class Draw(NamedTuple):
    """One simulated decision: what the router saw (`decision`, as a policy sees it), the
    context it came from, the logged choice and its propensity."""

    context: str
    decision: dict[str, Any]
    task: str
    propensity: float


class Simulation:
    """A router problem: contexts, tasks, outcome probabilities and a logging policy.

    `outcomes[c][t]` is the probability of each of OUTCOMES (in that order) when task t runs in
    context c; `logging[c][t]` the probability the logging router picks t in c (all > 0)."""

    def __init__(
        self,
        contexts: Mapping[str, float],
        tasks: Sequence[str],
        outcomes: Mapping[str, Mapping[str, Sequence[float]]],
        logging: Mapping[str, Mapping[str, float]],
        *,
        rewards: Mapping[str, float] | None = None,
        fields: Mapping[str, Mapping[str, Any]] | None = None,
        noise: Mapping[str, Sequence[Any]] | None = None,
        override_rate: float = 0.0,
    ) -> None:
        self.contexts = dict(contexts)
        self.tasks = tuple(tasks)
        self.outcomes = {c: {t: tuple(outcomes[c][t]) for t in self.tasks} for c in self.contexts}
        self.logging = {c: {t: float(logging[c][t]) for t in self.tasks} for c in self.contexts}
        self.rewards = dict(REWARDS if rewards is None else rewards)
        self.fields = {
            c: dict(fields[c]) if fields is not None else {"ci_status": c} for c in self.contexts
        }
        self.noise = {k: tuple(v) for k, v in (noise or {}).items()}
        self.override_rate = float(override_rate)
        for c, by_task in self.logging.items():
            if any(p <= 0 for p in by_task.values()) or abs(sum(by_task.values()) - 1) > 1e-9:
                raise ValueError(f"logging probabilities for {c!r} must be > 0 and sum to 1")
        for c in self.contexts:
            for t in self.tasks:
                if abs(sum(self.outcomes[c][t]) - 1) > 1e-9:
                    raise ValueError(f"outcome probabilities for ({c!r}, {t!r}) must sum to 1")

    def _raw_reward(self, context: str, task: str) -> float:
        return sum(
            p * self.rewards[o] for p, o in zip(self.outcomes[context][task], OUTCOMES, strict=True)
        )

    def best(self, context: str) -> str:
        """The task with the highest expected reward in `context` (the first of equals)."""
        return max(self.tasks, key=lambda t: self._raw_reward(context, t))

    def expected_reward(self, context: str, task: str) -> float:
        """The expected reward of choosing `task` in `context`: the user overrides a task that
        is not the best with probability `override_rate`, and the best one then runs."""
        own = self._raw_reward(context, task)
        best = self.best(context) if self.override_rate else task
        if best == task:
            return own
        return (1 - self.override_rate) * own + self.override_rate * self._raw_reward(context, best)

    def best_value(self) -> float:
        """The value of the best possible policy: the best task in every context."""
        return sum(pc * self.expected_reward(c, self.best(c)) for c, pc in self.contexts.items())

    def policy_value(self, policy: Policy, *, decisions: int = 100_000, seed: int = 1) -> float:
        """The value of `policy` (a `plaudit.signals.policy.Policy`). Exact when the policy is
        a table or model whose key reads only what every context fixes (`context`, and fields
        that never vary here): every context and noise value, weighted by its probability.
        Otherwise the mean over `decisions` fresh decisions, drawn as the log draws them
        (sessions and histories included), of the exact expected reward of the policy's
        distribution for each: only the contexts are sampled, never the outcomes."""
        static = ("context", "user_intent", "source", "candidates")
        if policy.kind in ("table", "model") and all(k[0] in static for k in policy.key):
            return self._exact_value(policy)
        total = 0.0
        for d in self.draws(decisions, seed=seed, start_ms=1, sessions=max(1, decisions // 10)):
            tasks, probs = policy.distribution(d.decision)
            total += sum(
                p * self.expected_reward(d.context, t) for t, p in zip(tasks, probs, strict=True)
            )
        return total / decisions

    def value(self, policy: Mapping[str, Mapping[str, float]]) -> float:
        """The exact expected reward per decision of `policy` (context -> task -> probability)."""
        return sum(
            pc * sum(pt * self.expected_reward(c, t) for t, pt in policy[c].items())
            for c, pc in self.contexts.items()
        )

    def logging_value(self) -> float:
        return self.value(self.logging)

    def table(self, policy: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
        """`policy` in the JSON table format `plaudit signal evaluate --policy` reads."""
        return {
            "schema_version": "plaudit_router_policy_v1",
            "key": [CONTEXT_KEY],
            "table": {c: dict(policy[c]) for c in self.contexts},
        }

    def _exact_value(self, policy: Policy) -> float:
        import itertools

        names = list(self.noise)
        combos = list(itertools.product(*(self.noise[n] for n in names)))
        total = 0.0
        for c, pc in self.contexts.items():
            for combo in combos:
                fields = {**self.fields[c], **dict(zip(names, combo, strict=True))}
                decision = {
                    "user_intent": "simulated",
                    "source": "flow",
                    "context": fields,
                    "candidates": list(self.tasks),
                }
                tasks, probs = policy.distribution(decision)
                value = sum(
                    p * self.expected_reward(c, t) for t, p in zip(tasks, probs, strict=True)
                )
                total += pc * value / len(combos)
        return total

    def draws(
        self,
        decisions: int,
        *,
        seed: int,
        start_ms: int,
        sessions: int = 20,
        rnd: random.Random | None = None,
    ) -> Iterator[Draw]:
        """Decisions as the router saw them, with the logged choice: each context drawn by its
        probability, the noise fields uniformly, the task by the logging policy; the session's
        previous decisions in `event_history`, as the export shows them. `rnd`: the generator
        to draw from (default: one seeded with `seed`)."""
        rnd = random.Random(seed) if rnd is None else rnd
        names = list(self.contexts)
        weights = [self.contexts[c] for c in names]
        past: dict[str, deque[tuple[str, str, int]]] = {}
        ts = start_ms
        for i in range(decisions):
            ts += rnd.randint(1_000, 5_000)
            context = rnd.choices(names, weights)[0]
            fields = dict(self.fields[context])
            for name, values in self.noise.items():
                fields[name] = rnd.choice(values)
            probs = self.logging[context]
            task = rnd.choices(self.tasks, [probs[t] for t in self.tasks])[0]
            session = f"sim-{rnd.randrange(sessions)}"
            did = f"sim-{seed}-{i}"
            seen = past.setdefault(session, deque(maxlen=HISTORY))
            history = [
                {"t_minus": len(seen) - j, "decision_id": d, "chosen_task": t, "ts_ms": at}
                for j, (d, t, at) in enumerate(seen)
            ]
            seen.append((did, task, ts))
            decision = {
                "decision_id": did,
                "ts_ms": ts,
                "source": "flow",
                "session_id": session,
                "user_intent": "simulated",
                "context": fields,
                "candidates": list(self.tasks),
                "event_history": history,
            }
            yield Draw(context, decision, task, probs[task])

    def rows(
        self, decisions: int, *, seed: int, start_ms: int, sessions: int = 20
    ) -> Iterator[dict[str, Any]]:
        """seq_mem rows: every decision with its propensity, then its override (if the user
        overrode it) and its outcome."""
        rnd = random.Random(seed)  # one stream for decisions and outcomes, in that order
        for d in self.draws(decisions, seed=seed, start_ms=start_ms, sessions=sessions, rnd=rnd):
            did, ts = d.decision["decision_id"], d.decision["ts_ms"]
            session, task = d.decision["session_id"], d.task
            decision = build_decision(
                decision_id=did,
                chosen_task=task,
                confidence=d.propensity,
                user_intent="simulated",
                session_id=session,
                candidates=list(self.tasks),
                context=d.decision["context"],
                propensity=d.propensity,
            )
            yield seq_mem_row(decision, ts)
            ran = task
            best = self.best(d.context) if self.override_rate else task
            if best != task and rnd.random() < self.override_rate:
                ran = best
                v = build_override(
                    decision_id=did, original_task=task, override_task=best, session_id=session
                )
                yield seq_mem_row(v, ts + 5)
            outcome = rnd.choices(OUTCOMES, self.outcomes[d.context][ran])[0]
            o = build_outcome(
                decision_id=did,
                outcome=outcome,
                task_executed=ran,
                time_to_resolution_ms=rnd.randint(1_000, 60_000),
                session_id=session,
            )
            yield seq_mem_row(o, ts + 10)

    def write(
        self, out: IO[str], decisions: int, *, seed: int, start_ms: int, sessions: int = 20
    ) -> int:
        n = 0
        for row in self.rows(decisions, seed=seed, start_ms=start_ms, sessions=sessions):
            out.write(safe_json(row))
            out.write("\n")
            n += 1
        return n


def router() -> Simulation:
    """The scenario the tests and the benchmark use: four tasks, three CI states, a logging
    router that mostly runs the tests, whatever the state."""
    tasks = ("ai:flow/test", "ai:flow/fix-ci", "ai:flow/review", "ai:flow/explain")
    # (success, partial, failure, wasted) per context and task
    outcomes = {
        "passing": {
            "ai:flow/test": (0.70, 0.15, 0.10, 0.05),
            "ai:flow/fix-ci": (0.20, 0.20, 0.30, 0.30),
            "ai:flow/review": (0.60, 0.25, 0.10, 0.05),
            "ai:flow/explain": (0.40, 0.30, 0.20, 0.10),
        },
        "failing": {
            "ai:flow/test": (0.25, 0.20, 0.40, 0.15),
            "ai:flow/fix-ci": (0.65, 0.20, 0.10, 0.05),
            "ai:flow/review": (0.20, 0.20, 0.40, 0.20),
            "ai:flow/explain": (0.30, 0.30, 0.30, 0.10),
        },
        "pending": {
            "ai:flow/test": (0.40, 0.20, 0.30, 0.10),
            "ai:flow/fix-ci": (0.30, 0.20, 0.30, 0.20),
            "ai:flow/review": (0.55, 0.20, 0.15, 0.10),
            "ai:flow/explain": (0.45, 0.25, 0.20, 0.10),
        },
    }
    mostly_tests = {
        "ai:flow/test": 0.55,
        "ai:flow/fix-ci": 0.15,
        "ai:flow/review": 0.15,
        "ai:flow/explain": 0.15,
    }
    logging = {c: dict(mostly_tests) for c in ("passing", "failing", "pending")}
    return Simulation({"passing": 0.5, "failing": 0.3, "pending": 0.2}, tasks, outcomes, logging)


#: A context-aware candidate for `router()`: fix CI when it fails, review when it is pending.
CANDIDATE = {
    "passing": {"ai:flow/test": 0.8, "ai:flow/review": 0.2},
    "failing": {"ai:flow/fix-ci": 0.9, "ai:flow/test": 0.1},
    "pending": {"ai:flow/review": 0.7, "ai:flow/explain": 0.3},
}


#: `mediocre()`'s tasks and what each is best at.
_TASKS = ("ai:flow/test", "ai:flow/fix-ci", "ai:flow/review", "ai:flow/docs", "ai:flow/upgrade")
_CHANGES = {"code": 0.4, "tests": 0.25, "docs": 0.2, "deps": 0.15}
_CI = {"passing": 0.5, "failing": 0.3, "pending": 0.2}


def _best_task(ci: str, change: str) -> str:
    if ci == "failing":
        return "ai:flow/upgrade" if change == "deps" else "ai:flow/fix-ci"
    return {
        "code": "ai:flow/review" if ci == "passing" else "ai:flow/test",
        "tests": "ai:flow/test",
        "docs": "ai:flow/docs",
        "deps": "ai:flow/upgrade",
    }[change]


def mediocre(*, explore: float = 0.3, override_rate: float = 0.1) -> Simulation:
    """A richer router problem for learning: the best task depends on two context fields
    (`ci_status` and `change`), two more fields are noise (`branch`, `hour`), and the logging
    router is mediocre: it looks at `ci_status` alone (fix CI when it fails, run the tests
    when it passes, review when it is pending) and explores uniformly `explore` of the time.
    The best policy earns 0.8265 a decision, the logging router 0.5175 (with the defaults)."""
    tasks = _TASKS
    contexts: dict[str, float] = {}
    fields: dict[str, dict[str, Any]] = {}
    outcomes: dict[str, dict[str, tuple[float, ...]]] = {}
    logging: dict[str, dict[str, float]] = {}
    for ci, p_ci in _CI.items():
        for change, p_change in _CHANGES.items():
            name = f"{ci}/{change}"
            contexts[name] = p_ci * p_change
            fields[name] = {"ci_status": ci, "change": change}
            best = _best_task(ci, change)
            outcomes[name] = {}
            for t in tasks:
                if t == best:
                    outcomes[name][t] = (0.75, 0.15, 0.07, 0.03)
                elif t == "ai:flow/test":  # running the tests is rarely wasted, rarely enough
                    outcomes[name][t] = (0.30, 0.30, 0.30, 0.10)
                else:
                    outcomes[name][t] = (0.15, 0.20, 0.40, 0.25)
            rule = {"failing": "ai:flow/fix-ci", "passing": "ai:flow/test"}.get(
                ci, "ai:flow/review"
            )
            logging[name] = {t: (1 - explore) * (t == rule) + explore / len(tasks) for t in tasks}
    noise = {"branch": ("main", "feature", "fix"), "hour": tuple(range(0, 24, 3))}
    return Simulation(
        contexts,
        tasks,
        outcomes,
        logging,
        fields=fields,
        noise=noise,
        override_rate=override_rate,
    )
