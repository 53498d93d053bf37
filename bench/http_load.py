"""Load benchmark: a real `plaudit serve` on loopback, open loop, from one or more checkouts.

Workloads (`--workload`):
- `select-observe` (the default): `POST /v1/bandit/select` and `/observe` alternating (each
  observe reports the oldest run selected and not yet observed);
- `mixed`: per 40 requests, 12 single appends, 2 batches of 10, 6 ledger records, 4 selects
  (8 arms in the request), 4 observes, and 3 each of `GET /v1/log/tail`, `/v1/ledger/score`,
  `/v1/bandit/posteriors` and `/v1/log/head` (bench/http_mix.py).

Requests fire on a fixed clock (`--rate`) whatever the server's replies do. Latency runs from
the moment a request was *scheduled*, so a server that falls behind cannot hide it (no
coordinated omission); the time from the actual send is reported too. The server's CPU (all
its processes, read from /proc before and after) is reported per request, beside the load
generator's own (a lean client on uvloop: bench/http_wire.py). Each run gets a fresh store:
a new SQLite file, or a new PostgreSQL schema (127.0.0.1:5432, database `test`) dropped after.

`--checkout DIR` (a checkout with its own `.venv`) or `--python PATH` adds another tree's
server; every configuration then runs on each tree in turn, interleaved, and the table gives
the medians per tree and the ratio to the first tree added (the reference).

    python bench/http_load.py                      # select+observe, SQLite then PostgreSQL
    python bench/http_load.py --workload mixed --rate 200 --duration 15 --runs 5 \\
        --checkout ../plaudit-6064f19             # this tree against the old release
    python bench/http_load.py --single --runs 5 --checkout ../plaudit-6064f19
                                                   # CPU per request of each endpoint alone
    python bench/http_load.py --single --statements --profile prof/ --checkout ...
                                                   # + SQL statements per request, py-spy
    python bench/http_load.py --targets --runs 5   # the issue's three target workloads
    python bench/http_load.py --workers 2          # `plaudit serve --workers 2`
    python bench/http_load.py --warmup 2           # steady state: the first 2 s not counted
    python bench/http_load.py --timeline t.json    # when each slow request came

Run time is bounded: `duration` plus at most `--drain` seconds for replies still in flight
(then they count as errors).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from http_mix import ARMS, LABELS, SINGLE, Requests
from http_report import load_tables, single_tables, target_lines
from http_serve import Serve, Tree, fresh_store
from http_single import single_run
from http_wire import Pool, pct, run_loop

CONNECTIONS = 16

#: The issue's targets: (workload, rate, p99 limit in ms): select+observe at 300/s within
#: 15 ms, and the mixed workload at 200/s within 25 ms, ramped from below (a rate is run only
#: while the ones under it kept the limit) to find the highest that does (moonshot 1,000/s).
TARGETS = [("select-observe", 300.0, 15.0), ("mixed", 200.0, 25.0)]
RAMP = [50.0, 100.0, 150.0, 200.0, 300.0, 400.0, 600.0, 800.0, 1000.0]


async def drive(
    url: str,
    workload: str,
    rate: float,
    duration: float,
    drain: float,
    warmup: float = 0.0,
    measuring: Any = None,
    timeline: list[tuple[int, str, float, float]] | None = None,
) -> dict[str, Any]:
    """`warmup` seconds of the same load run first and are left out of every figure (their
    errors excepted); `measuring()` is called when the measured requests begin."""
    interval = 1.0 / rate
    skip = int(rate * warmup)
    total = int(rate * duration)
    reqs = Requests(f"load-{os.getpid()}-{time.monotonic_ns()}")
    lat_sched: dict[str, list[float]] = collections.defaultdict(list)
    lat_send: dict[str, list[float]] = collections.defaultdict(list)
    errors: collections.Counter[str] = collections.Counter()
    pool = Pool(url, CONNECTIONS)
    cpu_at_start = time.process_time()
    status, _ = await pool.post("/v1/bandit/arms", {"arms": ARMS}, 30)
    if status != 200:
        raise SystemExit(f"registering the arms failed: HTTP {status}")

    async def one(i: int, name: str, request: tuple[str, str, Any], scheduled: float) -> None:
        method, path, body = request
        sent = time.perf_counter()
        try:
            status, data = await pool.request(method, path, body, 10)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
            errors[f"{name}: {type(exc).__name__}"] += 1
            return
        done = time.perf_counter()
        if status != 200:
            errors[f"{name}: HTTP {status}"] += 1
            return
        reqs.answered(name, data)
        if i < skip:
            return
        lat_sched[name].append((done - scheduled) * 1000)
        lat_send[name].append((done - sent) * 1000)
        if timeline is not None:  # (request number, kind, ms from schedule, seconds into run)
            timeline.append((i, name, round((done - scheduled) * 1000, 2), round(sent - start, 3)))

    tasks: dict[asyncio.Task[None], str] = {}
    start = time.perf_counter() + 0.05
    start_measured = start + skip * interval
    for i in range(skip + total):
        scheduled = start + i * interval
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if i == skip:
            if measuring is not None:
                measuring()
            cpu_at_start = time.process_time()
        name = reqs.name(workload, i)  # and its body now: an observe takes a selection
        t = asyncio.create_task(one(i, name, reqs.request(name, i), scheduled))
        tasks[t] = name
        t.add_done_callback(tasks.pop)
    elapsed = time.perf_counter() - start_measured
    if tasks:
        _, pending = await asyncio.wait(set(tasks), timeout=drain)
        for t in pending:
            errors[f"{tasks[t]}: unanswered after drain"] += 1
            t.cancel()
    return _summary(total, elapsed, lat_sched, lat_send, errors, cpu_at_start)


def _summary(
    total: int,
    elapsed: float,
    lat_sched: dict[str, list[float]],
    lat_send: dict[str, list[float]],
    errors: collections.Counter[str],
    cpu_at_start: float,
) -> dict[str, Any]:
    every = [x for v in lat_sched.values() for x in v]
    sent_all = [x for v in lat_send.values() for x in v]
    by_kind: collections.Counter[str] = collections.Counter()
    for kind, n in errors.items():
        by_kind[kind.partition(":")[0]] += n
    return {
        "requests": total,
        "ok": len(every),
        "errors": sum(errors.values()),
        "error_kinds": dict(errors),
        "achieved_rate": round(total / elapsed, 1),
        "p50_ms": round(pct(every, 50), 2),
        "p99_ms": round(pct(every, 99), 2),
        "max_ms": round(max(every, default=float("nan")), 2),
        "p50_send_ms": round(pct(sent_all, 50), 2),
        "p99_send_ms": round(pct(sent_all, 99), 2),
        "endpoints": {
            name: {
                "ok": len(lat_sched.get(name, [])),
                "errors": by_kind.get(name, 0),
                "p50_ms": round(pct(lat_sched.get(name, []), 50), 2),
                "p99_ms": round(pct(lat_sched.get(name, []), 99), 2),
            }
            for name in sorted({*lat_sched, *by_kind})
        },
        "client_cpu_ms_per_request": round(1000 * (time.process_time() - cpu_at_start) / total, 2),
    }


def one_run(
    tree: Tree, backend: str, workload: str, rate: float, args: argparse.Namespace
) -> dict[str, Any]:
    extra = ["--workers", str(args.workers)] if args.workers > 1 else []
    if backend == "sqlite":
        extra += ["--durability", args.durability]
    timeline: list[tuple[int, str, float, float]] | None = [] if args.timeline else None
    with fresh_store(backend, args.db) as (db, cwd):
        srv = Serve(db, *extra, tree=tree, cwd=cwd)
        try:
            marks = [srv.cpu_at_start]
            result = run_loop(
                drive(
                    srv.url,
                    workload,
                    rate,
                    args.duration,
                    args.drain,
                    args.warmup,
                    lambda: marks.append(srv.cpu_seconds()),
                    timeline,
                )
            )
            result["server_cpu_s"] = round(_settled_cpu(srv) - marks[-1], 2)
        finally:
            srv.stop()
    if timeline is not None:
        result["timeline"] = sorted(timeline)
    result["warmup_s"] = args.warmup
    return result


def _settled_cpu(srv: Serve, within: float = 30.0) -> float:
    """The server's CPU once it has stopped working (it may still be answering requests the
    client gave up on): what the run's requests cost it, all of them."""
    deadline = time.monotonic() + within
    last = srv.cpu_seconds()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = srv.cpu_seconds()
        if now - last < 0.02:
            return now
        last = now
    return last


def run_load(args: argparse.Namespace, trees: list[Tree], backends: list[str]) -> None:
    """Every (workload, rate) x backend x tree once per round, `--runs` rounds.

    With `--stop-after-fail` the rates are a ramp: each (workload, rate) gets all its rounds
    (backends and trees interleaved in each) before the next, and a backend and tree whose
    median p99 missed the limit, or that had errors, is not run at that workload's higher
    rates."""
    runs: dict[tuple[str, float, str, str], list[dict[str, Any]]] = {}
    loads: list[float] = []
    out: set[tuple[str, str, str]] = set()
    blocks = [[c] for c in args.configs] if args.stop_after_fail else [args.configs]
    for block in blocks:
        for n in range(args.runs):
            for workload, rate, limit in block:
                for backend in backends:
                    for tree in trees:
                        if (workload, backend, tree.label) in out:
                            continue
                        loads.append(os.getloadavg()[0])
                        r = one_run(tree, backend, workload, rate, args)
                        r["load"] = [loads[-1], os.getloadavg()[0]]
                        r["limit_ms"] = limit
                        runs.setdefault((workload, rate, backend, tree.label), []).append(r)
                        brief = {k: v for k, v in r.items() if k not in ("timeline", "endpoints")}
                        print(
                            f"{workload} {backend} {tree.label} {rate:g}/s run {n + 1}: "
                            f"{json.dumps(brief)}",
                            file=sys.stderr,
                            flush=True,
                        )
        for workload, rate, limit in block if args.stop_after_fail else []:
            for backend in backends:
                for tree in trees:
                    rs = runs.get((workload, rate, backend, tree.label))
                    if rs and (
                        any(r["errors"] for r in rs)
                        or statistics.median(r["p99_ms"] for r in rs) > limit
                    ):
                        out.add((workload, backend, tree.label))
    if args.timeline:
        with open(args.timeline, "w") as f:
            json.dump(
                [
                    {
                        "workload": w,
                        "rate": rt,
                        "backend": b,
                        "tree": t,
                        "run": i + 1,
                        "timeline": r["timeline"],
                    }
                    for (w, rt, b, t), rs in runs.items()
                    for i, r in enumerate(rs)
                ],
                f,
            )
    summary = summarise_load(runs, args)
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(load_tables(summary, [t.label for t in trees], args.durability))
    print(target_lines(summary, [t.label for t in trees]))
    print(f"\nload average (1 min) {min(loads):.1f} to {max(loads):.1f}")


def summarise_load(
    runs: dict[tuple[str, float, str, str], list[dict[str, Any]]], args: argparse.Namespace
) -> list[dict[str, Any]]:
    out = []
    keys = ("p50_ms", "p99_ms", "max_ms", "p50_send_ms", "p99_send_ms", "achieved_rate")
    for (workload, rate, backend, tree), rs in runs.items():
        requests = sum(r["requests"] for r in rs)
        names = sorted({n for r in rs for n in r["endpoints"]})
        out.append(
            {
                "workload": workload,
                "rate": rate,
                "backend": backend,
                "tree": tree,
                "workers": args.workers,
                "limit_ms": rs[0]["limit_ms"],
                "load_1min": _load_range(rs),
                "runs": len(rs),
                "requests": requests,
                "errors": sum(r["errors"] for r in rs),
                "server_cpu_ms_per_request": round(
                    statistics.median(1000 * r["server_cpu_s"] / r["requests"] for r in rs), 2
                ),
                "server_cpu_s": round(statistics.median(r["server_cpu_s"] for r in rs), 2),
                "client_cpu_ms_per_request": statistics.median(
                    r["client_cpu_ms_per_request"] for r in rs
                ),
                **{k: statistics.median(r[k] for r in rs) for k in keys},
                "endpoints": {
                    name: {
                        "ok": sum(r["endpoints"].get(name, {}).get("ok", 0) for r in rs),
                        "errors": sum(r["endpoints"].get(name, {}).get("errors", 0) for r in rs),
                        "p50_ms": statistics.median(
                            r["endpoints"][name]["p50_ms"] for r in rs if name in r["endpoints"]
                        ),
                        "p99_ms": statistics.median(
                            r["endpoints"][name]["p99_ms"] for r in rs if name in r["endpoints"]
                        ),
                    }
                    for name in names
                },
            }
        )
    return out


def _load_range(rs: list[dict[str, Any]]) -> list[float]:
    """The 1-minute load average seen at the starts and ends of these runs: [lowest, highest]."""
    seen = [x for r in rs for x in r["load"]]
    return [round(min(seen), 1), round(max(seen), 1)]


def run_single(args: argparse.Namespace, trees: list[Tree], backends: list[str]) -> None:
    """Each endpoint alone, one request at a time: `--runs` rounds over seed x backend x tree."""
    only = args.endpoints.split(",") if args.endpoints else None
    unknown = set(only or []) - set(SINGLE)
    if unknown:
        raise SystemExit(f"--endpoints: unknown {sorted(unknown)}; known: {', '.join(SINGLE)}")
    kw = {"n": args.requests, "warm": 20, "durability": args.durability, "only": only}
    runs: dict[tuple[int, str, str], list[dict[str, Any]]] = {}
    loads: list[float] = []
    for n in range(args.runs):
        for seed in args.seeds:
            for backend in backends:
                for tree in trees:
                    loads.append(os.getloadavg()[0])
                    r = single_run(tree, backend, seed=seed, **kw)
                    r["load"] = [loads[-1], os.getloadavg()[0]]
                    runs.setdefault((seed, backend, tree.label), []).append(r)
                    brief = {k: v["cpu_ms"] if isinstance(v, dict) else v for k, v in r.items()}
                    print(
                        f"single seed {seed} {backend} {tree.label} run {n + 1}: "
                        f"{json.dumps(brief)}",
                        file=sys.stderr,
                        flush=True,
                    )
    # Counting statements and profiling cost CPU: each gets a run of its own, not timed.
    extra: dict[tuple[int, str, str], dict[str, Any]] = {}
    for seed in args.seeds if args.statements or args.profile else []:
        for backend in backends:
            for tree in trees:
                if args.statements:
                    r = single_run(tree, backend, seed=seed, statements=True, **kw)
                    extra[(seed, backend, tree.label)] = r
                if args.profile:
                    single_run(tree, backend, seed=seed, profile=args.profile, **kw)
    summary = summarise_single(runs, extra)
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(single_tables(summary, [t.label for t in trees], LABELS, args.durability))
    print(f"\nload average (1 min) {min(loads):.1f} to {max(loads):.1f}")


def summarise_single(
    runs: dict[tuple[int, str, str], list[dict[str, Any]]],
    extra: dict[tuple[int, str, str], dict[str, Any]],
) -> list[dict[str, Any]]:
    out = []
    for (seed, backend, tree), rs in runs.items():
        traced = extra.get((seed, backend, tree), {})
        for name in [k for k in rs[0] if isinstance(rs[0][k], dict)]:
            cpu = [r[name]["cpu_ms"] for r in rs]
            row = {
                "seed": seed,
                "backend": backend,
                "tree": tree,
                "endpoint": name,
                "log_length": rs[0][name]["log_length"],
                "runs": len(rs),
                "cpu_ms": round(statistics.median(cpu), 2),
                "cpu_ms_runs": [round(c, 2) for c in cpu],
                "wall_ms": round(statistics.median(r[name]["wall_ms"] for r in rs), 2),
                "idle_cpu_ms_per_s": round(
                    statistics.median(r["idle_cpu_ms_per_s"] for r in rs), 1
                ),
                "load_1min": _load_range(rs),
            }
            if "statements" in traced.get(name, {}):
                row["statements"] = round(traced[name]["statements"], 1)
                row["statement_texts"] = traced[name]["statement_texts"]
            out.append(row)
    return out


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    ap.add_argument(
        "--db", help="SQLite path or postgresql:// DSN (default: a fresh temp file / schema)"
    )
    ap.add_argument(
        "--checkout",
        action="append",
        default=[],
        metavar="[LABEL=]DIR",
        help="also run the server of this checkout (its .venv's python); repeatable",
    )
    ap.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="[LABEL=]PATH",
        help="also run the server of this interpreter's plaudit; repeatable",
    )
    ap.add_argument("--label", help="this tree's name in the tables (default: its commit)")
    ap.add_argument("--workload", choices=["select-observe", "mixed"], default="select-observe")
    ap.add_argument("--rate", type=float, default=200.0, help="requests per second")
    ap.add_argument(
        "--rates",
        help="several rates, comma-separated (runs interleave them); the report names the "
        "highest that kept p99 <= --target-ms with no errors",
    )
    ap.add_argument(
        "--target-ms",
        type=float,
        default=None,
        help="p99 limit for --rates (default: 25 for mixed, 15 for select-observe)",
    )
    ap.add_argument(
        "--stop-after-fail",
        action="store_true",
        help="once a rate misses the p99 limit on a tree, run no higher rate there "
        "(on with --targets)",
    )
    ap.add_argument(
        "--targets",
        action="store_true",
        help="the issue's targets: select+observe at 300/s (p99 <= 15 ms), and the mixed "
        f"workload ramped over {','.join(f'{r:g}' for r in RAMP)} req/s: p99 <= 25 ms at "
        "200/s, and the highest rate that keeps it (moonshot: 1000)",
    )
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of load per run")
    ap.add_argument("--drain", type=float, default=10.0, help="max seconds to wait for stragglers")
    ap.add_argument(
        "--timeline",
        metavar="FILE",
        help="write every measured request of every run to FILE (JSON: workload, rate, "
        "backend, tree, run, and [number, endpoint, ms from its schedule, seconds into the "
        "run]), to see when the slow ones came",
    )
    ap.add_argument(
        "--warmup",
        type=float,
        default=0.0,
        help="seconds of the same load first, left out of the figures (a server's first "
        "requests open connections and load caches)",
    )
    ap.add_argument(
        "--durability",
        choices=["full", "normal"],
        default="full",
        help="SQLite synchronous mode of the server (`plaudit serve --durability`)",
    )
    ap.add_argument("--workers", type=int, default=1, help="`plaudit serve --workers`")
    ap.add_argument("--runs", type=int, default=1, help="rounds; medians are reported")
    single = ap.add_argument_group("--single: each endpoint alone, one request at a time")
    single.add_argument("--single", action="store_true")
    single.add_argument("--requests", type=int, default=300, help="measured per endpoint")
    single.add_argument(
        "--seed",
        default="50",
        help="select+observe+record+append rounds before measuring; several, comma-separated, "
        "measure the endpoints on logs of several lengths",
    )
    single.add_argument("--endpoints", help=f"comma-separated subset of {','.join(SINGLE)}")
    single.add_argument(
        "--statements",
        action="store_true",
        help="one more run per tree counting the SQL statements per request (not timed)",
    )
    single.add_argument(
        "--profile",
        metavar="DIR",
        help="one more run per tree (not timed), each endpoint's measured requests under "
        "py-spy; bench/http_profile.py DIR summarises them",
    )
    ap.add_argument("--json", action="store_true", help="print the raw results as JSON")
    args = ap.parse_args()
    rates = [float(x) for x in args.rates.split(",")] if args.rates else [args.rate]
    args.seeds = [int(x) for x in args.seed.split(",")]
    if args.targets:
        args.configs = [TARGETS[0], *(("mixed", r, TARGETS[1][2]) for r in RAMP)]
        args.stop_after_fail = True
    else:
        limit = args.target_ms or (25.0 if args.workload == "mixed" else 15.0)
        args.configs = [(args.workload, r, limit) for r in rates]
    return args


def main() -> None:
    # Stopped with SIGTERM, still stop the servers and drop the schemas (`finally` blocks).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args = parse_args()
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    trees = [Tree.this(args.label)]
    trees += [Tree.parse(c, checkout=True) for c in args.checkout]
    trees += [Tree.parse(p, checkout=False) for p in args.python]
    if len({t.label for t in trees}) != len(trees):
        raise SystemExit("two trees have the same label: name them, LABEL=PATH")
    if args.workers > 1 and len(trees) > 1:
        print("note: --workers needs a tree whose `plaudit serve` has it", file=sys.stderr)
    if args.single:
        run_single(args, trees, backends)
    else:
        run_load(args, trees, backends)


if __name__ == "__main__":
    main()
