"""Clear outputs: an import with no valid line fails; `log tail` shows a damaged event as
corrupted, in its place, and never crashes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _logtools import attacker, ev
from plaudit import Plaudit
from plaudit.cli import main
from plaudit.logview import CorruptEvent, read, tail

GOOD = json.dumps(
    {"ts_ms": 1, "name": "a.b.v1", "event_id": "e-1", "session_id": "s", "subject": "{}"}
)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("garbage\n", "no valid line: the only line went to quarantine"),
        ('garbage\n{"x": 1}\n\n', "no valid line: all 2 lines went to quarantine"),
        ("", "no events: the file is empty or blank"),
        ("\n  \n", "no events: the file is empty or blank"),
    ],
)
def test_an_import_with_no_valid_line_fails(
    sqlite_url: str, tmp_path: Path, capsys, content: str, problem: str
) -> None:
    f = tmp_path / "in.jsonl"
    f.write_text(content)
    code = main(["--db", sqlite_url, "log", "import", str(f)])
    out, err = capsys.readouterr()
    assert code == 1
    assert f"error: {f}: {problem}; nothing was imported" in err
    assert "0 imported" in out
    code = main(["--db", sqlite_url, "log", "import", "--json", str(f)])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["ok"] is False and report["problem"] == problem


def test_an_import_with_one_valid_line_succeeds_and_a_reimport_too(
    sqlite_url: str, tmp_path: Path, capsys
) -> None:
    f = tmp_path / "in.jsonl"
    f.write_text(f"garbage\n{GOOD}\n")
    assert main(["--db", sqlite_url, "log", "import", "--json", str(f)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["imported"], report["quarantined"], report["ok"]) == (1, 1, True)
    assert main(["--db", sqlite_url, "log", "import", str(f)]) == 0  # all duplicates: fine
    assert "0 imported, 1 duplicate" in capsys.readouterr().out


def corrupt(db_url: str, seq: int) -> None:
    with attacker(db_url) as raw:
        raw.execute("UPDATE plaudit_events SET payload = ? WHERE seq = ?", ("{not json", seq))


def test_tail_shows_a_corrupted_event_in_its_place(db_url: str, capsys) -> None:
    with Plaudit.open(db_url) as p:
        p.log.append_batch([ev(i) for i in range(1, 6)])
    corrupt(db_url, 3)
    code = main(["--db", db_url, "log", "tail", "-n", "4"])
    out, err = capsys.readouterr()
    assert code == 5 and "Traceback" not in err and "internal error" not in err
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == ["2", "3", "4", "5"]
    assert lines[1].split()[1] == "CORRUPTED" and "does not decode" in lines[1]
    assert "test.thing.v1" in lines[0] and "test.thing.v1" in lines[2]
    assert "1 event shown as CORRUPTED" in err and "plaudit log verify" in err
    code = main(["--db", db_url, "log", "tail", "--json"])
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert code == 5 and [r["seq"] for r in rows] == [1, 2, 3, 4, 5]
    assert rows[2]["corrupted"] is True and set(rows[2]) == {"seq", "reason", "corrupted"}
    assert rows[1]["payload"] == {"i": 2}


def test_tail_without_damage_exits_0(sqlite_url: str, capsys) -> None:
    with Plaudit.open(sqlite_url) as p:
        p.log.append_batch([ev(i) for i in range(1, 4)])
    assert main(["--db", sqlite_url, "log", "tail"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    kinds=st.lists(st.sampled_from(["a.x.v1", "b.y.v1"]), min_size=1, max_size=40),
    damaged=st.sets(st.integers(1, 40), max_size=6),
    n=st.integers(1, 50),
    only=st.sampled_from([None, "a.", "b."]),
)
def test_tolerant_reading_matches_a_plain_read_of_the_undamaged_rows(
    tmp_path_factory, kinds, damaged, n, only
) -> None:
    """Every position shows up once, in order; damaged ones as CorruptEvent, the rest equal
    to what the log returned before the damage."""
    db = str(tmp_path_factory.mktemp("tv") / "p.db")
    with Plaudit.open(db) as p:
        p.log.append_batch([ev(i, kind=k) for i, k in enumerate(kinds, 1)])
        types = None if only is None else [only]
        before = {e.seq: e for e in p.log.replay(types=types)}
    damaged = {s for s in damaged if s <= len(kinds)}
    for s in damaged:
        corrupt(db, s)
    with Plaudit.open(db, create=False) as p:
        types = None if only is None else [only]
        shown = list(read(p.log, types=types))
        last = tail(p.log, n, types=types)
    assert [x.seq for x in shown] == sorted(before)
    for x in shown:
        assert isinstance(x, CorruptEvent) == (x.seq in damaged)
        if not isinstance(x, CorruptEvent):
            assert x == before[x.seq]
    assert last == shown[-n:]
