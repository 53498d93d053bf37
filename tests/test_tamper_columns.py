"""Every stored column of every event is protected: a change to any one fails `log verify`.

`content_digest` is not part of the chained body; verify recomputes it from the columns it
covers. Before log v2 an edited digest passed every check, and a later append of that id with
other content was answered `present`: the write was silently lost.
"""

from __future__ import annotations

import hashlib

import pytest

from _logtools import attacker, ev
from plaudit import Plaudit, make_event
from plaudit.store.schema import EVENT_COLUMNS

N = 8
TARGET = 5

#: column -> an SQL expression that changes it at position TARGET (keeping its type).
CHANGES = {
    "seq": "seq + 100",
    "id": "id || 'x'",
    "type": "'test.other.v1'",
    "ts_ms": "ts_ms + 1",
    "session_id": "session_id || 'x'",
    "source": "source || 'x'",
    "payload": "'{\"i\":999}'",
    "meta": "'{\"m\":1}'",
    "content_digest": "?",
    "hash": "?",
}


def test_every_column_is_listed() -> None:
    assert set(CHANGES) == set(EVENT_COLUMNS)


@pytest.mark.parametrize("workers", [1, 3], ids=["serial", "parallel"])
@pytest.mark.parametrize("column", sorted(CHANGES))
def test_a_change_to_any_column_fails_verify(
    pl: Plaudit, db_url: str, column: str, workers: int
) -> None:
    pl.log.append_batch([ev(i) for i in range(1, N + 1)])
    assert pl.log.verify(workers=workers, full=True).ok
    params: tuple[object, ...] = ()
    if CHANGES[column] == "?":
        params = (hashlib.sha256(b"forged").digest(),)
    with attacker(db_url) as raw:
        raw.execute(
            f"UPDATE plaudit_events SET {column} = {CHANGES[column]} WHERE seq = {TARGET}", params
        )
    report = pl.log.verify(workers=workers, full=True)
    assert not report.ok, column
    assert report.first_bad is not None and report.first_bad <= TARGET, report


def test_a_forged_digest_no_longer_hides_a_lost_write(pl: Plaudit, db_url: str) -> None:
    """The digest is set to what *other* content would give; verify names the position."""
    pl.log.append_batch([ev(i) for i in range(1, N + 1)])
    other = make_event(
        "test.thing.v1", {"i": 12345}, id=f"e{TARGET}", session_id="s1", ts_ms=1_700_000_000_005
    )
    from plaudit.events import prepare

    forged = prepare(other).content_digest
    with attacker(db_url) as raw:
        raw.execute(f"UPDATE plaudit_events SET content_digest = ? WHERE seq = {TARGET}", (forged,))
    report = pl.log.verify(full=True)
    assert not report.ok and report.first_bad == TARGET
    assert "content_digest" in (report.reason or "")
