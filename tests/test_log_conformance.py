"""The log's conformance suite: what every backend guarantees, tested through public operations.

Durability, idempotency, ordering, read-your-write, and that any interleaving verifies and
rebuilds identically. Both backends run every test here (the `db_url` fixture). Contention is
real: several handles (each its own connections, as separate hosts would have) and several
processes append at once, so on PostgreSQL both routes run (the lease, and the intake with its
sequencing passes) and on SQLite the writers queue on the kernel lock.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _logtools import table_dump
from plaudit import ConflictError, Plaudit

TYPE = "test.v2.v1"


def event(id_: str, value: int = 0, kind: str = TYPE) -> dict[str, Any]:
    return {
        "id": id_,
        "type": kind,
        "ts_ms": 1_700_000_000_000,
        "session_id": "s",
        "source": "t",
        "payload": {"v": value},
    }


def projection_state(p: Plaudit) -> dict[str, list[tuple[Any, ...]]]:
    """Every registered projection's tables, row by row: compared before and after a rebuild."""
    from plaudit.store.projections import _REGISTRY

    out: dict[str, list[tuple[Any, ...]]] = {}
    for entry in _REGISTRY.values():
        for table in entry.load().tables:
            with p.backend.read() as tx:
                if not tx.table_exists(table):
                    continue
            out[table] = sorted(table_dump(p, table, "1"), key=repr)
    return out


def assert_rebuild_identical(p: Plaudit) -> None:
    """Replaying the log gives every projection table exactly the same rows (each projection
    first brought to its current version, as any reader of it would)."""
    from plaudit.store.projections import registered

    for name in registered():
        p.log.ensure_projection(name)
    before = projection_state(p)
    p.rebuild()
    after = projection_state(p)
    assert {t: after[t] for t in before} == before


def assert_whole(p: Plaudit, expected_ids: set[str]) -> None:
    """Nothing lost, nothing twice, dense positions, a chain that verifies."""
    events = list(p.log.replay())
    ids = [e.id for e in events]
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1][:5]
    assert expected_ids <= set(ids), sorted(expected_ids - set(ids))[:5]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    report = p.log.verify()
    assert report.ok, report
    assert report.length == len(events)


def test_handles_in_threads_all_land_once(db_url: str) -> None:
    """Four handles (four 'hosts') x three threads, single appends and batches, with shared
    ids re-sent by everyone: idempotent, dense, verified."""
    handles = [Plaudit.open(db_url) for _ in range(4)]
    gate = threading.Barrier(12)
    errors: list[BaseException] = []
    acked: set[str] = set()
    lock = threading.Lock()

    def work(h: int, t: int) -> None:
        p = handles[h]
        gate.wait()
        try:
            for i in range(25):
                mine = f"h{h}-t{t}-{i}"
                if i % 5 == 0:
                    res = p.log.append_batch(
                        [event(mine), event(f"{mine}-b"), event(f"shared-{i}", i)]
                    )
                    got = {r.id for r in res.results}
                else:
                    got = {p.log.append(event(mine)).id}
                with lock:
                    acked.update(got)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(h, t)) for h in range(4) for t in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    try:
        assert not errors, errors
        assert_whole(handles[0], acked)
        assert handles[0].log.stats().by_type[TYPE] == len(acked)
    finally:
        for p in handles:
            p.close()


def test_a_conflicting_batch_is_refused_whole_under_contention(db_url: str) -> None:
    """A strict batch one of whose ids another handle is committing, with other content, at the
    same moment, appends nothing, whichever path (direct or intake) each side took."""
    a, b = Plaudit.open(db_url), Plaudit.open(db_url)
    try:
        a.log.append(event("taken", 1))
        with pytest.raises(ConflictError):  # already committed: refused before anything else
            b.log.append_batch([event("new-0"), event("taken", 2)])
        done: list[Any] = []

        def other() -> None:
            try:
                done.append(b.log.append_batch([event("new-1"), event("racing", 2)]))
            except ConflictError as exc:
                done.append(exc)

        with a.log.writer() as w:  # hold the lease: b must wait (PostgreSQL: in the intake)
            w.append(event("racing", 1))  # not yet visible to b
            th = threading.Thread(target=other)
            th.start()
            time.sleep(0.3)
            assert not done  # b waits for the lease holder: it cannot have returned yet
        th.join(30)
        assert isinstance(done[0], ConflictError) and done[0].event_id == "racing"
        assert a.log.get("new-1") is None and a.log.get("new-0") is None
        skipped = b.log.append_batch([event("new-2"), event("taken", 3)], on_conflict="skip")
        assert [r.status for r in skipped.results] == ["appended", "conflict"]
        assert_whole(a, {"taken", "racing", "new-2"})
    finally:
        a.close()
        b.close()


def test_writer_holds_the_lock_from_its_first_line(db_url: str) -> None:
    """What a writer reads cannot change before it commits, even before its first append."""
    a, b = Plaudit.open(db_url), Plaudit.open(db_url)
    try:
        a.log.append(event("first"))
        finished = threading.Event()

        def other() -> None:
            b.log.append(event("second"))
            finished.set()

        with a.log.writer() as w:
            before = w.head()
            th = threading.Thread(target=other)
            th.start()
            time.sleep(0.3)
            assert w.head() == before and w.get("second") is None
            assert not finished.is_set()
        th.join(30)
        assert finished.is_set()
        assert a.log.head().length == 2
    finally:
        a.close()
        b.close()


def test_the_caller_reads_its_own_write(db_url: str) -> None:
    """Under contention too: a ledger record returns its running total, and an append is
    visible to the same handle's very next read."""
    handles = [Plaudit.open(db_url) for _ in range(3)]
    gate = threading.Barrier(3)
    bad: list[str] = []

    def work(k: int) -> None:
        p = handles[k]
        gate.wait()
        for i in range(20):
            r = p.log.append(event(f"own-{k}-{i}"))
            got = p.log.get(f"own-{k}-{i}")
            if got is None or got.seq != r.seq:
                bad.append(f"own-{k}-{i}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    try:
        assert not bad
    finally:
        for p in handles:
            p.close()


LEDGER_WRITER = r"""
import sys, threading
from plaudit import Plaudit
db, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = threading.Lock()
def work(t):
    with Plaudit.open(db) as p:
        for i in range(n):
            tx = p.ledger.record("successful_validation", f"{name}-{t}-{i}", key=f"{name}-{t}-{i}")
            with out:  # one whole line at a time: print() from threads can interleave
                sys.stdout.write(f"{tx.running_total}\n")
                sys.stdout.flush()
            p.log.append({"id": f"{name}-{t}-{i}-ev", "type": "test.v2.v1", "session_id": name,
                          "source": "t", "ts_ms": 1, "payload": {"t": t, "i": i}})
threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
for th in threads: th.start()
for th in threads: th.join()
"""


def test_processes_and_threads_keep_exact_ledger_totals(db_url: str) -> None:
    """3 processes x 3 threads, each handle its own: events and ledger records interleave;
    every running total is unique and the final score is exact."""
    n = 8
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", LEDGER_WRITER, db_url, f"p{k}", str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(3)
    ]
    totals: list[int] = []
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
        totals += [int(x) for x in out.split()]
    per = min(totals)  # every record is the same category: the first total is its points
    assert per > 0
    # Every acknowledged running total is distinct and they step by exactly one record each.
    assert sorted(totals) == [per * k for k in range(1, 3 * 3 * n + 1)]
    with Plaudit.open(db_url) as p:
        ids = {f"p{k}-{t}-{i}-ev" for k in range(3) for t in range(3) for i in range(n)}
        assert_whole(p, ids)
        assert p.ledger.verify()["ok"]
        assert_rebuild_identical(p)


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(
        st.lists(
            st.tuples(st.integers(0, 30), st.integers(0, 2), st.sampled_from(["ledger", "t"])),
            min_size=1,
            max_size=6,
        ),
        min_size=2,
        max_size=4,
    )
)
def test_any_interleaving_verifies_and_rebuilds_identically(
    db_url: str, plans: list[list[tuple[int, int, str]]]
) -> None:
    """Handles append generated batches (shared ids, conflicting content, events a projection
    consumes) at once; whatever interleaving results, the log verifies and the projections
    equal a rebuild."""
    handles = [Plaudit.open(db_url) for _ in plans]
    gate = threading.Barrier(len(plans))
    run = os.urandom(4).hex()

    def work(k: int) -> None:
        gate.wait()
        for n, value, kind in plans[k]:
            if kind == "ledger":
                category = ("successful_validation", "validation_failure", "pattern_reuse")[value]
                handles[k].ledger.record(category, f"step {n}", key=f"{run}-{n}-{value}")
            else:
                handles[k].log.append_batch([event(f"{run}-{n}", value)], on_conflict="skip")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(plans))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    try:
        p = handles[0]
        assert p.log.verify().ok
        events = list(p.log.replay())
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert_rebuild_identical(p)
    finally:
        for h in handles:
            h.close()


ENQUEUE_AND_DIE = r"""
import os, sys
from plaudit import Plaudit
p = Plaudit.open(sys.argv[1])
p.log.enqueue_batch([{"id": f"orphan-{i}", "type": "test.v2.v1", "session_id": "s",
                      "source": "t", "ts_ms": 1, "payload": {"v": i}} for i in range(2)])
os._exit(0)  # no close: nothing this process started gets to finish
"""


def test_acknowledged_events_of_a_dead_writer_are_sequenced_once(db_url: str) -> None:
    """A writer that dies right after its events were acknowledged (durable; on PostgreSQL
    maybe only in the intake) leaves them to the next writer: `sequence()` (or any append)
    gives them positions, once, and the log verifies."""
    with Plaudit.open(db_url):
        pass
    subprocess.run([sys.executable, "-c", ENQUEUE_AND_DIE, db_url, "-"], check=True, timeout=60)
    with Plaudit.open(db_url) as p:
        p.log.sequence()
        assert p.log.sequence() == 0
        got = p.log.get("orphan-1")
        assert got is not None and got.payload == {"v": 1}
        assert_whole(p, {"orphan-0", "orphan-1"})


SIGKILL_WRITER = r"""
import os, sys, threading
from plaudit import Plaudit
db, name, ack = sys.argv[1], sys.argv[2], sys.argv[3]
fd = os.open(ack, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
def work(t):
    with Plaudit.open(db) as p:
        i = 0
        while True:
            if i % 4 == 0:
                ids = [f"{name}-{t}-{i}-{j}" for j in range(30)]
                p.log.append_batch([{"id": x, "type": "test.v2.v1", "session_id": "s",
                                     "source": "t", "ts_ms": 1, "payload": {"x": x}} for x in ids])
            else:
                # Every fourth call only queues the event (acknowledged once durable in the
                # intake, on PostgreSQL): the pump, killed or not, must not lose it either.
                ids = [f"{name}-{t}-{i}"]
                call = p.log.enqueue if i % 4 == 1 else p.log.append
                call({"id": ids[0], "type": "test.v2.v1", "session_id": "s",
                      "source": "t", "ts_ms": 1, "payload": {"x": ids[0]}})
            os.write(fd, ("\n".join(ids) + "\n").encode())
            i += 1
for t in range(2):
    threading.Thread(target=work, args=(t,), daemon=True).start()
threading.Event().wait()
"""


@pytest.mark.parametrize("rounds", [3])
def test_kill_9_writers_and_sequencers_at_random_points(
    db_url: str, tmp_path: Path, rounds: int
) -> None:
    """Three processes (two threads and handles each) append until SIGKILL, at random
    moments, three rounds. Whoever held the lease mid-pass dies with it. After each round:
    every acknowledged event is there exactly once, the log verifies, projections rebuild."""
    import random

    rng = random.Random(7)
    acked: set[str] = set()
    for r in range(rounds):
        acks = [tmp_path / f"ack-{r}-{k}" for k in range(3)]
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", SIGKILL_WRITER, db_url, f"r{r}p{k}", str(acks[k])],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for k in range(3)
        ]
        time.sleep(1.0 + rng.random() * 1.5)
        for proc in procs:
            proc.kill()
            time.sleep(rng.random() * 0.05)
        for proc in procs:
            proc.wait()
        for a in acks:
            if a.exists():
                acked.update(x for x in a.read_text().split("\n")[:-1] if x)
        with Plaudit.open(db_url) as p:
            p.log.sequence()
            assert_whole(p, acked)
    assert acked  # the writers really wrote


V1_FIXTURE = Path(__file__).parent / "data" / "log-v1.db"
V1_HEAD = "32:996b4ca63d7552f31b40a902d214dbc8e71df05cee29aa14defd34152e65c726"


def test_a_store_written_by_log_v1_opens_upgrades_and_continues(tmp_path: Path) -> None:
    """tests/data/log-v1.db was written by plaudit before log v2 (ledger, bandit, signals and
    plain events). It opens, upgrades in place, verifies with the same head, and continues."""
    import shutil

    db = tmp_path / "old.db"
    shutil.copy(V1_FIXTURE, db)
    with Plaudit.open(db) as p:
        with p.backend.read() as tx:
            from plaudit.store.schema import SCHEMA_VERSION, schema_version

            assert schema_version(tx) == SCHEMA_VERSION
        report = p.log.verify()
        assert report.ok and report.head == V1_HEAD
        assert p.ledger.score()["total_score"] == 130
        p.ledger.record("successful_validation", "after the upgrade", key="new")
        p.log.append(event("after-upgrade"))
        assert p.log.verify(against=V1_HEAD).ok  # the old history is untouched
        assert p.ledger.verify()["ok"]
        assert_rebuild_identical(p)


def test_a_v1_postgres_schema_upgrades_with_writers_of_both_versions(pg_url: str) -> None:
    """A version-1 PostgreSQL schema (no intake table) is upgraded by the first v2 open; an old
    writer that still takes only the head row's lock stays serialised with v2's lease."""
    import psycopg

    from plaudit.config import split_schema

    with Plaudit.open(pg_url) as p:
        p.log.append_batch([event(f"old-{i}") for i in range(5)])
    dsn, schema = split_schema(pg_url)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute("DROP TABLE plaudit_intake")
        conn.execute("UPDATE plaudit_meta SET value = '1' WHERE key = 'schema_version'")
    with Plaudit.open(pg_url) as p:
        with p.backend.read() as tx:
            assert tx.table_exists("plaudit_intake")
        # An old-version writer holds the head row lock; a v2 append must wait for it.
        with psycopg.connect(dsn, autocommit=True) as old:
            old.execute(f'SET search_path TO "{schema}"')
            old.execute("BEGIN")
            old.execute("SELECT seq FROM plaudit_head WHERE one = 1 FOR UPDATE")
            done = threading.Event()
            th = threading.Thread(target=lambda: (p.log.append(event("new")), done.set()))
            th.start()
            time.sleep(0.3)
            assert not done.is_set()
            old.execute("COMMIT")
            th.join(30)
        assert done.is_set()
        assert_whole(p, {f"old-{i}" for i in range(5)} | {"new"})


def test_run_functions_are_group_committed_and_isolated(db_url: str) -> None:
    """`log.run(fn)` from many threads: each function reads and appends atomically, results
    come back to their callers, and one that raises is undone alone."""
    with Plaudit.open(db_url) as p:
        gate = threading.Barrier(8)
        results: dict[int, Any] = {}

        def fn_for(k: int):
            def fn(w):
                seq, _ = w.head()
                w.append(event(f"run-{k}", k))
                if k == 3:
                    raise ValueError("function 3 refuses")
                return seq

            return fn

        def work(k: int) -> None:
            gate.wait()
            try:
                results[k] = p.log.run(fn_for(k))
            except ValueError as exc:
                results[k] = exc

        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert isinstance(results[3], ValueError)
        assert p.log.get("run-3") is None  # undone alone
        for k in set(range(8)) - {3}:
            got = p.log.get(f"run-{k}")
            assert got is not None and got.payload == {"v": k}
            assert isinstance(results[k], int) and results[k] < got.seq
        assert_whole(p, {f"run-{k}" for k in range(8) if k != 3})


@pytest.mark.postgres
def test_a_revision_0_postgres_schema_gains_the_intake_index_once(pg_url: str) -> None:
    """Schema version 2 as the previous release left it (no batch index on the intake, no
    revision key) opens, gains the index and the revision, and keeps every event; a process
    of the previous release (which reads only the version) still finds version 2."""
    import psycopg

    from plaudit.config import split_schema
    from plaudit.store.schema import SCHEMA_REVISION, SCHEMA_VERSION

    with Plaudit.open(pg_url) as p:
        p.log.append_batch([event(f"r0-{i}") for i in range(5)])
    dsn, schema = split_schema(pg_url)

    def state() -> tuple[Any, Any, Any]:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{schema}"')
            idx = conn.execute("SELECT to_regclass('plaudit_intake_batch')").fetchone()[0]
            meta = dict(conn.execute("SELECT key, value FROM plaudit_meta").fetchall())
        return idx, meta.get("schema_version"), meta.get("schema_revision")

    assert state() == ("plaudit_intake_batch", SCHEMA_VERSION, str(SCHEMA_REVISION))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute("DROP INDEX plaudit_intake_batch")
        conn.execute("DELETE FROM plaudit_meta WHERE key = 'schema_revision'")
    assert state() == (None, SCHEMA_VERSION, None)
    with Plaudit.open(pg_url) as p:
        assert state() == ("plaudit_intake_batch", SCHEMA_VERSION, str(SCHEMA_REVISION))
        p.log.enqueue(event("after"))
        p.log.sequence()
        assert_whole(p, {f"r0-{i}" for i in range(5)} | {"after"})


# -- the idempotency rule, on every route ------------------------------------------------------

calls = st.lists(
    st.tuples(
        st.lists(st.tuples(st.sampled_from("abcde"), st.integers(0, 1)), min_size=1, max_size=4),
        st.sampled_from(["raise", "skip"]),
        st.sampled_from(["append", "enqueue", "contended"]),
    ),
    min_size=1,
    max_size=6,
)


def model(steps: list[tuple[list[tuple[str, int]], str, str]], base: int) -> list[Any]:
    """What the rule says each call gets, written from docs/log.md ("Idempotency"): an id
    held with the same content is present at its position, with other content a conflict
    (the whole call refused when strict); new events take the next positions in order."""
    held: dict[str, tuple[int, int]] = {}
    out: list[Any] = []
    for items, on_conflict, _ in steps:
        mine: dict[str, tuple[int, int]] = {}
        results: list[tuple[str, str, int]] = []
        refused = False
        for id_, v in items:
            hit = mine.get(id_) or held.get(id_)
            if hit is None:
                mine[id_] = (v, base + len(held) + len(mine) + 1)
                results.append((id_, "appended", mine[id_][1]))
            elif hit[0] == v:
                results.append((id_, "present", hit[1]))
            elif on_conflict == "raise":
                refused = True
                break
            else:
                results.append((id_, "conflict", hit[1]))
        if refused:
            out.append("conflict")
            continue
        held.update(mine)
        out.append(results)
    return out


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(calls)
def test_every_route_answers_as_the_idempotency_rule(
    db_url: str, steps: list[tuple[list[tuple[str, int]], str, str]]
) -> None:
    """Calls one after another, each through a route chosen for it: a plain append, an
    enqueue (PostgreSQL: the intake, sequenced by a pass), or an append made while another
    handle holds the lease (PostgreSQL: the intake and a wait for the pass). Every call gets
    the answer the rule gives, positions included, and the log verifies."""
    run = os.urandom(3).hex()
    with Plaudit.open(db_url) as p, Plaudit.open(db_url) as other:
        base = len(p.log)  # hypothesis runs its examples on one store
        got: list[Any] = []
        for items, on_conflict, route in steps:
            batch = [event(f"{run}-{i}", v) for i, v in items]
            try:
                if route == "enqueue":
                    r = p.log.enqueue_batch(batch, on_conflict=on_conflict)  # type: ignore[arg-type]
                    p.log.sequence()
                elif route == "contended":
                    r = _while_held(
                        other, lambda b=batch, oc=on_conflict: p.log.append_batch(b, on_conflict=oc)
                    )
                else:
                    r = p.log.append_batch(batch, on_conflict=on_conflict)  # type: ignore[arg-type]
            except ConflictError:
                got.append("conflict")
                continue
            seqs = {e.id: e.seq for e in p.log.replay()}
            got.append(
                [
                    (
                        x.id[len(run) + 1 :],
                        x.status if x.status != "queued" else "appended",
                        x.seq if x.seq is not None else seqs[x.id],
                    )
                    for x in r.results
                ]
            )
        assert got == model(steps, base)
        assert p.log.verify().ok


def _while_held(other: Plaudit, call: Any) -> Any:
    """Run `call` in a thread while `other` holds the lease for a moment."""
    out: list[Any] = []
    holding = threading.Event()

    def hold() -> None:
        with other.log.writer():
            holding.set()
            time.sleep(0.05)

    th = threading.Thread(target=hold)
    th.start()
    holding.wait(10)
    try:
        out.append(call())
    except BaseException as exc:
        out.append(exc)
    th.join(30)
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


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


def test_appends_never_scan_the_log(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every id look-up of the write path probes the id index: a plan made while the log was
    new (and never analysed) once stayed a scan of the whole log as it grew."""
    import psycopg

    monkeypatch.setenv("PLAUDIT_HOST_GROUP", "0")
    dsn, _, schema = pg_url.rpartition("schema=")
    with Plaudit.open(pg_url) as p, Plaudit.open(pg_url) as q:
        for i in range(120):
            (p, q)[i % 3 == 0].log.append(event(f"e{i}"))
        p.log.append_batch([event(f"b{i}") for i in range(20)])
        q.log.append(event("e5"))  # present
        with pytest.raises(ConflictError):
            p.log.append(event("e6", 1))
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
