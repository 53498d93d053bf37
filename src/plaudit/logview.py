"""The log as people look at it: an event whose stored payload no longer decodes is shown as
corrupted, in its place, instead of ending the listing with an exception.

The log's own readers raise on such a row, rightly: code must never act on half an event. A
person running `plaudit log tail` on a damaged store needs the opposite: to see the events
around the damage and where it is. Only the public reading API is used (`tail`, `replay`):
the fast path is the log's own, and the slower one below runs only once a row has failed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import closing

import msgspec

from plaudit.events import StoredEvent
from plaudit.store.log import EventLog

#: What decoding a damaged row raises (msgspec.DecodeError is a ValueError).
UNDECODABLE = (ValueError, UnicodeError)


class CorruptEvent(msgspec.Struct, frozen=True):
    """A committed position whose payload or meta does not decode."""

    seq: int
    reason: str
    corrupted: bool = True


Shown = StoredEvent | CorruptEvent


def read(
    log: EventLog,
    after: int = 0,
    until: int | None = None,
    *,
    types: Sequence[str] | None = None,
) -> Iterator[Shown]:
    """Events after position `after` (up to `until`), in order, damaged ones as CorruptEvent."""
    pos = after
    while True:
        try:
            for event in log.replay(pos, types=types, until_seq=until):
                pos = event.seq
                yield event
            return
        except UNDECODABLE as exc:
            bad = _first_undecodable(log, pos, until, types)
            yield CorruptEvent(bad, f"payload or meta does not decode: {exc}")
            pos = bad


def _first_undecodable(
    log: EventLog, after: int, until: int | None, types: Sequence[str] | None
) -> int:
    """The position that failed: the first row after `after` that replay reaches. Every row
    before it is one `types` excludes, so the answer is found by halving the range."""
    lo, hi = after, log.head().length if until is None else until  # the answer is in (lo, hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            with closing(log.replay(lo, types=types, until_seq=mid)) as rows:
                reached = next(rows, None)  # closed at once: no read left open
        except UNDECODABLE:
            hi = mid
            continue
        if reached is None:
            lo = mid  # nothing readable or damaged up to mid: it lies beyond
        else:  # pragma: no cover - cannot happen: positions below the head never change
            raise AssertionError(f"position {reached.seq} decoded on a second read")
    return hi


def tail(log: EventLog, n: int = 10, *, types: Sequence[str] | None = None) -> list[Shown]:
    """The last `n` events (of `types`), oldest first, damaged ones as CorruptEvent."""
    try:
        return list(log.tail(n, types=types))
    except UNDECODABLE:
        pass
    head = log.head().length
    found: list[Shown] = []
    hi, window = head, max(n, 256)
    while hi > 0 and len(found) < n:
        lo = max(hi - window, 0)
        found[:0] = read(log, lo, hi, types=types)
        hi = lo
    return found[-n:] if n else []


__all__ = ["CorruptEvent", "Shown", "read", "tail"]
