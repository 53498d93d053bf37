"""A `plaudit serve` from any checkout, for the HTTP benchmarks: start it, read its CPU, stop it.

A `Tree` names an interpreter whose installed plaudit runs the server, so one benchmark can
measure this checkout and an older release (its own venv) in the same run, interleaved. The
server runs in a temporary working directory, so no tree's local configuration or files leak
into the figures, and nothing is written into a checkout.

With `statements=True` the server counts the SQL it sends (bench/http_trace.py, loaded before
plaudit) and answers the counts on a Unix socket: `Serve.statements()`.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PG_DEFAULT = "postgresql://127.0.0.1:5432/test?schema=bench_http"
PG_BASE = "postgresql://127.0.0.1:5432/test"
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Tree:
    """Where a server's plaudit comes from: `python` imports it (an editable install)."""

    label: str
    python: str

    @classmethod
    def parse(cls, spec: str, *, checkout: bool) -> Tree:
        """`[LABEL=]PATH`: a checkout with a `.venv` (checkout=True) or an interpreter."""
        label, sep, path = spec.partition("=")
        if not sep:
            label, path = "", spec
        p = Path(path).expanduser().resolve()
        if checkout:
            python = p / ".venv" / "bin" / "python"
            if not python.exists():
                raise SystemExit(f"--checkout {path}: no .venv/bin/python in it")
            label = label or _commit(p) or p.name
        else:
            python = p
            if not python.exists():
                raise SystemExit(f"--python {path}: no such interpreter")
            label = label or p.parent.parent.name
        return cls(label, str(python))

    @classmethod
    def this(cls, label: str | None = None) -> Tree:
        return cls(label or _commit(REPO) or "this", sys.executable)


def _commit(path: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return ""
    return out.stdout.strip()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def drop_pg_schema(dsn: str) -> None:
    import psycopg

    from plaudit.config import split_schema

    base, schema = split_schema(dsn)
    if schema:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextlib.contextmanager
def fresh_store(backend: str, db: str | None = None) -> Iterator[tuple[str, str]]:
    """(db, working directory): a new SQLite file or a new PostgreSQL schema, removed after."""
    with tempfile.TemporaryDirectory(prefix="plaudit-http-") as tmp:
        if backend == "sqlite":
            yield db or os.path.join(tmp, "bench.db"), tmp
            return
        db = db or f"{PG_BASE}?schema=bench_http_{uuid.uuid4().hex[:10]}"
        drop_pg_schema(db)
        try:
            yield db, tmp
        finally:
            drop_pg_schema(db)


_BOOT = """import sys
{trace}from plaudit.cli import main
sys.exit(main())
"""
_TRACE = "sys.path.insert(0, {bench!r}); import http_trace; http_trace.install({sock!r})\n"


class Serve:
    """`plaudit serve` of `tree` in a child process, stopped (and its output kept) on exit."""

    def __init__(
        self,
        db: str,
        *extra: str,
        tree: Tree | None = None,
        cwd: str | None = None,
        statements: bool = False,
    ) -> None:
        self.tree = tree or Tree.this()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - lives as long as the server
        self.control = ""
        trace = ""
        if statements:
            self.control = os.path.join(tempfile.gettempdir(), f"plaudit-trace-{uuid.uuid4().hex}")
            trace = _TRACE.format(bench=str(BENCH), sock=self.control)
        args = ["serve", "--db", db, "--port", str(self.port), "--log-level", "warning", *extra]
        self.proc = subprocess.Popen(
            [self.tree.python, "-c", _BOOT.format(trace=trace), *args],
            cwd=cwd or REPO,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.forks = "--workers" in extra
        self.cpu_at_start = 0.0
        self._wait_healthy(30)
        self.cpu_at_start = self.cpu_seconds()

    def _wait_healthy(self, within: float) -> None:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"plaudit serve ({self.tree.label}) exited:\n{self.output()}")
            try:
                with urllib.request.urlopen(f"{self.url}/v1/health", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise SystemExit(f"plaudit serve ({self.tree.label}) did not start within {within:g} s")

    def pids(self) -> list[int]:
        """The server and its direct children (`--workers`)."""
        out = [self.proc.pid]
        if not self.forks:
            return out
        for stat in glob.glob("/proc/[0-9]*/stat"):
            try:
                with open(stat) as f:
                    fields = f.read().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[1]) == self.proc.pid:
                out.append(int(stat.split("/")[2]))
        return out

    def cpu_seconds(self) -> float:
        """User + system CPU the server has used so far, its workers included (Linux: /proc,
        threads that ended included), else NaN."""
        total = 0.0
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rpartition(")")[2].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / CLK_TCK
        return total if total else float("nan")

    def statements(self) -> dict[str, int]:
        """Statements sent so far, by text (needs `statements=True`)."""
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(self.control)
            chunks = []
            while chunk := s.recv(1 << 16):
                chunks.append(chunk)
        return json.loads(b"".join(chunks))

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
        if self.control:
            with contextlib.suppress(OSError):
                os.unlink(self.control)
