"""Verification: whether the log verifies (`log_verified`, the one place the ledger asks),
the totals recalculated from the log, and the first discrepancy located.

The log is the truth for what happened; the running totals written under the lock are a second
witness of what was acknowledged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from plaudit.ids import now_ms
from plaudit.ledger import eventtypes as et
from plaudit.ledger.models import iso
from plaudit.ledger.projection import read_state
from plaudit.store.backend import Tx
from plaudit.store.view import LogView

if TYPE_CHECKING:
    from plaudit.core import Plaudit


class VerifyOutcome(msgspec.Struct, kw_only=True):
    """Whether the log verifies, and where it first does not."""

    ok: bool
    length: int
    checked: int
    head: str
    first_bad: int | None = None
    reason: str | None = None


def log_verified(p: Plaudit, *, full: bool = False) -> VerifyOutcome:
    """The one place the ledger asks "does the log verify?": the write path, `score()`'s
    `verified` flag (so the CLI, HTTP and the dashboard), `verify()` and the audit all call
    this, so the ledger is never shown verified while `plaudit log verify` fails.

    `full=False` (the write path, `score()`'s flag) checks only what came after this process's
    last verify (the first one starts from the verifier's confirmed checkpoint), so its cost
    follows what is new. `full=True` (`ledger verify`, the audit) re-checks every position.
    """
    r = p.log.verify(full=full, new_only=not full)
    return VerifyOutcome(
        ok=r.ok,
        length=r.length,
        checked=r.checked,
        head=r.head,
        first_bad=r.first_bad,
        reason=r.reason,
    )


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
    # An explicit verify re-checks the whole log; `full` decides where the sums start.
    log_report = log_verified(p, full=True)
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
        if not out["ok"]:
            from plaudit.ledger.halts import log_kind, way_forward

            out["next"] = way_forward(log_kind(log_report) if not log_report.ok else "checksum")
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
