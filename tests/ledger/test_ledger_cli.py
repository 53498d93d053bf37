"""`plaudit ledger ...`: every command end to end, and clear errors instead of tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

from ledger_helpers import DATA


def test_record_score_transactions(cli) -> None:
    code, out, _ = cli("ledger", "record", "-c", "successful_validation", "-a", "suite passed")
    assert code == 0 and "+30" in out
    code, out, _ = cli(
        "ledger", "record", "-c", "validation_failure", "-a", "broke", "--key", "k1", "--json"
    )
    t = json.loads(out)
    assert t["points"] == -20 and t["running_total"] == 10 and t["id"] == "k1"
    code, out, _ = cli("ledger", "score", "--json")
    s = json.loads(out)
    assert {"total_score", "session_score", "lifetime_score"} <= set(s)
    assert s["total_score"] == 10
    code, out, _ = cli("ledger", "transactions", "--json", "--limit", "1")
    assert [t["id"] for t in json.loads(out)["transactions"]] == ["k1"]
    code, out, _ = cli("ledger", "transactions", "-c", "successful_validation", "--json")
    assert [t["category"] for t in json.loads(out)["transactions"]] == ["successful_validation"]
    code, out, _ = cli("ledger", "breakdown", "--json")
    assert json.loads(out)["penalties"] == {"validation_failure": -20}
    code, out, _ = cli("ledger", "metrics", "--json")
    assert json.loads(out)["learning_efficiency"] == 60.0
    code, out, _ = cli("ledger", "verify", "--json")
    assert code == 0 and json.loads(out)["ok"] is True


def test_bad_input_gives_clear_errors(cli) -> None:
    cases = [
        (("-c", "nope", "-a", "x"), "unknown category 'nope'"),
        (("-c", "validation_failure", "-a", "x", "--points", "5"), "must be negative"),
        (("-c", "validation_failure", "-a", "x", "--source", "mistake:none"), "does not exist"),
        (("-c", "validation_failure", "-a", "x", "--source", "bad"), "is not KIND:ID"),
    ]
    for args, needle in cases:
        code, out, err = cli("ledger", "record", *args)
        assert code != 0 and err.startswith("error: ") and needle in err, err
        assert "Traceback" not in err
    code, out, err = cli("ledger", "record", "-c", "x", "-a", "y", "--points", "many")
    assert code == 2 and "Traceback" not in err
    code, out, _ = cli("ledger", "score", "--json")
    assert json.loads(out)["transactions"] == 0


def test_record_batch_from_stdin_file(cli, tmp_path: Path) -> None:
    good = tmp_path / "batch.jsonl"
    good.write_text(
        '{"category": "pattern_reuse", "action": "a"}\n'
        '{"category": "unused_variables", "action": "b"}\n'
    )
    code, out, _ = cli("ledger", "record-batch", str(good), "--json")
    assert code == 0 and json.loads(out)["recorded"] == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"category": "pattern_reuse", "action": "a"}\n{"category": \n')
    code, _, err = cli("ledger", "record-batch", str(bad))
    assert code == 2 and f"error: {bad}:2: input: malformed JSON" in err
    code, out, _ = cli("ledger", "score", "--json")
    assert json.loads(out)["total_score"] == 15


def test_sources_reconcile_progress_backup(cli, memory_bank: Path, tmp_path: Path) -> None:
    # the records only: what they declare is then missing, for `reconcile --recover` to book
    code, out, _ = cli("ledger", "import-sources", str(memory_bank), "--no-book", "--json")
    assert code == 0 and json.loads(out)["appended"] == 10
    cli("ledger", "sessions", "start", "--session", "s1")
    cli("ledger", "record", "-c", "validation_failure", "-a", "x", "--source", "mistake:m-002")
    code, out, _ = cli("ledger", "reconcile", "--recover", "--json")
    r = json.loads(out)
    assert r["recovery"]["recovered"] >= 1
    code, out, _ = cli("ledger", "sessions", "end", "--json")
    assert json.loads(out)["open"] is False
    code, out, _ = cli("ledger", "sessions", "list", "--json")
    assert [s["session_id"] for s in json.loads(out)["sessions"]] == ["s1"]
    progress = tmp_path / "progress.json"
    code, out, _ = cli("ledger", "export-progress", str(progress))
    assert code == 0 and json.loads(progress.read_text())["transaction_log"]
    backup = tmp_path / "b.jsonl"
    assert cli("ledger", "backup", str(backup))[0] == 0
    code, _, err = cli("ledger", "restore", str(DATA / "progress.json"))
    assert code == 2 and "not a plaudit backup header" in err
    code, out, _ = cli("ledger", "report", "--period", "weekly")
    assert code == 0 and out.startswith("# Ledger weekly compliance report")
    code, out, _ = cli("ledger", "report", "--format", "json")
    assert json.loads(out)["period"] == "daily"
    code, out, _ = cli("ledger", "apply-rules", "--json")
    assert code == 0 and json.loads(out)["created"] == 0


def test_import_progress_reports_opening_balance(cli) -> None:
    code, out, _ = cli("ledger", "import-progress", str(DATA / "progress.json"))
    assert code == 0 and "opening balance +200 constitutional_compliance" in out
    assert "opening balance -80 validation_failure" in out
    code, out, _ = cli("ledger", "score", "--json")
    assert json.loads(out)["total_score"] == 285


def test_audit_and_halt_from_the_cli(cli, db_url: str) -> None:
    from ledger_helpers import raw_sql

    from plaudit import Plaudit

    cli("ledger", "record", "-c", "pattern_reuse", "-a", "a")
    with Plaudit.open(db_url) as p:
        raw_sql(p, "UPDATE ledger_state SET total = 999")
    code, _, err = cli("ledger", "record", "-c", "pattern_reuse", "-a", "b")
    assert code == 5 and "halted" in err and "plaudit ledger audit" in err
    code, out, _ = cli("ledger", "verify")
    assert code == 5 and "MISMATCH" in out
    code, out, _ = cli("ledger", "audit")
    assert code == 0 and "6 resume" in out
    code, out, _ = cli("ledger", "record", "-c", "pattern_reuse", "-a", "b", "--json")
    assert code == 0 and json.loads(out)["running_total"] == 40
    code, out, _ = cli("ledger", "incidents", "--json")
    assert [i["kind"] for i in json.loads(out)["incidents"]] == ["audit", "checksum_mismatch"]


def test_config_option(cli, tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[categories.code_review]\ntype = "reward"\npoints = 3\n')
    code, out, _ = cli("ledger", "--config", str(cfg), "record", "-c", "code_review", "-a", "x")
    assert code == 0 and "+3" in out
    bad = tmp_path / "bad.toml"
    bad.write_text('[categories.x]\ntype = "reward"\npoints = -3\n')
    code, _, err = cli("ledger", "--config", str(bad), "score")
    assert code == 2 and "categories.x.points" in err and "wrong sign" in err
