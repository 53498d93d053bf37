"""Source records in, and the ledger reconciled against them (seed 003, "Balance
Reconciliation"): a mismatch opens an incident and, in `halt` mode, halts recording until a
clean reconciliation lifts it. Recovery books what the ledger is missing under the record's own
category and date; correction reverses what it holds in excess or for deleted records.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from plaudit.events import encode_json, make_event
from plaudit.ledger import eventtypes as et
from plaudit.ledger import triggers
from plaudit.ledger.checksum import quick_checksum
from plaudit.ledger.config import LedgerConfig
from plaudit.ledger.halts import way_forward
from plaudit.ledger.projection import read_state
from plaudit.ledger.sources import (
    SourceFiles,
    SourceImport,
    lookup,
    read_source_files,
    reconcile_rows,
    record_date,
    recovery_category,
    removal_events,
    source_event,
)
from plaudit.ledger.writing import LedgerWriter, Pending, system_spec
from plaudit.store.backend import Tx
from plaudit.store.view import LogView

if TYPE_CHECKING:
    from plaudit.core import Plaudit
    from plaudit.store.log import Writer

_LISTED = 100  # mismatches kept in an event payload


def import_sources(
    p: Plaudit,
    cfg: LedgerConfig,
    writer: LedgerWriter,
    source: str | os.PathLike[str] | SourceFiles,
    *,
    book: bool = True,
) -> SourceImport:
    """Append new and changed records and the removal of records a re-read file no longer
    holds, and book their triggers (`triggers`), in one atomic write.

    The records are imported even when nothing may be booked (a damaged log, wrong stored
    totals, recording halted for another reason than reconciliation): reconciliation and the
    audit re-read the memory bank then too; `booking` says why nothing was booked."""
    files = source if isinstance(source, SourceFiles) else read_source_files(cfg, source)
    why = _cannot_book(p) if book else "not asked (book=False)"
    out: dict[str, Any] = {}

    def add_sources(w: Writer) -> None:
        out["result"], out["events"] = _append_sources(p, w, files)

    if why is None:

        def build(tx: Tx, state: dict[str, Any]) -> tuple[list[Pending], list[Any]]:
            planned = triggers.plan(tx, cfg, out["events"], files.ts_ms)
            out["not_booked"] = planned.not_booked
            return planned.pendings, []

        txs = writer.commit(build, force=True, before=add_sources)
    else:
        txs = []
        with p.log.writer() as w:
            add_sources(w)
    result, removed = out["result"]
    booked = [t for t in txs if t.status == "appended"]
    return SourceImport(
        directory=str(files.directory),
        files=files.files,
        missing=files.missing,
        appended=0 if result is None else result.appended - removed,
        unchanged=0 if result is None else result.present,
        removed=removed,
        booked=len(booked),
        booked_points=sum(t.points for t in booked),
        not_booked=out.get("not_booked", []),
        booking=why,
    )


def _cannot_book(p: Plaudit) -> str | None:
    """Why the triggers may not be booked now (None: they may)."""
    from plaudit.ledger.halts import log_kind, way_forward
    from plaudit.ledger.integrity import log_verified

    outcome = log_verified(p)
    if not outcome.ok:
        return (
            f"the log fails verification at position {outcome.first_bad}; "
            f"{way_forward(log_kind(outcome))}"
        )
    with p.backend.read() as tx:
        state = read_state(tx)
        chk = quick_checksum(tx, state)
    if not chk.is_valid:
        return f"checksum mismatch: {chk.reason}; {way_forward('checksum')}"
    if state is not None and state["halted"] and state.get("halt_kind") != "reconcile":
        kind = state.get("halt_kind")
        return f"recording is halted: {state.get('halt_reason')}; {way_forward(kind)}"
    return None


def _append_sources(p: Plaudit, w: Writer, files: SourceFiles) -> tuple[Any, list[Any]]:
    """The records' events (a record back after its deletion is a new version, with a fresh
    id) and the removals; returns the append's result with the removals' count, and the
    records' events as appended."""
    head_seq, _ = w.head()
    p.log.projections.ensure_named(w.tx, "ledger", head_seq)
    gone = removal_events(w.tx, files.held, files.ts_ms)
    deleted = {
        (k, key): int(seq)
        for k, key, seq in w.tx.fetchall(
            "SELECT kind, key, seq FROM ledger_sources WHERE deleted = 1"
        )
    }
    batch = []
    for ev in files.events:
        back = deleted.get((ev.payload["kind"], ev.payload["key"]))
        if back is not None:
            pl = ev.payload
            ev = source_event(pl["kind"], pl["key"], pl["file"], pl["record"], files.ts_ms, back)
        batch.append(ev)
    result = w.append_batch([*batch, *gone]) if batch or gone else None
    return (result, len(gone)), batch


def _digest(mismatches: list[dict[str, Any]], orphans: list[str]) -> str:
    return hashlib.sha256(encode_json([mismatches, orphans]).encode()).hexdigest()[:16]


def reconcile(
    p: Plaudit,
    cfg: LedgerConfig,
    writer: LedgerWriter,
    *,
    sources_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Ledger sums per source record against what each record declares. A mismatch opens an
    incident (once per distinct set of mismatches) and, with `on_mismatch = "halt"`, halts
    recording; a clean result lifts a reconciliation halt."""
    if sources_dir is None:
        sources_dir = cfg.schedule.sources_dir
    imported = None
    if sources_dir is not None:
        imported = import_sources(p, cfg, writer, sources_dir)
    mode = cfg.schedule.on_mismatch
    out: dict[str, Any] = {}

    def build(tx: Tx, state: dict[str, Any]) -> tuple[list[Pending], list[Any]]:
        out.update(reconcile_rows(tx, cfg))
        digest = _digest(out["mismatches"], out["orphans"])
        last = LogView(tx).last_payload(et.RECONCILE)
        summary = {
            "ok": out["ok"],
            "tx_count": int(state["tx_count"]),
            "digest": digest,
            "mismatches": out["mismatches"][:_LISTED],
            "orphans": out["orphans"][:_LISTED],
        }
        extras = [make_event(et.RECONCILE, summary, source="plaudit.ledger")]
        halted_here = bool(state["halted"]) and state.get("halt_kind") == "reconcile"
        out["halted"] = bool(state["halted"])
        if not out["ok"]:
            changed = last is None or last[1].get("digest") != digest
            if changed or (mode == "halt" and not state["halted"]):
                extras.append(
                    make_event(
                        et.INCIDENT,
                        {
                            "kind": "reconcile_mismatch",
                            "mode": mode,
                            "mismatches": out["mismatches"][:_LISTED],
                            "orphans": out["orphans"][:_LISTED],
                        },
                        source="plaudit.ledger",
                    )
                )
            if mode == "halt" and not state["halted"]:
                n = len(out["mismatches"]) + len(out["orphans"])
                extras.append(
                    make_event(
                        et.HALT,
                        {
                            "reason": f"reconciliation found {n} mismatched source records",
                            "kind": "reconcile",
                        },
                        source="plaudit.ledger",
                    )
                )
                out["halted"] = True
        elif halted_here:
            extras.append(make_event(et.RESUME, {"after": "reconcile"}, source="plaudit.ledger"))
            out["halted"] = False
            out["resumed"] = True
        return [], extras

    writer.commit(build, check=False, force=True)
    out["mode"] = mode
    if imported is not None:
        out["sources"] = imported
    if not out["ok"]:
        out["next"] = way_forward("reconcile")
    return out


def _book(
    cfg: LedgerConfig,
    writer: LedgerWriter,
    statuses: tuple[str, ...],
    pending: Callable[[Tx, dict[str, Any]], Pending],
    incident: str,
) -> list[Any]:
    """One transaction per mismatched record of the given statuses, with one incident listing
    them, in one atomic write."""
    listed: list[dict[str, Any]] = []

    def build(tx: Tx, state: dict[str, Any]) -> tuple[list[Pending], list[Any]]:
        pendings = []
        for m in reconcile_rows(tx, cfg)["mismatches"]:
            if m["status"] in statuses:
                pendings.append(pending(tx, m))
                listed.append({**m, "category": pendings[-1].spec.category})
        extras = []
        if pendings:
            extras.append(
                make_event(
                    et.INCIDENT,
                    {"kind": incident, "records": listed[:_LISTED]},
                    source="plaudit.ledger",
                )
            )
        return pendings, extras

    return writer.commit(build, force=True)


def recover_missing(p: Plaudit, cfg: LedgerConfig, writer: LedgerWriter) -> dict[str, Any]:
    """Missing transactions: for every record the ledger holds too little for, a `recovery`
    transaction for the difference, in the record's own category, dated by the record."""

    def pending(tx: Tx, m: dict[str, Any]) -> Pending:
        record = lookup(tx, m["kind"], m["key"]) or {}
        diff = int(m["difference"])
        cat = recovery_category(cfg, m["kind"], record, diff)
        sk = cfg.sources.get(m["kind"])
        spec = system_spec(
            cat,
            diff,
            f"recovery: {m['kind']}:{m['key']} declares {m['declared']}, "
            f"the ledger held {m['ledger']}",
            source=(m["kind"], m["key"]),
            ts_ms=record_date(record, sk.date_field if sk is not None else None),
        )
        spec = type(spec)(**{**spec.__dict__, "type": cfg.categories[cat].type})
        return Pending(
            spec,
            kind="recovery",
            id=f"recovery:{m['kind']}:{m['key']}:{m['ledger']}:{m['declared']}"[:200],
            verified=True,
        )

    txs = _book(cfg, writer, ("missing",), pending, "missing_transaction")
    return {"recovered": len(txs), "transactions": [t.to_dict() for t in txs]}


def correct_excess(p: Plaudit, cfg: LedgerConfig, writer: LedgerWriter) -> dict[str, Any]:
    """What the ledger holds beyond a record's declaration, or for a deleted record, is
    reversed by an `audit_correction` referencing the record (the transactions themselves
    stay: the log is append-only)."""

    def pending(tx: Tx, m: dict[str, Any]) -> Pending:
        spec = system_spec(
            "audit_correction",
            int(m["difference"]),
            f"correction: {m['kind']}:{m['key']} ({m['status']}) declares "
            f"{m['declared']}, the ledger held {m['ledger']}",
            source=(m["kind"], m["key"]),
        )
        return Pending(
            spec,
            kind="audit",
            id=f"correction:{m['kind']}:{m['key']}:{m['ledger']}:{m['declared']}"[:200],
            verified=True,
        )

    txs = _book(cfg, writer, ("excess", "deleted"), pending, "reconcile_correction")
    return {"corrected": len(txs), "transactions": [t.to_dict() for t in txs]}
