"""Shared helpers for the benchmarks: realistic router events, medians, child-process timing."""

from __future__ import annotations

import hashlib
import json
import random
import statistics
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec

REPO = Path(__file__).resolve().parent.parent

TASKS = (
    "ai:flow/refactor",
    "ai:flow/dev-check",
    "ai:flow/deploy",
    "ai:flow/test-fix",
    "ai:flow/review",
    "ai:flow/docs",
)
INTENTS = (
    "fix failing tests",
    "ship the release",
    "clean up the router module",
    "why is CI red",
    "add a feature flag for the new importer",
)
OUTCOMES = ("success", "partial", "failure", "wasted")


def router_payloads(decision: int, rng: random.Random) -> list[tuple[str, dict[str, Any]]]:
    """The decision, (sometimes) override and outcome payloads a Flow router emits."""
    did = f"d-{decision:08d}"
    chosen = rng.choice(TASKS)
    out: list[tuple[str, dict[str, Any]]] = [
        (
            "flow.router.decision.v1",
            {
                "decision_id": did,
                "session_id": f"sess-{decision // 40}",
                "chosen_task": chosen,
                "confidence": round(rng.random(), 3),
                "user_intent": rng.choice(INTENTS),
                "context": {
                    "changed_files": rng.randint(0, 30),
                    "ci_status": rng.choice(("passing", "failing", "unknown")),
                    "failing_tests": rng.randint(0, 5),
                },
                "candidates": rng.sample(TASKS, 3),
                "source": "flow",
            },
        )
    ]
    override = None
    if rng.random() < 0.15:
        override = rng.choice(TASKS)
        out.append(
            (
                "flow.router.override.v1",
                {
                    "decision_id": did,
                    "original_task": chosen,
                    "override_task": override,
                    "reason": "user picked another task",
                },
            )
        )
    outcome: dict[str, Any] = {
        "decision_id": did,
        "outcome": rng.choice(OUTCOMES),
        "task_executed": override or chosen,
        "time_to_resolution_ms": rng.randint(1_000, 600_000),
    }
    out.append(("flow.router.outcome.v1", outcome))
    return out


def router_events(n: int, *, seed: int = 7, prefix: str = "e") -> list[dict[str, Any]]:
    """`n` event mappings as `EventLog.append_batch` takes them."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    d = 0
    while len(events) < n:
        for kind, payload in router_payloads(d, rng):
            events.append(
                {
                    "id": f"{prefix}-{len(events)}",
                    "type": kind,
                    "ts_ms": 1_763_700_000_000 + len(events) * 37,
                    "session_id": f"sess-{d // 40}",
                    "source": "flow",
                    "payload": payload,
                }
            )
        d += 1
    return events[:n]


def seq_mem_lines(n: int, *, seed: int = 11) -> Iterator[bytes]:
    """`n` seq_mem.jsonl rows (ClickHouse JSONEachRow, subject JSON-encoded), with newlines."""
    rng = random.Random(seed)
    enc = msgspec.json.Encoder()
    made = 0
    d = 0
    while made < n:
        for kind, payload in router_payloads(d, rng):
            if made >= n:
                break
            subject = json.dumps(payload, separators=(",", ":"))
            row = {
                "ts_ms": 1_763_700_000_000 + made * 37,
                "dur_us": rng.randint(40, 900),
                "ok": True,
                "session_id": f"sess-{d // 40}",
                "event_id": f"{payload['decision_id']}:{kind.split('.')[2]}",
                "content_hash": hashlib.sha256(subject.encode()).hexdigest(),
                "name": kind,
                "subject": subject,
            }
            yield enc.encode(row) + b"\n"
            made += 1
        d += 1


def write_seq_mem(path: Path, n: int) -> Path:
    with open(path, "wb") as f:
        buf: list[bytes] = []
        for line in seq_mem_lines(n):
            buf.append(line)
            if len(buf) >= 10_000:
                f.write(b"".join(buf))
                buf.clear()
        f.write(b"".join(buf))
    return path


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of process `pid` and its direct children (Linux /proc)."""
    import glob
    import os

    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        if stat == f"/proc/{pid}/stat" or int(fields[1]) == pid:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def run_child(code: str, *args: str) -> dict[str, Any]:
    """Run `code` in a fresh interpreter; it prints one JSON object as its last line."""
    out = subprocess.run(
        [sys.executable, "-c", code, *args], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
