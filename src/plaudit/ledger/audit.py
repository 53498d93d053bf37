"""Recovery and the six-step audit.

A discrepancy between the projection and the log is repaired by replaying the log; one inside
the log (a transaction edited or deleted in a store whose chain was re-made) is corrected by an
audit transaction that restores the acknowledged balance. Neither can make a damaged log verify
again: while `log_verified` fails, recording stays halted and the message says how to move to
a new store.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plaudit.errors import ValidationError
from plaudit.events import make_event
from plaudit.ids import uuid7
from plaudit.ledger import amendments
from plaudit.ledger import eventtypes as et
from plaudit.ledger.checksum import quick_checksum
from plaudit.ledger.config import LedgerConfig
from plaudit.ledger.halts import log_kind, way_forward
from plaudit.ledger.integrity import (
    full_sums,
    last_valid_checkpoint,
    locate,
    log_verified,
    verify,
)
from plaudit.ledger.projection import read_state
from plaudit.ledger.reconcile import reconcile
from plaudit.ledger.sources import reconcile_rows
from plaudit.ledger.writing import LedgerWriter, Pending, system_spec
from plaudit.store.backend import Tx
from plaudit.store.view import LogView

if TYPE_CHECKING:
    from plaudit.core import Plaudit


def replay_projection(p: Plaudit, first_bad: int | None) -> dict[str, Any]:
    """Replay from the last valid checkpoint; rebuild the projection if it disagrees."""
    with p.backend.read() as tx:
        cp = last_valid_checkpoint(tx, first_bad)
        base = 0 if cp is None else int(cp.get("through_seq", 0))
        replayed = LogView(tx).payload_sums(et.TRANSACTION, "points", after=base)
        replayed_total = (0 if cp is None else int(cp.get("total", 0))) + replayed.total
        state = read_state(tx)
        stored = None if state is None else int(state["total"])
        sums = full_sums(tx)
        projection_ok = (
            state is not None
            and stored == sums["total"]
            and int(state["tx_count"]) == sums["count"]
            and locate(tx)["projection"] is None
        )
    if not projection_ok:
        p.log.rebuild(["ledger"])
    return {
        "checkpoint_seq": None if cp is None else cp["seq"],
        "replayed_transactions": replayed.count,
        "replayed_total": replayed_total,
        "stored_total_before": stored,
        "projection_rebuilt": not projection_ok,
    }


def _remaining(p: Plaudit, cfg: LedgerConfig, tx: Tx, outcome: Any) -> list[dict[str, str]]:
    """What still keeps the ledger from being whole, each with its way forward."""
    out: list[dict[str, str]] = []
    if not outcome.ok:
        kind = log_kind(outcome)
        out.append(
            {
                "kind": kind,
                "reason": f"the log fails verification at position {outcome.first_bad}: "
                f"{outcome.reason}",
                "next": way_forward(kind),
            }
        )
    state = read_state(tx)
    chk = quick_checksum(tx, state)
    if not chk.is_valid:
        out.append(
            {
                "kind": "audit",
                "reason": f"the log's own running totals disagree with its sum: {chk.reason}",
                "next": "run `plaudit ledger audit` to correct the balance with an audit entry",
            }
        )
    if state is not None and state["halted"]:
        hk = state.get("halt_kind")
        if hk == "reconcile" and not reconcile_rows(tx, cfg)["ok"]:
            out.append(
                {
                    "kind": "reconcile",
                    "reason": "reconciliation still finds mismatched source records",
                    "next": way_forward("reconcile"),
                }
            )
        elif hk == "audit":
            out.append(
                {
                    "kind": "audit",
                    "reason": state.get("halt_reason") or "an audit did not finish",
                    "next": way_forward("audit"),
                }
            )
    return out


def recover(p: Plaudit, cfg: LedgerConfig) -> dict[str, Any]:
    """Repair what can be repaired from the log, record an incident only for a repair that
    happened, and lift the halt once nothing remains; otherwise say exactly what remains."""
    outcome = log_verified(p, full=True)
    if not outcome.ok and log_kind(outcome) == "log_extra":  # this store takes no write at all
        kind = log_kind(outcome)
        return {
            "projection_rebuilt": False,
            "incident_recorded": False,
            "whole": False,
            "halted": True,
            "resumed": False,
            "remaining": [
                {
                    "kind": kind,
                    "reason": f"the log fails verification at position {outcome.first_bad}: "
                    f"{outcome.reason}",
                    "next": way_forward(kind),
                }
            ],
        }
    result = replay_projection(p, outcome.first_bad)
    with p.log.writer() as w:
        head_seq, _ = w.head()
        p.log.projections.ensure_named(w.tx, "ledger", head_seq)
        remaining = _remaining(p, cfg, w.tx, outcome)
        state = read_state(w.tx)
        halted = bool(state and state["halted"])
        events = []
        if result["projection_rebuilt"]:
            events.append(
                make_event(
                    et.INCIDENT,
                    {"kind": "checksum_mismatch", "action": "replay", **result},
                    source="plaudit.ledger",
                )
            )
        resumed = False
        if halted and not remaining:
            events.append(make_event(et.RESUME, {"after": "recover"}, source="plaudit.ledger"))
            resumed = True
        if events:
            w.append_batch(events)
    return {
        **result,
        "incident_recorded": bool(result["projection_rebuilt"]),
        "whole": not remaining,
        "halted": halted and not resumed,
        "resumed": resumed,
        "remaining": remaining,
    }


def _amendment(audit_id: str, a: amendments.Amendment) -> Pending:
    """An audit_correction folded into the forged transaction it names (see `amendments`)."""
    r = a.row
    where = f"{r.category}" + (f", session {r.session}" if r.session else "")
    spec = system_spec(
        "audit_correction",
        a.amount,
        f"audit {audit_id}: amends {r.id} ({where}): acknowledged {a.acknowledged:+d}, "
        f"the log holds {r.points + r.amended:+d}",
    )
    return Pending(spec, kind="audit", verified=True, extra={"amends": a.payload()})


def _copy_sources(cfg: LedgerConfig, sources_dir: Path, target: Path) -> list[str]:
    """Step 2 exports the memory bank too: its files as they were when audited."""
    target.mkdir(parents=True, exist_ok=True)
    copied = []
    for kind in cfg.sources.values():
        src = sources_dir / kind.file
        if src.is_file() and kind.file not in copied:
            shutil.copy2(src, target / kind.file)
            copied.append(kind.file)
    return copied


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
    p: Plaudit,
    cfg: LedgerConfig,
    writer: LedgerWriter,
    *,
    export_dir: str | os.PathLike[str] | None = None,
    sources_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """freeze, export (the log and the memory bank), recalculate, identify (the log and the
    source files), correct (audit entry), resume (only once nothing remains)."""
    from plaudit.ledger.backup import backup

    audit_id = uuid7()
    steps: dict[str, Any] = {}
    if sources_dir is None:
        sources_dir = cfg.schedule.sources_dir
    # Before the freeze, so that a directory it cannot use leaves the ledger as it was.
    if export_dir is not None:
        export_dir = _export_dir(export_dir)
    # 1. freeze: every other writer now refuses until the resume below.
    with p.log.writer() as w:
        head_seq, _ = w.head()
        p.log.projections.ensure_named(w.tx, "ledger", head_seq)
        before = read_state(w.tx)
        was_halted = bool(before and before["halted"])
        w.append(
            make_event(
                et.HALT,
                {"reason": f"audit {audit_id} in progress", "audit": audit_id, "kind": "audit"},
                source="plaudit.ledger",
            )
        )
    steps["freeze"] = {"was_halted": was_halted, "reason": before and before["halt_reason"]}
    # 2. export: the log, and the memory bank the ledger is reconciled against
    if export_dir is not None:
        target = Path(export_dir) / f"audit-{audit_id}.jsonl"
        steps["export"] = backup(p, target)
        if sources_dir is not None:
            steps["export"]["sources"] = _copy_sources(
                cfg, Path(sources_dir), Path(export_dir) / f"audit-{audit_id}-sources"
            )
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
    # 4. identify the first discrepancy, in the log and against the source files
    steps["identify"] = {
        "log_first_bad": report["log_first_bad_event"],
        "log_reason": report["log"]["reason"],
        **discrepancy,
    }
    # 5. correct: replay into the projection; an amendment for each forged transaction whose
    # acknowledged points the running totals tell; an audit transaction for what remains.
    steps["recover"] = replay_projection(p, report["log"]["first_bad"])
    with p.backend.read() as tx:
        forged = amendments.find(
            amendments.rows(tx), amendments.evidence_for(tx, bool(report["log"]["ok"]))
        )
    steps["identify"]["forged"] = [{**a.payload(), "amount": a.amount} for a in forged[:100]]
    correction = witness - sums["total"] - sum(a.amount for a in forged)
    summary = {"audit": audit_id, **{k: steps[k] for k in ("recalculate", "identify")}}

    def build(tx: Tx, state: dict[str, Any]) -> tuple[list[Pending], list[Any]]:
        pendings = [_amendment(audit_id, a) for a in forged]
        spec = system_spec(
            "audit_correction",
            correction,
            f"audit {audit_id}: "
            + (
                f"restores the acknowledged balance {witness} (log sum {sums['total']}"
                + (f", amended {len(forged)} forged transactions" if forged else "")
                + ")"
                if correction
                else f"amended {len(forged)} forged transactions to what was acknowledged"
                if forged
                else "ledger recalculated from the log; no correction needed"
            ),
        )
        pendings.append(Pending(spec, kind="audit", verified=True))
        extras = [
            make_event(
                et.INCIDENT,
                {"kind": "audit", "correction": correction, **summary},
                source="plaudit.ledger",
            ),
            make_event(et.RESUME, {"audit": audit_id}, source="plaudit.ledger"),
        ]
        return pendings, extras

    txs = writer.commit(build, check=False, force=True, force_checkpoint=True)
    steps["correct"] = {
        "correction": correction,
        "amended": len(forged),
        "transaction": txs[-1].to_dict(),
        "amendments": [t.to_dict() for t in txs[:-1][:100]],
    }
    # The source files: reconciled (and re-read when a memory-bank folder is known).
    rec = reconcile(p, cfg, writer, sources_dir=sources_dir)
    steps["identify"]["sources"] = {
        "ok": rec["ok"],
        "mismatches": rec["mismatches"][:100],
        "orphans": rec["orphans"][:100],
    }
    # 6. resume, unless something remains: then the ledger is halted again, with its reason.
    outcome = log_verified(p, full=True)
    with p.backend.read() as tx:
        remaining = _remaining(p, cfg, tx, outcome)
    if remaining and not any(r["kind"] == "reconcile" for r in remaining):
        first = remaining[0]
        from plaudit.ledger.halts import record_halt

        record_halt(p, first["kind"], first["reason"], {"audit": audit_id, "remaining": remaining})
    after = verify(p, locate_on_failure=False)
    with p.backend.read() as tx:
        state = read_state(tx)
    halted = bool(state and state["halted"])
    steps["resume"] = {"halted": halted, "remaining": remaining}
    return {
        "audit": audit_id,
        "steps": steps,
        "checksum_valid_after": after["checksum_validation"]["is_valid"],
        "log_ok_after": after["log"]["ok"],
        "total_score": after["checksum_validation"]["stored_total"],
        "halted": halted,
        "remaining": remaining,
    }
