"""A failed or killed export leaves the previous outputs exactly as they were."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from plaudit.signals import formats, synth
from plaudit.signals.export import TMP_PREFIX, export
from plaudit.signals.split import bucket

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


def _export_another(seq_mem_file: Path, out: Path) -> None:
    """A second export into `out`, differing from the first in seed and formats."""
    export(
        seq_mem=seq_mem_file,
        output_dir=out,
        max_age_hours=BIG_AGE,
        seed=2,
        formats=["jsonl", "parquet"],
    )


def test_failure_while_moving_files_into_place_restores_the_previous_export(
    seq_mem_file, tmp_path, monkeypatch
) -> None:
    out = tmp_path / "out"
    export(seq_mem=seq_mem_file, output_dir=out, max_age_hours=BIG_AGE)
    before = _snapshot(out)
    real_replace = os.replace
    moved_in = {"n": 0}

    def flaky_replace(src, dst):  # the third file moved into place fails
        if TMP_PREFIX in str(src) and Path(dst).parent == out:
            moved_in["n"] += 1
            if moved_in["n"] == 3:
                raise OSError(5, "Input/output error", str(dst))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", flaky_replace)
    with pytest.raises(Exception, match=r"Input/output error \(.*out/val\.jsonl\)"):
        _export_another(seq_mem_file, out)
    assert _snapshot(out) == before  # the two files already moved in were put back
    assert not list(out.glob(f"{TMP_PREFIX}*"))


def test_a_directory_where_an_output_goes_fails_before_anything_moves(
    seq_mem_file, tmp_path
) -> None:
    out = tmp_path / "out"
    export(seq_mem=seq_mem_file, output_dir=out, max_age_hours=BIG_AGE)
    before = _snapshot(out)
    (out / "val.parquet").mkdir()
    (out / "val.parquet" / "keep.txt").write_text("the user's")
    with pytest.raises(Exception, match=r"val\.parquet' is a directory"):
        _export_another(seq_mem_file, out)
    assert _snapshot(out) == before
    assert (out / "val.parquet" / "keep.txt").read_text() == "the user's"


CONCURRENT = """
import os, random, sys, time
from plaudit.signals.export import export
_replace = os.replace
def slow_replace(src, dst):  # uneven pauses, so two unlocked commits would interleave
    time.sleep(random.random() / 20)
    _replace(src, dst)
os.replace = slow_replace
fmts = ["jsonl", "rl"] if int(sys.argv[3]) % 2 else ["jsonl"]
export(seq_mem=sys.argv[1], output_dir=sys.argv[2], max_age_hours=10**7, seed=int(sys.argv[3]),
       formats=fmts)
"""


def test_concurrent_exports_to_one_directory_never_mix_their_files(tmp_path) -> None:
    """Four processes export with different seeds at once: whichever commits last, the
    summary and every file it lists come from that one export."""
    src = tmp_path / "in.jsonl"
    with open(src, "w") as f:
        synth.write(f, 1500, seed=4)
    out = tmp_path / "out"
    for _ in range(4):
        procs = [
            subprocess.Popen([sys.executable, "-c", CONCURRENT, str(src), str(out), str(seed)])
            for seed in (1, 2, 3, 4)
        ]
        assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
        summary = json.loads((out / "summary.json").read_text())
        for fmt, files in summary["outputs"]["files"].items():
            for split, path in files.items():
                lines = Path(path).read_text().splitlines()
                assert len(lines) == summary["counts"][f"{split}_rows"], (fmt, split)
        train = [json.loads(x) for x in (out / "train.jsonl").read_text().splitlines()]
        seed = summary["input"]["seed"]
        assert all(bucket(r["id"], seed) >= 20 for r in train)  # this seed's split, not another's
