"""Fixtures for the HTTP layer: an in-process app per backend, and a real `plaudit serve`."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from plaudit import Plaudit
from plaudit.server.app import create_app

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # starlette's notice about httpx vs httpx2
    from fastapi.testclient import TestClient

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def sqlite_pl(sqlite_url: str) -> Iterator[Plaudit]:
    p = Plaudit.open(sqlite_url)
    yield p
    p.close()


@pytest.fixture
def client(pl: Plaudit) -> Iterator[TestClient]:
    """The full app (every mounted router) over a fresh store, on each backend."""
    with TestClient(create_app(pl)) as c:
        yield c


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A real `plaudit serve` subprocess on a free loopback port; or, given `script`, that
    Python code run as `python -c script DB PORT ARGS...` (an embedding application)."""

    def __init__(
        self, db: str, *args: str, env: dict[str, str] | None = None, script: str | None = None
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        if script is None:
            cmd = [
                sys.executable,
                "-c",
                "import sys; from plaudit.cli import main; sys.exit(main())",
            ]
            cmd += ["serve", "--db", db, "--port", str(self.port), "--log-level", "warning"]
        else:
            cmd = [sys.executable, "-c", script, db, str(self.port)]
        self.output = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - lives as long as the server
        self.proc = subprocess.Popen(
            [*cmd, *args],
            cwd=REPO,
            env={**os.environ, **(env or {})},
            stdout=self.output,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                out = self.read_output()
                raise RuntimeError(f"plaudit serve exited with {self.proc.returncode}: {out}")
            try:
                if httpx2.get(f"{self.url}/v1/health", timeout=1).status_code == 200:
                    return
            except httpx2.HTTPError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("plaudit serve did not answer within 30 s")

    def read_output(self) -> str:
        self.output.seek(0)
        return self.output.read()

    def kill(self) -> None:
        """SIGKILL: no shutdown handlers, no flushing."""
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.read_output()


@pytest.fixture
def serve_factory() -> Iterator[type[Server]]:
    started: list[Server] = []

    class Tracked(Server):
        def __init__(self, *a: object, **kw: object) -> None:
            super().__init__(*a, **kw)  # type: ignore[arg-type]
            started.append(self)

    yield Tracked
    for s in started:
        s.stop()
