"""Synthetic router traffic in seq_mem format, for demos, tests and benchmarks.

The rows are built exactly as the reference emitter builds them, so the same file can be fed
to plaudit and to the reference exporter. Deterministic for a given seed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import IO, Any

from plaudit.signals.contract import build_decision, build_outcome, build_override
from plaudit.signals.seqmem_file import safe_json, seq_mem_row

TASKS = (
    "ai:flow/dev-check",
    "ai:flow/test",
    "ai:flow/fix-ci",
    "ai:flow/review",
    "ai:flow/commit",
    "ai:flow/deploy",
    "ai:flow/explain",
    "ai:flow/refactor",
)
INTENTS = (
    "run the tests",
    "why is CI red",
    "ship it",
    "clean up this module",
    "what does this function do",
    "review my change",
    "fix the lint errors",
)
OUTCOME_WEIGHTS = (("success", 55), ("partial", 20), ("failure", 17), ("wasted", 8))


def rows(
    decisions: int,
    *,
    seed: int = 7,
    start_ms: int = 1_790_000_000_000,
    sessions: int | None = None,
    outcome_rate: float = 0.85,
    override_rate: float = 0.08,
    repeat_rate: float = 0.0,
) -> Iterator[dict[str, Any]]:
    """Yield seq_mem rows: a decision, usually its outcome, sometimes an override.

    `repeat_rate` re-emits some decision/outcome rows identically (a retried hook).
    """
    rnd = random.Random(seed)
    n_sessions = sessions or max(1, decisions // 25)
    outcomes = [o for o, _ in OUTCOME_WEIGHTS]
    weights = [w for _, w in OUTCOME_WEIGHTS]
    ts = start_ms
    for i in range(decisions):
        ts += rnd.randint(200, 20_000)
        session = f"s-{rnd.randrange(n_sessions):05d}"
        did = f"d-{seed}-{i:07d}"
        chosen = rnd.choice(TASKS)
        cands = rnd.sample(TASKS, 3)
        if chosen not in cands:
            cands[0] = chosen
        d = build_decision(
            decision_id=did,
            chosen_task=chosen,
            confidence=round(rnd.random(), 3),
            user_intent=rnd.choice(INTENTS),
            session_id=session,
            candidates=[{"task": t, "score": round(rnd.random(), 3)} for t in cands],
            context={
                "changed_files": rnd.randint(0, 40),
                "ci_status": rnd.choice(("passing", "failing", "pending")),
                "failing_tests": [f"tests/test_{rnd.randrange(50)}.py" for _ in range(2)],
                "recent_errors": rnd.randint(0, 5),
            },
            project_fingerprint=f"fp-{rnd.randrange(20)}",
            project_path=f"~/code/project-{rnd.randrange(20)}",
            git_branch=rnd.choice(("main", "feature", "fix")),
            git_commit=f"{rnd.getrandbits(40):010x}",
            user_hash="u-1",
        )
        row = seq_mem_row(d, ts)
        yield row
        if rnd.random() < repeat_rate:
            yield row
        overridden = ""
        if rnd.random() < override_rate:
            overridden = rnd.choice([t for t in TASKS if t != chosen])
            v = build_override(
                decision_id=did,
                original_task=chosen,
                override_task=overridden,
                reason="user picked another task",
                session_id=session,
            )
            yield seq_mem_row(v, ts + 50)
        if rnd.random() < outcome_rate:
            o = build_outcome(
                decision_id=did,
                outcome=rnd.choices(outcomes, weights)[0],
                task_executed=overridden or chosen,
                time_to_resolution_ms=rnd.randint(1_000, 600_000),
                manual_override_task=overridden if rnd.random() < 0.5 else "",
                error_kind=rnd.choice(("", "", "timeout", "test_failure")),
                session_id=session,
            )
            orow = seq_mem_row(o, ts + 100)
            yield orow
            if rnd.random() < repeat_rate:
                yield orow


def write(out: IO[str], decisions: int, **kwargs: Any) -> int:
    """Write rows as JSON lines; returns how many lines."""
    n = 0
    for row in rows(decisions, **kwargs):
        out.write(safe_json(row))
        out.write("\n")
        n += 1
    return n
