"""The relay, the pump and `enqueue` (plaudit.store.relay): results handed between processes.

The PostgreSQL tests run against the real server; the SQLite ones check that `enqueue` is a
plain append where there is no intake.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plaudit import ConflictError, Plaudit
from plaudit.store import relay as relay_mod
from plaudit.store.relay import PAYLOAD_LIMIT, decode_results, encode_results

TYPE = "test.relay.v1"


def event(id_: str, value: int = 0) -> dict[str, Any]:
    return {
        "id": id_,
        "type": TYPE,
        "ts_ms": 1,
        "session_id": "s",
        "source": "t",
        "payload": {"v": value},
    }


@pytest.fixture(autouse=True)
def _one_process_per_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the intake, which processes of one host bypass when they group
    their commits (plaudit.store.hostgroup, tested in tests/test_hostgroup.py): as processes
    on different hosts do, each of them here writes for itself."""
    monkeypatch.setenv("PLAUDIT_HOST_GROUP", "0")


tokens = st.text(alphabet="0123456789abcdef", min_size=1, max_size=32)


@given(st.lists(st.tuples(tokens, st.one_of(st.none(), st.integers(1, 2**62))), max_size=600))
def test_results_survive_the_payloads_whole_and_in_order(
    results: list[tuple[str, int | None]],
) -> None:
    payloads = encode_results(results)
    assert all(len(p.encode()) <= PAYLOAD_LIMIT for p in payloads)
    assert [r for p in payloads for r in decode_results(p)] == results


def test_enqueue_is_append_where_there_is_no_intake(tmp_path: Any) -> None:
    with Plaudit.open(tmp_path / "s.db") as p:
        got = p.log.enqueue(event("a"))
        assert (got.status, got.seq) == ("appended", 1)
        assert p.log.enqueue(event("a")).status == "present"


def wait_for(p: Plaudit, n: int, limit: float = 10.0) -> float:
    start = time.monotonic()
    while len(p.log) < n:
        assert time.monotonic() - start < limit, f"{len(p.log)} of {n} sequenced"
        time.sleep(0.005)
    return time.monotonic() - start


@pytest.mark.postgres
def test_enqueued_events_are_durable_first_and_get_positions_from_the_pump(pg_url: str) -> None:
    """No call after `enqueue` is needed: the pump this process started sequences them."""
    with Plaudit.open(pg_url) as p:
        results = [p.log.enqueue(event(f"q{i}", i)) for i in range(50)]
        assert {(r.status, r.seq) for r in results} == {("queued", None)}
        wait_for(p, 50)
        stored = list(p.log.replay())
        assert sorted(e.id for e in stored) == sorted(f"q{i}" for i in range(50))
        assert [e.seq for e in stored] == list(range(1, 51))
        assert p.log.verify().ok
        # Enqueueing again is idempotent, and now says where the event is.
        again = p.log.enqueue(event("q7", 7))
        assert again.status == "present" and again.seq == p.log.get("q7").seq  # type: ignore[union-attr]


@pytest.mark.postgres
def test_enqueue_refuses_conflicts_with_the_log_and_with_the_intake(pg_url: str) -> None:
    with Plaudit.open(pg_url) as p:
        p.log.append(event("held", 1))
        with pytest.raises(ConflictError):
            p.log.enqueue(event("held", 2))
        # A strict batch with one conflicting id takes nothing in.
        with pytest.raises(ConflictError):
            p.log.enqueue_batch([event("fresh", 1), event("held", 3)])
        lenient = p.log.enqueue_batch([event("fresh2", 1), event("held", 3)], on_conflict="skip")
        assert [r.status for r in lenient.results] == ["queued", "conflict"]
        p.log.sequence()
        assert p.log.get("fresh") is None
        assert p.log.get("fresh2") is not None
        got = p.log.get("held")
        assert got is not None and got.payload == {"v": 1}
        # An id still pending in the intake with other content is a conflict too. A writer
        # holds the lease meanwhile, so nothing sequences the pending row under the test.
        backend: Any = p.backend
        holding, release = threading.Event(), threading.Event()

        def hold() -> None:
            with Plaudit.open(pg_url) as h, h.log.writer():
                holding.set()
                release.wait(30)

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            assert holding.wait(30)
            with backend.intake() as tx:
                tx.intake_put([("pend", TYPE, 1, "s", "t", '{"v":1}', "{}", b"\1" * 32, "b", True)])
            with pytest.raises(ConflictError):
                p.log.enqueue(event("pend", 9))
        finally:
            release.set()
            holder.join(30)


@pytest.mark.postgres
def test_a_conflict_only_the_pass_can_see_is_quarantined_not_lost(pg_url: str) -> None:
    """An enqueued event whose id was being sequenced with other content at that moment is
    refused by the pass; its row is kept in the quarantine with the reason."""
    with Plaudit.open(pg_url) as p:
        p.log.append(event("raced", 1))
        with p.backend.intake() as tx:  # as if the intake check ran before that commit
            tx.execute(
                "INSERT INTO plaudit_intake (id, type, ts_ms, session_id, source, payload, "
                "meta, content_digest, batch, strict) VALUES (?, ?, 1, 's', 't', ?, '{}', ?, "
                "'late', ?)",
                ("raced", TYPE, '{"v":2}', b"\2" * 32, False),
            )
        p.log.sequence()
        got = p.log.get("raced")
        assert got is not None and got.payload == {"v": 1}
        with p.log.reading() as view:
            kept = view.quarantined(file="plaudit_intake")
        assert len(kept) == 1 and "'raced' holds other content" in kept[0].reason
        assert '"payload":{"v":2}' in kept[0].raw
        assert p.log.verify().ok


@pytest.mark.postgres
def test_appends_finish_when_every_notification_is_lost(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The relay is a shortcut: waiters that hear nothing look their ids up themselves."""
    monkeypatch.setattr(relay_mod.Relay, "_deliver", lambda self, payload: None)
    monkeypatch.setattr("plaudit.store.log.RELAY_WAIT_S", 0.01)
    with Plaudit.open(pg_url) as p:
        errors: list[BaseException] = []

        def writer(t: int) -> None:
            try:
                with Plaudit.open(pg_url) as h:
                    for i in range(30):
                        h.log.append(event(f"lost-{t}-{i}", i))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors
        assert len(p.log) == 120
        assert p.log.verify().ok


HOLD_PUMP = r"""
import sys, time
from plaudit import Plaudit
p = Plaudit.open(sys.argv[1])
assert p.backend.claim_pump()
print("holding", flush=True)
time.sleep(600)
"""


@pytest.mark.postgres
def test_a_stuck_pump_does_not_stall_waiting_appenders(pg_url: str) -> None:
    """Another process holds the pump lock and never pumps (stopped, say): appends that go to
    the intake still finish, by sequencing themselves once the lease is free."""
    with Plaudit.open(pg_url):
        pass
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_PUMP, pg_url], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        with Plaudit.open(pg_url) as p:
            queued = p.log.enqueue(event("stuck-q"))
            assert queued.status == "queued"

            def appender(t: int) -> None:
                with Plaudit.open(pg_url) as h:
                    for i in range(20):
                        h.log.append(event(f"stuck-{t}-{i}", i))

            threads = [threading.Thread(target=appender, args=(t,)) for t in range(3)]
            start = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert time.monotonic() - start < 60
            assert len(p.log) == 61  # the queued one was sequenced along the way
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.postgres
def test_only_intake_that_waits_for_a_pass_skips_its_own_flush(pg_url: str) -> None:
    """An appender that waits for a sequencing pass commits its intake without waiting for the
    WAL flush (the pass's commit flushes it, before anything is acknowledged); the setting is
    local to that transaction, so nothing else on the connection is relaxed."""
    with Plaudit.open(pg_url) as p:
        b: Any = p.backend
        with b.intake(relaxed=True) as tx:
            assert tx.scalar("SHOW synchronous_commit") == "off"
        with b.intake() as tx:
            assert tx.scalar("SHOW synchronous_commit") == "on"
        with b.intake(single=True, relaxed=True) as tx:
            row = ("relaxed", TYPE, 1, "s", "t", '{"v":1}', "{}", b"\3" * 32, "r", True)
            assert tx.intake_put([row])[0][4] is True
            assert tx.scalar("SHOW synchronous_commit") == "on"
        assert p.log.sequence() == 1


@pytest.mark.postgres
def test_an_idle_pump_catches_trailing_projections_up(pg_url: str) -> None:
    """Nobody reads, yet the trailing projection reaches the head: the pump applies it in
    the time it has no intake to sequence, so a later reader finds little left to do."""
    from plaudit.store import register_projection, unregister_projection
    from test_projections import SessionCounts

    proj = SessionCounts()
    proj.trailing = True  # type: ignore[attr-defined]
    register_projection(proj)
    try:
        with Plaudit.open(pg_url) as p:
            for i in range(40):
                p.log.enqueue(event(f"t{i}", i))
            wait_for(p, 40)
            start = time.monotonic()
            while True:
                with p.backend.read() as tx:
                    applied = tx.scalar(
                        "SELECT applied_seq FROM plaudit_projections WHERE name = 'test_counts'"
                    )
                if applied == 40:
                    break
                assert time.monotonic() - start < 10, f"applied through {applied} of 40"
                time.sleep(0.01)
            assert proj.applied == list(range(1, 41))
    finally:
        unregister_projection(proj.name)


@pytest.mark.postgres
def test_a_pump_pass_takes_one_short_chunk_and_never_rereads_the_head(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pump pass commits as soon as a take comes back short of a full chunk (its appenders
    hear sooner; the next pass takes what arrived meanwhile), and after a chunk it wrote it
    continues on the head it left, with no read of the head row."""
    import psycopg

    from plaudit.events import prepare
    from plaudit.store import log as log_mod

    monkeypatch.setattr(log_mod, "DRAIN_CHUNK", 2)
    sent: list[str] = []
    execute = psycopg.Cursor.execute

    def traced(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return execute(self, query, *args, **kwargs)

    with Plaudit.open(pg_url) as p:
        p.log.append(event("first"))
        backend: Any = p.backend
        ready = [prepare(event(f"i{k}", k)) for k in range(5)]
        rows = [
            (e.event.id, TYPE, 1, "s", "t", e.payload_text, e.meta_text, e.content_digest)
            for e in ready
        ]
        with backend.intake() as tx:
            tx.intake_put([(*row, f"b{k}", True) for k, row in enumerate(rows)])
        monkeypatch.setattr(psycopg.Cursor, "execute", traced)
        assert p.log._pump_pass() == 5  # chunks of 2, 2 and 1: full, full, short
        monkeypatch.setattr(psycopg.Cursor, "execute", execute)
        takes = [q for q in sent if "DELETE FROM plaudit_intake" in q]
        head_reads = [q for q in sent if "FROM plaudit_head WHERE one = 1 FOR UPDATE" in q]
        assert len(takes) == 3, sent  # no fourth take to find the intake empty
        assert head_reads == [], head_reads
        assert [e.id for e in p.log.replay()] == ["first"] + [f"i{k}" for k in range(5)]
        assert [e.seq for e in p.log.replay()] == list(range(1, 7))
        assert p.log.verify().ok
