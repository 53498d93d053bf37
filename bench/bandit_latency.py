"""Select and observe latency in-process on SQLite (default durability), store included.

    .venv/bin/python bench/bandit_latency.py                 # 50, 1,000 and 10,000 arms
    .venv/bin/python bench/bandit_latency.py --db postgresql://127.0.0.1:5432/test
    .venv/bin/python bench/bandit_latency.py --durability normal

One store per case (inventory size x budget: slack, where the inventory fits, or binding, a
30,000-token budget); each is warmed with `--warm` select+observe runs over 5 contexts. Then
`--rounds` rounds run the cases in turn (interleaved, so a burst of load on the shared machine
hits every case alike), each timing `--n` select+observe pairs. Each figure is the median over
rounds of that round's p50 (and p99); CPU milliseconds per call are reported beside wall time.
The workload's output references a random half of the included arms, so every arm stays
useful and a slack inventory keeps nearly every arm in every run (the most rows an observe
can update).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from plaudit import Plaudit

TARGETS_MS = {50: 1.0, 1000: 2.0, 10_000: 10.0}
CONTEXTS = ("code", "research", "ops", "writing", "data")
CASES = ((50, False), (50, True), (1000, False), (1000, True), (10_000, True))


def inventory(n: int, seed: int = 0) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    kinds = ("tool", "skill", "file", "memory")
    return [
        {"id": f"{kinds[i % 4]}:c{i % 40}:a{i}", "tokens": int(rng.integers(100, 2000))}
        for i in range(n)
    ]


def output_for(sel_included: list[str], rng: np.random.Generator) -> tuple[str, list[dict]]:
    """Reference a random half of the included arms (tools by call, the rest by name)."""
    calls, words = [], ["done"]
    for arm in sel_included:
        if rng.random() < 0.5:
            continue
        type_, cat, name = arm.split(":", 2)
        if type_ == "tool":
            calls.append({"name": name})
        elif type_ == "skill":
            words.append(cat)
        elif type_ == "file":
            words.append(name)
    return " ".join(words), calls


class Case:
    """One open, warmed store and the timings collected from it."""

    def __init__(self, db: str, n: int, binding: bool, warm: int, durability: str) -> None:
        self.db, self.n, self.binding = db, n, binding
        arms = inventory(n)
        self.budget = 30 * 1000 if binding else sum(int(a["tokens"]) for a in arms) + 1000
        self.rng = np.random.default_rng(1)
        kw: dict[str, Any] = {} if db.startswith("postgres") else {"durability": durability}
        self.p = Plaudit.open(db, **kw)
        self.p.bandit.register(arms)
        for i in range(warm):
            sel = self.p.bandit.select(token_budget=self.budget, context=CONTEXTS[i % 5], seed=i)
            self.p.bandit.observe(sel.run_id, *output_for(sel.included, self.rng))
        self.rounds: list[dict[str, float]] = []

    def round(self, r: int, per_round: int) -> None:
        ts, to, cs, co, inc = [], [], 0.0, 0.0, 0
        for i in range(per_round):
            ctx = CONTEXTS[(r + i) % 5]
            c0, t0 = time.process_time(), time.perf_counter()
            sel = self.p.bandit.select(token_budget=self.budget, context=ctx)
            t1, c1 = time.perf_counter(), time.process_time()
            text, calls = output_for(sel.included, self.rng)
            c2, t2 = time.process_time(), time.perf_counter()
            self.p.bandit.observe(sel.run_id, text, calls)
            t3, c3 = time.perf_counter(), time.process_time()
            ts.append((t1 - t0) * 1e3)
            to.append((t3 - t2) * 1e3)
            cs += c1 - c0
            co += c3 - c2
            inc += len(sel.included)
        self.rounds.append(
            {
                "select_p50": float(np.percentile(ts, 50)),
                "select_p99": float(np.percentile(ts, 99)),
                "observe_p50": float(np.percentile(to, 50)),
                "observe_p99": float(np.percentile(to, 99)),
                "select_cpu": cs / per_round * 1e3,
                "observe_cpu": co / per_round * 1e3,
                "included": inc / per_round,
            }
        )

    def summary(self) -> dict[str, float]:
        return {k: statistics.median(r[k] for r in self.rounds) for k in self.rounds[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=40, help="select+observe pairs per round")
    ap.add_argument("--warm", type=int, default=100)
    ap.add_argument("--sizes", default="50,1000,10000")
    ap.add_argument("--durability", default="full", choices=("full", "normal"))
    ap.add_argument("--db", default=None, help="PostgreSQL DSN (default: temp SQLite files)")
    args = ap.parse_args(argv)
    sizes = {int(x) for x in args.sizes.split(",")}
    load0 = os.getloadavg()[0]
    t_start, c_start = time.perf_counter(), time.process_time()
    cases: list[Case] = []
    with tempfile.TemporaryDirectory() as d:
        for n, binding in CASES:
            if n not in sizes:
                continue
            db = args.db
            if db and db.startswith("postgres"):
                db += ("&" if "?" in db else "?") + f"schema=bench_{uuid.uuid4().hex[:8]}"
            db = db or str(Path(d) / f"lat-{n}-{int(binding)}.db")
            cases.append(Case(db, n, binding, args.warm, args.durability))
            print(f"  warmed {n} arms, binding={binding}", file=sys.stderr, flush=True)
        for r in range(args.rounds):
            for case in cases:
                case.round(r, args.n)
            print(f"  round {r + 1}/{args.rounds}", file=sys.stderr, flush=True)
        for case in cases:
            if case.db.startswith("postgres"):
                case.p.backend.drop_schema()  # its own schema, made above: leave nothing behind
            case.p.close()
    load1 = os.getloadavg()[0]
    wall, cpu = time.perf_counter() - t_start, time.process_time() - c_start
    print(
        "| arms | budget | included | select p50 (ms) | select p99 | select CPU | "
        "observe p50 (ms) | observe p99 | observe CPU | target p50 | met |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    ok = True
    for case in cases:
        r = case.summary()
        target = TARGETS_MS.get(case.n)
        met = target is None or (r["select_p50"] <= target and r["observe_p50"] <= target)
        ok &= met
        print(
            f"| {case.n:,} | {'binding' if case.binding else 'slack'} | {r['included']:.0f} | "
            f"{r['select_p50']:.2f} | {r['select_p99']:.2f} | {r['select_cpu']:.2f} | "
            f"{r['observe_p50']:.2f} | {r['observe_p99']:.2f} | {r['observe_cpu']:.2f} | "
            f"{'-' if target is None else f'<= {target:g}'} | {'yes' if met else 'NO'} |"
        )
    print(
        f"\n{args.rounds} interleaved rounds of {args.n} pairs per case, durability "
        f"{args.durability}; {wall:.0f} s wall, {cpu:.0f} s CPU; load average {load0:.2f} "
        f"before, {load1:.2f} after."
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
