"""What an append call is told about each of its events, and the one rule that decides it.

**The rule** (`settle`): an event whose id the log already holds is `present` at that position
when its content (type, session, source, payload: the content digest) is the same, and a
`conflict` when it differs; a conflict refuses the whole call with `ConflictError` when the
call is strict (`on_conflict="raise"`), and is reported in its place otherwise. Every other
event is new and takes the next position, in call order; an id repeated within one call is
present at its first position (or a conflict with it). Events taken into the intake have no
position yet: they are `queued`.

Every path that answers an append applies this function: the sequenced write, a group of
calls written together, the intake and its sequencing passes, and a waiter that looks its ids
up (`tests/test_log_conformance.py` holds every path to the same answers).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

import msgspec

from plaudit.errors import ConflictError, IntegrityError
from plaudit.events import Prepared

#: "queued": durable in the intake, its position not given yet (see `EventLog.enqueue`).
Status = Literal["appended", "present", "conflict", "queued"]
OnConflict = Literal["raise", "skip"]
#: id -> (content digest, position; None while it waits in the intake).
Held = Mapping[str, tuple[bytes, int | None]]


class AppendResult(msgspec.Struct, frozen=True):
    id: str
    seq: int | None
    status: Status


class BatchResult(msgspec.Struct):
    results: list[AppendResult]

    @property
    def appended(self) -> int:
        return sum(r.status == "appended" for r in self.results)

    @property
    def present(self) -> int:
        return sum(r.status == "present" for r in self.results)

    @property
    def queued(self) -> int:
        return sum(r.status == "queued" for r in self.results)

    @property
    def conflicts(self) -> list[str]:
        return [r.id for r in self.results if r.status == "conflict"]


class Settled(msgspec.Struct):
    """A call's answer before it is written: its results, and the events to write."""

    results: list[AppendResult]
    new: list[Prepared]


def check_on_conflict(on_conflict: str) -> OnConflict:
    from plaudit.errors import ValidationError

    if on_conflict not in ("raise", "skip"):
        raise ValidationError("on_conflict", f"must be 'raise' or 'skip', not {on_conflict!r}")
    return on_conflict  # type: ignore[return-value]


def settle(
    prepared: Sequence[Prepared],
    held: Held,
    on_conflict: OnConflict,
    next_seq: int | None,
) -> Settled:
    """Apply the rule to one call. `held` is what the log (and, where there is one, the
    intake) holds of the call's ids; new events are numbered from `next_seq`, or `queued`
    when it is None. Raises `ConflictError` for a strict call that meets a conflict."""
    results: list[AppendResult] = []
    new: list[Prepared] = []
    mine: dict[str, tuple[bytes, int | None]] = {}
    for p in prepared:
        id_ = p.event.id
        hit = mine.get(id_) or held.get(id_)
        if hit is None:
            seq = None if next_seq is None else next_seq + len(new)
            mine[id_] = (p.content_digest, seq)
            new.append(p)
            results.append(AppendResult(id_, seq, "appended" if seq is not None else "queued"))
        elif hit[0] == p.content_digest:
            # Queued: an id another call left pending; a repeat within this call is present.
            waits = hit[1] is None and id_ not in mine
            results.append(AppendResult(id_, hit[1], "queued" if waits else "present"))
        elif on_conflict == "raise":
            raise ConflictError(id_)
        else:
            results.append(AppendResult(id_, hit[1], "conflict"))
    return Settled(results, new)


def settle_group(
    calls: Iterable[tuple[Sequence[Prepared], OnConflict]], held: Held, next_seq: int
) -> tuple[list[BatchResult | ConflictError], list[Prepared]]:
    """The rule for several calls written in one transaction, in order: a strict call that
    conflicts (with the log, or with an earlier call of the group) is left out whole and gets
    its `ConflictError`; the others are numbered after one another."""
    known = dict(held)
    outcomes: list[BatchResult | ConflictError] = []
    new: list[Prepared] = []
    for prepared, on_conflict in calls:
        try:
            s = settle(prepared, known, on_conflict, next_seq + len(new))
        except ConflictError as exc:
            outcomes.append(exc)
            continue
        for p, r in zip(prepared, s.results, strict=True):
            if r.status == "appended":
                known[p.event.id] = (p.content_digest, r.seq)
        new.extend(s.new)
        outcomes.append(BatchResult(s.results))
    return outcomes, new


def resolved(
    prepared: Sequence[Prepared],
    found: Held,
    on_conflict: OnConflict,
    own: set[str],
) -> BatchResult:
    """The answer of a call whose events a sequencing pass has handled, from what the log
    holds now (`found`); `own` are the ids whose intake rows this call wrote, which are
    `appended` where the log holds this call's content. An id the log lacks was refused with
    its strict call when another of the call's ids conflicted (the call gets that
    `ConflictError`); with no such conflict, the row was removed (or refused as invalid)
    before it was sequenced: an `IntegrityError`."""
    missing = [p for p in prepared if p.event.id not in found]
    if missing:
        bad = next(
            (
                p.event.id
                for p in prepared
                if p.event.id in found and found[p.event.id][0] != p.content_digest
            ),
            None,
        )
        if bad is not None:
            raise ConflictError(bad)
        raise IntegrityError(
            f"id {missing[0].event.id!r} was taken into the intake but never sequenced: its row "
            "was removed or changed in the database before a pass could sequence it (see "
            "`plaudit log quarantine --file plaudit_intake`); nothing of this call is in the log"
        )
    s = settle(prepared, found, on_conflict, None)
    return BatchResult(
        [
            AppendResult(r.id, r.seq, "appended")
            if r.status == "present" and r.id in own and first
            else r
            for r, first in zip(s.results, _first_of_each_id(prepared), strict=True)
        ]
    )


def _first_of_each_id(prepared: Sequence[Prepared]) -> list[bool]:
    seen: set[str] = set()
    out = []
    for p in prepared:
        out.append(p.event.id not in seen)
        seen.add(p.event.id)
    return out
