"""A PostgreSQL writer's group that goes ahead on the head this process wrote last, in one
round trip (`PostgresBackend.try_sequence(expect=...)`): whatever another writer did meanwhile
(moved the head, appended one of the group's ids, left intake pending), the guess is rolled
back whole and the group answers exactly as a writer that read the head first would. Also:
no append plans a scan of the log (the id look-ups probe its index)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plaudit import ConflictError, Plaudit
from test_log_v2 import assert_rebuild_identical, assert_whole, event

_example = itertools.count()


@pytest.fixture
def two(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Plaudit, Plaudit]]:
    """Two handles that write for themselves, as two hosts would."""
    monkeypatch.setenv("PLAUDIT_HOST_GROUP", "0")
    a, b = Plaudit.open(pg_url), Plaudit.open(pg_url)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def test_a_writer_goes_ahead_on_the_head_it_wrote(two: tuple[Plaudit, Plaudit]) -> None:
    a, _ = two
    assert a.log.append(event("a1")).seq == 1
    assert a.log._expect is not None and a.log._expect.seq == 1
    for i in range(2, 6):
        assert a.log.append(event(f"a{i}")).seq == i
        assert a.log._expect is not None and a.log._expect.seq == i
    assert a.log._expect_misses == 0
    assert_whole(a, {f"a{i}" for i in range(1, 6)})


def test_a_head_another_writer_moved_rolls_the_guess_back_whole(
    two: tuple[Plaudit, Plaudit],
) -> None:
    a, b = two
    a.log.append(event("a1"))
    b.log.append(event("b1"))
    got = a.log.append_batch([event("a2"), event("a3")])
    assert [(r.id, r.seq, r.status) for r in got.results] == [
        ("a2", 3, "appended"),
        ("a3", 4, "appended"),
    ]
    assert a.log._expect_misses == 1  # the guess was tried and refused
    assert [e.id for e in a.log.replay()] == ["a1", "b1", "a2", "a3"]
    assert_whole(a, {"a1", "b1", "a2", "a3"})
    assert_rebuild_identical(a)


def test_an_id_another_writer_appended_is_present_or_a_conflict(
    two: tuple[Plaudit, Plaudit],
) -> None:
    a, b = two
    a.log.append(event("a1"))
    b.log.append(event("x", 7))
    again = a.log.append(event("x", 7))
    assert (again.seq, again.status) == (2, "present")
    b.log.append(event("y", 1))
    with pytest.raises(ConflictError):
        a.log.append(event("y", 2))
    assert [e.id for e in a.log.replay()] == ["a1", "x", "y"]
    assert_whole(a, {"a1", "x", "y"})


def test_pending_intake_is_sequenced_before_the_group(two: tuple[Plaudit, Plaudit]) -> None:
    a, b = two
    a.log.append(event("a1"))
    with b.backend.intake() as tx:  # an appender that died after its intake commit
        tx.intake_put([_intake_row(b, event("q1"))])  # type: ignore[attr-defined]
    got = a.log.append(event("a2"))
    assert got.seq == 3
    assert [e.id for e in a.log.replay()] == ["a1", "q1", "a2"]
    assert_whole(a, {"a1", "q1", "a2"})


def _intake_row(p: Plaudit, ev: dict[str, Any]) -> tuple[Any, ...]:
    """An intake row (INTAKE_COLUMNS order) as an appender writes it."""
    from plaudit.events import prepare_batch

    (prep,) = prepare_batch([ev])
    e = prep.event
    return (
        e.id,
        e.type,
        e.ts_ms,
        e.session_id,
        e.source,
        prep.payload_text,
        prep.meta_text,
        prep.content_digest,
        "batch-of-a-dead-appender",
        True,
    )


#: Steps: (which handle, id number, value). Two handles writing in turn, ids shared.
_steps = st.lists(
    st.tuples(st.integers(0, 1), st.integers(0, 6), st.integers(0, 1)), min_size=1, max_size=14
)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=_steps)
def test_any_turns_of_two_writers_answer_as_the_log_model(
    two: tuple[Plaudit, Plaudit], steps: list[tuple[int, int, int]]
) -> None:
    """Whoever wrote last, whatever ids the other wrote meanwhile: every answer (position,
    status, conflict) equals a model of the log, and the log verifies."""
    handles = two
    run = next(_example)
    held: dict[str, tuple[int, int]] = {}
    head = len(handles[0].log)
    for who, n, value in steps:
        id_ = f"r{run}-{n}"
        hit = held.get(id_)
        if hit is not None and hit[0] != value:
            with pytest.raises(ConflictError):
                handles[who].log.append(event(id_, value))
            continue
        got = handles[who].log.append(event(id_, value))
        if hit is None:
            head += 1
            held[id_] = (value, head)
            assert (got.seq, got.status) == (head, "appended")
        else:
            assert (got.seq, got.status) == (hit[1], "present")
    assert len(handles[1].log) == head
    assert handles[1].log.verify().ok


def test_appends_never_scan_the_log(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every id look-up of the write path probes the id index: a plan made while the log was
    new (and never analysed) once stayed a scan of the whole log as it grew."""
    monkeypatch.setenv("PLAUDIT_HOST_GROUP", "0")
    dsn, _, schema = pg_url.rpartition("schema=")
    # Two writers taking turns: both the guessed head and the head read first are used.
    with Plaudit.open(pg_url) as p, Plaudit.open(pg_url) as q:
        for i in range(120):
            (p, q)[i % 3 == 0].log.append(event(f"e{i}"))
        p.log.append_batch([event(f"b{i}") for i in range(20)])
        q.log.append(event("e5"))  # present
        with pytest.raises(ConflictError):
            p.log.append(event("e6", 1))
    # The writers' connections are closed: their statistics reach the shared counters.
    with psycopg.connect(dsn.rstrip("?&"), autocommit=True) as conn:
        deadline = time.monotonic() + 5
        while True:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            row = conn.execute(
                "SELECT seq_scan, idx_scan FROM pg_stat_user_tables "
                "WHERE schemaname = %s AND relname = 'plaudit_events'",
                (schema,),
            ).fetchone()
            if (row and row[1] and row[1] >= 120) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert row is not None and row[1] >= 120, row  # the look-ups did reach the statistics
    assert row[0] <= 5, f"{row[0]} scans of plaudit_events for 142 appends"


def test_an_error_after_the_rows_were_sent_writes_nothing(
    two: tuple[Plaudit, Plaudit], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guessed head's transaction has no BEGIN (a pipeline's statements before its Sync
    are one transaction): an error raised after its rows were sent must roll it back, not
    let the Sync commit them."""
    from plaudit.store.log import EventLog

    a, _ = two
    a.log.append(event("a1"))
    assert a.log._expect is not None
    finish = EventLog._finish

    def sent_then_fails(self: EventLog, *args: Any, **kwargs: Any) -> Any:
        finish(self, *args, **kwargs)  # the rows, the head and the tree are sent
        raise RuntimeError("a projection failed")

    monkeypatch.setattr(EventLog, "_finish", sent_then_fails)
    with pytest.raises(RuntimeError, match="a projection failed"):
        a.log.append(event("a2"))
    monkeypatch.setattr(EventLog, "_finish", finish)
    assert [e.id for e in a.log.replay()] == ["a1"]
    assert a.log.append(event("a3")).seq == 2
    assert_whole(a, {"a1", "a3"})
