"""A small, realistic store for dashboard tests: bandit runs, router signals, ledger activity.

Written through the library so every card of the dashboard has something to draw.
"""

from __future__ import annotations

import random

from plaudit import Plaudit

TOOLS = ["Bash", "Read", "Edit", "Grep", "WebSearch", "WebFetch"]
TASKS = ["ai:flow/test", "ai:flow/fix-ci", "ai:flow/review", "ai:flow/deploy"]


def seed(db: str, *, runs: int = 60, decisions: int = 40, transactions: int = 12) -> None:
    rng = random.Random(7)
    with Plaudit.open(db) as p:
        arms = [{"id": f"tool:exec:{t}", "tokens": 400 + 60 * i} for i, t in enumerate(TOOLS)]
        arms += [{"id": f"skill:dev:skill{i}", "tokens": 900} for i in range(3)]
        p.bandit.register(arms)
        for i in range(runs):
            ctx = "repo-a" if i % 2 else None
            sel = p.bandit.select(None, token_budget=4000, context=ctx, seed=i, session_id="dash")
            used = [a.split(":", 2)[2] for a in sel.included if rng.random() < 0.6]
            p.bandit.observe(
                sel.run_id,
                "used " + " ".join(used),
                [{"name": u} for u in used],
                usage_tokens=sel.used_tokens + 800,
            )
        for i in range(decisions):
            did = f"d-{i}"
            task = rng.choice(TASKS)
            p.signals.decision(did, task, round(rng.random(), 2), "fix the build", session_id="s1")
            outcome = rng.choice(["success", "success", "partial", "failure"])
            p.signals.outcome(did, outcome, task, 1000 + i)
        p.ledger.start_session("dash-session")
        categories = ["zero_duplication", "pattern_reuse", "constitutional_compliance"]
        for i in range(transactions):
            p.ledger.record(rng.choice(categories), f"seeded action {i}")
