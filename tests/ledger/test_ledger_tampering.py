"""Every kind of tampering with the database file ends with recording halted, a message that
names the way forward, and that way forward working: on SQLite and on PostgreSQL."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest
from ledger_helpers import payload_set, raw_exec, raw_sql

from plaudit import Plaudit
from plaudit.errors import IntegrityError, ValidationError
from plaudit.ledger import Ledger

N_TX = 30


def _fill(lg: Ledger) -> list:
    cats = ["successful_validation", "validation_failure", "pattern_reuse", "unused_variables"]
    return lg.record_batch([{"category": cats[i % 4], "action": f"step {i}"} for i in range(N_TX)])


def edit_points(p: Plaudit, txs: list) -> None:
    raw_sql(
        p, f"UPDATE plaudit_events SET {payload_set(p, 'points', 999)} WHERE seq = {txs[2].seq}"
    )


def delete_middle(p: Plaudit, txs: list) -> None:
    raw_sql(p, f"DELETE FROM plaudit_events WHERE seq = {txs[5].seq}")


def delete_tail(p: Plaudit, txs: list) -> None:
    raw_sql(p, f"DELETE FROM plaudit_events WHERE seq >= {txs[-2].seq}")


def reorder(p: Plaudit, txs: list) -> None:
    a, b = txs[3].seq, txs[4].seq
    raw_sql(
        p,
        f"UPDATE plaudit_events SET seq = -1 WHERE seq = {a}",
        f"UPDATE plaudit_events SET seq = {a} WHERE seq = {b}",
        f"UPDATE plaudit_events SET seq = {b} WHERE seq = -1",
    )


def change_hash(p: Plaudit, txs: list) -> None:
    raw_exec(p, "UPDATE plaudit_events SET hash = ? WHERE seq = ?", (b"\7" * 32, txs[7].seq))


def append_outside(p: Plaudit, txs: list) -> None:
    head = p.log.head()
    body = "\x1f".join(("extra", "x.thing.v1", "1", "s", "t", "{}", "{}")).encode()
    raw_exec(
        p,
        "INSERT INTO plaudit_events (seq, id, type, ts_ms, session_id, source, payload, meta, "
        "content_digest, hash) VALUES (?, 'extra', 'x.thing.v1', 1, 's', 't', '{}', '{}', ?, ?)",
        (head.length + 1, b"\0" * 32, hashlib.sha256(bytes.fromhex(head.hash) + body).digest()),
    )


def edit_stored_total(p: Plaudit, txs: list) -> None:
    raw_sql(p, "UPDATE ledger_state SET total = total + 5")


def delete_projected_row(p: Plaudit, txs: list) -> None:
    raw_sql(
        p, f"DELETE FROM ledger_tx WHERE seq = {txs[1].seq}", "UPDATE ledger_state SET total = 0"
    )


def delete_state_row(p: Plaudit, txs: list) -> None:
    raw_sql(p, "DELETE FROM ledger_state")


# (tamper, the way forward its message names)
CASES: list[tuple[Callable[[Plaudit, list], None], str]] = [
    (edit_points, "rechain"),
    (delete_middle, "rechain"),
    (delete_tail, "rechain"),
    (reorder, "rechain"),
    (change_hash, "rechain"),
    (append_outside, "new store"),
    (edit_stored_total, "recover"),
    (delete_projected_row, "recover"),
    (delete_state_row, "recover"),
]
WORDS = {
    "rechain": "restore --rechain",
    "new store": "ledger restore FILE",
    "recover": "plaudit ledger recover",
}


@pytest.mark.parametrize(("tamper", "way"), CASES, ids=[c[0].__name__ for c in CASES])
def test_tampering_halts_and_the_way_forward_works(
    pl: Plaudit, tmp_path: Path, tamper, way: str
) -> None:
    lg = pl.ledger
    txs = _fill(lg)
    acknowledged = txs[-1].running_total
    tamper(pl, txs)
    with pytest.raises(IntegrityError) as err:
        lg.record("pattern_reuse", "refused")
    message = str(err.value)
    assert "Next:" in message and WORDS[way] in message
    # it stays halted: the refusal repeats, and nothing is shown as verified
    with pytest.raises(IntegrityError, match="Next:"):
        lg.record("pattern_reuse", "still refused")
    score = lg.score()
    assert score["verified"] is False and score["next"]
    if way == "recover":
        r = lg.recover()
        assert r["whole"] and r["incident_recorded"] and not r["halted"]
        t = lg.record("pattern_reuse", "resumed")
        assert t.running_total == acknowledged + 20
        assert lg.verify()["ok"] and lg.score()["verified"]
        return
    # the log itself is damaged: recover says so instead of pretending
    r = lg.recover()
    assert not r["whole"] and r["remaining"][0]["kind"].startswith("log")
    # a plain restore into the damaged store is refused, naming the new-store route
    backup = tmp_path / "damaged.jsonl"
    lg.backup(backup)
    with pytest.raises(ValidationError, match="--db NEW"):
        lg.restore(backup)
    with Plaudit.open(tmp_path / "new.db") as new:
        if way == "new store":
            new.ledger.restore(backup)
        else:
            with pytest.raises(ValidationError):  # its hashes do not check out
                new.ledger.restore(backup)
            restored = new.ledger.restore(backup, rechain=True)
            assert restored["damage"]["first_changed_position"] is not None
            assert restored["halted"] and "audit" in restored["next"]
            audit = new.ledger.audit()
            assert not audit["halted"] and audit["log_ok_after"]
            if tamper is delete_tail:
                # transactions cut off the end are gone from the log; the halt's incident kept
                # what the store had acknowledged, for whoever decides what to re-record
                kept = [i for i in new.ledger.incidents(50) if i["detail"].get("stored")]
                assert kept[0]["detail"]["stored"]["total"] == acknowledged
                acknowledged = txs[-3].running_total
            assert audit["total_score"] == acknowledged  # the acknowledged balance
        t = new.ledger.record("pattern_reuse", "carried on")
        assert t.running_total == acknowledged + 20
        assert new.ledger.verify()["ok"] and new.ledger.score()["verified"]
