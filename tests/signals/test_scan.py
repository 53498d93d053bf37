"""The fast seq_mem reader: chunking, batching and the two-process split change nothing."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plaudit.signals import scan, synth
from plaudit.signals.export import export

from .conftest import BIG_AGE, reference_line_count

SPLITS = ("train", "val", "test")
GARBAGE = [
    b"{not json",
    b"[1, 2, 3]",
    b'"a string"',
    b'{"name": "flow.router.decision.v1", "ts_ms": "soon", "subject": "{}"}',
    b'{"name": "flow.router.outcome.v1", "ts_ms": 1e400, "subject": "{}"}',
    b"\xff\xfe not utf-8",
    b"   ",
    b"",
]


def _synth_lines(decisions: int, seed: int = 5) -> list[bytes]:
    rows = synth.rows(decisions, seed=seed, sessions=7, repeat_rate=0.1)
    return [json.dumps(r, sort_keys=True).encode() for r in rows]


def _export(path: Path, out: Path | None, **kw: Any) -> tuple[dict[str, Any], dict[str, bytes]]:
    summary = export(seq_mem=path, output_dir=out, max_age_hours=BIG_AGE, now_ms=2 * 10**12, **kw)
    files = {s: (out / f"{s}.jsonl").read_bytes() for s in SPLITS} if out is not None else {}
    for key in ("generated_at_ms", "outputs", "input"):
        summary.pop(key, None)
    return summary, files


@pytest.fixture
def forkable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let the worker fork although other tests in this process left threads running.

    `can_fork` refuses a multi-threaded parent, which would silently turn these tests of the
    two-process path into tests of the one-process path when the whole suite runs.
    """
    if (os.cpu_count() or 1) < 2 or not hasattr(os, "fork"):
        pytest.skip("the two-process export needs 2 cores and fork()")
    monkeypatch.setattr(scan, "can_fork", lambda: True)


@pytest.fixture
def mixed_file(tmp_path: Path) -> Path:
    """Good rows with garbage sprinkled in, including around the middle of the file."""
    lines = _synth_lines(300)
    for i, bad in enumerate(GARBAGE):
        lines.insert(len(lines) // 2 + i * 3 - 6, bad)
        lines.insert(i * 40, bad)
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_two_processes_give_the_same_export_as_one(mixed_file, tmp_path, forkable) -> None:
    one, one_files = _export(mixed_file, tmp_path / "one", parallel=False)
    two, two_files = _export(mixed_file, tmp_path / "two", parallel=True)
    assert one["counts"]["parse_errors"] == 2 * 6  # blank lines are not errors
    assert one["counts"]["joined_rows"] > 200
    assert two == one  # parse error samples (with line numbers) included
    assert two_files == one_files


@pytest.mark.parametrize(
    ("jobs", "idle", "used"),
    [
        (None, False, False),  # auto, on a busy machine
        (None, True, True),  # auto, with a core to spare
        ("auto", True, True),
        ("1", True, False),
        ("x", True, False),  # not a number: the safe choice
        ("2", False, True),
    ],
)
def test_when_the_worker_is_used(
    mixed_file, monkeypatch, forkable, jobs: str | None, idle: bool, used: bool
) -> None:
    monkeypatch.setattr(scan, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(scan, "idle_core", lambda: idle)
    monkeypatch.setattr(scan, "_scan_worker", _die)  # if it is used, it dies ...
    calls = []
    read = scan._read
    monkeypatch.setattr(scan, "_read", lambda *a: calls.append(a[1:3]) or read(*a))
    if jobs is None:
        monkeypatch.delenv("PLAUDIT_EXPORT_JOBS", raising=False)
    else:
        monkeypatch.setenv("PLAUDIT_EXPORT_JOBS", jobs)
    _export(mixed_file, None)
    if not used:
        assert calls == []
    else:  # ... and the parent reads the worker's half itself
        [(start, end)] = calls
        assert 0 < start < end == mixed_file.stat().st_size


def test_small_files_are_read_in_one_process(mixed_file, monkeypatch, forkable) -> None:
    monkeypatch.setattr(scan, "_scan_worker", _die)
    monkeypatch.setattr(scan, "idle_core", lambda: True)
    calls = []
    read = scan._read
    monkeypatch.setattr(scan, "_read", lambda *a: calls.append(a[1:3]) or read(*a))
    monkeypatch.setenv("PLAUDIT_EXPORT_JOBS", "2")
    assert mixed_file.stat().st_size < scan.PARALLEL_MIN_BYTES
    _export(mixed_file, None)
    assert calls == []


def test_idle_core_reads_the_load_average(monkeypatch) -> None:
    monkeypatch.setattr(scan.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(scan.os, "getloadavg", lambda: (0.4, 0.0, 0.0))
    assert scan.idle_core()
    monkeypatch.setattr(scan.os, "getloadavg", lambda: (1.7, 0.0, 0.0))
    assert not scan.idle_core()

    def unavailable() -> tuple[float, float, float]:
        raise OSError("no load average")

    monkeypatch.setattr(scan.os, "getloadavg", unavailable)
    assert not scan.idle_core()


def test_error_line_numbers_count_across_the_split(tmp_path, forkable) -> None:
    lines = _synth_lines(60)
    lines[-3] = b"{broken"  # in the second half, read by the worker
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    summary, _ = _export(path, None, parallel=True)
    [sample] = summary["parse_error_samples"]
    assert sample.startswith(f"{path}:{len(lines) - 2}: JSON is malformed")


def test_a_killed_worker_is_covered_by_the_parent(
    mixed_file, tmp_path, monkeypatch, forkable
) -> None:
    expected, expected_files = _export(mixed_file, tmp_path / "a", parallel=False)
    monkeypatch.setattr(scan, "_scan_worker", _die)
    got, got_files = _export(mixed_file, tmp_path / "b", parallel=True)
    assert got == expected
    assert got_files == expected_files


def _die(*args: Any) -> None:
    """Stands in for the worker's job: the worker is killed as by `kill -9`."""
    os.kill(os.getpid(), signal.SIGKILL)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    chunk=st.integers(min_value=1, max_value=3000),
    garbage=st.lists(st.sampled_from(GARBAGE) | st.binary(max_size=40), max_size=6),
    positions=st.lists(st.integers(min_value=0, max_value=10_000), min_size=6, max_size=6),
    trailing_newline=st.booleans(),
)
def test_chunk_size_never_changes_the_result(
    tmp_path, monkeypatch, chunk, garbage, positions, trailing_newline
) -> None:
    lines = _synth_lines(25, seed=9)
    for g, pos in zip(garbage, positions, strict=False):
        lines.insert(pos % (len(lines) + 1), g.replace(b"\n", b" "))
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(lines) + (b"\n" if trailing_newline else b""))
    expected, _ = _export(path, None, parallel=False)
    monkeypatch.setattr(scan, "CHUNK_BYTES", chunk)
    got, _ = _export(path, None, parallel=False)
    assert got == expected
    limit = sum(reference_line_count(g.replace(b"\n", b" ")) for g in garbage)
    assert got["counts"]["parse_errors"] <= limit


def test_oversize_lines_are_counted_at_any_chunk_size(tmp_path, monkeypatch) -> None:
    lines = _synth_lines(10)
    huge = b'{"name": "x", "pad": "' + b"z" * 5000 + b'"}'
    lines[4:4] = [huge, huge]
    lines.append(huge)  # the last line, without a newline
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(lines))
    monkeypatch.setattr(scan, "MAX_LINE_BYTES", 4096)
    results = []
    for chunk in (100, 4096, 1 << 20):
        monkeypatch.setattr(scan, "CHUNK_BYTES", chunk)
        summary, _ = _export(path, None, parallel=False)
        results.append(summary)
    assert results[0] == results[1] == results[2]
    c = results[0]["counts"]
    assert c["oversize_lines"] == 3 and c["parse_errors"] == 3
    assert results[0]["parse_error_samples"][0].startswith(f"{path}:5: line longer than")


def test_values_smuggled_into_a_batch_make_no_phantom_rows(tmp_path) -> None:
    """Lines and subjects are decoded in batches by joining them with commas: a line or a
    subject holding several values must not turn into extra events."""
    two_decisions = '{"decision_id": "p1", "chosen_task": "t"}, {"decision_id": "p2"}'
    rows = [
        {"name": "flow.router.decision.v1", "ts_ms": 10**12, "subject": two_decisions},
        {"name": "flow.router.outcome.v1", "ts_ms": 10**12, "subject": '{"decision_id": "p1"}'},
    ]
    lines = [json.dumps(r).encode() for r in rows]
    lines.insert(1, lines[0] + b", " + lines[1])  # two rows on one line
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    summary, _ = _export(path, None)
    c = summary["counts"]
    assert c["parse_errors"] == 1
    assert c["decisions"] == 0 and c["joined_rows"] == 0
    assert c["skipped_no_decision_id"] == 1
    assert c["outcomes"] == 1


def test_an_object_subject_is_read_like_a_string_one(tmp_path) -> None:
    subject = {"decision_id": "o1", "chosen_task": "t", "confidence": 0.5, "context": {"a": 1}}
    as_text = {"name": "flow.router.decision.v1", "ts_ms": 10**12, "subject": json.dumps(subject)}
    as_object = {**as_text, "subject": subject}
    outcome = {
        "name": "flow.router.outcome.v1",
        "ts_ms": 10**12,
        "subject": json.dumps({"decision_id": "o1", "outcome": "success"}),
    }
    got = []
    for i, first in enumerate((as_text, as_object)):
        path = tmp_path / f"in{i}.jsonl"
        path.write_text(json.dumps(first) + "\n" + json.dumps(outcome) + "\n")
        _, files = _export(path, tmp_path / f"out{i}")
        rows = [json.loads(x) for s in SPLITS for x in files[s].splitlines()]
        assert len(rows) == 1
        got.append({k: v for k, v in rows[0].items() if k != "dedupe_id"})
    assert got[0] == got[1]
    assert got[0]["context"] == {"a": 1}
