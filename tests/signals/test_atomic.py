"""A failed or killed export leaves the previous outputs exactly as they were."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from plaudit.signals import formats, synth
from plaudit.signals.export import TMP_PREFIX, export

from .conftest import BIG_AGE


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def test_failure_mid_write_keeps_previous_outputs(seq_mem_file, tmp_path, monkeypatch) -> None:
    out = tmp_path / "out"
    export(seq_mem=seq_mem_file, output_dir=out, max_age_hours=BIG_AGE)
    before = _snapshot(out)
    assert set(before) == {"train.jsonl", "val.jsonl", "test.jsonl", "summary.json"}

    calls = {"n": 0}
    original = formats.JsonlWriter.write_line

    def failing(self, line):  # the disk fills up half-way through
        calls["n"] += 1
        if calls["n"] == 40:
            raise OSError(28, "No space left on device")
        original(self, line)

    monkeypatch.setattr(formats.JsonlWriter, "write_line", failing)
    with pytest.raises(Exception, match="No space left on device"):
        export(seq_mem=seq_mem_file, output_dir=out, max_age_hours=BIG_AGE, seed=1)
    assert _snapshot(out) == before
    assert not list(out.glob(f"{TMP_PREFIX}*"))


SCRIPT = """
import sys
from plaudit.signals.export import export
export(seq_mem=sys.argv[1], output_dir=sys.argv[2], max_age_hours=10**7, seed=99,
       formats=["jsonl", "chat"])
"""


@pytest.mark.slow
def test_kill_9_during_export_keeps_previous_outputs(tmp_path) -> None:
    src = tmp_path / "big.jsonl"
    with open(src, "w") as f:
        synth.write(f, 15_000, seed=4)
    out = tmp_path / "out"
    export(seq_mem=src, output_dir=out, max_age_hours=BIG_AGE)
    before = _snapshot(out)

    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(src), str(out)])
    deadline = time.monotonic() + 60
    try:
        # Kill as soon as the export has started writing its files.
        while time.monotonic() < deadline and proc.poll() is None:
            tmp = list(out.glob(f"{TMP_PREFIX}*"))
            if tmp and any(p.stat().st_size > 0 for p in tmp[0].iterdir()):
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.002)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the export finished before it could be killed"
    assert _snapshot(out) == before
    assert list(out.glob(f"{TMP_PREFIX}*"))  # the dead export's scratch directory...

    summary = export(seq_mem=src, output_dir=out, max_age_hours=BIG_AGE)
    assert not list(out.glob(f"{TMP_PREFIX}*"))  # ...is removed by the next export
    assert summary["counts"]["joined_rows"] > 0
