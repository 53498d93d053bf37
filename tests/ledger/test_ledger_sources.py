"""Source records: import from a memory bank, reconcile against them, recover what is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plaudit.errors import ValidationError
from plaudit.ledger import Ledger


def test_import_sources_reads_all_four_files(ledger: Ledger, memory_bank: Path) -> None:
    r = ledger.import_sources(memory_bank)
    assert r.files == {
        "mistakes.json": 3,
        "systemPatterns.json": 3,
        "memory.json": 2,
        "activeContext.json": 2,
    }
    assert r.appended == 10 and r.missing == []
    again = ledger.import_sources(memory_bank)
    assert again.appended == 0 and again.unchanged == 10
    # a changed record is a new version; the latest is what cross-references see
    doc = json.loads((memory_bank / "mistakes.json").read_text())
    doc["error_patterns"][1]["resolved"] = True
    (memory_bank / "mistakes.json").write_text(json.dumps(doc))
    assert ledger.import_sources(memory_bank).appended == 1
    assert ledger.record("autonomous_recovery", "fixed it", source="mistake:m-002").verified


def test_single_chain_active_context(ledger: Ledger, tmp_path: Path) -> None:
    (tmp_path / "activeContext.json").write_text(
        json.dumps({"mcp_integration": {"calls_made": ["filesystem", "git"]}})
    )
    r = ledger.import_sources(tmp_path)
    assert r.files == {"activeContext.json": 1}
    assert "mistakes.json" in r.missing
    assert ledger.record("mcp_integration", "chain", source="mcp_chain:current").verified


@pytest.mark.parametrize(
    ("file", "content", "needle"),
    [
        ("mistakes.json", '{"error_patterns": [', "malformed at line 1"),
        ("mistakes.json", '{"error_patterns": {"a": 1}}', "must be an array"),
        ("mistakes.json", '{"error_patterns": [1]}', "error_patterns[0]"),
        ("mistakes.json", '[{"id": "x"}]', "top level must be an object"),
        ("systemPatterns.json", '{"successful_patterns": [{"id": "a"}, {"id": "a"}]}', "repeats"),
        ("memory.json", b"\xff\xfe", "not UTF-8"),
    ],
)
def test_bad_source_files_change_nothing(
    ledger: Ledger, memory_bank: Path, file: str, content, needle: str
) -> None:
    path = memory_bank / file
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    head = ledger.p.log.head()
    with pytest.raises(ValidationError) as err:
        ledger.import_sources(memory_bank)
    assert needle in str(err.value) and file in str(err.value)
    assert ledger.p.log.head() == head


def test_reconcile_and_recover_missing(sourced: Ledger) -> None:
    # m-001 declares -10, m-002 declares -40, m-003 declares -15; patterns declare 100 and 60
    sourced.record("file_creation_violation", "dup file", source="mistake:m-001")
    sourced.record("validation_failure", "tests", source="mistake:m-002")
    sourced.record("autonomous_recovery", "recovered", source="mistake:m-001")  # reward side
    sourced.record(
        "constitutional_compliance", "x", source="pattern:p-update-not-create", points=120
    )
    r = sourced.reconcile()
    assert not r["ok"]
    status = {(m["kind"], m["key"]): m for m in r["records"]}
    assert status[("mistake", "m-001")]["status"] == "ok"
    assert status[("mistake", "m-002")]["difference"] == -20
    assert status[("mistake", "m-002")]["status"] == "missing"
    assert status[("mistake", "m-003")]["status"] == "missing"
    assert status[("pattern", "p-update-not-create")]["status"] == "excess"
    assert status[("pattern", "p-draft")]["status"] == "undeclared"
    assert status[("entity", "pagination-cursor-fix")]["status"] == "missing"
    total_before = sourced.score()["total_score"]
    rec = sourced.recover_missing()
    created = {t["source"]: t for t in rec["transactions"]}
    assert created["mistake:m-002"]["points"] == -20
    assert created["mistake:m-003"]["points"] == -15
    # booked under the mistake's own category (mcp_omission), at its occurred_at
    assert created["mistake:m-003"]["category"] == "mcp_omission"
    assert created["mistake:m-003"]["timestamp"].startswith("2025-10-14T03:41:00")
    assert created["pattern:p-validate-before-commit"]["points"] == 60
    assert created["entity:pagination-cursor-fix"]["category"] == "pattern_reuse"
    assert all(t["kind"] == "recovery" and t["verified"] for t in created.values())
    assert sourced.score()["total_score"] == total_before + sum(
        t["points"] for t in created.values()
    )
    # recovery is idempotent: nothing is missing any more
    assert sourced.recover_missing()["recovered"] == 0
    after = sourced.reconcile()
    assert [m["status"] for m in after["mismatches"]] == ["excess"]
    incidents = [e.payload for e in sourced.p.log.replay(types=["plaudit.ledger.incident"])]
    kinds = [i["kind"] for i in incidents]
    assert "missing_transaction" in kinds and kinds.count("missing_transaction") == 1


def test_maybe_reconcile_every_10_transactions_and_hourly(sourced: Ledger) -> None:
    assert sourced.maybe_reconcile() is None  # nothing recorded yet
    counts = []
    for i in range(25):
        sourced.record("zero_duplication", f"r{i}")
        with sourced.p.backend.read() as tx:
            counts.append(int(tx.scalar("SELECT last_reconcile_count FROM ledger_state")))
    # the library reconciled by itself: on the first write (never before), then every 10
    assert counts[0] == 1 and counts[9] == 1 and counts[10] == 11 and counts[20] == 21
    assert sourced.maybe_reconcile() is None
    sourced.record("zero_duplication", "one more")
    with sourced.p.backend.read() as tx:
        last = int(tx.scalar("SELECT last_reconcile_ms FROM ledger_state"))
    assert sourced.maybe_reconcile(now=last + 3_600_000) is not None
