"""Property tests: replay rebuilds identical projections; no input bytes can hurt the import."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _logtools import table_dump
from plaudit import Plaudit
from plaudit.config import is_postgres, split_schema
from plaudit.events import StoredEvent
from plaudit.seqmem import import_file
from plaudit.store import Tx, register_projection, unregister_projection

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "data" / "sample_router_log.jsonl"


class OrderSensitive:
    """Folds events in a way that changes if any is missed, repeated or reordered."""

    name = "test_fold"
    version = 1
    prefixes = ("prop.",)
    tables = ("test_fold",)

    def create(self, tx: Tx) -> None:
        tx.execute(
            tx.ddl(
                "CREATE TABLE IF NOT EXISTS test_fold (session_id TEXT PRIMARY KEY, "
                "n {bigint} NOT NULL, acc {bigint} NOT NULL, last TEXT NOT NULL)"
            )
        )

    def apply(self, tx: Tx, events: Sequence[StoredEvent]) -> None:
        for e in events:
            row = tx.fetchone("SELECT n, acc FROM test_fold WHERE session_id = ?", (e.session_id,))
            n, acc = (0, 7) if row is None else (int(row[0]), int(row[1]))
            acc = (acc * 31 + int(e.payload["v"]) + e.seq) % 1_000_000_007
            tx.execute(
                "INSERT INTO test_fold (session_id, n, acc, last) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (session_id) DO UPDATE SET n = excluded.n, acc = excluded.acc, "
                "last = excluded.last",
                (e.session_id, n + 1, acc, json.dumps(e.payload, sort_keys=True)),
            )


@pytest.fixture
def new_store(db_url: str, tmp_path: Path) -> Iterator[Callable[[], Plaudit]]:
    """Opens a fresh, empty store per call (one per hypothesis example), on db_url's backend."""
    opened: list[Plaudit] = []
    schemas: list[str] = []

    def make() -> Plaudit:
        if not is_postgres(db_url):
            p = Plaudit.open(str(tmp_path / f"p{len(opened)}.db"))
        else:
            dsn, schema = split_schema(db_url)
            schemas.append(f"{schema}_{len(opened)}")
            p = Plaudit.open(dsn, schema=schemas[-1])
        opened.append(p)
        return p

    try:
        yield make
    finally:
        for p in opened:
            p.close()
        if schemas:
            import psycopg

            with psycopg.connect(split_schema(db_url)[0], autocommit=True) as conn:
                for name in schemas:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


event_st = st.fixed_dictionaries(
    {
        "id": st.text("abcdef0123", min_size=1, max_size=4),
        "type": st.sampled_from(["prop.a.v1", "prop.b.v1", "other.c.v1"]),
        "session_id": st.sampled_from(["s1", "s2", "s3", ""]),
        "ts_ms": st.integers(0, 2**40),
        "payload": st.fixed_dictionaries(
            {"v": st.integers(-1000, 1000)},
            optional={
                "t": st.text(max_size=10),
                "f": st.floats(allow_nan=False, allow_infinity=False, width=32),
            },
        ),
    }
)


@pytest.fixture
def fold() -> Iterator[OrderSensitive]:
    proj = OrderSensitive()
    register_projection(proj)
    try:
        yield proj
    finally:
        unregister_projection(proj.name)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(events=st.lists(event_st, max_size=40), cuts=st.lists(st.integers(1, 10), max_size=8))
def test_replay_rebuilds_identical_projections(
    new_store: Callable[[], Plaudit],
    fold: OrderSensitive,
    events: list[dict[str, Any]],
    cuts: list[int],
) -> None:
    p = new_store()
    pos = 0
    for c in [*cuts, len(events)]:  # arbitrary batch boundaries
        p.log.append_batch(events[pos : pos + c], on_conflict="skip")
        pos += c
    p.log.ensure_projection(fold.name)
    live = table_dump(p, "test_fold", "session_id")
    p.log.rebuild([fold.name])
    assert table_dump(p, "test_fold", "session_id") == live
    # And it is the fold of exactly the committed prop.* events, in log order.
    expected: dict[str, list[int]] = {}
    for e in p.log.replay(types=["prop."]):
        n, acc = expected.get(e.session_id, [0, 7])
        expected[e.session_id] = [n + 1, (acc * 31 + e.payload["v"] + e.seq) % 1_000_000_007]
    assert {s: [n, acc] for s, n, acc, _ in live} == expected
    assert p.log.verify().ok


def seq_mem_line(i: int, **over: Any) -> bytes:
    row = {
        "ts_ms": 1_763_700_000_000 + i,
        "dur_us": 5,
        "ok": True,
        "session_id": "fz",
        "event_id": f"fz-{i}",
        "content_hash": "0" * 64,
        "name": "flow.router.decision.v1",
        "subject": json.dumps({"i": i}),
    }
    row.update(over)
    return json.dumps(row).encode()


fragments = st.one_of(
    st.binary(max_size=80),
    st.integers(0, 50).map(seq_mem_line),
    # Lines that reuse ids already in the log, with other content: must never overwrite.
    st.sampled_from(["sample-000:decision", "sample-001:outcome", "sample-002:decision"]).map(
        lambda i: seq_mem_line(0, event_id=i, subject='{"hijack": true}')
    ),
    st.integers(0, 50).map(lambda i: seq_mem_line(i)[: i % 40]),  # truncated
    st.sampled_from([b"\x00", b"\xff\xfe", b"\r", b"{}", b"[]", b"null", b'{"a":1e999}']),
    # Deep nesting, as a whole line and inside a subject string.
    st.integers(60, 20_000).map(lambda n: b"[" * n + b"]" * n),
    st.integers(60, 20_000).map(lambda n: seq_mem_line(n, subject="[" * n + "]" * n)),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(chunks=st.lists(st.lists(fragments, max_size=3).map(b"".join), max_size=12))
def test_arbitrary_bytes_never_crash_import_nor_touch_committed_events(
    pl: Plaudit, tmp_path: Path, chunks: list[bytes]
) -> None:
    if len(pl.log) == 0:
        import_file(pl.log, SAMPLE)
    before_head = pl.log.head()
    before = list(pl.log.replay())
    path = tmp_path / "fuzz.jsonl"
    data = b"\n".join(chunks)
    path.write_bytes(data)
    report = import_file(pl.log, path)  # must not raise
    assert report.lines == data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    assert report.imported + report.duplicates + report.quarantined + report.blank == report.lines
    after = list(pl.log.replay(until_seq=before_head.length))
    assert after == before
    assert pl.log.verify(against=before_head).ok
    assert len(pl.log) == before_head.length + report.imported
