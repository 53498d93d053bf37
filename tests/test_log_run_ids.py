"""`EventLog.run(fn, ids=...)`: ids looked up with the lease answer exactly as a look-up of
their own would, whatever the hint (complete, partial, wrong), across several writes of one
function, across the requests of one group commit, and when another host commits one of them
while this writer waits for the lease. Also the one-statement read (`read_statement`)."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plaudit import ConflictError, Plaudit
from test_log_v2 import assert_whole, event

_example = itertools.count()

#: One function's writes: batches of (id number, value), and which id numbers it hints.
_writes = st.lists(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 1)), min_size=1, max_size=4),
    min_size=1,
    max_size=3,
)
_calls = st.lists(st.tuples(_writes, st.sets(st.integers(0, 7), max_size=6)), max_size=6)


def _model(
    held: dict[str, tuple[int, int]], head: int, batches: list[list[tuple[str, int]]]
) -> tuple[Any, dict[str, tuple[int, int]], int]:
    """What one `run` must answer: the batches' statuses and positions, or a conflict (then
    nothing it wrote stays)."""
    mine, seq, out = dict(held), head, []
    for batch in batches:
        statuses = []
        for id_, value in batch:
            hit = mine.get(id_)
            if hit is None:
                seq += 1
                mine[id_] = (value, seq)
                statuses.append(("appended", seq))
            elif hit[0] == value:
                statuses.append(("present", hit[1]))
            else:
                return ConflictError, held, head
        out.append(statuses)
    return out, mine, seq


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(calls=_calls)
def test_hinted_ids_answer_as_a_look_up_would(db_url: str, calls: list[Any]) -> None:
    """Any hint: the statuses, positions and conflicts equal a model of the log, including a
    function's second write of an id its first write appended."""
    tag = f"x{next(_example)}"
    with Plaudit.open(db_url) as p:
        head = p.log.head().length
        held: dict[str, tuple[int, int]] = {}
        for batches, hint in calls:
            named = [[(f"{tag}-{i}", v) for i, v in batch] for batch in batches]

            def fn(w: Any, named: list[list[tuple[str, int]]] = named) -> list[Any]:
                got = []
                for batch in named:
                    res = w.append_batch([event(i, v) for i, v in batch])
                    got.append([(r.status, r.seq) for r in res.results])
                return got

            want, held, head = _model(held, head, named)
            if want is ConflictError:
                with pytest.raises(ConflictError):
                    p.log.run(fn, ids=[f"{tag}-{i}" for i in hint])
            else:
                assert p.log.run(fn, ids=[f"{tag}-{i}" for i in hint]) == want
            assert p.log.head().length == head
        for id_, (value, seq) in held.items():
            got = p.log.get(id_)
            assert got is not None and (got.payload["v"], got.seq) == (value, seq)


def test_a_group_shares_the_look_up_and_an_undone_request_leaves_it_true(db_url: str) -> None:
    """Eight threads at once (one group commit, or a few): each appends its own id and a shared
    one; number 3 appends the shared id and then raises. The shared id lands once, everyone
    else is told `present` at its position, and nothing of number 3's stays."""
    with Plaudit.open(db_url) as p:
        gate = threading.Barrier(8)
        results: dict[int, Any] = {}

        def fn_for(k: int) -> Any:
            def fn(w: Any) -> Any:
                shared = w.append(event("shared", 7))
                own = w.append(event(f"own-{k}", k))
                if k == 3:
                    raise ValueError("number 3 refuses")
                return shared.status, shared.seq, own.status

            return fn

        def work(k: int) -> None:
            gate.wait()
            try:
                results[k] = p.log.run(fn_for(k), ids=["shared", f"own-{k}"])
            except ValueError as exc:
                results[k] = exc

        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        assert isinstance(results[3], ValueError)
        assert p.log.get("own-3") is None
        shared = p.log.get("shared")
        assert shared is not None
        answers = [results[k] for k in range(8) if k != 3]
        assert all(own == "appended" for _, _, own in answers)
        assert all(seq == shared.seq for _, seq, _ in answers)
        assert sorted(status for status, _, _ in answers) == ["appended"] + ["present"] * 6
        assert_whole(p, {"shared"} | {f"own-{k}" for k in range(8) if k != 3})


@pytest.mark.postgres
def test_an_id_committed_while_waiting_for_the_lease_is_seen(pg_url: str) -> None:
    """The statement that waits for the lease reads the ids in a snapshot taken before it got
    the lease; what another host committed in between must still count as held (else the
    append would take a second position for the same id)."""
    a, b = Plaudit.open(pg_url), Plaudit.open(pg_url)
    try:
        a.log.append(event("first"))
        got: list[Any] = []

        def other() -> None:
            got.append(b.log.run(lambda w: w.append(event("raced", 1)), ids=["raced"]))

        with a.log.writer() as w:  # holds the lease from here
            th = threading.Thread(target=other)
            th.start()
            time.sleep(0.5)  # b's statement has begun and waits for the lease
            w.append(event("raced", 1))
        th.join(30)
        assert got and got[0].status == "present" and got[0].seq == 2
        assert_whole(a, {"first", "raced"})
    finally:
        a.close()
        b.close()


def test_a_one_statement_read_sees_one_snapshot(db_url: str) -> None:
    """On PostgreSQL it is one statement on its own and a second is refused; on SQLite it is a
    snapshot like any read. Inside a write it sees the write's own appends."""
    with Plaudit.open(db_url) as p:
        p.log.append(event("one"))
        with p.backend.read_statement() as tx:
            assert tx.fetchone("SELECT COUNT(*) FROM plaudit_events")[0] == 1
            if p.backend.dialect == "postgres":
                with pytest.raises(RuntimeError, match="one statement"):
                    tx.fetchone("SELECT 1")

        def fn(w: Any) -> int:
            w.append(event("two"))
            with p.backend.read_statement() as tx:
                n = tx.fetchone("SELECT COUNT(*) FROM plaudit_events")[0]
                tx.fetchone("SELECT 1")  # the write's own transaction: not limited
            return int(n)

        assert p.log.run(fn) == 2
