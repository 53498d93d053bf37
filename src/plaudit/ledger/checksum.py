"""Checksum validation: the stored (projected) total against the total recalculated from the log.

The quick check, run by every `record`, starts from the newest hashed checkpoint, so its cost
is bounded by `checkpoint_every` rather than by the length of the log. The full check, run by
`verify` and `audit`, sums the whole log and verifies its hash chain.
"""

from __future__ import annotations

from typing import Any

from plaudit.ids import now_ms
from plaudit.ledger import eventtypes as et
from plaudit.ledger.models import Checksum, iso
from plaudit.store.backend import Tx
from plaudit.store.view import LogView


def quick_checksum(tx: Tx, state: dict[str, Any] | None) -> Checksum:
    base_total = base_count = through = 0
    cp_seq: int | None = None
    reason: str | None = None
    log = LogView(tx)
    cp = log.last_payload(et.CHECKPOINT)
    if cp is not None:
        cp_seq, payload = cp
        through = int(payload.get("through_seq", 0) or 0)
        base_total = int(payload.get("total", 0) or 0)
        base_count = int(payload.get("tx_count", 0) or 0)
        if through > 0 and _hex(log.hash_at(through)) != payload.get("head_hash"):
            reason = (
                f"the checkpoint at position {cp_seq} no longer matches the log at position "
                f"{through}: the log was changed before it"
            )
    sums = log.payload_sums(et.TRANSACTION, "points", after=through)
    s, n = sums.total, sums.count
    calculated = base_total + s
    count = base_count + n
    stored = None if state is None else int(state["total"])
    if reason is None:
        if state is None:
            reason = "the ledger's stored state is missing"
        elif stored != calculated:
            reason = f"stored total {stored} != {calculated} recalculated from the log"
        elif int(state["tx_count"]) != count:
            reason = f"stored transaction count {state['tx_count']} != {count} counted in the log"
        elif count > 0:
            last = log.last_payload(et.TRANSACTION)
            rt = None if last is None else last[1].get("running_total")
            if rt != calculated:
                reason = (
                    f"the last transaction's running_total {rt} != {calculated} recalculated "
                    f"from the log (position {None if last is None else last[0]})"
                )
    return Checksum(
        calculated_total=calculated,
        stored_total=stored,
        is_valid=reason is None,
        tx_count=count,
        checkpoint_seq=cp_seq,
        reason=reason,
        last_validated=iso(now_ms()),
    )


def _hex(h: bytes | None) -> str | None:
    return None if h is None else h.hex()
