"""Select and observe latency in-process on SQLite (default durability), store included.

    .venv/bin/python bench/bandit_latency.py                 # 50, 1,000 and 10,000 arms
    .venv/bin/python bench/bandit_latency.py --db postgresql://127.0.0.1:5432/test

For each inventory size, with the budget slack (the inventory fits) and binding (a budget of
about 30 arms), a fresh store is warmed with `--warm` select+observe runs over 5 contexts, then
`--rounds` interleaved rounds of `--n` select+observe pairs are timed. Each figure is the median
over rounds of that round's p50 (and p99); CPU seconds per call are reported beside wall time.
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

import numpy as np

from plaudit import Plaudit

TARGETS_MS = {50: 1.0, 1000: 2.0, 10_000: 10.0}
CONTEXTS = ("code", "research", "ops", "writing", "data")


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


def measure(db: str, n: int, binding: bool, warm: int, per_round: int, rounds: int) -> dict:
    arms = inventory(n)
    budget = 30 * 1000 if binding else sum(int(a["tokens"]) for a in arms) + 1000
    rng = np.random.default_rng(1)
    sel_ms: list[float] = []
    obs_ms: list[float] = []
    sel_p99: list[float] = []
    obs_p99: list[float] = []
    cpu_sel: list[float] = []
    cpu_obs: list[float] = []
    with Plaudit.open(db) as p:
        p.bandit.register(arms)
        for i in range(warm):
            sel = p.bandit.select(token_budget=budget, context=CONTEXTS[i % 5], seed=i)
            p.bandit.observe(sel.run_id, *output_for(sel.included, rng))
        for r in range(rounds):
            ts, to, cs, co = [], [], 0.0, 0.0
            for i in range(per_round):
                ctx = CONTEXTS[(r + i) % 5]
                c0, t0 = time.process_time(), time.perf_counter()
                sel = p.bandit.select(token_budget=budget, context=ctx)
                t1, c1 = time.perf_counter(), time.process_time()
                text, calls = output_for(sel.included, rng)
                c2, t2 = time.process_time(), time.perf_counter()
                p.bandit.observe(sel.run_id, text, calls)
                t3, c3 = time.perf_counter(), time.process_time()
                ts.append((t1 - t0) * 1e3)
                to.append((t3 - t2) * 1e3)
                cs += c1 - c0
                co += c3 - c2
            sel_ms.append(float(np.percentile(ts, 50)))
            obs_ms.append(float(np.percentile(to, 50)))
            sel_p99.append(float(np.percentile(ts, 99)))
            obs_p99.append(float(np.percentile(to, 99)))
            cpu_sel.append(cs / per_round * 1e3)
            cpu_obs.append(co / per_round * 1e3)
    med = statistics.median
    return {
        "select_p50": med(sel_ms),
        "select_p99": med(sel_p99),
        "observe_p50": med(obs_ms),
        "observe_p99": med(obs_p99),
        "select_cpu": med(cpu_sel),
        "observe_cpu": med(cpu_obs),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=60, help="select+observe pairs per round")
    ap.add_argument("--warm", type=int, default=200)
    ap.add_argument("--sizes", default="50,1000,10000")
    ap.add_argument("--db", default=None, help="PostgreSQL DSN (default: a temp SQLite file)")
    args = ap.parse_args(argv)
    print(f"load average before: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    rows = []
    ok = True
    for n in (int(x) for x in args.sizes.split(",")):
        for binding in (False, True):
            with tempfile.TemporaryDirectory() as d:
                db = args.db
                if db and db.startswith("postgres"):
                    db += ("&" if "?" in db else "?") + f"schema=bench_{uuid.uuid4().hex[:8]}"
                r = measure(
                    db or str(Path(d) / "lat.db"), n, binding, args.warm, args.n, args.rounds
                )
            target = TARGETS_MS.get(n)
            met = target is None or (r["select_p50"] <= target and r["observe_p50"] <= target)
            ok &= met
            rows.append((n, binding, r, target, met))
            print(f"  {n} arms, binding={binding}: {r}", file=sys.stderr)
    print(f"load average after: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    print(
        "| arms | budget | select p50 (ms) | select p99 | select CPU | observe p50 (ms) | "
        "observe p99 | observe CPU | target p50 | met |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for n, binding, r, target, met in rows:
        print(
            f"| {n:,} | {'binding' if binding else 'slack'} | {r['select_p50']:.2f} | "
            f"{r['select_p99']:.2f} | {r['select_cpu']:.2f} | {r['observe_p50']:.2f} | "
            f"{r['observe_p99']:.2f} | {r['observe_cpu']:.2f} | "
            f"{'-' if target is None else f'<= {target:g}'} | {'yes' if met else 'NO'} |"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
