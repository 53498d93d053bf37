"""Same valid input, same numbers as the reference exporter.

The expected values were produced once by running the reference `router_signal_export.py` on
data/compat.jsonl (see data/make_compat.py); the fixture covers its corner rules (object
subjects, string timestamps, unreadable subjects, repeated ids, orphan outcomes, overrides).
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plaudit.errors import ValidationError
from plaudit.signals.export import export

from .conftest import BIG_AGE, DATA

EXPECTED = json.loads((DATA / "compat_expected.json").read_text())
REFERENCE_COUNTS = (
    "decisions",
    "outcomes",
    "joined_rows",
    "missing_outcome",
    "duplicate_decision_ids",
    "duplicate_outcome_ids",
    "dropped_duplicate_rows",
    "overrides",
    "train_rows",
    "val_rows",
    "test_rows",
    "parse_errors",
)


def _options(args: list[str]) -> dict[str, int]:
    it = iter(args)
    pairs = zip(it, it, strict=False)
    return {flag.lstrip("-").replace("-", "_"): int(value) for flag, value in pairs}


@pytest.mark.parametrize("case", EXPECTED["cases"], ids=lambda c: " ".join(c["args"]) or "defaults")
def test_summary_matches_reference(tmp_path, case) -> None:
    if case["counts"]["train_rows"] == 0 and case["counts"]["joined_rows"] > 0:
        # The reference writes an empty train split; plaudit refuses such percentages.
        with pytest.raises(ValidationError, match="leave no rows for train"):
            export(seq_mem=DATA / "compat.jsonl", output_dir=tmp_path / "out",
                   max_age_hours=BIG_AGE, **_options(case["args"]))  # fmt: skip
        assert not (tmp_path / "out").exists()
        return
    summary = export(
        seq_mem=DATA / "compat.jsonl",
        output_dir=tmp_path / "out",
        max_age_hours=BIG_AGE,
        **_options(case["args"]),
    )
    assert {k: summary["counts"][k] for k in REFERENCE_COUNTS} == case["counts"]
    assert {k: summary["quality"][k] for k in case["quality"]} == case["quality"]
    assert summary["distributions"] == case["distributions"]
    in_memory = export(
        seq_mem=DATA / "compat.jsonl",
        output_dir=None,
        max_age_hours=BIG_AGE,
        **_options(case["args"]),
    )
    for key in ("counts", "quality", "distributions"):
        assert in_memory[key] == summary[key]  # the summary-only path agrees with the export
    on_disk = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert on_disk["counts"] == summary["counts"]
    for split in ("train", "val", "test"):
        lines = (tmp_path / "out" / f"{split}.jsonl").read_text().splitlines()
        assert len(lines) == case["counts"][f"{split}_rows"]


def test_rows_match_reference(tmp_path) -> None:
    export(seq_mem=DATA / "compat.jsonl", output_dir=tmp_path, max_age_hours=BIG_AGE)
    rows = {}
    for split in ("train", "val", "test"):
        for line in (tmp_path / f"{split}.jsonl").read_text().splitlines():
            row = json.loads(line)
            row["split"] = split
            rows[row["id"]] = row
    for decision_id, expected in EXPECTED["rows"].items():
        got = rows[decision_id]
        assert {k: got[k] for k in expected} == expected, decision_id


def test_reference_row_fields_present(tmp_path) -> None:
    export(seq_mem=DATA / "compat.jsonl", output_dir=tmp_path, max_age_hours=BIG_AGE)
    row = json.loads((tmp_path / "train.jsonl").read_text().splitlines()[0])
    reference_fields = [
        "schema_version", "id", "ts_ms", "source", "session_id", "project_fingerprint",
        "project_path", "git_branch", "git_commit", "user_hash", "user_intent", "context",
        "candidates", "chosen_task", "confidence", "task_executed", "outcome",
        "time_to_resolution_ms", "error_kind", "manual_override_task", "event_history",
        "reward", "dedupe_id",
    ]  # fmt: skip
    assert list(row)[: len(reference_fields)] == reference_fields


def _refuse(constant: str) -> None:
    pytest.fail(f"{constant} written to an output row")


def test_lines_only_pythons_json_reads_count_as_in_the_reference(tmp_path) -> None:
    """NaN, Infinity, non-UTF-8 bytes, lone surrogates, a form feed: the reference reads these
    lines with Python's json, so they are events there, and must be here; every row written
    is still valid JSON."""
    expected = EXPECTED["lenient"]
    summary = export(seq_mem=DATA / "lenient.jsonl", output_dir=tmp_path, max_age_hours=BIG_AGE)
    assert {k: summary["counts"][k] for k in REFERENCE_COUNTS} == expected["counts"]
    assert {k: summary["quality"][k] for k in expected["quality"]} == expected["quality"]
    assert summary["distributions"] == expected["distributions"]
    rows = {}
    for split in ("train", "val", "test"):
        text = (tmp_path / f"{split}.jsonl").read_bytes().decode("utf-8")  # strict UTF-8
        for line in text.splitlines():
            row = json.loads(line, parse_constant=_refuse)
            row["split"] = split
            row["history"] = [h["decision_id"] for h in row["event_history"]]
            rows[row["id"]] = row
    assert rows.keys() == expected["rows"].keys()
    for decision_id, want in expected["rows"].items():
        assert {k: rows[decision_id][k] for k in want} == want, decision_id
    # Where the reference would write what JSON cannot hold, plaudit writes null, or a lone
    # surrogate's escape as text (six characters, so no two ids merge).
    assert rows["l-nan"]["confidence"] == 0.0
    assert rows["l-inf"]["context"] == {"load": None}
    assert rows["l-latin1"]["user_intent"] == "caf\ufffd"  # the byte, replaced on reading
    assert rows["l-sur"]["user_intent"] == "\\ud800"
    assert rows["l-sur-row"]["session_id"] == "s-\\ud800"
    assert rows["l-nan-session"]["session_id"] == "nan"  # str(nan), as the reference makes it
    assert [h["decision_id"] for h in rows["l-cr-2"]["event_history"]][-1] == "l-cr-1"


def test_lenient_lines_read_alike_by_one_or_two_processes(tmp_path) -> None:
    """The worker process reads the second half of a file with the same fallback."""
    src = tmp_path / "in.jsonl"
    lines = (DATA / "lenient.jsonl").read_bytes()
    src.write_bytes((DATA / "compat.jsonl").read_bytes() + lines)
    one = export(seq_mem=src, output_dir=tmp_path / "one", max_age_hours=BIG_AGE, parallel=False)
    two = export(seq_mem=src, output_dir=tmp_path / "two", max_age_hours=BIG_AGE, parallel=True)
    assert one["counts"] == two["counts"]
    for split in ("train", "val", "test"):
        a = (tmp_path / "one" / f"{split}.jsonl").read_bytes()
        assert a == (tmp_path / "two" / f"{split}.jsonl").read_bytes()


def _reference_reading(lines: list[bytes]) -> dict[str, int]:
    """How the reference reads lines into decisions and outcomes, re-stated for a model:
    bytes decoded with replacement, stripped, Python's json, last one wins per id."""
    decisions: dict[str, int] = {}
    outcomes: dict[str, int] = {}
    repeats = {"decision": 0, "outcome": 0}
    for line in lines:
        text = line.decode("utf-8", "replace").strip()
        if not text:
            continue
        row = json.loads(text)
        subject = row.get("subject")
        if isinstance(subject, str):
            try:
                subject = json.loads(subject)
            except json.JSONDecodeError:
                subject = {}
        if not isinstance(subject, dict):
            subject = {}
        did = str(subject.get("decision_id") or "")
        if not did:
            continue
        kind = {"flow.router.decision.v1": "decision", "flow.router.outcome.v1": "outcome"}
        seen = {"decision": decisions, "outcome": outcomes}.get(kind.get(row["name"], ""))
        if seen is not None:
            repeats[kind[row["name"]]] += did in seen
            seen[did] = 1
    return {
        "decisions": len(decisions),
        "outcomes": len(outcomes),
        "duplicate_decision_ids": repeats["decision"],
        "duplicate_outcome_ids": repeats["outcome"],
    }


# Text with lone surrogates (json writes them as \\udXXX escapes) and floats with NaN and
# infinities: all of which Python's json reads back and strict JSON refuses.
_codepoint = st.one_of(
    st.integers(0xD800, 0xDFFF), st.sampled_from([0, 0x20, 0x61, 0xE9]), st.integers(0, 0x10FFFF)
)
_text = st.lists(_codepoint, max_size=6).map(lambda cps: "".join(map(chr, cps)))
_id = st.one_of(st.sampled_from(["a", "b", "c"]), _text, st.floats())
_value = st.one_of(st.none(), st.booleans(), st.floats(), st.integers(), _text)


@st.composite
def _lenient_event(draw: Any) -> bytes:
    name = draw(st.sampled_from(["flow.router.decision.v1", "flow.router.outcome.v1"]))
    did = draw(_id)
    subject = {"decision_id": did, "chosen_task": "t", "outcome": "success"}
    subject["user_intent"] = draw(_value)
    subject["context"] = {"k": draw(_value)}
    row = {"name": name, "ts_ms": 1_780_000_000_000, "session_id": draw(_text)}
    row["subject"] = json.dumps(subject)
    line = json.dumps(row).encode()
    if draw(st.booleans()):  # a byte that is not UTF-8, where the reference replaces it
        line = line.replace(b'"t"', b'"t\xe9"', 1)
    if draw(st.booleans()):
        line = b"\x0c " + line
    return line


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_lenient_event(), min_size=1, max_size=12))
def test_any_line_pythons_json_reads_is_read_as_the_reference_reads_it(tmp_path, lines) -> None:
    path = tmp_path / "lenient.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    summary = export(seq_mem=path, output_dir=tmp_path / "out", max_age_hours=BIG_AGE)
    want = _reference_reading(lines)
    assert {k: summary["counts"][k] for k in want} == want
    assert summary["counts"]["parse_errors"] == 0
    for split in ("train", "val", "test"):
        for line in (tmp_path / "out" / f"{split}.jsonl").read_bytes().decode().splitlines():
            row = json.loads(line, parse_constant=_refuse)
            assert math.isfinite(row["confidence"])
