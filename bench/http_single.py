"""Server CPU per request of each endpoint alone, one request at a time, on a fresh store.

The store is seeded first (arms registered, then `seed` select+observe pairs, ledger records
and appends), so the reads have something to read and every tree reads the same log. Then
each endpoint gets `warm` requests, and `n` more between two readings of the server's CPU
time (/proc, threads that ended included): the difference over `n` is its CPU per request,
background work the requests caused (checkpoints, reconciles) included. The CPU the idle
server spends per second is measured too, so a busy background shows. Requests go one after
another on one kept-alive connection (http.client: this side's CPU does not matter here).

Optionally, per endpoint, the statements the server sent (`statements=True`, a separate run:
counting costs CPU) and a py-spy profile (`profile=DIR`, also a separate run).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from http_mix import ARMS, SINGLE, Requests
from http_serve import Serve, Tree, fresh_store


class Client:
    def __init__(self, url: str) -> None:
        host, _, port = url.removeprefix("http://").partition(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=60)

    def call(self, method: str, path: str, body: Any) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {} if data is None else {"content-type": "application/json"}
        try:
            self.conn.request(method, path, body=data, headers=headers)
            r = self.conn.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # The server closed the kept-alive connection when it was idle (`--idle-timeout`)
            # before it read this request: send it again on a new one.
            self.conn.close()
            self.conn.request(method, path, body=data, headers=headers)
            r = self.conn.getresponse()
        raw = r.read()
        if r.status != 200:
            raise SystemExit(f"{method} {path}: HTTP {r.status}: {raw[:300]!r}")
        return json.loads(raw)


class Session:
    """One server, one client, and the request counter that keeps ids unique."""

    def __init__(self, srv: Serve, tag: str) -> None:
        self.srv, self.client, self.reqs, self.i = srv, Client(srv.url), Requests(tag), 0

    def send(self, name: str) -> None:
        self.i += 1
        method, path, body = self.reqs.request(name, self.i)
        self.reqs.answered(name, self.client.call(method, path, body))

    def seed(self, pairs: int) -> None:
        self.client.call("POST", "/v1/bandit/arms", {"arms": ARMS})
        for _ in range(pairs):
            self.send("select")
            self.send("observe")
            self.send("record")
            self.send("append")

    def measure(
        self, name: str, n: int, warm: int, statements: bool, profile: str | None = None
    ) -> dict[str, Any]:
        """`profile`: a py-spy record of the measured requests goes to this file."""
        for _ in range(warm):
            self.prepare(name)
            self.send(name)
        for _ in range(n):
            self.prepare(name)
        length = self.client.call("GET", "/v1/log/head", None)["length"]
        time.sleep(0.2)  # let work the preparation caused finish outside the window
        before = self.srv.statements() if statements else {}
        walls = []
        with _py_spy(self.srv.proc.pid, profile):
            cpu0 = self.srv.cpu_seconds()
            for _ in range(n):
                t = time.perf_counter()
                self.send(name)
                walls.append(time.perf_counter() - t)
            time.sleep(0.2)  # and work the requests left behind (checkpoints) finish inside it
            cpu = self.srv.cpu_seconds() - cpu0
        out: dict[str, Any] = {
            "log_length": length,
            "cpu_ms": 1000 * cpu / n,
            "wall_ms": 1000 * sorted(walls)[len(walls) // 2],
        }
        if statements:
            after = self.srv.statements()
            diff = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
            out["statements"] = sum(diff.values()) / n
            out["statement_texts"] = {
                k: round(v / n, 3) for k, v in sorted(diff.items(), key=lambda kv: -kv[1])
            }
        return out

    def prepare(self, name: str) -> None:
        """An observe needs a selection waiting: made before the CPU is read."""
        if name == "observe":
            self.send("select")

    def idle_cpu_ms_per_s(self, seconds: float = 2.0) -> float:
        cpu0 = self.srv.cpu_seconds()
        time.sleep(seconds)
        return 1000 * (self.srv.cpu_seconds() - cpu0) / seconds


def single_run(
    tree: Tree,
    backend: str,
    *,
    n: int,
    warm: int,
    seed: int,
    durability: str,
    statements: bool = False,
    profile: str | None = None,
    only: list[str] | None = None,
) -> dict[str, Any]:
    """One fresh store and server of `tree`: every endpoint's CPU per request."""
    extra = ["--durability", durability] if backend == "sqlite" else []
    with fresh_store(backend) as (db, cwd):
        srv = Serve(db, *extra, tree=tree, cwd=cwd, statements=statements)
        try:
            s = Session(srv, f"{tree.label}-{os.getpid()}-{time.monotonic_ns()}")
            s.seed(seed)
            out: dict[str, Any] = {"idle_cpu_ms_per_s": s.idle_cpu_ms_per_s()}
            for name in only or SINGLE:
                spy = None
                if profile is not None:
                    Path(profile).mkdir(parents=True, exist_ok=True)
                    spy = os.path.join(profile, f"{tree.label}-{backend}-{seed}-{name}.txt")
                out[name] = s.measure(name, n, warm, statements, spy)
        finally:
            srv.stop()
    return out


@contextlib.contextmanager
def _py_spy(pid: int, out: str | None) -> Any:
    """py-spy record (Python frames only, idle threads left out) around the block, into
    `out` (collapsed stacks: bench/http_profile.py summarises them)."""
    if out is None:
        yield
        return
    spy = subprocess.Popen(
        [_py_spy_bin(), "record", "--pid", str(pid), "--rate", "400", "--format", "raw", "-o", out],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)  # py-spy attaches
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        spy.wait(30)


def _py_spy_bin() -> str:
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else (shutil.which("py-spy") or "py-spy")
