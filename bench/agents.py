"""Agents' surfaces: MCP tool calls over stdio and HTTP beside the plain HTTP API, and trace
ingest (spans per second into observations, server CPU per span) beside plain observes.

    .venv/bin/python bench/agents.py                   # both parts, 5 interleaved rounds
    .venv/bin/python bench/agents.py --part mcp --calls 300
    .venv/bin/python bench/agents.py --part ingest --runs 50 --requests 20

Latencies are per call, sequential, one client (an agent's loop): p50 and p99 per round, then
the median over rounds. CPU is per call: the client's (this process) and the server's (the
`plaudit serve` or `plaudit mcp` process, from /proc). Transports run in a rotating order each
round so that drift (load from other work on the machine) falls on each alike.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import percentile, proc_cpu, table
from http_load import Serve

ARMS = [{"id": f"tool:bench:t{i:02d}", "tokens": 100 + 10 * i} for i in range(20)]
SELECT = {"arms": ARMS, "token_budget": 1500, "context": "bench"}
RECORD = {"category": "successful_validation", "action": "bench call"}
ENTRY = "import sys; from plaudit.cli import main; sys.exit(main())"


def stdio_pid() -> int:
    """The `plaudit mcp` child of this process."""
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        pid = int(cmdline.split("/")[2])
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rpartition(")")[2].split()[1])
            with open(cmdline, "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if ppid == os.getpid() and b"mcp" in args:
            return pid
    raise SystemExit("the plaudit mcp process was not found")


Call = Callable[[str, dict[str, Any]], Awaitable[Any]]


async def measure(call: Call, tool: str, args: dict[str, Any], n: int, server_pid: int) -> dict:
    for _ in range(5):  # warm up: first calls build caches
        await call(tool, args)
    latencies = []
    c0, s0 = time.process_time(), proc_cpu(server_pid)
    for _ in range(n):
        t = time.perf_counter()
        await call(tool, args)
        latencies.append((time.perf_counter() - t) * 1e3)
    c1, s1 = time.process_time(), proc_cpu(server_pid)
    return {
        "p50": percentile(latencies, 50),
        "p99": percentile(latencies, 99),
        "client_cpu_us": (c1 - c0) / n * 1e6,
        "server_cpu_us": (s1 - s0) / n * 1e6,
    }


def mcp_call(client: Any) -> Call:
    async def call(tool: str, args: dict[str, Any]) -> Any:
        r = await client.call_tool(tool, args)
        if r.is_error:
            raise SystemExit(f"{tool}: {r.content[0].text}")
        return r

    return call


def api_call(http: Any, url: str) -> Call:
    paths = {"choose_context": "/v1/bandit/select", "record_reward": "/v1/ledger/record"}

    async def call(tool: str, args: dict[str, Any]) -> Any:
        r = await http.post(url + paths[tool], json=args)
        r.raise_for_status()
        return r

    return call


async def mcp_round(serve: Serve, db: str, n: int, order: list[str]) -> dict[tuple[str, str], dict]:
    from mcp import Client, StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    out: dict[tuple[str, str], dict] = {}
    stdio = StdioServerParameters(command=sys.executable, args=["-c", ENTRY, "mcp", "--db", db])
    async with (
        httpx2.AsyncClient(timeout=30) as http,
        Client(streamable_http_client(f"{serve.url}/mcp", http_client=http)) as over_http,
        Client(stdio) as over_stdio,
    ):
        calls = {
            "HTTP API": (api_call(http, serve.url), serve.proc.pid),
            "MCP over HTTP": (mcp_call(over_http), serve.proc.pid),
            "MCP over stdio": (mcp_call(over_stdio), stdio_pid()),
        }
        for name in order:
            call, pid = calls[name]
            for tool, args in (("choose_context", SELECT), ("record_reward", RECORD)):
                out[(name, tool)] = await measure(call, tool, args, n, pid)
    return out


def mcp_part(args: argparse.Namespace) -> str:
    with tempfile.TemporaryDirectory() as d:
        db = os.path.join(d, "bench.db")
        serve = Serve(db)
        try:
            names = ["HTTP API", "MCP over HTTP", "MCP over stdio"]
            rounds = []
            for r in range(args.rounds):
                order = names[r % 3 :] + names[: r % 3]
                rounds.append(anyio.run(mcp_round, serve, db, args.calls, order))
                print(f"round {r + 1}: {_loadavg()}", file=sys.stderr)
        finally:
            serve.stop()
    rows = []
    for tool in ("choose_context", "record_reward"):
        base = statistics.median(rd[("HTTP API", tool)]["p50"] for rd in rounds)
        for name in names:
            cells = [rd[(name, tool)] for rd in rounds]
            m = {k: statistics.median(c[k] for c in cells) for k in cells[0]}
            rows.append(
                [
                    tool,
                    name,
                    f"{m['p50']:.2f}",
                    f"{m['p99']:.2f}",
                    f"{m['p50'] / base:.2f}x",
                    f"{m['client_cpu_us']:.0f}",
                    f"{m['server_cpu_us']:.0f}",
                ]
            )
    head = ["call", "transport", "p50 ms", "p99 ms", "p50 / HTTP API"]
    head += ["client CPU µs", "server CPU µs"]
    return table(head, rows)


# -- trace ingest ------------------------------------------------------------------------------


def payload(run_ids: list[str], seed: int) -> bytes:
    """One OTLP protobuf request: per run, an agent span tagged with the run, three model
    calls (GenAI structured output) and two tool spans under it."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

    def kv(key: str, value: Any) -> KeyValue:
        if isinstance(value, int):
            return KeyValue(key=key, value=AnyValue(int_value=value))
        return KeyValue(key=key, value=AnyValue(string_value=value))

    spans = []
    now = time.time_ns()
    for n, run_id in enumerate(run_ids):
        trace = (seed * 1_000_003 + n + 1).to_bytes(16, "big")
        root = (n + 1).to_bytes(8, "big")

        def span(
            i: int, name: str, attrs: dict[str, Any], trace: bytes = trace, n: int = n
        ) -> Span:
            return Span(
                trace_id=trace,
                span_id=(1000 * (n + 1) + i).to_bytes(8, "big"),
                parent_span_id=(n + 1).to_bytes(8, "big"),
                name=name,
                start_time_unix_nano=now + i * 1000,
                end_time_unix_nano=now + i * 1000 + 500,
                attributes=[kv(k, v) for k, v in attrs.items()],
            )

        text = f"Used tool:bench:t{n % 20:02d} and looked at the notes."
        output = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": text}]}])
        for i in range(3):
            chat = {
                "gen_ai.operation.name": "chat",
                "gen_ai.output.messages": output,
                "gen_ai.usage.input_tokens": 900,
                "gen_ai.usage.output_tokens": 80,
            }
            spans.append(span(i + 1, "chat", chat))
        for i in range(2):
            tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": f"t{i:02d}"}
            spans.append(span(i + 10, "execute_tool", tool))
        agent = Span(
            trace_id=trace,
            span_id=root,
            name="agent",
            start_time_unix_nano=now,
            end_time_unix_nano=now + 20_000,
            attributes=[kv("plaudit.run_id", run_id), kv("gen_ai.operation.name", "invoke_agent")],
        )
        spans.append(agent)
    request = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]
    )
    return request.SerializeToString()


def ingest_round(serve: Serve, args: argparse.Namespace, r: int, order: list[str]) -> dict:
    from plaudit import Plaudit

    total = args.runs * args.requests
    with Plaudit.open(serve.db) as p:

        def runs() -> list[str]:
            return [p.bandit.select(ARMS, token_budget=1500, seed=i).run_id for i in range(total)]

        ingest_runs, api_runs = runs(), runs()
    bodies = [
        payload(ingest_runs[i * args.runs : (i + 1) * args.runs], seed=r * 10_000 + i)
        for i in range(args.requests)
    ]
    out = {}
    headers = {"Content-Type": "application/x-protobuf"}
    with httpx2.Client(timeout=60) as http:
        for name in order:
            s0, t0 = proc_cpu(serve.proc.pid), time.perf_counter()
            if name == "trace ingest":
                for body in bodies:
                    r = http.post(f"{serve.url}/v1/traces", content=body, headers=headers)
                    r.raise_for_status()
                spans = total * 6
            else:  # the same observations, one POST /v1/bandit/observe per run
                for n, run_id in enumerate(api_runs):
                    text = f"Used tool:bench:t{n % 20:02d} and looked at the notes."
                    obs = {
                        "run_id": run_id,
                        "output_text": "\n".join([text] * 3),
                        "tool_calls": [{"name": "t00"}, {"name": "t01"}],
                        "usage_tokens": 2940,
                    }
                    http.post(f"{serve.url}/v1/bandit/observe", json=obs).raise_for_status()
                spans = 0
            wall, cpu = time.perf_counter() - t0, proc_cpu(serve.proc.pid) - s0
            out[name] = {"wall": wall, "cpu": cpu, "spans": spans, "runs": total}
    with Plaudit.open(serve.db) as p:
        observed = sum(p.bandit.run(i)["observation"] is not None for i in ingest_runs[:20])
    if observed != 20:
        raise SystemExit(f"trace ingest observed {observed} of 20 sampled runs")
    return out


def ingest_part(args: argparse.Namespace) -> str:
    with tempfile.TemporaryDirectory() as d:
        db = os.path.join(d, "bench.db")
        serve = Serve(db)
        serve.db = db  # type: ignore[attr-defined]
        try:
            names = ["trace ingest", "POST /v1/bandit/observe"]
            rounds = []
            for r in range(args.rounds):
                rounds.append(ingest_round(serve, args, r, names if r % 2 == 0 else names[::-1]))
                print(f"round {r + 1}: {_loadavg()}", file=sys.stderr)
        finally:
            serve.stop()
    rows = []
    for name in ("trace ingest", "POST /v1/bandit/observe"):
        runs_s = statistics.median(rd[name]["runs"] / rd[name]["wall"] for rd in rounds)
        cpu_run = statistics.median(rd[name]["cpu"] / rd[name]["runs"] * 1e6 for rd in rounds)
        if name == "trace ingest":
            spans_s = statistics.median(rd[name]["spans"] / rd[name]["wall"] for rd in rounds)
            cpu_span = statistics.median(rd[name]["cpu"] / rd[name]["spans"] * 1e6 for rd in rounds)
            extra = [f"{spans_s:,.0f}", f"{cpu_span:,.0f}"]
        else:
            extra = ["-", "-"]
        rows.append([name, *extra, f"{runs_s:,.0f}", f"{cpu_run:,.0f}"])
    head = ["path", "spans/s", "server CPU µs/span", "observations/s", "server CPU µs/observation"]
    note = (
        f"{args.requests} requests of {args.runs} runs x 6 spans (agent, 3 chat, 2 tools) per "
        "round; the reference makes the same observations with one POST /v1/bandit/observe each."
    )
    return table(head, rows) + "\n\n" + note


def _loadavg() -> str:
    with open("/proc/loadavg") as f:
        return "load " + " ".join(f.read().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["mcp", "ingest", "all"], default="all")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300, help="calls per tool per round (mcp)")
    parser.add_argument("--runs", type=int, default=50, help="runs per request (ingest)")
    parser.add_argument("--requests", type=int, default=20, help="requests per round (ingest)")
    args = parser.parse_args()
    print(f"start: {_loadavg()}", file=sys.stderr)
    if args.part in ("mcp", "all"):
        print(mcp_part(args))
        print()
    if args.part in ("ingest", "all"):
        print(ingest_part(args))
    print(f"\nend: {_loadavg()}")


if __name__ == "__main__":
    main()
