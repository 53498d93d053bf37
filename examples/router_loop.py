"""The router signal loop end to end, on a simulated router whose truth is known.

    python examples/router_loop.py [--db PATH] [--decisions N] [--shadow N]

1. emit: a mediocre router (it looks at the CI status alone and explores 30% of the time)
   logs N decisions with their propensities, outcomes and overrides into the log;
2. learn: a routing policy is learned from them, refused if the audit's gates fail, and
   evaluated off-policy on the sessions it was not shown;
3. shadow: the router keeps deciding for new decisions, while the learned policy is asked for
   each and its recommendation recorded beside the router's decision;
4. compare: the promotion gate, from the decisions the policy did not learn from and its
   shadow records; it prints the policy the router should load, or why not.

The simulator knows every context's outcome probabilities, so the end prints the true values
beside the estimates.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from plaudit import Plaudit
from plaudit.seqmem import parse_line
from plaudit.signals import simulate
from plaudit.signals.policy import load_policy
from plaudit.signals.seqmem_file import safe_json


def emit(p: Plaudit, sim: simulate.Simulation, decisions: int, *, seed: int, start: int) -> None:
    """The router's hook, as `plaudit signal emit` would write each event (here in batches)."""
    rows = sim.rows(decisions, seed=seed, start_ms=start, sessions=max(1, decisions // 10))
    p.log.append_batch([parse_line(safe_json(r).encode()) for r in rows])


def shadow(p: Plaudit, sim: simulate.Simulation, policy: Path, decisions: int, start: int) -> int:
    """New decisions: the router decides, the candidate is asked in shadow beside it."""
    rows = list(sim.rows(decisions, seed=99, start_ms=start, sessions=max(1, decisions // 10)))
    agreed = 0
    for row in rows:
        if row["name"] != "flow.router.decision.v1":
            continue
        d = json.loads(row["subject"])
        rec = p.signals.recommend(
            policy,
            context=d["context"],
            candidates=d["candidates"],
            decision_id=d["decision_id"],
            session_id=d["session_id"],
            shadow=True,
        )
        agreed += rec["task"] == d["chosen_task"]
    p.log.append_batch([parse_line(safe_json(r).encode()) for r in rows])
    return agreed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default=None, help="store (default: a temporary one)")
    ap.add_argument("--decisions", type=int, default=20_000)
    ap.add_argument("--shadow", type=int, default=3_000)
    args = ap.parse_args()
    sim = simulate.mediocre()
    now = int(time.time() * 1000)
    start = now - (args.decisions + args.shadow) * 5_000 - 60_000  # all inside the window
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or str(Path(tmp) / "router.db")
        policy = Path(tmp) / "policy.json"
        with Plaudit.open(db) as p:
            emit(p, sim, args.decisions, seed=1, start=start)
            print(f"1. emitted {args.decisions} decisions of the mediocre router")

            learned = p.signals.learn(policy)
            ev = learned["evaluation"]
            dr = ev["estimates"]["dr"]
            print(
                f"2. learned a {learned['format']} on"
                f" {', '.join(learned['provenance']['features']['selected'])};"
                f" on {ev['evaluated']} held-out decisions: DR {dr['value']:.4f}"
                f" {_ci(dr['ci'], '')}, vs the router {dr['difference']:+.4f}"
                f" {_ci(dr['difference_ci'], '+')}"
            )

            later = start + args.decisions * 5_000
            agreed = shadow(p, sim, policy, args.shadow, later)
            print(f"3. shadow: {args.shadow} decisions, the candidate agreed on {agreed}")

            result = p.signals.compare(policy)
            verdict = "PROMOTE" if result["promote"] else "KEEP"
            print(f"4. compare: {verdict}: {result['gate']['reason']}")
            if result["promote"]:
                print(f"   the router should load {policy} (sha256 {result['load']['digest']})")
        truth = sim.policy_value(load_policy(policy))
        print(
            f"truth: the learned policy earns {truth:.4f} a decision, the router"
            f" {sim.logging_value():.4f}, the best possible policy {sim.best_value():.4f}"
        )


def _ci(values: list[float] | None, sign: str) -> str:
    if values is None:
        return ""
    return f"[{values[0]:{sign}.4f}, {values[1]:{sign}.4f}]"


if __name__ == "__main__":
    main()
