"""Shared helpers for the router signal benchmarks: timing child processes and their peak RSS."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def plaudit_command() -> list[str]:
    """The installed `plaudit` script next to this interpreter, else `python -m plaudit.cli`."""
    script = Path(sys.executable).with_name("plaudit")
    if script.exists():
        return [str(script)]
    found = shutil.which("plaudit")
    return [found] if found else [sys.executable, "-m", "plaudit.cli"]


def run_measured(
    cmd: list[str], *, env: dict[str, str] | None = None, stdout: Any = subprocess.DEVNULL
) -> tuple[float, int, int, float]:
    """(wall seconds, peak RSS in KiB, exit status, CPU seconds (user + system)) of the child,
    counting the processes it waited for (for RSS: the largest of them). `stdout`: where the
    child's output goes (a file to read it back; by default nowhere)."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=stdout, stderr=subprocess.PIPE, env={**os.environ, **(env or {})}
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 and proc.stderr is not None:
        sys.stderr.write(proc.stderr.read().decode(errors="replace"))
    if proc.stderr is not None:
        proc.stderr.close()
    return wall, usage.ru_maxrss, proc.returncode, usage.ru_utime + usage.ru_stime


def median(values: list[float]) -> float:
    return statistics.median(values)


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
