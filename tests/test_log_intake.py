"""PostgreSQL's intake route: `enqueue`, the pump, the relay, and an intake nobody can use to
forge or drop events (plaudit.store.postgres_sequencer, plaudit.store.relay).

The PostgreSQL tests run against the real server; the SQLite one checks that `enqueue` is a
plain append where there is no intake. Tests that edit the intake with SQL play a database
user who tampers with it, or a race the code cannot otherwise be made to lose on cue.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
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


@given(
    st.lists(
        st.one_of(
            st.tuples(tokens, st.none(), st.just("")),
            st.tuples(tokens, st.integers(1, 2**62), tokens),
        ),
        max_size=600,
    )
)
def test_results_survive_the_payloads_whole_and_in_order(
    results: list[tuple[str, int | None, str]],
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
        holding, release = threading.Event(), threading.Event()

        def hold() -> None:
            with Plaudit.open(pg_url) as h, h.log.writer():
                holding.set()
                release.wait(30)

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            assert holding.wait(30)
            assert p.log.enqueue(event("pend", 1)).status == "queued"
            with pytest.raises(ConflictError):
                p.log.enqueue(event("pend", 9))
            with pytest.raises(ConflictError):  # a strict batch takes nothing in
                p.log.enqueue_batch([event("pend-2", 1), event("pend", 9)])
        finally:
            release.set()
            holder.join(30)
        p.log.sequence()
        assert p.log.get("pend").payload == {"v": 1}  # type: ignore[union-attr]
        assert p.log.get("pend-2") is None


@pytest.mark.postgres
def test_a_conflict_only_the_pass_can_see_is_quarantined_not_lost(pg_url: str) -> None:
    """An enqueued event whose id was being sequenced with other content at that moment is
    refused by the pass; its row is kept in the quarantine with the reason."""
    with Plaudit.open(pg_url) as p:
        p.log.append(event("raced", 1))
        put_intake(p, event("raced", 2), "late")  # as if the intake check ran before that commit
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
    monkeypatch.setattr("plaudit.store.postgres_sequencer.RELAY_WAIT_S", 0.01)
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
conn = p.backend.claim_pump()
assert conn is not None
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
    """An appender that waits for a sequencing pass commits its intake row without waiting for
    the WAL flush (the pass's commit flushes it, before anything is acknowledged); the setting
    is local to that statement's transaction, so nothing else on the connection is relaxed.
    (A server crash between the two is not something this suite can cause on a shared
    server: this checks the setting and its scope.)"""
    from plaudit.events import prepare

    with Plaudit.open(pg_url) as p:
        b: Any = p.backend
        pre = prepare(event("relaxed", 1))
        row = (*_row(pre), "r", True)
        with b.intake() as tx:
            cur = tx.cursor()
            cur.execute("SELECT set_config('synchronous_commit', 'on', false)")
            assert b.ops.intake_put(tx, [row], relaxed=True)[0][4] is True
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


def _row(p: Any) -> tuple[Any, ...]:
    e = p.event
    return (e.id, e.type, e.ts_ms, e.session_id, e.source, p.payload_text, p.meta_text,
            p.content_digest)  # fmt: skip


def put_intake(
    p: Plaudit, ev: dict[str, Any], batch: str, *, strict: bool = False, **edit: Any
) -> None:
    """Insert an intake row with SQL, as a database user could (`edit` overrides columns)."""
    from plaudit.events import prepare

    cols = dict(
        zip(
            ("id", "type", "ts_ms", "session_id", "source", "payload", "meta", "content_digest"),
            _row(prepare(ev)),
            strict=True,
        )
    )
    cols.update(edit, batch=batch, strict=strict)
    conn = p.backend.connection()  # autocommit: the insert commits on its own
    conn.execute(
        f"INSERT INTO plaudit_intake ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))})",
        list(cols.values()),
    )


# -- an intake that cannot be used to forge or drop -------------------------------------------


@pytest.fixture
def held(pg_url: str) -> Iterator[tuple[Plaudit, Plaudit, threading.Event]]:
    """A handle, and a second one holding the lease until the test sets the event: whatever
    enters the intake meanwhile waits there, where a database user could edit it."""
    release, holding = threading.Event(), threading.Event()
    p, h = Plaudit.open(pg_url), Plaudit.open(pg_url)

    def hold() -> None:
        with h.log.writer():
            holding.set()
            release.wait(30)

    th = threading.Thread(target=hold)
    th.start()
    assert holding.wait(30)
    try:
        yield p, h, release
    finally:
        release.set()
        th.join(30)
        p.close()
        h.close()


def _in_thread(call: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(call())
        except BaseException as exc:
            out.append(exc)

    th = threading.Thread(target=run)
    th.start()
    return th, out


def _wait_pending(p: Plaudit, ident: str) -> None:
    start = time.monotonic()
    while True:
        n = (
            p.backend.connection()
            .execute("SELECT count(*) FROM plaudit_intake WHERE id = %s", (ident,))
            .fetchone()[0]
        )
        if n:
            return
        assert time.monotonic() - start < 10
        time.sleep(0.01)


@pytest.mark.postgres
def test_an_edited_intake_row_is_reported_to_its_appender_as_tampering(held: Any) -> None:
    """A database user edits a pending row's payload and digest consistently: the pass
    sequences it (it is valid), but the waiting `append` hears that other content was
    sequenced under its id and raises, where it used to be told "appended"."""
    from plaudit.errors import IntegrityError
    from plaudit.events import prepare

    p, _, release = held
    th, out = _in_thread(lambda: p.log.append(event("victim", 1)))
    _wait_pending(p, "victim")
    forged = prepare(event("victim", 1000))
    p.backend.connection().execute(
        "UPDATE plaudit_intake SET payload = %s, content_digest = %s WHERE id = 'victim'",
        (forged.payload_text, forged.content_digest),
    )
    release.set()
    th.join(30)
    assert isinstance(out[0], IntegrityError) and "tampering" in str(out[0])


@pytest.mark.postgres
def test_an_edited_row_whose_digest_no_longer_matches_is_quarantined(held: Any) -> None:
    """Edited payload, old digest: the pass recomputes the digest, refuses the row (kept in
    quarantine with the reason), and the appender is told it was never sequenced."""
    from plaudit.errors import IntegrityError

    p, _, release = held
    th, out = _in_thread(lambda: p.log.append(event("victim2", 1)))
    _wait_pending(p, "victim2")
    p.backend.connection().execute(
        "UPDATE plaudit_intake SET payload = '{\"v\":1000}' WHERE id = 'victim2'"
    )
    release.set()
    th.join(30)
    assert isinstance(out[0], IntegrityError) and "never sequenced" in str(out[0])
    assert p.log.get("victim2") is None
    with p.log.reading() as view:
        kept = view.quarantined(file="plaudit_intake")
    assert any("content_digest" in q.reason for q in kept)
    assert p.log.verify().ok


@pytest.mark.postgres
def test_a_deleted_intake_row_is_reported_not_called_a_conflict(held: Any) -> None:
    from plaudit.errors import IntegrityError

    p, _, release = held
    th, out = _in_thread(lambda: p.log.append(event("gone", 1)))
    _wait_pending(p, "gone")
    p.backend.connection().execute("DELETE FROM plaudit_intake WHERE id = 'gone'")
    release.set()
    th.join(30)
    assert isinstance(out[0], IntegrityError) and "never sequenced" in str(out[0])


@pytest.mark.postgres
def test_injected_and_undecodable_rows_are_quarantined_and_never_stop_writes(pg_url: str) -> None:
    """Rows inserted straight into the intake are validated when sequenced: one whose payload
    is not JSON, one that breaks the event rules, one whose digest is not its content's are
    quarantined with their reasons; a valid one is sequenced; appends go on throughout."""
    with Plaudit.open(pg_url) as p:
        put_intake(p, event("bad-json", 1), "x1", payload="{not json")
        put_intake(p, event("bad-type", 1), "x2", type="no namespace")
        put_intake(p, event("bad-digest", 1), "x3", content_digest=b"\1" * 32)
        put_intake(p, event("forged-ledger", 1), "x4")  # valid: sequenced like any enqueue
        assert p.log.append(event("after", 1)).status == "appended"
        p.log.sequence()
        ids = {e.id for e in p.log.replay()}
        assert ids == {"after", "forged-ledger"}
        with p.log.reading() as view:
            reasons = {q.reason for q in view.quarantined(file="plaudit_intake")}
        assert len(reasons) == 3, reasons
        assert any("JSON" in r or "malformed" in r.lower() for r in reasons), reasons
        assert any("type" in r for r in reasons) and any("content_digest" in r for r in reasons)
        assert p.log.verify().ok
