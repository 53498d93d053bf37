"""What a user of the reference tools must not notice, and refusals an export owes its user:
twins are never merged, CR-only files read as the reference reads them, a missing store is an
error, a log that fails verification is refused, split percentages must leave train rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from plaudit import Plaudit
from plaudit.errors import IntegrityError, ValidationError
from plaudit.signals import synth
from plaudit.signals.export import export
from plaudit.signals.seqmem_file import safe_json

from .conftest import BIG_AGE, run_plaudit, write_rows
from .test_export import T0, dec, out

HOUR = 3_600_000


@pytest.fixture(params=["file", "log"])
def source(request: pytest.FixtureRequest) -> str:
    """Where the export reads: the seq_mem file, or the log (its `signals` projection)."""
    return request.param


def _ids(tmp_path: Path, rows: list[Any], source: str = "file") -> tuple[dict[str, Any], list[str]]:
    src = write_rows(tmp_path / "in.jsonl", rows)
    if source == "file":
        summary = export(seq_mem=src, output_dir=tmp_path / "out", max_age_hours=BIG_AGE)
    else:
        from plaudit.seqmem import import_file

        with Plaudit.open(tmp_path / "p.db") as p:
            import_file(p.log, src)
            summary = export(plaudit=p, output_dir=tmp_path / "out", max_age_hours=BIG_AGE)
    got = []
    for split in ("train", "val", "test"):
        got += [
            json.loads(x) for x in (tmp_path / "out" / f"{split}.jsonl").read_text().splitlines()
        ]
    return summary, sorted(r["id"] for r in got)


def test_three_decisions_made_a_day_apart_are_all_kept(tmp_path: Path, source: str) -> None:
    same = {"user_intent": "run the tests", "context": {"ci": "red"}}
    rows = []
    for i in range(3):
        rows += [dec(f"day{i}", ts=T0 + i * 24 * HOUR, **same), out(f"day{i}", ts=T0 + 1)]
    summary, ids = _ids(tmp_path, rows, source)
    assert ids == ["day0", "day1", "day2"]
    assert summary["counts"]["dropped_duplicate_rows"] == 0


def test_ten_twins_made_hours_apart_are_all_kept(tmp_path: Path, source: str) -> None:
    same = {"user_intent": "why is CI red", "context": {"files": 2}}
    rows = []
    for i in range(10):
        ts = T0 + (10 + i % 6) * HOUR + i  # 10 to 15 hours after the first
        rows += [dec(f"twin{i}", ts=ts, **same), out(f"twin{i}", time_to_resolution_ms=7)]
    summary, ids = _ids(tmp_path, rows, source)
    assert len(ids) == 10
    assert summary["counts"]["dropped_duplicate_rows"] == 0


def test_identical_rewrite_and_retry_are_dropped(tmp_path: Path, source: str) -> None:
    same = {"user_intent": "ship it"}
    rows = [
        dec("a", ts=T0, **same), out("a"),
        dec("a", ts=T0, **same), out("a"),  # a retry: same id, same content
        dec("b", ts=T0, **same), out("b"),  # a re-write under a new id, same millisecond
        dec("c", ts=T0 + 1, **same), out("c"),  # one millisecond later: a decision of its own
    ]  # fmt: skip
    summary, ids = _ids(tmp_path, rows, source)
    assert ids == ["a", "c"]
    c = summary["counts"]
    assert c["dropped_duplicate_rows"] == 1
    # The file holds the retry's two rows; the log keeps them as repeat records of the rows
    # it stored once (the same row id), so both count them alike.
    assert c["identical_repeats"] == 2


def test_cr_only_file_over_8_mib_reads_as_lines(tmp_path: Path) -> None:
    rows = list(synth.rows(9000, seed=4, sessions=40))
    lf = tmp_path / "lf.jsonl"
    cr = tmp_path / "cr.jsonl"
    lf.write_text("".join(safe_json(r) + "\n" for r in rows))
    cr.write_bytes(lf.read_bytes().replace(b"\n", b"\r"))
    assert cr.stat().st_size > 8 << 20 and b"\n" not in cr.read_bytes()
    a = export(seq_mem=lf, output_dir=tmp_path / "a", max_age_hours=BIG_AGE)
    b = export(seq_mem=cr, output_dir=tmp_path / "b", max_age_hours=BIG_AGE)
    assert b["counts"]["decisions"] == 9000
    assert a["counts"] == b["counts"] and a["distributions"] == b["distributions"]
    for split in ("train", "val", "test"):
        assert (tmp_path / "a" / f"{split}.jsonl").read_bytes() == (
            tmp_path / "b" / f"{split}.jsonl"
        ).read_bytes()


@pytest.mark.parametrize("command", ["export", "audit", "evaluate"])
@pytest.mark.parametrize("how", ["--db", "default store", "PLAUDIT_DB"])
def test_missing_store_exits_2_naming_it(tmp_path: Path, command: str, how: str) -> None:
    """Every signal subcommand that reads a store (emit alone writes, so it may create one)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    extra = {
        "export": ["--output-dir", str(tmp_path / "out")],
        "audit": [],
        "evaluate": ["--policy", str(tmp_path / "policy.json")],
    }[command]
    (tmp_path / "policy.json").write_text('{"default": {"a": 1.0}}')
    env = {"PLAUDIT_DB": ""}
    if how == "--db":
        missing = tmp_path / "typo-prod.db"
        extra += ["--db", str(missing)]
    elif how == "PLAUDIT_DB":
        missing = tmp_path / "env.db"
        env["PLAUDIT_DB"] = str(missing)
    else:
        missing = cwd / ".plaudit" / "plaudit.db"
    r = run_plaudit("signal", command, *extra, env=env, cwd=cwd)
    assert r.returncode == 2, r.stderr
    assert "no plaudit store" in r.stderr
    assert str(missing) in r.stderr or (how == "default store" and ".plaudit" in r.stderr)
    assert "Traceback" not in r.stderr
    assert not missing.exists() and not (tmp_path / "out").exists()
    assert not (cwd / ".plaudit").exists()


def test_reuse_from_on_the_command_line(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    with Plaudit.open(db) as p:
        for i in range(6):
            p.signals.decision(f"d{i}", "a", 0.5, "i", session_id=f"s{i}", ts_ms=T0 + i * HOUR)
            p.signals.outcome(f"d{i}", "success", "a", 5, ts_ms=T0 + i * HOUR + 1)
    age = ["--max-age-hours", str(BIG_AGE)]
    first = tmp_path / "first"
    r = run_plaudit("signal", "export", "--db", str(db), "--output-dir", str(first), *age)
    assert r.returncode == 0, r.stderr
    with Plaudit.open(db) as p:
        p.signals.decision("late", "b", 0.5, "i", session_id="x", ts_ms=T0 + 9 * HOUR)
    second = tmp_path / "second"
    r = run_plaudit(
        "signal", "export", "--db", str(db), "--output-dir", str(second), *age,
        "--reuse-from", str(first),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"reused 6 unchanged hours of rows from {first}" in r.stdout
    summary = json.loads((second / "summary.json").read_text())
    assert summary["counts"]["decisions"] == 7
    for bad, message in (
        (tmp_path / "nowhere", "is not a directory"),
        (db, "is not a directory"),
    ):
        r = run_plaudit(
            "signal", "export", "--db", str(db), "--output-dir", str(tmp_path / "c"),
            "--reuse-from", str(bad),
        )  # fmt: skip
        assert r.returncode == 2 and message in r.stderr and str(bad) in r.stderr, r.stderr
    r = run_plaudit(
        "signal", "export", "--seq-mem", str(tmp_path / "sm.jsonl"), "--reuse-from", str(first)
    )
    assert r.returncode == 2 and "--reuse-from" in r.stderr and "--seq-mem" in r.stderr
    assert not (tmp_path / "c").exists()


def test_split_percentages_must_leave_train_rows(seq_mem_file: Path, tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="leave no rows for train"):
        export(seq_mem=seq_mem_file, output_dir=tmp_path, val_percent=60, test_percent=60)
    assert not (tmp_path / "summary.json").exists()
    r = run_plaudit(
        "signal", "export", "--seq-mem", str(seq_mem_file), "--output-dir", str(tmp_path),
        "--val-percent", "50", "--test-percent", "50",
    )  # fmt: skip
    assert r.returncode == 2 and "leave no rows for train" in r.stderr


def test_export_prints_the_window_and_what_it_skipped(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    with Plaudit.open(db) as p:
        p.signals.decision("old", "a", 0.5, "i", ts_ms=1_000_000_000_000)
        p.signals.decision("new", "a", 0.5, "i")
    r = run_plaudit("signal", "export", "--db", str(db), "--output-dir", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    assert "skipped_old=1 (window: the last 168 h, since 20" in r.stdout


def _tamper(db: Path, seq: int) -> None:
    import sqlite3

    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DROP TRIGGER IF EXISTS plaudit_events_no_update")
    conn.execute(
        "UPDATE plaudit_events SET payload = replace(payload, '0.5', '0.9') WHERE seq = ?", (seq,)
    )
    conn.close()


def test_a_log_that_fails_verification_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    with Plaudit.open(db) as p:
        p.signals.decision("d1", "a", 0.5, "i")
        p.signals.outcome("d1", "success", "a", 3)
        first = p.signals.export(tmp_path / "ok")
        assert first["input"]["verified"]["ok"] is True
        p.signals.decision("d2", "a", 0.5, "i")
    _tamper(db, 3)  # appended after the last verified export
    with Plaudit.open(db) as p:
        with pytest.raises(IntegrityError, match="fails verification"):
            p.signals.export(tmp_path / "refused")
        assert not (tmp_path / "refused" / "summary.json").exists()
    r = run_plaudit("signal", "export", "--db", str(db), "--output-dir", str(tmp_path / "cli"))
    assert r.returncode == 5 and "--allow-unverified" in r.stderr
    r = run_plaudit(
        "signal", "export", "--db", str(db), "--output-dir", str(tmp_path / "cli"),
        "--allow-unverified",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "warning: exported a log that fails verification" in r.stdout
    summary = json.loads((tmp_path / "cli" / "summary.json").read_text())
    assert summary["input"]["verified"]["ok"] is False


def test_full_verification_finds_what_came_before_the_last_verified_head(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    with Plaudit.open(db) as p:
        p.signals.decision("d1", "a", 0.5, "i")
        p.signals.outcome("d1", "success", "a", 3)
        p.signals.export(tmp_path / "ok")
    _tamper(db, 1)
    r = run_plaudit(
        "signal", "export", "--db", str(db), "--output-dir", str(tmp_path / "o"), "--verify-full"
    )
    assert r.returncode == 5 and "position 1" in r.stderr
