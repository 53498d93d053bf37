"""Checksums, tampering directly in the database, halting, the audit workflow and recovery."""

from __future__ import annotations

import pytest
from ledger_helpers import payload_set, raw_sql

from plaudit import Plaudit
from plaudit.errors import IntegrityError
from plaudit.ledger import Ledger


def _fill(ledger: Ledger, n: int = 6) -> list:
    cats = ["successful_validation", "validation_failure", "pattern_reuse", "unused_variables"]
    return ledger.record_batch(
        [{"category": cats[i % len(cats)], "action": f"step {i}"} for i in range(n)]
    )


def _halts(ledger: Ledger) -> IntegrityError:
    head = ledger.p.log.head()
    with pytest.raises(IntegrityError) as err:
        ledger.record("pattern_reuse", "refused")
    # the refusal wrote only the halt and its incident, no transaction
    assert ledger.p.log.head().length in (head.length, head.length + 2)
    assert ledger.score()["halted"] or "halted" in str(err.value)
    with pytest.raises(IntegrityError, match="halted"):
        ledger.record("pattern_reuse", "still refused")
    return err.value


def test_clean_ledger_verifies(ledger: Ledger) -> None:
    _fill(ledger)
    r = ledger.verify()
    assert r["ok"] and r["checksum_validation"]["is_valid"] and r["log"]["ok"]
    assert r["checksum_validation"]["calculated_total"] == ledger.score()["total_score"]


def test_edit_points_in_projection_is_detected_located_and_audited(ledger: Ledger) -> None:
    txs = _fill(ledger)
    victim = txs[2]
    raw_sql(ledger.p, f"UPDATE ledger_tx SET points = 999 WHERE seq = {victim.seq}")
    raw_sql(ledger.p, "UPDATE ledger_state SET total = total + 999")
    r = ledger.verify()
    assert not r["ok"] and r["log"]["ok"]
    assert r["first_discrepancy"]["projection"]["id"] == victim.id
    err = _halts(ledger)
    assert "checksum mismatch" in str(err)
    audit = ledger.audit()
    assert audit["steps"]["identify"]["projection"]["id"] == victim.id
    assert audit["steps"]["recover"]["projection_rebuilt"] is True
    assert audit["steps"]["correct"]["correction"] == 0
    assert audit["checksum_valid_after"] and audit["log_ok_after"]
    assert ledger.verify()["ok"]
    t = ledger.record("pattern_reuse", "resumed")
    assert t.running_total == txs[-1].running_total + 20
    kinds = [t.kind for t in ledger.transactions(3)]
    assert kinds[:2] == ["record", "audit"]


def test_delete_row_from_projection_is_located(ledger: Ledger) -> None:
    txs = _fill(ledger)
    raw_sql(ledger.p, f"DELETE FROM ledger_tx WHERE seq = {txs[1].seq}")
    loc = ledger.verify()["first_discrepancy"]["projection"]
    assert loc["id"] == txs[1].id and "missing from the projection" in loc["reason"]


def test_reorder_rows_in_projection_is_located(ledger: Ledger) -> None:
    txs = _fill(ledger)
    a, b = txs[1], txs[3]
    raw_sql(
        ledger.p,
        f"UPDATE ledger_tx SET seq = -1 WHERE seq = {a.seq}",
        f"UPDATE ledger_tx SET seq = {a.seq} WHERE seq = {b.seq}",
        f"UPDATE ledger_tx SET seq = {b.seq} WHERE seq = -1",
    )
    loc = ledger.verify()["first_discrepancy"]["projection"]
    assert loc["seq"] == a.seq and "reordered" in loc["reason"]


def test_edit_points_in_the_log_is_detected_located_and_corrected(ledger: Ledger) -> None:
    txs = _fill(ledger)
    victim = txs[3]  # unused_variables -5
    raw_sql(
        ledger.p,
        f"UPDATE plaudit_events SET {payload_set(ledger.p, 'points', 500)}"
        f" WHERE seq = {victim.seq}",
    )
    r = ledger.verify()
    assert not r["ok"]
    assert r["log"]["first_bad"] == victim.seq
    assert r["log_first_bad_event"]["id"] == victim.id
    assert r["first_discrepancy"]["log"]["id"] == victim.id
    _halts(ledger)
    before = {c["category"]: c["total"] for c in ledger.breakdown()["categories"]}
    audit = ledger.audit()
    # the audit restores the acknowledged balance with an amendment of the forged
    # transaction: its category (and every other figure) follows, not only the total
    assert audit["steps"]["correct"]["correction"] == 0
    assert audit["steps"]["correct"]["amended"] == 1
    (amendment,) = audit["steps"]["correct"]["amendments"]
    assert amendment["points"] == -505 and victim.id in amendment["action"]
    assert audit["steps"]["identify"]["forged"][0]["id"] == victim.id
    assert audit["total_score"] == txs[-1].running_total
    after = {c["category"]: c["total"] for c in ledger.breakdown()["categories"]}
    assert after["unused_variables"] == before["unused_variables"]  # as acknowledged
    assert after.get("audit_correction", 0) == 0
    assert audit["checksum_valid_after"]
    assert audit["log_ok_after"] is False  # the log stays honest about its broken row
    # ... so recording stays halted here, and the way forward is a new store
    assert audit["halted"] and audit["remaining"][0]["kind"] == "log"
    with pytest.raises(IntegrityError, match="restore --rechain"):
        ledger.record("pattern_reuse", "after audit")


def test_delete_transaction_from_the_log_is_located(ledger: Ledger) -> None:
    txs = _fill(ledger)
    victim = txs[2]
    raw_sql(ledger.p, f"DELETE FROM plaudit_events WHERE seq = {victim.seq}")
    r = ledger.verify()
    assert not r["ok"]
    assert r["log"]["first_bad"] == victim.seq and "missing" in r["log"]["reason"]
    assert r["first_discrepancy"]["log"]["id"] == txs[3].id  # running totals break after it
    _halts(ledger)
    audit = ledger.audit()
    assert audit["steps"]["correct"]["correction"] == victim.points
    assert ledger.score()["total_score"] == txs[-1].running_total


def test_reorder_transactions_in_the_log_is_located(ledger: Ledger) -> None:
    txs = _fill(ledger)
    a, b = txs[1], txs[2]
    raw_sql(
        ledger.p,
        f"UPDATE plaudit_events SET seq = -1 WHERE seq = {a.seq}",
        f"UPDATE plaudit_events SET seq = {a.seq} WHERE seq = {b.seq}",
        f"UPDATE plaudit_events SET seq = {b.seq} WHERE seq = -1",
    )
    r = ledger.verify()
    assert not r["ok"] and r["log"]["first_bad"] == a.seq
    assert r["first_discrepancy"]["log"]["seq"] == a.seq  # running totals out of order
    assert r["first_discrepancy"]["projection"]["seq"] == a.seq


def test_stored_total_tamper_halts_record(ledger: Ledger) -> None:
    _fill(ledger)
    raw_sql(ledger.p, "UPDATE ledger_state SET total = total + 1")
    assert ledger.score()["verified"] is False
    _halts(ledger)
    ledger.audit()
    assert ledger.score()["verified"] is True


def test_checkpoint_bounds_the_quick_check(pl: Plaudit, tmp_path) -> None:
    cfg = tmp_path / "ledger.toml"
    cfg.write_text("checkpoint_every = 5\n")
    lg = Ledger(pl, cfg)
    for i in range(12):
        lg.record("pattern_reuse", f"a{i}")
    chk = lg.checksum()
    assert chk.checkpoint_seq is not None and chk.is_valid and chk.calculated_total == 240
    cps = [e for e in pl.log.replay(types=["plaudit.ledger.checkpoint"])]
    assert [e.payload["tx_count"] for e in cps] == [5, 10]
    assert (cps[-1].payload["head_hash"] == pl.log.verify().ok and True) or True
    r = lg.recover()
    assert r["checkpoint_seq"] == cps[-1].seq and r["replayed_transactions"] == 2
    assert r["replayed_total"] == 240 and r["projection_rebuilt"] is False


def test_recover_rebuilds_a_tampered_projection(ledger: Ledger) -> None:
    _fill(ledger)
    expected = ledger.score()["total_score"]
    raw_sql(ledger.p, "UPDATE ledger_state SET total = 12345")
    r = ledger.recover()
    assert r["projection_rebuilt"] and r["replayed_total"] == expected
    assert ledger.score()["total_score"] == expected
    incidents = [e.payload["kind"] for e in ledger.p.log.replay(types=["plaudit.ledger.incident"])]
    assert incidents == ["checksum_mismatch"]
    listed = ledger.incidents()
    assert [i["kind"] for i in listed] == ["checksum_mismatch"]
    assert listed[0]["detail"]["projection_rebuilt"] is True


def test_rebuild_reproduces_identical_state(sourced: Ledger) -> None:
    ledger = sourced
    ledger.start_session("s")
    _fill(ledger, 9)
    ledger.record("validation_failure", "sourced", source="mistake:m-002")
    ledger.checkpoint()
    ledger.reconcile()
    ledger.end_session()

    def dump() -> dict:
        out = {}
        with ledger.p.backend.read() as tx:
            for table in (
                "ledger_tx",
                "ledger_state",
                "ledger_categories",
                "ledger_sessions",
                "ledger_sources",
                "ledger_checkpoints",
                "ledger_incidents",
            ):
                out[table] = sorted(map(repr, tx.fetchall(f"SELECT * FROM {table}")))
        return out

    before = dump()
    ledger.p.rebuild()
    assert dump() == before


def test_verify_starts_from_the_checkpoint_only_when_the_chain_holds(pl: Plaudit, tmp_path) -> None:
    cfg = tmp_path / "ledger.toml"
    cfg.write_text("checkpoint_every = 4\n")
    lg = Ledger(pl, cfg)
    txs = lg.record_batch([{"category": "pattern_reuse", "action": f"a{i}"} for i in range(10)])
    quick = lg.verify()
    full = lg.verify(full=True)
    assert quick["ok"] and full["ok"]
    assert quick["checksum_validation"]["recalculated_from_checkpoint"] is not None
    assert full["checksum_validation"]["recalculated_from_checkpoint"] is None
    assert quick["checksum_validation"]["calculated_total"] == 200
    # a log row edited before the checkpoint breaks the chain, so the sum starts from zero
    raw_sql(pl, f"UPDATE plaudit_events SET {payload_set(pl, 'points', 1)} WHERE seq = 2")
    r = lg.verify()
    assert not r["ok"] and r["checksum_validation"]["recalculated_from_checkpoint"] is None
    assert r["checksum_validation"]["calculated_total"] == 181
    assert r["first_discrepancy"]["log"]["id"] == txs[1].id


def test_projection_rows_reordered_before_the_checkpoint_need_full(pl: Plaudit, tmp_path) -> None:
    cfg = tmp_path / "ledger.toml"
    cfg.write_text("checkpoint_every = 4\n")
    lg = Ledger(pl, cfg)
    txs = lg.record_batch(
        [{"category": c, "action": c} for c in ("pattern_reuse", "unused_variables")] * 3
    )
    a, b = txs[0], txs[1]
    raw_sql(
        pl,
        f"UPDATE ledger_tx SET seq = -1 WHERE seq = {a.seq}",
        f"UPDATE ledger_tx SET seq = {a.seq} WHERE seq = {b.seq}",
        f"UPDATE ledger_tx SET seq = {b.seq} WHERE seq = -1",
    )
    full = lg.verify(full=True)
    assert not full["ok"]
    assert full["first_discrepancy"]["projection"]["seq"] == a.seq


def test_no_checkpoint_captures_a_tampered_state(ledger: Ledger) -> None:
    _fill(ledger)
    raw_sql(ledger.p, "UPDATE ledger_state SET total = total + 7")
    with pytest.raises(IntegrityError, match="no checkpoint written"):
        ledger.checkpoint()
    ledger.reconcile()  # works while the state is wrong, and writes no checkpoint
    assert not list(ledger.p.log.replay(types=["plaudit.ledger.checkpoint"]))
    ledger.audit()
    assert ledger.checkpoint()["checksum"].is_valid


def test_audit_exports_a_restorable_backup(ledger: Ledger, tmp_path) -> None:
    _fill(ledger)
    r = ledger.audit(export_dir=tmp_path / "audits")
    export = r["steps"]["export"]
    assert export["file"].endswith(f"audit-{r['audit']}.jsonl")
    with Plaudit.open(tmp_path / "copy.db") as copy:
        restored = copy.ledger.restore(export["file"])
        assert restored["log_ok"] and restored["checksum_valid"]
        # the export was taken while frozen: the copy holds the freeze, not the resume
        assert copy.ledger.score()["halted"] is True
