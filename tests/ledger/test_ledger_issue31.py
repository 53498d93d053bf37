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
        f"[reconcile]\nevery_transactions = 1\nsources_dir = '{memory_bank}'\n",
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
