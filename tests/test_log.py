"""The log's library API on both backends: append, read back, head, stats, writers, threads."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from _logtools import attacker, ev
from plaudit import ConfigError, Head, Plaudit, ValidationError, make_event


def test_replay_get_tail_and_filters(pl: Plaudit) -> None:
    pl.log.append_batch([ev(i, kind="a.one.v1" if i % 2 else "b.two.v1") for i in range(1, 11)])
    assert [e.seq for e in pl.log.replay()] == list(range(1, 11))
    assert [e.id for e in pl.log.replay(after_seq=8)] == ["e9", "e10"]
    assert [e.seq for e in pl.log.replay(types=["a."])] == [1, 3, 5, 7, 9]
    assert [e.seq for e in pl.log.replay(types=["a.one", "b.two"], until_seq=3)] == [1, 2, 3]
    assert [e.id for e in pl.log.tail(3)] == ["e8", "e9", "e10"]
    assert [e.id for e in pl.log.tail(2, types=["b."])] == ["e8", "e10"]
    e = pl.log.get("e4")
    assert e is not None and e.seq == 4 and e.payload == {"i": 4} and len(e.hash) == 64
    assert pl.log.get("nope") is None
    assert pl.log.get("e4\x00") is None
    assert len(pl.log) == 10


def test_type_prefixes_are_literal_and_never_reach_the_database_unusable(pl: Plaudit) -> None:
    pl.log.append_batch([ev(1, kind="a_b.x.v1"), ev(2, kind="axb.x.v1"), ev(3, kind="c.d.v1")])
    assert [e.id for e in pl.log.tail(10, types=["a_b"])] == ["e1"]  # `_` is no wildcard
    assert [e.id for e in pl.log.replay(types=["a_b"])] == ["e1"]
    assert [e.id for e in pl.log.tail(10, types=["%"])] == []
    for odd in (["\x00"], ["a\x00b"], ["é"], ["c.d", "\x00"]):
        expected = ["e3"] if "c.d" in odd else []
        assert [e.id for e in pl.log.tail(10, types=odd)] == expected
        assert [e.id for e in pl.log.replay(types=odd)] == expected
    assert len(pl.log.tail(10, types=[""])) == 3
    assert len(list(pl.log.replay(types=["", "zzz"]))) == 3


def test_scan_streams_across_chunks(pl: Plaudit) -> None:
    from plaudit.store.projections import scan

    pl.log.append_batch([ev(i, kind="a.x.v1" if i % 3 else "b.y.v1") for i in range(30)])
    with pl.backend.read() as tx:
        assert [e.id for e in scan(tx, chunk=7)] == [f"e{i}" for i in range(30)]
        picked = [e.id for e in scan(tx, chunk=4, prefixes=["b."], after=3, until=25)]
    assert picked == [f"e{i}" for i in range(30) if i % 3 == 0 and 3 < i + 1 <= 25]


def test_head_changes_with_every_append(pl: Plaudit) -> None:
    h0 = pl.log.head()
    assert h0.length == 0
    pl.log.append(ev(1))
    h1 = pl.log.head()
    assert h1.length == 1 and h1.hash != h0.hash
    assert Head.parse(h1.digest) == h1
    assert pl.log.get("e1").hash == h1.hash
    pl.log.append(ev(1))  # idempotent: head does not move
    assert pl.log.head() == h1


def test_same_events_give_the_same_head_on_both_backends(tmp_path: Path, pg_url: str) -> None:
    events = [ev(i, note="ünïcødé ✓", nested={"b": [1, 2.5, None, True]}) for i in range(20)]
    heads = []
    for url in (str(tmp_path / "a.db"), pg_url):
        with Plaudit.open(url) as p:
            p.log.append_batch(events)
            heads.append(p.log.head())
            assert p.log.verify(full=True).ok
    assert heads[0] == heads[1]


def test_stats(pl: Plaudit) -> None:
    pl.log.append_batch([ev(i, session=f"s{i % 3}") for i in range(9)])
    s = pl.log.stats()
    assert (s.length, s.sessions, s.quarantined) == (9, 3, 0)
    assert s.by_type == {"test.thing.v1": 9}
    assert s.first_ts_ms == 1_700_000_000_000 and s.last_ts_ms == 1_700_000_000_008
    assert s.head == pl.log.head().digest


def test_writer_rolls_back_everything_on_error(pl: Plaudit) -> None:
    pl.log.append(ev(1))
    with pytest.raises(KeyError), pl.log.writer() as w:
        w.append(ev(2))
        w.append_batch([ev(3), ev(4)])
        raise KeyError("abort")
    assert [e.id for e in pl.log.replay()] == ["e1"]
    assert pl.log.verify(full=True).ok
    with pl.log.writer() as w:
        assert w.append(ev(2)).seq == 2
    assert pl.log.head().length == 2


def test_threads_share_a_handle(pl: Plaudit) -> None:
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for b in range(5):
                pl.log.append_batch([ev(t * 1000 + b * 10 + j, session=f"t{t}") for j in range(10)])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(pl.log) == 200 and pl.log.verify(full=True).ok


def test_durability_settings(tmp_path: Path) -> None:
    with Plaudit.open(tmp_path / "n.db", durability="normal") as p:
        p.log.append(ev(1))
        assert p.backend.connection().execute("PRAGMA synchronous").fetchone()[0] == 1
    with Plaudit.open(tmp_path / "f.db") as p:
        assert p.backend.connection().execute("PRAGMA synchronous").fetchone()[0] == 2
        assert p.backend.connection().execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with pytest.raises(ConfigError, match="durability"):
        Plaudit.open(tmp_path / "x.db", durability="sometimes")


def test_unflushed_run_commits_and_leaves_later_commits_flushed(tmp_path: Path) -> None:
    """`run(durable=False)` commits without a sync of its own; the connection's level is
    back to FULL afterwards (so the next durable commit syncs it too), also after a failure."""
    with Plaudit.open(tmp_path / "u.db") as p:
        conn = p.backend.connection()
        p.log.run(lambda w: w.append(ev(1)), durable=False)
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2
        with pytest.raises(RuntimeError):

            def fail(w: Any) -> None:
                w.append(ev(2))
                raise RuntimeError("undone")

            p.log.run(fail, durable=False)
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2
        assert [e.id for e in p.log.replay()] == ["e1"]
    with Plaudit.open(tmp_path / "n.db", durability="normal") as p:
        p.log.run(lambda w: w.append(ev(1)), durable=False)
        assert p.backend.connection().execute("PRAGMA synchronous").fetchone()[0] == 1


def test_sqlite_path_parents_created_and_empty_path_refused(tmp_path: Path) -> None:
    from plaudit.store.sqlite import SqliteBackend

    nested = tmp_path / "a" / "b" / "p.db"
    with Plaudit.open(nested) as p:
        p.log.append(ev(1))
        assert isinstance(p.backend, SqliteBackend)
        assert p.backend.path == nested and p.backend.url == str(nested)
    assert nested.exists()
    with pytest.raises(ConfigError, match="path is empty"):
        SqliteBackend("")


def test_reopen_sees_the_same_log(db_url: str) -> None:
    with Plaudit.open(db_url) as p:
        p.log.append_batch([ev(i) for i in range(5)])
        head = p.log.head()
    with Plaudit.open(db_url) as p:
        assert p.log.head() == head
        assert p.log.append(ev(5)).seq == 6
        assert repr(p).startswith("<Plaudit ")


def test_payload_limit_is_bytes_not_characters(pl: Plaudit) -> None:
    from plaudit.events import MAX_PAYLOAD_BYTES

    text = "é" * (MAX_PAYLOAD_BYTES // 2)  # fits in characters, not in UTF-8 bytes
    with pytest.raises(ValidationError, match="byte limit"):
        pl.log.append(make_event("a.b", {"t": text}))
    assert len(pl.log) == 0


def test_parallel_verify_falls_back_when_a_worker_cannot_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "w.db")
    with Plaudit.open(db) as p:
        p.log.append_batch([ev(i) for i in range(50)])
        for exe in ("/nonexistent/python", "/bin/false"):
            monkeypatch.setattr(sys, "executable", exe)
            assert p.log.verify(workers=2, full=True).ok
            with attacker(db) as raw:
                raw.execute("UPDATE plaudit_events SET source = 'x' WHERE seq = 40")
            report = p.log.verify(workers=2, full=True)
            assert (report.ok, report.first_bad) == (False, 40)
            with attacker(db) as raw:
                raw.execute("UPDATE plaudit_events SET source = 'plaudit' WHERE seq = 40")


def test_parallel_and_serial_verify_agree_on_a_longer_log(db_url: str) -> None:
    with Plaudit.open(db_url) as p:
        for b in range(4):
            p.log.append_batch([ev(b * 1000 + i) for i in range(500)])
        serial = p.log.verify(workers=1, full=True)
        assert serial.ok and serial.checked == 2000
        assert p.log.verify(workers=2, full=True) == serial
        assert p.log.verify(workers=5, full=True) == serial
        with attacker(db_url) as raw:
            raw.execute("DELETE FROM plaudit_events WHERE seq = 1500")
        assert p.log.verify(workers=2, full=True).first_bad == 1500
        assert p.log.verify(workers=1, full=True).first_bad == 1500
