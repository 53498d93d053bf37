"""progress.json: export validates against the seed's schema; import accounts for its total."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from ledger_helpers import DATA

from plaudit.errors import ValidationError
from plaudit.ledger import Ledger
from plaudit.ledger.progress import schema


def _validate(doc: dict) -> None:
    jsonschema.Draft7Validator(schema()).validate(doc)


def test_export_validates_and_is_newest_first(sourced: Ledger, tmp_path: Path) -> None:
    sourced.start_session("s1")
    sourced.record("validation_failure", "x", source="mistake:m-002")
    sourced.record("pattern_reuse", "y")
    sourced.record("zero_duplication", "z", source="mistake:m-001")
    out = tmp_path / "progress.json"
    r = sourced.export_progress(out)
    doc = json.loads(out.read_text())
    _validate(doc)
    led = doc["reinforcement_learning_ledger"]
    assert led["total_score"] == r["total_score"] == 25
    assert led["session_score"] == 25
    assert led["checksum_validation"]["is_valid"] is True
    log = doc["transaction_log"]
    assert [e["category"] for e in log] == [
        "zero_duplication",
        "pattern_reuse",
        "validation_failure",
    ]
    assert all(e["id"].startswith("tx-") for e in log)
    assert log[0]["source_file"] == "mistakes.json" and log[1].get("source_file") is None
    assert led["rewards"]["by_category"] == {"pattern_reuse": 20, "zero_duplication": 25}
    assert led["penalties"]["by_category"] == {"validation_failure": -20}


def test_export_keeps_the_newest_1000(ledger: Ledger, tmp_path: Path) -> None:
    ledger.record_batch([{"category": "pattern_reuse", "action": f"a{i}"} for i in range(1005)])
    doc = ledger.progress()
    _validate(doc)
    log = doc["transaction_log"]
    assert len(log) == 1000
    assert log[0]["action"] == "a1004" and log[-1]["action"] == "a5"
    # the score still covers every transaction, not only the exported 1000
    assert doc["reinforcement_learning_ledger"]["total_score"] == 1005 * 20


def test_import_creates_opening_balance(ledger: Ledger) -> None:
    r = ledger.import_progress(DATA / "progress.json")
    assert r["imported"] == 2
    opening = {o["category"]: o["points"] for o in r["opening_balance"]}
    # one per category: what by_category holds beyond the file's own two entries
    assert opening == {
        "constitutional_compliance": 200,
        "successful_validation": 120,
        "autonomous_recovery": 80,
        "zero_duplication": 25,
        "file_creation_violation": -10,
        "validation_failure": -80,
        "mcp_omission": -45,
        "unused_variables": -20,
    }
    s = ledger.score()
    assert s["total_score"] == 285
    assert s["lifetime_score"] == 2847
    assert s["rewards_total"] == 450 and s["penalties_total"] == -165
    assert s["learning_efficiency"] == 73.17
    txs = ledger.transactions(10)
    assert [t.category for t in txs[:2]] == ["zero_duplication", "file_creation_violation"]
    assert txs[0].running_total == 285
    # importing the same file again changes nothing
    again = ledger.import_progress(DATA / "progress.json")
    assert again["imported"] == 0 and again["already_present"] == 2
    assert again["changed"] is False and "nothing to import" in again["message"]
    assert ledger.score()["total_score"] == 285
    assert ledger.verify()["ok"]


def test_round_trip_export_import(ledger: Ledger, tmp_path: Path, pg_or_sqlite_second) -> None:
    ledger.record("successful_validation", "a")
    ledger.record("validation_failure", "b")
    ledger.export_progress(tmp_path / "p.json")
    other = pg_or_sqlite_second
    other.import_progress(tmp_path / "p.json")
    assert other.score()["total_score"] == ledger.score()["total_score"]


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.pop("reinforcement_learning_ledger"), "document"),
        (lambda d: d["transaction_log"][0].update(id="1697181000"), "transaction_log[0].id"),
        (
            lambda d: d["transaction_log"][0].update(category="made_up"),
            "transaction_log[0].category",
        ),
        (lambda d: d["transaction_log"][0].update(points=-25), "transaction_log[0].points"),
        (lambda d: d["transaction_log"][0].update(points=2.5), "transaction_log[0].points"),
        (
            lambda d: d["transaction_log"][1].update(timestamp="yesterday"),
            "transaction_log[1].timestamp",
        ),
        (
            lambda d: d["transaction_log"].extend([d["transaction_log"][0]] * 1000),
            "transaction_log",
        ),
        (
            lambda d: d["reinforcement_learning_ledger"]["rewards"].update(total_earned=-1),
            "reinforcement_learning_ledger.rewards.total_earned",
        ),
    ],
)
def test_bad_progress_files_change_nothing(ledger: Ledger, tmp_path: Path, mutate, field) -> None:
    doc = json.loads((DATA / "progress.json").read_text())
    mutate(doc)
    path = tmp_path / "progress.json"
    path.write_text(json.dumps(doc))
    head = ledger.p.log.head()
    with pytest.raises(ValidationError) as err:
        ledger.import_progress(path)
    assert err.value.field == field
    assert err.value.where == str(path)
    assert ledger.p.log.head() == head


def test_truncated_progress_file(ledger: Ledger, tmp_path: Path) -> None:
    text = (DATA / "progress.json").read_text()
    path = tmp_path / "progress.json"
    path.write_text(text[: len(text) // 2])
    with pytest.raises(ValidationError, match="malformed at line"):
        ledger.import_progress(path)
    assert ledger.p.log.head().length == 0


def test_identical_entries_count_once(ledger: Ledger, tmp_path: Path) -> None:
    doc = json.loads((DATA / "progress.json").read_text())
    doc["transaction_log"].append(dict(doc["transaction_log"][0]))
    path = tmp_path / "progress.json"
    path.write_text(json.dumps(doc))
    r = ledger.import_progress(path)
    assert r["imported"] == 2 and r["duplicates_in_file"] == 1
    assert ledger.score()["total_score"] == 285
