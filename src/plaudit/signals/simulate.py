"""A simulated router whose truth is known, for checking off-policy evaluation.

Contexts (`context.ci_status`) arrive with known probabilities; each (context, task) has known
outcome probabilities, so its expected reward under the export's reward map is exact; the
logging policy draws the task with known probabilities and logs that probability as the
decision's `propensity`. The value of any candidate policy given as a (context x task) table
is then computed exactly, with no sampling, and an estimate can be held against it.

Rows are built with the router contract and written as seq_mem rows, as a real router's hook
would write them, so the evaluation reads them through the same path as real data.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any

from plaudit.signals.contract import OUTCOMES, build_decision, build_outcome
from plaudit.signals.join import REWARDS
from plaudit.signals.seqmem_file import safe_json, seq_mem_row

CONTEXT_KEY = "context.ci_status"


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
    ) -> None:
        self.contexts = dict(contexts)
        self.tasks = tuple(tasks)
        self.outcomes = {c: {t: tuple(outcomes[c][t]) for t in self.tasks} for c in self.contexts}
        self.logging = {c: {t: float(logging[c][t]) for t in self.tasks} for c in self.contexts}
        self.rewards = dict(REWARDS if rewards is None else rewards)
        for c, by_task in self.logging.items():
            if any(p <= 0 for p in by_task.values()) or abs(sum(by_task.values()) - 1) > 1e-9:
                raise ValueError(f"logging probabilities for {c!r} must be > 0 and sum to 1")
        for c in self.contexts:
            for t in self.tasks:
                if abs(sum(self.outcomes[c][t]) - 1) > 1e-9:
                    raise ValueError(f"outcome probabilities for ({c!r}, {t!r}) must sum to 1")

    def expected_reward(self, context: str, task: str) -> float:
        return sum(
            p * self.rewards[o] for p, o in zip(self.outcomes[context][task], OUTCOMES, strict=True)
        )

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

    def rows(
        self, decisions: int, *, seed: int, start_ms: int, sessions: int = 20
    ) -> Iterator[dict[str, Any]]:
        """seq_mem rows: every decision with its propensity, then its outcome."""
        rnd = random.Random(seed)
        names = list(self.contexts)
        weights = [self.contexts[c] for c in names]
        ts = start_ms
        for i in range(decisions):
            ts += rnd.randint(1_000, 5_000)
            context = rnd.choices(names, weights)[0]
            probs = self.logging[context]
            task = rnd.choices(self.tasks, [probs[t] for t in self.tasks])[0]
            session = f"sim-{rnd.randrange(sessions)}"
            did = f"sim-{seed}-{i}"
            d = build_decision(
                decision_id=did,
                chosen_task=task,
                confidence=probs[task],
                user_intent="simulated",
                session_id=session,
                candidates=list(self.tasks),
                context={"ci_status": context},
                propensity=probs[task],
            )
            yield seq_mem_row(d, ts)
            outcome = rnd.choices(OUTCOMES, self.outcomes[context][task])[0]
            o = build_outcome(
                decision_id=did,
                outcome=outcome,
                task_executed=task,
                time_to_resolution_ms=rnd.randint(1_000, 60_000),
                session_id=session,
            )
            yield seq_mem_row(o, ts + 10)

    def write(self, out: IO[str], decisions: int, *, seed: int, start_ms: int) -> int:
        n = 0
        for row in self.rows(decisions, seed=seed, start_ms=start_ms):
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
