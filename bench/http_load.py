"""Load benchmark: select + observe against a real `plaudit serve`, open loop, on loopback.

Requests fire on a fixed clock (200/s by default) whatever the server's replies do, alternating
`POST /v1/bandit/select` and `POST /v1/bandit/observe` (each observe reports the oldest run that
was selected and not yet observed). Latency is measured from the moment a request was
*scheduled*, so a server that falls behind cannot hide it (no coordinated omission); the time
from the actual send is reported too.

The load generator shares the machine with the server, so it is kept lean: kept-alive raw
HTTP/1.1 connections on uvloop, msgspec for JSON (`Connection`). Its CPU per request is
reported beside the server's, which sums the server's processes (`--workers` included).

    python bench/http_load.py                      # SQLite, then PostgreSQL
    python bench/http_load.py --backend sqlite --runs 3 --duration 60
    python bench/http_load.py --workers 2          # `plaudit serve --workers 2`
    python bench/http_load.py --warmup 2           # steady state: the first 2 s not counted
    python bench/http_load.py --timeline t.json    # when each slow request came

The PostgreSQL run uses the schema `bench_http` and drops it afterwards. Run time is bounded:
`duration` plus at most `--drain` seconds for replies still in flight (then they count as errors).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
import msgspec

from common import proc_cpu

REPO = Path(__file__).resolve().parent.parent
CONNECTIONS = 16
PG_DEFAULT = "postgresql://127.0.0.1:5432/test?schema=bench_http"

ARMS: list[dict[str, Any]] = [
    *(
        {"id": f"tool:exec:{n}", "tokens": 300 + 40 * i}
        for i, n in enumerate(
            [
                "Bash",
                "Read",
                "Write",
                "Edit",
                "Grep",
                "Glob",
                "WebSearch",
                "WebFetch",
                "Task",
                "Todo",
            ]
        )
    ),
    *({"id": f"skill:dev:skill{i}", "tokens": 800 + 50 * i} for i in range(8)),
    *(
        {
            "id": f"memory:notes:m{i}",
            "tokens": 120 + 10 * i,
            "content": f"remember that service {i} deploys through the blue-green pipeline",
        }
        for i in range(8)
    ),
    *({"id": f"section:prompt:s{i}", "tokens": 600 + 25 * i} for i in range(6)),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


class Serve:
    """`plaudit serve` in a child process, stopped (and its output kept) on exit."""

    def __init__(self, db: str, *extra: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - lives as long as the server
        code = "import sys; from plaudit.cli import main; sys.exit(main())"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                code,
                "serve",
                "--db",
                db,
                "--port",
                str(self.port),
                "--log-level",
                "warning",
                *extra,
            ],
            cwd=REPO,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.cpu_at_start = 0.0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"plaudit serve exited:\n{self.output()}")
            try:
                if httpx2.get(f"{self.url}/v1/health", timeout=1).status_code == 200:
                    self.cpu_at_start = self.cpu_seconds()
                    return
            except httpx2.HTTPError:
                time.sleep(0.1)
        self.stop()
        raise SystemExit("plaudit serve did not start within 30 s")

    def cpu_seconds(self) -> float:
        """User + system CPU the server has used so far, its workers included (Linux: /proc),
        else NaN."""
        return proc_cpu(self.proc.pid) or float("nan")

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Connection:
    """One kept-alive HTTP/1.1 connection, as lean as a load generator can be.

    The generator shares the machine's two cores with the server it measures, so every CPU
    millisecond it spends is one the server does not get. A general client (httpx) spent about
    3.9 CPU-ms per request here, as much as the server; this one speaks only what the benchmark
    needs (a JSON POST, a Content-Length reply) and spends a fraction of that.
    """

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.writer is None or self.writer.is_closing():
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        self.writer.write(
            b"POST %s HTTP/1.1\r\nhost: %s\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n%s" % (path.encode(), self.host.encode(), len(body), body)
        )
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = None
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if length is None:
                raise ConnectionError("reply without content-length")
            data = await self.reader.readexactly(length)
        except BaseException:
            self.writer.close()
            self.writer = None
            raise
        if b"connection: close" in head.lower():
            self.writer.close()
            self.writer = None
        return status, data


class Pool:
    """Connections handed out one request at a time; a request waits when all are busy.

    Waiting here still counts: latency runs from the moment a request was scheduled.
    """

    def __init__(self, url: str, size: int) -> None:
        host, _, port = url.removeprefix("http://").partition(":")
        self.idle: asyncio.Queue[Connection] = asyncio.Queue()
        for _ in range(size):
            self.idle.put_nowait(Connection(host, int(port)))

    async def post(self, path: str, payload: dict[str, Any], timeout: float) -> tuple[int, Any]:
        conn = await self.idle.get()
        try:  # a failed or timed-out request closes its own connection (`Connection.post`)
            status, data = await asyncio.wait_for(
                conn.post(path, msgspec.json.encode(payload)), timeout
            )
        finally:
            self.idle.put_nowait(conn)
        return status, msgspec.json.decode(data) if status == 200 else data


async def drive(
    url: str,
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
    selected: collections.deque[tuple[str, dict[str, Any]]] = collections.deque()
    lat_sched: dict[str, list[float]] = {"select": [], "observe": []}
    lat_send: dict[str, list[float]] = {"select": [], "observe": []}
    errors: collections.Counter[str] = collections.Counter()
    pool = Pool(url, CONNECTIONS)
    cpu_at_start = time.process_time()
    status, _ = await pool.post("/v1/bandit/arms", {"arms": ARMS}, 30)
    if status != 200:
        raise SystemExit(f"registering the arms failed: HTTP {status}")

    async def one(i: int, scheduled: float) -> None:
        kind = "select"
        if i % 2 and selected:
            kind = "observe"
            run_id, sel = selected.popleft()
            included = sel.get("included", [])
            tools = [a.split(":", 2)[2] for a in included if a.startswith("tool:")][:3]
            body: dict[str, Any] = {
                "run_id": run_id,
                "output_text": "used " + " and ".join(tools or ["nothing"]),
                "tool_calls": [{"name": t} for t in tools],
                "usage_tokens": int(sel.get("used_tokens", 0)) + 900,
            }
        else:
            body = {
                "token_budget": 6000,
                "context": f"repo-{i % 4}",
                "seed": i,
                "session_id": f"load-{i // 200}",
            }
        sent = time.perf_counter()
        try:
            status, data = await pool.post(f"/v1/bandit/{kind}", body, 10)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
            errors[f"{kind}: {type(exc).__name__}"] += 1
            return
        done = time.perf_counter()
        if status != 200:
            errors[f"{kind}: HTTP {status}"] += 1
            return
        if kind == "select":
            selected.append((data["run_id"], data))
        if i < skip:
            return
        lat_sched[kind].append((done - scheduled) * 1000)
        lat_send[kind].append((done - sent) * 1000)
        if timeline is not None:  # (request number, kind, ms from schedule, seconds into run)
            timeline.append((i, kind, round((done - scheduled) * 1000, 2), round(sent - start, 3)))

    tasks: set[asyncio.Task[None]] = set()
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
        t = asyncio.create_task(one(i, scheduled))
        tasks.add(t)
        t.add_done_callback(tasks.discard)
    elapsed = time.perf_counter() - start_measured
    if tasks:
        _, pending = await asyncio.wait(set(tasks), timeout=drain)
        for t in pending:
            t.cancel()
        errors["unanswered after drain"] += len(pending)
    every = lat_sched["select"] + lat_sched["observe"]
    sent_all = lat_send["select"] + lat_send["observe"]
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
        "select_p99_ms": round(pct(lat_sched["select"], 99), 2),
        "observe_p99_ms": round(pct(lat_sched["observe"], 99), 2),
        "client_cpu_ms_per_request": round(1000 * (time.process_time() - cpu_at_start) / total, 2),
    }


def run_loop(coro: Any) -> Any:
    """uvloop when installed (the server's own loop; cheaper per request than asyncio's)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def drop_pg_schema(dsn: str) -> None:
    import psycopg

    from plaudit.config import split_schema

    base, schema = split_schema(dsn)
    if schema:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def one_run(backend: str, db: str | None, args: argparse.Namespace) -> dict[str, Any]:
    tmp = None
    if backend == "sqlite":
        tmp = tempfile.TemporaryDirectory()
        db = db or os.path.join(tmp.name, "bench.db")
    else:
        db = db or PG_DEFAULT
        drop_pg_schema(db)
    extra = ["--workers", str(args.workers)]
    if backend == "sqlite":
        extra += ["--durability", args.durability]
    srv = Serve(db, *extra)
    timeline: list[tuple[int, str, float, float]] | None = [] if args.timeline else None
    try:
        marks = [srv.cpu_at_start]
        result = run_loop(
            drive(
                srv.url,
                args.rate,
                args.duration,
                args.drain,
                args.warmup,
                lambda: marks.append(srv.cpu_seconds()),
                timeline,
            )
        )
        if args.timeline:
            result["timeline"] = sorted(timeline or [])
        result["server_cpu_s"] = round(srv.cpu_seconds() - marks[-1], 2)
        result["warmup_s"] = args.warmup
    finally:
        srv.stop()
        if backend == "postgres":
            drop_pg_schema(db)
        if tmp is not None:
            tmp.cleanup()
    return {"backend": backend, **result}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    ap.add_argument(
        "--db", help="SQLite path or postgresql:// DSN (default: temp file / bench_http)"
    )
    ap.add_argument("--rate", type=float, default=200.0, help="requests per second")
    ap.add_argument(
        "--rates",
        help="several rates, comma-separated (runs interleave them); the report names the "
        "highest that kept p99 <= --target-ms with no errors",
    )
    ap.add_argument("--target-ms", type=float, default=15.0)
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of load per run")
    ap.add_argument("--drain", type=float, default=10.0, help="max seconds to wait for stragglers")
    ap.add_argument(
        "--timeline",
        metavar="FILE",
        help="write every measured request of every run to FILE (JSON: backend, rate, run, "
        "and [number, kind, ms from its schedule, seconds into the run]), to see when the slow "
        "ones came",
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
    ap.add_argument(
        "--workers",
        type=int,
        default=1,
        help="server processes (`plaudit serve --workers`)",
    )
    ap.add_argument("--runs", type=int, default=1, help="runs per backend; medians are reported")
    ap.add_argument("--json", action="store_true", help="print the raw results as JSON")
    args = ap.parse_args()
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    rates = [float(x) for x in args.rates.split(",")] if args.rates else [args.rate]
    runs: dict[tuple[str, float], list[dict[str, Any]]] = {}
    loads: list[float] = []
    for n in range(args.runs):
        for rate in rates:
            for backend in backends:
                args.rate = rate
                loads.append(os.getloadavg()[0])
                r = one_run(backend, args.db, args)
                runs.setdefault((backend, rate), []).append(r)
                print(
                    f"{backend} {rate:g}/s run {n + 1}: "
                    f"{json.dumps({k: v for k, v in r.items() if k != 'timeline'})}",
                    file=sys.stderr,
                    flush=True,
                )
    summary = []
    for (backend, rate), rs in runs.items():
        med = {
            k: statistics.median(r[k] for r in rs)
            for k in (
                "p50_ms",
                "p99_ms",
                "max_ms",
                "p50_send_ms",
                "p99_send_ms",
                "achieved_rate",
                "server_cpu_s",
                "client_cpu_ms_per_request",
            )
        }
        requests = sum(r["requests"] for r in rs)
        label = f"sqlite ({args.durability})" if backend == "sqlite" else backend
        label += f", {args.workers} workers" if args.workers > 1 else ""
        summary.append(
            {
                "backend": label,
                "rate": rate,
                "runs": len(rs),
                "errors": sum(r["errors"] for r in rs),
                "requests": requests,
                "server_cpu_ms_per_request": round(
                    1000 * sum(r["server_cpu_s"] for r in rs) / max(requests, 1), 2
                ),
                **med,
            }
        )
    if args.timeline:
        with open(args.timeline, "w") as f:
            json.dump(
                [
                    {"backend": b, "rate": rate, "run": n + 1, "timeline": r["timeline"]}
                    for (b, rate), rs in runs.items()
                    for n, r in enumerate(rs)
                ],
                f,
            )
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(
        "| backend | offered req/s | runs | requests | errors | achieved req/s | p50 ms "
        "| p99 ms | max ms | p99 from send ms | server CPU ms/request | client CPU ms/request |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in summary:
        print(
            f"| {s['backend']} | {s['rate']:g} | {s['runs']} | {s['requests']} | {s['errors']} "
            f"| {s['achieved_rate']} | {s['p50_ms']} | {s['p99_ms']} | {s['max_ms']} "
            f"| {s['p99_send_ms']} | {s['server_cpu_ms_per_request']} "
            f"| {s['client_cpu_ms_per_request']} |"
        )
    for label in dict.fromkeys(s["backend"] for s in summary):
        ok = [
            s["rate"]
            for s in summary
            if s["backend"] == label and s["errors"] == 0 and s["p99_ms"] <= args.target_ms
        ]
        best = f"{max(ok):g} req/s" if ok else "none of the rates tried"
        print(f"\n{label}: highest rate with p99 <= {args.target_ms:g} ms and no errors: {best}")
    print(f"load average {min(loads):.1f} to {max(loads):.1f}")


if __name__ == "__main__":
    main()
