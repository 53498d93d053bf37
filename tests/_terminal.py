"""Run the `plaudit` entry point with stderr on a pseudo-terminal, to see what it draws there."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path


def on_a_terminal(args: list[str], cwd: Path | None = None) -> tuple[int, bytes, bytes]:
    """(exit code, stdout, what was drawn on the terminal) of `plaudit ARGS`."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; from plaudit.cli import main; sys.exit(main())",
             *args],
            stdout=subprocess.PIPE, stderr=slave, cwd=cwd, env={**os.environ, "COLUMNS": "100"},
        )  # fmt: skip
        os.close(slave)
        slave = -1
        drawn = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            drawn.append(data)
        out = proc.stdout.read() if proc.stdout else b""
        proc.wait(120)
    finally:
        if slave != -1:
            os.close(slave)
        os.close(master)
    return proc.returncode, out, b"".join(drawn)
