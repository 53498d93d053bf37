"""docs/mcp.md as written: its host configuration starts a server the SDK's client can use,
and its Python client snippet runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from _snippets import snippet

pytest.importorskip("mcp", reason="needs the mcp extra")

from mcp import Client, StdioServerParameters

BIN = str(Path(sys.executable).parent)  # where the `plaudit` script of this environment is


def test_the_host_configuration_starts_a_working_server(tmp_path: Path) -> None:
    entry = json.loads(snippet("mcp.md", "mcp-host-config"))["mcpServers"]["plaudit"]
    params = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        cwd=tmp_path,
        env={"PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"},
    )

    async def tools() -> list[str]:
        async with Client(params) as c:
            return [t.name for t in (await c.list_tools()).tools]

    assert "choose_context" in anyio.run(tools)
    assert (tmp_path / ".plaudit" / "agent.db").exists()


def test_the_python_client_snippet_runs(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    r = subprocess.run(
        [sys.executable, "-c", snippet("mcp.md", "mcp-client")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "rewards: {'tool:exec:Bash': 1, 'file:workspace:README.md': 1}" in r.stdout
    assert '"total_score":30' in r.stdout
