"""Benchmark: `plaudit signal learn` and `recommend` against the targets of issue 32.

    .venv/bin/python bench/signals_learn.py --quality-seeds 20 --runs 5

Three parts, each skippable (0 turns it off):

* quality (--quality-seeds N, --decisions 20000, --explore 0.3): N fresh logs of the
  mediocre router of `plaudit.signals.simulate.mediocre()` (it explores 30% of the time by
  default), each learned from with
  the defaults, in-process. Per log: the learned policy's true value (exact: the simulator
  knows every context's outcome probabilities) against the best possible policy's and the
  logging router's, and whether the doubly robust 95% interval that `learn` reports for the
  held-out sessions covers that true value.
* scale (--scale-decisions 200000, --runs R): `plaudit signal learn` as a child process on a
  log of that many decisions, from a SQLite store (the `signals` projection) and from the
  seq_mem file, interleaved R times: wall and CPU time, peak RSS.
* recommend (--calls 10000, --runs R): `plaudit.recommend` in-process on the learned policy
  file (varying contexts and decision ids), and `POST /v1/signals/recommend` with
  `policy_path` to a `plaudit serve` on one kept-alive connection: p50, p90 and p99 per run.

Figures are medians over runs, with the load average before and after.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plaudit import Plaudit, recommend
from plaudit.seqmem import import_file
from plaudit.signals import simulate
from plaudit.signals.learn import learn_policy
from plaudit.signals.policy import load_policy
from signals_common import median, plaudit_command, run_measured

START_MS = 1_790_000_000_000


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def write_log(
    path: Path, decisions: int, seed: int, start_ms: int = START_MS, explore: float = 0.3
) -> None:
    with open(path, "w") as f:
        simulate.mediocre(explore=explore).write(
            f, decisions, seed=seed, start_ms=start_ms, sessions=max(1, decisions // 10)
        )


def quality(work: Path, seeds: int, decisions: int, explore: float) -> None:
    sim = simulate.mediocre(explore=explore)
    best, logging = sim.best_value(), sim.logging_value()
    rows = []
    wall, cpu = time.perf_counter(), time.process_time()
    for seed in range(seeds):
        log = work / f"q{seed}.jsonl"
        write_log(log, decisions, seed=1000 + seed, explore=explore)
        out = work / f"q{seed}.json"
        t = time.process_time()
        res = learn_policy(
            out, seq_mem=log, now_ms=START_MS + decisions * 6_000, max_age_hours=10**6, seed=seed
        )
        took = time.process_time() - t
        truth = sim.policy_value(load_policy(out))
        dr = res["evaluation"]["estimates"]["dr"]
        lo, hi = dr["ci"]
        rows.append(
            (seed, truth, dr["value"], lo, hi, res["provenance"]["features"]["selected"], took)
        )
        log.unlink()
    print(
        f"quality: {seeds} logs of {decisions} decisions, the router exploring {explore:.0%};"
        f" best policy {best:.4f}, logging"
        f" router {logging:.4f}; {time.perf_counter() - wall:.1f} s wall,"
        f" {time.process_time() - cpu:.1f} s CPU; load {loadavg()}\n"
    )
    print(
        "| seed | true value | / best | / logging | DR [95% interval] | covers | fields | CPU s |"
    )
    print("|---:|---:|---:|---:|---|:---:|---|---:|")
    for seed, truth, est, lo, hi, fields, took in rows:
        print(
            f"| {seed} | {truth:.4f} | {truth / best:.1%} | {truth / logging:.2f}x |"
            f" {est:.4f} [{lo:.4f}, {hi:.4f}] | {'yes' if lo <= truth <= hi else 'no'} |"
            f" {', '.join(fields)} | {took:.2f} |"
        )
    truths = [r[1] for r in rows]
    covered = sum(r[3] <= r[1] <= r[4] for r in rows)
    print(
        f"\nmedian true value {statistics.median(truths):.4f}"
        f" ({statistics.median(truths) / best:.1%}"
        f" of best, min {min(truths) / best:.1%}); >= 90% of best in"
        f" {sum(t >= 0.9 * best for t in truths)}/{seeds}; >= 1.5x logging in"
        f" {sum(t >= 1.5 * logging for t in truths)}/{seeds}; DR interval covers the truth in"
        f" {covered}/{seeds}\n"
    )


def scale(work: Path, decisions: int, runs: int) -> Path:
    start = int(time.time() * 1000) - decisions * 5_000 - 60_000
    log = work / "scale.jsonl"
    write_log(log, decisions, seed=7, start_ms=start)
    db = work / "scale.db"
    t = time.perf_counter()
    with Plaudit.open(db) as p:
        import_file(p.log, log)
    print(
        f"scale: {decisions} decisions ({log.stat().st_size >> 20} MiB seq_mem), imported in"
        f" {time.perf_counter() - t:.1f} s; load {loadavg()}"
    )
    age = str(decisions * 5 // 3600 + 24)
    variants = {
        "log (--db)": ["--db", str(db)],
        "file (--seq-mem)": ["--seq-mem", str(log)],
    }
    results: dict[str, list[tuple[float, float, int]]] = {k: [] for k in variants}
    for _ in range(runs):
        for name, args in variants.items():
            cmd = [
                *plaudit_command(),
                "signal",
                "learn",
                "--out",
                str(work / "scale.json"),
                "--max-age-hours",
                age,
                *args,
            ]
            wall, rss, code, cpu = run_measured(cmd)
            if code != 0:
                raise SystemExit(f"{name}: exit {code}")
            results[name].append((wall, cpu, rss))
    print(f"load after: {loadavg()}\n")
    print("| variant | wall s (median) | CPU s (median) | peak RSS MiB (max) |")
    print("|---|---:|---:|---:|")
    for name, got in results.items():
        print(
            f"| {name} | {median([g[0] for g in got]):.2f} | {median([g[1] for g in got]):.2f}"
            f" | {max(g[2] for g in got) / 1024:.0f} |"
        )
    print()
    return work / "scale.json"


def _percentiles(values: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(values, n=100, method="inclusive")
    return statistics.median(values), q[89], q[98]


def recommend_latency(work: Path, policy: Path, calls: int, runs: int) -> None:
    from http_load import Serve

    contexts = [
        {"ci_status": ci, "change": ch, "branch": "main"}
        for ci in ("passing", "failing", "pending")
        for ch in ("code", "tests", "docs", "deps")
    ]
    inproc: list[tuple[float, float, float]] = []
    served: list[tuple[float, float, float]] = []
    os.environ["PLAUDIT_EXPORT_ROOT"] = str(work)
    server = Serve(str(work / "serve.db"))
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port)
        for run in range(runs):
            times = []
            for i in range(calls):
                t = time.perf_counter()
                recommend(policy, context=contexts[i % 12], decision_id=f"r{run}-{i}")
                times.append((time.perf_counter() - t) * 1000)
            inproc.append(_percentiles(times))
            times = []
            for i in range(calls // 5):
                body = json.dumps(
                    {
                        "policy_path": policy.name,
                        "context": contexts[i % 12],
                        "decision_id": f"h{run}-{i}",
                    }
                )
                t = time.perf_counter()
                conn.request(
                    "POST", "/v1/signals/recommend", body, {"Content-Type": "application/json"}
                )
                resp = conn.getresponse()
                data = resp.read()
                times.append((time.perf_counter() - t) * 1000)
                if resp.status != 200:
                    raise SystemExit(f"HTTP {resp.status}: {data[:200]!r}")
            served.append(_percentiles(times))
    finally:
        server.stop()
    print(
        f"recommend: {calls} in-process calls and {calls // 5} HTTP requests per run, {runs}"
        f" runs; load {loadavg()}\n"
    )
    print("| surface | p50 ms | p90 ms | p99 ms |")
    print("|---|---:|---:|---:|")
    for name, got in (
        ("in-process `plaudit.recommend`", inproc),
        ("HTTP `POST /v1/signals/recommend`", served),
    ):
        print(
            f"| {name} | {median([g[0] for g in got]):.3f} | {median([g[1] for g in got]):.3f}"
            f" | {median([g[2] for g in got]):.3f} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quality-seeds", type=int, default=20)
    ap.add_argument("--decisions", type=int, default=20_000)
    ap.add_argument("--explore", type=float, default=0.3, help="how often the router explores")
    ap.add_argument("--scale-decisions", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--calls", type=int, default=10_000)
    args = ap.parse_args()
    print(f"load before: {loadavg()}")
    with tempfile.TemporaryDirectory(prefix="plaudit-learn-") as tmp:
        work = Path(tmp)
        if args.quality_seeds:
            quality(work, args.quality_seeds, args.decisions, args.explore)
        policy = None
        if args.scale_decisions:
            policy = scale(work, args.scale_decisions, args.runs)
        if args.calls:
            if policy is None:
                write_log(work / "small.jsonl", args.decisions, seed=3)
                policy = work / "scale.json"
                learn_policy(
                    policy,
                    seq_mem=work / "small.jsonl",
                    max_age_hours=10**6,
                    now_ms=START_MS + args.decisions * 6_000,
                )
            recommend_latency(work, policy, args.calls, args.runs)


if __name__ == "__main__":
    main()
