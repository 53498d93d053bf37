"""`plaudit demo`: all three jobs on one fresh embedded store, driven by the workload simulator.

Each simulated agent run asks the context bandit for a prompt, lets the simulated model answer,
and observes it; the task router's decision, any user override and the outcome are emitted as
router signals; the ledger's rules turn outcomes into rewards and penalties. At the end the
report says what a user would ask first: how many tokens were saved, whether the needed context
was still there, whether the books balance, and whether the router data is fit to train on.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from plaudit.core import Plaudit
from plaudit.errors import ValidationError

DEFAULT_DIR = Path(".plaudit") / "demo"
#: The file that marks a directory as the demo's own, so a later run may replace what it wrote.
MARKER = ".plaudit-demo"
#: Everything a demo run writes into its directory; nothing else there is ever touched.
_OWN_ENTRIES = (
    "plaudit.db",
    "plaudit.db-wal",
    "plaudit.db-shm",
    "plaudit.db-journal",
    "plaudit.db.lock",
    "plaudit.db.key",
    "signals-export",
)
ROUTES = ("code", "research", "ops", "writing", "data")


@dataclass
class DemoReport:
    db: str
    runs: int
    seconds: float
    events: int
    savings: dict[str, Any]
    recall_last_500: float
    rare_recall_last_500: float | None
    savings_last_500: float
    ledger: dict[str, Any]
    log_ok: bool
    log_head: str
    export_dir: str
    export_counts: dict[str, Any]
    audit: dict[str, Any]


def _outcome(rng: np.random.Generator, missed: int, rare_missed: int, rerouted: bool) -> str:
    """A plausible outcome: missing critical context fails, missing other context hurts."""
    if rare_missed:
        return "failure"
    if rerouted:
        return "wasted" if rng.random() < 0.5 else "partial"
    if missed:
        return "partial" if rng.random() < 0.7 else "failure"
    roll = rng.random()
    return "success" if roll < 0.82 else "partial" if roll < 0.92 else "failure"


def prepare_demo_dir(root: Path) -> None:
    """Make `root` ready for a fresh demo without ever deleting a file the demo did not write.

    The demo replaces its own earlier run, so `--dir` is accepted when it does not exist, is
    empty, or carries the demo's marker; then only the demo's own entries are removed. A
    directory holding anything else is refused: `--dir .` once deleted a user's project.
    """
    if root.exists() and not root.is_dir():
        raise ValidationError("dir", f"{root} exists and is not a directory")
    if root.is_dir():
        entries = sorted(e.name for e in root.iterdir())
        if entries and MARKER not in entries:
            shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
            raise ValidationError(
                "dir",
                f"{root} already holds files the demo did not write ({shown}); the demo only "
                f"writes into a new or empty directory, or one it marked itself. Nothing was "
                f"changed. Choose another, e.g. --dir {root / 'plaudit-demo'}",
            )
        for name in _OWN_ENTRIES:
            own = root / name
            if own.is_dir() and not own.is_symlink():
                shutil.rmtree(own)
            elif own.exists() or own.is_symlink():
                own.unlink()
    try:
        root.mkdir(parents=True, exist_ok=True)
        (root / MARKER).write_text(
            json.dumps({"written_by": "plaudit demo", "entries": list(_OWN_ENTRIES)}) + "\n"
        )
    except OSError as exc:
        raise ValidationError("dir", f"cannot write the demo into {root}: {exc.strerror}") from None


def run_demo(
    directory: str | os.PathLike[str] = DEFAULT_DIR,
    *,
    runs: int = 3000,
    seed: int = 7,
    on_progress: Callable[[int], None] | None = None,
) -> DemoReport:
    """Run the demo in a fresh store under `directory`; see `prepare_demo_dir` for what it keeps."""
    from plaudit.bandit.simulator import RunDetail, default_scenario, run_store

    started = time.perf_counter()
    root = Path(directory)
    prepare_demo_dir(root)
    db = root / "plaudit.db"
    export_dir = root / "signals-export"
    rng = np.random.default_rng(seed + 1)
    sc = default_scenario(seed)
    # A simulation: keep kill -9 safety but skip the per-commit fsync that power-loss safety
    # needs, so thousands of runs finish in seconds.
    p = Plaudit.open(db, durability="normal")
    try:
        ledger_session = f"demo-{seed}"
        p.ledger.start_session(ledger_session, label="plaudit demo")
        base_ts = int(time.time() * 1000) - runs * 20_000

        def on_run(run: int, sel: Any, obs: Any, d: RunDetail) -> None:
            session = f"agent-session-{run // 12:04d}"
            ts = base_ts + run * 20_000
            # The router usually picks the task's own route; sometimes it picks another one,
            # and the user re-routes.
            correct = f"agent:{d.task}"
            wrong = rng.random() < 0.08
            chosen = f"agent:{ROUTES[int(rng.integers(len(ROUTES)))]}" if wrong else correct
            wrong = chosen != correct
            confidence = float(np.clip(rng.normal(0.55 if wrong else 0.8, 0.1), 0.05, 0.99))
            p.signals.decision(
                sel.run_id,
                chosen,
                round(confidence, 3),
                f"{d.task} request #{run}",
                session_id=session,
                candidates=[f"agent:{r}" for r in ROUTES],
                context={
                    "prompt_arms": len(sel.included),
                    "prompt_tokens": sel.used_tokens,
                    "baseline": sel.is_baseline,
                },
                propensity=round(confidence, 3),
                ts_ms=ts,
            )
            if wrong:
                p.signals.override(
                    sel.run_id,
                    chosen,
                    correct,
                    reason="user re-routed",
                    session_id=session,
                    ts_ms=ts + 1_000,
                )
            outcome = _outcome(rng, len(d.missed), d.rare_missed, wrong)
            p.signals.outcome(
                sel.run_id,
                outcome,
                correct,
                int(rng.integers(2_000, 120_000)),
                manual_override_task=correct if wrong else "",
                error_kind="missing_context" if d.missed else "",
                session_id=session,
                ts_ms=ts + 5_000,
            )
            if run % 100 == 99:
                p.ledger.apply_rules()  # a live dashboard sees the score move during the run
            if on_progress is not None:
                on_progress(run + 1)

        metrics = run_store(p, sc, runs, seed=seed, session_id=ledger_session, on_run=on_run)
        p.ledger.apply_rules()
        p.ledger.end_session(ledger_session)
        last = metrics.summary(last=min(500, runs))
        summary = p.signals.export(export_dir, formats=("jsonl",), max_age_hours=24 * 365 * 10)
        audit = p.signals.audit(summary, report_out=export_dir / "audit.json")
        log_report = p.log.verify()
        ledger = p.ledger.verify()
        score = p.ledger.score()
        return DemoReport(
            db=str(db),
            runs=runs,
            seconds=time.perf_counter() - started,
            events=log_report.length,
            savings=p.bandit.savings(),
            recall_last_500=float(last["recall"]),
            rare_recall_last_500=last["rare_recall"],
            savings_last_500=float(last["savings_percent"]),
            ledger={
                "verified": bool(ledger.get("ok")),
                "total_score": score.get("total_score"),
                "transactions": score.get("transactions"),
            },
            log_ok=log_report.ok,
            log_head=log_report.head,
            export_dir=str(export_dir),
            export_counts=summary.get("counts", {}),
            audit=audit,
        )
    finally:
        p.close()
