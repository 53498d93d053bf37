"""atomic_write: the whole new file or the old one, never a part, and never a new directory."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plaudit.errors import ValidationError
from plaudit.files import atomic_write


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chunks=st.lists(st.binary(max_size=5000), max_size=8))
def test_what_was_written_is_the_whole_file(tmp_path: Path, chunks: list[bytes]) -> None:
    target = tmp_path / "out.bin"

    def write(f) -> int:
        for c in chunks:
            f.write(c)
        return len(chunks)

    assert atomic_write(target, write) == len(chunks)  # write's result is handed back
    assert target.read_bytes() == b"".join(chunks)
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]  # no temporary file left


def test_a_failed_write_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")

    def half(f) -> None:
        f.write(b"new but not fin")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        atomic_write(target, half)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_a_missing_directory_is_refused_and_not_made(tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "p.json"
    with pytest.raises(ValidationError) as info:
        atomic_write(target, lambda f: f.write(b"x"), what="output")
    assert info.value.field == "output"
    assert f"its directory {target.parent} does not exist" in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_concurrent_writers_of_one_path_never_mix(tmp_path: Path) -> None:
    target = tmp_path / "shared.txt"
    bodies = [bytes([65 + i]) * 200_000 for i in range(8)]
    errors: list[BaseException] = []

    def one(body: bytes) -> None:
        try:
            atomic_write(target, lambda f: f.write(body))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(b,)) for b in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert target.read_bytes() in bodies  # one writer's whole body
    assert [p.name for p in tmp_path.iterdir()] == ["shared.txt"]
