"""Same valid input, same numbers as the reference exporter.

The expected values were produced once by running the reference `router_signal_export.py` on
data/compat.jsonl (see data/make_compat.py); the fixture covers its corner rules (object
subjects, string timestamps, unreadable subjects, repeated ids, orphan outcomes, overrides).
"""

from __future__ import annotations

import json

import pytest

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
