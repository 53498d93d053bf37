"""Issue 15: each numbered defect, reproduced, then the behaviour that replaces it."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from ledger_helpers import DATA, ledger_with, payload_set, raw_sql

from plaudit import Plaudit
from plaudit.errors import IntegrityError, ValidationError
from plaudit.ledger import Ledger
from plaudit.ledger.progress import validate_document

HALT = "[reconcile]\non_mismatch = 'halt'\n"
WARN = "[reconcile]\non_mismatch = 'warn'\n"


# -- 1. tampering before the newest checkpoint -------------------------------------------------
def test_1_tampering_before_the_checkpoint_halts_the_write_path(pl: Plaudit, cli) -> None:
    lg = pl.ledger
    txs = lg.record_batch([{"category": "pattern_reuse", "action": f"a{i}"} for i in range(300)])
    assert lg.checksum().checkpoint_seq is not None  # a checkpoint after the 250th
    victim = txs[4]
    raw_sql(
        pl, f"UPDATE plaudit_events SET {payload_set(pl, 'points', 500)} WHERE seq = {victim.seq}"
    )
    code, _, err = cli("ledger", "record", "-c", "pattern_reuse", "-a", "after the edit")
    assert code == 5
    assert f"position {victim.seq}" in err and "plaudit ledger backup" in err
    code, out, _ = cli("ledger", "score", "--json")
    s = json.loads(out)
    assert s["verified"] is False and s["log"]["first_bad"] == victim.seq
    assert cli("log", "verify")[0] != 0 and cli("ledger", "verify")[0] == 5


def test_1_http_and_dashboard_flag_follow_the_log(pl: Plaudit) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from plaudit.server.app import create_app

    pl.ledger.record_batch([{"category": "pattern_reuse", "action": f"a{i}"} for i in range(5)])
    client = TestClient(create_app(pl))
    assert client.get("/v1/ledger/score").json()["verified"] is True
    raw_sql(pl, f"UPDATE plaudit_events SET {payload_set(pl, 'points', 7)} WHERE seq = 2")
    body = client.get("/v1/ledger/score").json()  # what the dashboard's badge reads
    assert body["verified"] is False and "rechain" in body["next"]


# -- 3. reconciliation -----------------------------------------------------------------------
def test_3_mismatch_opens_an_incident_halts_and_cli_exits_1(
    pl: Plaudit, memory_bank: Path, cli, tmp_path: Path
) -> None:
    lg = pl.ledger
    lg.import_sources(memory_bank, book=False)  # the records only: what they declare is missing
    code, out, _ = cli("ledger", "reconcile")
    assert code == 1 and "HALTED" in out and "reconcile --recover" in out
    assert [i["kind"] for i in lg.incidents()] == ["reconcile_mismatch"]
    with pytest.raises(IntegrityError, match="reconcile --recover"):
        lg.record("pattern_reuse", "refused while mismatched")
    # the way forward: book what is missing, correct what is in excess; a clean run resumes
    code, out, _ = cli("ledger", "reconcile", "--recover", "--correct")
    assert code == 0, out
    assert lg.score()["halted"] is False
    lg.record("zero_duplication", "recording again", source="mistake:m-001")


def test_3_warn_mode_records_the_incident_once_and_keeps_recording(
    pl: Plaudit, memory_bank: Path, tmp_path: Path
) -> None:
    lg = ledger_with(pl, tmp_path, WARN)
    lg.import_sources(memory_bank, book=False)
    r = lg.reconcile()
    assert not r["ok"] and not r["halted"] and r["mode"] == "warn"
    lg.reconcile()  # the same mismatches: no second incident
    assert [i["kind"] for i in lg.incidents()] == ["reconcile_mismatch"]
    lg.record("pattern_reuse", "still recording")


def test_3_deleted_source_record_is_detected(
    pl: Plaudit, memory_bank: Path, tmp_path: Path
) -> None:
    lg = ledger_with(pl, tmp_path, WARN)
    lg.import_sources(memory_bank, book=False)
    lg.record("validation_failure", "tests", source="mistake:m-002")
    doc = json.loads((memory_bank / "mistakes.json").read_text())
    doc["error_patterns"] = [m for m in doc["error_patterns"] if m["id"] != "m-002"]
    (memory_bank / "mistakes.json").write_text(json.dumps(doc))
    assert lg.import_sources(memory_bank, book=False).removed == 1
    r = lg.reconcile()
    gone = [m for m in r["mismatches"] if m["key"] == "m-002"]
    assert gone and gone[0]["status"] == "deleted" and gone[0]["ledger"] == -20
    with pytest.raises(Exception, match="does not exist"):
        lg.record("validation_failure", "again", source="mistake:m-002")
    fixed = lg.correct()
    assert fixed["corrected"] >= 1
    assert not [m for m in lg.reconcile()["mismatches"] if m["key"] == "m-002"]


def test_3_audit_includes_the_source_files(pl: Plaudit, memory_bank: Path, tmp_path: Path) -> None:
    lg = ledger_with(pl, tmp_path, WARN)
    lg.import_sources(memory_bank, book=False)
    # m-002 declares -40: an excess, which re-reading the memory bank does not book away
    lg.record("validation_failure", "excess", source="mistake:m-002", points=-60)
    r = lg.audit(tmp_path / "audits", sources_dir=memory_bank)
    assert r["steps"]["identify"]["sources"]["ok"] is False
    assert r["steps"]["export"]["sources"] == [
        "mistakes.json",
        "systemPatterns.json",
        "memory.json",
        "activeContext.json",
    ]
    copied = tmp_path / "audits" / f"audit-{r['audit']}-sources" / "mistakes.json"
    assert copied.read_text() == (memory_bank / "mistakes.json").read_text()


# -- 4. source triggers ------------------------------------------------------------------------
def test_4_memory_observations_and_mcp_calls_made_trigger_rewards(
    pl: Plaudit, tmp_path: Path
) -> None:
    bank = tmp_path / "bank"
    bank.mkdir()
    (bank / "memory.json").write_text(
        json.dumps(
            {
                "entities": [
                    {
                        "name": "cursor-fix",
                        "observations": [
                            "Pattern successfully applied in api/users.py",
                            "Pattern successfully applied in api/orders.py",
                            "Reviewed",
                        ],
                    },
                    {"name": "fact", "observations": ["Tests live in tests/"]},
                ]
            }
        )
    )
    (bank / "activeContext.json").write_text(
        json.dumps({"mcp_integration": {"calls_made": ["filesystem", "memory", "git"]}})
    )
    lg = ledger_with(pl, tmp_path, WARN)
    lg.import_sources(bank)  # the import books the triggers (issue 31)
    declared = {(m["kind"], m["key"]): m["declared"] for m in lg.reconcile()["records"]}
    assert declared[("entity", "cursor-fix")] == 40  # 2 x pattern reuse (+20)
    assert declared[("entity", "fact")] == 0
    assert declared[("mcp_chain", "current")] == 10  # MCP integration (+10)
    booked = [(t.source, t.category, t.points) for t in lg.transactions(10)]
    assert sorted(booked) == [
        ("entity:cursor-fix", "pattern_reuse", 20),
        ("entity:cursor-fix", "pattern_reuse", 20),
        ("mcp_chain:current", "mcp_integration", 10),
    ]
    assert lg.reconcile()["ok"] and lg.recover_missing()["recovered"] == 0
    with pytest.raises(ValidationError, match="Pattern successfully applied"):
        lg.record("pattern_reuse", "no such observation", source="entity:fact")


def test_4_trigger_points_are_configurable(pl: Plaudit, tmp_path: Path) -> None:
    bank = tmp_path / "bank"
    bank.mkdir()
    (bank / "activeContext.json").write_text(
        json.dumps({"mcp_integration": {"calls_made": ["git"]}})
    )
    lg = ledger_with(
        pl,
        tmp_path,
        WARN + "[categories.mcp_integration]\ntype='reward'\npoints=12\nsource='mcp_chain'\n",
    )
    lg.import_sources(bank)
    assert lg.reconcile()["records"][0]["declared"] == 12


def test_4_mcp_chain_with_empty_calls_made_is_refused(pl: Plaudit, tmp_path: Path) -> None:
    bank = tmp_path / "bank"
    bank.mkdir()
    (bank / "activeContext.json").write_text(json.dumps({"mcp_integration": {"calls_made": []}}))
    lg = ledger_with(pl, tmp_path, WARN)
    lg.import_sources(bank)
    with pytest.raises(ValidationError, match="non-empty calls_made"):
        lg.record("mcp_integration", "nothing called", source="mcp_chain:current")


# -- 5. progress.json --------------------------------------------------------------------------
def _sides(doc: dict) -> tuple[int, int]:
    led = doc["reinforcement_learning_ledger"]
    return sum(led["rewards"]["by_category"].values()), sum(
        led["penalties"]["by_category"].values()
    )


def test_5_seed_example_keeps_its_categories_session_metrics_and_ids(ledger: Ledger) -> None:
    ledger.import_progress(DATA / "progress.json")
    doc = ledger.progress()
    validate_document(doc, "export")
    seed = json.loads((DATA / "progress.json").read_text())
    led, want = doc["reinforcement_learning_ledger"], seed["reinforcement_learning_ledger"]
    assert _sides(doc) == (450, -165)  # was 295 and -10
    assert led["rewards"]["by_category"] == want["rewards"]["by_category"]
    assert led["penalties"]["by_category"] == want["penalties"]["by_category"]
    for key in ("total_score", "session_score", "lifetime_score"):
        assert led[key] == want[key], key
    for side, keys in (
        ("rewards", ("total_earned", "session_earned", "lifetime_earned")),
        ("penalties", ("total_incurred", "session_incurred", "lifetime_incurred")),
    ):
        assert {k: led[side][k] for k in keys} == {k: want[side][k] for k in keys}
    m = led["metrics"]
    assert (m["actions_total"], m["actions_successful"], m["actions_failed"]) == (45, 33, 12)
    assert m["autonomy_level"] == 97.85
    newest = [e for e in doc["transaction_log"] if e["id"].startswith("tx-16971")]
    assert [e["id"] for e in newest] == ["tx-1697181000", "tx-1697180940"]
    assert newest[0]["timestamp"] == "2025-10-13T12:24:00+05:30"
    assert newest[0]["source_file"] == "mistakes.json" and newest[0]["verified"] is True


def test_5_reimporting_the_own_export_changes_nothing(ledger: Ledger, tmp_path: Path) -> None:
    ledger.import_progress(DATA / "progress.json")
    ledger.export_progress(tmp_path / "out.json")
    head = ledger.p.log.head()
    r = ledger.import_progress(tmp_path / "out.json")
    assert r["changed"] is False and "nothing to import" in r["message"]
    assert ledger.p.log.head() == head
    s = ledger.score()
    assert (s["total_score"], s["lifetime_score"]) == (285, 2847)  # was 570 and doubled


def _strip(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    doc.pop("last_updated")
    doc["reinforcement_learning_ledger"]["checksum_validation"].pop("last_validated")
    return doc


def test_5_round_trip_import_export_import_export(ledger: Ledger, tmp_path: Path) -> None:
    ledger.import_progress(DATA / "progress.json")
    first = tmp_path / "first.json"
    ledger.export_progress(first)
    with Plaudit.open(tmp_path / "second.db") as other:
        other.ledger.import_progress(first)
        second = tmp_path / "second.json"
        other.ledger.export_progress(second)
    a, b = json.loads(first.read_text()), json.loads(second.read_text())
    assert _strip(a) == _strip(b)


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (
            lambda d: d["transaction_log"][0].update(running_total=250),
            "transaction_log[0].running_total",
        ),
        (
            lambda d: d["reinforcement_learning_ledger"]["checksum_validation"].update(
                is_valid=False
            ),
            "reinforcement_learning_ledger.checksum_validation.is_valid",
        ),
        (
            lambda d: d["reinforcement_learning_ledger"]["rewards"]["by_category"].update(
                zero_duplication=60
            ),
            "reinforcement_learning_ledger.rewards.by_category",
        ),
    ],
)
def test_5_inconsistent_file_is_refused_or_accepted_with_an_incident(
    ledger: Ledger, tmp_path: Path, mutate, path: str
) -> None:
    doc = json.loads((DATA / "progress.json").read_text())
    mutate(doc)
    f = tmp_path / "progress.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(ValidationError) as err:
        ledger.import_progress(f)
    assert err.value.field == path and "--accept-inconsistent" in err.value.reason
    assert ledger.p.log.head().length == 0
    r = ledger.import_progress(f, accept_inconsistent=True)
    assert r["inconsistency"]["path"] == path
    assert [i["kind"] for i in ledger.incidents()] == ["inconsistent_import"]
    b = ledger.breakdown()
    s = ledger.score()
    assert sum(b["rewards"].values()) + sum(b["penalties"].values()) == s["total_score"]


def test_5_reward_typed_in_a_penalty_category_is_refused(ledger: Ledger, tmp_path: Path) -> None:
    doc = json.loads((DATA / "progress.json").read_text())
    doc["transaction_log"][1].update(type="reward", points=20)
    f = tmp_path / "progress.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(ValidationError) as err:
        ledger.import_progress(f)
    assert err.value.field == "transaction_log[1].type"


# -- 6. recovery -------------------------------------------------------------------------------
def test_6_recovery_books_the_mistakes_own_category_and_date(
    pl: Plaudit, memory_bank: Path, tmp_path: Path
) -> None:
    lg = ledger_with(pl, tmp_path, WARN)
    lg.import_sources(memory_bank, book=False)
    booked = {t["source"]: t for t in lg.recover_missing()["transactions"]}
    m1 = booked["mistake:m-001"]  # category constitutional_violation, occurred 12:23 +05:30
    assert m1["category"] == "file_creation_violation"
    assert m1["timestamp"] == "2025-10-13T06:53:00.000+00:00"
    assert booked["mistake:m-002"]["category"] == "validation_failure"
    assert booked["mistake:m-003"]["category"] == "mcp_omission"


def test_6_recover_on_a_healthy_ledger_records_nothing(ledger: Ledger) -> None:
    ledger.record("pattern_reuse", "fine")
    head = ledger.p.log.head()
    r = ledger.recover()
    assert r["whole"] and not r["incident_recorded"] and not r["projection_rebuilt"]
    assert ledger.incidents() == [] and ledger.p.log.head() == head


def test_6_recover_lifts_the_halt_once_whole(ledger: Ledger) -> None:
    ledger.record_batch([{"category": "pattern_reuse", "action": f"a{i}"} for i in range(4)])
    raw_sql(ledger.p, "UPDATE ledger_state SET total = total + 3")
    with pytest.raises(IntegrityError, match="plaudit ledger recover"):
        ledger.record("pattern_reuse", "refused")
    assert ledger.score()["halted"]
    r = ledger.recover()
    assert r["resumed"] and r["whole"] and not r["remaining"]
    s = ledger.score()
    assert not s["halted"] and s["halt_reason"] is None and s["verified"]
    assert ledger.record("pattern_reuse", "again").running_total == 100
    assert [i["kind"] for i in ledger.incidents()] == ["checksum_mismatch", "checksum_mismatch"]


# -- 7. scheduled work, in the library -------------------------------------------------------
def test_7_backups_every_n_transactions_rotated(pl: Plaudit, tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    lg = ledger_with(
        pl, tmp_path, f"[backup]\ndir = '{folder}'\nevery_transactions = 5\nkeep = 2\n"
    )
    for i in range(16):
        lg.record("pattern_reuse", f"a{i}")
    names = sorted(f.name for f in folder.iterdir())
    assert "notes.txt" in names  # never anything plaudit did not write
    ours = [n for n in names if n.startswith("ledger-backup-")]
    assert len(ours) == 2
    with Plaudit.open(tmp_path / "copy.db") as copy:
        copy.ledger.restore(folder / ours[-1])
        assert copy.ledger.score()["total_score"] == 15 * 20


def test_7_reports_and_weekly_audit_on_schedule(pl: Plaudit, tmp_path: Path, cli) -> None:
    folder = tmp_path / "reports"
    lg = ledger_with(pl, tmp_path, f"[reports]\ndir = '{folder}'\n")
    lg.record("pattern_reuse", "x")
    later = int(datetime(2099, 1, 15, tzinfo=UTC).timestamp() * 1000)
    done = lg.run_scheduled(now=later)
    assert sorted(done["reports"]) == [
        "ledger-daily-2099-01-14.md",
        "ledger-monthly-2098-12-01.md",
        "ledger-weekly-2099-01-05.md",
    ]
    assert "audit" in done  # a week has passed without one
    assert (folder / "ledger-daily-2099-01-14.md").read_text().startswith("# Ledger daily")
    again = lg.run_scheduled(now=later)
    assert "reports" not in again and "audit" not in again
    code, out, _ = cli("ledger", "watch", "--once", "--json")
    assert code == 0 and isinstance(json.loads(out), dict)


def test_7_halt_mode_is_the_default_and_documented(tmp_path: Path) -> None:
    from plaudit.ledger.config import load_config
    from plaudit.ledger.halts import WAY_FORWARD

    assert load_config().schedule.on_mismatch == "halt"
    docs = (Path(__file__).parents[2] / "docs" / "ledger.md").read_text()
    for kind in WAY_FORWARD:
        assert f"`{kind}`" in docs, kind
    shutil.rmtree(tmp_path, ignore_errors=True)
