"""Full verification, locating discrepancies, the six-step audit, and recovery.

The log is the truth for what happened; the running totals written under the lock are a second
witness of what was acknowledged. A discrepancy between the projection and the log is repaired
by replaying the log; a discrepancy inside the log (a row edited or deleted behind plaudit's
back) is corrected by an audit transaction that restores the acknowledged balance.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from plaudit.errors import ValidationError
from plaudit.events import make_event
from plaudit.ids import now_ms, uuid7
from plaudit.ledger import eventtypes as et
from plaudit.ledger.checksum import quick_checksum
from plaudit.ledger.models import iso
from plaudit.ledger.projection import read_state
from plaudit.ledger.writing import LedgerWriter, Pending, system_spec
from plaudit.store.backend import Tx
from plaudit.store.view import LogView

if TYPE_CHECKING:
    from plaudit.core import Plaudit


def full_sums(tx: Tx) -> dict[str, int]:
    """Recalculate from the whole log (no cap): total, rewards, penalties, count."""
    s = LogView(tx).payload_sums(et.TRANSACTION, "points")
    return {"total": s.total, "rewards": s.positive, "penalties": s.negative, "count": s.count}


def locate(tx: Tx) -> dict[str, Any]:
    """The first transaction where the log's running totals break, and the first row where the
    projection disagrees with the log."""
    log_rows = LogView(tx).payload_ints(et.TRANSACTION, ("points", "running_total"))
    in_log: dict[int, tuple[str, int]] = {}
    first_log: dict[str, Any] | None = None
    prev_rt = 0  # every ledger starts at zero; an opening balance is itself a transaction
    for seq, id_, points, running in log_rows:
        seq, points, running = int(seq), int(points or 0), int(running or 0)
        in_log[seq] = (id_, points)
        expected = prev_rt + points
        if first_log is None and running != expected:
            first_log = {
                "seq": seq,
                "id": id_,
                "reason": (
                    f"running_total {running} != previous {prev_rt} + points {points}: a "
                    "transaction before it was deleted, or this one was edited or moved"
                ),
            }
        prev_rt = running
    first_proj: dict[str, Any] | None = None
    seen: set[int] = set()
    for seq, id_, points in tx.fetchall("SELECT seq, id, points FROM ledger_tx ORDER BY seq"):
        seq = int(seq)
        seen.add(seq)
        want = in_log.get(seq)
        if want is None:
            first_proj = {"seq": seq, "id": id_, "reason": "in the projection, not in the log"}
        elif want[0] != id_:
            first_proj = {
                "seq": seq,
                "id": id_,
                "reason": f"the log has {want[0]} at this position (rows were reordered)",
            }
        elif want[1] != int(points):
            first_proj = {
                "seq": seq,
                "id": id_,
                "reason": f"points {points} in the projection, {want[1]} in the log",
            }
        if first_proj is not None:
            break
    if first_proj is None:
        missing = sorted(set(in_log) - seen)
        if missing:
            first_proj = {
                "seq": missing[0],
                "id": in_log[missing[0]][0],
                "reason": "in the log, missing from the projection (deleted)",
            }
    return {"log": first_log, "projection": first_proj}


def _event_at(tx: Tx, seq: int | None) -> dict[str, Any] | None:
    if seq is None:
        return None
    found = LogView(tx).identity_at(seq)
    return None if found is None else {"seq": seq, "id": found[0], "type": found[1]}


def recalculate(tx: Tx, *, base: dict[str, Any] | None) -> dict[str, int]:
    """Totals from the log: the checkpoint's plus every transaction after it (or from zero)."""
    through = 0 if base is None else int(base.get("through_seq", 0) or 0)
    s = LogView(tx).payload_sums(et.TRANSACTION, "points", after=through)
    b = base or {}
    return {
        "total": int(b.get("total", 0) or 0) + s.total,
        "rewards": int(b.get("rewards", 0) or 0) + s.positive,
        "penalties": int(b.get("penalties", 0) or 0) + s.negative,
        "count": int(b.get("tx_count", 0) or 0) + s.count,
        "from_seq": through,
    }


def verify(p: Plaudit, *, full: bool = False, locate_on_failure: bool = True) -> dict[str, Any]:
    """Both halves of checksum validation: the log's cryptographic verification, and the totals
    recalculated from the log against the stored totals and projected rows.

    When the whole chain verifies, nothing before the newest checkpoint can have changed since
    it was written, so the recalculation starts from that checkpoint (`full=True` sums every
    transaction from the start instead; a broken chain always does)."""
    log_report = p.log.verify()
    with p.backend.read() as tx:
        state = read_state(tx)
        base = None
        if log_report.ok and not full:
            base = last_valid_checkpoint(tx, log_report.checked + 1)
        sums = recalculate(tx, base=base)
        last = LogView(tx).last_payload(et.TRANSACTION)
        witness = None if last is None else last[1].get("running_total")
        stored = None if state is None else int(state["total"])
        reasons = []
        if stored != sums["total"]:
            reasons.append(f"stored total {stored} != {sums['total']} recalculated from the log")
        if state is not None and int(state["tx_count"]) != sums["count"]:
            reasons.append(f"stored count {state['tx_count']} != {sums['count']} in the log")
        if witness is not None and witness != sums["total"]:
            reasons.append(
                f"the last acknowledged running_total {witness} != {sums['total']} recalculated"
            )
        proj = tx.fetchone("SELECT COALESCE(SUM(points), 0), COUNT(*) FROM ledger_tx")
        assert proj is not None
        if (int(proj[0]), int(proj[1])) != (sums["total"], sums["count"]):
            reasons.append(
                f"projected transactions sum to {proj[0]} over {proj[1]} rows, the log to "
                f"{sums['total']} over {sums['count']}"
            )
        # Row by row after the checkpoint (everything, without one): ids, order and points.
        after = sums["from_seq"]
        projected = {
            int(seq): (id_, int(points))
            for seq, id_, points in tx.fetchall(
                "SELECT seq, id, points FROM ledger_tx WHERE seq > ?", (after,)
            )
        }
        proj_rows = len(projected)
        log_rows = matched = 0
        for seq, id_, points in LogView(tx).payload_ints(et.TRANSACTION, ("points",), after=after):
            log_rows += 1
            matched += projected.get(int(seq)) == (id_, points)
        if not proj_rows == matched == log_rows:
            reasons.append(
                f"{matched} of {proj_rows} projected transactions after position {after} match "
                f"the log's {log_rows}"
            )
        checksum_ok = not reasons
        out: dict[str, Any] = {
            "ok": checksum_ok and log_report.ok,
            "checksum_validation": {
                "calculated_total": sums["total"],
                "stored_total": stored,
                "is_valid": checksum_ok,
                "last_validated": iso(now_ms()),
                "recalculated_from_checkpoint": None if base is None else base["seq"],
                "reasons": reasons,
            },
            "log": msgspec.to_builtins(log_report),
            "log_first_bad_event": _event_at(tx, log_report.first_bad),
            "transactions": sums["count"],
            "halted": bool(state and state["halted"]),
            "first_discrepancy": None,
        }
        if locate_on_failure and not out["ok"]:
            out["first_discrepancy"] = locate(tx)
    return out


def last_valid_checkpoint(tx: Tx, first_bad: int | None) -> dict[str, Any] | None:
    """The newest checkpoint whose anchor still matches the log and precedes any damage."""
    log = LogView(tx)
    for seq, cp in log.payloads_newest_first(et.CHECKPOINT):
        if not cp:
            continue
        through = int(cp.get("through_seq", 0) or 0)
        if first_bad is not None and through >= first_bad:
            continue
        if through:
            h = log.hash_at(through)
            if h is None or h.hex() != cp.get("head_hash"):
                continue
        return {"seq": seq, **cp}
    return None


def recover_checksum(p: Plaudit) -> dict[str, Any]:
    """Replay from the last valid checkpoint; rebuild the projection if it disagrees."""
    report = p.log.verify()
    with p.backend.read() as tx:
        cp = last_valid_checkpoint(tx, report.first_bad)
        base = 0 if cp is None else int(cp.get("through_seq", 0))
        replayed = LogView(tx).payload_sums(et.TRANSACTION, "points", after=base)
        replayed_total = (0 if cp is None else int(cp.get("total", 0))) + replayed.total
        state = read_state(tx)
        stored = None if state is None else int(state["total"])
        projection_ok = stored == full_sums(tx)["total"] and locate(tx)["projection"] is None
    rebuilt = False
    if not projection_ok:
        p.log.rebuild(["ledger"])
        rebuilt = True
    return {
        "checkpoint_seq": None if cp is None else cp["seq"],
        "replayed_transactions": replayed.count,
        "replayed_total": replayed_total,
        "stored_total_before": stored,
        "projection_rebuilt": rebuilt,
    }


def _export_dir(export_dir: str | os.PathLike[str]) -> Path:
    """The directory the audit was told to write to, made if missing (its parent is not)."""
    directory = Path(export_dir)
    try:
        directory.mkdir(exist_ok=True)
    except FileNotFoundError:
        raise ValidationError(
            "export_dir", f"cannot create {directory}: its parent directory does not exist"
        ) from None
    except OSError as exc:
        raise ValidationError(
            "export_dir", f"cannot use {directory}: {exc.strerror or exc}"
        ) from None
    return directory


def audit(
    p: Plaudit, writer: LedgerWriter, *, export_dir: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """freeze, export, recalculate, identify, correct (audit entry), resume."""
    from plaudit.ledger.backup import backup

    audit_id = uuid7()
    steps: dict[str, Any] = {}
    # Before the freeze, so that a directory it cannot use leaves the ledger as it was.
    export_to = None if export_dir is None else _export_dir(export_dir)
    # 1. freeze: every other writer now refuses until the resume below.
    with p.log.writer() as w:
        head_seq, _ = w.head()
        p.log.projections.ensure_named(w.tx, "ledger", head_seq)
        before = read_state(w.tx)
        was_halted = bool(before and before["halted"])
        w.append(
            make_event(
                et.HALT,
                {"reason": f"audit {audit_id} in progress", "audit": audit_id},
                source="plaudit.ledger",
            )
        )
    steps["freeze"] = {"was_halted": was_halted, "reason": before and before["halt_reason"]}
    # 2. export
    if export_to is not None:
        steps["export"] = backup(p, export_to / f"audit-{audit_id}.jsonl")
    else:
        steps["export"] = {"file": None, "head": p.log.head().digest}
    # 3. recalculate from the log
    report = verify(p, full=True, locate_on_failure=False)
    with p.backend.read() as tx:
        sums = full_sums(tx)
        last = LogView(tx).last_payload(et.TRANSACTION)
        discrepancy = locate(tx)
        chk = quick_checksum(tx, read_state(tx))
    witness = sums["total"] if last is None else int(last[1].get("running_total", 0) or 0)
    steps["recalculate"] = {
        "calculated_total": sums["total"],
        "stored_total": report["checksum_validation"]["stored_total"],
        "acknowledged_total": witness,
        "log_ok": report["log"]["ok"],
        "quick_checksum": chk.reason,
    }
    # 4. identify the first discrepancy
    steps["identify"] = {
        "log_first_bad": report["log_first_bad_event"],
        "log_reason": report["log"]["reason"],
        **discrepancy,
    }
    # 5. correct: replay into the projection, then an audit transaction for the difference.
    steps["recover"] = recover_checksum(p)
    correction = witness - sums["total"]
    summary = {"audit": audit_id, **{k: steps[k] for k in ("recalculate", "identify")}}

    def build(tx: Tx, state: dict[str, Any]) -> tuple[list[Pending], list[Any]]:
        spec = system_spec(
            "audit_correction",
            correction,
            f"audit {audit_id}: "
            + (
                f"restores the acknowledged balance {witness} (log sum {sums['total']})"
                if correction
                else "ledger recalculated from the log; no correction needed"
            ),
        )
        extras = [
            make_event(
                et.INCIDENT,
                {"kind": "audit", "correction": correction, **summary},
                source="plaudit.ledger",
            ),
            make_event(et.RESUME, {"audit": audit_id}, source="plaudit.ledger"),
        ]
        return [Pending(spec, kind="audit", verified=True)], extras

    txs = writer.commit(build, check=False, force=True, force_checkpoint=True)
    steps["correct"] = {"correction": correction, "transaction": txs[0].to_dict()}
    # 6. resume (the resume event was appended with the correction, atomically)
    steps["resume"] = {"halted": False}
    after = verify(p, locate_on_failure=False)
    return {
        "audit": audit_id,
        "steps": steps,
        "checksum_valid_after": after["checksum_validation"]["is_valid"],
        "log_ok_after": after["log"]["ok"],
        "total_score": after["checksum_validation"]["stored_total"],
    }
