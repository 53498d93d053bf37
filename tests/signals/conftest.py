"""Helpers shared by the router signal tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from plaudit.signals import synth

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).resolve().parents[2]


def run_plaudit(
    *args: str, env: dict[str, str] | None = None, cwd: str | Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real `plaudit` entry point in a fresh interpreter (by default in a scratch
    directory, so a command without --db never creates ./.plaudit in the checkout)."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("PLAUDIT_DEBUG", None)
    with tempfile.TemporaryDirectory(prefix="plaudit-signals-") as scratch:
        return subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from plaudit.cli import main; sys.exit(main())",
                *list(args),
            ],
            capture_output=True,
            text=True,
            env=full_env,
            cwd=cwd if cwd is not None else scratch,
            timeout=120,
        )


def write_rows(path: Path, rows: list[dict[str, Any]] | list[str]) -> Path:
    with open(path, "w") as f:
        for r in rows:
            f.write(r if isinstance(r, str) else json.dumps(r, sort_keys=True))
            f.write("\n")
    return path


@pytest.fixture
def seq_mem_file(tmp_path: Path) -> Path:
    """A small synthetic seq_mem.jsonl (timestamps in the past: export with a large max age)."""
    path = tmp_path / "seq_mem.jsonl"
    with open(path, "w") as f:
        synth.write(f, 120, seed=3, sessions=6)
    return path


BIG_AGE = 10_000_000  # hours: nothing in the fixtures is too old


def reference_line_count(raw: bytes) -> int:
    """How many lines the reference (`str.splitlines`) sees in one physical line: a parse error
    is counted per such line, so garbage can make more than one."""
    return max(1, len(raw.decode("utf-8", "replace").splitlines()))
