"""Export semantics: joining, history, overrides, rewards, duplicates, splits, formats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plaudit.errors import ValidationError
from plaudit.seqmem import import_file
from plaudit.signals import synth
from plaudit.signals.contract import build_decision, build_outcome, build_override
from plaudit.signals.export import export
from plaudit.signals.seqmem_file import seq_mem_row
from plaudit.signals.split import bucket

from .conftest import BIG_AGE, reference_line_count, write_rows

T0 = 1_780_000_000_000


def dec(did: str, session: str = "s", ts: int = T0, **kw: Any) -> dict[str, Any]:
    fields = {"chosen_task": "a", "confidence": 0.5, "user_intent": "i", **kw}
    return seq_mem_row(build_decision(decision_id=did, session_id=session, **fields), ts)


def out(did: str, outcome: str = "success", ts: int = T0 + 1, **kw: Any) -> dict[str, Any]:
    fields = {"task_executed": "a", "time_to_resolution_ms": 10, "session_id": "s", **kw}
    return seq_mem_row(build_outcome(decision_id=did, outcome=outcome, **fields), ts)


def ovr(did: str, task: str, ts: int = T0 + 2) -> dict[str, Any]:
    e = build_override(decision_id=did, original_task="a", override_task=task, session_id="s")
    return seq_mem_row(e, ts)


def run(tmp_path: Path, rows: list[Any], **kw: Any) -> tuple[dict[str, Any], list[dict]]:
    src = write_rows(tmp_path / "in.jsonl", rows)
    summary = export(seq_mem=src, output_dir=tmp_path / "out", max_age_hours=BIG_AGE, **kw)
    got = []
    for split in ("train", "val", "test"):
        path = tmp_path / "out" / f"{split}.jsonl"
        got += [json.loads(x) | {"_split": split} for x in path.read_text().splitlines()]
    return summary, sorted(got, key=lambda r: r["ts_ms"])


def test_history_holds_previous_k_decisions_of_the_session(tmp_path) -> None:
    rows = []
    for i in range(6):
        rows += [
            dec(f"d{i}", ts=T0 + i * 100, chosen_task=f"t{i}"),
            out(f"d{i}", task_executed="x"),
        ]
    rows += [dec("other", session="s2", ts=T0 + 250), out("other")]
    _, got = run(tmp_path, rows, history_size=2)
    by_id = {r["id"]: r for r in got}
    assert by_id["d0"]["event_history"] == []
    assert by_id["d4"]["event_history"] == [
        {"t_minus": 2, "decision_id": "d2", "chosen_task": "t2", "ts_ms": T0 + 200},
        {"t_minus": 1, "decision_id": "d3", "chosen_task": "t3", "ts_ms": T0 + 300},
    ]
    assert by_id["other"]["event_history"] == []
    _, none = run(tmp_path, rows, history_size=0)
    assert all(r["event_history"] == [] for r in none)


def test_override_task_from_outcome_else_last_override(tmp_path) -> None:
    rows = [
        dec("a"), ovr("a", "x1"), ovr("a", "x2"), out("a"),
        dec("b", ts=T0 + 10), ovr("b", "y"), out("b", manual_override_task="from-outcome"),
        dec("c", ts=T0 + 20), out("c"),
    ]  # fmt: skip
    summary, got = run(tmp_path, rows)
    assert {r["id"]: r["manual_override_task"] for r in got} == {
        "a": "x2",
        "b": "from-outcome",
        "c": "",
    }
    assert summary["counts"]["overrides"] == 2
    assert summary["counts"]["override_events"] == 3


def test_reward_map_default_and_configurable(tmp_path) -> None:
    rows = []
    for i, o in enumerate(("success", "partial", "failure", "wasted")):
        rows += [dec(o, ts=T0 + i), out(o, outcome=o, time_to_resolution_ms=i)]
    _, got = run(tmp_path, rows)
    assert {r["outcome"]: r["reward"] for r in got} == {
        "success": 1.0,
        "partial": 0.55,
        "failure": 0.0,
        "wasted": -0.2,
    }
    summary, got = run(tmp_path, rows, rewards={"wasted": -1, "partial": 0.5})
    assert {r["outcome"]: r["reward"] for r in got}["wasted"] == -1.0
    assert summary["input"]["rewards"]["partial"] == 0.5
    with pytest.raises(ValidationError, match=r"rewards\.great"):
        run(tmp_path, rows, rewards={"great": 2})
    with pytest.raises(ValidationError, match=r"rewards\.wasted"):
        run(tmp_path, rows, rewards={"wasted": "low"})


def test_duplicates_by_content_dropped_and_counted(tmp_path) -> None:
    same = {"user_intent": "run tests", "context": {"files": 3}}
    rows = [
        dec("orig", ts=T0, **same), out("orig", time_to_resolution_ms=500),
        # the same decision re-written under a fresh id (same content, same millisecond)
        dec("retry", ts=T0, **same), out("retry", time_to_resolution_ms=500),
        # an identical re-emit of the very same rows
        dec("orig", ts=T0, **same), out("orig", time_to_resolution_ms=500),
        # same intent, different result: a different example, kept
        dec("new", ts=T0 + 9, **same), out("new", outcome="failure", time_to_resolution_ms=500),
    ]  # fmt: skip
    summary, got = run(tmp_path, rows)
    c = summary["counts"]
    assert [r["id"] for r in got] == ["orig", "new"]
    assert c["dropped_duplicate_rows"] == 1
    assert c["identical_repeats"] == 2
    assert c["duplicate_decision_ids"] == 1 and c["duplicate_outcome_ids"] == 1
    assert c["conflicting_decision_ids"] == 0
    assert got[0]["dedupe_id"] != got[1]["dedupe_id"]
    assert summary["quality"]["duplicate_rate"] > 0


def test_conflicting_repeat_is_reported_last_one_wins(tmp_path) -> None:
    rows = [dec("d", chosen_task="first"), dec("d", chosen_task="second"), out("d")]
    summary, got = run(tmp_path, rows)
    assert got[0]["chosen_task"] == "second"
    assert summary["counts"]["conflicting_decision_ids"] == 1
    assert summary["conflicts"] == ["decision d"]


BAD_LINES = [
    "{not json",
    "[1, 2, 3]",
    '"a string"',
    '{"name": "flow.router.decision.v1", "ts_ms": [1], "subject": "{}"}',
    '{"name": "flow.router.decision.v1", "ts_ms": "soon", "subject": "{}"}',
    '{"name": "flow.router.decision.v1", "ts_ms": 1e400, "subject": "{}"}',
    '{"ts_ms": 5, "subject": ',
]


def test_bad_lines_are_counted_never_fatal(tmp_path) -> None:
    good = [dec("a"), out("a"), dec("b", ts=T0 + 5), out("b")]
    clean, _ = run(tmp_path, good)
    path = tmp_path / "in.jsonl"
    with open(path, "wb") as f:
        for i, row in enumerate(good):
            f.write(json.dumps(row).encode() + b"\n")
            f.write(BAD_LINES[i].encode() + b"\n")
        f.write(b"\xff\xfe invalid utf-8 \x00\n")
        f.write(BAD_LINES[4].encode() + b"\n" + BAD_LINES[5].encode() + b"\n")
        f.write(json.dumps(dec("c", ts=T0 + 9)).encode()[:-7])  # truncated, no newline
    summary = export(seq_mem=path, output_dir=tmp_path / "o2", max_age_hours=BIG_AGE)
    assert summary["counts"]["parse_errors"] == 8
    assert len(summary["parse_error_samples"]) == 8
    assert summary["parse_error_samples"][0].startswith(f"{path}:2: ")
    for key in ("decisions", "outcomes", "joined_rows", "train_rows", "val_rows", "test_rows"):
        assert summary["counts"][key] == clean["counts"][key]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.binary(max_size=60), max_size=8), st.randoms(use_true_random=False))
def test_garbage_never_crashes_and_never_changes_good_rows(tmp_path, garbage, rnd) -> None:
    good = [dec("a"), out("a"), dec("b", ts=T0 + 5), ovr("b", "z"), out("b")]
    lines = [json.dumps(r).encode() for r in good]
    for g in garbage:
        lines.insert(rnd.randrange(len(lines) + 1), g.replace(b"\n", b" "))
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    summary = export(seq_mem=path, output_dir=None, max_age_hours=BIG_AGE)
    c = summary["counts"]
    limit = sum(reference_line_count(g.replace(b"\n", b" ")) for g in garbage)
    assert c["parse_errors"] <= limit
    assert c["joined_rows"] >= 2  # garbage cannot remove the good rows' join


def test_out_of_range_numbers_never_crash_any_format(tmp_path) -> None:
    big = 10**30
    subject = {"decision_id": "h", "chosen_task": "t", "confidence": 1e308, "propensity": big}
    rows = [
        {"name": "flow.router.decision.v1", "ts_ms": T0, "session_id": "s",
         "subject": json.dumps({**subject, "context": {"n": big}})},
        {"name": "flow.router.outcome.v1", "ts_ms": T0, "session_id": "s",
         "subject": json.dumps({"decision_id": "h", "outcome": "success",
                                "time_to_resolution_ms": big})},
        {"name": "flow.router.decision.v1", "ts_ms": big,
         "subject": json.dumps({**subject, "decision_id": "far-future"})},
    ]  # fmt: skip
    src = write_rows(tmp_path / "in.jsonl", rows)
    summary = export(
        seq_mem=src,
        output_dir=tmp_path / "out",
        max_age_hours=BIG_AGE,
        now_ms=T0,
        formats=["jsonl", "parquet", "chat", "preference"],
        test_percent=0,
        val_percent=0,
    )
    assert summary["counts"]["joined_rows"] == 1
    row = json.loads((tmp_path / "out" / "train.jsonl").read_text())
    assert row["time_to_resolution_ms"] == big and row["context"] == {"n": big}
    table = pq.read_table(tmp_path / "out" / "train.parquet").to_pylist()
    assert table[0]["time_to_resolution_ms"] is None  # does not fit int64
    assert table[0]["propensity"] == float(big)


def test_old_events_are_ignored_by_max_age(tmp_path) -> None:
    now = T0 + 10 * 3600 * 1000
    rows = [dec("old", ts=T0), out("old", ts=T0), dec("new", ts=now - 1000), out("new", ts=now)]
    src = write_rows(tmp_path / "in.jsonl", rows)
    summary = export(seq_mem=src, output_dir=None, max_age_hours=5, now_ms=now)
    assert summary["counts"]["decisions"] == 1
    assert summary["counts"]["skipped_old"] == 2


def test_default_split_is_the_reference_bucket(tmp_path) -> None:
    rows = []
    for i in range(60):
        rows += [dec(f"d{i}", ts=T0 + i), out(f"d{i}", time_to_resolution_ms=i)]
    _, got = run(tmp_path, rows, seed=9, val_percent=20, test_percent=30)
    for r in got:
        b = bucket(r["id"], 9)
        expected = "test" if b < 30 else "val" if b < 50 else "train"
        assert r["_split"] == expected


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.integers(0, 1000), st.integers(0, 50), st.integers(0, 50))
def test_split_by_session_keeps_sessions_and_history_together(tmp_path, seed, val, test) -> None:
    src = tmp_path / "synth.jsonl"
    if not src.exists():
        with open(src, "w") as f:
            synth.write(f, 150, seed=5, sessions=12)
    summary = export(
        seq_mem=src,
        output_dir=tmp_path / "out",
        max_age_hours=BIG_AGE,
        split_by="session",
        seed=seed,
        val_percent=val,
        test_percent=test,
    )
    split_of: dict[str, str] = {}
    session_split: dict[str, str] = {}
    rows = []
    for split in ("train", "val", "test"):
        for line in (tmp_path / "out" / f"{split}.jsonl").read_text().splitlines():
            r = json.loads(line)
            split_of[r["id"]] = split
            assert session_split.setdefault(r["session_id"], split) == split
            rows.append(r)
    for r in rows:
        for h in r["event_history"]:
            assert split_of.get(h["decision_id"], split_of[r["id"]]) == split_of[r["id"]]
    assert summary["quality"]["split_leakage_sessions"] == 0
    assert sum(summary["counts"][f"{s}_rows"] for s in ("train", "val", "test")) == len(rows)


def test_reference_split_leaks_sessions_and_summary_says_so(seq_mem_file, tmp_path) -> None:
    summary = export(seq_mem=seq_mem_file, output_dir=None, max_age_hours=BIG_AGE)
    assert summary["quality"]["split_leakage_sessions"] > 0


def _lines(path: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in Path(path).read_text().splitlines()]


def test_formats_parquet_preference_chat_rl(seq_mem_file, tmp_path) -> None:
    summary = export(
        seq_mem=seq_mem_file,
        output_dir=tmp_path,
        max_age_hours=BIG_AGE,
        formats=["parquet", "preference", "preference-all", "chat", "rl", "jsonl"],
    )
    c = summary["counts"]
    files = summary["outputs"]["files"]
    assert summary["outputs"]["train"] == str(tmp_path / "train.parquet")
    jsonl = _lines(files["jsonl"]["train"])
    table = pq.read_table(files["parquet"]["train"])
    assert table.num_rows == c["train_rows"] == len(jsonl)
    first = table.slice(0, 1).to_pylist()[0]
    assert first["id"] == jsonl[0]["id"]
    assert json.loads(first["context"]) == jsonl[0]["context"]
    assert first["event_history"] == jsonl[0]["event_history"]
    splits = ("train", "val", "test")
    rows = {r["id"]: r for s in splits for r in _lines(files["jsonl"][s])}
    prefs = [p for s in splits for p in _lines(files["preference"][s])]
    every = [p for s in splits for p in _lines(files["preference-all"][s])]
    overridden = [
        r for r in rows.values()
        if r["manual_override_task"] and r["manual_override_task"] != r["chosen_task"]
    ]  # fmt: skip
    assert len(every) == len(overridden) > len(prefs) > 0
    for p in every:
        row = rows[p["id"]]
        assert p["chosen"] == row["manual_override_task"] and p["rejected"] == row["chosen_task"]
        assert p["prompt"].startswith("Intent: ")
        assert p["outcome"] == row["outcome"] and p["reward"] == row["reward"]
        ran_preferred = row["task_executed"] == p["chosen"]
        assert p["chosen_outcome"] == (row["outcome"] if ran_preferred else None)
        assert p["rejected_outcome"] == (
            row["outcome"] if row["task_executed"] == p["rejected"] else None
        )
    # By default a pair teaches a preference only for a task that ran and (partly) succeeded.
    assert {p["id"] for p in prefs} == {
        p["id"] for p in every if p["chosen_outcome"] in ("success", "partial")
    }
    chat = [m for s in splits for m in _lines(files["chat"][s])]
    successes = [r for r in rows.values() if r["outcome"] == "success"]
    assert len(chat) == len(successes) < len(rows)
    for m in chat:
        assert [x["role"] for x in m["prompt"]] == ["system", "user"]
        row = rows[m["info"]["id"]]
        assert row["outcome"] == "success" and m["answer"] == row["task_executed"]
    rl = [m for s in splits for m in _lines(files["rl"][s])]
    assert len(rl) == len(rows)
    assert {m["info"]["id"]: m["reward"] for m in rl} == {i: r["reward"] for i, r in rows.items()}
    assert {m["outcome"] for m in rl} >= {"success", "failure", "wasted"}


def test_export_from_log_equals_export_from_file(pl, seq_mem_file, tmp_path) -> None:
    """The same events give the same dataset whether read from seq_mem or from the log."""
    report = import_file(pl.log, seq_mem_file)
    assert report.quarantined == 0
    from_log = pl.signals.export(tmp_path / "log", max_age_hours=BIG_AGE)
    from_file = export(seq_mem=seq_mem_file, output_dir=tmp_path / "file", max_age_hours=BIG_AGE)
    skip = ("lines",)
    assert {k: v for k, v in from_log["counts"].items() if k not in skip} == {
        k: v for k, v in from_file["counts"].items() if k not in skip
    }
    assert from_log["distributions"] == from_file["distributions"]
    assert from_log["input"]["source"] == "log"
    ids = lambda d: [json.loads(x)["id"] for x in (d / "val.jsonl").read_text().splitlines()]  # noqa: E731
    assert ids(tmp_path / "log") == ids(tmp_path / "file")


def test_bad_options_are_named(tmp_path, seq_mem_file) -> None:
    cases = [
        ({"split_by": "user"}, "split_by"),
        ({"formats": ["csv"]}, "format"),
        ({"formats": []}, "format"),
        ({"history_size": "3"}, "history_size"),
        ({"val_percent": 1.5}, "val_percent"),
    ]
    for kwargs, field in cases:
        with pytest.raises(ValidationError) as info:
            export(seq_mem=seq_mem_file, output_dir=tmp_path / "x", **kwargs)
        assert info.value.field == field
    with pytest.raises(ValidationError, match="seq_mem: cannot read"):
        export(seq_mem=tmp_path / "missing.jsonl", output_dir=tmp_path / "x")
    assert not (tmp_path / "x").exists()
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    with pytest.raises(ValidationError, match="output_dir"):
        export(seq_mem=seq_mem_file, output_dir=blocker / "sub")


def test_a_huge_history_size_costs_no_more_than_the_longest_session(tmp_path) -> None:
    """The history window is bounded by the data, not by the option: 10**18 must not try to
    allocate 10**18 of anything (it once did, and the process was killed for memory)."""
    rows = []
    for i in range(4):
        rows += [
            dec(f"h{i}", ts=T0 + i * 100, user_intent=f"i{i}"),
            out(f"h{i}", ts=T0 + i * 100 + 1),
        ]
    (tmp_path / "huge").mkdir()
    (tmp_path / "exact").mkdir()
    _, huge = run(tmp_path / "huge", rows, history_size=10**18)
    _, exact = run(tmp_path / "exact", rows, history_size=3)
    assert [r["event_history"] for r in huge] == [r["event_history"] for r in exact]
    assert [len(r["event_history"]) for r in huge] == [0, 1, 2, 3]
