"""Backup and restore: a backend-independent copy of the log that restores provably identical."""

from __future__ import annotations

from pathlib import Path

import pytest
from ledger_helpers import raw_sql

from plaudit import Plaudit
from plaudit.errors import ValidationError
from plaudit.ledger import Ledger


def _events(p: Plaudit) -> list[tuple]:
    return [(e.seq, e.id, e.hash) for e in p.log.replay()]


def test_backup_restore_round_trip(sourced: Ledger, tmp_path: Path) -> None:
    sourced.start_session("s")
    sourced.record_batch([{"category": "pattern_reuse", "action": f"a{i}"} for i in range(50)])
    sourced.record("validation_failure", "x", source="mistake:m-002")
    file = tmp_path / "backup.jsonl"
    r = sourced.backup(file)
    assert r["events"] == sourced.p.log.head().length
    with Plaudit.open(tmp_path / "target.db") as target:
        out = target.ledger.restore(file)
        assert out["restored"] == r["events"] and out["checksum_valid"] and out["log_ok"]
        assert _events(target)[: r["events"]] == _events(sourced.p)
        assert target.ledger.score()["total_score"] == sourced.score()["total_score"]
        assert target.ledger.sessions() == sourced.sessions()
        incident = target.log.tail(1)[0]
        assert incident.type == "plaudit.ledger.incident.v1"
        assert incident.payload["kind"] == "corruption"


def test_restore_after_corruption(ledger: Ledger, tmp_path: Path) -> None:
    """Corruption: the tail of the log is lost; restoring the backup brings it back."""
    ledger.record_batch([{"category": "pattern_reuse", "action": f"a{i}"} for i in range(10)])
    file = tmp_path / "backup.jsonl"
    ledger.backup(file)
    with Plaudit.open(tmp_path / "target.db") as damaged:
        damaged.ledger.restore(file)
        head = damaged.log.head()
        raw_sql(damaged, f"DELETE FROM plaudit_events WHERE seq > {head.length - 4}")
        assert not damaged.ledger.verify()["ok"]
    # a store holding a (verified) prefix of the backup takes the rest of it back
    with Plaudit.open(tmp_path / "fresh.db") as fresh:
        fresh.ledger.restore(file)
        assert fresh.ledger.verify()["ok"]
        assert fresh.ledger.score()["total_score"] == 200


@pytest.mark.parametrize("damage", ["truncate", "alter", "header", "reorder"])
def test_damaged_backup_is_refused_and_changes_nothing(
    ledger: Ledger, tmp_path: Path, damage: str
) -> None:
    ledger.record_batch([{"category": "pattern_reuse", "action": f"a{i}"} for i in range(5)])
    file = tmp_path / "backup.jsonl"
    ledger.backup(file)
    lines = file.read_bytes().splitlines(keepends=True)
    if damage == "truncate":
        data = b"".join(lines)[:-30]
    elif damage == "alter":
        assert b'"a1"' in lines[2]
        lines[2] = lines[2].replace(b'"a1"', b'"a9"')
        data = b"".join(lines)
    elif damage == "header":
        data = b"{not json\n" + b"".join(lines[1:])
    else:
        lines[2], lines[3] = lines[3], lines[2]
        data = b"".join(lines)
    file.write_bytes(data)
    with Plaudit.open(tmp_path / "target.db") as target:
        with pytest.raises(ValidationError) as err:
            target.ledger.restore(file)
        assert str(file) in str(err.value)
        assert target.log.head().length == 0


def test_restore_refuses_a_different_store(ledger: Ledger, tmp_path: Path) -> None:
    ledger.record("pattern_reuse", "a")
    file = tmp_path / "backup.jsonl"
    ledger.backup(file)
    with Plaudit.open(tmp_path / "target.db") as other:
        other.ledger.record("pattern_reuse", "something else")
        head = other.log.head()
        with pytest.raises(ValidationError, match="differs from the backup"):
            other.ledger.restore(file)
        assert other.log.head() == head
