"""Witness directories: atomic, never-overwriting writes that survive kill -9."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from plaudit.errors import ConfigError, IntegrityError
from plaudit.store.checkpoints import parse_checkpoint, sign_checkpoint
from plaudit.store.keys import create_key_file
from plaudit.store.witness import (
    ENV_WITNESS,
    checkpoint_name,
    latest_name,
    newest_checkpoint,
    witness_dirs,
    write_witness,
)


@pytest.fixture
def key(tmp_path):
    return create_key_file(tmp_path / "log.key")


def ck(key, size, root=None, t=1):
    return sign_checkpoint(key, size, root or size.to_bytes(32, "big"), t)


def test_write_and_read_newest(tmp_path, key):
    w = tmp_path / "w"
    w.mkdir()
    assert newest_checkpoint(w, key.fingerprint).checkpoint is None
    for size in (3, 10, 7):
        assert write_witness(w, ck(key, size)).status == "written"
    got = newest_checkpoint(w, key.fingerprint)
    assert got.checkpoint is not None and got.checkpoint.size == 10
    got.checkpoint.verify(key.public_key)
    names = sorted(p.name for p in w.iterdir())
    assert names == sorted(
        [*(checkpoint_name(ck(key, s)) for s in (3, 7, 10)), latest_name(key.fingerprint)]
    )


def test_same_size_is_never_overwritten(tmp_path, key):
    w = tmp_path / "w"
    w.mkdir()
    first = write_witness(w, ck(key, 5, t=1))
    before = Path(first.path).read_bytes()
    assert write_witness(w, ck(key, 5, t=2)).status == "present"  # same tree, later time
    assert Path(first.path).read_bytes() == before
    with pytest.raises(IntegrityError, match="different root"):
        write_witness(w, ck(key, 5, root=b"\x07" * 32))
    assert Path(first.path).read_bytes() == before


def test_garbage_is_skipped_with_a_warning(tmp_path, key):
    w = tmp_path / "w"
    w.mkdir()
    write_witness(w, ck(key, 4))
    big = ck(key, 9)
    (w / checkpoint_name(big)).write_text("plaudit-checkpoint v1\nlog ")  # a torn copy
    (w / latest_name(key.fingerprint)).write_bytes(b"\x00" * 100)
    (w / ".junk.tmp").write_text("half")
    got = newest_checkpoint(w, key.fingerprint)
    assert got.checkpoint is not None and got.checkpoint.size == 4
    assert any(checkpoint_name(big) in m for m in got.warnings)
    assert any(latest_name(key.fingerprint) in m for m in got.warnings)
    assert write_witness(w, big).status == "skipped"  # the unreadable file is left alone
    assert (w / checkpoint_name(big)).read_text().startswith("plaudit-checkpoint v1\nlog ")


def test_other_logs_and_missing_dirs(tmp_path, key):
    w = tmp_path / "w"
    w.mkdir()
    other = create_key_file(tmp_path / "other.key")
    write_witness(w, ck(other, 3))
    got = newest_checkpoint(w, key.fingerprint)
    assert got.checkpoint is None and got.other_logs == [other.fingerprint[:16]]
    with pytest.raises(ConfigError, match="nowhere"):
        write_witness(tmp_path / "nowhere", ck(key, 1))
    with pytest.raises(ConfigError, match="nowhere"):
        newest_checkpoint(tmp_path / "nowhere", key.fingerprint)


def test_witness_dirs_from_options_and_env(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    got = witness_dirs([a], {ENV_WITNESS: f"{b}{os.pathsep}{a}"})
    assert [str(p) for p in got] == [a, b]


_WRITER = """
import sys, time
from plaudit.store.checkpoints import parse_checkpoint, sign_checkpoint
from plaudit.store.keys import create_key_file
from plaudit.store.witness import write_witness
from pathlib import Path
key = create_key_file(Path(sys.argv[1]).with_name("log.key"))
start = int(sys.argv[3])
for size in range(start, start + 100000):
    write_witness(sys.argv[2], sign_checkpoint(key, size, size.to_bytes(32, "big"), size))
    print(size, flush=True)
"""


def test_kill_9_during_writes_leaves_readable_witnesses(tmp_path, key):
    w = tmp_path / "w"
    w.mkdir()
    db = str(tmp_path / "log.db")
    rng = random.Random(7)
    acknowledged = 0
    start = 1
    for _ in range(6):
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _WRITER, db, str(w), str(start + j * 1_000_000)],
                stdout=subprocess.PIPE,
                text=True,
            )
            for j in range(2)
        ]
        for p in procs:  # each has started writing (start-up is slow on a loaded machine)
            assert p.stdout is not None
            acknowledged = max(acknowledged, int(p.stdout.readline()))
        time.sleep(rng.uniform(0.0, 0.3))
        for p in procs:
            p.send_signal(signal.SIGKILL)
        for p in procs:
            out, _ = p.communicate(timeout=30)
            sizes = [int(x) for x in out.split()]
            if sizes:
                acknowledged = max(acknowledged, sizes[-1])
        start += 10_000_000
        got = newest_checkpoint(w, key.fingerprint)
        assert got.checkpoint is not None
        got.checkpoint.verify(key.public_key)
        # the pointer names a checkpoint that is on record (it may lag a racing writer)
        assert (
            w / checkpoint_name(got.checkpoint)
        ).read_bytes() == got.checkpoint.to_text().encode()
    names = [n for n in os.listdir(w) if not n.startswith(".")]
    assert len(names) > 10
    for n in names:  # every file under a real name is a whole, signed checkpoint
        parse_checkpoint((w / n).read_bytes(), where=n).verify(key.public_key)
    # and a full scan (without the pointer) finds the largest acknowledged checkpoint
    os.rename(w / latest_name(key.fingerprint), tmp_path / "moved")
    scanned = newest_checkpoint(w, key.fingerprint)
    assert scanned.checkpoint is not None and scanned.checkpoint.size >= acknowledged
    assert scanned.warnings == []
