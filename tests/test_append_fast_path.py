"""The batch append's fast paths give exactly what the general code gives.

`prepare_batch` inlines `prepare`'s checks, `chain.chain_new_rows` inlines `Prepared.body`, and
SQLite inserts rows through multi-row statements: each is held here to the plain version.
"""

from __future__ import annotations

import enum
import hashlib
import math
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plaudit import Plaudit
from plaudit.events import Event, Prepared, prepare, prepare_batch
from plaudit.store.chain import GENESIS, chain_new_rows
from plaudit.store.schema import EVENT_COLUMNS
from plaudit.store.sqlite import ROWS_PER_INSERT, SqliteTx


class Level(enum.IntEnum):
    HIGH = 3


class Color(enum.Enum):
    RED = "red"


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60),
    st.floats(),  # NaN and infinities included
    st.text(max_size=6),
    st.sampled_from([Level.HIGH, Color.RED, b"raw", (1, 2), frozenset({1})]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner),
        st.dictionaries(st.text(max_size=3), inner, max_size=3),
        st.dictionaries(st.integers(0, 3), inner, min_size=1, max_size=2),
    ),
    max_leaves=12,
)
objects = st.one_of(
    st.dictionaries(st.text(max_size=5), values, max_size=4),
    st.builds(lambda d: {"deep": d}, st.integers(60, 70).map(lambda n: _nested(n))),
    st.sampled_from([[1], "text", None, {"s": "y" * 300}]),
)
texts = st.one_of(
    st.text("abcxyz-_.:/0123456789", max_size=12),
    st.text(max_size=6),  # control characters, non-ASCII, lone surrogates
    st.sampled_from(["x" * 201, "x" * 257, 5, None]),
)
event_fields = st.fixed_dictionaries(
    {
        "id": st.one_of(st.text("abcdef0123", min_size=1, max_size=6), texts),
        "type": st.one_of(
            st.sampled_from(["fast.a.v1", "fast.b.v1", "plaudit.bandit.fast.v1"]),
            st.text("abc.", max_size=8),
            st.sampled_from(["nodots", "", 3, "x." + "y" * 300]),
        ),
        "ts_ms": st.one_of(
            st.integers(0, 2**53 - 1), st.sampled_from([-1, 2**53, True, 1.5, "now"])
        ),
        "session_id": texts,
        "source": texts,
        "payload": objects,
        "meta": st.one_of(st.just({}), objects),
    }
)


def _nested(depth: int) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for _ in range(depth):
        obj = {"k": obj}
    return obj


def _as_input(fields: dict[str, Any], form: str) -> Any:
    if form == "event":  # an Event holds whatever it was given: msgspec does not check
        return Event(**fields)
    if fields["id"] is None:  # a mapping would get a new random id on every call
        fields = {**fields, "id": "fixed"}
    if form == "dict":
        return dict(fields)
    return {**fields, "colour": "red"}  # an unknown field


def _outcome(f: Any) -> Any:
    try:
        return f()
    except Exception as exc:  # the same error, word for word, is part of the contract
        return (type(exc), str(exc), getattr(exc, "field", None))


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(event_fields, st.sampled_from(["event", "event", "dict", "unknown"])),
        max_size=8,
    ),
    st.integers(1, 1 << 20),
)
def test_prepare_batch_is_prepare_on_each_event(items: list[Any], limit: int) -> None:
    events = [_as_input(f, form) for f, form in items]

    def one_by_one() -> list[Prepared]:
        return [
            prepare(e, where=f"event[{i}]", max_payload_bytes=limit) for i, e in enumerate(events)
        ]

    # Twice each: the first call may meet type names not yet known, the second knows them.
    first = _outcome(lambda: prepare_batch(events, max_payload_bytes=limit))
    expected = _outcome(one_by_one)
    again = _outcome(lambda: prepare_batch(events, max_payload_bytes=limit))
    assert first == expected
    assert again == expected


def test_prepare_batch_takes_any_iterable_and_names_the_failing_event() -> None:
    # A fixed ts_ms: a default one is "now", which may move on between the two calls.
    good = {"id": "a", "type": "fast.a.v1", "ts_ms": 1_780_000_000_000, "payload": {"x": 1}}
    assert prepare_batch(iter([good])) == [prepare(good)]
    with pytest.raises(Exception, match=r"^event\[2\]: payload.x: nan is not valid JSON"):
        prepare_batch([good, good, {**good, "payload": {"x": math.nan}}])


good_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cc",)), max_size=5)
prepared_batches = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["fast.a.v1", "fast.b.v1", "plaudit.bandit.fast.v1"]),
            "ts_ms": st.integers(0, 2**53 - 1),
            "session_id": good_text,
            "source": good_text,
            "payload": st.dictionaries(
                st.text(max_size=4), st.integers(-(2**53) + 1, 2**53 - 1) | st.text(), max_size=3
            ),
            "meta": st.dictionaries(st.text(max_size=3), st.booleans(), max_size=2),
        }
    ),
    max_size=20,
)


@settings(max_examples=200, deadline=None)
@given(prepared_batches, st.integers(0, 10**6), st.binary(min_size=32, max_size=32))
def test_chain_new_rows_hash_each_body_after_the_last(
    batch: list[dict[str, Any]], seq: int, prev: bytes
) -> None:
    """The batch append's inlined body is `Prepared.body`, chained from `prev`, numbered
    from `seq + 1`."""
    prepared = [prepare({**f, "id": f"id-{i}"}) for i, f in enumerate(batch)]
    rows, last, tip = chain_new_rows(prepared, seq, prev, bytes)
    assert [r[0] for r in rows] == list(range(seq + 1, seq + len(prepared) + 1))
    assert last == seq + len(prepared)
    for p, row in zip(prepared, rows, strict=True):
        assert row[-1] == hashlib.sha256(prev + p.body()).digest()
        prev = row[-1]
    assert tip == prev


def _rows(n: int, start: int = 1) -> list[tuple[Any, ...]]:
    return [
        (
            i,
            f"id-{i}",
            "t.x.v1",
            i * 7,
            "s",
            "src",
            '{"a":1}',
            "{}",
            bytearray(hashlib.sha256(b"%d" % i).digest()),
            hashlib.sha256(b"h%d" % i).digest(),
        )
        for i in range(start, start + n)
    ]


def _table(conn: sqlite3.Connection, name: str) -> None:
    conn.execute(f"CREATE TABLE {name} ({', '.join(EVENT_COLUMNS)})")
    conn.execute(f"CREATE UNIQUE INDEX {name}_id ON {name} (id)")


@pytest.mark.parametrize("limit", [None, 999, 25, 15])  # None: what SQLite allows here
@pytest.mark.parametrize("n", [0, 1, ROWS_PER_INSERT - 1, ROWS_PER_INSERT, 1001])
def test_sqlite_multi_row_insert_matches_executemany(n: int, limit: int | None) -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    if limit is not None:  # as before SQLite 3.32 (999), down to one row per statement
        conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, limit)
    _table(conn, "a")
    _table(conn, "b")
    rows = _rows(n)
    SqliteTx(conn).copy_rows("a", EVENT_COLUMNS, rows)
    marks = ",".join("?" * len(EVENT_COLUMNS))
    conn.executemany(f"INSERT INTO b VALUES ({marks})", rows)
    dump = "SELECT *, typeof(content_digest), typeof(hash) FROM {} ORDER BY seq"
    assert conn.execute(dump.format("a")).fetchall() == conn.execute(dump.format("b")).fetchall()
    assert len(conn.execute(dump.format("a")).fetchall()) == n


def test_sqlite_multi_row_insert_refuses_a_taken_id_in_a_later_statement() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    _table(conn, "a")
    rows = _rows(ROWS_PER_INSERT * 3)
    rows[-1] = (rows[-1][0], rows[0][1], *rows[-1][2:])  # last row repeats the first id
    with pytest.raises(sqlite3.IntegrityError):
        SqliteTx(conn).copy_rows("a", EVENT_COLUMNS, rows)


def test_a_batch_with_a_known_id_takes_the_careful_path_and_verifies(tmp_path: Path) -> None:
    def batch(lo: int, hi: int) -> list[dict[str, Any]]:
        return [
            {"id": f"e{i}", "type": "fast.a.v1", "ts_ms": i, "payload": {"i": i}}
            for i in range(lo, hi)
        ]

    with Plaudit.open(tmp_path / "p.db") as p:
        assert p.log.append_batch(batch(0, 1000)).appended == 1000
        r = p.log.append_batch(batch(999, 2000))  # e999 again, same content
        assert (r.appended, r.present, r.results[0].seq) == (1000, 1, 1000)
        r = p.log.append_batch(batch(2000, 2600))  # all new again: the optimistic path
        assert r.appended == 600 and [x.seq for x in r.results][:2] == [2001, 2002]
        assert p.log.verify().ok
        assert p.log.head().length == 2600
        with p.log.backend.read() as tx:
            kinds = tx.fetchall(
                "SELECT DISTINCT typeof(content_digest), typeof(hash) FROM plaudit_events"
            )
        assert kinds == [("blob", "blob")]
        assert p.log.get("e2599").hash == p.log.head().hash


def test_blob_columns_chain_from_a_log_written_with_bytes(tmp_path: Path) -> None:
    """A log written before (blobs bound as bytes) continues and verifies."""
    path = tmp_path / "p.db"
    with Plaudit.open(path) as p:
        with p.log.backend.write() as tx:
            prepared = [
                prepare({"id": f"old{i}", "type": "fast.a.v1", "ts_ms": i}) for i in range(3)
            ]
            rows, seq, tip = chain_new_rows(prepared, 0, GENESIS, bytes)
            tx.executemany(
                f"INSERT INTO plaudit_events ({','.join(EVENT_COLUMNS)}) "
                f"VALUES ({','.join('?' * len(EVENT_COLUMNS))})",
                rows,
            )
            tx.execute("UPDATE plaudit_head SET seq = ?, hash = ? WHERE one = 1", (seq, tip))
        p.log.append_batch([{"id": f"new{i}", "type": "fast.a.v1"} for i in range(300)])
        report = p.log.verify()
        assert report.ok and report.length == 303


def test_ordinary_events_skip_the_per_event_prepare(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path is really taken: only events it is unsure about reach `prepare`."""
    import plaudit.events as events_module

    seen: list[str] = []
    real = events_module.prepare

    def counting(value: Any, **kw: Any) -> Prepared:
        seen.append(kw["where"])
        return real(value, **kw)

    monkeypatch.setattr(events_module, "prepare", counting)
    new = uuid.uuid4().hex  # type names this process has not seen yet
    batch: list[Any] = [
        Event(
            id=f"o{i}",
            type=f"fast.t{new}.v{i % 2}",
            ts_ms=i,
            session_id="s",
            source="t",
            payload={"i": i, "f": 0.5, "l": [1, {"a": None}], "s": "é"},
            meta={"ok": True} if i % 3 else {},
        )
        for i in range(10)
    ]
    batch[5] = msgspec.structs.replace(batch[5], payload={"t": (1, 2)})  # a tuple: walked
    batch.append({"id": "m", "type": f"fast.t{new}.v0", "ts_ms": 1})  # a mapping: coerced
    out = prepare_batch(batch)
    # The first event of each new type name, and the tuple, go the careful way.
    assert seen == ["event[0]", "event[1]", "event[5]"]
    assert out == [real(e) for e in batch]
