"""Issue 31: the defects a new user met, each reproduced as it was reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plaudit import Plaudit
from plaudit.ledger import Ledger


def _config(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_text(text)
    return path


# -- item 5: exit codes that hide trouble -------------------------------------------------------
def test_watch_once_exits_1_when_its_reconciliation_halts_recording(
    db_url: str, tmp_path: Path, memory_bank: Path, cli
) -> None:
    """`ledger reconcile` exits 1 on a mismatch; `ledger watch --once` exited 0 when the same
    reconciliation, run on its schedule, halted recording."""
    never = "[reconcile]\nevery_transactions = 0\nevery_seconds = 0\n"
    quiet = _config(tmp_path, "quiet.toml", never)
    with Plaudit.open(db_url) as p:
        lg = Ledger(p, quiet)
        lg.import_sources(memory_bank)
        lg.record("validation_failure", "pytest failed", source="mistake:m-002")
    # The record the ledger holds points for is deleted from its file.
    mistakes = json.loads((memory_bank / "mistakes.json").read_text())
    mistakes["error_patterns"] = [m for m in mistakes["error_patterns"] if m["id"] != "m-002"]
    (memory_bank / "mistakes.json").write_text(json.dumps(mistakes))
    watched = _config(
        tmp_path,
        "watch.toml",
        f"[reconcile]\nevery_transactions = 1\nsources_dir = '{memory_bank}'\n"
        "[audit]\nevery_days = 0\n",
    )
    code, out, _ = cli("ledger", "--config", str(watched), "watch", "--once", "--json")
    assert code == 1
    assert json.loads(out)["reconcile"] == {"ok": False, "halted": True}
    code, _, _ = cli("ledger", "--config", str(watched), "reconcile")
    assert code == 1  # the command it stands for says the same
    code, out, _ = cli("ledger", "--config", str(watched), "watch", "--once")
    assert code == 0 and out.strip() == "nothing was due"


# -- item 6: the documented way forward is complete as written -----------------------------------
def _add_rows_behind_plaudits_back(p: Plaudit, gap: int) -> None:
    """A row beyond the head, `gap` positions after it (with 1 nothing can be appended at
    all; further out, the halt itself is written before the added row is reached)."""
    import hashlib

    from ledger_helpers import raw_exec

    head = p.log.head()
    body = "\x1f".join(("extra", "x.thing.v1", "1", "s", "t", "{}", "{}")).encode()
    raw_exec(
        p,
        "INSERT INTO plaudit_events (seq, id, type, ts_ms, session_id, source, payload, meta, "
        "content_digest, hash) VALUES (?, 'extra', 'x.thing.v1', 1, 's', 't', '{}', '{}', ?, ?)",
        (head.length + gap, b"\0" * 32, hashlib.sha256(bytes.fromhex(head.hash) + body).digest()),
    )


def _edit_a_transaction(p: Plaudit, seq: int) -> None:
    from ledger_helpers import payload_set, raw_sql

    raw_sql(p, f"UPDATE plaudit_events SET {payload_set(p, 'points', 3000)} WHERE seq = {seq}")


def _documented_steps(kind: str) -> list[list[str]]:
    """The commands the halt's message (and docs/ledger.md's table) give, as written."""
    import re
    import shlex

    from plaudit.ledger.halts import WAY_FORWARD

    docs = (Path(__file__).parents[2] / "docs" / "ledger.md").read_text()
    commands = [
        c for c in re.findall(r"`(plaudit [^`]*)`", WAY_FORWARD[kind]) if "FILE" in c or "NEW" in c
    ]
    row = next(line for line in docs.splitlines() if line.startswith(f"| `{kind}` |"))
    for command in commands:
        assert f"`{command}`" in row, (kind, command)
    return [shlex.split(c)[1:] for c in commands]


@pytest.mark.parametrize(
    ("damage", "kind"),
    [
        ("rows added at the head", "log_extra"),
        ("rows added further out", "log_extra"),
        ("a transaction edited", "log"),
    ],
)
def test_the_documented_way_forward_works_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, damage: str, kind: str
) -> None:
    """Issue 31: after rows were added behind plaudit's back the docs said "restore into a new
    store and carry on", but the new store started halted until `ledger audit` ran."""
    from plaudit.cli import main
    from plaudit.errors import IntegrityError

    old, new, file = tmp_path / "old.db", tmp_path / "new.db", tmp_path / "backup.jsonl"
    with Plaudit.open(old) as p:
        txs = p.ledger.record_batch(
            [{"category": "successful_validation", "action": f"step {i}"} for i in range(5)]
        )
        if kind == "log":
            _edit_a_transaction(p, txs[2].seq)
        else:
            _add_rows_behind_plaudits_back(p, 1 if damage.endswith("head") else 5)
        with pytest.raises(IntegrityError, match="Next: "):
            p.ledger.record("successful_validation", "refused")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLAUDIT_DB", str(old))
    for args in _documented_steps(kind):
        args = [str(file) if a == "FILE" else str(new) if a == "NEW" else a for a in args]
        code = main(args)
        assert code == 0, (args, capsys.readouterr())
    capsys.readouterr()
    # ... and carry on with NEW
    assert (
        main(["--db", str(new), "ledger", "record", "-c", "successful_validation", "-a", "on"]) == 0
    )
    assert main(["--db", str(new), "ledger", "verify"]) == 0
    with Plaudit.open(new) as p:
        score = p.ledger.score()
        assert score["verified"] and not score["halted"]
        assert score["total_score"] == 6 * 30


# -- item 4: the memory bank's triggers are booked as what they are ------------------------------
def test_import_sources_books_the_seeds_cross_file_triggers(
    db_url: str, memory_bank: Path, cli
) -> None:
    """They were booked only by `reconcile --recover`, labelled "recovery: ... the ledger held
    0"; each is now booked at import under its own category, with the trigger as the action."""
    code, out, _ = cli("ledger", "import-sources", str(memory_bank))
    assert code == 0 and "booked 9 transactions (+155)" in out
    code, out, _ = cli("ledger", "transactions", "-n", "20", "--json")
    booked = {
        (t["source"], t["category"], t["points"], t["action"])
        for t in json.loads(out)["transactions"]
    }
    assert booked == {
        (
            "mistake:m-001",
            "file_creation_violation",
            -10,
            "mistakes.json m-001: Attempted to "
            "create duplicate test_naukri_unified_20.py instead of updating the existing test",
        ),
        (
            "mistake:m-002",
            "validation_failure",
            -40,
            "mistakes.json m-002: pytest tests/api failed: 3 assertions on the pagination cursor",
        ),
        (
            "mistake:m-003",
            "mcp_omission",
            -15,
            "mistakes.json m-003: Edited files without consulting the memory MCP server first",
        ),
        (
            "pattern:p-update-not-create",
            "constitutional_compliance",
            100,
            "systemPatterns.json "
            "p-update-not-create: Update the existing test instead of creating a new file",
        ),
        (
            "pattern:p-validate-before-commit",
            "constitutional_compliance",
            60,
            "systemPatterns.json "
            "p-validate-before-commit: Run the validation suite before every commit",
        ),
        (
            "entity:pagination-cursor-fix",
            "pattern_reuse",
            20,
            "memory.json pagination-cursor-fix: Pattern successfully applied in api/users.py",
        ),
        (
            "entity:pagination-cursor-fix",
            "pattern_reuse",
            20,
            "memory.json pagination-cursor-fix: Pattern successfully applied in api/orders.py",
        ),
        (
            "mcp_chain:chain-2025-10-13-a",
            "mcp_integration",
            10,
            "activeContext.json chain-2025-10-13-a: calls filesystem, memory, git",
        ),
        (
            "mcp_chain:chain-2025-10-13-b",
            "mcp_integration",
            10,
            "activeContext.json chain-2025-10-13-b: calls memory, filesystem",
        ),
    }
    transactions = json.loads(out)["transactions"]
    assert all(t["kind"] == "import" and t["verified"] for t in transactions)
    assert not any(t["action"].startswith("recovery") for t in transactions)
    m1 = next(t for t in transactions if t["source"] == "mistake:m-001")
    assert m1["timestamp"] == "2025-10-13T06:53:00.000+00:00"  # the mistake's occurred_at
    # reconciliation is still the check: nothing missing, nothing in excess
    code, out, _ = cli("ledger", "reconcile", "--json")
    assert code == 0 and json.loads(out)["ok"]
    # importing again books nothing; a new observation books its +20, and only that
    code, out, _ = cli("ledger", "import-sources", str(memory_bank), "--json")
    assert json.loads(out)["booked"] == 0
    memory = json.loads((memory_bank / "memory.json").read_text())
    memory["entities"][0]["observations"].append("Pattern successfully applied in api/teams.py")
    del memory["entities"][0]["reward_accumulated"]
    (memory_bank / "memory.json").write_text(json.dumps(memory))
    code, out, _ = cli("ledger", "import-sources", str(memory_bank), "--json")
    assert (json.loads(out)["booked"], json.loads(out)["booked_points"]) == (1, 20)
    code, out, _ = cli("ledger", "transactions", "-n", "1", "--json")
    assert json.loads(out)["transactions"][0]["action"].endswith("api/teams.py")
    code, out, _ = cli("ledger", "reconcile", "--json")
    assert code == 0 and json.loads(out)["ok"]


def test_a_record_booked_by_hand_is_not_booked_again(pl: Plaudit, memory_bank: Path) -> None:
    lg = pl.ledger
    lg.import_sources(memory_bank, book=False)
    lg.record("validation_failure", "pytest failed", source="mistake:m-002", points=-40)
    r = lg.import_sources(memory_bank)
    assert r.booked == 8 and r.booking is None
    assert [t.points for t in lg.transactions(20, category="validation_failure")] == [-40]
    assert lg.reconcile()["ok"]


def test_a_trigger_that_fails_its_categorys_rule_is_not_booked(
    pl: Plaudit, memory_bank: Path
) -> None:
    patterns = json.loads((memory_bank / "systemPatterns.json").read_text())
    patterns["successful_patterns"][0]["success_count"] = 0  # constitutional_compliance needs 1
    (memory_bank / "systemPatterns.json").write_text(json.dumps(patterns))
    lg = Ledger(pl, _config(memory_bank.parent, "warn.toml", "[reconcile]\non_mismatch='warn'\n"))
    r = lg.import_sources(memory_bank)
    assert [n["source"] for n in r.not_booked] == ["pattern:p-update-not-create"]
    assert "success_count >= 1" in r.not_booked[0]["reason"]
    missing = [m for m in lg.reconcile()["mismatches"] if m["status"] == "missing"]
    assert [m["key"] for m in missing] == ["p-update-not-create"]


def test_a_halted_ledger_imports_the_records_and_says_why_nothing_was_booked(
    pl: Plaudit, memory_bank: Path, cli
) -> None:
    from ledger_helpers import raw_sql

    pl.ledger.record("pattern_reuse", "x")
    raw_sql(pl, "UPDATE ledger_state SET total = total + 5")  # a checksum halt
    code, out, err = cli("ledger", "import-sources", str(memory_bank))
    assert code == 5 and "10 new or changed" in out
    assert err.startswith("error: nothing was booked: checksum mismatch") and "recover" in err
    assert pl.ledger.recover()["whole"]
    code, out, _ = cli("ledger", "import-sources", str(memory_bank), "--json")
    assert code == 0 and json.loads(out)["booked"] == 9


# -- item 9: the small ones -------------------------------------------------------------------
def test_reconcile_recover_says_what_it_found_then_what_it_did(memory_bank: Path, cli) -> None:
    """It printed "reconciled: ok" above the mismatch table it had just fixed."""
    cli("ledger", "import-sources", "--no-book", str(memory_bank))
    code, out, _ = cli("ledger", "reconcile", "--recover")
    lines = out.splitlines()
    assert code == 0 and lines[0] == "found 8 mismatches"
    found_at = lines.index("recovered 8 transactions")
    assert any(line.startswith("  missing  mistake:m-002") for line in lines[:found_at])
    assert lines[found_at + 1] == "reconciled: ok"
    assert not any("missing" in line for line in lines[found_at:])
    code, out, _ = cli("ledger", "reconcile", "--recover", "--json")
    r = json.loads(out)
    assert r["ok"] and r["found"]["ok"] and "next" not in r


def test_transactions_are_listed_newest_first_by_date(pl: Plaudit, memory_bank: Path, cli) -> None:
    """Newest first by position put a recovery dated at its 2025 mistake between two of today's
    transactions, so the listed times jumped."""
    lg = pl.ledger
    lg.record("successful_validation", "today, first")
    lg.import_sources(memory_bank)  # books the memory bank's triggers, dated by their records
    lg.record("successful_validation", "today, last")
    code, out, _ = cli("ledger", "transactions", "-n", "20", "--json")
    listed = json.loads(out)["transactions"]
    times = [t["ts_ms"] for t in listed]
    assert times == sorted(times, reverse=True)
    assert listed[0]["action"] == "today, last"
    first = [t["action"] for t in listed].index("today, first")
    assert all(t["timestamp"].startswith("2025-") for t in listed[first + 1 :])
    assert listed[-1]["timestamp"].startswith("2025-10-13T06:53")  # m-001, the oldest record
    code, out, _ = cli("ledger", "transactions", "-n", "3")
    assert code == 0 and f"#{listed[0]['seq']}" in out.splitlines()[0]  # the log position
    # the progress.json export keeps the log's order, which its running totals chain in
    entries = lg.progress()["transaction_log"]
    assert [e["plaudit_id"] for e in entries][:1] == [listed[0]["id"]]
    assert [e["running_total"] for e in entries][1] == listed[0]["running_total"] - 30
