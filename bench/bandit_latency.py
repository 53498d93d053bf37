"""Select and observe latency in-process on SQLite (default durability), store included.

    .venv/bin/python bench/bandit_latency.py                 # the whole grid, 5 rounds
    .venv/bin/python bench/bandit_latency.py --sizes 50,1000 --paths passed
    .venv/bin/python bench/bandit_latency.py --paths registered,passed,changing
    .venv/bin/python bench/bandit_latency.py --db postgresql://127.0.0.1:5432/test
    .venv/bin/python bench/bandit_latency.py --durability normal

The grid (issue 29): 50, 1,000 and 10,000 arms; a budget that fits the inventory (slack) and
a 30,000-token one that binds; and two ways to give the arms:

- `registered`: the arms are registered once and every select considers the registry;
- `passed`: the agent passes the same list with every select (as a list of dicts, a fresh
  copy each call, as an agent that rebuilds it would);
- `changing` (not in the grid unless asked for): the list passed changes by one arm per
  call, a new file in place of the oldest one added, which the select registers.

One store per case; each is warmed with `--warm` select+observe runs over 5 contexts. Then
`--rounds` rounds run the cases in turn (interleaved, so a burst of load on the shared machine
hits every case alike), each timing `--n` select+observe pairs. Each figure is the median over
rounds of that round's p50 (and p99); CPU milliseconds per call (p50, and for observe also the
mean, which carries the checkpoints) are reported beside wall time, and the load average before
and after. The workload's output references a random half of the
included arms, so every arm stays useful and a slack inventory keeps nearly every arm in every
run (the most rows an observe can update). The targets are on the p50 of each call.
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
PATHS = ("registered", "passed", "changing")


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

    def __init__(
        self, db: str, n: int, binding: bool, path: str, warm: int, durability: str
    ) -> None:
        self.db, self.n, self.binding, self.path = db, n, binding, path
        self.arms = inventory(n)
        self.budget = 30 * 1000 if binding else sum(int(a["tokens"]) for a in self.arms) + 1000
        self.rng = np.random.default_rng(1)
        self.added = 0
        kw: dict[str, Any] = {} if db.startswith("postgres") else {"durability": durability}
        self.p = Plaudit.open(db, **kw)
        if path == "registered":
            self.p.bandit.register(self.arms)
        for i in range(warm):
            self.pair(CONTEXTS[i % 5], seed=i)
        self.rounds: list[dict[str, float]] = []

    def given(self) -> list[dict[str, object]] | None:
        """The arms the agent passes with this select (None: the registered inventory)."""
        if self.path == "registered":
            return None
        if self.path == "changing":  # a new file in place of the oldest one added
            i, self.added = self.added % self.n, self.added + 1
            self.arms[i] = {"id": f"file:new:f{self.added}.md", "tokens": 100 + self.added % 900}
        return [dict(a) for a in self.arms]

    def pair(self, ctx: str, seed: int | None = None) -> tuple[float, float, float, float, int]:
        arms = self.given()
        c0, t0 = time.process_time(), time.perf_counter()
        sel = self.p.bandit.select(arms, token_budget=self.budget, context=ctx, seed=seed)
        t1, c1 = time.perf_counter(), time.process_time()
        text, calls = output_for(sel.included, self.rng)
        c2, t2 = time.process_time(), time.perf_counter()
        self.p.bandit.observe(sel.run_id, text, calls)
        t3, c3 = time.perf_counter(), time.process_time()
        return t1 - t0, c1 - c0, t3 - t2, c3 - c2, len(sel.included)

    def round(self, r: int, per_round: int) -> None:
        got = [self.pair(CONTEXTS[(r + i) % 5]) for i in range(per_round)]
        ts, cs, to, co, inc = (np.array(x, dtype=np.float64) for x in zip(*got, strict=True))
        self.rounds.append(
            {
                "select_p50": float(np.percentile(ts, 50)) * 1e3,
                "select_p99": float(np.percentile(ts, 99)) * 1e3,
                "select_cpu": float(np.percentile(cs, 50)) * 1e3,
                "observe_p50": float(np.percentile(to, 50)) * 1e3,
                "observe_p99": float(np.percentile(to, 99)) * 1e3,
                "observe_cpu": float(np.percentile(co, 50)) * 1e3,
                "observe_cpu_mean": float(co.mean()) * 1e3,
                "included": float(inc.mean()),
            }
        )

    def summary(self) -> dict[str, float]:
        return {k: statistics.median(r[k] for r in self.rounds) for k in self.rounds[0]}


def _verdict(target: float | None, r: dict[str, float]) -> str:
    if target is None:
        return "-"
    sel, obs = r["select_p50"] <= target, r["observe_p50"] <= target
    if sel and obs:
        return "yes"
    if sel or obs:
        return f"{'select' if sel else 'observe'} yes, {'observe' if sel else 'select'} NO"
    return "NO"


def report(cases: list[Case], args: argparse.Namespace, footer: str) -> bool:
    print(
        "| arms | budget | arms given | included | select p50 (ms) | select p99 | select CPU p50 | "
        "observe p50 (ms) | observe p99 | observe CPU p50 | observe CPU mean | target p50 | met |"
    )
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    ok = True
    for case in cases:
        r = case.summary()
        target = TARGETS_MS.get(case.n) if case.path != "changing" else None
        verdict = _verdict(target, r)
        ok &= verdict in ("yes", "-")
        print(
            f"| {case.n:,} | {'binding' if case.binding else 'slack'} | {case.path} | "
            f"{r['included']:.0f} | {r['select_p50']:.2f} | {r['select_p99']:.2f} | "
            f"{r['select_cpu']:.2f} | {r['observe_p50']:.2f} | {r['observe_p99']:.2f} | "
            f"{r['observe_cpu']:.2f} | {r['observe_cpu_mean']:.2f} | "
            f"{'-' if target is None else f'<= {target:g}'} | "
            f"{verdict} |"
        )
    print(f"\n{footer}")
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=40, help="select+observe pairs per round")
    ap.add_argument("--warm", type=int, default=100)
    ap.add_argument("--sizes", default="50,1000,10000")
    ap.add_argument("--budgets", default="slack,binding")
    ap.add_argument("--paths", default="registered,passed", help=f"of {', '.join(PATHS)}")
    ap.add_argument("--durability", default="full", choices=("full", "normal"))
    ap.add_argument("--db", default=None, help="PostgreSQL DSN (default: temp SQLite files)")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    budgets = [b == "binding" for b in args.budgets.split(",")]
    paths = [p for p in args.paths.split(",") if p]
    if not set(paths) <= set(PATHS):
        ap.error(f"--paths: one or more of {', '.join(PATHS)}")
    load0 = os.getloadavg()
    t_start, c_start = time.perf_counter(), time.process_time()
    cases: list[Case] = []
    with tempfile.TemporaryDirectory() as d:
        for n in sizes:
            for binding in budgets:
                for path in paths:
                    db = args.db
                    if db and db.startswith("postgres"):
                        schema = f"bench_{uuid.uuid4().hex[:8]}"
                        db += ("&" if "?" in db else "?") + f"schema={schema}"
                    db = db or str(Path(d) / f"lat-{n}-{int(binding)}-{path}.db")
                    cases.append(Case(db, n, binding, path, args.warm, args.durability))
                    print(f"  warmed {n} arms, binding={binding}, {path}", file=sys.stderr)
        for r in range(args.rounds):
            for case in cases:
                case.round(r, args.n)
            print(f"  round {r + 1}/{args.rounds}", file=sys.stderr, flush=True)
        for case in cases:
            if case.db.startswith("postgres"):
                case.p.backend.drop_schema()  # its own schema, made above: leave nothing behind
            case.p.close()
    load1 = os.getloadavg()
    wall, cpu = time.perf_counter() - t_start, time.process_time() - c_start
    footer = (
        f"{args.rounds} interleaved rounds of {args.n} pairs per case, durability "
        f"{args.durability}, {'PostgreSQL' if args.db else 'SQLite'}; {wall:.0f} s wall, "
        f"{cpu:.0f} s CPU; load average (1, 5, 15 min) "
        f"{' '.join(f'{x:.2f}' for x in load0)} before, "
        f"{' '.join(f'{x:.2f}' for x in load1)} after."
    )
    return 0 if report(cases, args, footer) else 1


if __name__ == "__main__":
    sys.exit(main())
