"""Re-exporting into the same directory copies the hours that did not change, and nothing else.

The export's files must be byte for byte what a from-scratch join of the whole log gives,
whatever happened to the directory or the store in between: the copy is only ever taken
from the very files the previous export wrote.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from plaudit import Plaudit
from plaudit.signals import reuse
from plaudit.signals.export import export
from plaudit.signals.projection import HOUR_MS

T0 = 1_780_000_000_000
NOW = T0 + 1000 * HOUR_MS


def _emit(p: Plaudit, i: int, hour: int, session: str | None = None) -> None:
    ts = T0 + hour * HOUR_MS + i
    session = session or f"s{i % 4}"
    p.signals.decision(f"d{i}", "a" if i % 3 else "b", 0.5, "i", session_id=session, ts_ms=ts)
    p.signals.outcome(f"d{i}", "success" if i % 2 else "failure", "a", 5, ts_ms=ts + 1)


def _files(root: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(root.iterdir()) if f.suffix == ".jsonl"}


def _check(p: Plaudit, out: Path, scratch: Path) -> dict[str, Any]:
    a = export(plaudit=p, output_dir=out, now_ms=NOW, max_age_hours=100_000)
    b = export(
        plaudit=p, output_dir=scratch, now_ms=NOW, max_age_hours=100_000, use_projection=False
    )
    assert a["counts"] == b["counts"] and a["distributions"] == b["distributions"]
    assert _files(out) == _files(scratch)
    return a


@pytest.fixture
def copies(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many hours each export copied from the previous files."""
    seen: list[int] = []
    finish = reuse.HourWriter.finish

    def spy(self: reuse.HourWriter) -> None:
        finish(self)
        seen.append(self.copied_hours)

    monkeypatch.setattr(reuse.HourWriter, "finish", spy)
    return seen


def test_a_reexport_copies_the_unchanged_hours(pl: Plaudit, tmp_path: Path, copies) -> None:
    for i in range(30):
        _emit(pl, i, hour=i // 5)  # six hours
    _check(pl, tmp_path / "out", tmp_path / "full")
    assert copies == [0]
    _emit(pl, 100, hour=9)  # a new hour
    _emit(pl, 101, hour=2, session="new")  # an hour in the middle, a session of its own
    _check(pl, tmp_path / "out", tmp_path / "full")
    assert copies[-1] == 5  # of the six, all but hour 2
    # A late decision shifts the history of its session's next three decisions (s1's d17,
    # d21 and d25, in hours 3, 4 and 5): those hours are rebuilt, the other four copied.
    pl.signals.decision("late", "z", 0.5, "i", session_id="s1", ts_ms=T0 + 3 * HOUR_MS)
    _check(pl, tmp_path / "out", tmp_path / "full")
    assert copies[-1] == 4
    # Into another directory nothing can be copied.
    _check(pl, tmp_path / "elsewhere", tmp_path / "full")
    assert copies[-1] == 0


@pytest.mark.parametrize("change", ["append", "rewrite", "remove", "window", "rebuild"])
def test_what_the_previous_files_are_not_is_never_copied(
    tmp_path: Path, copies, change: str
) -> None:
    out = tmp_path / "out"
    with Plaudit.open(tmp_path / "p.db") as p:
        for i in range(20):
            _emit(p, i, hour=i // 4)
        _check(p, out, tmp_path / "full")
        train = out / "train.jsonl"
        if change == "append":  # the file changed under the index
            with open(train, "ab") as f:
                f.write(b'{"edited": true}\n')
        elif change == "rewrite":  # same size, other bytes, other time
            data = train.read_bytes()
            train.write_bytes(data.replace(b'"a"', b'"A"'))
            os.utime(train, ns=(1, 1))
        elif change == "remove":
            train.unlink()
        elif change == "window":  # another kind of export replaced the files
            export(plaudit=p, output_dir=out, now_ms=NOW, max_age_hours=1)
        else:  # the projection is rebuilt: its change counts start again
            p.rebuild()
        _emit(p, 50, hour=7)
        _check(p, out, tmp_path / "full")
    assert copies[-1] == 0


def test_the_index_is_kept_in_the_store(tmp_path: Path, copies) -> None:
    with Plaudit.open(tmp_path / "p.db") as p:
        for i in range(8):
            _emit(p, i, hour=i)
        _check(p, tmp_path / "out", tmp_path / "full")
    with Plaudit.open(tmp_path / "p.db") as p:  # another handle, as another process would be
        _emit(p, 9, hour=9)
        _check(p, tmp_path / "out", tmp_path / "full")
    assert copies == [0, 8]


def test_an_hour_left_empty_before_a_copied_one(tmp_path: Path, copies) -> None:
    """A decision re-sent at another time leaves its hour with no rows; the copied hour after
    it must still land where it belongs (found by the property test in test_projection)."""
    from plaudit.events import make_event
    from plaudit.signals.contract import DECISION, OUTCOME

    def decision(n: int, did: str, hour: int) -> Any:
        payload = {"decision_id": did, "session_id": did, "chosen_task": "a", "confidence": 0.5}
        return make_event(DECISION, payload, id=f"e{n}", ts_ms=T0 + hour * HOUR_MS)

    outcome = {"decision_id": "d2", "outcome": "success", "task_executed": "a"}
    with Plaudit.open(tmp_path / "p.db") as p:
        p.log.append_batch(
            [
                decision(1, "d0", 1),
                make_event(OUTCOME, outcome, id="e2", ts_ms=T0 + 2 * HOUR_MS),
                decision(3, "d2", 2),
            ]
        )
        _check(p, tmp_path / "out", tmp_path / "full")
        p.log.append(decision(4, "d0", 0))  # d0 leaves hour 1 for hour 0
        _check(p, tmp_path / "out", tmp_path / "full")
        p.log.append(decision(5, "d0", 3))
        _check(p, tmp_path / "out", tmp_path / "full")
    assert copies == [0, 1, 2]  # hour 1, now empty, and hour 2


def test_a_store_of_the_first_version_is_upgraded(tmp_path: Path) -> None:
    """A store whose `signals` projection is version 1 and has the export's old mark
    (`signals_checkpoint`): the next export rebuilds the projection, drops the mark and
    verifies with the log's own checkpoints."""
    import sqlite3

    db = tmp_path / "p.db"
    with Plaudit.open(db) as p:
        for i in range(6):
            _emit(p, i, hour=i)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute(
        "CREATE TABLE signals_checkpoint (one INTEGER PRIMARY KEY, seq INTEGER, hash BLOB)"
    )
    conn.execute("INSERT INTO signals_checkpoint VALUES (1, 3, x'00')")
    conn.execute("UPDATE plaudit_projections SET version = 1 WHERE name = 'signals'")
    conn.close()
    with Plaudit.open(db) as p:
        summary = _check(p, tmp_path / "out", tmp_path / "full")
        assert summary["input"]["verified"]["ok"] is True
        assert summary["counts"]["joined_rows"] == 6
        with p.log.reading() as view:
            assert not view.tx.table_exists("signals_checkpoint")
            assert view.projection_positions()["signals"] == len(p.log)


def test_files_replaced_before_the_index_is_saved_are_not_taken_for_ours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, copies
) -> None:
    """Export A puts its files in place; before A records its index, export B (after one
    more event) replaces them. The next export must not copy A's ranges out of B's files."""
    out = tmp_path / "out"
    with Plaudit.open(tmp_path / "p.db") as p:
        for i in range(12):
            _emit(p, i, hour=i // 3, session=f"s{i}")
        _check(p, out, tmp_path / "full")
        save = reuse.HourWriter.save
        raced = []

        def late_save(self: reuse.HourWriter, plaudit: Plaudit) -> None:
            if not raced:
                raced.append(True)
                _emit(plaudit, 99, hour=1, session="late")
                export(plaudit=plaudit, output_dir=out, now_ms=NOW, max_age_hours=100_000)
            save(self, plaudit)

        monkeypatch.setattr(reuse.HourWriter, "save", late_save)
        _emit(p, 50, hour=0, session="x")
        export(plaudit=p, output_dir=out, now_ms=NOW, max_age_hours=100_000)  # A, then B
        monkeypatch.setattr(reuse.HourWriter, "save", save)
        _check(p, out, tmp_path / "full")
    assert raced and copies[-1] == 0


def _snapshot(root: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file of a directory with its bytes, inode and modification time."""
    out = {}
    for f in sorted(root.iterdir()):
        st = f.stat()
        out[f.name] = (f.read_bytes(), st.st_ino, st.st_mtime_ns)
    return out


def test_reuse_from_copies_into_a_new_directory_and_leaves_the_old_one_alone(
    pl: Plaudit, tmp_path: Path, copies
) -> None:
    for i in range(30):
        _emit(pl, i, hour=i // 5)  # six hours
    first = tmp_path / "first"
    _check(pl, first, tmp_path / "full")
    before = _snapshot(first)
    _emit(pl, 100, hour=9)
    _emit(pl, 101, hour=2, session="new")
    second = tmp_path / "second"
    summary = export(
        plaudit=pl, output_dir=second, now_ms=NOW, max_age_hours=100_000, reuse_from=first
    )
    assert copies[-1] == 5  # all but hour 2, as a re-export into `first` would
    assert summary["input"]["reuse"] == {"from": str(first), "copied_hours": 5, "built_hours": 2}
    scratch = tmp_path / "scratch"
    export(plaudit=pl, output_dir=scratch, now_ms=NOW, max_age_hours=100_000, use_projection=False)
    assert _files(second) == _files(scratch)
    assert _snapshot(first) == before  # read, never written
    # The new directory is an export of its own: the next one can copy from it, or into it
    # (here through the public API).
    _emit(pl, 102, hour=10)
    third = tmp_path / "third"
    pl.signals.export(third, now_ms=NOW, max_age_hours=100_000, reuse_from=second)
    assert copies[-1] == 7  # everything but the new hour 10
    assert _files(third) == _files(_check(pl, second, tmp_path / "full") and second)
    assert copies[-1] == 7


def test_reuse_from_files_that_are_not_that_exports_copies_nothing(
    pl: Plaudit, tmp_path: Path, copies
) -> None:
    for i in range(12):
        _emit(pl, i, hour=i // 3)
    first = tmp_path / "first"
    _check(pl, first, tmp_path / "full")
    with open(first / "val.jsonl", "ab") as f:
        f.write(b'{"edited": true}\n')
    summary = export(
        plaudit=pl, output_dir=tmp_path / "b", now_ms=NOW, max_age_hours=100_000, reuse_from=first
    )
    assert copies[-1] == 0 and summary["input"]["reuse"]["copied_hours"] == 0
    # A directory no export of this store wrote is as good as none.
    other = tmp_path / "other"
    other.mkdir()
    export(
        plaudit=pl, output_dir=tmp_path / "c", now_ms=NOW, max_age_hours=100_000, reuse_from=other
    )
    assert copies[-1] == 0
    full = export(
        plaudit=pl,
        output_dir=tmp_path / "d",
        now_ms=NOW,
        max_age_hours=100_000,
        use_projection=False,
    )
    assert _files(tmp_path / "b") == _files(tmp_path / "c") == _files(tmp_path / "d")
    assert full["counts"]["joined_rows"] == 12


def test_reuse_from_with_other_options_builds_every_row(pl: Plaudit, tmp_path: Path) -> None:
    for i in range(6):
        _emit(pl, i, hour=i)
    first = tmp_path / "first"
    _check(pl, first, tmp_path / "full")
    summary = export(
        plaudit=pl,
        output_dir=tmp_path / "b",
        now_ms=NOW,
        max_age_hours=100_000,
        history_size=1,
        reuse_from=first,
    )
    assert summary["input"]["reuse"] == {"from": str(first), "copied_hours": 0, "built_hours": None}
    assert summary["counts"]["joined_rows"] == 6
    # A window that leaves events out writes its rows without the hourly index, too.
    summary = export(
        plaudit=pl, output_dir=tmp_path / "c", now_ms=NOW, max_age_hours=997, reuse_from=first
    )
    assert summary["input"]["reuse"] == {"from": str(first), "copied_hours": 0, "built_hours": None}
    assert summary["counts"]["joined_rows"] == 3


def test_reuse_from_bad_input_is_named(pl: Plaudit, tmp_path: Path) -> None:
    from plaudit.errors import ValidationError

    _emit(pl, 1, hour=1)
    seq_mem = tmp_path / "sm.jsonl"
    seq_mem.write_text("")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"plaudit": pl, "reuse_from": tmp_path / "missing"}, "is not a directory"),
        ({"plaudit": pl, "reuse_from": seq_mem}, "is not a directory"),
        ({"seq_mem": seq_mem, "reuse_from": tmp_path}, "not --seq-mem"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValidationError, match=message) as info:
            export(output_dir=tmp_path / "out", now_ms=NOW, **kwargs)
        assert info.value.field == "reuse_from"
    assert not (tmp_path / "out").exists()
