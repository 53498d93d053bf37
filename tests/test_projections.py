"""Projections: derived tables that move with the log, in the same transaction, and rebuild."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _logtools import ev, table_dump
from plaudit import ConflictError, Plaudit, ValidationError, make_event
from plaudit.cli import main
from plaudit.errors import ConfigError
from plaudit.events import StoredEvent
from plaudit.store import Tx, register_projection, unregister_projection


class SessionCounts:
    """Counts `test.` events per session; version 2 counts each event twice."""

    name = "test_counts"
    prefixes = ("test.",)
    tables = ("test_counts",)

    def __init__(self, version: int = 1) -> None:
        self.version = version
        self.applied: list[int] = []
        self.fail_on: str | None = None

    def create(self, tx: Tx) -> None:
        tx.execute(
            tx.ddl(
                "CREATE TABLE IF NOT EXISTS test_counts (session_id TEXT PRIMARY KEY, "
                "n {bigint} NOT NULL, total {double} NOT NULL, last_seq {bigint} NOT NULL)"
            )
        )

    def apply(self, tx: Tx, events: Sequence[StoredEvent]) -> None:
        for e in events:
            if self.fail_on is not None and e.id == self.fail_on:
                raise RuntimeError("projection failed")
            self.applied.append(e.seq)
            tx.execute(
                "INSERT INTO test_counts (session_id, n, total, last_seq) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (session_id) DO UPDATE SET n = test_counts.n + excluded.n, "
                "total = test_counts.total + excluded.total, last_seq = excluded.last_seq",
                (e.session_id, self.version, float(e.payload.get("i", 0)) / 4, e.seq),
            )


@pytest.fixture
def proj() -> Iterator[SessionCounts]:
    p = SessionCounts()
    register_projection(p)
    try:
        yield p
    finally:
        unregister_projection(p.name)


def counts(p: Plaudit) -> dict[str, int]:
    p.log.ensure_projection("test_counts")
    with p.backend.read() as tx:
        return {s: int(n) for s, n in tx.fetchall("SELECT session_id, n FROM test_counts")}


def applied_seq(p: Plaudit) -> int:
    with p.backend.read() as tx:
        return int(
            tx.scalar("SELECT applied_seq FROM plaudit_projections WHERE name = 'test_counts'")
        )


def test_projection_moves_with_the_append(pl: Plaudit, proj: SessionCounts) -> None:
    pl.log.append_batch([ev(1, session="a"), ev(2, session="b"), ev(3, session="a")])
    pl.log.append(make_event("other.kind.v1", {}, id="o1", session_id="a"))
    assert counts(pl) == {"a": 2, "b": 1}
    assert proj.applied == [1, 2, 3]  # only matching types, in log order
    pl.log.append(ev(2, session="b"))  # already present: not applied again
    assert counts(pl) == {"a": 2, "b": 1}


def test_failed_appends_leave_the_projection_unchanged(pl: Plaudit, proj: SessionCounts) -> None:
    pl.log.append(ev(1, session="a"))
    before = table_dump(pl, "test_counts", "session_id")
    with pytest.raises(ValidationError):
        pl.log.append_batch([ev(2, session="a"), {"type": "test.x.v1", "ts_ms": "bad"}])
    with pytest.raises(ConflictError):
        pl.log.append_batch([ev(3, session="a"), ev(1, session="a", changed=True)])
    with pytest.raises(RuntimeError), pl.log.writer() as w:
        w.append(ev(4, session="a"))
        raise RuntimeError("the caller changed its mind")
    proj.fail_on = "e5"
    with pytest.raises(RuntimeError, match="projection failed"):
        pl.log.append_batch([ev(6, session="a"), ev(5, session="a")])
    assert table_dump(pl, "test_counts", "session_id") == before
    assert [e.id for e in pl.log.replay()] == ["e1"]  # ...and so is the log
    assert applied_seq(pl) == 1


def test_writer_reads_state_and_appends_atomically(pl: Plaudit, proj: SessionCounts) -> None:
    pl.log.append(ev(1, session="a"))
    with pl.log.writer() as w:
        n = w.tx.scalar("SELECT n FROM test_counts WHERE session_id = 'a'")
        w.append(ev(2, session="a", seen=n))
        assert w.tx.scalar("SELECT n FROM test_counts WHERE session_id = 'a'") == 2
    assert pl.log.get("e2").payload["seen"] == 1


def test_late_registration_catches_up(pl: Plaudit) -> None:
    pl.log.append_batch([ev(i, session=f"s{i % 2}") for i in range(10)])
    late = SessionCounts()
    register_projection(late)
    try:
        assert counts(pl) == {"s0": 5, "s1": 5}
        assert applied_seq(pl) == 10
    finally:
        unregister_projection(late.name)


def test_gap_left_by_an_unaware_writer_is_filled(pl: Plaudit, proj: SessionCounts) -> None:
    pl.log.append(ev(1, session="a"))
    unregister_projection(proj.name)
    pl.log.append_batch([ev(2, session="a"), ev(3, session="b")])  # nobody applies these
    register_projection(proj)
    pl.log.append(ev(4, session="b"))  # fills seq 2..3 first, then applies 4
    assert proj.applied == [1, 2, 3, 4]
    assert counts(pl) == {"a": 2, "b": 2}


def test_version_bump_rebuilds(pl: Plaudit, proj: SessionCounts) -> None:
    pl.log.append_batch([ev(1, session="a"), ev(2, session="a")])
    assert counts(pl) == {"a": 2}
    proj.version = 2
    pl.log.append(ev(3, session="a"))
    assert counts(pl) == {"a": 6}  # every event counted again at the new version
    with pl.backend.read() as tx:
        sql = "SELECT version FROM plaudit_projections WHERE name = ?"
        assert tx.scalar(sql, (proj.name,)) == 2


def test_rebuild_yields_identical_tables(pl: Plaudit, proj: SessionCounts) -> None:
    for b in range(5):
        pl.log.append_batch([ev(b * 10 + i, session=f"s{i % 3}") for i in range(7)])
    before = table_dump(pl, "test_counts", "session_id")
    assert pl.log.rebuild([proj.name]) == {proj.name: 35}
    assert table_dump(pl, "test_counts", "session_id") == before
    with pl.backend.write() as tx:  # damage the derived state; the log still has the truth
        tx.execute("DELETE FROM test_counts")
    assert pl.rebuild()[proj.name] == 35
    assert table_dump(pl, "test_counts", "session_id") == before


def test_cli_rebuild_yields_identical_tables(
    pl: Plaudit, db_url: str, proj: SessionCounts, capsys
) -> None:
    pl.log.append_batch([ev(i, session=f"s{i % 4}") for i in range(20)])
    before = table_dump(pl, "test_counts", "session_id")
    assert main(["rebuild", "--db", db_url, "test_counts"]) == 0
    assert "rebuilt test_counts from 20 events" in capsys.readouterr().out
    assert main(["rebuild", "--db", db_url, "--json"]) == 0
    assert '"test_counts":20' in capsys.readouterr().out
    assert table_dump(pl, "test_counts", "session_id") == before
    assert main(["rebuild", "--db", db_url, "no_such_projection"]) == 2
    assert "error: no projection named 'no_such_projection'" in capsys.readouterr().err


def test_unknown_projection_is_a_config_error(pl: Plaudit) -> None:
    with pytest.raises(ConfigError, match="no projection named"):
        pl.log.ensure_projection("nope")


def test_import_string_registration_loads_lazily(pl: Plaudit) -> None:
    register_projection("test_projections:SessionCounts", name="test_counts", prefixes=["test."])
    try:
        pl.log.append_batch([ev(1, session="z")])
        assert counts(pl) == {"z": 1}
    finally:
        unregister_projection("test_counts")
    with pytest.raises(ConfigError, match="needs name and prefixes"):
        register_projection("test_projections:SessionCounts")


# -- trailing projections: off the write path, caught up before anyone reads -------------


@pytest.fixture
def trailing() -> Iterator[SessionCounts]:
    p = SessionCounts()
    p.trailing = True  # type: ignore[attr-defined]
    register_projection(p)
    try:
        yield p
    finally:
        unregister_projection(p.name)


def test_trailing_projection_is_off_the_write_path(pl: Plaudit, trailing: SessionCounts) -> None:
    from plaudit.store.projections import trailing_projections

    assert trailing_projections() == ["signals", "test_counts", "traces"]  # router rows trail too
    pl.log.append_batch([ev(i, session=f"s{i % 2}") for i in range(6)])
    pl.log.append(ev(6, session="s0"))
    assert trailing.applied == []  # the appends did not apply it...
    assert counts(pl) == {"s0": 4, "s1": 3}  # ...the read caught it up, in log order
    assert trailing.applied == list(range(1, 8))
    assert applied_seq(pl) == 7


def test_trailing_catch_up_runs_in_chunks_and_never_moves_back(
    pl: Plaudit, trailing: SessionCounts, monkeypatch: pytest.MonkeyPatch
) -> None:
    import plaudit.store.log as logmod

    monkeypatch.setattr(logmod, "CATCH_UP_CHUNK", 3)
    pl.log.append_batch([ev(i, session="a") for i in range(8)])
    assert pl.log.catch_up() == 3 * 8  # positions, summed over "signals", "traces" and this one
    assert pl.log.catch_up() == 0
    assert applied_seq(pl) == 8
    # A catch-up aimed at an older head (another process moved the projection past it
    # meanwhile) leaves the state where it is: moving it back would apply events twice.
    with pl.log.writer() as w:
        assert pl.log.projections.catch_up(w.tx, "test_counts", 5, 3) == 8
    assert applied_seq(pl) == 8
    pl.log.append(ev(8, session="a"))
    assert counts(pl) == {"a": 9}
    assert trailing.applied == list(range(1, 10))


@given(
    sizes=st.lists(st.integers(1, 6), min_size=1, max_size=6),
    reads=st.lists(st.booleans(), min_size=6, max_size=6),
    chunk=st.integers(1, 7),
)
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_trailing_state_does_not_depend_on_when_it_caught_up(
    tmp_path_factory: pytest.TempPathFactory,
    sizes: list[int],
    reads: list[bool],
    chunk: int,
) -> None:
    """However appends and catch-ups interleave, and whatever the chunk, the tables equal a
    rebuild, and equal those of a projection applied on the write path."""
    import plaudit.store.log as logmod

    old = logmod.CATCH_UP_CHUNK
    logmod.CATCH_UP_CHUNK = chunk
    proj = SessionCounts()
    proj.trailing = True  # type: ignore[attr-defined]
    register_projection(proj)
    try:
        path = tmp_path_factory.mktemp("trail") / "p.db"
        with Plaudit.open(str(path)) as p:
            n = 0
            for size, read in zip(sizes, reads, strict=False):
                p.log.append_batch([ev(n + i, session=f"s{(n + i) % 3}") for i in range(size)])
                n += size
                if read:
                    counts(p)
            live = counts(p)
            dump = table_dump(p, "test_counts", "session_id")
            p.log.rebuild(["test_counts"])
            assert table_dump(p, "test_counts", "session_id") == dump
        assert sum(live.values()) == n
    finally:
        logmod.CATCH_UP_CHUNK = old
        unregister_projection(proj.name)


def test_a_process_settles_a_small_trailing_backlog_when_it_closes(
    db_url: str, trailing: SessionCounts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing brings the rows up to date after a batch of appends (the next reader has
    nothing to do); a backlog over one chunk (a bulk import) is left to the readers."""
    import plaudit.store.log as logmod

    monkeypatch.setattr(logmod, "CATCH_UP_CHUNK", 10)
    monkeypatch.setattr(logmod, "SETTLE_MIN", 3)
    with Plaudit.open(db_url) as p:
        p.log.append_batch([ev(i, session="a") for i in range(2)])
    assert trailing.applied == []  # fewer than SETTLE_MIN: a hook's emit pays no catch-up
    with Plaudit.open(db_url) as p:
        p.log.append_batch([ev(i, session="a") for i in range(2, 5)])
        assert trailing.applied == []
    assert trailing.applied == [1, 2, 3, 4, 5]
    with Plaudit.open(db_url) as p:
        assert applied_seq(p) == 5
        p.log.append_batch([ev(i, session="a") for i in range(5, 21)])  # 16 > one chunk
    assert trailing.applied == [1, 2, 3, 4, 5]
    with Plaudit.open(db_url) as p:
        assert applied_seq(p) == 5
        assert counts(p) == {"a": 21}  # the reader catches up
