"""CPU cost of the HTTP stack per request, in-process: no sockets, no client, no scheduler noise.

Calls the ASGI app that `plaudit serve` builds on loopback (every middleware, the routing, the
dependencies and the handler) straight from one event loop, `--requests` times per run, for a
read (`GET /v1/log/head`) and a guarded write (`POST /v1/log/append` with the token), and
reports the process CPU time per request. Comparing two versions of the code on a busy machine
is then meaningful where the load benchmark (`http_load.py`) only measures the machine:

    python bench/http_stack.py --runs 5
    PYTHONPATH=<other checkout>/src python bench/http_stack.py --runs 5   # interleave the two
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import statistics
import tempfile
import time
from typing import Any

from plaudit import Plaudit
from plaudit.server.app import create_app

TOKEN = "bench-token"


def _scope(method: str, path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8377"), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8377),
    }


async def _call(app: Any, scope: dict[str, Any], body: bytes) -> int:
    status = 0
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


async def _drive(app: Any, requests: int) -> dict[str, float]:
    read = _scope("GET", "/v1/log/head", [])
    write_headers = [
        (b"content-type", b"application/json"),
        (b"authorization", f"Bearer {TOKEN}".encode()),
    ]
    out: dict[str, float] = {}
    for name, scope, make_body in (
        ("read", read, lambda i: b""),
        (
            "write",
            _scope("POST", "/v1/log/append", write_headers),
            lambda i: json.dumps({"type": "bench.stack.v1", "payload": {"i": i}}).encode(),
        ),
    ):
        for i in range(50):  # warm up
            await _call(app, scope, make_body(-i - 1))
        started = time.process_time()
        for i in range(requests):
            status = await _call(app, scope, make_body(i))
            if status != 200:
                raise SystemExit(f"{name} request {i} answered {status}")
        out[f"{name}_us"] = (time.process_time() - started) / requests * 1e6
    return out


def one_run(requests: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, Plaudit.open(os.path.join(tmp, "b.db")) as p:
        kwargs: dict[str, Any] = {"token": TOKEN, "allowed_hosts": ["127.0.0.1", "localhost"]}
        if "host" in inspect.signature(create_app).parameters:
            kwargs["host"] = "127.0.0.1"
        app = create_app(p, **kwargs)
        return asyncio.run(_drive(app, requests))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=2000, help="requests of each kind per run")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    runs = [one_run(args.requests) for _ in range(args.runs)]
    summary = {
        k: {
            "median": round(statistics.median(r[k] for r in runs), 1),
            "runs": [round(r[k], 1) for r in runs],
        }
        for k in runs[0]
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
