"""The requests the HTTP benchmarks send: each endpoint's request, and the workloads mixing them.

Every request is built from its number alone (and, for an observe, a run selected earlier), so
two trees measured in the same benchmark get exactly the same requests in the same order.
Only routes and bodies that the release before log v2 (6064f19) and main both accept are used.
"""

from __future__ import annotations

import collections
import random
from typing import Any

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

#: The issue's mixed workload, per 40 requests: 30% single appends, 5% batches of 10, 15%
#: ledger records, 10% select, 10% observe, and the other 30% split over four reads.
MIXED = {
    "append": 12,
    "append10": 2,
    "record": 6,
    "select8": 4,
    "observe": 4,
    "tail": 3,
    "score": 3,
    "posteriors": 3,
    "head": 3,
}

#: name -> (method, path); the body comes from `Requests.body`.
ROUTES: dict[str, tuple[str, str]] = {
    "append": ("POST", "/v1/log/append"),
    "append10": ("POST", "/v1/log/append"),
    "record": ("POST", "/v1/ledger/record"),
    "select": ("POST", "/v1/bandit/select"),
    "select8": ("POST", "/v1/bandit/select"),
    "observe": ("POST", "/v1/bandit/observe"),
    "tail": ("GET", "/v1/log/tail?n=20"),
    "score": ("GET", "/v1/ledger/score"),
    "posteriors": ("GET", "/v1/bandit/posteriors"),
    "head": ("GET", "/v1/log/head"),
}

#: What the single-endpoint mode measures, in this order (writes interleave with the reads
#: of what they wrote only through the seeded store, so each read sees the same log length
#: on every tree).
SINGLE = ["head", "tail", "score", "posteriors", "select8", "select", "observe", "record"]
SINGLE += ["append", "append10"]

LABELS = {
    "append": "POST /v1/log/append (1 event)",
    "append10": "POST /v1/log/append (10 events)",
    "record": "POST /v1/ledger/record",
    "select": "POST /v1/bandit/select (32 registered arms)",
    "select8": "POST /v1/bandit/select (8 arms in the request)",
    "observe": "POST /v1/bandit/observe",
    "tail": "GET /v1/log/tail?n=20",
    "score": "GET /v1/ledger/score",
    "posteriors": "GET /v1/bandit/posteriors",
    "head": "GET /v1/log/head",
}


def mixed_order(block: int) -> list[str]:
    """The 40 requests of one block of the mixed workload, shuffled the same way every run."""
    names = [n for n, k in MIXED.items() for _ in range(k)]
    random.Random(block).shuffle(names)
    return names


class Requests:
    """Builds request bodies, and keeps the runs selected and not yet observed."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.selected: collections.deque[dict[str, Any]] = collections.deque()

    def name(self, workload: str, i: int) -> str:
        """The i-th request's endpoint. An observe with no selection waiting becomes a select."""
        if workload == "select-observe":
            name = "observe" if i % 2 else "select"
            return name if name != "observe" or self.selected else "select"
        if workload == "mixed":
            name = mixed_order(i // 40)[i % 40]
            return name if name != "observe" or self.selected else "select8"
        return workload

    def request(self, name: str, i: int) -> tuple[str, str, Any]:
        method, path = ROUTES[name]
        return method, path, self.body(name, i)

    def body(self, name: str, i: int) -> Any:
        if name == "append":
            return self.event(i)
        if name == "append10":
            return [self.event(i, k) for k in range(10)]
        if name == "record":
            return {"category": "successful_validation", "action": f"tests pass, change {i}"}
        if name in ("select", "select8"):
            body: dict[str, Any] = {
                "token_budget": 6000,
                "context": f"repo-{i % 4}",
                "seed": i,
                "session_id": f"load-{i // 200}",
            }
            if name == "select8":
                start = (i * 8) % len(ARMS)
                body["arms"] = [ARMS[(start + k) % len(ARMS)] for k in range(8)]
                body["token_budget"] = 2500
            return body
        if name == "observe":
            return self.observation()
        return None

    def event(self, i: int, k: int | None = None) -> dict[str, Any]:
        suffix = "" if k is None else f"-{k}"
        return {
            "type": "bench.load.v1",
            "id": f"{self.tag}-{i}{suffix}",
            "session_id": f"load-{i // 200}",
            "payload": {"n": i, "service": f"svc-{i % 7}", "ok": i % 5 != 0, "ms": 120 + i % 90},
        }

    def observation(self) -> dict[str, Any]:
        sel = self.selected.popleft()
        included = sel.get("included", [])
        tools = [a.split(":", 2)[2] for a in included if a.startswith("tool:")][:3]
        return {
            "run_id": sel["run_id"],
            "output_text": "used " + " and ".join(tools or ["nothing"]),
            "tool_calls": [{"name": t} for t in tools],
            "usage_tokens": int(sel.get("used_tokens", 0)) + 900,
        }

    def answered(self, name: str, data: Any) -> None:
        if name in ("select", "select8"):
            self.selected.append(data)
